"""Pagination: offset pages where the spec says so, opaque cursors everywhere else.

A cursor carries the DynamoDB continuation key, the organization and a fingerprint of the query, sealed with an
HMAC under the platform secret (`switchboard.platform_secret`; a cursor signed with the previous version still
verifies after a rotation): a cursor used by another organization, with other filters, or tampered with is 400
`validation_failed`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from switchboard import platform_secret
from switchboard.errors import ValidationFailed
from switchboard.store import keys


def _mac(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest()[:16])


def query_fingerprint(route: str, params: dict[str, Any]) -> str:
    canonical = json.dumps({"route": route, **{k: v for k, v in params.items() if v is not None}}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode_cursor(org_id: str, fingerprint: str, last_key: dict[str, Any] | None) -> str | None:
    if not last_key:
        return None
    payload = _b64(json.dumps({"o": org_id, "q": fingerprint, "k": last_key}, separators=(",", ":")).encode())
    return f"{payload}.{_mac(platform_secret.current(), payload)}"


def decode_cursor(token: str | None, org_id: str, fingerprint: str) -> dict[str, Any] | None:
    if not token:
        return None
    invalid = ValidationFailed.field("query.cursor", "is not a valid cursor for this list")
    try:
        payload, mac = token.split(".", 1)
        # signed with the current platform secret, or the previous one during a rotation's grace
        if not any(hmac.compare_digest(mac, _mac(key, payload)) for key in platform_secret.candidates()):
            raise invalid
        data = json.loads(_unb64(payload))
    except (ValueError, TypeError):
        raise invalid from None
    if data.get("o") != org_id or data.get("q") != fingerprint or not isinstance(data.get("k"), dict):
        raise invalid
    return data["k"]  # type: ignore[no-any-return]


def cursor_page(
    store: Any,
    org_id: str,
    fingerprint: str,
    cursor: str | None,
    *,
    limit: int,
    pk: str | None = None,
    **query: Any,
) -> tuple[list[dict[str, Any]], str | None]:
    """`Store.filtered_page` from an opaque cursor, answering the items and the next cursor: the cursor round trip of
    every list read from one key range. `pk` defaults to the organization's partition; `query` is the key condition,
    order, `filters` and `keep` of `filtered_page`."""
    return read_page(
        org_id,
        fingerprint,
        cursor,
        lambda start: store.filtered_page(pk or keys.org_pk(org_id), limit=limit, start_key=start, **query),
    )


def read_page(
    org_id: str,
    fingerprint: str,
    cursor: str | None,
    read: Callable[[dict[str, Any] | None], tuple[list[Any], dict[str, Any] | None]],
) -> tuple[list[Any], str | None]:
    """The cursor round trip of a list that reads its own way (a search, one of several indexes, a provider's
    continuation): `read` takes the continuation key the cursor carries (None: from the start) and answers the page
    and the key to continue from (None: the end)."""
    items, last = read(decode_cursor(cursor, org_id, fingerprint))
    return items, encode_cursor(org_id, fingerprint, last)


def list_meta(limit: int, *, cursor: str | None = None, offset: int | None = None, has_more: bool, total=None):
    meta: dict[str, Any] = {"has_more": has_more, "limit": limit}
    if offset is not None:
        meta["offset"] = offset
    if cursor is not None:
        meta["cursor"] = cursor
    if total is not None:
        meta["total"] = total
    return meta
