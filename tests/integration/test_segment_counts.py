"""A segment's `member_count` is counted from the table stream of its member rows: no transaction of a membership
flip (incremental path or build) holds a counter, concurrent flips and a replayed stream end exact, and members
that joined under the former in-transaction count are taken off once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from switchboard.cdp import segment_counts, segments
from switchboard.store import get_store, keys
from switchboard.store.table import Store as DynamoStore
from tests.helpers import run_counters
from tests.integration.support import Api, run_jobs
from tests.integration.test_cdp import contact, ok
from tests.integration.test_cdp_segments import counted, members
from tests.integration.test_segment_build_job import PRO, people


def watch_transactions(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """From now on, the operations of every transaction, one list per transaction."""
    seen: list[list[Any]] = []
    transact = DynamoStore.transact

    def watched(self: DynamoStore, ops: Any) -> None:
        ops = list(ops)
        seen.append(ops)
        transact(self, ops)

    monkeypatch.setattr(DynamoStore, "transact", watched)
    return seen


def _sk(op: Any) -> str:
    return str((getattr(op, "key", None) or getattr(op, "item", None) or {}).get("SK", ""))


def flip_transactions(transactions: list[list[Any]], segment_id: str) -> list[list[Any]]:
    """The transactions that write or delete a member row of the segment (the flips, not the counting)."""
    prefix = segments.member_prefix(segment_id)
    return [ops for ops in transactions if any(_sk(op).startswith(prefix) for op in ops)]


def counters_in(transactions: list[list[Any]], org: str, segment_id: str) -> list[Any]:
    """Operations that write a segment counter: the shard rows, or the segment item itself (its `member_count`)."""
    segment_sk = segments.segment_key(org, segment_id)["SK"]
    found = []
    for ops in transactions:
        for op in ops:
            sk = _sk(op)
            if sk.startswith(segment_counts.SHARD_PREFIX) or (
                sk == segment_sk and type(op).__name__ != "ConditionCheck"
            ):
                found.append(op)
    return found


def test_concurrent_flips_and_a_replayed_stream_count_exact(api: Api, monkeypatch: pytest.MonkeyPatch):
    store, org = get_store(), api.org_id
    made = people(api, 12)
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    seen = watch_transactions(monkeypatch)
    run_jobs(api)  # the build's flips
    pro = sorted(c for c, plan in made.items() if plan == "pro")
    assert members(api, seg["id"]) == pro
    assert counted(api, seg["id"]) == len(pro)

    # every contact changes plan, then is evaluated by several consumers at once (each event delivered 3 times)
    for contact_id, plan in made.items():
        ok(api.patch(f"/v1/contacts/{contact_id}", json={"attributes": {"plan": "free" if plan == "pro" else "pro"}}))
    with ThreadPoolExecutor(max_workers=8) as pool:
        changes = list(pool.map(lambda c: segments.refresh_contact(store, org, c), sorted(made) * 3))
    flipped = [change for found in changes for change in found]
    assert len(flipped) == len(made)  # each membership flipped once, whoever evaluated it
    free = sorted(c for c, plan in made.items() if plan == "free")
    assert members(api, seg["id"]) == free

    flips = flip_transactions(seen, seg["id"])
    assert len(flips) >= 2 and not counters_in(flips, org, seg["id"])  # no flip's transaction holds a counter
    assert counted(api, seg["id"]) == len(free)  # the whole stream handed over again: each record counts once
    run_counters()
    assert counted(api, seg["id"]) == len(free)
    shards = store.query_all(keys.org_pk(org), sk_prefix=f"{segment_counts.SHARD_PREFIX}{seg['id']}#")
    assert 1 < len(shards) <= segment_counts.SHARDS  # spread over the shards, read with one BatchGet
    listed = {s["id"]: s["member_count"] for s in ok(api.get("/v1/cdp/segments"))}
    assert listed == {seg["id"]: len(free)}


def test_members_counted_before_stream_counting_are_taken_off_once(api: Api):
    """A segment whose `member_count` was kept in its flips' transactions: its rows carry no `counted` mark; the
    count read is that number plus the shards, a legacy row's removal takes one off, and its insert is not recounted."""
    store, org = get_store(), api.org_id
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "free"})
    bob = contact(api, name="Bob", email="bob@example.com", attributes={"plan": "free"})
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    run_jobs(api)
    # make it a segment from before: member rows without the mark, the count on the item
    for person in (ada, bob):
        ok(api.patch(f"/v1/contacts/{person['id']}", json={"attributes": {"plan": "pro"}}))
        store.put(
            {
                **segments.member_key(org, seg["id"], person["id"]),
                "entity": segment_counts.MEMBER_ENTITY,
                "segment_id": seg["id"],
                "contact_id": person["id"],
                "added_at": "2026-01-01T00:00:00Z",
            },
            condition=None,
        )
    store.update(segments.segment_key(org, seg["id"]), "SET member_count = :n", values={":n": 2}, return_values="NONE")
    assert counted(api, seg["id"]) == 2

    ok(api.patch(f"/v1/contacts/{ada['id']}", json={"attributes": {"plan": "free"}}))
    assert segments.refresh_contact(store, org, ada["id"]) == [(seg["id"], False)]
    assert counted(api, seg["id"]) == 1
    run_counters()
    assert counted(api, seg["id"]) == 1 and members(api, seg["id"]) == [bob["id"]]


def test_counting_never_writes_into_an_organization_being_purged(api: Api):
    """The purge's own deletions of member rows, read from the stream after it passed, write no shard or tally."""
    from switchboard.identity.lifecycle import PURGING

    store, org = get_store(), api.org_id
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "pro"})
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    run_jobs(api)
    assert counted(api, seg["id"]) == 1
    store.update(
        keys.organization(org), "SET #s = :p", names={"#s": "status"}, values={":p": PURGING}, return_values="NONE"
    )
    for prefix in (segment_counts.SHARD_PREFIX, segment_counts.TALLY_PREFIX, segments.member_prefix(seg["id"])):
        for row in store.query_all(keys.org_pk(org), sk_prefix=prefix, consistent=True):
            store.delete(keys.key(row["PK"], row["SK"]))  # as the purge does
    run_counters()
    left = [
        row["SK"]
        for prefix in (segment_counts.SHARD_PREFIX, segment_counts.TALLY_PREFIX)
        for row in store.query_all(keys.org_pk(org), sk_prefix=prefix, consistent=True)
    ]
    assert left == [] and ada["id"]
