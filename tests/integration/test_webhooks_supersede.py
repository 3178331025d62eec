"""An API retry or recovery of a `retrying` delivery supersedes the message still scheduled for its next attempt:
that stale message is acknowledged and dropped when it comes back (no attempt, no reschedule, no redelivery towards
the DLQ), and only the new message drives the delivery. The pipeline is the one of `test_webhooks.py` (moto's
queues, the real handlers, a local receiver)."""

from __future__ import annotations

import json
from typing import Any

from functions.webhook_sender.app import handler as sender_handler
from switchboard import clock
from switchboard.webhooks import delivery, repository
from tests.helpers import FakeContext
from tests.integration.support import Api
from tests.integration.test_webhooks import BASE, Pipeline, attempts, create_endpoint, deliveries, pipeline, receiver
from tests.webhook_receiver import Answer

__all__ = ["pipeline", "receiver"]  # the fixtures, shared with test_webhooks.py


def queue_depth(pipeline: Pipeline, queue: str) -> tuple[int, int]:
    attrs = pipeline.sqs.get_queue_attributes(
        QueueUrl=pipeline.api.resources.queue_url(queue),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def failed_once(api: Api, pipeline: Pipeline, receiver, path: str) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """An endpoint whose first attempt failed: the delivery is `retrying`, its message invisible until the next
    attempt (5 s). Returns the endpoint, the delivery id and that message's record."""
    endpoint = create_endpoint(api, receiver.url(path))
    receiver.answer(Answer(500))
    event_id = pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.fan_out()
    (stale,) = pipeline.send()
    assert "generation" not in json.loads(stale["body"])  # fan-out's message: the old format, generation 0
    msg_id = repository.delivery_id(event_id, endpoint["id"])
    (row,) = deliveries(api, endpoint_id=endpoint["id"])
    assert row["status"] == "retrying" and len(receiver.of(path)) == 1 and len(pipeline.visibility) == 1
    return endpoint, msg_id, stale


def comes_back_now(pipeline: Pipeline, record: dict[str, Any]) -> None:
    """The stale message's scheduled time arrives (its visibility runs out)."""
    pipeline.sqs.change_message_visibility(
        QueueUrl=pipeline.api.resources.queue_url("WebhookDeliveriesQueue"),
        ReceiptHandle=record["receiptHandle"],
        VisibilityTimeout=0,
    )


def split(records: list[dict[str, Any]], stale: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    (old,) = [r for r in records if r["messageId"] == stale["messageId"]]
    (new,) = [r for r in records if r["messageId"] != stale["messageId"]]
    return old, new


def test_recovering_a_retrying_delivery_drops_its_scheduled_message(api, pipeline, receiver):
    endpoint, msg_id, stale = failed_once(api, pipeline, receiver, "/recovered")
    resp = api.post(f"{BASE}/endpoints/{endpoint['id']}/recover", json={"since": endpoint["created_at"]})
    assert resp.status_code == 202, resp.text
    assert pipeline.jobs() == 1  # the recovery job's one chunk requeues it

    # The stale message comes back first, before the recovery's own message was handled: acknowledged without an
    # attempt (before, it claimed the fresh run and kept driving it with its receive count).
    comes_back_now(pipeline, stale)
    old, new = split(pipeline.receive("WebhookDeliveriesQueue"), stale)
    assert json.loads(new["body"])["generation"] == 1
    assert pipeline.invoke(sender_handler, "WebhookDeliveriesQueue", [old]) == {"batchItemFailures": []}
    assert len(receiver.of("/recovered")) == 1  # no request
    assert len(pipeline.visibility) == 1  # not put back "not due"
    assert queue_depth(pipeline, "WebhookDeliveriesQueue") == (0, 1)  # deleted; only the new message remains
    (row,) = deliveries(api, endpoint_id=endpoint["id"])
    assert row["status"] == "pending" and row["attempt_count"] == 1  # untouched by the stale message

    # The recovery's message delivers it, once.
    assert pipeline.invoke(sender_handler, "WebhookDeliveriesQueue", [new]) == {"batchItemFailures": []}
    calls = receiver.of("/recovered")
    assert len(calls) == 2 and calls[-1].headers["webhook-id"] == msg_id
    (row,) = deliveries(api, endpoint_id=endpoint["id"])
    assert row["status"] == "succeeded" and row["attempt_count"] == 2
    assert [(a["attempt"], a["trigger"]) for a in attempts(api, msg_id)] == [(2, "manual"), (1, "scheduled")]
    assert queue_depth(pipeline, "WebhookDeliveriesQueue") == (0, 0)
    assert queue_depth(pipeline, "WebhookDeliveriesDLQ") == (0, 0)


def test_a_stale_message_returning_while_the_new_run_waits_is_dropped_not_redelayed(api, pipeline, receiver):
    endpoint, msg_id, stale = failed_once(api, pipeline, receiver, "/retried")
    receiver.answer(Answer(503))
    resp = api.post(f"{BASE}/deliveries/{msg_id}/retry")  # the single-delivery retry, same rule
    assert resp.status_code == 202, resp.text
    (new,) = pipeline.send()  # the retry's message: attempt 2 fails, rescheduled 5 s out
    assert new["messageId"] != stale["messageId"] and json.loads(new["body"])["generation"] == 1
    assert len(receiver.of("/retried")) == 2 and len(pipeline.visibility) == 2

    comes_back_now(pipeline, stale)  # the first run's message: its next attempt was due now
    (old,) = pipeline.receive("WebhookDeliveriesQueue")
    assert old["messageId"] == stale["messageId"]
    assert pipeline.invoke(sender_handler, "WebhookDeliveriesQueue", [old]) == {"batchItemFailures": []}
    assert len(receiver.of("/retried")) == 2  # no extra attempt ahead of the new run's schedule
    assert len(pipeline.visibility) == 2  # and not delayed again: gone
    assert queue_depth(pipeline, "WebhookDeliveriesQueue") == (0, 1)  # the new run's message only
    (row,) = deliveries(api, endpoint_id=endpoint["id"])
    assert row["status"] == "retrying" and row["attempt_count"] == 2


def test_a_claim_read_before_a_recovery_is_refused_after_it(api, pipeline, receiver):
    """The generation is checked again in the claim's condition: a stale message that read the delivery just
    before an API retry cannot claim it just after."""
    _, msg_id, stale = failed_once(api, pipeline, receiver, "/raced")
    org = api.org_id
    read = repository.get_delivery(org, msg_id, consistent=True)
    assert read is not None and delivery.generation_of(read) == 0
    assert api.post(f"{BASE}/deliveries/{msg_id}/retry").status_code == 202
    now = clock.now()
    assert delivery._claim(org, read, stale["messageId"], now, 0) is None
    claimed = delivery._claim(org, read, "the-retry-message", now, 1)
    assert claimed is not None and claimed["owner"] == "the-retry-message"


def test_messages_without_a_generation_still_drive_deliveries_never_retried(api, pipeline, receiver):
    """Backward compatible: a message queued before generations existed (no field) drives a delivery that was
    never retried by the API, as before."""
    create_endpoint(api, receiver.url("/legacy"))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.fan_out()
    (record,) = pipeline.receive("WebhookDeliveriesQueue")
    body = json.loads(record["body"])
    assert set(body) == {"organization_id", "delivery_id"}
    assert sender_handler({"Records": [record]}, FakeContext()) == {"batchItemFailures": []}
    assert len(receiver.of("/legacy")) == 1 and deliveries(api)[0]["status"] == "succeeded"
