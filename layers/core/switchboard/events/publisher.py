"""Stream records → EventBridge entries, in chunks of 10, reporting exactly the records that failed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from switchboard.events.outbox import EVENT_SOURCE, OutboxEvent
from switchboard.store.table import deserialize

MAX_ENTRIES_PER_CALL = 10


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


def to_entry(event: OutboxEvent, bus_name: str) -> dict[str, Any]:
    return {
        "Source": EVENT_SOURCE,
        "DetailType": event.event_type,
        "Detail": json.dumps(event.detail(), separators=(",", ":")),
        "EventBusName": bus_name,
        "Resources": [],
    }


def publish(entries: list[PendingEntry], bus_name: str, events_client: Any) -> list[str]:
    """Put every entry on the bus; return the record ids of the entries that failed (to be retried)."""
    failed: list[str] = []
    for start in range(0, len(entries), MAX_ENTRIES_PER_CALL):
        chunk = entries[start : start + MAX_ENTRIES_PER_CALL]
        try:
            resp = events_client.put_events(Entries=[to_entry(p.event, bus_name) for p in chunk])
        except Exception:  # noqa: BLE001 - a failed call fails every entry of its chunk; the stream retries them
            failed.extend(p.record_id for p in chunk)
            continue
        if resp.get("FailedEntryCount", 0):
            for pending, result in zip(chunk, resp.get("Entries", []), strict=False):
                if result.get("ErrorCode"):
                    failed.append(pending.record_id)
    return failed
