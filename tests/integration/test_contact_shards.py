"""Write sharding of the contact lists (switchboard.contacts.repository, switchboard.store.shards): GSI1 (every
contact by recency) and GSI2 (a lifecycle stage's contacts) carry the shard of the contact id; contacts written
before keep the unsharded partitions, and every reader reads both: the list route (an ordered merge), the jobs that
walk every contact (segment build, consent backfill, search reindex) and the stage-in-use check."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.cdp import segment_build, segments
from switchboard.config import get_settings
from switchboard.contacts import children, search
from switchboard.contacts import repository as contact_repo
from switchboard.jobs import service
from switchboard.store import Store, get_store, shards
from tests.helpers import count_query_items
from tests.integration.support import Api, run_jobs
from tests.integration.test_backfill_jobs import finish, start
from tests.integration.test_cdp import contact, ok
from tests.integration.test_cdp_segments import members

Item = dict[str, Any]
PRO = {"field": "attributes.plan", "op": "eq", "value": "pro"}


def _stored(org: str, contact_id: str) -> Item:
    item = get_store().get(contact_repo.contact_key(org, contact_id), consistent=True)
    assert item is not None
    return item


def _to_legacy(org: str, contact_id: str) -> Item:
    """The contact as written before its lists were sharded: on the unsharded GSI partitions."""
    item = _stored(org, contact_id)
    old = {a: item[a].rsplit("#", 1)[0] for a in ("GSI1PK", "GSI2PK") if a in item}
    assert old["GSI1PK"] == contact_repo.list_pk(org)
    get_store().put({**item, **old})
    return _stored(org, contact_id)


def _seed(api: Api, n: int, *, legacy_every: int = 4, prefix: str = "P") -> list[Item]:
    """n contacts (every third a customer, every other on the pro plan), every `legacy_every`-th moved to the
    unsharded lists; → their stored items."""
    out = []
    for k in range(n):
        body: Item = {"name": f"{prefix}{k}", "email": f"{prefix.lower()}{k}@example.com"}
        body["attributes"] = {"plan": "pro" if k % 2 else "free"}
        if k % 3 == 0:
            body["lifecycle_stage"] = "customer"
        made = contact(api, **body)
        out.append(_to_legacy(api.org_id, made["id"]) if k % legacy_every == 0 else _stored(api.org_id, made["id"]))
    return out


def _pages(api: Api, limit: int, **params: str) -> list[list[str]]:
    return api.pages("/v1/contacts", limit, **params)


def _newest_first(items: list[Item]) -> list[str]:
    return [i["id"] for i in sorted(items, key=lambda i: i["GSI1SK"], reverse=True)]


def test_contacts_land_on_the_shards_of_their_lists_and_older_ones_stay_where_they_are(api: Api):
    made = _seed(api, 48)
    org = api.org_id
    legacy = [c for n, c in enumerate(made) if n % 4 == 0]
    sharded = [c for n, c in enumerate(made) if n % 4]
    for c in sharded:
        assert c["GSI1PK"] == shards.index_pk(contact_repo.list_pk(org), c["id"]) != contact_repo.list_pk(org)
        if c.get("lifecycle_stage"):
            assert c["GSI2PK"] == shards.index_pk(contact_repo.stage_pk(org, "customer"), c["id"])
    # spread over the shards of the organization's list (36 random ids miss 8 of 16 shards with p < 10^-6)
    assert len({c["GSI1PK"] for c in sharded}) >= 9
    assert {c["GSI1PK"] for c in legacy} == {contact_repo.list_pk(org)}
    # a change of an older contact writes its keys again: it moves onto its shard
    moved = legacy[1]
    ok(api.patch(f"/v1/contacts/{moved['id']}", json={"company": "Moved"}))
    assert _stored(org, moved["id"])["GSI1PK"] == shards.index_pk(contact_repo.list_pk(org), moved["id"])


def test_the_list_is_one_order_over_shards_and_the_legacy_partition_with_its_filters(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    made = _seed(api, 60)
    expected = _newest_first(made)
    pages = _pages(api, 7)
    assert [len(p) for p in pages[:-1]] == [7] * 8 and len(pages[-1]) == 4
    assert [i for p in pages for i in p] == expected  # newest first across shards and legacy items, each once

    # items read per page: about the page plus one short read per partition, not the organization's contacts
    read = count_query_items(monkeypatch)
    first = api.get("/v1/contacts", params={"limit": "20"}).json()
    partitions = get_settings().tenant_shards + 1
    assert [c["id"] for c in first["data"]] == expected[:20]
    assert len(read) <= 3 * partitions + 10 and sum(read) <= 20 + 3 * partitions
    read.clear()
    api.get("/v1/contacts", params={"limit": "20", "cursor": first["meta"]["cursor"]})
    assert sum(read) <= 20 + 3 * partitions
    monkeypatch.undo()

    # updated_since: the lower bound of the sort key in every partition
    since = sorted(c["updated_at"] for c in made)[25]
    recent = [c for c in made if c["updated_at"] >= since]
    assert 20 <= len(recent) <= 40
    assert [i for p in _pages(api, 6, updated_since=since) for i in p] == _newest_first(recent)

    # lifecycle_stage reads the stage's list: its shards and its legacy partition
    customers = [c for c in made if c.get("lifecycle_stage") == "customer"]
    assert {c["GSI2PK"] for c in customers} >= {contact_repo.stage_pk(api.org_id, "customer")}  # legacy ones too
    assert [i for p in _pages(api, 3, lifecycle_stage="customer") for i in p] == _newest_first(customers)
    both = [c for c in customers if c["updated_at"] >= since]
    assert [i for p in _pages(api, 2, lifecycle_stage="customer", updated_since=since) for i in p] == _newest_first(
        both
    )
    assert ok(api.get("/v1/contacts", params={"lifecycle_stage": "nobody"})) == []

    # a cursor of another query (or another organization) is refused
    cursor = api.get("/v1/contacts", params={"limit": "5"}).json()["meta"]["cursor"]
    for params in ({"lifecycle_stage": "customer"}, {"updated_since": since}, {"q": "p1"}):
        api.assert_error(api.get("/v1/contacts", params={"cursor": cursor, **params}), 400, "validation_failed")
    _, other = api.new_org("other-owner@example.com")
    api.assert_error(api.get("/v1/contacts", params={"cursor": cursor}, headers=other), 400, "validation_failed")


def _walk(chunk: Any, store: Store, org: str, start: Item | None) -> int:
    """Runs a backfill's chunk function from `start` to its end; → the number of chunks."""
    n = 0
    while True:
        n += 1
        start = chunk(store, org, start)
        if start is None:
            return n
        assert n < 100


