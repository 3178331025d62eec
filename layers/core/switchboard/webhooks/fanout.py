"""Fan-out (webhook_fanout): one domain event from the bus → one delivery per enabled, subscribed endpoint.

The event's payload is written once (`repository.event_item`), and each delivery refers to it by event id. The delivery
id is derived from (event id, endpoint id): one consistent BatchGetItem finds the deliveries a previous run of the
same event created, and only the missing ones are written (BatchWriteItem, 25 per request, unprocessed items retried
with back-off), so SQS or EventBridge redelivering the event never creates a second delivery. A delivery that exists
but was never attempted is queued again (its first message may have been lost between the write and the send); the
sender drops duplicate messages (see `delivery.py`).

The queued deliveries are paced per organization (`pace.py`, one reservation per organization per batch): each message
carries the delay its organization's budget gives it; events whose deliveries would wait past SQS's longest delay go
back to WebhookEventsQueue.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from switchboard import clock
from switchboard.events.outbox import read_detail
from switchboard.store import Store, get_store
from switchboard.webhooks import dispatch, pace
from switchboard.webhooks import repository as repo
from switchboard.webhooks.catalogue import TEST_EVENT, is_published, subscribed

Item = dict[str, Any]
logger = Logger(child=True)
_EXISTING = ("id", "status", "attempt_count", "owner", "generation")


def targets(endpoints: list[Item], event_type: str, data: dict[str, Any]) -> list[Item]:
    """The endpoints that get this event: a test event only its own endpoint, others every subscriber."""
    enabled = [e for e in endpoints if e.get("enabled")]
    if event_type == TEST_EVENT:
        return [e for e in enabled if e["id"] == data.get("endpoint_id")]
    return [e for e in enabled if subscribed(e.get("filter_types"), event_type)]


def delivery_item(org: str, endpoint_id: str, detail: dict[str, Any], now: str, due: str) -> Item:
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
        "status": "pending",
        "attempt_count": 0,
        "run_attempts": 0,
        "next_attempt_at": due,
        "created_at": now,
        "updated_at": now,
        "ttl": clock.epoch(clock.parse_iso(now) + repo.DELIVERY_RETENTION),
    }
    return item | repo.status_index(item, "pending")


def _never_tried(existing: Item) -> bool:
    return existing.get("status") == "pending" and not existing.get("attempt_count") and not existing.get("owner")


@dataclass
class Plan:
    """What fan-out will do for one event: the deliveries to write (`fresh`: endpoint and delivery id) and the ones
    that exist but were never tried (`again`, with their generations), all of them queued."""

    detail: dict[str, Any]
    fresh: list[tuple[Item, str]] = field(default_factory=list)
    again: list[str] = field(default_factory=list)
    generations: dict[str, int] = field(default_factory=dict)

    @property
    def queued(self) -> list[str]:
        return [i for _, i in self.fresh] + self.again


def plan(detail: dict[str, Any], endpoints: list[Item]) -> Plan:
    """The event's deliveries: one consistent BatchGetItem tells the ones a previous run created (a redelivered
    event): one already under way is left alone, one never tried is queued again."""
    org, event_type = detail["organization_id"], detail["event_type"]
    chosen = targets(endpoints, event_type, detail.get("data") or {}) if is_published(event_type) else []
    if not chosen:
        return Plan(detail)
    ids = [repo.delivery_id(detail["event_id"], e["id"]) for e in chosen]
    found = repo.deliveries_store().batch_get(
        [repo.delivery_key(org, i) for i in ids], consistent=True, projection=_EXISTING
    )
    existing = {str(i["id"]): i for i in found}
    again = [i for i in ids if i in existing and _never_tried(existing[i])]
    return Plan(
        detail,
        fresh=[(e, i) for e, i in zip(chosen, ids, strict=True) if i not in existing],
        again=again,
        generations={i: int(existing[i].get("generation") or 0) for i in again},  # (requeued by the API)
    )


def execute(todo: Plan, delays: list[float], now: datetime) -> list[str]:
    """Write the plan's new deliveries and its event's payload (BatchWriteItem), then queue every delivery with its
    delay (`delays[n]` for `todo.queued[n]`); returns the ids queued."""
    detail = todo.detail
    org = detail["organization_id"]
    if todo.fresh:
        now_iso = clock.iso(now)
        items = [repo.event_item(org, detail, now_iso, clock.epoch(now + repo.PAYLOAD_RETENTION))]
        items += [
            delivery_item(org, e["id"], detail, now_iso, clock.iso(now + timedelta(seconds=delay)))
            for (e, _), delay in zip(todo.fresh, delays, strict=False)
        ]
        repo.deliveries_store().batch_put(items)
    dispatch.enqueue(org, todo.queued, todo.generations, delays)
    return todo.queued


def fan_out(store: Store, detail: dict[str, Any], endpoints: list[Item]) -> list[str] | None:
    """Create one event's deliveries and queue them; returns the ids queued, or None when the organization's
    schedule is full (nothing was written: the caller sends the event back)."""
    todo = plan(detail, endpoints)
    if not todo.queued:
        return []
    now = clock.now()
    delays = pace.reserve(detail["organization_id"], len(todo.queued), now)
    return None if delays is None else execute(todo, delays, now)


def plan_batch(records: list[dict[str, Any]]) -> dict[str, Callable[[], list[str]]]:
    """SQS records of WebhookEventsQueue (EventBridge events) → per message id, the step that carries the record out
    (the deliveries it queued). Every record is planned first, so the events of one organization in the batch share
    one pacing reservation (one write of its schedule per batch, not per event); when its schedule is full they all
    go back to the queue. The consumer's `BatchProcessor` runs each step: a step that raises fails its record alone
    (SQS retries it, then the DLQ)."""
    store = get_store()
    endpoints_of: dict[str, list[Item]] = {}
    steps: dict[str, Callable[[], list[str]]] = {}
    planned: dict[str, list[tuple[dict[str, Any], Plan]]] = {}
    for record in records:
        try:
            detail = read_detail(store, json.loads(record["body"])["detail"])
            if detail is None:  # erased before it was fanned out: nothing to deliver
                steps[record["messageId"]] = list
                continue
            org = detail["organization_id"]
            if org not in endpoints_of:
                endpoints_of[org] = repo.list_endpoints(store, org)
            planned.setdefault(org, []).append((record, plan(detail, endpoints_of[org])))
        except Exception as err:
            logger.exception("fan-out failed; the event will be retried", extra={"message_id": record.get("messageId")})
            steps[record["messageId"]] = functools.partial(_fail, err)
    for org, todo in planned.items():
        now = clock.now()
        try:
            delays = pace.reserve(org, sum(len(p.queued) for _, p in todo), now)
        except Exception as err:
            logger.exception("fan-out could not be paced; the events will be retried", extra={"organization_id": org})
            steps |= {record["messageId"]: functools.partial(_fail, err) for record, _ in todo}
            continue
        offset = 0
        for record, one in todo:
            part = None if delays is None else delays[offset : offset + len(one.queued)]
            offset += len(one.queued)
            steps[record["messageId"]] = functools.partial(_carry_out, record, one, part, now)
    return steps


def _fail(err: Exception) -> list[str]:
    raise err


def _carry_out(record: dict[str, Any], one: Plan, delays: list[float] | None, now: datetime) -> list[str]:
    if not one.queued:
        return []  # nothing to send (not subscribed, or a redelivered event already under way)
    if delays is None:
        dispatch.defer_event(record["body"], pace.HORIZON)
        logger.info("event deferred: the organization's schedule is full", extra=_log(one))
        return []
    try:
        execute(one, delays, now)
    except Exception:
        logger.exception("fan-out failed; the event will be retried", extra={"message_id": record.get("messageId")})
        raise
    logger.info("event fanned out", extra=_log(one))
    return list(one.queued)


def _log(todo: Plan) -> dict[str, Any]:
    return {
        "event_id": todo.detail.get("event_id"),
        "event_type": todo.detail.get("event_type"),
        "deliveries": todo.queued,
    }
