"""PutEvents entries sized as EventBridge sizes them, requests cut within its limits, and the choice between an
inline event and a reference to its outbox item (switchboard.events.limits, publisher, outbox)."""

from __future__ import annotations

import json

from switchboard.events import limits, outbox, publisher
from switchboard.events.outbox import OutboxEvent

KIB = 1024


def event(data: dict, *, key: bool = True) -> OutboxEvent:
    return OutboxEvent(
        event_id="evt_01j0",
        event_type="message.new",
        organization_id="org_1",
        occurred_at="2026-11-27T10:00:00.000Z",
        data=data,
        key={"PK": "ORG#org_1#7", "SK": "EVENT#01J0"} if key else None,
    )


def test_an_entry_is_sized_as_eventbridge_sizes_it():
    entry = {
        "Source": "switchboard",  # 11
        "DetailType": "message.new",  # 11
        "Detail": '{"t":"é"}',  # 10 bytes in UTF-8 (é is 2)
        "Resources": ["arn:x", "é"],  # 5 + 2
        "EventBusName": "a-long-bus-name-that-does-not-count",
        "TraceHeader": "neither-does-this",
    }
    assert limits.entry_size(entry) == 11 + 11 + 10 + 5 + 2
    assert limits.entry_size({**entry, "Time": 1795781184}) == 11 + 11 + 10 + 5 + 2 + 14


def test_requests_hold_at_most_ten_entries_and_256_kib():
    assert [len(r) for r in limits.requests(range(25), lambda _: 100)] == [10, 10, 5]
    sizes = [100 * KIB, 100 * KIB, 56 * KIB, 1]  # the first three make exactly 256 KiB
    assert list(limits.requests(sizes, lambda n: n)) == [[100 * KIB, 100 * KIB, 56 * KIB], [1]]
    alone = [10, 300 * KIB, 10]  # over the limit by itself: alone (EventBridge refuses it, the caller sees it fail)
    assert list(limits.requests(alone, lambda n: n)) == [[10], [300 * KIB], [10]]


def test_a_small_event_goes_whole_and_a_large_one_by_reference():
    small = publisher.to_entry(event({"text": "hi"}), "bus")
    assert json.loads(small["Detail"])["data"] == {"text": "hi"}
    assert publisher.fits_inline(event({"text": "hi"}))

    large_event = event({"text": "x" * (limits.MAX_INLINE_ENTRY_BYTES)})
    assert not publisher.fits_inline(large_event)
    large = publisher.to_entry(large_event, "bus")
    detail = json.loads(large["Detail"])
    assert detail == {
        "event_id": "evt_01j0",
        "event_type": "message.new",
        "organization_id": "org_1",
        "occurred_at": "2026-11-27T10:00:00.000Z",
        "stored": {"PK": "ORG#org_1#7", "SK": "EVENT#01J0"},
    }
    assert large["DetailType"] == "message.new" and large["Source"] == "switchboard"  # the rules route it the same
    assert limits.entry_size(large) < 1 * KIB


def test_the_inline_limit_leaves_room_for_the_envelope_of_an_sqs_delivery():
    """The bus wraps `detail` in its envelope when it delivers to an SQS target, and SQS caps a message at 256 KiB."""
    envelope = {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "x" * 64,
        "source": "switchboard",
        "account": "123456789012",
        "time": "2026-11-27T10:00:00Z",
        "region": "ap-southeast-2",
        "resources": [],
        "detail": None,
    }
    overhead = len(json.dumps(envelope, separators=(",", ":")))
    assert limits.MAX_INLINE_ENTRY_BYTES + overhead < 256 * KIB


def test_an_event_at_the_edge_is_sized_from_its_escaped_json():
    """Non-ASCII text is escaped in the detail (json.dumps): 6 bytes a character, as published."""
    text = "é" * (limits.MAX_INLINE_ENTRY_BYTES // 6)
    assert not publisher.fits_inline(event({"text": text}))
    assert publisher.fits_inline(event({"text": "e" * (limits.MAX_INLINE_ENTRY_BYTES // 2)}))


def test_large_outbox_items_are_kept_past_every_queue_and_small_ones_a_day():
    small = outbox.outbox_put("org_1", "message.new", {"text": "hi"}).item
    large = outbox.outbox_put("org_1", "message.new", {"text": "x" * outbox.KEEP_LONGER_FROM_BYTES}).item
    assert small["ttl"] - int(outbox.clock.parse_iso(small["occurred_at"]).timestamp()) <= 86400
    kept = large["ttl"] - int(outbox.clock.parse_iso(large["occurred_at"]).timestamp())
    assert kept >= outbox.STORED_TTL.total_seconds() - 1
    assert outbox.STORED_TTL.days > 4 + 14  # WebhookEventsQueue's 4 days, then a DLQ's 14 (template.yaml)
    assert outbox.KEEP_LONGER_FROM_BYTES < limits.MAX_INLINE_ENTRY_BYTES