def _old_checkpoint(org: str, after: int) -> Item:
    """A checkpoint written before the list was sharded: the LastEvaluatedKey of a page of the unsharded list."""
    page = get_store().query(contact_repo.list_pk(org), index="GSI1", limit=after)
    assert page.last_key is not None and "part" not in page.last_key
    return page.last_key


def test_the_consent_backfill_reaches_every_shard_and_the_legacy_partition(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    store, org = get_store(), api.org_id
    made = _seed(api, 30, legacy_every=3)
    for c in made:  # as before the contact item kept its consent
        store.update(contact_repo.contact_key(org, c["id"]), "REMOVE consent", return_values="NONE")
    monkeypatch.setattr(children, "CONSENT_BACKFILL_CHUNK", 4)
    job = finish(api, start(api, "contacts.consent_backfill", capsys))
    assert job["progress"]["chunks"] >= 30 // 4
    assert all(_stored(org, c["id"]).get("consent") == {} for c in made)

    # an in-flight job of before the sharding resumes at its position in the unsharded list, then reads the shards
    for c in made:
        store.update(contact_repo.contact_key(org, c["id"]), "REMOVE consent", return_values="NONE")
    old = _old_checkpoint(org, 3)
    legacy_order = [c["id"] for c in store.query_all(contact_repo.list_pk(org), index="GSI1")]
    _walk(children.consent_backfill_chunk, store, org, old)
    untouched = {c["id"] for c in made if "consent" not in _stored(org, c["id"])}
    assert untouched == set(legacy_order[:3])  # passed before the checkpoint; everything after it, every shard done


def test_a_walk_meets_older_contacts_that_move_onto_their_shard_while_it_runs(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    """A change moves a contact from the unsharded list onto its shard's: the walk reads the unsharded list first,
    so a contact it has not met there yet is met in its shard."""
    store, org = get_store(), api.org_id
    made = _seed(api, 24, legacy_every=2)
    for c in made:
        store.update(contact_repo.contact_key(org, c["id"]), "REMOVE consent", return_values="NONE")
    monkeypatch.setattr(children, "CONSENT_BACKFILL_CHUNK", 2)
    start: Item | None = None
    while True:
        start = children.consent_backfill_chunk(store, org, start)
        if start is None:
            break
        waiting = [
            c["id"]
            for c in store.query_all(contact_repo.list_pk(org), index="GSI1")
            if "consent" not in _stored(org, c["id"])
        ]
        if waiting:  # an older contact not met yet changes: it leaves the unsharded list
            ok(api.patch(f"/v1/contacts/{waiting[-1]}", json={"company": "Moved"}))
    assert all(_stored(org, c["id"]).get("consent") == {} for c in made)


def test_the_search_reindex_reaches_every_shard_and_the_legacy_partition(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    store, org = get_store(), api.org_id
    made = _seed(api, 20, legacy_every=3, prefix="Oldtimer")

    def drop_rows() -> None:  # as before the search rows existed
        for row in store.query_all(f"ORG#{org}", sk_prefix="CSRCH#"):
            store.delete({"PK": row["PK"], "SK": row["SK"]})

    def found() -> set[str]:
        return {c["id"] for c in ok(api.get("/v1/contacts", params={"q": "oldtimer", "limit": 50}))}

    drop_rows()
    assert found() == set()
    monkeypatch.setattr(search, "REINDEX_CHUNK", 3)
    finish(api, start(api, "contacts.search_reindex", capsys))
    assert found() == {c["id"] for c in made}

    drop_rows()
    legacy_order = [c["id"] for c in store.query_all(contact_repo.list_pk(org), index="GSI1")]
    _walk(search.reindex_chunk, store, org, _old_checkpoint(org, 2))
    assert found() == {c["id"] for c in made} - set(legacy_order[:2])


def test_a_segment_build_reaches_every_shard_and_resumes_an_older_checkpoint(api: Api):
    store, org = get_store(), api.org_id
    made = _seed(api, 26, legacy_every=3)
    pro = {c["id"] for c in made if c["attributes"]["plan"] == "pro"}
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    run_jobs(api)
    assert set(members(api, seg["id"])) == pro
    assert {_stored(org, m)["GSI1PK"] for m in pro} >= {contact_repo.list_pk(org)}  # legacy members too

    # a build of before the sharding, its scan cursor a LastEvaluatedKey of the unsharded list: a new generation
    # whose scan resumes there reaches the legacy contacts after it and every shard
    seg2 = ok(api.post("/v1/cdp/segments", json={"name": "Pro again", "rules": PRO}), 201)
    job = service.get_job(store, seg2["job_id"])
    assert job is not None
    legacy_order = [c["id"] for c in store.query_all(contact_repo.list_pk(org), index="GSI1")]
    checkpoint = {**job["checkpoint"], "phase": "scan", "cursor": _old_checkpoint(org, 4), "scanned": 4}
    while True:
        chunk = segment_build.run_chunk(store, {**job, "checkpoint": checkpoint})
        checkpoint = chunk.checkpoint
        if chunk.done:
            break
    assert checkpoint["phase"] == "done"
    assert set(members(api, seg2["id"])) == pro - set(legacy_order[:4])
    assert ok(api.get(f"/v1/cdp/segments/{seg2['id']}"))["status"] == segments.READY


def test_a_stage_in_use_in_any_shard_or_the_legacy_partition_cannot_be_deleted(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    org = api.org_id
    stage = ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "vip", "name": "VIP"}), 201)
    others = [contact(api, name=f"N{k}", email=f"n{k}@example.com") for k in range(5)]
    held = contact(api, name="Held", email="held@example.com", lifecycle_stage="vip")
    assert _stored(org, held["id"])["GSI2PK"] == shards.index_pk(contact_repo.stage_pk(org, "vip"), held["id"])
    read = count_query_items(monkeypatch)
    api.assert_error(api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}"), 409, "conflict")
    assert len(read) <= get_settings().tenant_shards + 1 + 1  # one round over the stage's partitions (+ the stage)
    monkeypatch.undo()
    _to_legacy(org, held["id"])
    api.assert_error(api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}"), 409, "conflict")
    # another contact in the stage, on a shard; the legacy one leaves it
    ok(api.put(f"/v1/cdp/contacts/{others[0]['id']}/lifecycle-stage", json={"stage": "vip"}))
    ok(api.put(f"/v1/cdp/contacts/{held['id']}/lifecycle-stage", json={"stage": None}))
    api.assert_error(api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}"), 409, "conflict")
    ok(api.put(f"/v1/cdp/contacts/{others[0]['id']}/lifecycle-stage", json={"stage": None}))
    assert api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}").status_code == 204
