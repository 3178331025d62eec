"""Domain events within EventBridge's PutEvents limits (switchboard.events.limits), end to end on moto: the test bus
refuses what EventBridge refuses (local/moto_server.py `patch_limits`), the publisher splits its requests by size,
and an event too large for the bus travels as a reference to its outbox item that every consumer reads back whole,
so no event is lost for its size."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError

from functions.cdp_segments.app import handler as segments_handler
from functions.message_sender.app import handler as sender_handler
from switchboard import aws, clock
from switchboard.contacts import erasure
from switchboard.events import outbox, publisher
from switchboard.events.limits import MAX_REQUEST_BYTES
from switchboard.store import get_store
from tests.integration.support import Api
from tests.integration.test_cdp import built, contact, ok
from tests.integration.test_webhooks import (  # noqa: F401
    Pipeline,
    create_endpoint,
    pipeline,
    receiver,
)
from tests.webhook_receiver import Receiver

KIB = 1024


def _entry(detail_bytes: int) -> dict[str, str]:
    body = json.dumps({"pad": "x" * (detail_bytes - 10)})
    return {"Source": "switchboard", "DetailType": "size.test", "Detail": body, "EventBusName": "default"}


def test_the_test_bus_refuses_a_request_over_256_kib_like_eventbridge(api: Api):
    events = aws.client("events")
    half = _entry(MAX_REQUEST_BYTES // 2)  # two of them: a few bytes over the limit together
    assert events.put_events(Entries=[half])["FailedEntryCount"] == 0
    with pytest.raises(ClientError) as refused:
        events.put_events(Entries=[half, half])
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "over the limit" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError):
        events.put_events(Entries=[_entry(MAX_REQUEST_BYTES + KIB)])  # one entry alone over it


def test_a_batch_over_256_kib_is_split_and_every_event_reaches_the_receiver(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
):
    create_endpoint(api, receiver.url("/sizes"))
    texts = {f"m-{n}": chr(ord("a") + n) * (60 * KIB) for n in range(10)}  # ~600 KiB in one stream batch
    for message_id, text in texts.items():
        pipeline.emit("message.new", {"message_id": message_id, "text": text})
    pipeline.fan_out()  # one publisher invocation with the 10 records: it must report none failed
    pipeline.send()
    received = {json.loads(r.body)["message_id"]: json.loads(r.body)["text"] for r in receiver.of("/sizes")}
    assert received == texts


def test_an_event_too_large_for_the_bus_reaches_the_receiver_whole(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
):
    create_endpoint(api, receiver.url("/large"))
    data = {"message_id": "m-large", "text": "é" * (150 * KIB)}  # 300 KiB as UTF-8, 900 KiB as JSON escapes
    event_id = pipeline.emit("message.new", data)
    (stored,) = [i for i in outbox.stored_events(get_store(), api.org_id, consistent=True) if i["event_id"] == event_id]
    kept = clock.parse_iso(stored["occurred_at"]) + outbox.STORED_TTL
    assert stored["ttl"] == clock.epoch(kept)  # kept past the queues' and their DLQs' retention
    records = pipeline.fan_out()
    [record] = records
    assert len(record["body"].encode()) < 2 * KIB  # the reference went through the bus, not the payload
    detail = json.loads(record["body"])["detail"]
    assert detail["stored"] == {"PK": stored["PK"], "SK": stored["SK"]} and "data" not in detail
    pipeline.send()
    [delivered] = receiver.of("/large")
    assert json.loads(delivered.body) == data


def test_a_reference_whose_outbox_item_was_erased_is_skipped(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    """Items of events published by reference outlive every queue (STORED_TTL), so one is only gone when a contact's
    erasure or the organization's purge deleted it: the event must not be acted on, nor fail into the DLQ."""
    monkeypatch.setattr(publisher, "MAX_INLINE_ENTRY_BYTES", 0)  # every event by reference
    create_endpoint(api, receiver.url("/erased"))
    event_id = pipeline.emit("message.new", {"message_id": "m-gone"})
    pipeline.publish()
    (stored,) = [i for i in outbox.stored_events(get_store(), api.org_id, consistent=True) if i["event_id"] == event_id]
    get_store().client.delete_item(
        TableName=get_store().table_name, Key={"PK": {"S": stored["PK"]}, "SK": {"S": stored["SK"]}}
    )
    capsys.readouterr()
    pipeline.fan_out()  # asserts that no record failed
    assert '"EventsErasedBeforeUse":[1.0]' in capsys.readouterr().out  # counted, in the fan-out's EMF line
    pipeline.send()
    assert receiver.of("/erased") == []


