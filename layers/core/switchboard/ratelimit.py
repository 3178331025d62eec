"""Fixed-window counters in the table: one UpdateItem (ADD) per hit, expiring with the window."""

from __future__ import annotations

import hashlib
import secrets
from functools import lru_cache
from typing import NamedTuple

from switchboard import clock
from switchboard.errors import RateLimited
from switchboard.store import Store


class Window(NamedTuple):  # a tuple: built on every API request, cheaper than a frozen dataclass
    limit: int
    remaining: int
    reset_in: int  # seconds until the window ends


@lru_cache(maxsize=1024)
def _bucket_pk(bucket: str) -> str:
    return f"RATE#{hashlib.sha256(bucket.encode()).hexdigest()[:32]}"


@lru_cache(maxsize=1024)
def _part_name(part: str) -> str:
    return f"p_{hashlib.sha256(part.encode()).hexdigest()[:16]}"


def hit(store: Store, bucket: str, *, limit: int, window_seconds: int, cost: int = 1) -> Window:
    """Count a hit in the current window; raise 429 with Retry-After once the limit is passed."""
    now = clock.epoch_now()
    start = now - now % window_seconds
    hits = store.add_hits({"PK": _bucket_pk(bucket), "SK": str(start)}, cost, ttl=start + window_seconds + 60)
    reset_in = max(1, start + window_seconds - now)
    if hits > limit:
        raise RateLimited(reset_in, "Too many attempts; retry later.")
    return Window(limit, max(0, limit - hits), reset_in)


def hit_spread(store: Store, bucket: str, *, limit: int, window_seconds: int, shards: int) -> Window:
    """`hit` on a window split over `shards` counters (`<bucket>#<n>`, each its own partition key), for a limit that
    a tenant may reach in bursts: no single key takes every hit. Each counter holds `ceil(limit / shards)` of the
    budget; a hit goes to a random counter and, when that one is spent, to a second random one (two choices keep the
    counters even, so the refusals start close to `limit` hits); 429 when both are spent."""
    if shards <= 1:
        return hit(store, bucket, limit=limit, window_seconds=window_seconds)
    share = -(-limit // shards)
    first = secrets.randbelow(shards)
    try:
        window = hit(store, f"{bucket}#{first}", limit=share, window_seconds=window_seconds)
    except RateLimited:
        second = (first + 1 + secrets.randbelow(shards - 1)) % shards
        window = hit(store, f"{bucket}#{second}", limit=share, window_seconds=window_seconds)
    return Window(limit, min(limit, window.remaining * shards), window.reset_in)


def peek(store: Store, bucket: str, *, limit: int, window_seconds: int) -> None:
    """Refuse (429) when the window is already exhausted, without counting a hit."""
    now = clock.epoch_now()
    start = now - now % window_seconds
    item = store.get({"PK": _bucket_pk(bucket), "SK": str(start)}, consistent=True)
    if item and int(item.get("hits", 0)) >= limit:
        raise RateLimited(max(1, start + window_seconds - now), "Too many attempts; retry later.")


def hit_with_part(
    store: Store, bucket: str, part: str, *, limit: int, part_limit: int, window_seconds: int, cost: int = 1
) -> Window:
    """`hit` on `bucket` that also counts `part`'s share of it (one credential of an organization) in the same item
    and UpdateItem; 429 once either budget is passed. The window answered is the tighter of the two."""
    now = clock.epoch_now()
    start = now - now % window_seconds
    hits, part_hits = store.add_hits_with_part(
        {"PK": _bucket_pk(bucket), "SK": str(start)}, cost, ttl=start + window_seconds + 60, part=_part_name(part)
    )
    reset_in = max(1, start + window_seconds - now)
    if hits > limit or part_hits > part_limit:
        raise RateLimited(reset_in, "Too many requests; retry later.")
    if part_limit - part_hits < limit - hits:
        return Window(part_limit, part_limit - part_hits, reset_in)
    return Window(limit, limit - hits, reset_in)


# Progressive delays: after `free` failures, each further attempt waits base * 2^(failures - free) seconds (at most
# `max_seconds`) from the last failure. One item per bucket; a success clears it, TTL forgets it after a quiet day.
BACKOFF_MEMORY_SECONDS = 24 * 3600


def _backoff_key(bucket: str) -> dict[str, str]:
    return {"PK": _bucket_pk(bucket), "SK": "backoff"}


def backoff_delay(failures: int, *, free: int, base_seconds: int, max_seconds: int) -> int:
    """Seconds an attempt waits after the last of `failures` failures (0 while they are within `free`)."""
    if failures < free:
        return 0
    return int(min(max_seconds, base_seconds * 2 ** min(failures - free, 32)))


def backoff_wait(store: Store, bucket: str, *, free: int, base_seconds: int, max_seconds: int) -> int:
    """Refuse (429, Retry-After = the rest of the delay) while the bucket's delay since its last failure runs;
    otherwise answer how many failures it holds."""
    item = store.get(_backoff_key(bucket), consistent=True)
    if not item:
        return 0
    now = clock.epoch_now()
    if int(item.get("ttl", 0)) <= now:
        return 0  # expired, not yet removed by TTL
    failures = int(item.get("hits", 0))
    until = int(item.get("last_at", 0)) + backoff_delay(
        failures, free=free, base_seconds=base_seconds, max_seconds=max_seconds
    )
    if now < until:
        raise RateLimited(until - now, "Too many failed attempts; retry later.")
    return failures


def backoff_fail(store: Store, bucket: str) -> None:
    """Count a failure now (the delay runs from here)."""
    now = clock.epoch_now()
    store.update(
        _backoff_key(bucket),
        "ADD hits :one SET last_at = :now, #ttl = :ttl",
        names={"#ttl": "ttl"},
        values={":one": 1, ":now": now, ":ttl": now + BACKOFF_MEMORY_SECONDS},
        return_values="NONE",
    )


def backoff_clear(store: Store, bucket: str) -> None:
    store.delete(_backoff_key(bucket))
