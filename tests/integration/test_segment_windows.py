"""Windowed event rules age without any new event: the daily schedule's job re-evaluates, in chunks, only the members
whose counted events leave their window that day (expiry rows written with the join), with a moved clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from functions.jobs.app import handler as jobs_handler
from switchboard import clock
from switchboard.cdp import segment_window_job
from switchboard.jobs import service
from switchboard.store import Store, get_store, keys
from tests.helpers import FakeContext
from tests.integration.support import Api, run_jobs
from tests.integration.test_cdp import built, contact, events_of, ok
from tests.integration.test_cdp_segments import members

BUYERS = {"event": "order.placed", "op": "gte", "count": 2, "within_days": 7}


def ingest(api: Api, contact_id: str, when: str, *ids: str) -> None:
    events = [{"event_id": i, "name": "order.placed", "contact_id": contact_id, "timestamp": when} for i in ids]
    assert ok(api.post("/v1/cdp/events", json={"events": events}))["accepted"] == len(ids)


def expiry_rows(org: str) -> list[tuple[str, str]]:
    rows = get_store().query_all(keys.org_pk(org), sk_prefix="SEGEXP#", consistent=True)
    return sorted((r["contact_id"], r["day"]) for r in rows)


def day(offset: int) -> str:
    return clock.iso(clock.now() + timedelta(days=offset))[:10]


def schedule() -> list[str]:
    """What the daily EventBridge schedule does (template.yaml ExpireSegmentWindows → JobsFunction)."""
    started: list[str] = jobs_handler({"action": "expire_segment_windows"}, FakeContext())["started"]
    return started


def test_members_whose_window_aged_out_leave_on_the_scheduled_day(api: Api, monkeypatch: pytest.MonkeyPatch):
    org, start = api.org_id, clock.now()
    two_days_ago = clock.iso(start - timedelta(days=2))
    ada = contact(api, name="Ada", email="ada@example.com")
    bob = contact(api, name="Bob", email="bob@example.com")
    cy = contact(api, name="Cy", email="cy@example.com")
    ingest(api, ada["id"], two_days_ago, "a1", "a2")
    ingest(api, bob["id"], two_days_ago, "b1", "b2")
    seg = built(api, api.post("/v1/cdp/segments", json={"name": "Buyers", "rules": BUYERS}))
    assert members(api, seg["id"]) == sorted([ada["id"], bob["id"]])
    ingest(api, bob["id"], clock.iso(start), "b3", "b4")  # Bob orders again: his counts last longer
    ingest(api, cy["id"], clock.iso(start), "c1", "c2")  # Cy joins through the incremental path
    assert members(api, seg["id"]) == sorted([ada["id"], bob["id"], cy["id"]])
    # the first counted event leaves the 7-day window on its day + 8: one row per member, found by that day alone
    assert expiry_rows(org) == sorted([(ada["id"], day(6)), (bob["id"], day(6)), (cy["id"], day(8))])

    assert len(schedule()) == 1  # today's job: no row is due today
    run_jobs(api)
    assert members(api, seg["id"]) == sorted([ada["id"], bob["id"], cy["id"]])

    later = start + timedelta(days=6)
    monkeypatch.setattr(clock, "now", lambda: later)
    monkeypatch.setattr(segment_window_job, "PAGE", 1)  # one row a chunk
    jobs = schedule()
    assert len(jobs) == 6  # each day since the last run
    assert schedule() == []  # run again the same day: nothing more
    read: list[str] = []
    real = Store.get

    def get(self: Store, key: dict[str, str], **kwargs: Any) -> Any:
        read.append(key["SK"])
        return real(self, key, **kwargs)

    monkeypatch.setattr(Store, "get", get)
    run_jobs(api)
    monkeypatch.undo()
    monkeypatch.setattr(clock, "now", lambda: later)

    assert members(api, seg["id"]) == sorted([bob["id"], cy["id"]])  # Ada's orders aged out: she left
    removed = [e["payload"]["contact_id"] for e in events_of(api, "crm.list.entry_removed")]
    assert removed == [ada["id"]]
    # only the two members due that day were evaluated, not Cy (another day) nor any other contact
    contacts_read = {sk.removeprefix("CONTACT#") for sk in read if sk.startswith("CONTACT#") and "#" not in sk[8:]}
    assert contacts_read == {ada["id"], bob["id"]}
    done = [service.get_job(get_store(), j) for j in jobs]
    assert all(j is not None and j["status"] == "completed" for j in done)
    assert sum(int(j["progress"].get("rows", 0)) for j in done if j) == 2
    assert sum(int(j["progress"].get("left", 0)) for j in done if j) == 1
    # Bob stays on his newer orders: his next day is written; the rows read are gone
    assert expiry_rows(org) == sorted([(bob["id"], day(2)), (cy["id"], day(2))])


def test_a_non_member_joins_when_its_counts_fall_below_the_rule(api: Api, monkeypatch: pytest.MonkeyPatch):
    """`lt` rules (lapsed customers): fewer events make the rule hold, so a non-member with events in the window is
    watched too, and joins on the day they age out."""
    org, start = api.org_id, clock.now()
    lapsed = {"and": [{"field": "name", "op": "exists"}, {**BUYERS, "op": "lt"}]}  # fewer than 2 orders in 7 days
    eve = contact(api, name="Eve", email="eve@example.com")
    fay = contact(api, name="Fay", email="fay@example.com")
    ingest(api, eve["id"], clock.iso(start - timedelta(days=3)), "e1", "e2")
    seg = built(api, api.post("/v1/cdp/segments", json={"name": "Lapsed", "rules": lapsed}))
    assert members(api, seg["id"]) == [fay["id"]]  # Fay has no orders; Eve has two
    assert expiry_rows(org) == [(eve["id"], day(5))]  # Fay has nothing that ages; Eve is watched
    schedule()
    run_jobs(api)

    later = start + timedelta(days=5)
    monkeypatch.setattr(clock, "now", lambda: later)
    assert len(schedule()) == 5
    run_jobs(api)
    assert members(api, seg["id"]) == sorted([eve["id"], fay["id"]])
    added = [e["payload"]["contact_id"] for e in events_of(api, "crm.list.entry_added")]
    assert added.count(eve["id"]) == 1
    assert expiry_rows(org) == []  # nothing left that can age: no more rows
