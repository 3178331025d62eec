"""`clock.iso` writes the wire format of CONVENTIONS (ISO 8601, UTC, milliseconds truncated, `Z`) for any aware
datetime in any offset: the same text as its `strftime` definition."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from switchboard.clock import iso, parse_iso


def _reference(dt: datetime) -> str:
    utc = dt.astimezone(UTC)  # the year in four digits (ISO 8601), which `%Y` does not pad on every platform
    return f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def test_same_text_as_strftime_for_any_instant_and_offset():
    rng = random.Random(20261122)
    checked = 0
    for _ in range(20_000):
        offset = timezone(timedelta(minutes=rng.randint(-900, 900))) if rng.random() < 0.5 else UTC
        dt = datetime(
            rng.randint(2, 9998), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59),
            rng.randint(0, 59), rng.randint(0, 999_999), tzinfo=offset,
        )  # fmt: skip
        assert iso(dt) == _reference(dt), dt
        checked += 1
    assert checked == 20_000


def test_round_trip_and_shape():
    dt = datetime(2026, 11, 22, 17, 5, 9, 123_999, tzinfo=UTC)
    assert iso(dt) == "2026-11-22T17:05:09.123Z"
    assert parse_iso(iso(dt)) == dt.replace(microsecond=123_000)
    assert iso(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC)) == _reference(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC))
