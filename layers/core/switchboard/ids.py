"""Identifiers: prefixed opaque ids (ULID body, time-ordered) and UUIDv7 for messages.

`ulid` (it reads its own version through `importlib.metadata`, which pulls in the `email` package) and `uuid6` are
imported on first use: a cold start that serves reads never needs them.

python-ulid makes the ULIDs (clock, randomness, monotonic within a millisecond); their text is written here, ten bits
at a time from a table of the 1,024 character pairs: the same 26 characters as `str(ULID)` (a property test compares
them) in ~1 µs instead of the ~4.5 µs of python-ulid's character-by-character encoder (a send writes two).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
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


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_PAIRS_LOWER = [pair.lower() for pair in _PAIRS]


def ulid_text(raw: bytes, *, lower: bool = False) -> str:
    """The 26-character text of a ULID's 16 bytes, as `str(ULID.from_bytes(raw))` writes it (or lower-cased): its
    128 bits as 130 (two zero bits first), five bits a character, here ten bits (a pair) at a time."""
    n = int.from_bytes(raw)
    t = _PAIRS_LOWER if lower else _PAIRS
    return "".join(
        [
            t[n >> 120],
            t[(n >> 110) & 1023],
            t[(n >> 100) & 1023],
            t[(n >> 90) & 1023],
            t[(n >> 80) & 1023],
            t[(n >> 70) & 1023],
            t[(n >> 60) & 1023],
            t[(n >> 50) & 1023],
            t[(n >> 40) & 1023],
            t[(n >> 30) & 1023],
            t[(n >> 20) & 1023],
            t[(n >> 10) & 1023],
            t[n & 1023],
        ]
    )


def new_id(prefix: str) -> str:
    """`ct_01JD…`: a type prefix and a ULID, lower-cased so ids read well in URLs."""
    return f"{prefix}_{ulid_text((_ULID or _ulid())().bytes, lower=True)}"


def new_ulid() -> str:
    return ulid_text((_ULID or _ulid())().bytes)


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
    return ulid_text(ms.to_bytes(6, "big") + randomness)


def ulid_time(text: str) -> datetime:
    """The millisecond a ULID was made (its first ten characters), in UTC."""
    ms = 0
    for char in text[:10].upper():
        ms = ms * 32 + _CROCKFORD.index(char)
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
