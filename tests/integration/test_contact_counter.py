"""The organization's contact counter behind billing's `contacts_stored`: changed in the transactions that create and
delete contacts (create, upsert, import, merge, delete, a message to a new number), exact under concurrent writers,
and seeded once, exactly, for an organization whose contacts predate it."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from switchboard.api.auth import AuthContext
from switchboard.contacts import counter
from switchboard.contacts import models as contact_models
from switchboard.contacts import service as contacts
from switchboard.store import get_store
from tests.integration.support import Api

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


def counter_item(api: Api) -> dict[str, Any] | None:
    return get_store().get(counter.counter_key(api.org_id), consistent=True)


def test_create_upsert_delete_merge_and_import_keep_the_count_exact(api: Api):
    assert stored(api) == 0
    ada = create(api, name="Ada", phone="+1 415 555 0101")
    grace = create(api, name="Grace", email="grace@example.com")
    create(api, name="Linus", phone="+1 415 555 0103")
    assert stored(api) == listed(api) == 3
    create(api, name="Ada L.", phone="+14155550101")  # an upsert onto Ada: no new contact
    assert stored(api) == 3

    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 204
    assert stored(api) == listed(api) == 2
    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 404  # deleting again changes nothing
    assert stored(api) == 2

    other = create(api, name="Grace H.", phone="+1 415 555 0104")
    merged = api.post(f"/v1/contacts/{grace['id']}/merge", json={"from_contact_id": other["id"]})
    assert merged.status_code == 200, merged.text
    assert stored(api) == listed(api) == 2

    # One import batch creates several contacts (their counter updates folded into one operation) and updates one.
    rows = "".join(f"Row {n},row{n}@example.com\n" for n in range(7))
    resp = api.post(
        "/v1/cdp/imports",
        json={"format": "csv", "content": "name,email\n" + rows + "Grace Again,grace@example.com\n"},
    )
    assert resp.status_code == 201, resp.text
    report = resp.json()["data"]
    assert (report["created"], report["updated"], report["batches"]) == (7, 1, 1)
    assert stored(api) == listed(api) == 9
    item = counter_item(api)
    assert item is not None and item["contacts"] == 9 and item["seeded_at"]


def test_concurrent_creates_upserts_and_deletes_end_exact(api: Api):
    assert stored(api) == 0  # seeded at zero before the writers start
    store, org = get_store(), api.org_id
    auth = AuthContext("api_key", "racer", None, org, "owner", "cred_racer")
    phones = [f"+1 415 555 {n:04d}" for n in range(24)]
    rng = random.Random(7)
    calls = [phones[n % len(phones)] for n in range(48)]  # every phone twice: racing creates of one identity
    rng.shuffle(calls)

    def upsert(phone: str) -> str:
        contact, _ = contacts.upsert(store, auth, contact_models.ContactCreate(phone=phone))
        return contact.id

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(upsert, calls))
    assert len(set(ids)) == len(phones)  # one contact per phone, whoever won
    doomed = sorted(set(ids))[:5]
    with ThreadPoolExecutor(max_workers=8) as pool:  # each one deleted by two writers at once: one wins
        outcomes = list(pool.map(lambda i: _try(lambda: contacts.delete(store, auth, i)), doomed * 2))
    assert sum(o is None for o in outcomes) == len(doomed)
    assert stored(api) == listed(api) == len(phones) - len(doomed)


def _try(call: Any) -> Exception | None:
    try:
        call()
    except Exception as err:
        return err
    return None


def test_an_organization_without_a_counter_is_counted_once_and_seeded(api: Api):
    for n in range(4):
        create(api, name=f"Early {n}", phone=f"+1 415 555 02{n:02d}")
    store, org = get_store(), api.org_id
    # Contacts stored before the counter existed: no counter item. Then two more, after the deploy: the item exists
    # but holds only their changes (2), never seeded.
    store.delete(counter.counter_key(org))
    create(api, name="Late 1", phone="+1 415 555 0301")
    create(api, name="Late 2", phone="+1 415 555 0302")
    before = counter_item(api)
    assert before is not None and before["contacts"] == 2 and "seeded_at" not in before

    assert stored(api) == listed(api) == 6  # counted once, and seeded
    after = counter_item(api)
    assert after is not None and after["contacts"] == 6 and after["seeded_at"]
    create(api, name="Later", phone="+1 415 555 0303")
    assert stored(api) == 7 and counter_item(api)["contacts"] == 7  # type: ignore[index]


def test_a_contact_written_while_the_seed_counts_makes_it_count_again(api: Api, monkeypatch):
    for n in range(3):
        create(api, name=f"Early {n}", phone=f"+1 415 555 04{n:02d}")
    store, org = get_store(), api.org_id
    store.delete(counter.counter_key(org))
    counted = counter._counted
    runs: list[int] = []

    def counted_during_a_create(store_: Any, org_id: str) -> int:
        n = counted(store_, org_id)
        runs.append(n)
        if len(runs) == 1:  # a create commits between the count and the seed's write (another Lambda's request)
            body = contact_models.ContactCreate(name="Meanwhile", phone="+1 415 555 0499")
            contacts.upsert(store, AuthContext("api_key", "other", None, org, "owner", "cred_other"), body)
        return n

    monkeypatch.setattr(counter, "_counted", counted_during_a_create)
    assert stored(api) == 4
    assert runs == [3, 4]  # the first count was refused (`changes` moved), the second one seeded
    assert counter_item(api)["contacts"] == 4  # type: ignore[index]
    monkeypatch.setattr(counter, "_counted", counted)
    assert stored(api) == listed(api) == 4


def test_merge_count_ops_folds_one_update_per_transaction():
    org = "org_fold"
    ops = [contacts.count_op(org, 1), counter.count_op("org_other", 1), contacts.count_op(org, 1)]
    folded = counter.merge_count_ops(org, ops)
    mine = [op for op in folded if getattr(op, "key", None) == counter.counter_key(org)]
    assert len(folded) == 2 and len(mine) == 1 and mine[0].values is not None and mine[0].values[":d"] == 2
