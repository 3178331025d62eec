"""DynamoDB throttling injected under the API (ProvisionedThroughputExceeded / ThrottlingException / a transaction
cancelled for throttling), through the in-process gateway with moto.

The store's client retries throttles itself (`switchboard/aws.py`: botocore "standard" mode, 4 attempts), so a short
throttle is invisible to the caller; a long one answers 503 `service_unavailable` with `Retry-After` in the envelope —
never 500, never 409 (which would tell the client not to retry) — and nothing is half written. A retry of the same
request with the same `Idempotency-Key` after recovery gets the write done exactly once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchboard.store import get_store
from tests.faults.injection import Ledger, aws_faults, key_sk, transact_sks
from tests.integration.support import Api


@pytest.fixture
def faults(api: Api, monkeypatch):
    with aws_faults(monkeypatch) as injected:
        yield injected


def _contacts(org: str) -> list[dict[str, Any]]:
    return [i for i in get_store().query_all(f"ORG#{org}", sk_prefix="CONTACT#") if i.get("entity") == "Contact"]


def _creates_contact(params: dict[str, Any]) -> bool:
    return any(sk.startswith("CONTACT#") for sk in transact_sks(params))


def _assert_unavailable(api: Api, response) -> None:
    error = api.assert_error(response, 503, "service_unavailable")
    assert int(response.headers["Retry-After"]) >= 1
    assert "Traceback" not in error["message"]


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_a_short_write_throttle_is_retried_by_the_client_and_invisible_to_the_caller(api: Api, faults, code):
    ledger = Ledger(f"short write throttle ({code})")
    faults.fail("dynamodb", "TransactWriteItems", code, times=2, when=_creates_contact)
    for n in range(3):
        phone = f"+1 415 555 {n:04d}"
        resp = api.post("/v1/contacts", json={"name": f"Throttled {n}", "phone": phone})
        assert resp.status_code == 201, resp.text
        ledger.accepted.append(resp.json()["data"]["id"])
    ledger.arrived = [c["id"] for c in _contacts(api.org_id)]
    assert faults.injected["TransactWriteItems"] == 2
    ledger.check()


def test_a_long_write_throttle_answers_503_and_a_retry_after_recovery_writes_once(api: Api, faults):
    ledger = Ledger("long write throttle, then retry with the same Idempotency-Key")
    rule = faults.fail(
        "dynamodb", "TransactWriteItems", "ProvisionedThroughputExceededException", when=_creates_contact
    )
    body = {"name": "Grace", "phone": "+1 415 555 0201"}
    headers = {**api.owner_headers, "Idempotency-Key": "create-grace"}
    refused = api.post("/v1/contacts", json=body, headers=headers)
    _assert_unavailable(api, refused)
    assert rule.fired == 5, "botocore standard mode with max_attempts=4 retries: 5 attempts before giving up"
    assert _contacts(api.org_id) == [], "a refused write must leave nothing behind"

    faults.clear()
    accepted = api.post("/v1/contacts", json=body, headers=headers)
    assert accepted.status_code == 201, accepted.text
    ledger.accepted.append(accepted.json()["data"]["id"])
    replay = api.post("/v1/contacts", json=body, headers=headers)
    assert replay.status_code == 201 and replay.headers.get("Idempotent-Replayed") == "true"
    assert replay.json()["data"]["id"] == ledger.accepted[0]
    ledger.arrived = [c["id"] for c in _contacts(api.org_id)]
    ledger.check()


def test_a_transaction_cancelled_for_throttling_is_503_not_a_conflict(api: Api, faults):
    """DynamoDB reports a throttled transaction as TransactionCanceledException with a `ThrottlingError` reason,
    which botocore does not retry: it must reach the caller as 503 (retry), not 409 (the state conflicts)."""
    ledger = Ledger("transaction cancelled for throttling")

    faults.fail(
        "dynamodb",
        "TransactWriteItems",
        "TransactionCanceledException",
        when=_creates_contact,
        extra={"CancellationReasons": [{"Code": "None"}, {"Code": "ThrottlingError"}]},
    )
    body = {"name": "Linus", "phone": "+1 415 555 0301"}
    _assert_unavailable(api, api.post("/v1/contacts", json=body))
    assert _contacts(api.org_id) == []
    assert faults.injected["TransactWriteItems"] == 4, "a throttled cancellation is tried again, 4 times in all"
    faults.clear()
    # A single throttled cancellation is absorbed by the store's own retry.
    faults.fail(
        "dynamodb",
        "TransactWriteItems",
        "TransactionCanceledException",
        times=1,
        when=_creates_contact,
        extra={"CancellationReasons": [{"Code": "ThrottlingError"}]},
    )
    again = api.post("/v1/contacts", json=body)
    assert again.status_code == 201, again.text
    assert faults.injected["TransactWriteItems"] == 5
    ledger.accepted.append(again.json()["data"]["id"])
    ledger.arrived = [c["id"] for c in _contacts(api.org_id)]
    ledger.check()


def test_read_throttling_answers_503_in_the_envelope(api: Api, faults):
    created = api.post("/v1/contacts", json={"name": "Ada", "phone": "+1 415 555 0401"})
    assert created.status_code == 201
    contact_id = created.json()["data"]["id"]
    faults.fail(
        "dynamodb",
        "GetItem",
        "ThrottlingException",
        when=lambda p: key_sk(p).startswith("CONTACT#"),
    )
    faults.fail(
        "dynamodb",
        "Query",
        "ProvisionedThroughputExceededException",
        when=lambda p: (
            ":skp" in p.get("ExpressionAttributeValues", {})
            and p["ExpressionAttributeValues"][":skp"].get("S", "").startswith("CONTACT")
        ),
    )
    faults.fail("dynamodb", "BatchGetItem", "ProvisionedThroughputExceededException")
    _assert_unavailable(api, api.get(f"/v1/contacts/{contact_id}"))
    _assert_unavailable(
        api, api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": "+1 415 555 0401"}]})
    )
    assert faults.injected["GetItem"] >= 5 and faults.injected["BatchGetItem"] >= 5

    faults.clear()
    got = api.get(f"/v1/contacts/{contact_id}")
    assert got.status_code == 200 and got.json()["data"]["id"] == contact_id


def test_throttled_idempotency_bookkeeping_does_not_turn_a_committed_write_into_an_error(api: Api, faults):
    """The write is committed; only the record that replays its response cannot be stored (throttled after every
    retry). The caller must get the real 201 — a 503 would invite a retry that, once the in-flight lease ends,
    runs the write a second time."""
    ledger = Ledger("idempotency record throttled after the write committed")

    def completion_put(params: dict[str, Any]) -> bool:
        return key_sk(params).startswith("IDEM") and params.get("Item", {}).get("status", {}).get("S") == "completed"

    faults.fail("dynamodb", "PutItem", "ProvisionedThroughputExceededException", when=completion_put)
    body = {"name": "Barbara", "phone": "+1 415 555 0501"}
    headers = {**api.owner_headers, "Idempotency-Key": "create-barbara"}
    resp = api.post("/v1/contacts", json=body, headers=headers)
    assert faults.injected["PutItem"] == 5, faults.injected
    assert resp.status_code == 201, resp.text
    ledger.accepted.append(resp.json()["data"]["id"])
    ledger.arrived = [c["id"] for c in _contacts(api.org_id)]
    ledger.check()


def test_a_throttled_credential_lookup_answers_503_from_the_gateway_not_500(api: Api, faults):
    """The authorizer's read of the credential is throttled after every retry: the authorizer fails, and the gateway
    response for AUTHORIZER_CONFIGURATION_ERROR (API Gateway's answer to a failed authorizer) tells the client to
    retry (503 + Retry-After), in the envelope."""
    faults.fail(
        "dynamodb", "GetItem", "ProvisionedThroughputExceededException", when=lambda p: "CRED#" in json.dumps(p)
    )
    refused = api.get("/v1/contacts")  # the owner key: valid, but it cannot be looked up
    _assert_unavailable(api, refused)
    faults.clear()
    assert api.get("/v1/contacts").status_code == 200
