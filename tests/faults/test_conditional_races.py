"""Conditional-check races, forced: two writers read the same state, then both are held just before their write
until both have reached it, and released together — the worst interleaving, every time. DynamoDB's conditions must
let exactly one win; the loser gets a conflict it can act on, and no accepted change is silently overwritten.

The writers call the domain services directly, each in its own thread (in Lambda, two containers): the in-process
gateway runs one resolver at a time, which would serialize them before they ever reach the table.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from switchboard import aws
from switchboard.api.auth import AuthContext
from switchboard.contacts import models as contact_models
from switchboard.contacts import service as contacts
from switchboard.errors import Conflict
from switchboard.messaging import conversations
from switchboard.messaging import models as messaging_models
from switchboard.store import get_store
from tests.faults.injection import Ledger
from tests.integration.support import Api


@contextmanager
def held_writes(racers: int, matches: Callable[[str, dict[str, Any]], bool]) -> Iterator[threading.Barrier]:
    """Hold every matching DynamoDB write until `racers` of them are waiting, then let them all go at once."""
    barrier = threading.Barrier(racers, timeout=10)
    client = aws.client("dynamodb")

    def hold(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else str(target)).rsplit(".", 1)[-1]
        if matches(operation, json.loads(request.body or b"{}")):
            barrier.wait()

    client.meta.events.register_first("before-send.dynamodb", hold)
    try:
        yield barrier
    finally:
        client.meta.events.unregister("before-send.dynamodb", hold)


def _writes_sk(prefix: str) -> Callable[[str, dict[str, Any]], bool]:
    def matches(operation: str, params: dict[str, Any]) -> bool:
        if operation == "TransactWriteItems":
            bodies = [next(iter(op.values())) for op in params.get("TransactItems", [])]
        elif operation in ("PutItem", "UpdateItem", "DeleteItem"):
            bodies = [params]
        else:
            return False
        for body in bodies:
            source = body.get("Key") or body.get("Item") or {}
            if str(source.get("SK", {}).get("S", "")).startswith(prefix):
                return True
        return False

    return matches


def _auth(api: Api, principal: str) -> AuthContext:
    return AuthContext("api_key", principal, None, api.org_id, "owner", f"cred_{principal}")


def _race(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once; each result is its return value or the exception it raised."""

    def run(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as err:
            return err

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


@pytest.fixture
def contact(api: Api) -> dict[str, Any]:
    resp = api.post("/v1/contacts", json={"name": "Race Subject", "phone": "+1 415 555 0701"})
    assert resp.status_code == 201, resp.text
    return resp.json()["data"]


def test_two_updates_with_the_same_if_match_one_wins_the_other_is_told(api: Api, contact):
    ledger = Ledger("contact: two If-Match updates of one version")
    store, version = get_store(), contact["version"]
    bodies = [contact_models.ContactUpdate(company="Winner A"), contact_models.ContactUpdate(company="Winner B")]
    with held_writes(2, _writes_sk("CONTACT#")):
        outcomes = _race(
            *[
                lambda b=b, n=n: contacts.update(store, _auth(api, f"k{n}"), contact["id"], b, version)
                for n, b in enumerate(bodies)
            ]
        )
    won = [o for o in outcomes if not isinstance(o, Exception)]
    lost = [o for o in outcomes if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], Conflict) and lost[0].status == 409
    final = contacts.get_item(store, api.org_id, contact["id"], consistent=True)
    assert final["version"] == version + 1
    ledger.accepted = [won[0].company]
    ledger.arrived = [final["company"]]
    ledger.check()


def test_two_updates_of_different_fields_without_if_match_lose_nothing(api: Api, contact):
    """No If-Match: both writers read version 1. Either both changes end up in the record, or the one that could
    not be applied is refused (409) — never a 200 whose change the other write then overwrote."""
    ledger = Ledger("contact: concurrent updates of different fields")
    store = get_store()
    changes = {"company": "Acme", "first_name": "Renamed"}
    with held_writes(2, _writes_sk("CONTACT#")):
        outcomes = _race(
            lambda: contacts.update(
                store, _auth(api, "k1"), contact["id"], contact_models.ContactUpdate(company="Acme"), None
            ),
            lambda: contacts.update(
                store, _auth(api, "k2"), contact["id"], contact_models.ContactUpdate(first_name="Renamed"), None
            ),
        )
    final = contacts.get_item(store, api.org_id, contact["id"], consistent=True)
    for (field, value), outcome in zip(changes.items(), outcomes, strict=True):
        if isinstance(outcome, Exception):
            assert isinstance(outcome, Conflict), outcome
            continue
        ledger.accepted.append(f"{field}={value}")
        if final.get(field) == value:
            ledger.arrived.append(f"{field}={value}")
    assert ledger.accepted, outcomes
    ledger.check()


def test_two_owners_claiming_one_lock_at_once_get_one_lock(api: Api):
    ledger = Ledger("conversation lock: two owners claim at once")
    channel = api.post("/v1/channels", json={"name": "race", "platform": "sandbox"}).json()["data"]
    api.post(f"/v1/channels/{channel['id']}/connect")
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+14155550199", "text": {"body": "hi"}})
    assert sent.status_code == 202, sent.text
    from switchboard.messaging import messages

    conv_id = messages.get_item(get_store(), api.org_id, sent.json()["data"]["id"])["conversation_id"]
    store = get_store()
    claims = [messaging_models.LockRequest(lock_owner_name=f"agent {n}") for n in range(2)]
    with held_writes(2, _writes_sk(f"CONV#{conv_id}#LOCK")):
        outcomes = _race(
            *[
                lambda n=n, c=c: conversations.claim_lock(store, _auth(api, f"agent{n}"), conv_id, c)
                for n, c in enumerate(claims)
            ]
        )
    won = [o for o in outcomes if not isinstance(o, Exception)]
    lost = [o for o in outcomes if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], Conflict) and lost[0].code == "lock_held"
    assert lost[0].details and lost[0].details[0]["lock_owner_id"] == won[0].lock_owner_id
    held = store.get(conversations.lock_key(api.org_id, conv_id), consistent=True)
    ledger.accepted = [won[0].lock_owner_id]
    ledger.arrived = [held["lock_owner_id"]]
    ledger.check()
