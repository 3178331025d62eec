"""The outbox relay under EventBridge faults: `put_events` calls that fail outright for a while (the bus is down:
botocore retries each call, then the publisher fails its chunk) and calls that succeed with some entries refused
(`FailedEntryCount`, per-entry `ErrorCode`).

The relay runs exactly as in the local stack: moto's DynamoDB stream of the table, read by the local
`StreamPoller` with the template's event source mapping (filter, batch size, ReportBatchItemFailures, 10 retries,
on-failure destination), invoking `functions/event_publisher` — so Lambda's checkpointing (restart from the lowest
reported failure, later records sent again) is part of what is tested. What arrived is read from the queues the
template's rules feed. Records re-sent after a partial failure arrive twice: allowed, because every consumer
deduplicates by `event_id` (webhook fan-out: deterministic delivery ids; message_sender: status and send claim).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest

from local.functions import FunctionPool
from local.pollers import StreamPoller
from switchboard import aws
from switchboard.store import get_store
from tests.faults.injection import Ledger, aws_faults
from tests.faults.pipeline import Pipeline
from tests.integration.support import Api

QUEUES = ("WebhookEventsQueue", "OutboundMessagesQueue")


class FlakyBus:
    """Per-entry refusals: an entry whose event id is chosen is refused (ErrorCode) the first `refusals` times it is
    put; the other entries of the same call really go to moto's bus. Whole-call failures come from AwsFaults."""

    def __init__(self, client: Any, chosen: set[str], refusals: int = 1) -> None:
        self.client = client
        self.real_put_events = client.put_events
        self.chosen, self.refusals = chosen, refusals
        self.refused: Counter[str] = Counter()
        self.calls = 0
        self._lock = threading.Lock()

    def put_events(self, Entries: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            ids = [json.loads(entry["Detail"])["event_id"] for entry in Entries]
            refuse = [i in self.chosen and self.refused[i] < self.refusals for i in ids]
            passed = [e for e, r in zip(Entries, refuse, strict=True) if not r]
            real = self.real_put_events(Entries=passed, **kw)["Entries"] if passed else []
            self.refused.update(i for i, r in zip(ids, refuse, strict=True) if r)  # only when the call got through
        results, it = [], iter(real)
        for r in refuse:
            results.append({"ErrorCode": "InternalFailure", "ErrorMessage": "injected"} if r else next(it))
        return {"FailedEntryCount": sum(refuse), "Entries": results}


@pytest.fixture
def relay(api: Api):
    """The template's stream mapping of EventPublisherFunction, played by the local stack's poller (not started as
    a thread: the test drives `poll_once`)."""
    template, resources = api.template, api.resources
    spec = template.function("EventPublisherFunction")
    (mapping,) = spec.stream_events
    pool = FunctionPool(
        spec,
        root=template.root,
        size=1,
        function_name=resources.function_name(spec.logical_id),
        function_arn=resources.function_arn(spec.logical_id),
    )
    poller = StreamPoller(
        pool=pool,
        mapping=mapping,
        stream_arn=resources.stream_arn(mapping.table),
        streams_client=aws.client("dynamodbstreams"),
        sqs_client=aws.client("sqs"),
        on_failure_url=resources.physical.get(mapping.on_failure) if mapping.on_failure else None,
        stop=threading.Event(),
    )
    return poller


def _drain(poller: StreamPoller, max_polls: int = 200) -> int:
    """Poll until the stream has nothing left for the publisher (bounded); returns the invocations made."""
    idle = 0
    for _ in range(max_polls):
        busy = poller.poll_once()
        idle = 0 if busy else idle + 1
        if idle >= 3:
            return poller.invocations
    raise AssertionError("the relay never caught up")


def _arrived(pipeline: Pipeline) -> list[str]:
    ids = []
    for queue in QUEUES:
        ids += [json.loads(r["body"])["detail"]["event_id"] for r in pipeline.receive(queue)]
    return ids


def _all_outbox_events() -> list[str]:
    client = aws.client("dynamodb")
    ids, kwargs = [], {"TableName": get_store().table_name}
    while True:
        page = client.scan(**kwargs)
        ids += [i["event_id"]["S"] for i in page["Items"] if i["SK"]["S"].startswith("EVENT#")]
        if "LastEvaluatedKey" not in page:
            return ids
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _write_changes(api: Api, n: int) -> None:
    for i in range(n):
        resp = api.post("/v1/contacts", json={"name": f"Relay {i}", "phone": f"+1 415 606 {i:04d}"})
        assert resp.status_code == 201, resp.text


def test_a_bus_outage_then_refused_entries_lose_no_event(api: Api, relay: StreamPoller, monkeypatch):
    ledger = Ledger("event_publisher: bus down for a while, then entries refused")
    _write_changes(api, 25)
    chosen = set(_all_outbox_events()[::4])  # every 4th event is refused once by a bus that answers
    bus = FlakyBus(aws.client("events"), chosen)
    monkeypatch.setattr(aws.client("events"), "put_events", bus.put_events)
    with aws_faults(monkeypatch) as faults:
        # The bus is down for the first 3 calls, each retried by botocore (5 attempts each) before it fails.
        outage = faults.fail("events", "PutEvents", "InternalException", times=15, status=500)
        invocations = _drain(relay)
    ledger.accepted = _all_outbox_events()
    ledger.arrived = _arrived(Pipeline(api))
    ledger.check(duplicates_allowed=True)
    assert outage.fired == 15 and sum(bus.refused.values()) == len(chosen) > 0
    assert invocations > 2, "the failed batches should have been retried"
    dlq = api.resources.queue_url("EventPublisherDLQ")
    assert not aws.client("sqs").receive_message(QueueUrl=dlq).get("Messages"), "nothing may reach the DLQ"
    print(f"[fault]   publisher invocations={invocations} failed calls={outage.fired // 5} refused={len(chosen)}")


def test_the_publisher_reports_exactly_the_refused_entries(api: Api, monkeypatch):
    """One invocation: a call that fails whole fails its 10 records; a refused entry fails alone; the response names
    exactly those stream records (and Lambda restarts from the lowest of them)."""
    from functions.event_publisher.app import handler
    from tests.helpers import FakeContext

    _write_changes(api, 25)
    pipeline = Pipeline(api)
    records = pipeline.stream_records()[:25]
    event_of = {r["dynamodb"]["SequenceNumber"]: r["dynamodb"]["NewImage"]["event_id"]["S"] for r in records}
    refused = {
        records[12]["dynamodb"]["NewImage"]["event_id"]["S"],
        records[21]["dynamodb"]["NewImage"]["event_id"]["S"],
    }
    bus = FlakyBus(aws.client("events"), refused)
    monkeypatch.setattr(aws.client("events"), "put_events", bus.put_events)
    with aws_faults(monkeypatch) as faults:
        faults.fail("events", "PutEvents", "InternalException", times=5, status=500)  # the first call (records 0-9)
        result = handler({"Records": records}, FakeContext())
    failed = [f["itemIdentifier"] for f in result["batchItemFailures"]]
    expected = [r["dynamodb"]["SequenceNumber"] for r in records[:10]]
    expected += [s for s, e in event_of.items() if e in refused]
    assert failed == expected
    arrived = _arrived(pipeline)
    assert sorted(arrived) == sorted(e for s, e in event_of.items() if s not in set(failed))


def test_a_bus_down_beyond_every_retry_parks_the_batch_and_the_redrive_recovers_it(
    api: Api, relay: StreamPoller, monkeypatch
):
    """The bus stays down longer than the mapping's retries: the batch goes to EventPublisherDLQ (Lambda's
    on-failure record: shard and sequence range only). Until the redrive, those events are missing downstream;
    `switchboard.events.redrive` reads the range again from the stream and publishes it: nothing is lost."""
    from switchboard.events.redrive import redrive

    ledger = Ledger("event_publisher: bus down beyond the retries, then DLQ redrive")
    _write_changes(api, 12)
    relay.max_retries = 2  # the template says 10; the behaviour at the limit is the same, the test is faster
    with aws_faults(monkeypatch) as faults:
        faults.fail("events", "PutEvents", "InternalException", status=500)  # down until cleared
        _drain(relay)
        assert faults.injected["PutEvents"] >= 3 * 5
    pipeline = Pipeline(api)
    ledger.accepted = _all_outbox_events()
    missing = set(ledger.accepted) - set(_arrived(pipeline))
    print(f"[fault]   before the redrive: {len(missing)} of {len(ledger.accepted)} events parked in the DLQ")
    assert missing == set(ledger.accepted)

    report = redrive(
        sqs=aws.client("sqs"),
        streams=aws.client("dynamodbstreams"),
        events=aws.client("events"),
        queue_url=api.resources.queue_url("EventPublisherDLQ"),
        bus=api.resources.physical["EventBus"],
    )
    assert report.failed == 0 and not report.unreadable and report.batches >= 1, report
    ledger.arrived = _arrived(pipeline)
    ledger.check(duplicates_allowed=True)
    assert not aws.client("sqs").receive_message(QueueUrl=api.resources.queue_url("EventPublisherDLQ")).get("Messages")
