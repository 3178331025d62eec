"""Identifiers: prefixed opaque ids (ULID body, time-ordered) and UUIDv7 for messages."""

from __future__ import annotations

import secrets

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
