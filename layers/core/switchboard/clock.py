"""Time in one place: aware UTC datetimes, ISO 8601 with milliseconds and Z."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from switchboard.errors import ValidationFailed


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


def parse_iso_input(value: str, field: str) -> datetime:
    """A timestamp the caller sent (query or body): a malformed one is a 400 naming `field`, never a 500."""
    try:
        return parse_iso(value)
    except ValueError:
        raise ValidationFailed.field(field, "must be an ISO 8601 timestamp such as 2026-11-21T10:00:00Z")


def epoch(dt: datetime) -> int:
    return int(dt.timestamp())


def epoch_now() -> int:
    """`epoch(now())`, for the hot paths that only need whole seconds (the rate limiter, on every API request): one
    call instead of building an aware datetime and converting it back."""
    return int(time.time())
