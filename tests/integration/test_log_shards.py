"""The logs an organization writes at its event rate in write shards (switchboard.store.shards): the CDP activity log
`CDPACT#`, the stage-change log `CDPSTAGELOG#` and audit entries `AUDIT#`. Where they land, the newest-first merge of
the shards and the legacy partition `ORG#<org>` with its cursor and filters, and the erasure, merge and purge that
must find each log row in its own partition."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from ulid import ULID

from switchboard import clock
from switchboard.cdp import logs
from switchboard.config import reset_settings
from switchboard.contacts import erasure
from switchboard.contacts import merge as merging
from switchboard.ids import new_ulid
from switchboard.jobs import purge
from switchboard.store import get_store, keys, shards
from tests.helpers import run_counters
from tests.integration.support import Api, JobsQueue
from tests.integration.test_cdp import contact, field_error, ok
from tests.integration.test_security_org_deletion import delete_org, move_clock, org_items, owner  # noqa: F401

Item = dict[str, Any]
START = clock.parse_iso("2026-01-05T00:00:00Z")


def _rows(org: str, prefix: str) -> list[Item]:
    store = get_store()
    return [i for pk in shards.all_pks(org) for i in store.query_all(pk, sk_prefix=prefix, consistent=True)]


def _ingest(api: Api, events: list[Item]) -> None:
    for start in range(0, len(events), 100):
        result = ok(api.post("/v1/cdp/events", json={"events": events[start : start + 100]}))
        assert result["accepted"] == len(events[start : start + 100]), result


def _event(n: int, contact_id: str, name: str) -> Item:
    at = clock.iso(START + timedelta(minutes=n))
    return {"event_id": f"ev-{n:03d}", "name": name, "contact_id": contact_id, "timestamp": at, "properties": {}}


def _legacy_activity(org: str, contact_id: str, n: int, name: str, *, timeline: bool = False) -> str:
    """An activity as written before sharding: its log row (and, with `timeline`, the contact's row without
    `log_pk`) under `ORG#<org>`, at minute `n` + 30 s (between the ingested ones)."""
    moment = START + timedelta(minutes=n, seconds=30)
    ulid = str(ULID.from_datetime(moment))
    body = {
        "entity": "Activity",
        "id": f"act_{ulid.lower()}",
        "event_id": f"legacy-{n:03d}",
        "name": name,
        "kind": "event",
        "contact_id": contact_id,
        "properties": {},
        "occurred_at": clock.iso(moment),
        "received_at": clock.iso(moment),
    }
    store = get_store()
    store.put({**keys.key(keys.org_pk(org), f"CDPACT#{ulid}"), **body})
    if timeline:
        store.put({**keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#ACT#{ulid}"), **body})
    return f"legacy-{n:03d}"


def _pages(api: Api, path: str, limit: int, key: str, **params: str) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        query = {"limit": str(limit), **params, **({"cursor": cursor} if cursor else {})}
        resp = api.get(path, params=query)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        pages.append([a[key] for a in body["data"]])
        cursor = body["meta"].get("cursor")
        if not body["meta"]["has_more"]:
            assert cursor is None
            return pages
        assert cursor and len(body["data"]) == limit


def _flat(pages: list[list[str]]) -> list[str]:
    return [i for p in pages for i in p]


# Where they land --------------------------------------------------------------------------------------------------
def test_activities_stage_changes_and_audit_entries_land_on_many_shards_never_on_the_organization_key(api: Api):
    legacy = keys.org_pk(api.org_id)
    person = contact(api, name="Ada", email="ada@example.com")
    _ingest(api, [_event(n, person["id"], "page.viewed") for n in range(40)])
    for n in range(20):
        ok(api.post("/v1/cdp/lifecycle-stages", json={"key": f"s{n}", "name": f"Stage {n}"}), 201)
    for n in range(6):
        ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": f"s{n}"}))

    acts = _rows(api.org_id, "CDPACT#")
    audits = _rows(api.org_id, "AUDIT#")
    stage_logs = _rows(api.org_id, "CDPSTAGELOG#")
    assert len(acts) == 46 and len(stage_logs) == 6  # a stage change is an activity too
    for rows in (acts, audits, stage_logs):
        assert not [r["SK"] for r in rows if r["PK"] == legacy]
        for row in rows:  # each in the write shard of its ULID
            assert row["PK"] == shards.pk(api.org_id, row["SK"].split("#", 1)[1])
    assert len(Counter(r["PK"] for r in acts)) >= 10
    assert len(Counter(r["PK"] for r in audits)) >= 10
    assert all(a["ttl"] > clock.epoch(clock.now() + timedelta(days=399)) for a in audits)  # the retention holds
    # the contact's own rows stay with the contact and name their log row's partition
    store = get_store()
    for kind, prefix in (("ACT#", "CDPACT#"), ("STAGELOG#", "CDPSTAGELOG#")):
        mine = store.query_all(legacy, sk_prefix=f"CONTACT#{person['id']}#{kind}")
        assert len(mine) == (46 if kind == "ACT#" else 6)
        for row in mine:
            ulid = row["SK"].rsplit("#", 1)[1]
            assert row["log_pk"] == shards.pk(api.org_id, ulid)
            assert store.get(keys.key(row["log_pk"], f"{prefix}{ulid}")) is not None
    # the contact's timeline and stage history read as before
    assert len(_flat(_pages(api, f"/v1/cdp/contacts/{person['id']}/activity", 20, "id"))) == 46
    history = ok(api.get(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage"))["history"]
    assert [h["to_stage"] for h in history] == ["s5", "s4", "s3", "s2", "s1", "s0"]


# The activity log -------------------------------------------------------------------------------------------------
def test_the_activity_log_merges_shards_and_legacy_rows_newest_first_with_filters_and_a_cursor(api: Api):
    ada = contact(api, name="Ada", email="ada@example.com")
    lin = contact(api, name="Lin", email="lin@example.com")
    events = [_event(n, (ada, lin)[n % 2]["id"], ("page.viewed", "order.placed")[n % 3 == 0]) for n in range(90)]
    _ingest(api, events)
    written = {e["event_id"]: (e["name"], e["contact_id"], e["timestamp"]) for e in events}
    for n in range(0, 90, 7):  # older rows, written under `ORG#<org>` before sharding, between the others
        name, who = ("page.viewed", "order.placed")[n % 2], (ada, lin)[n % 3 == 0]["id"]
        at = clock.iso(START + timedelta(minutes=n, seconds=30))
        written[_legacy_activity(api.org_id, who, n, name)] = (name, who, at)
    newest_first = sorted(written, key=lambda i: written[i][2], reverse=True)

    pages = _pages(api, "/v1/cdp/activity-log", 11, "event_id")
    assert _flat(pages) == newest_first  # one order across shards and the legacy partition, each once
    assert len(pages) == -(-len(newest_first) // 11)

    def expect(keep: Any) -> list[str]:
        return [i for i in newest_first if keep(*written[i])]

    orders = _pages(api, "/v1/cdp/activity-log", 4, "event_id", name="order.placed")
    assert _flat(orders) == expect(lambda name, who, at: name == "order.placed")
    lins = _pages(api, "/v1/cdp/activity-log", 9, "event_id", contact_id=lin["id"])
    assert _flat(lins) == expect(lambda name, who, at: who == lin["id"])
    since, until = "2026-01-05T00:20:00.000Z", "2026-01-05T01:05:00.000Z"  # both ends included
    window = _pages(api, "/v1/cdp/activity-log", 6, "event_id", since=since, until=until, name="page.viewed")
    assert _flat(window) == expect(lambda name, who, at: since <= at <= until and name == "page.viewed")
    assert window and len(_flat(window)) > 20

    # a cursor continues only its own query, in its own organization
    cursor = api.get("/v1/cdp/activity-log", params={"limit": "3"}).json()["meta"]["cursor"]
    field_error(api, api.get("/v1/cdp/activity-log", params={"cursor": cursor, "name": "x"}), "query.cursor")
    _, other = api.new_org("other@example.com", "Other Org")
    field_error(api, api.get("/v1/cdp/activity-log", params={"cursor": cursor}, headers=other), "query.cursor")
    field_error(api, api.get("/v1/cdp/activity-log", params={"since": until, "until": since}), "query.since")


# The audit log ----------------------------------------------------------------------------------------------------
def test_the_audit_log_merges_shards_and_legacy_entries_newest_first_with_filters_and_a_cursor(api: Api):
    store = get_store()
    legacy: list[str] = []
    stage_ids: list[str] = []
    middle = ""
    for n in range(24):
        stage_ids.append(ok(api.post("/v1/cdp/lifecycle-stages", json={"key": f"k{n}", "name": f"S{n}"}), 201)["id"])
        if n % 4 == 0:  # an entry written before sharding, under `ORG#<org>`, between the new ones
            ulid = new_ulid()
            store.put(
                {
                    **keys.key(keys.org_pk(api.org_id), f"AUDIT#{ulid}"),
                    "entity": "AuditLog",
                    "id": f"aud_{ulid.lower()}",
                    "organization_id": api.org_id,
                    "action": "cdp.lifecycle_stage.updated",
                    "target_type": "lifecycle_stage",
                    "target_id": stage_ids[-1],
                    "actor_type": "api_key",
                    "actor_id": "key_legacy",
                    "created_at": clock.now_iso(),
                }
            )
            legacy.append(f"aud_{ulid.lower()}")
        if n == 12:
            time.sleep(0.01)
            middle = clock.now_iso()
            time.sleep(0.01)
    for stage_id in stage_ids[:9]:
        ok(api.patch(f"/v1/cdp/lifecycle-stages/{stage_id}", json={"name": "renamed"}))
    entries = sorted(_rows(api.org_id, "AUDIT#"), key=lambda e: e["SK"], reverse=True)
    assert {e["id"] for e in entries if e["PK"] == keys.org_pk(api.org_id)} == set(legacy)
    assert len({e["PK"] for e in entries}) >= 10

    pages = _pages(api, "/v1/audit-logs", 7, "id")
    assert _flat(pages) == [e["id"] for e in entries]  # newest first, shards and legacy, each once

    def expect(keep: Any) -> list[str]:
        return [e["id"] for e in entries if keep(e)]

    updated = _pages(api, "/v1/audit-logs", 4, "id", action="cdp.lifecycle_stage.updated")
    assert _flat(updated) == expect(lambda e: e["action"] == "cdp.lifecycle_stage.updated")
    assert len(_flat(updated)) == 9 + len(legacy)
    one = _pages(api, "/v1/audit-logs", 2, "id", target_id=stage_ids[0], target_type="lifecycle_stage")
    assert _flat(one) == expect(lambda e: e["target_id"] == stage_ids[0])
    assert len(_flat(one)) == 3  # created, renamed, and the legacy entry
    before = _pages(api, "/v1/audit-logs", 5, "id", until=middle)
    after = _pages(api, "/v1/audit-logs", 5, "id", since=middle, action="cdp.lifecycle_stage.created")
    assert _flat(before) == expect(lambda e: e["created_at"] <= middle)
    assert _flat(after) == expect(lambda e: e["created_at"] >= middle and e["action"].endswith(".created"))
    assert len(_flat(after)) == 11

    cursor = api.get("/v1/audit-logs", params={"limit": "2"}).json()["meta"]["cursor"]
    api.assert_error(api.get("/v1/audit-logs", params={"cursor": cursor, "action": "x"}), 400, "validation_failed")
    _, other = api.new_org("other@example.com", "Other Org")
    api.assert_error(api.get("/v1/audit-logs", params={"cursor": cursor}, headers=other), 400, "validation_failed")


# Stage metrics ----------------------------------------------------------------------------------------------------
def test_stage_changes_in_shards_are_counted_and_read_by_the_metrics(api: Api):
    for key in ("lead", "customer"):
        ok(api.post("/v1/cdp/lifecycle-stages", json={"key": key, "name": key.title()}), 201)
    people = [contact(api, name=f"P{n}", email=f"p{n}@example.com") for n in range(6)]
    for person in people:
        ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": "lead"}))
    for person in people[:4]:
        ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": "customer"}))
    assert len({r["PK"] for r in _rows(api.org_id, "CDPSTAGELOG#")}) >= 4
    run_counters()
    today = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)

    def found(since: Any, until: Any) -> dict[str, Any]:
        got = ok(api.get("/v1/cdp/lifecycle-stages/metrics", params={"since": since, "until": until}))
        conversions = {(c["from_stage"], c["to_stage"]): c["count"] for c in got["conversions"]}
        return {"entered": {s["stage"]: s["entered"] for s in got["stages"]}, "pairs": conversions}

    whole = found(clock.iso(today - timedelta(days=1)), clock.iso(today + timedelta(days=1)))  # the day counters
    edges = found(clock.iso(today), clock.iso(clock.now() + timedelta(minutes=1)))  # today's logs, every shard
    for got in (whole, edges):
        assert got["entered"] == {"lead": 6, "customer": 4}
        assert got["pairs"] == {(None, "lead"): 6, ("lead", "customer"): 4}


# Erasure, merge, purge --------------------------------------------------------------------------------------------
def _log_rows_of(org: str, contact_id: str) -> list[tuple[str, str]]:
    return [
        (r["PK"], r["SK"])
        for prefix in ("CDPACT#", "CDPSTAGELOG#")
        for r in _rows(org, prefix)
        if r.get("contact_id") == contact_id
    ]


def test_erasing_a_contact_removes_its_log_rows_in_every_shard_and_the_legacy_partition(api: Api):
    ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "lead", "name": "Lead"}), 201)
    gone = contact(api, name="Gone", email="gone@example.com")
    kept = contact(api, name="Kept", email="kept@example.com")
    _ingest(api, [_event(n, (gone, kept)[n % 2]["id"], "page.viewed") for n in range(30)])
    for n in range(3):
        _legacy_activity(api.org_id, gone["id"], 40 + n, "old", timeline=True)
        _legacy_activity(api.org_id, kept["id"], 50 + n, "old", timeline=True)
    for person in (gone, kept):
        ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": "lead"}))
    before = _log_rows_of(api.org_id, gone["id"])
    assert len(before) == 15 + 3 + 2  # events, legacy activities, the stage change and its activity
    assert len({pk for pk, _ in before}) >= 6
    assert any(pk == keys.org_pk(api.org_id) for pk, _ in before)
    kept_before = _log_rows_of(api.org_id, kept["id"])

    assert api.delete(f"/v1/contacts/{gone['id']}").status_code == 204
    assert erasure.drive(get_store(), api.org_id, gone["id"])
    assert _log_rows_of(api.org_id, gone["id"]) == []
    assert get_store().query_all(keys.org_pk(api.org_id), sk_prefix=f"CONTACT#{gone['id']}#") == []
    assert sorted(_log_rows_of(api.org_id, kept["id"])) == sorted(kept_before)
    assert not [e for e in _flat(_pages(api, "/v1/cdp/activity-log", 50, "contact_id")) if e == gone["id"]]


def test_after_a_raised_shard_count_the_log_rows_are_listed_and_erased_where_they_were_written(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TENANT_SHARDS", "4")
    reset_settings()
    person = contact(api, name="Ada", email="ada@example.com")
    _ingest(api, [_event(n, person["id"], "page.viewed") for n in range(24)])
    written = _log_rows_of(api.org_id, person["id"])
    assert {pk for pk, _ in written} <= set(shards.all_pks(api.org_id)[:4])
    first = api.get("/v1/cdp/activity-log", params={"limit": "5"}).json()
    monkeypatch.setenv("TENANT_SHARDS", "16")
    reset_settings()
    assert [pk for pk, sk in written if shards.pk(api.org_id, sk.split("#", 1)[1]) != pk]  # elsewhere at 16
    rest = _pages(api, "/v1/cdp/activity-log", 100, "event_id", cursor=first["meta"]["cursor"])
    expected = [f"ev-{n:03d}" for n in reversed(range(24))]
    assert [a["event_id"] for a in first["data"]] + _flat(rest) == expected  # a cursor from before continues
    assert api.delete(f"/v1/contacts/{person['id']}").status_code == 204
    assert erasure.drive(get_store(), api.org_id, person["id"])
    assert _log_rows_of(api.org_id, person["id"]) == []


def test_a_merge_points_the_log_rows_at_the_target_where_they_are(api: Api):
    ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "lead", "name": "Lead"}), 201)
    target = contact(api, name="Ada", email="ada@example.com")
    source = contact(api, name="Lin", email="lin@example.com")
    _ingest(api, [_event(n, (target, source)[n % 2]["id"], "page.viewed") for n in range(24)])
    legacy = [_legacy_activity(api.org_id, source["id"], 30 + n, "old", timeline=True) for n in range(2)]
    ok(api.put(f"/v1/cdp/contacts/{source['id']}/lifecycle-stage", json={"stage": "lead"}))
    moving = _log_rows_of(api.org_id, source["id"])
    assert len(moving) == 12 + 2 + 2 and len({pk for pk, _ in moving}) >= 5

    ok(api.post(f"/v1/contacts/{target['id']}/merge", json={"from_contact_id": source["id"]}))
    JobsQueue(api).drain()
    assert _log_rows_of(api.org_id, source["id"]) == []
    assert set(moving) <= set(_log_rows_of(api.org_id, target["id"]))  # re-pointed in place, nothing moved
    mine = _flat(_pages(api, "/v1/cdp/activity-log", 10, "event_id", contact_id=target["id"]))
    assert len(mine) == 24 + 2 + 1 and set(legacy) <= set(mine)
    timeline = get_store().query_all(keys.org_pk(api.org_id), sk_prefix=f"CONTACT#{target['id']}#ACT#")
    assert len(timeline) == 27
    assert {(r.get("log_pk") or keys.org_pk(api.org_id), "CDPACT#" + r["SK"].rsplit("#", 1)[1]) for r in timeline} == {
        k for k in _log_rows_of(api.org_id, target["id"]) if k[1].startswith("CDPACT#")
    }
    # and the target's erasure then finds every one of them
    assert api.delete(f"/v1/contacts/{target['id']}").status_code == 204
    assert erasure.drive(get_store(), api.org_id, target["id"])
    assert _log_rows_of(api.org_id, target["id"]) == [] and _rows(api.org_id, "CDPACT#") == []


def test_a_merge_whose_target_is_gone_deletes_the_sources_log_rows(api: Api, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(merging, "INLINE_CHUNKS", 0)  # the children move after the target's erasure
    target = contact(api, name="Ada", email="ada@example.com")
    source = contact(api, name="Lin", email="lin@example.com")
    _ingest(api, [_event(n, source["id"], "page.viewed") for n in range(12)])
    _legacy_activity(api.org_id, source["id"], 20, "old", timeline=True)
    assert len(_log_rows_of(api.org_id, source["id"])) == 13
    ok(api.post(f"/v1/contacts/{target['id']}/merge", json={"from_contact_id": source["id"]}))
    assert api.delete(f"/v1/contacts/{target['id']}").status_code == 204
    assert erasure.drive(get_store(), api.org_id, target["id"])
    JobsQueue(api).drain()
    assert _rows(api.org_id, "CDPACT#") == [] and _rows(api.org_id, "CDPEVTID#") == []


def test_the_organization_purge_removes_log_rows_in_every_shard_and_the_legacy_partition(
    api: Api,
    owner: dict[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "lead", "name": "Lead"}), 201)
    person = contact(api, name="Ada", email="ada@example.com")
    _ingest(api, [_event(n, person["id"], "page.viewed") for n in range(20)])
    _legacy_activity(api.org_id, person["id"], 30, "old", timeline=True)
    ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": "lead"}))
    get_store().put({**keys.key(keys.org_pk(api.org_id), f"AUDIT#{new_ulid()}"), "entity": "AuditLog"})
    written = [r for p in ("CDPACT#", "CDPSTAGELOG#", "AUDIT#") for r in _rows(api.org_id, p)]
    # several shards (≥ 22 random ULIDs miss 10 of 16 shards with p < 10^-6) and the legacy partition
    assert len({r["PK"] for r in written}) >= 8 and any(r["PK"] == keys.org_pk(api.org_id) for r in written)

    assert delete_org(api, owner).status_code == 202
    move_clock(monkeypatch, timedelta(days=31))
    (job_id,) = purge.start_due_purges(get_store())
    JobsQueue(api).drain()
    assert [i["PK"]["S"] for i in org_items(api.org_id)] == [f"JOB#{job_id}"]
    assert [r for p in ("CDPACT#", "CDPSTAGELOG#", "AUDIT#") for r in _rows(api.org_id, p)] == []


def test_a_log_row_is_addressed_by_the_partition_its_contact_row_names():
    assert logs.mirror_key("o1", {"SK": "CONTACT#ct_1#ACT#01ABC", "log_pk": "ORG#o1#3"}) == {
        "PK": "ORG#o1#3",
        "SK": "CDPACT#01ABC",
    }
    assert logs.mirror_key("o1", {"SK": "CONTACT#ct_1#STAGELOG#01ABC"}) == {"PK": "ORG#o1", "SK": "CDPSTAGELOG#01ABC"}
    assert logs.mirror_key("o1", {"SK": "CONTACT#ct_1#NOTE#note_1"}) is None
