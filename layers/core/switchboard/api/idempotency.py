"""`Idempotency-Key` on POST (CONVENTIONS "Idempotency").

The first completed response (status, body) is stored for 24 h under the caller's partition and replayed for the same
key and the same body; the same key with another body is 409 `idempotency_key_reused`; a request still in flight
with that key is 409 `conflict`. A record belongs to the principal that made it (the API key, or the user of a
session: `principal_of`); the same key from another principal of the organization is 409 `idempotency_key_reused`,
never a replay and never a sign of what the first request was (CONVENTIONS "Tenant safety and data lifecycle"). The
route's role requirement is checked before this middleware runs (`switchboard.api.app.RouteGate`). Validation
failures (400), throttling (429) and server errors are not stored: the record is removed so that the client can
retry. Runs after request validation, so invalid bodies never get here.

Nothing readable is kept of what the request or the response carried (CONVENTIONS "Authentication and tenancy":
credentials are stored hashed only). A login body holds a password and the replay of a login or of an API-key creation
holds the session token or the key, so:

- the request is remembered by an HMAC-SHA256 keyed with the server secret (the platform secret,
  `switchboard.platform_secret`; a record made before a rotation still matches under the previous version) over the
  principal, the path, the Idempotency-Key and the canonical body, never by a plain digest that could be brute-forced
  offline;
- the replayed body is sealed with AES-256-GCM under a key derived (HMAC-SHA256, server secret) from the principal,
  the path, the Idempotency-Key and the canonical body: only the same principal sending the same key and the same body
  again can have it opened, and a copy of the table alone (without the server secret) reveals nothing. The record's
  key and status are the associated data, so a sealed body cannot be moved to another record. `cryptography` is
  imported on first use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response

from switchboard import clock, platform_secret
from switchboard.api.auth import AuthContext
from switchboard.api.context import current_auth_optional, header, request_id
from switchboard.api.envelope import error_body
from switchboard.errors import Conflict, DomainError, ServiceUnavailable, ValidationFailed
from switchboard.store import get_store, keys

HEADER = "Idempotency-Key"
RETENTION = timedelta(hours=24)
IN_FLIGHT_LEASE = timedelta(seconds=60)
_NOT_STORED = {400, 401, 403, 429}

logger = Logger(child=True)


def _canonical_body(raw: str | None) -> bytes:
    if not raw:
        return b""
    try:
        return json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        return raw.encode()


def _derive(secret: bytes, label: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 keyed with the server secret over a label and length-prefixed parts (no ambiguous joins)."""
    mac = hmac.new(secret, label, hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(4, "big"))
        mac.update(part)
    return mac.digest()


def _keys(secret: bytes, parts: tuple[bytes, ...]) -> tuple[str, bytes]:
    """(request MAC, replay sealing key) of a request under one version of the server secret."""
    return (
        _derive(secret, b"switchboard/idempotency/request", *parts).hex(),
        _derive(secret, b"switchboard/idempotency/replay", *parts),
    )


def _matching_keys(existing: dict[str, Any], principal: str, parts: tuple[bytes, ...]) -> bytes | None:
    """The replay sealing key of the version of the server secret the record was made with, when the same principal
    sent the same request; None otherwise. A record made before a rotation still matches under the previous version
    (`switchboard.platform_secret.candidates`)."""
    owner = existing.get("principal")
    if not isinstance(owner, str) or not hmac.compare_digest(owner, principal):
        return None  # another principal's, or a record without one (written before records had one): never replayed
    for secret in platform_secret.candidates():
        request_mac, seal_key = _keys(secret, parts)
        if hmac.compare_digest(str(existing.get("request_mac") or ""), request_mac):
            return seal_key
    return None


def principal_of(auth: AuthContext) -> str:
    """Who owns an idempotency record: the API key itself, or the user behind a session (a user's sessions share
    their records, so a retry after logging in again still replays)."""
    if auth.principal_type == "session" and auth.user_id:
        return f"user:{auth.user_id}"
    return f"{auth.principal_type}:{auth.credential_id or auth.principal_id}"


def _aad(item_key: dict[str, Any], status: int) -> bytes:
    return f"{item_key['PK']}\n{item_key['SK']}\n{status}".encode()


def _seal(seal_key: bytes, plain: str, aad: bytes) -> str:
    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    return base64.b64encode(nonce + AESGCM(seal_key).encrypt(nonce, plain.encode(), aad)).decode()


def _open(seal_key: bytes, sealed: str, aad: bytes) -> str:
    # on first use: keeps cryptography off the cold start
    from cryptography.exceptions import InvalidTag

    # on first use: keeps cryptography off the cold start
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    raw = base64.b64decode(sealed)
    try:
        return AESGCM(seal_key).decrypt(raw[:12], raw[12:], aad).decode()
    except InvalidTag:  # the server secret changed since: the response can't be replayed any more
        raise Conflict(
            "The stored response of this Idempotency-Key can no longer be replayed; use a new key."
        ) from None


def _stored_response(item: dict[str, Any], item_key: dict[str, Any], seal_key: bytes) -> Response:
    headers = dict(item.get("response_headers") or {})
    headers["Idempotent-Replayed"] = "true"
    status = int(item["response_status"])
    body = None
    if item.get("response_sealed") is not None:
        body = _open(seal_key, item["response_sealed"], _aad(item_key, status))
    return Response(
        status_code=status,
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
    principal = principal_of(auth)
    parts = (principal.encode(), event.path.encode(), idem_key.encode(), _canonical_body(event.body))
    request_mac, seal_key = _keys(platform_secret.current(), parts)
    now = clock.now()
    try:
        store.put(
            {
                **item_key,
                "entity": "Idempotency",
                "status": "in_progress",
                "principal": principal,
                "request_mac": request_mac,
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
        record_key = _matching_keys(existing, principal, parts)
        if record_key is None:
            raise Conflict(
                "This Idempotency-Key was already used for another request; use a new key.",
                code="idempotency_key_reused",
            ) from None
        if existing.get("status") != "completed":
            raise Conflict("A request with this Idempotency-Key is in progress.") from None
        return _stored_response(existing, item_key, record_key)

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
        _forget(store, item_key)
        return response
    body = response.body
    stored_headers = {k: v for k, v in (response.headers or {}).items() if k.lower() in ("location",)}
    record: dict[str, Any] = {
        **item_key,
        "entity": "Idempotency",
        "status": "completed",
        "principal": principal,
        "request_mac": request_mac,
        "response_status": response.status_code,
        "response_headers": stored_headers,
        "ttl": clock.epoch(now + RETENTION),
    }
    if body is not None:
        plain = body if isinstance(body, str) else json.dumps(body, default=str)
        record["response_sealed"] = _seal(seal_key, plain, _aad(item_key, response.status_code))
    try:
        store.put(record)
    except ServiceUnavailable:
        # The work is done and committed; only its replay record could not be stored (the table throttled it after
        # every retry). Answering 503 now would invite a retry that runs the work again once the lease ends.
        logger.warning("idempotency record not stored; the response is returned unrecorded")
    return response


def _forget(store: Any, item_key: dict[str, str]) -> None:
    """Remove the in-flight record so the client can retry; if the table is too busy, the lease frees it later."""
    try:
        store.delete(item_key)
    except ServiceUnavailable:
        logger.warning("idempotency record not removed; it frees itself when its in-flight lease ends")
