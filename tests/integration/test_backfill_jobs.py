"""Consent kept on the contact item (segment rules on consent read no other item), and the backfills as job kinds
(`python -m switchboard.jobs start <kind> <org>`), each run to completion over several chunks by the real consumer."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.cdp import segments
from switchboard.contacts import children, search
from switchboard.contacts import repository as contact_repo
from switchboard.jobs import service
from switchboard.jobs.__main__ import main as jobs_cli
from switchboard.messaging import channels, conversations, messages
from switchboard.store import Store, get_store
from tests.integration.support import Api, JobsQueue
from tests.integration.test_cdp import built, contact, ok
from tests.integration.test_cdp_segments import members
from tests.integration.test_messaging import _send

OPTED_IN = {"field": "consent.whatsapp", "op": "eq", "value": "opted_in"}


@pytest.fixture
def channel(api: Api) -> dict[str, Any]:
    """A connected sandbox channel."""
    made = ok(
        api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {"api_token": "t" * 16}}), 201
    )
    connected: dict[str, Any] = ok(api.post(f"/v1/channels/{made['id']}/connect"))
    return connected


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, one entry per store read (GetItem, BatchGet, Query)."""
    reads: list[str] = []
    for name in ("get", "batch_get", "query"):
        real = getattr(Store, name)

        def counting(self: Store, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Store, name, counting)
    return reads


