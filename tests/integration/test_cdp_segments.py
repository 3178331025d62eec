"""Segment membership kept current incrementally: contact changes → outbox `contact.updated` → event_publisher → bus →
CdpSegmentEventsRule → CdpSegmentEventsQueue (moto, from template.yaml) → functions/cdp_segments, which flips the
memberships that changed with one `crm.list.entry_added|removed` each; replays and no-op changes fire nothing, and
the full rebuild (PATCH) agrees with the incremental result."""

from __future__ import annotations

from typing import Any

import pytest

from functions.cdp_segments.app import handler as segments_handler
from switchboard.cdp import segments
from switchboard.store import Store
from tests.helpers import FakeContext, run_counters
from tests.integration.support import Api
from tests.integration.test_cdp import built, contact, events_of, ok
from tests.integration.test_webhooks import Pipeline

QUEUE = "CdpSegmentEventsQueue"


def entries(api: Api) -> list[tuple[str, str]]:
    return sorted(
        (e["event_type"].rsplit("_", 1)[-1], e["payload"]["contact_id"]) for e in events_of(api, "crm.list.entry_")
    )


def counted(api: Api, segment_id: str) -> int:
    """The segment's `member_count` once the stream consumer has read every record (replayed: each counts once)."""
    run_counters()
    return int(ok(api.get(f"/v1/cdp/segments/{segment_id}"))["member_count"])


def members(api: Api, segment_id: str) -> list[str]:
    return sorted(m["contact_id"] for m in ok(api.get(f"/v1/cdp/segments/{segment_id}/members", params={"limit": 100})))


def evaluate(pipeline: Pipeline) -> list[dict[str, Any]]:
    """Publish new outbox items, deliver what reached the segment queue to the consumer; → the records."""
    pipeline.publish()
    records = pipeline.receive(QUEUE)
    assert pipeline.invoke(segments_handler, QUEUE, records) == {"batchItemFailures": []}
    return records


def test_contact_changes_update_membership_once(api: Api):
    pipeline = Pipeline(api)
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "pro"})
    bob = contact(api, name="Bob", email="bob@example.com", attributes={"plan": "free"})
    seg = built(
        api,
        api.post(
            "/v1/cdp/segments", json={"name": "Pro", "rules": {"field": "attributes.plan", "op": "eq", "value": "pro"}}
        ),
        201,
    )
    assert members(api, seg["id"]) == [ada["id"]] and entries(api) == [("added", ada["id"])]
    # the creates' contact.updated events reach the consumer: nothing to change
    records = evaluate(pipeline)
    assert {r["messageId"] for r in records} and entries(api) == [("added", ada["id"])]

    ok(api.patch(f"/v1/contacts/{bob['id']}", json={"attributes": {"plan": "pro"}}))
    assert members(api, seg["id"]) == [ada["id"]]  # not yet: the event has not been handled
    records = evaluate(pipeline)
    assert len(records) == 1
    assert members(api, seg["id"]) == sorted([ada["id"], bob["id"]])
    assert entries(api) == sorted([("added", ada["id"]), ("added", bob["id"])])
    assert counted(api, seg["id"]) == 2
    # the same event delivered again changes nothing
    assert segments_handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}
    assert len(entries(api)) == 2

    ok(api.patch(f"/v1/contacts/{ada['id']}", json={"attributes": {"plan": "free"}}))
    evaluate(pipeline)
    assert members(api, seg["id"]) == [bob["id"]]
    assert entries(api) == sorted([("added", ada["id"]), ("added", bob["id"]), ("removed", ada["id"])])
    removed = next(e for e in events_of(api, "crm.list.entry_removed"))["payload"]
    assert removed["list_id"] == seg["id"] and removed["organization_id"] == api.org_id

    # a change that does not touch the rule's outcome fires nothing
    ok(api.patch(f"/v1/contacts/{ada['id']}", json={"name": "Ada L."}))
    ok(api.patch(f"/v1/contacts/{bob['id']}", json={"company": "Bobco"}))
    assert len(evaluate(pipeline)) == 2
    assert len(entries(api)) == 3
    assert counted(api, seg["id"]) == 1

    # the full rebuild agrees with the incremental result
    rebuilt = built(api, api.patch(f"/v1/cdp/segments/{seg['id']}", json={}), 200)
    assert rebuilt["member_count"] == 1 and members(api, seg["id"]) == [bob["id"]] and len(entries(api)) == 3


