"""Segment builds as background jobs (CONVENTIONS "Work that grows with a tenant's data"): create and a rules PATCH
answer at once with the segment `building`; the `segment.build` job (switchboard.cdp.segment_build, driven here chunk
by chunk through JobsQueue and the real JobsFunction handler) evaluates the contacts a page at a time, keeps
`member_count` equal to the member rows, shows its progress on the segment and ends `ready`. A rules change mid-build,
a redelivered chunk, a contact changed while the build passes it, and a contact deleted meanwhile all end correct."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from functions.cdp_segments.app import handler as segments_handler
from switchboard.cdp import segment_build, segments
from switchboard.contacts import repository as contact_repo
from switchboard.jobs import service
from switchboard.store import Store, get_store
from tests.helpers import run_counters
from tests.integration.support import Api, JobsQueue, run_jobs
from tests.integration.test_cdp import contact, events_of, ok
from tests.integration.test_cdp_segments import QUEUE, members
from tests.integration.test_webhooks import Pipeline

PRO = {"field": "attributes.plan", "op": "eq", "value": "pro"}
FREE = {"field": "attributes.plan", "op": "eq", "value": "free"}


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_build, "PAGE", 4)
    monkeypatch.setattr(segment_build, "FLIPS_PER_TX", 3)


def people(api: Api, n: int) -> dict[str, str]:
    """n contacts, every third on the free plan → {contact_id: plan}."""
    made = {}
    for i in range(n):
        plan = "free" if i % 3 == 0 else "pro"
        made[contact(api, name=f"P{i}", email=f"p{i}@example.com", attributes={"plan": plan})["id"]] = plan
    return made


def segment(api: Api, segment_id: str) -> dict[str, Any]:
    """The segment once the stream consumer has counted every member row written so far."""
    run_counters()
    data: dict[str, Any] = ok(api.get(f"/v1/cdp/segments/{segment_id}"))
    return data


def net_entries(api: Api, segment_id: str) -> Counter[str]:
    """+1 per entry_added, -1 per entry_removed, per contact: the events tell the membership's story."""
    net: Counter[str] = Counter()
    for e in events_of(api, "crm.list.entry_"):
        if e["payload"]["list_id"] == segment_id:
            net[e["payload"]["contact_id"]] += 1 if e["event_type"].endswith("added") else -1
    return +net


def assert_true_membership(api: Api, seg: dict[str, Any], expected: set[str]) -> None:
    assert set(members(api, seg["id"])) == expected
    assert segment(api, seg["id"])["member_count"] == len(expected)
    assert net_entries(api, seg["id"]) == Counter(dict.fromkeys(expected, 1))


def test_a_segment_over_many_contacts_builds_chunk_by_chunk(api: Api, small_chunks: None):
    made = people(api, 18)
    pro = {c for c, plan in made.items() if plan == "pro"}
    created = api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO})
    seg = ok(created, 201)
    assert seg["status"] == "building" and seg["member_count"] == 0 and seg["progress"] == {"contacts_scanned": 0}
    assert members(api, seg["id"]) == []  # the request wrote no membership

    jobs = JobsQueue(api)
    scanned = []
    while jobs.step():
        now = segment(api, seg["id"])
        if now["status"] == "building":
            scanned.append(now["progress"]["contacts_scanned"])
            assert now["member_count"] == len(members(api, seg["id"]))  # true at every step
    assert scanned[:5] == [4, 8, 12, 16, 18]  # 5 scan chunks of 4 contacts, then the sweep
    done = segment(api, seg["id"])
    assert done["status"] == "ready" and done["progress"] is None and done["built_at"]
    assert_true_membership(api, seg, pro)
    job = service.get_job(get_store(), seg["job_id"])
    assert job["status"] == "completed" and job["kind"] == "segment.build"
    assert job["progress"]["contacts_scanned"] == 18 and job["progress"]["added"] == len(pro)
    assert job["progress"]["chunks"] > 5  # the scan pages, then the sweep pages of the member rows


