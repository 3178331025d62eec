"""Core layer against moto: transactions, the outbox, idempotency, the publisher, the authorizer, readiness."""

from __future__ import annotations

import json
from typing import Annotated

import boto3
import pytest
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel

from functions.authorizer.app import handler as authorizer
from functions.event_publisher.app import handler as publisher_handler
from functions.system.app import handler as system_handler
from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.config import get_settings
from switchboard.errors import Conflict, NotFound
from switchboard.events.outbox import outbox_put, stored_events
from switchboard.events.publisher import PendingEntry, outbox_events, publish
from switchboard.identity.bootstrap import bootstrap_organization
from switchboard.store import ConditionCheck, Put, get_store
from tests.helpers import FakeContext, api_event, body_of, owner_auth, stream_record

pytestmark = pytest.mark.usefixtures("aws_resources")


# Store ------------------------------------------------------------------------------------------------------------
def test_transaction_is_all_or_nothing_and_raises_the_failing_operations_error():
    store = get_store()
    store.put({"PK": "ORG#o1", "SK": "THING#taken", "v": 1})
    with pytest.raises(Conflict, match="taken"):
        store.transact(
            [
                Put(item={"PK": "ORG#o1", "SK": "THING#new", "v": 1}, condition="attribute_not_exists(PK)"),
                Put(
                    item={"PK": "ORG#o1", "SK": "THING#taken", "v": 2},
                    condition="attribute_not_exists(PK)",
                    error=Conflict("taken"),
                ),
            ]
        )
    assert store.get({"PK": "ORG#o1", "SK": "THING#new"}) is None
    assert store.get({"PK": "ORG#o1", "SK": "THING#taken"})["v"] == 1
    with pytest.raises(NotFound):
        store.transact(
            [ConditionCheck(key={"PK": "ORG#o1", "SK": "NOPE"}, condition="attribute_exists(PK)", error=NotFound())]
        )


def test_values_round_trip_and_batch_get_dedupes():
    store = get_store()
    item = {"PK": "ORG#o1", "SK": "X#1", "f": 1.5, "i": 3, "b": True, "l": [1, "a"], "m": {"n": None, "k": 2.0}}
    store.put(item)
    got = store.get({"PK": "ORG#o1", "SK": "X#1"})
    assert got == {"PK": "ORG#o1", "SK": "X#1", "f": 1.5, "i": 3, "b": True, "l": [1, "a"], "m": {"k": 2}}
    keys = [{"PK": "ORG#o1", "SK": "X#1"}, {"PK": "ORG#o1", "SK": "X#1"}, {"PK": "ORG#o1", "SK": "X#2"}]
    assert [i["SK"] for i in store.batch_get(keys)] == ["X#1"]


def test_query_pages_with_continuation():
    store = get_store()
    for n in range(5):
        store.put({"PK": "ORG#o2", "SK": f"ROW#{n}"})
    first = store.query("ORG#o2", sk_prefix="ROW#", limit=2)
    assert [i["SK"] for i in first.items] == ["ROW#0", "ROW#1"] and first.last_key
    rest = store.query_all("ORG#o2", sk_prefix="ROW#", start_key=first.last_key)
    assert [i["SK"] for i in rest] == ["ROW#2", "ROW#3", "ROW#4"]


# Outbox and publisher ------------------------------------------------------------------------------------------------
def test_outbox_event_is_written_with_the_change():
    store = get_store()
    event_put = outbox_put("org_1", "contact.updated", {"contact_id": "ct_1", "name": "Ada"})
    store.transact([Put(item={"PK": "ORG#org_1", "SK": "CONTACT#ct_1", "name": "Ada"}), event_put])
    events = stored_events(store, "org_1")
    assert len(events) == 1
    assert events[0]["event_type"] == "contact.updated" and events[0]["payload"]["name"] == "Ada"
    assert events[0]["event_id"].startswith("evt_") and events[0]["ttl"] > 0


