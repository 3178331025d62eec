"""Organization deletion over HTTP against the local stack, and its purge job run by the stack's own JobsQueue poller
(the wiring of JobsFunction in template.yaml, played by local/pollers.py). The window cannot pass in a live stack,
so the test does what the daily schedule does once the window has ended: it moves the organization to `purging`,
puts its job and sends the first chunk's message, all through the stack's AWS emulator."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import boto3
import pytest

from switchboard import clock
from switchboard.jobs import purge, service
from switchboard.store import Store
from tests.e2e.conftest import Stack
from tests.e2e.test_account_flow import assert_error, latest_code, login, session_client, unique_email

pytestmark = pytest.mark.e2e


def _aws(stack: Stack, name: str):
    return boto3.client(
        name,
        endpoint_url=stack.aws_endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def test_a_deleted_organization_is_suspended_and_its_purge_runs_on_the_jobs_queue(local_only: Stack):
    email, password = unique_email("purge"), "purge-password-2026"
    with local_only.client() as platform:
        assert platform.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
        body = {"email": email, "otp_code": latest_code(local_only, email), "password": password}
        assert platform.post("/v1/auth/register/verify", json=body).status_code == 201
        token = login(platform, email, password)["token"]
    with session_client(local_only, token) as owner:
        org_id = owner.post("/v1/organizations", json={"name": "Short Lived"}).json()["data"]["id"]
        key = owner.post("/v1/api-keys", json={"name": "k", "role": "admin"}).json()["data"]["key"]
        with local_only.client(key) as as_key:
            for n in range(30):
                contact = {"name": f"P{n}", "phone": f"+1415556{n:04d}"}
                assert as_key.post("/v1/contacts", json=contact).status_code == 201
            assert_error(
                as_key.request("DELETE", "/v1/organization", json={"confirm": "Short Lived"}), 403, "forbidden"
            )
        assert_error(owner.request("DELETE", "/v1/organization", json={"confirm": "Short"}), 400, "validation_failed")
        deleted = owner.request("DELETE", "/v1/organization", json={"confirm": "Short Lived"})
        assert deleted.status_code == 202, deleted.text
        assert deleted.json()["data"]["status"] == "pending_deletion"
        with local_only.client(key) as as_key:
            assert_error(as_key.get("/v1/contacts"), 401, "unauthenticated")
        assert owner.get("/v1/organization").json()["data"]["status"] == "pending_deletion"
        assert_error(owner.get("/v1/contacts"), 403, "forbidden")

    dynamodb, sqs = _aws(local_only, "dynamodb"), _aws(local_only, "sqs")
    (table,) = [t for t in dynamodb.list_tables()["TableNames"] if "table" in t.lower()][:1]
    store = Store(table, client=dynamodb)
    queue_url = next(u for u in sqs.list_queues()["QueueUrls"] if "JobsQueue" in u)
    # The daily schedule, the window having passed: pending → purging with the job, then the first message.
    (due,) = [r for r in store.query("ORGPURGE", index="GSI1", sk_between=("0", "~")).items if r["id"] == org_id]
    assert clock.parse_iso(due["purge_at"]) > clock.now() + timedelta(days=29)
    job = service.start_op(purge.KIND, org_id, checkpoint={"phase": "objects", "prefix": 0})
    store.update(
        {"PK": f"ORG#{org_id}", "SK": "ORG"},
        "SET #status = :purging REMOVE GSI1PK, GSI1SK",
        names={"#status": "status"},
        values={":purging": "purging"},
    )
    store.put(job.item, condition="attribute_not_exists(PK)")
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"job_id": job.item["id"], "seq": 0}))

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        current = store.get({"PK": f"JOB#{job.item['id']}", "SK": "JOB"}, consistent=True)
        if current and current["status"] != "running":
            break
        time.sleep(0.3)
    assert current is not None and current["status"] == "completed", current
    assert current["progress"]["items_deleted"] > 60
    assert store.query(f"ORG#{org_id}", limit=1).items == []
    with session_client(local_only, token) as owner:
        assert owner.get("/v1/organizations").json()["data"] == []  # the membership mirror went too