def test_every_consumer_reads_an_event_published_by_reference(
    api: Api,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    """With the inline limit at 0 every real event of these flows goes by reference: the segments consumer (contact
    changes and erasures), the message sender and the webhook fan-out each act on it as on the whole event."""
    monkeypatch.setattr(publisher, "MAX_INLINE_ENTRY_BYTES", 0)
    create_endpoint(api, receiver.url("/all"))
    bob = contact(api, name="Bob", email="bob@example.com", attributes={"plan": "free"})
    seg = built(
        api,
        api.post(
            "/v1/cdp/segments", json={"name": "Pro", "rules": {"field": "attributes.plan", "op": "eq", "value": "pro"}}
        ),
        201,
    )
    ok(api.patch(f"/v1/contacts/{bob['id']}", json={"attributes": {"plan": "pro"}}))
    carol = contact(api, name="Carol", email="carol@example.com")
    assert api.request("DELETE", f"/v1/contacts/{carol['id']}").status_code == 204
    channel = ok(api.post("/v1/channels", json={"name": "s", "platform": "sandbox"}), 201)
    ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+14155552671", "text": {"body": "hi"}})
    assert sent.status_code == 202, sent.text

    pipeline.publish()
    outbound = [r for r in pipeline.receive("OutboundMessagesQueue") if '"message.queued"' in r["body"]]
    for _ in range(20):  # contact.updated, then contact.erasure, its continuations and its second pass
        segment_records = pipeline.receive("CdpSegmentEventsQueue")
        if not segment_records:
            later = clock.now() + erasure.RECHECK_AFTER + timedelta(minutes=1)  # the schedule releases the erasure
            if erasure.release_settled(get_store(), now=later):
                pipeline.publish()
                continue
            break
        assert all("stored" in json.loads(r["body"])["detail"] for r in segment_records)
        assert pipeline.invoke(segments_handler, "CdpSegmentEventsQueue", segment_records) == {"batchItemFailures": []}
        pipeline.publish()
    members = ok(api.get(f"/v1/cdp/segments/{seg['id']}/members"))
    assert [m["contact_id"] for m in members] == [bob["id"]]
    tombstone = get_store().get(erasure.tombstone_key(api.org_id, carol["id"]), consistent=True)
    assert tombstone is not None and tombstone["status"] == "erased"
    assert outbound and all("stored" in json.loads(r["body"])["detail"] for r in outbound)
    assert pipeline.invoke(sender_handler, "OutboundMessagesQueue", outbound) == {"batchItemFailures": []}
    assert ok(api.get(f"/v1/messages/{sent.json()['data']['id']}"))["status"] == "sent"

    pipeline.fan_out()
    pipeline.send()
    types = {r.headers["webhook-id"]: json.loads(r.body) for r in receiver.of("/all")}
    assert any(body.get("contact_id") == bob["id"] for body in types.values())  # contact.updated, whole


def test_outbox_items_of_small_events_keep_their_one_day_ttl(api: Api, pipeline: Pipeline):  # noqa: F811
    event_id = pipeline.emit("message.new", {"message_id": "m-small", "text": "hi"})
    (stored,) = [i for i in outbox.stored_events(get_store(), api.org_id, consistent=True) if i["event_id"] == event_id]
    assert stored["ttl"] == clock.epoch(clock.parse_iso(stored["occurred_at"]) + timedelta(days=1))
