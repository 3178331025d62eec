"""Identifiers: prefixed opaque ids (ULID body, time-ordered) and UUIDv7 for messages.

`ulid` (it reads its own version through `importlib.metadata`, which pulls in the `email` package) and `uuid6` are
imported on first use: a cold start that serves reads never needs them.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from uuid import UUID

    from ulid import ULID


_ULID: type[ULID] | None = None


def _ulid() -> type[ULID]:
    """The ULID class, imported on the first id made (then kept: an import statement per id costs ~1 µs)."""
    global _ULID
    if _ULID is None:
        from ulid import ULID

        _ULID = ULID
    return _ULID


def new_id(prefix: str) -> str:
    """`ct_01JD…`: a type prefix and a ULID, lower-cased so ids read well in URLs."""
    return f"{prefix}_{str(_ulid()()).lower()}"


def new_ulid() -> str:
    return str(_ulid()())


_UUID7: Callable[[], UUID] | None = None


def new_message_id() -> str:
    global _UUID7
    if _UUID7 is None:
        from uuid6 import uuid7

        _UUID7 = uuid7
    return str(_UUID7())


def token_urlsafe(nbytes: int = 32) -> str:
    return secrets.token_urlsafe(nbytes)


def ulid_bound(dt: datetime, *, high: bool) -> str:
    """The smallest (or largest) ULID of a millisecond: turns a time range into a sort-key range."""
    ms = int(dt.timestamp() * 1000)
    randomness = b"\xff" * 10 if high else b"\x00" * 10
    return str(_ulid().from_bytes(ms.to_bytes(6, "big") + randomness))
