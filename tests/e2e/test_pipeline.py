"""The event pipeline of the local stack, in-process: outbox item → table stream → event_publisher → bus → rules →
queues. The stack runs here (moto server, stream poller, no HTTP, no queue consumers), so the test can write to the
table with `switchboard.store` and read the queues the rules feed."""

from __future__ import annotations

import json
import time
import uuid

import boto3
import pytest

from local.stack import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pipeline():
    stack = LocalStack(http=False, sqs_pollers=False, prefix=f"sb-pipeline-{uuid.uuid4().hex[:6]}")
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def receive_all(sqs, url: str, want: int, timeout: float = 10.0) -> list[dict]:
    """Every message of the queue once `want` have arrived (or the deadline passed), deleted as read."""
    deadline = time.monotonic() + timeout
    bodies: list[dict] = []
    while time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) >= want and not messages:
            return bodies
        if not messages:
            time.sleep(0.05)
    return bodies


def test_outbox_events_reach_the_queues_their_rules_name(pipeline):
    from switchboard.events.outbox import outbox_put
    from switchboard.store import get_store

    store = get_store()
    org = pipeline.info.organization_id
    sqs = boto3.client("sqs")
    webhook_url = pipeline.resources.queue_url("WebhookEventsQueue")
    outbound_url = pipeline.resources.queue_url("OutboundMessagesQueue")

    store.put({"PK": f"ORG#{org}", "SK": f"NOTE#{uuid.uuid4().hex}", "entity": "Note"})  # not an event: filtered
    started = time.monotonic()
    store.transact([outbox_put(org, "contact.created", {"contact_id": "ct_1", "name": "Ada"})])
    store.transact([outbox_put(org, "message.queued", {"message_id": "m_1"})])

    webhook = receive_all(sqs, webhook_url, want=1)
    outbound = receive_all(sqs, outbound_url, want=1)
    elapsed = time.monotonic() - started

    assert [b["detail-type"] for b in webhook] == ["contact.created"]
    assert [b["detail-type"] for b in outbound] == ["message.queued"]
    event = webhook[0]
    assert event["source"] == "switchboard"
    detail = event["detail"]
    assert detail["event_type"] == "contact.created"
    assert detail["organization_id"] == org
    assert detail["event_id"].startswith("evt_")
    assert detail["occurred_at"].endswith("Z")
    assert detail["data"] == {"contact_id": "ct_1", "name": "Ada"}
    assert outbound[0]["detail"]["data"] == {"message_id": "m_1"}
    assert elapsed < 5, f"the pipeline took {elapsed:.1f} s"


def test_a_cancelled_transaction_publishes_nothing_and_does_not_stall_the_stream(pipeline):
    from switchboard.errors import Conflict
    from switchboard.events.outbox import outbox_put
    from switchboard.store import Put, get_store

    store = get_store()
    org = pipeline.info.organization_id
    sqs = boto3.client("sqs")
    webhook_url = pipeline.resources.queue_url("WebhookEventsQueue")
    taken = {"PK": f"ORG#{org}", "SK": f"SENTINEL#{uuid.uuid4().hex}"}
    store.put(taken)

    with pytest.raises(Conflict):
        store.transact(
            [
                outbox_put(org, "contact.deleted", {"contact_id": "ct_x"}),
                Put(item=taken, condition="attribute_not_exists(PK)"),
            ]
        )
    store.transact([outbox_put(org, "contact.updated", {"contact_id": "ct_2"})])

    bodies = receive_all(sqs, webhook_url, want=1)
    assert [b["detail-type"] for b in bodies] == ["contact.updated"]


def test_nothing_lands_in_the_publisher_dead_letter_queue(pipeline):
    sqs = boto3.client("sqs")
    url = pipeline.resources.queue_url("EventPublisherDLQ")
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
