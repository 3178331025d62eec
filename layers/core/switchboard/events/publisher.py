"""Stream records → EventBridge entries, in requests within PutEvents' limits, reporting exactly the records that
failed.

Requests hold at most 10 entries and 256 KiB (switchboard.events.limits). An event whose whole entry would exceed
`MAX_INLINE_ENTRY_BYTES` is published by reference: same source, type and envelope, no `data`, and `stored` naming its
outbox item, which every consumer reads back (`outbox.read_detail`; the item is kept long enough, see outbox.py).
No event is dropped for its size.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from switchboard.events.limits import MAX_INLINE_ENTRY_BYTES, entry_size, requests
from switchboard.events.outbox import EVENT_SOURCE, OutboxEvent, inline_size
from switchboard.store.table import deserialize


@dataclass(frozen=True)
class PendingEntry:
    record_id: str  # the stream record's sequence number (the batch item identifier)
    event: OutboxEvent


def outbox_events(records: Iterable[dict[str, Any]]) -> list[PendingEntry]:
    """Outbox INSERTs among stream records (the mapping's filter already keeps only those; this re-checks)."""
    out: list[PendingEntry] = []
    for record in records:
        ddb = record.get("dynamodb") or {}
        if record.get("eventName") != "INSERT":
            continue
        image = ddb.get("NewImage") or {}
        if not str(image.get("SK", {}).get("S", "")).startswith("EVENT#"):
            continue
        out.append(PendingEntry(str(ddb.get("SequenceNumber", "")), OutboxEvent.from_item(deserialize(image))))
    return out


def fits_inline(event: OutboxEvent, detail: str | None = None) -> bool:
    """Whether the event goes on the bus whole (else by reference)."""
    return inline_size(event, detail) <= MAX_INLINE_ENTRY_BYTES


def to_entry(event: OutboxEvent, bus_name: str) -> dict[str, Any]:
    """The event's PutEvents entry: the whole detail, or a reference to its outbox item when that is too large."""
    detail = event.detail_json()
    if not fits_inline(event, detail):
        detail = json.dumps(event.reference(), separators=(",", ":"))
    return {
        "Source": EVENT_SOURCE,
        "DetailType": event.event_type,
        "Detail": detail,
        "EventBusName": bus_name,
        "Resources": [],
    }


def publish(entries: list[PendingEntry], bus_name: str, events_client: Any) -> list[str]:
    """Put every entry on the bus; return the record ids of the entries that failed (to be retried)."""
    failed: list[str] = []
    built = [(pending, to_entry(pending.event, bus_name)) for pending in entries]
    for chunk in requests(built, lambda pair: entry_size(pair[1])):
        try:
            resp = events_client.put_events(Entries=[entry for _, entry in chunk])
        except Exception:  # noqa: BLE001 - a failed call fails every entry of its chunk; the stream retries them
            failed.extend(pending.record_id for pending, _ in chunk)
            continue
        if resp.get("FailedEntryCount", 0):
            for (pending, _), result in zip(chunk, resp.get("Entries", []), strict=False):
                if result.get("ErrorCode"):
                    failed.append(pending.record_id)
    return failed
