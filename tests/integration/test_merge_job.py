"""Merging a contact that holds more than one 100-operation transaction can carry (issue 20): the request writes the
pointer, the target and as many re-pointed identities as fit, and the `contacts.merge` job moves the rest in chunks.
While it runs every identity of the merged contact already resolves to the target, and nothing can claim one."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.contacts import merge as merging
from switchboard.contacts import repository as contact_repo
from switchboard.jobs import service
from switchboard.store import get_store
from tests.integration.support import Api, JobsQueue
from tests.integration.test_cdp import contact, ok

IDENTITIES = 250


def ident(n: int) -> dict[str, Any]:
    return {"type": "external_id", "source": "crm", "value": f"lin-{n}"}


def resolve(api: Api, n: int) -> str:
    return str(ok(api.post("/v1/contacts/resolve", json={"identifiers": [ident(n)]}))["id"])


def test_a_contact_with_250_identities_merges_through_the_job(api: Api, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(merging, "INLINE_CHUNKS", 1)  # the request runs one chunk, the queue the rest
    store, org = get_store(), api.org_id
    target = contact(api, name="Ada", email="ada@example.com")
    source = contact(api, name="Lin", email="lin@example.com")
    for start in range(0, IDENTITIES, 20):
        batch = [ident(n) for n in range(start, min(start + 20, IDENTITIES))]
        ok(api.post("/v1/contacts", json={"email": "lin@example.com", "identities": batch}))
    for n in range(3):
        ok(api.post(f"/v1/contacts/{source['id']}/notes", json={"body": f"note {n}"}), 201)
    ok(api.post(f"/v1/contacts/{source['id']}/tags", json={"name": "vip"}), 201)
    assert len(ok(api.get(f"/v1/contacts/{source['id']}"))["identities"]) == IDENTITIES + 1

    merged = ok(api.post(f"/v1/contacts/{target['id']}/merge", json={"from_contact_id": source["id"]}))
    assert merged["id"] == target["id"] and len(merged["identities"]) == IDENTITIES + 2 and merged["tags"] == ["vip"]
    api.assert_error(api.get(f"/v1/contacts/{source['id']}"), 404, "not_found")
    pointer = store.get(contact_repo.merged_key(org, source["id"]), consistent=True)
    assert pointer is not None and pointer["status"] == "merging" and pointer["target_id"] == target["id"]
    job = service.get_job(store, pointer["job_id"])
    assert job is not None and job["status"] == "running" and job["checkpoint"]["pending"]  # left to the queue

    # Meanwhile: an identity not re-pointed yet resolves to the target, and an upsert naming it updates the target
    # instead of claiming it for a new contact.
    late = IDENTITIES - 1
    sentinel = store.get(contact_repo.sentinel_key(org, f"IDENT#external_id#crm#lin-{late}"), consistent=True)
    assert sentinel is not None and sentinel["contact_id"] == source["id"]
    assert resolve(api, late) == target["id"]
    upsert = api.post("/v1/contacts", json={"company": "Lin & Co", "identities": [ident(late)]})
    assert upsert.status_code == 200 and upsert.json()["data"]["id"] == target["id"], upsert.text
    both = {"identifiers": [ident(0), ident(late)]}  # one re-pointed, one not: still one contact
    assert ok(api.post("/v1/contacts/resolve", json=both))["id"] == target["id"]

    chunks = JobsQueue(api).drain()
    assert chunks > 3
    job = service.get_job(store, pointer["job_id"])
    assert job is not None and job["status"] == "completed"
    assert job["progress"]["identities"] > 0 and job["progress"]["children"] >= 4
    pointer = store.get(contact_repo.merged_key(org, source["id"]), consistent=True)
    assert pointer is not None and pointer["status"] == "merged"
    sentinels = store.query_all(f"ORG#{org}", sk_prefix="IDENT#external_id#crm#lin-", consistent=True)
    assert len(sentinels) == IDENTITIES and {s["contact_id"] for s in sentinels} == {target["id"]}
    assert store.query_all(f"ORG#{org}", sk_prefix=f"CONTACT#{source['id']}#", consistent=True) == []
    notes = ok(api.get(f"/v1/contacts/{target['id']}/notes"))
    assert sorted(n["body"] for n in notes) == ["note 0", "note 1", "note 2"]
    assert [c["id"] for c in ok(api.get("/v1/contacts", params={"tag": "vip"}))] == [target["id"]]
    assert all(resolve(api, n) == target["id"] for n in (0, 100, IDENTITIES - 1))
    assert ok(api.get(f"/v1/contacts/{target['id']}"))["company"] == "Lin & Co"


def test_every_merge_transaction_stays_within_100_operations(api: Api, monkeypatch: pytest.MonkeyPatch):
    from switchboard.store.table import Store as DynamoStore

    sizes: list[int] = []
    transact = DynamoStore.transact

    def watched(self: DynamoStore, ops: Any) -> None:
        ops = list(ops)
        sizes.append(len(ops))
        transact(self, ops)

    target = contact(api, name="Ada", email="ada@example.com")
    source = contact(api, name="Lin", email="lin@example.com")
    for start in range(0, 120, 20):
        batch = [ident(n) for n in range(start, start + 20)]
        ok(api.post("/v1/contacts", json={"email": "lin@example.com", "identities": batch}))
    monkeypatch.setattr(DynamoStore, "transact", watched)
    ok(api.post(f"/v1/contacts/{target['id']}/merge", json={"from_contact_id": source["id"]}))
    JobsQueue(api).drain()
    assert sizes and max(sizes) <= 100
    assert max(sizes) > 90  # the request filled its transaction with re-pointed identities


def test_a_target_deleted_mid_merge_leaves_nothing_of_the_merged_person(api: Api, monkeypatch: pytest.MonkeyPatch):
    """The target is deleted while the merge job still has identities and children to move: its erasure and the
    job together leave no sentinel, child or other item holding the merged person's identities or notes."""
    import json

    from tests.integration.test_security_contact_erasure import run_cascade, scan_all
    from tests.integration.test_webhooks import Pipeline

    monkeypatch.setattr(merging, "INLINE_CHUNKS", 0)  # everything after the request waits for the queue
    pipeline = Pipeline(api)
    target = contact(api, name="Ada", email="ada@example.com")
    source = contact(api, name="Lin", email="lin@example.com")
    for start in range(0, 140, 20):
        ok(
            api.post(
                "/v1/contacts",
                json={"email": "lin@example.com", "identities": [ident(n) for n in range(start, start + 20)]},
            )
        )
    ok(api.post(f"/v1/contacts/{source['id']}/notes", json={"body": "secret-note-of-lin"}), 201)
    ok(api.post(f"/v1/contacts/{target['id']}/merge", json={"from_contact_id": source["id"]}))
    assert api.delete(f"/v1/contacts/{target['id']}").status_code == 204
    run_cascade(pipeline)  # the target's erasure, before the merge job runs
    JobsQueue(api).drain()
    run_cascade(pipeline)
    left = [
        (i["PK"]["S"], i["SK"]["S"])
        for i in scan_all()
        if any(needle in json.dumps(i) for needle in ("lin-", "secret-note-of-lin", "lin@example.com"))
    ]
    assert left == []
    api.assert_error(api.post("/v1/contacts/resolve", json={"identifiers": [ident(130)]}), 404, "not_found")
