"""The organization's contacts behind billing's `contacts_stored` and the stage metrics: counted from the table
stream (create, upsert, import, merge, delete, stage changes), never in the customer's transaction, exact when the
stream hands records over again, and seeded by a resumable job for an organization whose contacts predate it."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from switchboard.api.auth import AuthContext
from switchboard.contacts import counter, erasure
from switchboard.contacts import models as contact_models
from switchboard.contacts import service as contacts
from switchboard.jobs import service as jobs
from switchboard.store import get_store, keys
from switchboard.store.table import Store as DynamoStore
from tests.helpers import run_counters
from tests.integration.support import Api
from tests.integration.test_security_org_deletion import Jobs

BILLING = "/v1/settings/billing"


def stored(api: Api) -> int:
    resp = api.get(BILLING)
    assert resp.status_code == 200, resp.text
    return int(resp.json()["data"]["usage"]["contacts_stored"])


def listed(api: Api) -> int:
    """The contacts the API lists (every page)."""
    total, cursor = 0, None
    while True:
        params: dict[str, Any] = {"limit": 100} | ({"cursor": cursor} if cursor else {})
        body = api.get("/v1/contacts", params=params).json()
        total += len(body["data"])
        cursor = body["meta"].get("next_cursor")
        if not cursor:
            return total


def create(api: Api, **fields: Any) -> dict[str, Any]:
    resp = api.post("/v1/contacts", json=fields)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def stages(api: Api) -> dict[str, int]:
    return {k: v for k, v in counter.counts(get_store(), api.org_id).stages.items() if v}


def counted(api: Api) -> int:
    """The counts once the stream consumer has seen every record, handed over twice (a redelivery)."""
    run_counters()
    run_counters()
    return stored(api)


def test_create_upsert_delete_merge_import_and_stage_changes_keep_the_counts_exact(api: Api):
    assert counted(api) == 0
    ada = create(api, name="Ada", phone="+1 415 555 0101", lifecycle_stage="lead")
    grace = create(api, name="Grace", email="grace@example.com", lifecycle_stage="customer")
    create(api, name="Linus", phone="+1 415 555 0103")
    assert counted(api) == listed(api) == 3
    assert stages(api) == {"lead": 1, "customer": 1}
    create(api, name="Ada L.", phone="+14155550101")  # an upsert onto Ada: no new contact
    assert counted(api) == 3

    resp = api.patch(f"/v1/contacts/{ada['id']}", json={"lifecycle_stage": "customer"})
    assert resp.status_code == 200, resp.text
    assert counted(api) == 3 and stages(api) == {"customer": 2}

    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 204
    assert counted(api) == listed(api) == 2
    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 404  # deleting again changes nothing
    assert counted(api) == 2 and stages(api) == {"customer": 1}

    other = create(api, name="Grace H.", phone="+1 415 555 0104", lifecycle_stage="lead")
    merged = api.post(f"/v1/contacts/{grace['id']}/merge", json={"from_contact_id": other["id"]})
    assert merged.status_code == 200, merged.text
    assert counted(api) == listed(api) == 2 and stages(api) == {"customer": 1}

    rows = "".join(f"Row {n},row{n}@example.com\n" for n in range(7))
    resp = api.post(
        "/v1/cdp/imports",
        json={"format": "csv", "content": "name,email\n" + rows + "Grace Again,grace@example.com\n"},
    )
    assert resp.status_code == 201, resp.text
    report = resp.json()["data"]
    assert (report["created"], report["updated"], report["batches"]) == (7, 1, 1)
    assert counted(api) == listed(api) == 9
    shards = get_store().query_all(keys.org_pk(api.org_id), sk_prefix=counter.SHARD_PREFIX, consistent=True)
    assert len(shards) <= counter.SHARDS + 1  # the shards and the seed state: one Query reads them all


def test_concurrent_creates_touch_no_shared_counter_and_end_exact(api: Api, monkeypatch: pytest.MonkeyPatch):
    assert counted(api) == 0
    store, org = get_store(), api.org_id
    auth = AuthContext("api_key", "racer", None, org, "owner", "cred_racer")
    touched: list[str] = []
    transact = DynamoStore.transact

    def watched(self: DynamoStore, ops: Any) -> None:
        ops = list(ops)
        touched.extend(str(getattr(op, "key", None) or getattr(op, "item", {})).split("'SK': ")[-1] for op in ops)
        transact(self, ops)

    monkeypatch.setattr(DynamoStore, "transact", watched)
    phones = [f"+1 415 555 {n:04d}" for n in range(24)]
    rng = random.Random(7)
    calls = [phones[n % len(phones)] for n in range(48)]  # every phone twice: racing creates of one identity
    rng.shuffle(calls)

    def upsert(phone: str) -> str:
        contact, _ = contacts.upsert(store, auth, contact_models.ContactCreate(phone=phone))
        return contact.id

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(upsert, calls))
    assert len(set(ids)) == len(phones)
    doomed = sorted(set(ids))[:5]
    with ThreadPoolExecutor(max_workers=8) as pool:  # each one deleted by two writers at once: one wins
        outcomes = list(pool.map(lambda i: _try(lambda: erasure.delete(store, auth, i)), doomed * 2))
    assert sum(o is None for o in outcomes) == len(doomed)
    assert touched and not [sk for sk in touched if "COUNTER#" in sk]  # no customer write touches a counter
    monkeypatch.setattr(DynamoStore, "transact", transact)
    assert counted(api) == listed(api) == len(phones) - len(doomed)


def _try(call: Any) -> Exception | None:
    try:
        call()
    except Exception as err:
        return err
    return None


def _as_legacy(api: Api, legacy_count: int | None) -> None:
    """Make the organization one whose contacts predate stream counting: no tallies, no shards, no mark on the
    organization; and the former counter, when it had one."""
    store, org = get_store(), api.org_id
    for row in store.query_all(keys.org_pk(org), sk_prefix="TALLY#"):
        store.delete(keys.key(row["PK"], row["SK"]))
    for row in store.query_all(keys.org_pk(org), sk_prefix=counter.SHARD_PREFIX):
        store.delete(keys.key(row["PK"], row["SK"]))
    store.update(keys.organization(org), "REMOVE contact_counts", return_values="NONE")
    if legacy_count is not None:
        store.put({**keys.key(keys.org_pk(org), counter.LEGACY_SK), "contacts": legacy_count, "seeded_at": "x"})


def test_a_legacy_organization_is_seeded_by_a_resumable_job_without_double_counting(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(counter, "SEED_PAGE", 3)  # several chunks
    early = [create(api, name=f"Early {n}", phone=f"+1 415 555 02{n:02d}", lifecycle_stage="lead") for n in range(7)]
    _as_legacy(api, legacy_count=7)
    runner = Jobs(api)

    assert stored(api) == 7  # the first read starts the seed and answers the former counter meanwhile
    seed = get_store().get(counter.seed_key(api.org_id), consistent=True)
    assert seed is not None and seed["status"] == counter.SEEDING
    assert stored(api) == 7  # a second read starts nothing more
    assert jobs.get_job(get_store(), seed["job_id"])["kind"] == counter.KIND  # type: ignore[index]

    # One chunk, then writes while the seed runs: a new contact (the stream counts it first), a deleted early
    # contact (its REMOVE before the seed reaches it) and one the stream sees only after the seed.
    records = runner.receive()
    assert runner.run(records, delete=False) == {"batchItemFailures": []}
    create(api, name="Meanwhile", phone="+1 415 555 0299")
    assert api.delete(f"/v1/contacts/{early[-1]['id']}").status_code == 204
    run_counters()
    create(api, name="Unstreamed", phone="+1 415 555 0298")
    assert runner.run(records) == {"batchItemFailures": []}  # the first chunk again (redelivered): dropped
    assert runner.drain() >= 2
    job = jobs.get_job(get_store(), seed["job_id"])
    assert job is not None and job["status"] == jobs.COMPLETED and job["progress"]["chunks"] >= 3
    run_counters()
    assert counted(api) == listed(api) == 8
    assert stages(api) == {"lead": 6}
    assert jobs.resume(get_store(), seed["job_id"]) is False  # finished: nothing more to count


def test_a_seed_chunk_that_meets_a_tally_written_meanwhile_runs_again(api: Api, monkeypatch: pytest.MonkeyPatch):
    for n in range(4):
        create(api, name=f"Early {n}", phone=f"+1 415 555 04{n:02d}")
    _as_legacy(api, legacy_count=None)
    runner = Jobs(api)
    batch_get = DynamoStore.batch_get
    raced: list[bool] = []

    def stale_read(self: DynamoStore, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        found = batch_get(self, *args, **kwargs)
        if not raced:  # the stream counts the page's contacts between the seed's read and its transaction
            raced.append(True)
            run_counters()
        return found

    assert stored(api) == 0  # no former counter: the partial sum until the seed completes
    monkeypatch.setattr(DynamoStore, "batch_get", stale_read)
    # The stream replays the contacts' INSERTs meanwhile: the seed's transaction fails and the chunk runs again.
    records = runner.receive()
    result = runner.run(records)
    assert result["batchItemFailures"]
    monkeypatch.setattr(DynamoStore, "batch_get", batch_get)
    jobs.resume(get_store(), get_store().get(counter.seed_key(api.org_id), consistent=True)["job_id"])  # type: ignore[index]
    runner.drain()
    assert counted(api) == listed(api) == 4
