"""`Idempotency-Key` on POST (CONVENTIONS "Idempotency").

The first completed response (status, body) is stored for 24 h under the caller's partition and replayed for the same
key and the same body; the same key with another body is 409 `idempotency_key_reused`; a request still in flight
with that key is 409 `conflict`. Validation failures (400), throttling (429) and server errors are not stored: the
record is removed so that the client can retry. Runs after request validation, so invalid bodies never get here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from aws_lambda_powertools.event_handler import Response

from switchboard import clock
from switchboard.api.context import current_auth_optional, header, request_id
from switchboard.api.envelope import error_body
from switchboard.errors import Conflict, DomainError, ValidationFailed
from switchboard.store import get_store, keys

HEADER = "Idempotency-Key"
RETENTION = timedelta(hours=24)
IN_FLIGHT_LEASE = timedelta(seconds=60)
_NOT_STORED = {400, 401, 403, 429}


def _body_digest(raw: str | None) -> str:
    if not raw:
        return hashlib.sha256(b"").hexdigest()
    try:
        canonical = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canonical = raw
    return hashlib.sha256(canonical.encode()).hexdigest()


def _stored_response(item: dict[str, Any]) -> Response:
    headers = dict(item.get("response_headers") or {})
    headers["Idempotent-Replayed"] = "true"
    body = item.get("response_body")
    return Response(
        status_code=int(item["response_status"]),
        content_type="application/json" if body is not None else None,
        body=json.loads(body) if body is not None else None,
        headers=headers,
    )


def idempotency_middleware(app: Any, next_middleware: Callable[[Any], Any]) -> Any:
    event = app.current_event
    if event.http_method.upper() != "POST":
        return next_middleware(app)
    idem_key = header(app, HEADER)
    if idem_key is None:
        return next_middleware(app)
    if not 1 <= len(idem_key) <= 255:
        raise ValidationFailed.field("headers.idempotency-key", "must be 1 to 255 characters")
    auth = current_auth_optional(app)
    if auth is None:  # public routes take no idempotency record
        return next_middleware(app)

    store = get_store()
    scope_digest = hashlib.sha256(f"{event.path}\n{idem_key}".encode()).hexdigest()
    item_key = keys.idempotency(auth.scope, scope_digest)
    body_digest = _body_digest(event.body)
    now = clock.now()
    try:
        store.put(
            {
                **item_key,
                "entity": "Idempotency",
                "status": "in_progress",
                "body_digest": body_digest,
                "lease_until": clock.epoch(now + IN_FLIGHT_LEASE),
                "ttl": clock.epoch(now + RETENTION),
            },
            condition="attribute_not_exists(PK) OR (#status = :in_progress AND lease_until < :now)",
            names={"#status": "status"},
            values={":in_progress": "in_progress", ":now": clock.epoch(now)},
        )
    except Conflict:
        existing = store.get(item_key, consistent=True)
        if existing is None:  # expired between the two calls: treat as in flight, the client retries
            raise Conflict("A request with this Idempotency-Key is in progress.") from None
        if existing.get("body_digest") != body_digest:
            raise Conflict(
                "This Idempotency-Key was used with a different request body.", code="idempotency_key_reused"
            ) from None
        if existing.get("status") != "completed":
            raise Conflict("A request with this Idempotency-Key is in progress.") from None
        return _stored_response(existing)

    try:
        response = next_middleware(app)
    except DomainError as err:
        response = Response(
            status_code=err.status,
            content_type="application/json",
            body=error_body(err.code, err.message, request_id(app), err.details),
            headers=err.headers,
        )
    except Exception:
        store.delete(item_key)
        raise

    if response.status_code in _NOT_STORED or response.status_code >= 500:
        store.delete(item_key)
        return response
    body = response.body
    stored_headers = {k: v for k, v in (response.headers or {}).items() if k.lower() in ("location",)}
    store.put(
        {
            **item_key,
            "entity": "Idempotency",
            "status": "completed",
            "body_digest": body_digest,
            "response_status": response.status_code,
            "response_body": body if isinstance(body, str) or body is None else json.dumps(body, default=str),
            "response_headers": stored_headers,
            "ttl": clock.epoch(now + RETENTION),
        }
    )
    return response
