"""The outbox: an `EVENT#<ulid>` item per domain event, written inside the transaction of the change itself, in the
ulid's write shard `ORG#<org>#<shard>` (switchboard.store.shards): an organization's events spread over its shards.

No dual writes: the handler never calls EventBridge. The DynamoDB stream carries the INSERT of the outbox item to
`event_publisher`, which puts it on the bus. The item expires (TTL) a day later; its REMOVE is filtered out.

Events too large for the bus. EventBridge takes entries up to 256 KiB (switchboard.events.limits); an event above the
publisher's inline limit is published as a reference to its outbox item (`detail.stored` = its key, no `data`), and
every consumer reads its detail through `read_detail`, which reads such an event back whole. Those outbox items are
kept `STORED_TTL`: longer than an event can wait in a queue and then in its dead-letter queue, so such an item is only
ever gone because it was deleted on purpose (a contact's erasure, an organization's purge): the event is then skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from switchboard import clock, metrics
from switchboard.events.limits import MAX_INLINE_ENTRY_BYTES, entry_size
from switchboard.ids import new_ulid
from switchboard.store import shards
from switchboard.store.keys import org_pk
from switchboard.store.table import Put, Store

EVENT_SOURCE = "switchboard"
OUTBOX_TTL = timedelta(days=1)
# Queues keep an event 4 days, their dead-letter queues 14 more (template.yaml): a week to spare beyond both.
STORED_TTL = timedelta(days=25)
# Items whose event may be published by reference are kept STORED_TTL from this size on: well below the inline limit,
# so that the write-time estimate (payload values as the writer has them) never misses one the publisher will size
# from the stream image.
KEEP_LONGER_FROM_BYTES = MAX_INLINE_ENTRY_BYTES * 3 // 4
STORED = "stored"  # the detail key of a reference: the outbox item's {"PK", "SK"}

logger = Logger(child=True)


@dataclass(frozen=True)
class OutboxEvent:
    event_id: str
    event_type: str
    organization_id: str
    occurred_at: str
    data: dict[str, Any]
    key: dict[str, str] | None = None  # the outbox item's key, when read from it

    def detail(self) -> dict[str, Any]:
        """The EventBridge `detail`: the envelope consumers read; `data` is the flat webhook body."""
        return {
            "event_id": self.event_id,
            "event_type": self.event_type,
            "organization_id": self.organization_id,
            "occurred_at": self.occurred_at,
            "data": self.data,
        }

    def detail_json(self, **dumps: Any) -> str:
        """The `Detail` of the event's PutEvents entry."""
        return json.dumps(self.detail(), separators=(",", ":"), **dumps)

    def reference(self) -> dict[str, Any]:
        """The detail published instead when the event is too large for the bus: the envelope and its item's key."""
        if self.key is None:
            raise ValueError(f"event {self.event_id} has no stored item to refer to")
        envelope = {k: v for k, v in self.detail().items() if k != "data"}
        return {**envelope, STORED: {"PK": self.key["PK"], "SK": self.key["SK"]}}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> OutboxEvent:
        return cls(
            event_id=item["event_id"],
            event_type=item["event_type"],
            organization_id=item["organization_id"],
            occurred_at=item["occurred_at"],
            data=item.get("payload") or {},
            key={"PK": str(item["PK"]), "SK": str(item["SK"])} if "PK" in item and "SK" in item else None,
        )


def inline_size(event: OutboxEvent, detail: str | None = None) -> int:
    """The size EventBridge counts for the event's entry carrying the whole detail."""
    detail = event.detail_json() if detail is None else detail
    return entry_size({"Source": EVENT_SOURCE, "DetailType": event.event_type, "Detail": detail})


def read_detail(store: Store, detail: dict[str, Any]) -> dict[str, Any] | None:
    """An event's `detail` as consumers use it: as delivered, or, for an event published by reference (too large for
    the bus), read back whole from its outbox item. None when that item is gone: deleted by a contact's erasure (it
    mentioned the person) or the organization's purge, so nothing of the event may be acted on any more (counted as
    `EventsErasedBeforeUse`)."""
    ref = detail.get(STORED)
    if not ref:
        return detail
    org = str(detail.get("organization_id") or "")
    pk, sk = str(ref.get("PK", "")), str(ref.get("SK", ""))
    if not org or not (pk == org_pk(org) or pk.startswith(org_pk(org) + "#")) or not sk.startswith("EVENT#"):
        raise ValueError(f"event {detail.get('event_id')}: its reference is not an outbox item of its organization")
    item = store.get({"PK": pk, "SK": sk}, consistent=True)
    if item is None or item.get("event_id") != detail.get("event_id"):
        logger.warning("event skipped: its stored payload was erased", extra={"event_id": detail.get("event_id")})
        metrics.count("EventsErasedBeforeUse", organization=org)
        return None
    return OutboxEvent.from_item(item).detail()


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
    item: dict[str, Any] = {
        **shards.event_key(org_id, ulid),
        "entity": "Event",
        "event_id": f"evt_{ulid.lower()}",
        "event_type": event_type,
        "organization_id": org_id,
        "occurred_at": clock.iso(occurred),
        "payload": data,
    }
    event = OutboxEvent.from_item(item)
    large = inline_size(event, event.detail_json(default=str)) >= KEEP_LONGER_FROM_BYTES
    item["ttl"] = clock.epoch(occurred + (STORED_TTL if large else OUTBOX_TTL))
    return Put(item=item, condition="attribute_not_exists(PK)")
