"""Cascades as background jobs (CONVENTIONS "Work that grows with a tenant's data"): renaming or deleting a tag and
deleting a label answer after the O(1) catalogue change; the `tag.cascade` / `label.detach` jobs (driven here chunk by
chunk through JobsQueue and the real JobsFunction handler) update every tagged contact (its `tags` and its search
rows) or labelled conversation and message, and leave no stale name behind."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.catalog import label_jobs
from switchboard.contacts import tag_jobs
from switchboard.jobs import service
from switchboard.messaging import status
from switchboard.store import get_store, shards
from tests.integration.support import Api, JobsQueue, run_jobs
from tests.integration.test_catalog_labels import channel, conv  # noqa: F401
from tests.integration.test_cdp import contact, ok


def tags_of(api: Api, contact_id: str) -> list[str]:
    tags: list[str] = ok(api.get(f"/v1/contacts/{contact_id}"))["tags"]
    return tags


def found(api: Api, q: str) -> set[str]:
    return {c["id"] for c in ok(api.get("/v1/contacts", params={"q": q, "limit": 100}))}


def tagged(api: Api, n: int, name: str) -> tuple[str, list[str]]:
    ids = [contact(api, name=f"Person {i}", email=f"person{i}@example.com")["id"] for i in range(n)]
    tag_id = ""
    for contact_id in ids:
        tag_id = ok(api.post(f"/v1/contacts/{contact_id}/tags", json={"name": name}), 201)["tag_id"]
    return tag_id, ids


def steps(api: Api) -> int:
    jobs, n = JobsQueue(api), 0
    while jobs.step():
        n += 1
    return n


def test_a_tag_rename_reaches_every_contact_through_its_job(api: Api, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tag_jobs, "PAGE", 3)
    tag_id, ids = tagged(api, 8, "Gold")
    renamed = ok(api.patch(f"/v1/contact-tags/{tag_id}", json={"name": "Platinum"}))
    assert renamed["name"] == "Platinum" and renamed["job_id"]
    assert ok(api.get(f"/v1/contact-tags/{tag_id}"))["job_id"] == renamed["job_id"]
    assert tags_of(api, ids[0]) == ["Gold"]  # the request changed no contact
    assert steps(api) >= 3  # 8 contacts, 3 a chunk
    job = service.get_job(get_store(), renamed["job_id"])
    assert job["status"] == "completed" and job["progress"]["changed"] == 8
    assert all(tags_of(api, c) == ["Platinum"] for c in ids)
    assert found(api, "platinum") == set(ids) and found(api, "gold") == set()  # search rows follow
    # the job's work run again changes nothing
    again = tag_jobs.run_chunk(get_store(), {**job, "checkpoint": {**job["checkpoint"], "cursor": None}})
    assert again.progress["changed"] == 0


def test_two_renames_in_a_row_end_on_the_last_name_whatever_order_their_chunks_run(api: Api):
    tag_id, ids = tagged(api, 4, "Gold")
    first = ok(api.patch(f"/v1/contact-tags/{tag_id}", json={"name": "Silver"}))["job_id"]
    second = ok(api.patch(f"/v1/contact-tags/{tag_id}", json={"name": "Bronze"}))["job_id"]
    # the later job runs first, then the earlier one
    assert service.run_chunk(get_store(), second, 0) == "completed"
    assert service.run_chunk(get_store(), first, 0) == "completed"
    assert all(tags_of(api, c) == ["Bronze"] for c in ids)
    run_jobs(api)  # their queued messages are now stale: dropped
    assert all(tags_of(api, c) == ["Bronze"] for c in ids)
    assert found(api, "bronze") == set(ids) and found(api, "silver") == found(api, "gold") == set()


def test_a_tag_delete_leaves_no_stale_name(api: Api, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tag_jobs, "PAGE", 3)
    tag_id, ids = tagged(api, 7, "Churn risk")
    keep = ok(api.post(f"/v1/contacts/{ids[0]}/tags", json={"name": "Keep"}), 201)
    assert api.delete(f"/v1/contact-tags/{tag_id}").status_code == 204
    api.assert_error(api.get(f"/v1/contact-tags/{tag_id}"), 404, "not_found")
    api.assert_error(api.post(f"/v1/contacts/{ids[1]}/tags", json={"tag_id": tag_id}), 404, "not_found")
    assert steps(api) >= 3
    assert tags_of(api, ids[0]) == ["Keep"] and all(tags_of(api, c) == [] for c in ids[1:])
    assert found(api, "churn") == set() and found(api, "keep") == {ids[0]}
    org = f"ORG#{api.org_id}"
    assert get_store().query_all(org, sk_prefix=f"CTAG#{tag_id}#") == []
    assert [r["tag_id"] for c in ids for r in get_store().query_all(org, sk_prefix=f"CONTACT#{c}#TAG#")] == [
        keep["tag_id"]
    ]
    # a name freed by the delete can be used again
    assert ok(api.post("/v1/contact-tags", json={"name": "Churn risk"}), 201)["name"] == "Churn risk"


def test_a_label_delete_detaches_it_everywhere_through_its_job(
    api: Api,
    conv: dict[str, Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(label_jobs, "PAGE", 1)
    label = ok(api.post("/v1/labels", json={"name": "Invoice"}), 201)
    ok(api.post(f"/v1/conversations/{conv['id']}/labels", json={"label_id": label["id"]}))
    messages = ok(api.get(f"/v1/conversations/{conv['id']}/messages"))
    for msg in messages:
        ok(api.post("/v1/labels/messages/attach", json={"label_id": label["id"], "message_id": msg["id"]}))
    assert api.delete(f"/v1/labels/{label['id']}").status_code == 204
    api.assert_error(api.get(f"/v1/labels/{label['id']}"), 404, "not_found")
    api.assert_error(
        api.post(f"/v1/conversations/{conv['id']}/labels", json={"label_id": label["id"]}), 404, "not_found"
    )
    audit = [
        a
        for a in shards.query_all(get_store(), shards.all_pks(api.org_id), sk_prefix="AUDIT#")
        if a.get("action") == "label.deleted"
    ]
    job_id = audit[0]["after"]["job_id"]
    assert label["id"] in ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"]  # not yet: the job does it
    assert steps(api) >= 1 + len(messages)
    assert service.get_job(get_store(), job_id)["status"] == "completed"
    assert ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == []
    org = f"ORG#{api.org_id}"
    for msg in messages:
        assert "labels" not in status.get_message(get_store(), api.org_id, msg["id"])
    assert get_store().query_all(org, sk_prefix=f"LBLCONV#{label['id']}#") == []
    assert get_store().query_all(org, sk_prefix=f"LBLMSG#{label['id']}#") == []
