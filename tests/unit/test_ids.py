"""`ids.ulid_text` writes a ULID's 16 bytes exactly as python-ulid's `str(ULID)` does (upper case) and as its
lower-cased text (the prefixed ids), for the edge values and for random ones; the ids built on it keep their shape
and their order."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

from ulid import ULID

from switchboard import ids

EDGES = [bytes(16), b"\xff" * 16, b"\x80" + bytes(15), bytes(15) + b"\x01", b"\x00\x00\x00\x00\x00\x01" + b"\xff" * 10]


def test_same_text_as_python_ulid():
    rng = random.Random(20261123)
    samples = EDGES + [rng.randbytes(16) for _ in range(20_000)]
    for raw in samples:
        expected = str(ULID.from_bytes(raw))
        assert ids.ulid_text(raw) == expected, raw.hex()
        assert ids.ulid_text(raw, lower=True) == expected.lower(), raw.hex()
    assert len(samples) == 20_005


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