def test_stage_moves_and_several_segments(api: Api):
    pipeline = Pipeline(api)
    ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "lead", "name": "Lead"}), 201)
    ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "customer", "name": "Customer"}), 201)
    cy = contact(api, name="Cy", email="cy@example.com")
    leads = built(
        api,
        api.post(
            "/v1/cdp/segments",
            json={"name": "Leads", "rules": {"field": "lifecycle_stage", "op": "eq", "value": "lead"}},
        ),
        201,
    )
    customers = built(
        api,
        api.post(
            "/v1/cdp/segments",
            json={"name": "Customers", "rules": {"field": "lifecycle_stage", "op": "eq", "value": "customer"}},
        ),
        201,
    )
    evaluate(pipeline)
    assert entries(api) == []
    ok(api.put(f"/v1/cdp/contacts/{cy['id']}/lifecycle-stage", json={"stage": "lead"}))
    evaluate(pipeline)
    assert (members(api, leads["id"]), members(api, customers["id"])) == ([cy["id"]], [])
    ok(api.put(f"/v1/cdp/contacts/{cy['id']}/lifecycle-stage", json={"stage": "customer"}))
    evaluate(pipeline)
    assert (members(api, leads["id"]), members(api, customers["id"])) == ([], [cy["id"]])
    events = [(e["event_type"], e["payload"]["list_id"]) for e in events_of(api, "crm.list.entry_")]
    assert sorted(events) == sorted(
        [
            ("crm.list.entry_added", leads["id"]),
            ("crm.list.entry_removed", leads["id"]),
            ("crm.list.entry_added", customers["id"]),
        ]
    )


def test_a_bad_record_fails_alone(api: Api):
    good_contact = contact(api, name="Di", email="di@example.com", attributes={"plan": "pro"})
    seg = built(
        api,
        api.post(
            "/v1/cdp/segments", json={"name": "Pro", "rules": {"field": "attributes.plan", "op": "eq", "value": "pro"}}
        ),
        201,
    )
    ok(api.patch(f"/v1/contacts/{good_contact['id']}", json={"attributes": {"plan": "free"}}))
    pipeline = Pipeline(api)
    pipeline.publish()
    good = pipeline.receive(QUEUE)
    bad = {**good[0], "messageId": "broken", "body": "{not json"}
    result = segments_handler({"Records": [bad, *good]}, FakeContext())
    assert result == {"batchItemFailures": [{"itemIdentifier": "broken"}]}
    assert members(api, seg["id"]) == []


def test_deleted_contacts_leave_the_pages_and_the_rebuild(api: Api):
    gone = contact(api, name="Gone", email="gone@example.com", attributes={"plan": "pro"})
    stays = contact(api, name="Stays", email="stays@example.com", attributes={"plan": "pro"})
    seg = built(
        api,
        api.post(
            "/v1/cdp/segments", json={"name": "Pro", "rules": {"field": "attributes.plan", "op": "eq", "value": "pro"}}
        ),
        201,
    )
    assert members(api, seg["id"]) == sorted([gone["id"], stays["id"]])
    assert api.delete(f"/v1/contacts/{gone['id']}").status_code == 204
    assert members(api, seg["id"]) == [stays["id"]]
    rebuilt = built(api, api.patch(f"/v1/cdp/segments/{seg['id']}", json={}), 200)
    assert rebuilt["member_count"] == 1
    assert [e["payload"]["contact_id"] for e in events_of(api, "crm.list.entry_removed")] == [gone["id"]]


def test_a_build_racing_the_consumer_still_fires_once(api: Api, monkeypatch: pytest.MonkeyPatch):
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "pro"})
    seg = built(
        api,
        api.post(
            "/v1/cdp/segments", json={"name": "Pro", "rules": {"field": "attributes.plan", "op": "eq", "value": "pro"}}
        ),
    )
    bob = contact(api, name="Bob", email="bob@example.com", attributes={"plan": "pro"})
    real = Store.batch_get
    raced: list[list[tuple[str, bool]]] = []

    def batch_get_then_consumer(self: Store, keys: Any, **kwargs: Any) -> list[dict[str, Any]]:
        rows = real(self, keys, **kwargs)
        if any(k["SK"].startswith("SEGMENT#") for k in keys) and len(keys) > 1 and not raced:
            # the consumer handles Bob's contact.updated between the build's read and its writes
            raced.append(segments.refresh_contact(self, api.org_id, bob["id"]))
        return rows

    monkeypatch.setattr(Store, "batch_get", batch_get_then_consumer)
    rebuilt = built(api, api.patch(f"/v1/cdp/segments/{seg['id']}", json={}), 200)
    assert raced == [[(seg["id"], True)]]
    assert rebuilt["member_count"] == 2 and members(api, seg["id"]) == sorted([ada["id"], bob["id"]])
    assert entries(api) == sorted([("added", ada["id"]), ("added", bob["id"])])


