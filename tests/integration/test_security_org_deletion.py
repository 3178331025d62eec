"""Deleting an organization (CONVENTIONS "Tenant safety and data lifecycle"), attacked through the gateway with moto:
only an owner's session with the name confirmed may ask; the organization is then `pending_deletion` for 30 days,
during which nothing acts for it (API keys, provider callbacks, webhook fan-out and delivery, portal links) but an
owner can see and restore it; after the window the purge job (switchboard.jobs) erases every item and object."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import pytest

from functions.jobs.app import handler as jobs_handler
from switchboard import clock
from switchboard.config import get_settings
from switchboard.jobs import purge, service
from switchboard.store import get_store, shards
from tests.fakes.graph_api import FakeGraphApi
from tests.helpers import FakeContext, run_counters
from tests.integration import cloud_queue
from tests.integration.support import PASSWORD, Api, JobsQueue, invitation_token
from tests.integration.test_webhook_portal import ORIGIN, PORTAL, browser, portal_link
from tests.integration.test_webhooks import Pipeline, create_endpoint, pipeline, receiver  # noqa: F401
from tests.webhook_receiver import Receiver

ORG_NAME = "Local Organization"  # the bootstrap organization of the `api` fixture
CONFIRM = {"confirm": ORG_NAME}


@pytest.fixture
def owner(api: Api) -> dict[str, str]:
    return api.login("owner@example.com", PASSWORD)


@pytest.fixture
def app_key(api: Api) -> dict[str, str]:
    """Another organization's API key: the calling app's key that login needs (the deleted org's keys are 401)."""
    _, session = api.new_org("app@example.com", "App Org")
    created = api.post("/v1/api-keys", json={"name": "app", "role": "admin"}, headers=session)
    assert created.status_code == 201, created.text
    return {"X-Api-Key": created.json()["data"]["key"]}


def login(api: Api, app_key: dict[str, str], email: str) -> dict[str, str]:
    resp = api.post("/v1/auth/login", json={"email": email, "password": PASSWORD}, headers=app_key)
    assert resp.status_code == 200, resp.text
    return {"Authorization": f"Bearer {resp.json()['data']['token']}"}


@pytest.fixture
def graph():
    with FakeGraphApi(token="tok") as fake:
        yield fake


def cloud_channel(api: Api, graph: FakeGraphApi) -> dict[str, Any]:
    config = graph.channel_config(verify_token="vt")
    ch = api.post("/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": config})
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]  # type: ignore[no-any-return]


def inbound_callback(api: Api, graph: FakeGraphApi, channel: dict[str, Any], text: str) -> Any:
    wamid = graph.inbound_message("14155552671")
    value = {
        "contacts": [{"profile": {"name": "Ada"}, "wa_id": "14155552671"}],
        "messages": [
            {"from": "14155552671", "id": wamid, "timestamp": "1763800000", "type": "text", "text": {"body": text}}
        ],
    }
    body = graph.webhook(value)
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": graph.signature(body)}
    return api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers)


def delete_org(api: Api, session: dict[str, str], body: Any = CONFIRM) -> Any:
    return api.delete("/v1/organization", json=body, headers=session)


def org_items(org_id: str) -> list[dict[str, Any]]:
    """Every item of the tables (the single table, DeliveriesTable) that names the organization anywhere (keys or
    attributes), by scanning moto."""
    client = boto3.client("dynamodb")
    found: list[dict[str, Any]] = []
    for table in (get_settings().table_name, get_settings().deliveries_table_name):
        start = None
        while True:
            page = client.scan(TableName=table, **({"ExclusiveStartKey": start} if start else {}))
            found += [i for i in page["Items"] if org_id in json.dumps(i)]
            start = page.get("LastEvaluatedKey")
            if not start:
                break
    return found


def delivery_states(org_id: str) -> dict[str, str]:
    """The organization's webhook deliveries (DeliveriesTable) and their statuses."""
    return {
        i["id"]["S"]: i["status"]["S"] for i in org_items(org_id) if i.get("entity", {}).get("S") == "WebhookDelivery"
    }


def bucket_keys(prefix: str = "") -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=get_settings().media_bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents") or []]


Jobs = JobsQueue  # plays Lambda's part for JobsQueue (tests/integration/support.py)


