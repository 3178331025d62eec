"""SQS redelivery and consumers that die mid-batch: message_sender and webhook_fanout.

SQS delivers at least once: the same message can come back after a crash or a visibility timeout, and can even be
handed to two consumers at once. Every record here is real: messages are sent through the API, their outbox events
published by the real publisher onto moto's bus, routed by the template's rules to moto's queues and received from
there. "Arrived" is what reached the outside world: provider sends (sandbox provider, counted) and webhook deliveries.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from functions.message_sender.app import handler as sender_handler
from functions.message_sender.app import record_handler
from functions.webhook_fanout.app import handler as fanout_handler
from switchboard import clock
from switchboard.messaging import messages
from switchboard.providers.base import ProviderUnavailable
from switchboard.store import get_store
from switchboard.webhooks import repository as webhook_repo
from tests.faults.conftest import ProviderSpy
from tests.faults.injection import Ledger
from tests.faults.pipeline import Pipeline
from tests.helpers import FakeContext
from tests.integration.support import Api


class LambdaKilled(BaseException):
    """The invocation dies (timeout, out of memory): nothing after this point of the batch runs or reports."""


def _send_messages(api: Api, channel: dict[str, Any], n: int) -> list[str]:
    ids = []
    for i in range(n):
        body = {"channel_id": channel["id"], "to": f"+1 415 555 {2600 + i:04d}", "text": {"body": f"hello {i}"}}
        resp = api.post("/v1/messages", json=body)
        assert resp.status_code == 202, resp.text
        ids.append(resp.json()["data"]["id"])
    return ids


def _queued_records(api: Api, pipeline: Pipeline) -> list[dict[str, Any]]:
    pipeline.publish()
    records = pipeline.receive("OutboundMessagesQueue")
    return [r for r in records if '"message.queued"' in r["body"]]


def _status(api: Api, message_id: str) -> str:
    return str(messages.get_item(get_store(), api.org_id, message_id, consistent=True)["status"])


def _failures(result: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in result.get("batchItemFailures", [])]


# message_sender ---------------------------------------------------------------------------------------------------
def test_sender_given_the_same_batch_twice_sends_each_message_once(api: Api, channel, spy: ProviderSpy):
    ledger = Ledger("message_sender: whole batch redelivered")
    ledger.accepted = _send_messages(api, channel, 4)
    records = _queued_records(api, Pipeline(api))
    assert len(records) == 4
    assert _failures(sender_handler({"Records": records}, FakeContext())) == []
    assert _failures(sender_handler({"Records": records}, FakeContext())) == []  # the redelivery
    ledger.arrived = list(spy.sent)
    ledger.check()
    assert {_status(api, m) for m in ledger.accepted} == {"sent"}


def test_sender_handed_one_message_twice_at_once_sends_it_once(api: Api, channel, spy: ProviderSpy):
    """Two consumers get the same message concurrently (SQS at-least-once). The first one's provider call is held
    until the second has finished its invocation: without a claim, both would hand the message to the provider."""
    ledger = Ledger("message_sender: one message to two consumers at once")
    ledger.accepted = _send_messages(api, channel, 1)
    (record,) = _queued_records(api, Pipeline(api))
    first_in_provider, second_done = threading.Event(), threading.Event()

    def hold_first(message_id: str, seen: int) -> None:
        if threading.current_thread().name == "first":
            first_in_provider.set()
            second_done.wait(timeout=5)

    spy.before = hold_first
    results: dict[str, Any] = {}

    def run(name: str) -> None:
        # Each consumer is its own Lambda container: its own BatchProcessor (the module's one is per container).
        processor = BatchProcessor(event_type=EventType.SQS)
        try:
            results[name] = process_partial_response(
                event={"Records": [record]}, record_handler=record_handler, processor=processor, context=FakeContext()
            )
        except BatchProcessingError:  # every record of the batch failed: Lambda retries the whole batch
            results[name] = {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}

    first = threading.Thread(target=run, args=("first",), name="first")
    first.start()
    assert first_in_provider.wait(timeout=5)
    run("second")
    second_done.set()
    first.join(timeout=10)
    assert not first.is_alive()
    ledger.arrived = list(spy.sent)
    ledger.check()
    assert _status(api, ledger.accepted[0]) == "sent"
    assert _failures(results["first"]) == []
    # The consumer that lost the race must not drop the message while the other could still fail: it reports it for
    # a retry (which then finds it sent and does nothing).
    assert _failures(results["second"]) == [record["messageId"]]
    assert _failures(sender_handler({"Records": [record]}, FakeContext())) == []
    assert spy.sent == ledger.accepted


def test_a_record_that_fails_alone_is_the_only_one_reported(api: Api, channel, spy: ProviderSpy):
    ledger = Ledger("message_sender: one record fails mid-batch")
    ledger.accepted = _send_messages(api, channel, 5)
    records = _queued_records(api, Pipeline(api))
    by_message = {r["messageId"]: r for r in records}
    victim = ledger.accepted[2]

    def provider_down_for_victim(message_id: str, seen: int) -> None:
        if message_id == victim:
            raise ProviderUnavailable("the provider timed out")

    spy.before = provider_down_for_victim
    failed = _failures(sender_handler({"Records": records}, FakeContext()))
    assert len(failed) == 1 and victim in by_message[failed[0]]["body"], failed
    assert _status(api, victim) == "pending"
    spy.before = None
    assert _failures(sender_handler({"Records": [by_message[failed[0]]]}, FakeContext())) == []
    ledger.arrived = list(spy.sent)
    ledger.check()


def test_an_invocation_killed_mid_batch_is_redelivered_whole_and_sends_nothing_twice(
    api: Api, channel, spy: ProviderSpy, monkeypatch
):
    ledger = Ledger("message_sender: invocation killed after 2 of 5 records")
    ledger.accepted = _send_messages(api, channel, 5)
    records = _queued_records(api, Pipeline(api))
    handled: list[str] = []

    def die_on_third(message_id: str, seen: int) -> None:
        handled.append(message_id)
        if len(handled) == 3:
            raise LambdaKilled

    spy.before = die_on_third
    with pytest.raises(LambdaKilled):
        sender_handler({"Records": records}, FakeContext())
    assert len(spy.sent) == 2
    spy.before = None
    # Lambda reported nothing: SQS redelivers the whole batch after the queue's visibility timeout (180 s), by which
    # time the dead invocation's send claim (60 s) has run out.
    later = clock.now() + timedelta(seconds=181)
    monkeypatch.setattr(clock, "now", lambda: later)
    assert _failures(sender_handler({"Records": records}, FakeContext())) == []
    ledger.arrived = list(spy.sent)
    ledger.check()
    assert {_status(api, m) for m in ledger.accepted} == {"sent"}


# webhook_fanout ---------------------------------------------------------------------------------------------------
def test_fanout_given_the_same_events_twice_creates_each_delivery_once(api: Api, channel):
    ledger = Ledger("webhook_fanout: events redelivered whole and in part")
    base = "/v1/settings/developer/webhooks/endpoints"
    endpoints = []
    for n in range(2):
        resp = api.post(base, json={"url": f"http://127.0.0.1:9/hook{n}", "filter_types": ["message.sent"]})
        assert resp.status_code == 201, resp.text
        endpoints.append(resp.json()["data"]["id"])
    pipeline = Pipeline(api)
    sent_records = _queued_records(api, pipeline)
    assert sent_records == []
    _send_messages(api, channel, 3)
    assert _failures(sender_handler({"Records": _queued_records(api, pipeline)}, FakeContext())) == []
    pipeline.publish()
    events = [r for r in pipeline.receive("WebhookEventsQueue") if '"message.sent"' in r["body"]]
    assert len(events) == 3
    ledger.accepted = [
        webhook_repo.delivery_id(json.loads(r["body"])["detail"]["event_id"], e) for r in events for e in endpoints
    ]
    assert _failures(fanout_handler({"Records": events}, FakeContext())) == []
    assert _failures(fanout_handler({"Records": events}, FakeContext())) == []  # redelivered
    assert _failures(fanout_handler({"Records": events[:2]}, FakeContext())) == []  # and again, in part
    dstore = webhook_repo.deliveries_store()
    deliveries = [
        i
        for n in range(webhook_repo.shards())
        for i in dstore.query_all(webhook_repo.deliveries_pk(api.org_id, n), index="GSI1")
    ]
    ledger.arrived = [d["id"] for d in deliveries]
    ledger.check()
    # Duplicate wake-up messages may be queued (a delivery never attempted is queued again); the sender drops all
    # but the first owner, so each delivery still gets one attempt. Their count is what the sender must absorb.
    queued = pipeline.receive("WebhookDeliveriesQueue")
    assert {json.loads(q["body"])["delivery_id"] for q in queued} == set(ledger.accepted)


def test_a_throttled_status_write_after_the_provider_accepted_does_not_send_twice(
    api: Api, channel, spy: ProviderSpy, monkeypatch
):
    """The provider took the message, then the `pending → sent` write is throttled beyond botocore's 5 attempts.
    Failing the record now would bring the message back after the claim's lease — and send it again; the sender
    keeps trying to record what already happened instead."""
    from tests.faults.injection import aws_faults

    ledger = Ledger("message_sender: status write throttled after the provider accepted")
    ledger.accepted = _send_messages(api, channel, 1)
    records = _queued_records(api, Pipeline(api))

    def sent_transition(params: dict[str, Any]) -> bool:
        return any(
            (op.get("Update") or {}).get("ExpressionAttributeValues", {}).get(":new", {}).get("S") == "sent"
            for op in params.get("TransactItems", [])
        )

    with aws_faults(monkeypatch) as faults:
        rule = faults.fail(
            "dynamodb", "TransactWriteItems", "ProvisionedThroughputExceededException", times=7, when=sent_transition
        )
        try:
            failed = _failures(sender_handler({"Records": records}, FakeContext()))
        except BatchProcessingError:  # the whole (one-record) batch failed
            failed = [records[0]["messageId"]]
        if failed:  # the record came back: SQS redelivers it once the visibility timeout has passed
            later = clock.now() + timedelta(seconds=181)
            monkeypatch.setattr(clock, "now", lambda: later)
            assert _failures(sender_handler({"Records": records}, FakeContext())) == []
    assert rule.fired == 7
    assert failed == [], "the sender should have recorded the send itself"
    ledger.arrived = list(spy.sent)
    ledger.check()
    assert _status(api, ledger.accepted[0]) == "sent"


def test_fanout_whose_queueing_partly_fails_is_retried_until_every_delivery_is_queued(api: Api, channel, monkeypatch):
    """SendMessageBatch answers with some entries Failed: the event's record is reported, comes back, and the
    deliveries created but never queued are queued then (the sender drops the duplicate wake-ups)."""
    from switchboard import aws

    ledger = Ledger("webhook_fanout: deliveries queue refuses some messages once")
    base = "/v1/settings/developer/webhooks/endpoints"
    endpoints = []
    for n in range(3):
        resp = api.post(base, json={"url": f"http://127.0.0.1:9/q{n}", "filter_types": ["message.sent"]})
        assert resp.status_code == 201, resp.text
        endpoints.append(resp.json()["data"]["id"])
    pipeline = Pipeline(api)
    _send_messages(api, channel, 2)
    assert _failures(sender_handler({"Records": _queued_records(api, pipeline)}, FakeContext())) == []
    pipeline.publish()
    events = [r for r in pipeline.receive("WebhookEventsQueue") if '"message.sent"' in r["body"]]
    assert len(events) == 2
    ledger.accepted = [
        webhook_repo.delivery_id(json.loads(r["body"])["detail"]["event_id"], e) for r in events for e in endpoints
    ]
    sqs = aws.client("sqs")
    real_batch = sqs.send_message_batch
    armed = [True]  # the queue refuses the first entry of each call, during the first invocation only

    def flaky_batch(QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        refuse = Entries[:1] if armed[0] else []
        passed = [e for e in Entries if e not in refuse]
        response = real_batch(QueueUrl=QueueUrl, Entries=passed) if passed else {"Successful": []}
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "injected"} for e in refuse]
        return {**response, "Failed": failed}

    monkeypatch.setattr(sqs, "send_message_batch", flaky_batch)
    first = _failures(fanout_handler({"Records": events}, FakeContext()))
    armed[0] = False
    assert sorted(first) == sorted(r["messageId"] for r in events), "each event lost one queueing: both come back"
    assert _failures(fanout_handler({"Records": events}, FakeContext())) == []
    queued = [json.loads(q["body"])["delivery_id"] for q in pipeline.receive("WebhookDeliveriesQueue")]
    ledger.arrived = queued
    ledger.check(duplicates_allowed=True)  # the sender's ownership claim drops duplicate wake-ups
