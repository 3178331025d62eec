"""Identifiers: prefixed opaque ids (ULID body, time-ordered) and UUIDv7 for messages."""

from __future__ import annotations

import secrets
from datetime import datetime

from ulid import ULID
from uuid6 import uuid7


def new_id(prefix: str) -> str:
    """`ct_01JD…`: a type prefix and a ULID, lower-cased so ids read well in URLs."""
    return f"{prefix}_{str(ULID()).lower()}"


def new_ulid() -> str:
    return str(ULID())


def new_message_id() -> str:
    return str(uuid7())


def token_urlsafe(nbytes: int = 32) -> str:
    return secrets.token_urlsafe(nbytes)


def ulid_bound(dt: datetime, *, high: bool) -> str:
    """The smallest (or largest) ULID of a millisecond: turns a time range into a sort-key range."""
    ms = int(dt.timestamp() * 1000)
    randomness = b"\xff" * 10 if high else b"\x00" * 10
    return str(ULID.from_bytes(ms.to_bytes(6, "big") + randomness))