def test_rules_changed_mid_build_end_correct(api: Api, small_chunks: None):
    made = people(api, 14)
    seg = ok(api.post("/v1/cdp/segments", json={"name": "S", "rules": PRO}), 201)
    jobs = JobsQueue(api)
    assert jobs.step() == 1 and jobs.step() == 1  # two chunks of the first build ran: some pro members written
    assert len(members(api, seg["id"])) > 0
    first_job = seg["job_id"]
    # an older chunk that was already running decided under the old rules; it must not write after the change
    stale_job = service.get_job(get_store(), first_job)

    changed = ok(api.patch(f"/v1/cdp/segments/{seg['id']}", json={"rules": FREE}))
    assert changed["status"] == "building" and changed["job_id"] != first_job
    before = len(events_of(api, "crm.list.entry_"))
    outcome = segment_build.run_chunk(get_store(), stale_job)
    assert outcome.done and outcome.progress == {"superseded": 1}
    assert len(events_of(api, "crm.list.entry_")) == before

    run_jobs(api)
    assert service.get_job(get_store(), first_job)["status"] == "completed"
    assert segment(api, seg["id"])["status"] == "ready"
    free = {c for c, plan in made.items() if plan == "free"}
    assert set(members(api, seg["id"])) == free
    assert segment(api, seg["id"])["member_count"] == len(free)
    assert net_entries(api, seg["id"]) == Counter(dict.fromkeys(free, 1))


def test_an_old_generation_chunk_cannot_write_once_the_rules_changed(
    api: Api, small_chunks: None, monkeypatch: pytest.MonkeyPatch
):
    """The rules change between a chunk's read of the segment and its writes: the generation condition on the count
    update cancels the chunk's whole write."""
    people(api, 6)
    seg = ok(api.post("/v1/cdp/segments", json={"name": "S", "rules": PRO}), 201)
    real = Store.batch_get
    changed: list[bool] = []

    def change_rules_first(self: Store, keys: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if not changed and any(k["SK"].startswith("SEGMENT#") for k in keys):
            changed.append(True)
            ok(api.patch(f"/v1/cdp/segments/{seg['id']}", json={"rules": FREE}))
        return real(self, keys, **kwargs)

    monkeypatch.setattr(Store, "batch_get", change_rules_first)
    JobsQueue(api).step()
    assert changed and members(api, seg["id"]) == [] and events_of(api, "crm.list.entry_") == []
    assert service.get_job(get_store(), seg["job_id"])["status"] == "completed"  # stopped: superseded
    monkeypatch.undo()
    run_jobs(api)
    free = {c["contact_id"] for c in ok(api.get(f"/v1/cdp/segments/{seg['id']}/members", params={"limit": 100}))}
    assert len(free) == 2 and segment(api, seg["id"])["member_count"] == 2


def test_a_redelivered_chunk_is_harmless(api: Api, small_chunks: None):
    made = people(api, 10)
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    jobs = JobsQueue(api)
    first = jobs.receive()
    assert jobs.run(first, delete=False) == {"batchItemFailures": []}
    after_first = (members(api, seg["id"]), len(events_of(api, "crm.list.entry_")), segment(api, seg["id"]))
    # the same message again (SQS redelivery): dropped by the job's seq
    assert service.run_chunk(get_store(), seg["job_id"], 0) == "stale"
    # and the chunk's own work run twice (two consumers on one message) writes nothing the second time
    job = service.get_job(get_store(), seg["job_id"])
    checkpoint_job = {**job, "checkpoint": {**job["checkpoint"], "cursor": None, "scanned": 0, "phase": "scan"}}
    again = segment_build.run_chunk(get_store(), checkpoint_job)
    assert again.progress["added"] == 0 and again.progress["removed"] == 0
    assert (members(api, seg["id"]), len(events_of(api, "crm.list.entry_")), segment(api, seg["id"])) == after_first
    for record in first:
        jobs.sqs.delete_message(QueueUrl=jobs.url, ReceiptHandle=record["receiptHandle"])
    run_jobs(api)
    assert_true_membership(api, seg, {c for c, plan in made.items() if plan == "pro"})


def test_contacts_changed_or_deleted_during_a_build_end_correct(
    api: Api, small_chunks: None, monkeypatch: pytest.MonkeyPatch
):
    made = people(api, 12)
    ids = list(made)
    pipeline = Pipeline(api)
    pipeline.publish()
    pipeline.receive(QUEUE)  # the creates' events: handled before the segment exists
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    jobs = JobsQueue(api)
    assert jobs.step() == 1  # the first page was evaluated and written
    scanned = {c["id"] for c in contact_repo.walk_page(get_store(), api.org_id, None, limit=12)[0]}
    passed = next(c for c in ids if made[c] == "pro" and c in set(members(api, seg["id"])))
    # a contact the build passed changes: the incremental path corrects it
    ok(api.patch(f"/v1/contacts/{passed}", json={"attributes": {"plan": "free"}}))
    made[passed] = "free"
    # a contact is deleted mid-build
    gone = next(c for c in ids if made[c] == "pro" and c != passed)
    assert api.delete(f"/v1/contacts/{gone}").status_code == 204
    del made[gone]
    run_jobs(api)
    assert scanned
    # the contact.updated events reach the consumer
    pipeline.publish()
    records = pipeline.receive(QUEUE)
    assert pipeline.invoke(segments_handler, QUEUE, records) == {"batchItemFailures": []}
    assert segment(api, seg["id"])["status"] == "ready"
    assert_true_membership(api, seg, {c for c, plan in made.items() if plan == "pro"})


def test_a_contact_changed_between_the_builds_read_and_write_is_left_to_the_incremental_path(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    """The build read Ada's page (plan pro), then Ada moves to free and the consumer handles her event before the
    build writes: the build's check on Ada's `updated_at` drops its stale join."""
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "pro"})
    bob = contact(api, name="Bob", email="bob@example.com", attributes={"plan": "pro"})
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    real = Store.batch_get
    raced: list[Any] = []

    def change_ada_between_read_and_write(self: Store, keys: Any, **kwargs: Any) -> list[dict[str, Any]]:
        rows = real(self, keys, **kwargs)
        if not raced and any(k["SK"].startswith("SEGMENT#") for k in keys):
            raced.append(None)
            ok(api.patch(f"/v1/contacts/{ada['id']}", json={"attributes": {"plan": "free"}}))
            raced[0] = segments.refresh_contact(self, api.org_id, ada["id"])
        return rows

    monkeypatch.setattr(Store, "batch_get", change_ada_between_read_and_write)
    run_jobs(api)
    monkeypatch.undo()
    assert raced == [[]]  # the consumer saw Ada free and not a member: nothing to do
    assert segment(api, seg["id"])["status"] == "ready"
    assert_true_membership(api, seg, {bob["id"]})


