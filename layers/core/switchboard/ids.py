"""Identifiers: prefixed opaque ids (ULID body, time-ordered) and UUIDv7 for messages.

python-ulid makes the ULIDs (clock, randomness, monotonic within a millisecond) and writes their text.
`ulid` (it reads its own version through `importlib.metadata`, which pulls in the `email` package) and `uuid6` are
imported on first use: a cold start that serves reads never needs them.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from switchboard import clock
from switchboard.errors import ValidationFailed


def new_id(prefix: str) -> str:
    """`ct_01JD…`: a type prefix and a ULID, lower-cased so ids read well in URLs."""
    return f"{prefix}_{new_ulid().lower()}"


def new_ulid() -> str:
    from ulid import ULID  # on first use, not at cold start (see the module's docstring)

    return str(ULID())


def new_message_id() -> str:
    from uuid6 import uuid7  # on first use, not at cold start

    return str(uuid7())


def token_urlsafe(nbytes: int = 32) -> str:
    return secrets.token_urlsafe(nbytes)


def ulid_bound(dt: datetime, *, high: bool) -> str:
    """The smallest (or largest) ULID of a millisecond: turns a time range into a sort-key range."""
    from ulid import ULID  # on first use, not at cold start (see the module's docstring)

    # a ULID's time is 48 bits of milliseconds since 1970: a bound outside that range is the range's end
    ms = min(max(int(dt.timestamp() * 1000), 0), (1 << 48) - 1)
    randomness = b"\xff" * 10 if high else b"\x00" * 10
    return str(ULID.from_bytes(ms.to_bytes(6, "big") + randomness))


def ulid_range(prefix: str, since: str | None, until: str | None) -> tuple[str, str]:
    """The sort-key range of a time window over keys `<prefix><ulid>` (a log read `since` / `until`, ISO 8601
    inputs: a malformed one, or `since` after `until`, is a 400 naming the field)."""
    low = prefix + (ulid_bound(clock.parse_iso_input(since, "query.since"), high=False) if since else "")
    high = prefix + (ulid_bound(clock.parse_iso_input(until, "query.until"), high=True) if until else "~")
    if low > high:
        raise ValidationFailed.field("query.since", "must not be after until")
    return low, high


def ulid_time(text: str) -> datetime:
    """The millisecond a ULID was made (its first ten characters), in UTC."""
    from ulid import ULID  # on first use, not at cold start (see the module's docstring)

    return datetime.fromtimestamp(ULID.from_str(text[:10].upper() + "0" * 16).milliseconds / 1000, tz=UTC)