def move_clock(monkeypatch: pytest.MonkeyPatch, delta: timedelta) -> None:
    moved = clock.now() + delta
    monkeypatch.setattr(clock, "now", lambda: moved)


# Who may ask ------------------------------------------------------------------------------------------------------
def test_an_owner_api_key_cannot_delete_the_organization(api: Api):
    api.assert_error(api.delete("/v1/organization", json=CONFIRM), 403, "forbidden")
    api.assert_error(api.delete("/v1/organization"), 403, "forbidden")
    org = api.get("/v1/organization")
    assert org.status_code == 200 and org.json()["data"]["status"] == "active"


def test_a_missing_or_wrong_confirmation_is_refused(api: Api, owner: dict[str, str]):
    api.assert_error(api.delete("/v1/organization", headers=owner), 400, "validation_failed")
    error = api.assert_error(delete_org(api, owner, {"confirm": "local organization"}), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.confirm"
    api.assert_error(delete_org(api, owner, {}), 400, "validation_failed")
    api.assert_error(delete_org(api, owner, {"confirm": ORG_NAME, "now": True}), 400, "validation_failed")
    assert api.get("/v1/organization").json()["data"]["status"] == "active"  # the key still works


def test_an_admin_session_cannot_delete_the_organization(api: Api):
    email, _ = api.register("admin@example.com")
    invited = api.post("/v1/invitations", json={"email": email, "role": "admin"}).json()["data"]
    admin = api.login(email)
    assert (
        api.post(
            f"/v1/invitations/{invited['id']}/accept", json={"token": invitation_token(api, email)}, headers=admin
        ).status_code
        == 200
    )
    api.assert_error(delete_org(api, admin), 403, "forbidden")


# While pending -----------------------------------------------------------------------------------------------------
def test_after_the_request_nothing_acts_for_the_organization_but_its_owner(
    api: Api,
    owner: dict[str, str],
    graph: FakeGraphApi,
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
):
    channel = cloud_channel(api, graph)
    assert inbound_callback(api, graph, channel, "before").json()["data"]["queued"] == 1
    assert cloud_queue.drain(api)["received"] == 1
    endpoint = create_endpoint(api, receiver.url("/hook"))
    token = portal_link(api)
    email, _ = api.register("member@example.com")
    invited = api.post("/v1/invitations", json={"email": email, "role": "member"}).json()["data"]
    member = api.login(email)
    assert (
        api.post(
            f"/v1/invitations/{invited['id']}/accept", json={"token": invitation_token(api, email)}, headers=member
        ).status_code
        == 200
    )
    pipeline.emit("contact.updated", {"contact_id": "ct_before"})
    pipeline.fan_out()  # deliveries queued before the request, not sent yet
    queued = delivery_states(api.org_id)
    assert queued and set(queued.values()) == {"pending"}
    messages_before = len(shards.query_all(get_store(), shards.all_pks(api.org_id), sk_prefix="MSG#"))

    resp = delete_org(api, owner)
    assert resp.status_code == 202, resp.text
    data = resp.json()["data"]
    assert data["status"] == "pending_deletion"
    purge_at = clock.parse_iso(data["purge_at"])
    assert timedelta(days=29, hours=23) < purge_at - clock.now() <= timedelta(days=30)

    # API keys: 401 at once.
    api.assert_error(api.get("/v1/organization"), 401, "unauthenticated")
    api.assert_error(api.get("/v1/contacts"), 401, "unauthenticated")
    # A signed provider callback stores nothing and emits nothing.
    assert inbound_callback(api, graph, channel, "after").status_code == 404
    assert len(shards.query_all(get_store(), shards.all_pks(api.org_id), sk_prefix="MSG#")) == messages_before
    # Webhooks: the queued delivery is not sent, a new event is not fanned out.
    pipeline.send()
    pipeline.emit("message.new", {"message_id": "msg_after"})
    pipeline.pump()
    assert receiver.of("/hook") == []
    after = delivery_states(api.org_id)
    assert set(after) == set(queued) and set(after.values()) == {"canceled"}  # none new, none sent
    # A portal link issued before: refused.
    refused = browser(api).post(f"{PORTAL}/session", data={"token": token}, headers={"Origin": ORIGIN})
    assert refused.status_code == 401
    # The owner's session sees the state; nothing else acts.
    seen = api.get("/v1/organization", headers=owner)
    assert seen.status_code == 200, seen.text
    assert seen.json()["data"]["status"] == "pending_deletion" and seen.json()["data"]["purge_at"] == data["purge_at"]
    api.assert_error(api.get("/v1/contacts", headers=owner), 403, "forbidden")
    api.assert_error(api.post("/v1/api-keys", json={"name": "k", "role": "admin"}, headers=owner), 403, "forbidden")
    api.assert_error(api.patch("/v1/organization", json={"name": "x"}, headers=owner), 403, "forbidden")
    # A member's session does not act at all, not even to read or restore.
    api.assert_error(api.get("/v1/organization", headers=member), 403, "forbidden")
    api.assert_error(api.post("/v1/organization/restore", headers=member), 403, "forbidden")
    assert endpoint["id"]  # (the endpoint is restored by the next test's path)


def test_restore_within_the_window_brings_everything_back(
    api: Api,
    owner: dict[str, str],
    pipeline: Pipeline,  # noqa: F811
    receiver: Receiver,  # noqa: F811
):
    endpoint = create_endpoint(api, receiver.url("/hook"))
    off = create_endpoint(api, receiver.url("/off"), enabled=False)
    assert delete_org(api, owner).status_code == 202
    api.assert_error(api.post("/v1/organization/restore", headers=api.owner_headers), 401, "unauthenticated")
    assert delete_org(api, owner).status_code == 202  # a repeated request changes nothing

    move_clock_by = timedelta(days=29)
    restored_at = clock.now() + move_clock_by
    resp = api.post("/v1/organization/restore", headers=owner)
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["status"] == "active" and resp.json()["data"]["purge_at"] is None
    assert restored_at > clock.now()
    api.assert_error(api.post("/v1/organization/restore", headers=owner), 409, "conflict")

    assert api.get("/v1/organization").status_code == 200  # the suspended key works again
    assert api.get("/v1/contacts").status_code == 200
    endpoints = {e["id"]: e for e in api.get("/v1/settings/developer/webhooks/endpoints").json()["data"]}
    assert endpoints[endpoint["id"]]["enabled"] is True
    assert endpoints[off["id"]]["enabled"] is False  # disabled by its owner before: stays so
    pipeline.emit("message.new", {"message_id": "msg_restored"})
    pipeline.pump()
    assert len(receiver.of("/hook")) == 1
    assert service.resume_stalled(get_store()) == []
    assert purge.start_due_purges(get_store(), clock.now() + timedelta(days=31)) == []  # no longer due


def test_restore_after_the_window_is_refused(
    api: Api, owner: dict[str, str], app_key: dict[str, str], monkeypatch: pytest.MonkeyPatch
):
    assert delete_org(api, owner).status_code == 202
    assert purge.start_due_purges(get_store()) == []  # not due yet
    move_clock(monkeypatch, timedelta(days=30, minutes=1))
    owner_again = login(api, app_key, "owner@example.com")
    api.assert_error(api.post("/v1/organization/restore", headers=owner_again), 409, "conflict")


# The purge ---------------------------------------------------------------------------------------------------------
def seed(api: Api, graph: FakeGraphApi) -> None:
    """Data in every corner: contacts, a channel (pointer, sealed token), messages, an endpoint, an invitation,
    a member (mirror row), a second API key, media objects."""
    for n in range(12):
        assert api.post("/v1/contacts", json={"name": f"Person {n}", "phone": f"+1415555{n:04d}"}).status_code == 201
    channel = cloud_channel(api, graph)
    inbound_callback(api, graph, channel, "hello")
    assert cloud_queue.drain(api)["received"] == 1
    create_endpoint(api, "http://127.0.0.1:9/hook")
    deliveries = Pipeline(api)  # a delivery, its event's payload and a failed attempt in DeliveriesTable
    deliveries.emit("contact.updated", {"contact_id": "ct_seeded"})
    deliveries.fan_out()
    deliveries.send()
    assert delivery_states(api.org_id)
    assert api.post("/v1/invitations", json={"email": "later@example.com", "role": "member"}).status_code == 201
    email, _ = api.register("member@example.com")
    invited = api.post("/v1/invitations", json={"email": email, "role": "member"}).json()["data"]
    assert (
        api.post(
            f"/v1/invitations/{invited['id']}/accept",
            json={"token": invitation_token(api, email)},
            headers=api.login(email),
        ).status_code
        == 200
    )
    assert api.post("/v1/api-keys", json={"name": "second", "role": "admin"}).status_code == 201
    s3 = boto3.client("s3")
    for key in (f"assets/{api.org_id}/ast_1", f"assets/{api.org_id}/ast_2", f"media/{api.org_id}/ch/m1"):
        s3.put_object(Bucket=get_settings().media_bucket, Key=key, Body=b"x")


def test_the_purge_after_the_window_erases_every_item_and_object(
    api: Api, owner: dict[str, str], app_key: dict[str, str], graph: FakeGraphApi, monkeypatch: pytest.MonkeyPatch
):
    other_org, other = api.new_org("other@example.com", "Other Org")
    assert api.post("/v1/contacts", json={"name": "Kept", "phone": "+14155550999"}, headers=other).status_code == 201
    boto3.client("s3").put_object(Bucket=get_settings().media_bucket, Key=f"assets/{other_org}/keep", Body=b"k")
    seed(api, graph)
    assert len(org_items(api.org_id)) > 40
    assert delete_org(api, owner).status_code == 202

    jobs = Jobs(api)
    assert purge.start_due_purges(get_store()) == []
    move_clock(monkeypatch, timedelta(days=30, seconds=1))
    started = jobs_handler({"action": "start_due_purges"}, FakeContext())["started"]
    job_id = get_store().get({"PK": f"ORG#{api.org_id}", "SK": "ORG"})["purge_job_id"]
    assert started == [job_id]
    assert purge.start_due_purges(get_store()) == []  # started once
    owner_again = login(api, app_key, "owner@example.com")
    owner_view = api.get("/v1/organization", headers=owner_again)
    assert owner_view.json()["data"]["status"] == "purging"
    api.assert_error(api.post("/v1/organization/restore", headers=owner_again), 409, "conflict")

    chunks = jobs.drain()
    job = service.get_job(get_store(), job_id)
    assert job is not None and job["status"] == "completed", job
    assert job["progress"]["chunks"] == chunks and job["progress"]["objects_deleted"] == 3
    assert "GSI1PK" not in job and job["ttl"] > clock.epoch(clock.now())

    run_counters()  # the stream's consumer sees the purge's deletions after it: it writes nothing back
    left = org_items(api.org_id)
    assert [i["PK"]["S"] for i in left] == [f"JOB#{job_id}"], left  # only the record of the purge itself
    assert bucket_keys(f"assets/{api.org_id}/") == [] and bucket_keys(f"media/{api.org_id}/") == []
    # Nothing of the other organization was touched.
    assert bucket_keys(f"assets/{other_org}/") == [f"assets/{other_org}/keep"]
    other_again = login(api, app_key, "other@example.com")  # (the clock moved past the first session's expiry)
    assert [c["name"] for c in api.get("/v1/contacts", headers=other_again).json()["data"]] == ["Kept"]
    # The people stay users: they can log in, and belong to no organization any more.
    relogged = login(api, app_key, "member@example.com")
    assert api.get("/v1/organizations", headers=relogged).json()["data"] == []


def test_the_purge_job_is_resumable_and_a_redelivered_chunk_is_harmless(
    api: Api, owner: dict[str, str], graph: FakeGraphApi, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(purge, "PAGE", 7)
    monkeypatch.setattr(purge, "OBJECTS_PAGE", 2)
    seed(api, graph)
    assert delete_org(api, owner).status_code == 202
    move_clock(monkeypatch, timedelta(days=31))
    (job_id,) = purge.start_due_purges(get_store())
    jobs = Jobs(api)

    first = jobs.receive()
    assert [json.loads(r["body"]) for r in first] == [{"job_id": job_id, "seq": 0}]
    assert jobs.run(first, delete=False) == {"batchItemFailures": []}  # chunk 0 done, its message not deleted
    assert service.get_job(get_store(), job_id)["seq"] == 1
    # The worker is killed: the next chunk's message is lost, and chunk 0's message comes back.
    boto3.client("sqs").purge_queue(QueueUrl=jobs.url)
    before = service.get_job(get_store(), job_id)
    assert service.run_chunk(get_store(), job_id, 0) == "stale"  # the redelivered chunk changes nothing
    assert service.get_job(get_store(), job_id) == before
    assert jobs.receive() == []  # ... and sends nothing

    assert service.resume_stalled(get_store()) == []  # not stalled yet
    move_clock(monkeypatch, timedelta(days=31, minutes=20))
    assert service.resume_stalled(get_store()) == [job_id]
    # Two consumers get the same chunk: both do the same (idempotent) work, one checkpoints.
    (again,) = jobs.receive()
    assert json.loads(again["body"]) == {"job_id": job_id, "seq": 1}
    assert service.run_chunk(get_store(), job_id, 1) == "chunk"
    assert jobs.run([again]) == {"batchItemFailures": []}  # now stale: dropped
    assert jobs.drain() > 5
    job = service.get_job(get_store(), job_id)
    assert job["status"] == "completed" and job["progress"]["objects_deleted"] == 3
    assert [i["PK"]["S"] for i in org_items(api.org_id)] == [f"JOB#{job_id}"]
    assert bucket_keys(f"assets/{api.org_id}/") == [] and bucket_keys(f"media/{api.org_id}/") == []
    assert service.resume(get_store(), job_id) is False  # finished: nothing to resume


def test_a_chunk_failing_every_try_marks_the_job_failed_and_resume_restarts_it(
    api: Api, owner: dict[str, str], monkeypatch: pytest.MonkeyPatch
):
    assert delete_org(api, owner).status_code == 202
    move_clock(monkeypatch, timedelta(days=31))
    (job_id,) = purge.start_due_purges(get_store())
    jobs = Jobs(api)
    real = purge._objects_chunk
    monkeypatch.setattr(purge, "_objects_chunk", lambda *a: (_ for _ in ()).throw(RuntimeError("S3 is down")))
    (record,) = jobs.receive()
    for receive in range(1, service.MAX_RECEIVES + 1):
        record["attributes"]["ApproximateReceiveCount"] = str(receive)
        assert jobs.run([record], delete=False) == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
        status = service.get_job(get_store(), job_id)["status"]
        assert status == ("failed" if receive == service.MAX_RECEIVES else "running")
    assert "S3 is down" in service.get_job(get_store(), job_id)["error"]
    boto3.client("sqs").purge_queue(QueueUrl=jobs.url)  # (SQS moved it to the DLQ)

    monkeypatch.setattr(purge, "_objects_chunk", real)
    assert service.resume(get_store(), job_id) is True
    jobs.drain()
    assert service.get_job(get_store(), job_id)["status"] == "completed"
    assert [i["PK"]["S"] for i in org_items(api.org_id)] == [f"JOB#{job_id}"]


def test_a_key_or_endpoint_added_by_a_request_authorized_before_the_deletion_is_refused(
    api: Api, owner: dict[str, str]
):
    """A request that passed the authorizer just before the deletion request commits after it: its transaction
    checks the organization item, so nothing it adds escapes the suspension."""
    from switchboard.api.auth import AuthContext
    from switchboard.errors import NotFound
    from switchboard.identity import apikeys
    from switchboard.identity import models as identity_models
    from switchboard.webhooks import models as webhook_models
    from switchboard.webhooks import service as webhooks

    racer = AuthContext("session", "sess_racer", None, api.org_id, "owner", "sess_racer")  # read before the flag
    assert delete_org(api, owner).status_code == 202
    with pytest.raises(NotFound):
        apikeys.create_api_key(get_store(), racer, identity_models.ApiKeyCreate(name="late", role="admin"))
    with pytest.raises(NotFound):
        webhooks.create_endpoint(get_store(), racer, webhook_models.EndpointCreate(url="http://127.0.0.1:9/late"))
    assert get_store().query_all(f"ORG#{api.org_id}", sk_prefix="WHEP#") == []
    assert len(get_store().query_all(f"ORG#{api.org_id}", sk_prefix="APIKEY#")) == 1  # the bootstrap key only
