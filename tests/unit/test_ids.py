"""The ids python-ulid makes keep their shape and their order; the time bounds enclose a millisecond's ULIDs."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ulid import ULID

from switchboard import ids


def test_new_ids_read_back_as_the_ulids_they_are():
    before = int(datetime.now(UTC).timestamp() * 1000)
    made = [ids.new_ulid() for _ in range(200)]
    prefixed = ids.new_id("ct")
    assert all(re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", u) for u in made)
    assert made == sorted(made) and len(set(made)) == 200  # monotonic within a millisecond, unique
    assert ULID.from_str(made[0]).milliseconds >= before
    assert re.fullmatch(r"ct_[0-9a-hjkmnp-tv-z]{26}", prefixed)
    assert str(ULID.from_str(prefixed[3:].upper())) == prefixed[3:].upper()


def test_time_bounds_enclose_the_ulids_of_their_millisecond():
    moment = datetime(2026, 11, 23, 1, 2, 3, 456_000, tzinfo=UTC)
    low, high = ids.ulid_bound(moment, high=False), ids.ulid_bound(moment, high=True)
    inside = str(ULID.from_datetime(moment))
    assert low <= inside <= high
    assert low == str(ULID.from_bytes(ULID.from_datetime(moment).milliseconds.to_bytes(6, "big") + bytes(10)))
    assert high[:10] == low[:10] and high.endswith("ZZZZZZZZZZZZZZZZ")
