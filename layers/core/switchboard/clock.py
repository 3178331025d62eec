"""Time in one place: aware UTC datetimes, ISO 8601 with milliseconds and Z."""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC, datetime

from switchboard.errors import ValidationFailed

# RFC 3339 `date-time` (what `format: date-time` means in the document): a calendar date, `T`, a time with seconds,
# an optional fraction and a required offset (`Z` or `±hh:mm`). `datetime.fromisoformat` alone would also take a
# date without a time, a time without seconds, a space, a week date or no offset at all.
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})")
_BEYOND_MICROSECONDS = re.compile(r"(\.\d{6})\d+")
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DATE_TIME_HINT = "must be an RFC 3339 date-time with a time zone, such as 2026-11-21T10:00:00Z"


def now() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """The wire format of every timestamp: ISO 8601 in UTC, milliseconds (truncated), `Z`."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(now())


def parse_iso(value: str) -> datetime:
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def parse_date_time(value: str) -> datetime:
    """A date-time a caller sent, read strictly (RFC 3339: a real calendar date and time, with its offset), in UTC.
    Raises ValueError saying what is wrong: the shape, an impossible date (`2027-13-45`), or a moment that has no
    UTC time (year 1 with a positive offset)."""
    text = str(value).strip()
    if not _DATE_TIME.fullmatch(text):
        raise ValueError(DATE_TIME_HINT)
    text = _BEYOND_MICROSECONDS.sub(r"\1", text.upper())  # Python's datetime keeps microseconds at most
    try:
        return parse_iso(text)
    except (ValueError, OverflowError) as err:
        raise ValueError(f"is not a real date and time ({err}); {DATE_TIME_HINT}") from None


def parse_iso_input(value: str, field: str) -> datetime:
    """A timestamp the caller sent (query or body): a malformed one is a 400 naming `field`, never a 500."""
    try:
        return parse_date_time(value)
    except ValueError as err:
        raise ValidationFailed.field(field, str(err)) from None


def parse_stored(value: object, what: str = "timestamp") -> datetime | None:
    """A timestamp read back from the table, or None when it cannot be read (logged): an item written before its
    input was checked strictly must not make every later read of it fail. Each caller says what None means there
    (absent, expired)."""
    if not value:
        return None
    try:
        return parse_iso(str(value))
    except (ValueError, OverflowError):
        logging.getLogger("switchboard").warning("unreadable stored %s %r: treated as absent", what, value)
        return None


def epoch(dt: datetime) -> int:
    return int(dt.timestamp())


def epoch_now() -> int:
    """`epoch(now())`, for the hot paths that only need whole seconds (the rate limiter, on every API request): one
    call instead of building an aware datetime and converting it back."""
    return int(time.time())
