"""Two concurrent creates with the same phone yield one contact, never two (CONVENTIONS "Contacts")."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from switchboard.api.auth import AuthContext
from switchboard.contacts import models, service
from switchboard.store import Store

pytestmark = pytest.mark.e2e


def _forms(digits: str) -> list[str]:
    cc, rest = digits[:1], digits[1:]
    return [
        f"+{digits}",
        f"00{digits}",
        digits,
        f"+{cc} {rest[:3]} {rest[3:6]}-{rest[6:]}",
        f"+{cc} ({rest[:3]}) {rest[3:]}",
    ]


def _fresh_number() -> str:
    return "14155" + str(uuid.uuid4().int)[:6]  # an exchange starting 5: a valid US number


def test_twenty_parallel_http_creates_with_one_phone_make_one_contact(local_only):
    number = _fresh_number()
    forms = (_forms(number) * 4)[:20]

    def create(form: str):
        with local_only.client() as client:
            return client.post("/v1/contacts", json={"phone": form, "name": "Racer"})

    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(create, forms))
    assert sorted(r.status_code for r in responses) == [200] * 19 + [201], [r.text for r in responses]
    assert len({r.json()["data"]["id"] for r in responses}) == 1
    with local_only.client() as client:
        found = client.get(f"/v1/contacts/phone/{number}")
    assert found.status_code == 200 and found.json()["data"]["phone"] == number


def test_twenty_threads_racing_on_the_data_store_make_one_contact(local_only):
    """No resolver in between: 20 upserts interleave their DynamoDB requests against the stack's AWS emulator."""
    client = boto3.client(
        "dynamodb",
        endpoint_url=local_only.aws_endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    (table,) = [t for t in client.list_tables()["TableNames"] if t.endswith("Table") or "table" in t.lower()][:1]
    store = Store(table, client=client)
    auth = AuthContext("api_key", "key_race", None, local_only.organization_id, "owner", "key_race")
    number = _fresh_number()
    bodies = [models.ContactCreate(phone=form, identities=[]) for form in (_forms(number) * 4)[:20]]

    def upsert(body: models.ContactCreate):
        return service.upsert(store, auth, body)

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(upsert, bodies))
    ids = {contact.id for contact, _ in results}
    assert len(ids) == 1, ids
    assert sum(created for _, created in results) == 1
    sentinels = store.query_all(f"ORG#{local_only.organization_id}", sk_prefix=f"IDENT#phone#{number}")
    assert [s["contact_id"] for s in sentinels] == list(ids)
