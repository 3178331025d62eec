"""Queueing deliveries: one WebhookDeliveriesQueue message per delivery (`{"organization_id", "delivery_id"}`, plus
`"generation"` once an API retry or recovery has bumped the delivery's), sent with the delay fan-out's pacing gave it
(`pace.py`); and sending a fan-out's event back to WebhookEventsQueue when its organization's schedule is full.

The message is only a wake-up call: the delivery item holds the state, and the sender re-reads it, so a duplicate
or stale message is harmless (see `delivery.py`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from switchboard import aws
from switchboard.config import get_settings
from switchboard.errors import ServiceUnavailable

BATCH = 10


def message_body(org_id: str, delivery_id: str, generation: int = 0) -> str:
    body: dict[str, str | int] = {"organization_id": org_id, "delivery_id": delivery_id}
    if generation:
        body["generation"] = generation  # absent = 0: a fan-out message is what it always was
    return json.dumps(body, separators=(",", ":"))


MAX_DELAY = 900  # SQS: DelaySeconds is at most 15 minutes


def enqueue(
    org_id: str,
    delivery_ids: Sequence[str],
    generations: Mapping[str, int] | None = None,
    delays: Sequence[float] | None = None,
) -> None:
    """Send one message per delivery (10 per call), each with its delivery's generation (`generations`, default 0)
    and delay (`delays[n]` seconds for `delivery_ids[n]`, default none); raises ServiceUnavailable when any could
    not be sent."""
    generations = generations or {}
    if not delivery_ids:
        return
    sqs = aws.client("sqs")
    url = get_settings().webhook_deliveries_queue_url
    failed: list[str] = []
    for start in range(0, len(delivery_ids), BATCH):
        chunk = list(delivery_ids[start : start + BATCH])
        entries: list[dict[str, str | int]] = []
        for n, d in enumerate(chunk):
            entry: dict[str, str | int] = {"Id": str(n), "MessageBody": message_body(org_id, d, generations.get(d, 0))}
            delay = delay_seconds(delays[start + n]) if delays else 0
            if delay:
                entry["DelaySeconds"] = delay
            entries.append(entry)
        response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        failed += [chunk[int(f["Id"])] for f in response.get("Failed") or []]
    if failed:
        raise ServiceUnavailable(f"{len(failed)} webhook deliveries could not be queued; retry.")


def delay_seconds(delay: float) -> int:
    """Whole seconds for DelaySeconds, never early (the sender attempts a delivery once it is due)."""
    return max(0, min(MAX_DELAY, math.ceil(delay)))


def defer_event(body: str, delay: float) -> None:
    """Send a WebhookEventsQueue message's body (an EventBridge event) to that queue again, `delay` seconds away."""
    aws.client("sqs").send_message(
        QueueUrl=get_settings().webhook_events_queue_url, MessageBody=body, DelaySeconds=delay_seconds(delay)
    )