def test_ingested_events_move_contacts_into_event_segments(api: Api):
    eve = contact(api, name="Eve", email="eve@example.com")
    fay = contact(api, name="Fay", email="fay@example.com")
    rules = {"event": "order.placed", "op": "gte", "count": 2, "within_days": 30}
    buyers = built(api, api.post("/v1/cdp/segments", json={"name": "Buyers", "rules": rules}))
    plain = built(
        api,
        api.post("/v1/cdp/segments", json={"name": "Named", "rules": {"field": "name", "op": "exists"}}),
        201,
    )
    assert members(api, buyers["id"]) == [] and len(members(api, plain["id"])) == 2

    def ingest(*events: dict[str, Any]) -> None:
        assert ok(api.post("/v1/cdp/events", json={"events": list(events)}))["accepted"] == len(events)

    ingest({"event_id": "o1", "name": "order.placed", "contact_id": eve["id"]})
    assert members(api, buyers["id"]) == []  # one order is not two
    ingest(
        {"event_id": "o2", "name": "order.placed", "contact_id": eve["id"]},
        {"event_id": "o3", "name": "order.placed", "contact_id": eve["id"]},
        {"event_id": "v1", "name": "page.viewed", "contact_id": fay["id"]},
    )
    assert members(api, buyers["id"]) == [eve["id"]]
    added = [e["payload"] for e in events_of(api, "crm.list.entry_added") if e["payload"]["list_id"] == buyers["id"]]
    assert [a["contact_id"] for a in added] == [eve["id"]]
    # a duplicate batch changes nothing
    dup = ok(
        api.post(
            "/v1/cdp/events", json={"events": [{"event_id": "o3", "name": "order.placed", "contact_id": eve["id"]}]}
        )
    )
    assert dup["duplicates"] == 1
    assert len([e for e in events_of(api, "crm.list.entry_added") if e["payload"]["list_id"] == buyers["id"]]) == 1


def test_event_counts_read_one_row_per_day_of_the_window_however_long_the_history(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    """A rule's count comes from per-day rows (and the window's first day read from the timeline): exact at the
    window's edge, and its reads do not grow with the contact's history."""
    from datetime import timedelta

    from switchboard import clock
    from switchboard.cdp.event_counts import count_events
    from switchboard.store import get_store

    gus = contact(api, name="Gus", email="gus@example.com")
    now = clock.now().replace(hour=12, minute=0, second=0, microsecond=0)
    moments = [now - timedelta(days=d, hours=h) for d in range(40) for h in (0, 6)]  # two a day for 40 days
    batch = [
        {"event_id": f"p{n}", "name": "order.placed", "contact_id": gus["id"], "timestamp": clock.iso(at)}
        for n, at in enumerate(moments)
    ] + [{"event_id": "other", "name": "order.placed.x", "contact_id": gus["id"], "timestamp": clock.iso(now)}]
    for start in range(0, len(batch), 50):
        assert ok(api.post("/v1/cdp/events", json={"events": batch[start : start + 50]}))["accepted"] > 0

    read: list[int] = []
    original = Store.query_all

    def counting(self: Store, pk: str, **kwargs: Any) -> list[dict[str, Any]]:
        rows = original(self, pk, **kwargs)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(Store, "query_all", counting)
    for since in (now - timedelta(days=10, hours=3), now - timedelta(days=10, hours=7), now - timedelta(days=39)):
        read.clear()
        expected = sum(1 for at in moments if at >= since)
        assert count_events(get_store(), api.org_id, gus["id"], "order.placed", since) == expected, since
        days = (now.date() - since.date()).days
        assert sum(read) <= days + 2, (since, read)  # a row per later day, at most two events of the first day
