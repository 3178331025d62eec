"""Webhooks through the local stack (LOCAL_TIME_SCALE=0.001): the real pipeline — outbox → stream → publisher → bus →
WebhookEventsQueue → webhook_fanout → WebhookDeliveriesQueue → webhook_sender — POSTing to a receiver in this test
process (the local stack may call http://127.0.0.1)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import standardwebhooks
import svix.webhooks

from tests.helpers import wait_until
from tests.webhook_receiver import Answer, Receiver

pytestmark = pytest.mark.e2e
BASE = "/v1/settings/developer/webhooks"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver().running() as running:
        yield running


@pytest.fixture
def endpoint_for(local_only):
    """Creates endpoints on the stack (subscribed only to test events, so other tests' events stay away) and
    deletes them afterwards."""
    created: list[str] = []
    with local_only.client() as client:

        def create(url: str) -> dict[str, Any]:
            resp = client.post(f"{BASE}/endpoints", json={"url": url, "filter_types": ["webhook.test"]})
            assert resp.status_code == 201, resp.text
            created.append(resp.json()["data"]["id"])
            return resp.json()["data"]  # type: ignore[no-any-return]

        yield client, create
        for endpoint_id in created:
            client.delete(f"{BASE}/endpoints/{endpoint_id}")


def verify_both(secret: str, received) -> None:
    standardwebhooks.Webhook(secret).verify(received.body, received.headers)
    svix.webhooks.Webhook(secret).verify(received.body, received.headers)


def test_a_test_delivery_reaches_the_receiver_signed(endpoint_for, receiver):
    client, create = endpoint_for
    path = f"/e2e-{uuid.uuid4().hex[:8]}"
    endpoint = create(receiver.url(path))
    resp = client.post(f"{BASE}/endpoints/{endpoint['id']}/test")
    assert resp.status_code == 202, resp.text
    queued = resp.json()["data"]

    (got,) = receiver.wait_for(path, 1)
    verify_both(endpoint["secret"], got)
    assert json.loads(got.body) == {"endpoint_id": endpoint["id"], "sent_at": queued["sent_at"]}
    assert got.headers["webhook-id"] == queued["delivery_id"]
    assert got.headers["switchboard-event-type"] == "webhook.test"

    def delivered() -> dict[str, Any] | None:
        rows = client.get(f"{BASE}/deliveries", params={"endpoint_id": endpoint["id"]}).json()["data"]
        return rows[0] if rows and rows[0]["status"] == "succeeded" else None

    delivery = wait_until(delivered, timeout=30.0)
    assert delivery["id"] == queued["delivery_id"] and delivery["event_type"] == "webhook.test"


def test_a_receiver_failing_twice_still_gets_it_and_the_attempts_show(endpoint_for, receiver):
    client, create = endpoint_for
    path = f"/e2e-flaky-{uuid.uuid4().hex[:8]}"
    receiver.answer(Answer(500, body=b"boom"), Answer(503, body=b"busy"))
    endpoint = create(receiver.url(path))
    queued = client.post(f"{BASE}/endpoints/{endpoint['id']}/test").json()["data"]

    calls = receiver.wait_for(path, 3)
    assert {c.headers["webhook-id"] for c in calls} == {queued["delivery_id"]}
    assert len({c.body for c in calls}) == 1
    verify_both(endpoint["secret"], calls[-1])

    def succeeded() -> list[dict[str, Any]] | None:
        rows = client.get(f"{BASE}/deliveries/{queued['delivery_id']}/attempts").json()["data"]
        return rows if rows and rows[0]["status"] == "succeeded" else None

    attempts = wait_until(succeeded, timeout=30.0)
    assert [(a["attempt"], a["status_code"]) for a in attempts] == [(3, 200), (2, 503), (1, 500)]
    assert [a["response"] for a in attempts[1:]] == ["busy", "boom"]
    (delivery,) = client.get(f"{BASE}/deliveries", params={"endpoint_id": endpoint["id"]}).json()["data"]
    assert delivery["status"] == "succeeded" and delivery["attempt_count"] == 3
    assert len(receiver.of(path)) == 3


def test_deliveries_from_the_stack_verify_with_both_libraries_through_a_rotation(endpoint_for, receiver):
    client, create = endpoint_for
    path = f"/e2e-rotation-{uuid.uuid4().hex[:8]}"
    endpoint = create(receiver.url(path))
    old_secret = endpoint["secret"]
    assert client.post(f"{BASE}/endpoints/{endpoint['id']}/test").status_code == 202
    (before,) = receiver.wait_for(path, 1)
    verify_both(old_secret, before)
    assert len(before.headers["webhook-signature"].split(" ")) == 1

    resp = client.post(f"{BASE}/endpoints/{endpoint['id']}/rotate-secret")
    assert resp.status_code == 200, resp.text
    new_secret = resp.json()["data"]["secret"]
    assert new_secret != old_secret
    assert client.post(f"{BASE}/endpoints/{endpoint['id']}/test").status_code == 202
    after = receiver.wait_for(path, 2)[1]
    assert len(after.headers["webhook-signature"].split(" ")) == 2  # new secret's and previous secret's
    verify_both(new_secret, after)
    verify_both(old_secret, after)  # a receiver that has not switched yet keeps verifying for 24 h
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(new_secret).verify(before.body, before.headers)  # the old delivery: old secret only