def test_publisher_puts_events_on_the_bus_and_reaches_the_webhook_queue(aws_resources):
    _, resources = aws_resources
    item = outbox_put("org_1", "contact.updated", {"contact_id": "ct_9"}).item
    other = {"PK": "ORG#org_1", "SK": "CONTACT#ct_9"}
    records = [stream_record(item, "100"), stream_record(other, "101")]
    result = publisher_handler({"Records": records}, FakeContext())
    assert result == {"batchItemFailures": []}
    sqs = boto3.client("sqs")
    msgs = sqs.receive_message(QueueUrl=resources.queue_url("WebhookEventsQueue"), MaxNumberOfMessages=10)
    bodies = [json.loads(m["Body"]) for m in msgs.get("Messages", [])]
    assert len(bodies) == 1
    assert bodies[0]["detail-type"] == "contact.updated"
    assert bodies[0]["detail"]["data"] == {"contact_id": "ct_9"}
    assert bodies[0]["detail"]["organization_id"] == "org_1"


class _FlakyEvents:
    def __init__(self, fail_calls: set[int], fail_entries: set[int]):
        self.calls = 0
        self.fail_calls, self.fail_entries = fail_calls, fail_entries

    def put_events(self, Entries):
        self.calls += 1
        if self.calls in self.fail_calls:
            raise RuntimeError("bus unavailable")
        results = [
            {"ErrorCode": "InternalFailure"} if i in self.fail_entries else {"EventId": "e"}
            for i, _ in enumerate(Entries)
        ]
        return {"FailedEntryCount": sum(1 for r in results if "ErrorCode" in r), "Entries": results}


def test_publisher_reports_exactly_the_failed_records():
    items = [outbox_put("org_1", "contact.updated", {"n": n}).item for n in range(25)]
    pending = outbox_events([stream_record(item, str(n)) for n, item in enumerate(items)])
    assert len(pending) == 25 and all(isinstance(p, PendingEntry) for p in pending)
    # Call 2 (records 10-19) fails whole; entry 3 of every other call fails alone.
    failed = publish(pending, "bus", _FlakyEvents(fail_calls={2}, fail_entries={3}))
    assert failed == ["3", *[str(n) for n in range(10, 20)], "23"]


# Idempotency ------------------------------------------------------------------------------------------------------
idem_app = create_resolver()
calls: list[str] = []


class Order(BaseModel):
    item: str


@idem_app.post("/v1/orders", middlewares=requires("member"), status_code=201)
def create_order(order: Annotated[Order, Body()]) -> dict:
    calls.append(order.item)
    if order.item == "conflict":
        raise Conflict("No stock.")
    return {"data": {"n": len(calls), "item": order.item}}


idem_handler = make_handler(idem_app)


def _order(body, key: str | None = "k-1", org="org_a"):
    headers = {"Idempotency-Key": key} if key is not None else {}
    return idem_handler(
        api_event("POST", "/v1/orders", body=body, headers=headers, authorizer=owner_auth(org)), FakeContext()
    )


def test_idempotency_replays_the_first_response():
    calls.clear()
    first = _order({"item": "tea"})
    again = _order({"item": "tea"})
    assert first["statusCode"] == again["statusCode"] == 201
    assert body_of(first) == body_of(again) == {"data": {"n": 1, "item": "tea"}}
    assert again["multiValueHeaders"]["Idempotent-Replayed"] == ["true"]
    assert calls == ["tea"]
    # Another key, another organization with the same key: both run.
    assert body_of(_order({"item": "tea"}, key="k-2"))["data"]["n"] == 2
    assert body_of(_order({"item": "tea"}, org="org_b"))["data"]["n"] == 3


def test_same_key_other_body_is_refused():
    calls.clear()
    _order({"item": "tea"}, key="k-3")
    resp = _order({"item": "coffee"}, key="k-3")
    assert resp["statusCode"] == 409
    assert body_of(resp)["error"]["code"] == "idempotency_key_reused"
    assert calls == ["tea"]


