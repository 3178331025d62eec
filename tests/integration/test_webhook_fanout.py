"""Fan-out into DeliveriesTable against moto: the event's payload stored once, deliveries written with BatchWriteItem
and never twice for a redelivered event, each organization paced at its rate (`webhooks.pace`)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from functions.webhook_fanout.app import handler as fanout_handler
from switchboard import aws, clock
from switchboard.config import reset_settings
from switchboard.webhooks import pace, repository
from tests.helpers import FakeContext
from tests.integration.support import Api
from tests.integration.test_webhooks import (  # noqa: F401
    BASE,
    Pipeline,
    create_endpoint,
    deliveries,
    pipeline,
    receiver,
)
from tests.webhook_receiver import Receiver


def table_items(org: str) -> list[dict[str, Any]]:
    """Every item of DeliveriesTable that names the organization (a scan of moto)."""
    client = aws.client("dynamodb")
    found, start = [], None
    while True:
        page = client.scan(
            TableName=repository.deliveries_store().table_name, **({"ExclusiveStartKey": start} if start else {})
        )
        found += [repository.deliveries_store().get({"PK": i["PK"]["S"], "SK": i["SK"]["S"]}) for i in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            return [i for i in found if i and org in i["PK"]]


def calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict[str, Any]]:
    """The keyword arguments of every `name` call of the DynamoDB client from now on."""
    seen: list[dict[str, Any]] = []
    client = aws.client("dynamodb")
    real = getattr(client, name)

    def counting(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(client, name, counting)
    return seen


def test_the_payload_is_stored_once_and_the_deliveries_are_batch_written(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    for n in range(30):
        create_endpoint(api, receiver.url(f"/e{n}"))
    writes = calls(monkeypatch, "batch_write_item")
    event_id = pipeline.emit("message.new", {"message_id": "m-1", "text": "x" * 2000})
    pipeline.fan_out()
    items = table_items(api.org_id)
    events = [i for i in items if i.get("entity") == "WebhookEvent"]
    made = [i for i in items if i.get("entity") == "WebhookDelivery"]
    assert len(events) == 1 and len(made) == 30  # the 2 KB body once, not 30 times
    assert json.loads(events[0]["body"]) == {"message_id": "m-1", "text": "x" * 2000}
    assert all("body" not in d and d["event_id"] == event_id for d in made)
    assert len({d["GSI1PK"] for d in made}) > 1  # the organization's list is spread over its shards
    assert [len(w["RequestItems"][repository.deliveries_store().table_name]) for w in writes] == [25, 6]

    gets = calls(monkeypatch, "batch_get_item")
    pipeline.send()
    assert len(receiver.requests) == 30
    assert {r.body for r in receiver.requests} == {events[0]["body"].encode()}  # the stored bytes, as signed
    payload_reads = [g for g in gets if any("WHEVT" in json.dumps(r) for r in g["RequestItems"].values())]
    assert len(payload_reads) <= 3  # once per sender batch of 10, not once per delivery
    assert {d["status"] for d in deliveries(api, limit=100)} == {"succeeded"}


def test_a_redelivered_event_creates_and_resets_nothing(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
):
    for n in range(3):
        create_endpoint(api, receiver.url(f"/e{n}"))
    pipeline.emit("message.new", {"message_id": "m-1"})
    records = pipeline.fan_out()
    pipeline.send()
    assert {d["status"] for d in deliveries(api)} == {"succeeded"}
    before = sorted(table_items(api.org_id), key=lambda i: (i["PK"], i["SK"]))
    assert fanout_handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}  # SQS redelivers it
    assert sorted(table_items(api.org_id), key=lambda i: (i["PK"], i["SK"])) == before
    assert pipeline.receive("WebhookDeliveriesQueue") == []  # nothing queued again


@pytest.fixture
def slow_rate(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WEBHOOK_TENANT_RATE", "4")
    reset_settings()
    yield
    reset_settings()


def test_an_organization_over_its_rate_is_paced_and_past_the_horizon_its_event_waits(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    slow_rate: None,
    monkeypatch: pytest.MonkeyPatch,
):
    endpoint = create_endpoint(api, receiver.url("/paced"))
    sends = []
    sqs = aws.client("sqs")
    real = sqs.send_message_batch

    def recording(**kwargs: Any) -> Any:
        sends.extend(kwargs["Entries"])
        return real(**kwargs)

    monkeypatch.setattr(sqs, "send_message_batch", recording)
    for n in range(12):
        pipeline.emit("message.new", {"message_id": f"m-{n}"})
    start, real_now = clock.now(), clock.now
    monkeypatch.setattr(clock, "now", lambda: start)  # every event of the burst fanned out at one instant
    pipeline.fan_out()
    monkeypatch.setattr(clock, "now", real_now)
    delays = [e.get("DelaySeconds", 0) for e in sends]
    # 4 per second: a second's worth at once (slots 0 … 1 s), then one every 0.25 s (whole seconds, never early)
    assert delays == [0] * 5 + [1] * 4 + [2] * 3
    due = sorted(clock.parse_iso(d["next_attempt_at"]) for d in deliveries(api, limit=100))
    assert all(0.24 <= (b - a).total_seconds() <= 0.26 for a, b in itertools.pairwise(due[5:]))
    assert (due[-1] - start).total_seconds() < 3
    assert len(pipeline.send()) == 5  # only the ones without a delay are visible yet

    monkeypatch.setattr(pace, "HORIZON", 1)  # the schedule (3 s) is now full past the horizon
    deferred: list[dict[str, Any]] = []
    real_send = sqs.send_message

    def sending(**kwargs: Any) -> Any:
        deferred.append(kwargs)
        return real_send(**kwargs)

    monkeypatch.setattr(sqs, "send_message", sending)
    schedule = repository.deliveries_store().get(pace.pace_key(api.org_id), consistent=True)
    late = pipeline.emit("message.new", {"message_id": "late"})
    monkeypatch.setattr(clock, "now", lambda: start)
    pipeline.fan_out()
    monkeypatch.setattr(clock, "now", real_now)
    assert repository.get_delivery(api.org_id, repository.delivery_id(late, endpoint["id"])) is None
    (again,) = deferred  # the event itself went back to its queue, delayed
    assert again["QueueUrl"] == api.resources.queue_url("WebhookEventsQueue") and again["DelaySeconds"] == 1
    assert json.loads(again["MessageBody"])["detail"]["event_id"] == late
    after = repository.deliveries_store().get(pace.pace_key(api.org_id), consistent=True)
    assert schedule is not None and after is not None and after["tat"] == schedule["tat"]  # its slot given back


def test_another_organization_reaches_none_of_the_deliveries_or_their_payloads(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
):
    for n in range(3):
        create_endpoint(api, receiver.url(f"/e{n}"))
    pipeline.emit("message.new", {"message_id": "m-secret"})
    pipeline.fan_out()
    mine = api.get(f"{BASE}/deliveries", params={"limit": 2})
    assert mine.status_code == 200 and len(mine.json()["data"]) == 2
    cursor = mine.json()["meta"]["cursor"]
    msg_id = mine.json()["data"][0]["id"]
    _, other = api.new_org("other@example.com", "Other Org")
    assert api.get(f"{BASE}/deliveries", headers=other).json()["data"] == []
    for params in ({}, {"status": "pending"}, {"endpoint_id": mine.json()["data"][0]["endpoint_id"]}):
        assert api.get(f"{BASE}/deliveries", params=params, headers=other).json()["data"] == []
    Api.assert_error(api.get(f"{BASE}/deliveries", params={"cursor": cursor}, headers=other), 400, "validation_failed")
    Api.assert_error(api.get(f"{BASE}/deliveries/{msg_id}/attempts", headers=other), 404, "not_found")
    Api.assert_error(api.post(f"{BASE}/deliveries/{msg_id}/retry", headers=other), 404, "not_found")
