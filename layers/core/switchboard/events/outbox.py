"""The outbox: an `EVENT#<ulid>` item per domain event, written inside the transaction of the change itself, in the
ulid's write shard `ORG#<org>#<shard>` (switchboard.store.shards): an organization's events spread over its shards.

No dual writes: the handler never calls EventBridge. The DynamoDB stream carries the INSERT of the outbox item to
`event_publisher`, which puts it on the bus. The item expires (TTL) a day later; its REMOVE is filtered out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.ids import new_ulid
from switchboard.store import shards
from switchboard.store.table import Put, Store

EVENT_SOURCE = "switchboard"
OUTBOX_TTL = timedelta(days=1)


@dataclass(frozen=True)
class OutboxEvent:
    event_id: str
    event_type: str
    organization_id: str
    occurred_at: str
    data: dict[str, Any]

    def detail(self) -> dict[str, Any]:
        """The EventBridge `detail`: the envelope consumers read; `data` is the flat webhook body."""
        return {
            "event_id": self.event_id,
            "event_type": self.event_type,
            "organization_id": self.organization_id,
            "occurred_at": self.occurred_at,
            "data": self.data,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> OutboxEvent:
        return cls(
            event_id=item["event_id"],
            event_type=item["event_type"],
            organization_id=item["organization_id"],
            occurred_at=item["occurred_at"],
            data=item.get("payload") or {},
        )


def stored_events(store: Store, org_id: str, **query: Any) -> list[dict[str, Any]]:
    """The organization's outbox items still stored (each shard and the legacy partition), oldest first. For tools
    and tests: a request never lists the outbox."""
    rows = shards.query_all(store, shards.all_pks(org_id), sk_prefix="EVENT#", **query)
    return sorted(rows, key=lambda r: r["SK"])


def outbox_put(org_id: str, event_type: str, data: dict[str, Any], *, occurred: datetime | None = None) -> Put:
    """The transaction operation that records one event; add it to the same `Store.transact` as the change. The event
    occurs now, or at `occurred` when the caller already read the clock for the change."""
    ulid = new_ulid()
    occurred = occurred or clock.now()
    item = {
        **shards.event_key(org_id, ulid),
        "entity": "Event",
        "event_id": f"evt_{ulid.lower()}",
        "event_type": event_type,
        "organization_id": org_id,
        "occurred_at": clock.iso(occurred),
        "payload": data,
        "ttl": clock.epoch(occurred + OUTBOX_TTL),
    }
    return Put(item=item, condition="attribute_not_exists(PK)")
