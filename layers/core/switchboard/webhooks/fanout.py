"""Fan-out (webhook_fanout): one domain event from the bus → one delivery per enabled, subscribed endpoint.

The delivery id is derived from (event id, endpoint id) and the delivery is written with `attribute_not_exists`, so
SQS or EventBridge redelivering the event never creates a second delivery. A delivery that exists but was never
attempted is queued again (its first message may have been lost between the put and the send); the sender drops
duplicate messages (see `delivery.py`).
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger

from switchboard import clock
from switchboard.errors import Conflict
from switchboard.store import Store, get_store
from switchboard.webhooks import dispatch
from switchboard.webhooks import repository as repo
from switchboard.webhooks.catalogue import TEST_EVENT, is_published, subscribed

Item = dict[str, Any]
logger = Logger(child=True)


class _Exists(Conflict):
    pass


def targets(endpoints: list[Item], event_type: str, data: dict[str, Any]) -> list[Item]:
    """The endpoints that get this event: a test event only its own endpoint, others every subscriber."""
    enabled = [e for e in endpoints if e.get("enabled")]
    if event_type == TEST_EVENT:
        return [e for e in enabled if e["id"] == data.get("endpoint_id")]
    return [e for e in enabled if subscribed(e.get("filter_types"), event_type)]


def delivery_item(org: str, endpoint_id: str, detail: dict[str, Any], now: str) -> Item:
    msg_id = repo.delivery_id(detail["event_id"], endpoint_id)
    item: Item = {
        **repo.delivery_key(org, msg_id),
        **repo.delivery_index(org, endpoint_id, now, msg_id),
        "entity": "WebhookDelivery",
        "id": msg_id,
        "organization_id": org,
        "endpoint_id": endpoint_id,
        "event_id": detail["event_id"],
        "event_type": detail["event_type"],
        "occurred_at": detail.get("occurred_at"),
        # The flat event body, serialized once: every attempt sends (and signs) exactly these bytes.
        "body": json.dumps(detail.get("data") or {}, separators=(",", ":"), ensure_ascii=False),
        "status": "pending",
        "attempt_count": 0,
        "run_attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
        "updated_at": now,
        "ttl": clock.epoch(clock.parse_iso(now) + repo.DELIVERY_RETENTION),
    }
    return item | repo.status_index(item, "pending")


def fan_out(store: Store, detail: dict[str, Any], endpoints: list[Item]) -> list[str]:
    """Create the event's deliveries and queue them; returns the ids queued."""
    org, event_type = detail["organization_id"], detail["event_type"]
    if not is_published(event_type):
        return []
    now = clock.now_iso()
    queued: list[str] = []
    generations: dict[str, int] = {}
    for endpoint in targets(endpoints, event_type, detail.get("data") or {}):
        item = delivery_item(org, endpoint["id"], detail, now)
        try:
            store.put(item, condition="attribute_not_exists(PK)", error=_Exists())
        except _Exists:
            existing = repo.get_delivery(store, org, item["id"], consistent=True) or {}
            never_tried = existing.get("status") == "pending" and not existing.get("attempt_count")
            if not (never_tried and not existing.get("owner")):
                continue  # a redelivered event: its delivery is already under way
            generations[item["id"]] = int(existing.get("generation") or 0)  # (requeued by the API, never tried)
        queued.append(item["id"])
    dispatch.enqueue(org, queued, generations)
    return queued


def handle_record(record: dict[str, Any], endpoints_of: dict[str, list[Item]]) -> list[str]:
    """One SQS record of WebhookEventsQueue (an EventBridge event) → the deliveries it queued. Raises when it fails:
    the consumer's `BatchProcessor` reports the record alone (SQS retries it, then the DLQ). `endpoints_of` keeps
    each organization's endpoints for the rest of the batch."""
    store = get_store()
    try:
        detail = json.loads(record["body"])["detail"]
        org = detail["organization_id"]
        if org not in endpoints_of:
            endpoints_of[org] = repo.list_endpoints(store, org)
        queued = fan_out(store, detail, endpoints_of[org])
    except Exception:
        logger.exception("fan-out failed; the event will be retried", extra={"message_id": record.get("messageId")})
        raise
    logger.info(
        "event fanned out",
        extra={"event_id": detail.get("event_id"), "event_type": detail.get("event_type"), "deliveries": queued},
    )
    return queued