def test_a_build_failing_every_try_shows_failed_and_resume_finishes_it(api: Api, monkeypatch: pytest.MonkeyPatch):
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "pro"})
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    jobs = JobsQueue(api)
    monkeypatch.setattr(segments, "evaluate", lambda *a: (_ for _ in ()).throw(RuntimeError("rules broke")))
    (record,) = jobs.receive()
    for receive in range(1, service.MAX_RECEIVES + 1):
        record["attributes"]["ApproximateReceiveCount"] = str(receive)
        assert jobs.run([record], delete=False) == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        assert segment(api, seg["id"])["status"] == ("failed" if receive == service.MAX_RECEIVES else "building")
    jobs.sqs.purge_queue(QueueUrl=jobs.url)  # (SQS moved it to the DLQ)

    monkeypatch.undo()
    assert service.resume(get_store(), seg["job_id"]) is True
    assert jobs.step() == 1
    assert segment(api, seg["id"])["status"] == "building"
    run_jobs(api)
    assert segment(api, seg["id"])["status"] == "ready"
    assert_true_membership(api, seg, {ada["id"]})


def test_a_segment_deleted_mid_build_leaves_no_member_rows(api: Api, small_chunks: None):
    people(api, 10)
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    jobs = JobsQueue(api)
    (record,) = jobs.receive()
    job = service.get_job(get_store(), seg["job_id"])
    assert api.delete(f"/v1/cdp/segments/{seg['id']}").status_code == 204
    # the chunk that was already under way when the delete ran writes nothing
    assert segment_build.run_chunk(get_store(), job).progress == {"superseded": 1}
    assert jobs.run([record]) == {"batchItemFailures": []}
    run_jobs(api)
    assert get_store().query_all(f"ORG#{api.org_id}", sk_prefix=f"SEGMENT#{seg['id']}#") == []
    assert service.get_job(get_store(), seg["job_id"])["status"] == "completed"