def start(api: Api, kind: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Start a backfill as an operator does; → the job id (printed by the command)."""
    import json

    capsys.readouterr()
    assert jobs_cli(["start", kind, api.org_id]) == 0
    job_id: str = json.loads(capsys.readouterr().out)["job_id"]
    return job_id


def finish(api: Api, job_id: str) -> dict[str, Any]:
    JobsQueue(api).drain()
    job = service.get_job(get_store(), job_id)
    assert job is not None and job["status"] == "completed", job
    return job


def consent(api: Api, contact_id: str, status: str) -> None:
    resp = api.put(f"/v1/contacts/{contact_id}/consent/whatsapp", json={"status": status, "source": "web"})
    assert resp.status_code in (200, 201), resp.text


def test_consent_rules_are_evaluated_from_the_contact_item_alone(api: Api, monkeypatch: pytest.MonkeyPatch):
    store, org = get_store(), api.org_id
    ada = contact(api, name="Ada", email="ada@example.com")
    bob = contact(api, name="Bob", email="bob@example.com")
    consent(api, ada["id"], "opted_in")
    consent(api, bob["id"], "opted_out")
    item = store.get(contact_repo.contact_key(org, ada["id"]), consistent=True)
    assert item is not None and item["consent"] == {"whatsapp": "opted_in"}  # in the consent change's transaction
    assert "consent" not in ok(api.get(f"/v1/contacts/{ada['id']}"))  # not part of the contact's view

    reads = count_reads(monkeypatch)
    for person, wanted in ((ada, True), (bob, False)):
        row = store.get(contact_repo.contact_key(org, person["id"]), consistent=True)
        reads.clear()
        assert segments.evaluate(OPTED_IN, segments.Context(store, org, row)) is wanted
        assert reads == []  # no consent row read
    monkeypatch.undo()

    seg = built(api, api.post("/v1/cdp/segments", json={"name": "Opted in", "rules": OPTED_IN}))
    assert members(api, seg["id"]) == [ada["id"]]
    consent(api, bob["id"], "opted_in")  # a consent change is a contact change: the incremental path sees it
    assert segments.refresh_contact(store, org, bob["id"]) == [(seg["id"], True)]


def test_the_consent_backfill_gives_older_contacts_their_map_chunk_by_chunk(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    store, org = get_store(), api.org_id
    made = [contact(api, name=f"P{n}", email=f"p{n}@example.com")["id"] for n in range(7)]
    for contact_id in made[:3]:
        consent(api, contact_id, "opted_in")
    for contact_id in made:  # as before the contact item kept its consent
        store.update(contact_repo.contact_key(org, contact_id), "REMOVE consent", return_values="NONE")
    legacy = store.get(contact_repo.contact_key(org, made[0]), consistent=True)
    reads = count_reads(monkeypatch)
    assert segments.evaluate(OPTED_IN, segments.Context(store, org, legacy)) is True
    assert len(reads) == 1  # until backfilled: the consent row is read
    monkeypatch.undo()

    monkeypatch.setattr(children, "CONSENT_BACKFILL_CHUNK", 3)
    job = finish(api, start(api, "contacts.consent_backfill", capsys))
    assert job["progress"]["chunks"] == 3  # 7 contacts, 3 a chunk
    for n, contact_id in enumerate(made):
        item = store.get(contact_repo.contact_key(org, contact_id), consistent=True)
        assert item is not None and item["consent"] == ({"whatsapp": "opted_in"} if n < 3 else {})
    before = store.get(contact_repo.contact_key(org, made[0]), consistent=True)
    children.consent_backfill_chunk(store, org, None)  # a chunk run again changes nothing
    assert store.get(contact_repo.contact_key(org, made[0]), consistent=True) == before
    reads = count_reads(monkeypatch)
    assert segments.evaluate(OPTED_IN, segments.Context(store, org, before)) is True and reads == []


def test_the_search_reindex_runs_as_a_job(api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    store, org = get_store(), api.org_id
    made = sorted(contact(api, name=f"Old Timer {n}", company="Legacy Works")["id"] for n in range(9))
    for row in store.query_all(f"ORG#{org}", sk_prefix="CSRCH#"):  # as before the search rows existed
        store.delete({"PK": row["PK"], "SK": row["SK"]})
    assert ok(api.get("/v1/contacts", params={"q": "legacy"})) == []
    monkeypatch.setattr(search, "REINDEX_CHUNK", 4)
    job = finish(api, start(api, "contacts.search_reindex", capsys))
    assert job["progress"]["chunks"] == 3
    found = ok(api.get("/v1/contacts", params={"q": "legacy", "limit": 50}))
    assert sorted(c["id"] for c in found) == made


def test_the_assignee_reindex_runs_as_a_job(
    api: Api, channel: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    store, org = get_store(), api.org_id
    convs = [
        messages.get_item(store, org, _send(api, channel, to=f"+1415555{3300 + n}")["id"])["conversation_id"]
        for n in range(5)
    ]
    for conv_id in convs:  # as before the assignee list existed: in the unsharded list, without GSI2 keys
        store.update(
            conversations.conv_key(org, conv_id),
            "SET GSI1PK = :legacy REMOVE GSI2PK, GSI2SK",
            values={":legacy": conversations.list_pk(org)},
            return_values="NONE",
        )
    assert ok(api.get("/v1/conversations", params={"assignee": "none"})) == []
    monkeypatch.setattr(conversations, "REINDEX_CHUNK", 2)
    job = finish(api, start(api, "conversations.assignee_reindex", capsys))
    assert job["progress"]["chunks"] == 3
    unassigned = ok(api.get("/v1/conversations", params={"assignee": "none", "limit": 100}))
    assert sorted(c["id"] for c in unassigned) == sorted(convs)


def test_the_channel_legacy_rows_move_as_a_job(
    api: Api, channel: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    store, pk = get_store(), f"ORG#{api.org_id}"
    for n in range(4):  # rows written under the channel's own prefix, as before they had their own
        phone = f"1415555012{n}"
        store.put({"PK": pk, "SK": f"CHANNEL#{channel['id']}#BLOCK#{phone}", "entity": "ChannelBlock",
                   "phone": phone, "blocked_at": "2026-01-01T00:00:00.000Z"})  # fmt: skip
    monkeypatch.setattr(channels, "MOVE_CHUNK", 2)
    job = finish(api, start(api, "channels.legacy_rows", capsys))
    assert job["progress"]["chunks"] == 3  # the channel and 4 rows, 2 a chunk
    assert [r["entity"] for r in store.query_all(pk, sk_prefix="CHANNEL#")] == ["Channel"]
    phones = {b["phone"] for b in ok(api.get(f"/v1/channels/{channel['id']}/blocked-contacts"))}
    assert phones == {f"1415555012{n}" for n in range(4)}


def test_start_refuses_an_unknown_kind_or_organization(api: Api):
    with pytest.raises(SystemExit):
        jobs_cli(["start", "organization.purge", api.org_id])  # not a backfill: started by its own flow
    with pytest.raises(SystemExit):
        jobs_cli(["start", "contacts.search_reindex", "org_missing"])


def test_an_operator_starts_the_move_of_older_webhook_deliveries_from_the_command(api: Api, capsys):
    capsys.readouterr()
    assert jobs_cli(["kinds"]) == 0
    assert "webhooks.move_legacy" in capsys.readouterr().out.split()
    job = finish(api, start(api, "webhooks.move_legacy", capsys))
    assert job["kind"] == "webhooks.move_legacy" and job["organization_id"] == api.org_id