def test_validation_failures_are_not_stored_but_errors_are():
    calls.clear()
    assert _order({"wrong": 1}, key="k-4")["statusCode"] == 400
    assert _order({"item": "tea"}, key="k-4")["statusCode"] == 201  # the key was not used up by the 400
    assert _order({"item": "conflict"}, key="k-5")["statusCode"] == 409
    replay = _order({"item": "conflict"}, key="k-5")
    assert replay["statusCode"] == 409 and calls == ["tea", "conflict"]
    assert _order({"item": "x"}, key="")["statusCode"] == 400  # empty key
    assert _order({"item": "x"}, key="k" * 256)["statusCode"] == 400


def test_in_flight_key_is_a_conflict():
    store = get_store()
    from switchboard.api import idempotency

    calls.clear()
    _order({"item": "tea"}, key="k-6")
    # Mark the stored record as in flight again (a concurrent request holding the key).
    items = store.query_all("ORG#org_a", sk_prefix="IDEMP#")
    for item in items:
        store.update(
            {"PK": item["PK"], "SK": item["SK"]},
            "SET #s = :p, lease_until = :far",
            names={"#s": "status"},
            values={":p": "in_progress", ":far": 4102444800},
        )
    resp = _order({"item": "tea"}, key="k-6")
    assert resp["statusCode"] == 409 and body_of(resp)["error"]["code"] == "conflict"
    assert idempotency.HEADER == "Idempotency-Key"


def test_records_without_a_principal_are_never_replayed():
    """A record that does not name the principal that made it (written before records had one) is nobody's: the same
    key and body get 409 `idempotency_key_reused`, never its stored response."""
    store = get_store()
    calls.clear()
    before = {i["SK"] for i in store.query_all("ORG#org_a", sk_prefix="IDEMP#")}
    _order({"item": "tea"}, key="k-7")
    (item,) = [i for i in store.query_all("ORG#org_a", sk_prefix="IDEMP#") if i["SK"] not in before]
    assert "tea" not in item["response_sealed"] and item["principal"].startswith("api_key:")
    store.put({k: v for k, v in item.items() if k != "principal"})
    replay = _order({"item": "tea"}, key="k-7")
    assert replay["statusCode"] == 409 and body_of(replay)["error"]["code"] == "idempotency_key_reused"
    assert calls == ["tea"]


# Authorizer and readiness ---------------------------------------------------------------------------------------------
def _authorize(headers: dict[str, str], ip: str = "198.51.100.7"):
    event = {
        "type": "REQUEST",
        "methodArn": "arn:aws:execute-api:us-east-1:123:abc/dev/GET/v1/organization",
        "headers": headers,
        "requestContext": {"identity": {"sourceIp": ip}},
    }
    return authorizer(event, FakeContext())


def test_authorizer_allows_a_key_in_either_header_and_refuses_others():
    boot = bootstrap_organization(
        get_store(),
        org_name="A",
        owner_email="a@example.com",
        owner_password="pw-123456",
        api_key=None,
        key_mode=get_settings().api_key_mode,
    )
    for headers in ({"X-Api-Key": boot.api_key}, {"authorization": f"Bearer {boot.api_key}"}):
        policy = _authorize(headers)
        assert policy["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        assert policy["policyDocument"]["Statement"][0]["Resource"] == "arn:aws:execute-api:us-east-1:123:abc/dev/*/*"
        assert policy["context"]["organization_id"] == boot.organization_id
        assert policy["context"]["role"] == "owner" and policy["context"]["principal_type"] == "api_key"
        assert all(isinstance(v, str) for v in policy["context"].values())
    for headers in ({}, {"X-Api-Key": boot.api_key + "x"}, {"Authorization": f"Basic {boot.api_key}"}):
        with pytest.raises(Exception, match=r"^Unauthorized$"):
            _authorize(headers)


def test_ready_is_503_when_the_table_is_gone():
    assert system_handler(api_event("GET", "/v1/ready"), FakeContext())["statusCode"] == 200
    boto3.client("dynamodb").delete_table(TableName=get_settings().table_name)
    resp = system_handler(api_event("GET", "/v1/ready"), FakeContext())
    assert resp["statusCode"] == 503
    assert body_of(resp)["error"]["code"] == "service_unavailable"
    assert resp["multiValueHeaders"]["Retry-After"] == ["1"]