def test_the_incremental_path_evaluates_with_the_rules_of_the_running_build(api: Api):
    """A `contact.updated` handled with a segment read before its rules changed (an older generation) does not
    write under the old rules: the segment is read again before the flip and the contact evaluated with the new ones.
    (The consumer reads the segments consistently; a stale copy is what a race with the PATCH would give it.)"""
    ada = contact(api, name="Ada", email="ada@example.com", attributes={"plan": "pro"})
    seg = ok(api.post("/v1/cdp/segments", json={"name": "S", "rules": PRO}), 201)
    old = get_store().get(segments.segment_key(api.org_id, seg["id"]), consistent=True)
    ok(api.patch(f"/v1/cdp/segments/{seg['id']}", json={"rules": FREE}))
    run_jobs(api)
    assert members(api, seg["id"]) == []
    # the consumer still holds the old segment (pro): Ada is pro, so under the old rules she would join
    assert segments.refresh_contact(get_store(), api.org_id, ada["id"], [old]) == []
    assert members(api, seg["id"]) == [] and segment(api, seg["id"])["member_count"] == 0
    # a flip under the old rules is not written: it is redone with the new ones
    ok(api.patch(f"/v1/contacts/{ada['id']}", json={"attributes": {"plan": "free"}}))
    other = {**old, "rules": {"field": "name", "op": "exists"}}  # the old generation wanted her in
    assert segments.refresh_contact(get_store(), api.org_id, ada["id"], [other]) == [(seg["id"], True)]
    assert_true_membership(api, seg, {ada["id"]})


def test_deleting_a_large_segment_answers_at_once_and_a_job_removes_its_rows(
    api: Api, small_chunks: None, monkeypatch: pytest.MonkeyPatch
):
    from switchboard.cdp import segment_delete

    made = people(api, 12)
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    run_jobs(api)
    pro = {c for c, plan in made.items() if plan == "pro"}
    assert set(members(api, seg["id"])) == pro

    writes: list[str] = []
    real_delete, real_transact = Store.batch_delete, Store.transact
    monkeypatch.setattr(Store, "batch_delete", lambda self, ks: writes.append("batch") or real_delete(self, ks))
    monkeypatch.setattr(
        Store, "transact", lambda self, ops: writes.append(f"tx{len(list(ops))}") or real_transact(self, ops)
    )
    assert api.delete(f"/v1/cdp/segments/{seg['id']}").status_code == 204
    assert writes == ["tx3"]  # the segment, its audit record and the job: nothing that grows with the members
    monkeypatch.undo()
    assert api.get(f"/v1/cdp/segments/{seg['id']}").status_code == 404
    assert {c["id"] for c in ok(api.get("/v1/cdp/segments"))}.isdisjoint({seg["id"]})

    monkeypatch.setattr(segment_delete, "PAGE", 3)
    jobs = JobsQueue(api)
    left = []
    while jobs.step():
        left.append(len(get_store().query_all(f"ORG#{api.org_id}", sk_prefix=f"SEGMENT#{seg['id']}#")))
    assert left[0] == len(pro) - 3 and left[-1] == 0  # page by page
    assert get_store().query_all(f"ORG#{api.org_id}", sk_prefix=f"SEGEXP#{seg['id']}#") == []
    (audit,) = [a for a in ok(api.get("/v1/audit-logs")) if a["action"] == "cdp.segment.deleted"]
    job = service.get_job(get_store(), audit["after"]["job_id"])
    assert job["kind"] == "segment.delete" and job["status"] == "completed"
    assert job["progress"]["members_deleted"] == len(pro)
