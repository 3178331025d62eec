"""Per-tenant fairness of webhook delivery (Svix-style budgets): each organization's fan-out hands its deliveries to
the shared WebhookDeliveriesQueue at most `webhook_tenant_rate` per second.

One item per organization in DeliveriesTable, `ORG#<org>#WHPACE` / `WHPACE`, holds `tat`: the time (epoch µs) from
which the organization's next delivery may be attempted (GCRA's theoretical arrival time). Reserving n deliveries
moves `tat` n intervals on and answers each delivery's delay: a message is sent with `DelaySeconds` = that delay, so
a tenant's burst waits out of sight (delayed messages are not receivable) instead of lying in front of every other
tenant's messages. `BURST` seconds of a tenant's rate go out at once; beyond that its deliveries are spaced at its
rate. An event whose deliveries would wait longer than SQS's longest delay (`HORIZON`) reserves nothing: fan-out
sends the event itself back to WebhookEventsQueue with a delay and fans it out later.

The busy path is one UpdateItem that never conflicts (`ADD tat`, on condition that `tat` is not in the past); an
idle tenant's first reservation sets `tat` from now (on condition that it is in the past or missing); when both
conditions fail (a race between the two), the first is tried again.
"""

from __future__ import annotations

import math
from datetime import datetime

from switchboard.config import get_settings
from switchboard.errors import Conflict
from switchboard.store import keys
from switchboard.webhooks import repository as repo

HORIZON = 900  # seconds: SQS's longest DelaySeconds
BURST = 1.0  # seconds of a tenant's rate handed over at once
_ATTEMPTS = 5


def pace_key(org_id: str) -> dict[str, str]:
    return keys.key(f"{keys.org_pk(org_id)}#WHPACE", "WHPACE")


def _us(dt: datetime) -> int:
    return int(dt.timestamp() * 1_000_000)


def reserve(org_id: str, count: int, now: datetime) -> list[float] | None:
    """Reserve `count` delivery slots of the organization from `now`: each one's delay in seconds (0 for the ones
    within the burst), or None when the last would wait past `HORIZON` (nothing is then reserved)."""
    if count <= 0:
        return []
    store = repo.deliveries_store()
    interval = 1_000_000 / get_settings().webhook_tenant_rate
    span = math.ceil(count * interval)
    now_us = _us(now)
    key = pace_key(org_id)
    start = now_us
    for _ in range(_ATTEMPTS):
        ttl = (now_us + span) // 1_000_000 + HORIZON + 3600
        try:
            updated = store.update(
                key,
                "ADD tat :span SET #ttl = :ttl",
                condition="tat >= :now",
                names={"#ttl": "ttl"},
                values={":span": span, ":now": now_us, ":ttl": ttl},
                return_values="UPDATED_NEW",
            )
            start = int((updated or {})["tat"]) - span
            break
        except Conflict:
            pass
        try:
            store.update(
                key,
                "SET tat = :tat, #ttl = :ttl",
                condition="attribute_not_exists(tat) OR tat < :now",
                names={"#ttl": "ttl"},
                values={":tat": now_us + span, ":now": now_us, ":ttl": ttl},
                return_values="NONE",
            )
            start = now_us
            break
        except Conflict:
            continue
    else:
        raise Conflict("The delivery schedule is busy; retry.")
    delays = delays_from(start, now_us, count, interval)
    if delays[-1] > HORIZON:
        release(org_id, span)
        return None
    return delays


def delays_from(start_us: int, now_us: int, count: int, interval_us: float) -> list[float]:
    """Seconds until each of `count` slots from `start_us`, spaced `interval_us`, the first `BURST` s free."""
    return [max(0.0, (start_us + n * interval_us - now_us) / 1_000_000 - BURST) for n in range(count)]


def release(org_id: str, span: int) -> None:
    """Give back a reservation that will not be used (the schedule moves back; a concurrent one keeps its slots)."""
    repo.deliveries_store().update(pace_key(org_id), "ADD tat :back", values={":back": -span}, return_values="NONE")
