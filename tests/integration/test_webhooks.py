"""Webhooks against moto: the management API through the gateway, and the real pipeline driven step by step —
outbox item → event_publisher → bus → WebhookEventsQueue → webhook_fanout → WebhookDeliveriesQueue → webhook_sender →
a local receiver (a threaded http.server on 127.0.0.1). The queues are moto's; this test plays Lambda's part of
receiving, invoking with the SQS records and deleting what the handler did not report as failed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
import standardwebhooks
import svix.webhooks

from functions.event_publisher.app import handler as publisher_handler
from functions.jobs.app import handler as jobs_handler
from functions.webhook_fanout.app import handler as fanout_handler
from functions.webhook_sender.app import handler as sender_handler
from local.pollers import lambda_sqs_record
from switchboard import aws, clock, netguard
from switchboard.config import reset_settings
from switchboard.errors import Unauthenticated
from switchboard.events.outbox import outbox_put, stored_events
from switchboard.jobs import service as jobs
from switchboard.store import get_store
from switchboard.store.table import serialize
from switchboard.webhooks import repository, service
from switchboard.webhooks.catalogue import EVENT_TYPES
from tests import helpers
from tests.helpers import FakeContext
from tests.integration.support import Api
from tests.webhook_receiver import Answer, Receiver

BASE = "/v1/settings/developer/webhooks"
SPEC_EVENTS = {
    "message.new",
    "message.sent",
    "message.status_update",
    "conversation.updated",
    "contact.updated",
    "template.status_update",
    "commerce.order.updated",
    "crm.record.created",
    "crm.record.updated",
    "crm.record.deleted",
    "crm.deal.stage_changed",
    "crm.task.completed",
    "crm.comment.created",
    "crm.comment.deleted",
    "crm.list.entry_added",
    "crm.list.entry_removed",
    "crm.relationship.linked",
    "crm.relationship.unlinked",
    "crm.import.committed",
}


class Pipeline:
    """Drives the event pipeline of the `api` fixture's moto, one step at a time."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.sqs = boto3.client("sqs")
        self.published: set[str] = set()
        self.visibility: list[int] = []  # VisibilityTimeout of every ChangeMessageVisibility the sender made

    def emit(self, event_type: str, data: dict[str, Any]) -> str:
        put = outbox_put(self.api.org_id, event_type, data)
        get_store().transact([put])
        return str(put.item["event_id"])

    def publish(self) -> None:
        """The stream's part: new outbox items → event_publisher → bus → rules → queues."""
        items = stored_events(get_store(), self.api.org_id, consistent=True)
        new = [i for i in items if i["SK"] not in self.published]
        if not new:
            return
        records = [
            {
                "eventName": "INSERT",
                "dynamodb": {
                    "SequenceNumber": str(n),
                    "NewImage": serialize(i),
                    "Keys": serialize({"PK": i["PK"], "SK": i["SK"]}),
                },
            }
            for n, i in enumerate(new)
        ]
        assert publisher_handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}
        self.published |= {i["SK"] for i in new}

    def receive(self, queue: str) -> list[dict[str, Any]]:
        url = self.api.resources.queue_url(queue)
        records: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
            messages = got.get("Messages") or []
            records += [lambda_sqs_record(m, self.api.resources.queue_arn(queue)) for m in messages]
            if not messages:
                return records

    def invoke(self, handler: Callable, queue: str, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Lambda's part: invoke with the records, delete every message not reported as failed."""
        result = handler({"Records": records}, FakeContext()) if records else {"batchItemFailures": []}
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        url = self.api.resources.queue_url(queue)
        for record in records:
            if record["messageId"] not in failed:
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])
        return result

    def fan_out(self) -> list[dict[str, Any]]:
        self.publish()
        records = self.receive("WebhookEventsQueue")
        assert self.invoke(fanout_handler, "WebhookEventsQueue", records) == {"batchItemFailures": []}
        return records

    def send(self) -> list[dict[str, Any]]:
        records = self.receive("WebhookDeliveriesQueue")
        self.invoke(sender_handler, "WebhookDeliveriesQueue", records)
        return records

    def jobs(self, *, rounds: int = 100) -> int:
        """JobsFunction's part: run queued job chunks (a recovery's) until none is left; returns the chunks run."""
        ran = 0
        for _ in range(rounds):
            records = self.receive("JobsQueue")
            if not records:
                return ran
            assert self.invoke(jobs_handler, "JobsQueue", records) == {"batchItemFailures": []}
            ran += len(records)
        raise AssertionError(f"jobs still queued after {rounds} rounds")

    def pump(self, rounds: int = 30) -> int:
        """Run queued jobs, fan out, then send until no delivery message is visible (a rescheduled one comes back
        when its visibility runs out). Returns the number of sender invocations."""
        self.jobs()
        self.fan_out()
        for n in range(rounds):
            if not self.send():
                return n
        raise AssertionError(f"deliveries still queued after {rounds} sender rounds")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver().running() as running:
        yield running


@pytest.fixture
def pipeline(api: Api, monkeypatch) -> Pipeline:
    pipe = Pipeline(api)
    sqs = aws.client("sqs")
    original = sqs.change_message_visibility

    def recording(**kwargs: Any) -> Any:
        pipe.visibility.append(kwargs["VisibilityTimeout"])
        return original(**kwargs)

    monkeypatch.setattr(sqs, "change_message_visibility", recording)
    return pipe


@pytest.fixture
def fast_retries(monkeypatch):
    """Every retry delay ~0 (LOCAL_TIME_SCALE), so rescheduled messages are visible again at once."""
    monkeypatch.setenv("LOCAL_TIME_SCALE", "0.000001")
    reset_settings()
    yield
    reset_settings()


def create_endpoint(api: Api, url: str, **fields: Any) -> dict[str, Any]:
    resp = api.post(f"{BASE}/endpoints", json={"url": url, **fields})
    assert resp.status_code == 201, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def deliveries(api: Api, **params: Any) -> list[dict[str, Any]]:
    resp = api.get(f"{BASE}/deliveries", params=params)
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def attempts(api: Api, msg_id: str) -> list[dict[str, Any]]:
    resp = api.get(f"{BASE}/deliveries/{msg_id}/attempts", params={"limit": 100})
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def verify_both(secret: str, received) -> None:
    """As a receiver would: both libraries, over the raw body, with the headers as sent."""
    standardwebhooks.Webhook(secret).verify(received.body, received.headers)
    svix.webhooks.Webhook(secret).verify(received.body, received.headers)


def resolver_for(table: dict[str, str]) -> Callable[..., list[tuple[Any, ...]]]:
    def fake_getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        family = 10 if ":" in table[host] else 2
        return [(family, 1, 6, "", (table[host], port))]

    return fake_getaddrinfo


# Endpoints --------------------------------------------------------------------------------------------------------
def test_endpoint_lifecycle_catalogue_secret_and_audit(api: Api):
    created = create_endpoint(api, "http://127.0.0.1:9/hook", description="orders", filter_types=["message.new"])
    assert created["id"].startswith("whe_") and created["enabled"] is True
    assert created["filter_types"] == ["message.new"] and created["description"] == "orders"
    secret = created["secret"]
    assert secret.startswith("whsec_")
    assert len(standardwebhooks.webhooks.base64.b64decode(secret.removeprefix("whsec_"))) == 32

    settings = api.get(BASE).json()["data"]
    assert [e["id"] for e in settings["endpoints"]] == [created["id"]]
    assert "secret" not in settings["endpoints"][0]
    names = {t["name"] for t in settings["event_types"]}
    assert names == SPEC_EVENTS | {"webhook.test"} == set(EVENT_TYPES)
    assert "message.queued" not in names

    eid = created["id"]
    got = api.get(f"{BASE}/endpoints/{eid}").json()["data"]
    assert got["url"] == "http://127.0.0.1:9/hook" and "secret" not in got
    patched = api.patch(f"{BASE}/endpoints/{eid}", json={"filter_types": [], "description": None, "enabled": False})
    assert patched.status_code == 200, patched.text
    assert patched.json()["data"]["filter_types"] == [] and patched.json()["data"]["description"] is None
    assert patched.json()["data"]["disabled_reason"] == "manual"
    rotated = api.post(f"{BASE}/endpoints/{eid}/rotate-secret")
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["data"]["secret"].startswith("whsec_") and rotated.json()["data"]["secret"] != secret
    assert api.delete(f"{BASE}/endpoints/{eid}").status_code == 204
    Api.assert_error(api.get(f"{BASE}/endpoints/{eid}"), 404, "not_found")
    Api.assert_error(api.delete(f"{BASE}/endpoints/{eid}"), 404, "not_found")

    audit = api.get("/v1/audit-logs", params={"target_id": eid}).json()["data"]
    assert [a["action"] for a in audit] == [
        "webhook_endpoint.deleted",
        "webhook_endpoint.secret_rotated",
        "webhook_endpoint.updated",
        "webhook_endpoint.created",
    ]
    assert all(secret not in json.dumps(a) for a in audit)


def test_filter_types_are_validated_against_the_catalogue(api: Api):
    resp = api.post(f"{BASE}/endpoints", json={"url": "http://127.0.0.1:9/x", "filter_types": ["message.queued"]})
    error = Api.assert_error(resp, 400, "validation_failed")
    assert error["details"][0]["field"] == "body.filter_types"
    Api.assert_error(api.post(f"{BASE}/endpoints", json={}), 400, "validation_failed")


UNSAFE_URLS = [
    "https://127.0.0.2/hook",  # loopback (only the literal 127.0.0.1 of the local stack is allowed)
    "https://localhost/hook",
    "https://10.1.2.3/hook",
    "https://192.168.0.10/hook",
    "https://100.64.0.1/hook",  # shared address space (CGNAT)
    "https://169.254.169.254/latest/meta-data/",
    "https://[::1]/hook",
    "https://[::ffff:10.0.0.1]/hook",  # IPv4-mapped
    "https://[fe80::1]/hook",
    "https://[fd00:ec2::254]/hook",
    "https://internal.example.test/hook",  # resolves to a private address
    "https://mixed.example.test/hook",  # one public and one private address
    "https://nowhere.example.test/hook",  # does not resolve
    "http://public.example.test/hook",  # plain http, even on the local stack
    "https://user:pw@public.example.test/hook",
    "ftp://public.example.test/hook",
]


def test_unsafe_urls_are_refused_at_creation(api: Api, monkeypatch):
    def fake_getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        answers = {
            "localhost": ["127.0.0.1"],
            "internal.example.test": ["10.9.8.7"],
            "mixed.example.test": ["93.184.216.34", "172.16.5.5"],
            "public.example.test": ["93.184.216.34"],
        }
        if host not in answers:
            raise OSError(f"unknown host {host}")
        return [(2, 1, 6, "", (address, port)) for address in answers[host]]

    monkeypatch.setattr(netguard, "getaddrinfo", fake_getaddrinfo)
    for url in UNSAFE_URLS:
        error = Api.assert_error(api.post(f"{BASE}/endpoints", json={"url": url}), 400, "validation_failed")
        assert error["details"][0]["field"] == "body.url", url
    assert api.get(BASE).json()["data"]["endpoints"] == []
    assert create_endpoint(api, "https://public.example.test/hook?x=1")["url"] == "https://public.example.test/hook?x=1"
    endpoint = create_endpoint(api, "http://127.0.0.1:9/hook")  # the local stack's exception
    error = Api.assert_error(
        api.patch(f"{BASE}/endpoints/{endpoint['id']}", json={"url": "https://10.0.0.1/"}), 400, "validation_failed"
    )
    assert error["details"][0]["field"] == "body.url"


def test_outside_the_local_stack_http_and_127_0_0_1_are_refused(api: Api, monkeypatch):
    monkeypatch.setattr(netguard, "getaddrinfo", resolver_for({"public.example.test": "93.184.216.34"}))
    monkeypatch.setenv("STAGE", "dev")
    reset_settings()
    try:
        for url in ("http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "http://public.example.test/hook"):
            error = Api.assert_error(api.post(f"{BASE}/endpoints", json={"url": url}), 400, "validation_failed")
            assert error["details"][0]["field"] == "body.url", url
        assert create_endpoint(api, "https://public.example.test/hook")["url"] == "https://public.example.test/hook"
    finally:
        monkeypatch.setenv("STAGE", "local")
        reset_settings()


def test_members_cannot_manage_webhooks(api: Api):
    member = api.post("/v1/api-keys", json={"name": "m", "role": "member"}).json()["data"]["key"]
    for method, path in (("GET", BASE), ("POST", f"{BASE}/endpoints"), ("GET", f"{BASE}/deliveries")):
        Api.assert_error(api.request(method, path, headers={"X-Api-Key": member}, json={}), 403, "forbidden")


# Delivery ---------------------------------------------------------------------------------------------------------
def test_deliveries_verify_with_standardwebhooks_and_svix_through_a_rotation(api, pipeline, receiver):
    endpoint = create_endpoint(api, receiver.url("/signed"))
    old_secret = endpoint["secret"]
    data = {"message_id": "m-1", "conversation_id": "cv_1", "from_phone": "15550100", "text": "héllo ✓"}
    event_id = pipeline.emit("message.new", data)
    pipeline.pump()

    (first,) = receiver.of("/signed")
    verify_both(old_secret, first)
    assert json.loads(first.body) == data  # the flat body: no wrapper, no type
    msg_id = repository.delivery_id(event_id, endpoint["id"])
    headers = first.headers
    assert headers["webhook-id"] == headers["switchboard-id"] == msg_id
    assert headers["webhook-timestamp"] == headers["switchboard-timestamp"]
    assert headers["webhook-signature"] == headers["switchboard-signature"]
    assert headers["webhook-signature"].startswith("v1,") and " " not in headers["webhook-signature"]
    assert headers["switchboard-event-type"] == "message.new"
    assert headers["content-type"] == "application/json"

    rotated = api.post(f"{BASE}/endpoints/{endpoint['id']}/rotate-secret").json()["data"]["secret"]
    pipeline.emit("message.sent", {"message_id": "m-2"})
    pipeline.pump()
    second = receiver.of("/signed")[1]
    assert len(second.headers["webhook-signature"].split(" ")) == 2  # the new secret's and the previous one's
    verify_both(rotated, second)
    verify_both(old_secret, second)  # receivers that have not switched yet keep working for 24 h
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook("whsec_" + "A" * 43 + "=").verify(second.body, second.headers)
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix.webhooks.Webhook(rotated).verify(second.body + b" ", second.headers)

    listed = deliveries(api, endpoint_id=endpoint["id"])
    assert [d["event_type"] for d in listed] == ["message.sent", "message.new"]
    assert {d["status"] for d in listed} == {"succeeded"}
    assert listed[1]["id"] == msg_id and listed[1]["payload"] == data and listed[1]["attempt_count"] == 1
    (attempt,) = attempts(api, msg_id)
    assert attempt["status"] == "succeeded" and attempt["status_code"] == 200 and attempt["response"] == "ok"
    assert attempt["attempt"] == 1 and attempt["trigger"] == "scheduled" and attempt["duration_ms"] >= 0
    endpoint_now = api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]
    assert endpoint_now["last_success_at"] and endpoint_now["consecutive_failures"] == 0


def test_unsubscribed_disabled_and_internal_events_are_not_delivered(api, pipeline, receiver):
    sent_only = create_endpoint(api, receiver.url("/sent-only"), filter_types=["message.sent"])
    create_endpoint(api, receiver.url("/disabled"), enabled=False)
    everything = create_endpoint(api, receiver.url("/all"))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.emit("message.queued", {"message_id": "m-1"})  # internal: never published as a webhook
    pipeline.emit("crm.record.created", {"record_id": "r1", "object_kind": "deal"})
    pipeline.pump()
    assert receiver.of("/sent-only") == [] and receiver.of("/disabled") == []
    assert sorted(r.headers["switchboard-event-type"] for r in receiver.of("/all")) == [
        "crm.record.created",
        "message.new",
    ]
    assert deliveries(api, endpoint_id=sent_only["id"]) == []
    assert len(deliveries(api, endpoint_id=everything["id"])) == 2
    assert len(deliveries(api)) == 2


def test_a_test_event_goes_to_its_endpoint_only(api, pipeline, receiver):
    target = create_endpoint(api, receiver.url("/target"), filter_types=["message.sent"])
    create_endpoint(api, receiver.url("/bystander"))  # subscribed to every event, still not to other's tests
    resp = api.post(f"{BASE}/endpoints/{target['id']}/test")
    assert resp.status_code == 202, resp.text
    queued = resp.json()["data"]
    pipeline.pump()
    (got,) = receiver.of("/target")
    assert receiver.of("/bystander") == []
    verify_both(target["secret"], got)
    assert json.loads(got.body) == {"endpoint_id": target["id"], "sent_at": queued["sent_at"]}
    assert got.headers["switchboard-event-type"] == "webhook.test"
    assert got.headers["webhook-id"] == queued["delivery_id"]
    Api.assert_error(api.post(f"{BASE}/endpoints/whe_missing/test"), 404, "not_found")


def test_410_gone_disables_the_endpoint_and_alerts(api, pipeline, receiver):
    assert api.put(f"{BASE}/alerting-settings", json={"emails": ["ops@example.com"]}).status_code == 200
    endpoint = create_endpoint(api, receiver.url("/gone"))
    receiver.answer(Answer(410, body=b"gone"))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    assert len(receiver.of("/gone")) == 1
    after = api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]
    assert after["enabled"] is False and after["disabled_reason"] == "gone"
    (delivery,) = deliveries(api, endpoint_id=endpoint["id"])
    assert delivery["status"] == "canceled" and delivery["last_status_code"] == 410
    assert pipeline.visibility == []  # nothing rescheduled
    (mail,) = api.mail("ops@example.com")
    assert "disabled" in mail["subject"] and endpoint["id"] in mail["text"]

    pipeline.emit("message.new", {"message_id": "m-2"})
    pipeline.pump()
    assert len(receiver.of("/gone")) == 1  # disabled: nothing more
    Api.assert_error(api.post(f"{BASE}/deliveries/{delivery['id']}/retry"), 409, "conflict")


def test_failures_reschedule_with_the_scheduled_visibility(api, pipeline, receiver):
    endpoint = create_endpoint(api, receiver.url("/flaky"))
    receiver.answer(Answer(500, body=b"x" * 5000))
    event_id = pipeline.emit("message.new", {"message_id": "m-1"})
    started = clock.now()
    pipeline.pump()
    assert len(receiver.of("/flaky")) == 1
    assert len(pipeline.visibility) == 1 and 4 <= pipeline.visibility[0] <= 5  # 5 s ± 10 %, whole seconds
    msg_id = repository.delivery_id(event_id, endpoint["id"])
    (delivery,) = deliveries(api, endpoint_id=endpoint["id"])
    assert delivery["status"] == "retrying" and delivery["last_status_code"] == 500
    # 5 s ± 10 % after the attempt (measured from its claim, not from the emit: the fan-out before it takes a
    # while on a loaded machine, and the attempt itself is a local POST)
    attempted = clock.parse_iso(delivery["last_attempt_at"])
    assert attempted >= started
    due = clock.parse_iso(delivery["next_attempt_at"]) - attempted
    assert timedelta(seconds=4.4) <= due <= timedelta(seconds=6.5)
    (attempt,) = attempts(api, msg_id)
    assert attempt["status"] == "failed" and attempt["error"] == "HTTP 500"
    assert attempt["response"] == "x" * 1024  # at most 1 KiB is kept
    assert api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]["failing_since"]

    # The message is on the queue, invisible until the next attempt is due.
    attrs = pipeline.sqs.get_queue_attributes(
        QueueUrl=api.resources.queue_url("WebhookDeliveriesQueue"),
        AttributeNames=["ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "1"


def test_redirects_are_failures_and_never_followed(api, pipeline, receiver):
    create_endpoint(api, receiver.url("/moved"))
    receiver.answer(Answer(307, headers={"Location": receiver.url("/elsewhere")}))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    assert len(receiver.of("/moved")) == 1 and receiver.of("/elsewhere") == []
    (delivery,) = deliveries(api)
    assert delivery["status"] == "retrying" and delivery["last_status_code"] == 307


def test_retry_after_on_429_is_honoured(api, pipeline, receiver):
    create_endpoint(api, receiver.url("/busy"))
    receiver.answer(Answer(429, headers={"Retry-After": "120"}))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    assert pipeline.visibility == [120]


def test_exhausted_after_the_last_attempt_then_retry_by_api_with_the_same_id(api, pipeline, receiver, fast_retries):
    assert api.put(f"{BASE}/alerting-settings", json={"emails": ["ops@example.com"], "failure_threshold": 3}).json()
    endpoint = create_endpoint(api, receiver.url("/down"))
    receiver.default = Answer(503, body=b"down")
    event_id = pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    calls = receiver.of("/down")
    assert len(calls) == 8
    assert len({c.headers["webhook-id"] for c in calls}) == 1
    assert len(pipeline.visibility) == 7  # rescheduled after attempts 1..7, the 8th ends it
    msg_id = repository.delivery_id(event_id, endpoint["id"])
    (delivery,) = deliveries(api, status="exhausted")
    assert delivery["id"] == msg_id and delivery["attempt_count"] == 8 and delivery["next_attempt_at"] is None
    tried = attempts(api, msg_id)
    assert [a["attempt"] for a in tried] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert {a["status_code"] for a in tried} == {503}
    assert [m["subject"] for m in api.mail("ops@example.com")] == [f"Webhook endpoint failing: {endpoint['url']}"]

    receiver.default = Answer(200)
    resp = api.post(f"{BASE}/deliveries/{msg_id}/retry")
    assert resp.status_code == 202, resp.text
    assert resp.json()["data"]["status"] == "pending"
    pipeline.pump()
    calls = receiver.of("/down")
    assert len(calls) == 9 and calls[-1].headers["webhook-id"] == msg_id
    verify_both(endpoint["secret"], calls[-1])
    assert calls[-1].body == calls[0].body
    (delivery,) = deliveries(api, endpoint_id=endpoint["id"])
    assert delivery["status"] == "succeeded" and delivery["attempt_count"] == 9
    latest = attempts(api, msg_id)[0]
    assert latest["trigger"] == "manual" and latest["status_code"] == 200
    assert api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]["consecutive_failures"] == 0
    Api.assert_error(api.post(f"{BASE}/deliveries/msg_unknown/retry"), 404, "not_found")
    Api.assert_error(api.get(f"{BASE}/deliveries/msg_unknown/attempts"), 404, "not_found")


def test_recover_retries_every_failed_delivery_since_a_time(api, pipeline, receiver, fast_retries):
    endpoint = create_endpoint(api, receiver.url("/recover"))
    receiver.default = Answer(500)
    since = clock.now_iso()
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.emit("message.new", {"message_id": "m-2"})
    pipeline.pump()
    assert {d["status"] for d in deliveries(api)} == {"exhausted"}
    receiver.default = Answer(204, body=b"")
    resp = api.post(f"{BASE}/endpoints/{endpoint['id']}/recover", json={"since": since})
    assert resp.status_code == 202, resp.text
    started = resp.json()["data"]
    assert started["status"] == "running" and started["job_id"].startswith("job_") and started["has_more"] is False
    assert {d["status"] for d in deliveries(api)} == {"exhausted"}  # the request itself reads no delivery
    pipeline.pump()  # the job's chunk requeues them, then they are sent
    job = jobs.get_job(get_store(), started["job_id"])
    assert job is not None and job["status"] == "completed" and job["progress"]["requeued"] == 2
    assert {d["status"] for d in deliveries(api)} == {"succeeded"}
    assert len(receiver.of("/recover")) == 18
    again = api.post(f"{BASE}/endpoints/{endpoint['id']}/recover", json={"since": since}).json()["data"]
    pipeline.pump()
    assert jobs.get_job(get_store(), again["job_id"])["progress"].get("requeued", 0) == 0  # type: ignore[index]
    assert len(receiver.of("/recover")) == 18
    Api.assert_error(
        api.post(f"{BASE}/endpoints/{endpoint['id']}/recover", json={"since": "yesterday"}), 400, "validation_failed"
    )


def test_recover_pages_through_sparse_failures_in_chunks_and_a_redelivered_chunk_sends_nothing_twice(
    api, pipeline, receiver, fast_retries, monkeypatch
):
    monkeypatch.setattr(service, "RECOVER_PAGE", 3)
    monkeypatch.setenv("WEBHOOK_DELIVERY_SHARDS", "2")  # 9 deliveries: pages of 3 within the endpoint's shards
    reset_settings()
    endpoint = create_endpoint(api, receiver.url("/sparse"))
    since = clock.now_iso()
    receiver.default = Answer(204, body=b"")
    for n in range(7):
        pipeline.emit("message.new", {"message_id": f"ok-{n}"})
    pipeline.pump()
    receiver.default = Answer(500)
    for n in range(2):
        pipeline.emit("message.new", {"message_id": f"bad-{n}"})
    pipeline.pump()
    failed = {d["id"] for d in deliveries(api) if d["status"] == "exhausted"}
    assert len(failed) == 2 and len(deliveries(api)) == 9
    receiver.default = Answer(204, body=b"")
    before = len(receiver.of("/sparse"))

    started = api.post(f"{BASE}/endpoints/{endpoint['id']}/recover", json={"since": since}).json()["data"]
    chunks = 0
    while True:
        records = pipeline.receive("JobsQueue")
        if not records:
            break
        # Every chunk runs twice: once without its checkpoint being saved (a crash after its work), then for real.
        job = jobs.get_job(get_store(), started["job_id"])
        assert job is not None
        service.recover_chunk(get_store(), job)
        assert pipeline.invoke(jobs_handler, "JobsQueue", records) == {"batchItemFailures": []}
        chunks += len(records)
    job = jobs.get_job(get_store(), started["job_id"])
    # 9 deliveries at about 3 evaluated per chunk: at least 2 chunks, however the random ids split over the 2 shards
    # (a query that ends its shard spends only the items its filter kept, so a chunk may read a whole short shard)
    assert job is not None and job["status"] == "completed" and chunks == job["progress"]["chunks"] >= 2
    pipeline.pump()
    sent = receiver.of("/sparse")[before:]
    assert sorted(c.headers["webhook-id"] for c in sent) == sorted(failed)  # each failed one once, no other
    assert {d["status"] for d in deliveries(api)} == {"succeeded"}


def test_a_host_resolving_to_a_private_address_at_delivery_is_refused(api, pipeline, monkeypatch):
    answers = {"hooks.example.test": "93.184.216.34"}
    monkeypatch.setattr(netguard, "getaddrinfo", resolver_for(answers))
    endpoint = create_endpoint(api, "https://hooks.example.test/hook")  # public when created
    answers["hooks.example.test"] = "10.0.0.7"  # DNS now answers a private address
    connections: list[Any] = []
    monkeypatch.setattr("switchboard.webhooks.delivery.post", lambda *a, **k: connections.append(a))
    event_id = pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    assert connections == []  # no request left the sender
    (attempt,) = attempts(api, repository.delivery_id(event_id, endpoint["id"]))
    assert attempt["status"] == "failed" and attempt["status_code"] is None
    assert "private address" in attempt["error"] and "10.0.0.7" in attempt["error"]
    assert deliveries(api)[0]["status"] == "retrying"


def test_redelivered_events_and_messages_do_not_duplicate_deliveries(api, pipeline, receiver):
    endpoint = create_endpoint(api, receiver.url("/once"))
    receiver.answer(Answer(500))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.publish()
    (record,) = pipeline.receive("WebhookEventsQueue")
    # SQS (or EventBridge) delivers the same event twice before its delivery was attempted: still one delivery, but
    # it is queued again (its first message might have been lost between the put and the send) …
    for _ in range(2):
        assert fanout_handler({"Records": [record]}, FakeContext()) == {"batchItemFailures": []}
    assert len(deliveries(api, endpoint_id=endpoint["id"])) == 1
    first, second = pipeline.receive("WebhookDeliveriesQueue")
    # … and the sender keeps exactly one retry chain: the message that claimed the delivery owns it, the other one
    # is dropped (here they run one after the other, after the first attempt failed).
    pipeline.invoke(sender_handler, "WebhookDeliveriesQueue", [first])
    pipeline.invoke(sender_handler, "WebhookDeliveriesQueue", [second])
    assert len(receiver.of("/once")) == 1
    assert len(pipeline.visibility) == 1
    attrs = pipeline.sqs.get_queue_attributes(
        QueueUrl=api.resources.queue_url("WebhookDeliveriesQueue"),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "1"}
    # Once attempted, a redelivered event queues nothing at all.
    assert fanout_handler({"Records": [record]}, FakeContext()) == {"batchItemFailures": []}
    assert pipeline.receive("WebhookDeliveriesQueue") == []
    (delivery,) = deliveries(api, endpoint_id=endpoint["id"])
    assert delivery["status"] == "retrying" and delivery["attempt_count"] == 1


def test_an_endpoint_failing_for_five_days_is_disabled(api, pipeline, receiver):
    api.put(f"{BASE}/alerting-settings", json={"emails": ["ops@example.com"], "failure_threshold": 100})
    endpoint = create_endpoint(api, receiver.url("/dead"))
    six_days_ago = clock.iso(clock.now() - timedelta(days=6))
    get_store().update(
        repository.endpoint_key(api.org_id, endpoint["id"]),
        "SET failing_since = :t, consecutive_failures = :n",
        values={":t": six_days_ago, ":n": 40},
    )
    receiver.answer(Answer(502))
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    after = api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]
    assert after["enabled"] is False and after["disabled_reason"] == "failing"
    assert deliveries(api)[0]["status"] == "canceled"
    assert [m["subject"] for m in api.mail("ops@example.com")] == [f"Webhook endpoint disabled: {endpoint['url']}"]
    enabled = api.patch(f"{BASE}/endpoints/{endpoint['id']}", json={"enabled": True}).json()["data"]
    assert enabled["enabled"] is True and enabled["failing_since"] is None and enabled["disabled_reason"] is None


def test_deliveries_list_filters_and_cursor(api, pipeline, receiver):
    a = create_endpoint(api, receiver.url("/a"))
    b = create_endpoint(api, receiver.url("/b"), filter_types=["message.sent"])
    pipeline.emit("message.new", {"n": 1})
    pipeline.emit("message.sent", {"n": 2})
    pipeline.emit("message.new", {"n": 3})
    pipeline.pump()
    assert len(deliveries(api)) == 4
    page1 = api.get(f"{BASE}/deliveries", params={"endpoint_id": a["id"], "limit": 2}).json()
    assert len(page1["data"]) == 2 and page1["meta"]["has_more"] is True
    page2 = api.get(
        f"{BASE}/deliveries", params={"endpoint_id": a["id"], "limit": 2, "cursor": page1["meta"]["cursor"]}
    ).json()
    assert len(page2["data"]) == 1
    assert len({d["id"] for d in page1["data"] + page2["data"]}) == 3
    assert sorted(d["endpoint_id"] for d in deliveries(api, event_type="message.sent")) == sorted([a["id"], b["id"]])
    assert len(deliveries(api, event_type="message.new", status="succeeded", limit=1)) == 1
    assert deliveries(api, status="exhausted") == []
    assert deliveries(api, since=clock.iso(clock.now() + timedelta(minutes=1))) == []
    bad = api.get(f"{BASE}/deliveries", params={"status": "succeeded", "cursor": page1["meta"]["cursor"]})
    Api.assert_error(bad, 400, "validation_failed")
    Api.assert_error(api.get(f"{BASE}/deliveries", params={"status": "lost"}), 400, "validation_failed")


# Alerting and portal ----------------------------------------------------------------------------------------------
def test_alerting_settings_defaults_and_replace(api: Api):
    assert api.get(f"{BASE}/alerting-settings").json()["data"] == {
        "emails": [],
        "failure_threshold": 10,
        "updated_at": None,
    }
    resp = api.put(f"{BASE}/alerting-settings", json={"emails": ["Ops@Example.com"], "failure_threshold": 5})
    assert resp.status_code == 200 and resp.json()["data"]["emails"] == ["ops@example.com"]
    assert api.get(f"{BASE}/alerting-settings").json()["data"]["failure_threshold"] == 5
    bad = api.put(f"{BASE}/alerting-settings", json={"emails": ["not-an-address"]})
    Api.assert_error(bad, 400, "validation_failed")
    Api.assert_error(api.put(f"{BASE}/alerting-settings", json={"failure_threshold": 0}), 400, "validation_failed")


def test_portal_access_is_a_single_use_short_lived_hashed_token(api: Api):
    resp = api.post(f"{BASE}/portal-access", json={"expires_in": 120})
    assert resp.status_code == 201, resp.text
    access = resp.json()["data"]
    assert access["url"].startswith("http://127.0.0.1:3000/portal/webhooks#token=whp_")
    token = access["url"].split("#token=", 1)[1]
    expires = clock.parse_iso(access["expires_at"]) - clock.now()
    assert timedelta(seconds=100) < expires <= timedelta(seconds=120)
    digest = hashlib.sha256(token.encode()).hexdigest()
    stored = get_store().get(repository.portal_key(digest))
    assert stored is not None and stored["organization_id"] == api.org_id and token not in json.dumps(stored)

    assert service.consume_portal_token(get_store(), token)["organization_id"] == api.org_id
    with pytest.raises(Unauthenticated):
        service.consume_portal_token(get_store(), token)  # single use
    assert api.post(f"{BASE}/portal-access").status_code == 201  # no body: the default lifetime
    Api.assert_error(api.post(f"{BASE}/portal-access", json={"expires_in": 5}), 400, "validation_failed")


# The connection itself ------------------------------------------------------------------------------------------------
def test_https_goes_to_the_checked_address_and_tls_is_verified_against_the_host_name(tmp_path, monkeypatch):
    """DNS is asked once per attempt; the request connects to that (checked) address, while TLS verification and
    the Host header use the URL's host name — so a second, different DNS answer can never be what gets called."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from switchboard.webhooks import delivery

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.example.test")])
    now = clock.now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.example.test")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    seen: list[tuple[str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append((self.headers["Host"], self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = server_tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    port = server.server_address[1]

    # The sender's own client settings, trusting this test's CA instead of the public ones.
    monkeypatch.setattr(netguard, "tls_context", lambda: ssl.create_default_context(cafile=str(tmp_path / "cert.pem")))
    netguard.reset_clients()
    try:
        good = netguard.parse(f"https://hooks.example.test:{port}/in?x=1", allow_local=False)
        result = delivery.post(good, "127.0.0.1", {"content-type": "application/json"}, b'{"a":1}')
        assert result.ok and result.status_code == 204, result
        assert seen == [(f"hooks.example.test:{port}", b'{"a":1}')]
        wrong = netguard.parse(f"https://other.example.test:{port}/in", allow_local=False)
        refused = delivery.post(wrong, "127.0.0.1", {}, b"{}")
        assert refused.status_code is None and "certificate" in (refused.error or "").lower()
        assert len(seen) == 1
    finally:
        netguard.reset_clients()
        server.shutdown()
        server.server_close()
        thread.join(5)


def _seed_succeeded(api: Api, endpoint_id: str, count: int) -> None:
    """`count` succeeded deliveries of the endpoint, newer than any before, written as fan-out and an attempt would."""
    from switchboard.webhooks.fanout import delivery_item

    store, base = repository.deliveries_store(), clock.now()
    for n in range(count):
        made = clock.iso(base + timedelta(seconds=n + 1))
        event = {"event_id": f"evt_ok_{n}", "event_type": "message.new"}
        item = delivery_item(api.org_id, endpoint_id, event, made, made)
        store.put(item | {"status": "succeeded"} | repository.status_index(item, "succeeded"))


def _page(api: Api, **params: Any) -> tuple[list[str], str | None]:
    resp = api.get(f"{BASE}/deliveries", params=params)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    return [d["id"] for d in body["data"]], body["meta"].get("cursor") if body["meta"]["has_more"] else None


def test_a_status_filter_reads_only_that_status_with_a_cursor_and_follows_status_changes(
    api, pipeline, receiver, fast_retries, monkeypatch
):
    first = create_endpoint(api, receiver.url("/first"))
    second = create_endpoint(api, receiver.url("/second"))
    receiver.default = Answer(500)
    events = [pipeline.emit("message.new", {"message_id": f"bad-{n}"}) for n in range(2)]
    pipeline.pump()
    failed = {repository.delivery_id(e, ep["id"]) for e in events for ep in (first, second)}
    assert {d["id"] for d in deliveries(api) if d["status"] == "exhausted"} == failed
    _seed_succeeded(api, first["id"], 60)  # the old failures sit below many newer successes
    _seed_succeeded(api, second["id"], 60)

    read = helpers.count_query_items(monkeypatch)
    page, cursor = _page(api, status="exhausted", limit=3)
    # one query per shard, reading only that status's deliveries (the 4 of them)
    assert len(page) == 3 and cursor is not None and sum(read) == 4 and len(read) == repository.shards()
    rest, end = _page(api, status="exhausted", limit=3, cursor=cursor)
    assert end is None and set(page) | set(rest) == failed and len(rest) == 1
    of_first = {repository.delivery_id(e, first["id"]) for e in events}
    read.clear()
    assert set(_page(api, status="exhausted", endpoint_id=first["id"])[0]) == of_first and sum(read) == 2
    assert _page(api, status="retrying")[0] == [] and _page(api, status="pending")[0] == []
    assert len(_page(api, status="succeeded", limit=100)[0]) == 100

    receiver.default = Answer(200)
    retried = sorted(of_first)[0]
    assert api.post(f"{BASE}/deliveries/{retried}/retry").status_code == 202
    assert _page(api, status="pending")[0] == [retried]
    assert set(_page(api, status="exhausted")[0]) == failed - {retried}
    pipeline.pump()
    assert _page(api, status="pending")[0] == []
    assert retried in _page(api, status="succeeded", endpoint_id=first["id"], limit=100)[0]

    since = clock.iso(clock.now() - timedelta(hours=1))
    assert api.post(f"{BASE}/endpoints/{second['id']}/recover", json={"since": since}).status_code == 202
    pipeline.pump()
    assert set(_page(api, status="exhausted")[0]) == of_first - {retried}
    assert _page(api, status="exhausted", endpoint_id=second["id"])[0] == []
    assert len(_page(api, status="succeeded", endpoint_id=second["id"], limit=100)[0]) == 62


def test_deliveries_written_in_the_single_table_are_moved_in_resumable_chunks(
    api, pipeline, receiver, fast_retries, monkeypatch
):
    """Deliveries of the layout before DeliveriesTable (single table, body inline, no status keys) are moved with
    their attempts and payloads; a moved pending one is requeued and delivered; rerunning a chunk changes nothing."""
    endpoint = create_endpoint(api, receiver.url("/old"))
    receiver.default = Answer(500)
    events = [pipeline.emit("message.new", {"message_id": f"old-{n}"}) for n in range(2)]
    pipeline.pump()
    _seed_succeeded(api, endpoint["id"], 5)
    receiver.default = Answer(200)
    pending_event = pipeline.emit("message.new", {"message_id": "old-pending"})
    pipeline.fan_out()
    for record in pipeline.receive("WebhookDeliveriesQueue"):  # its message is lost with the old layout
        pipeline.sqs.delete_message(
            QueueUrl=api.resources.queue_url("WebhookDeliveriesQueue"), ReceiptHandle=record["receiptHandle"]
        )
    store, dstore, org = get_store(), repository.deliveries_store(), api.org_id
    moved = [
        i for n in range(repository.shards()) for i in dstore.query_all(repository.deliveries_pk(org, n), index="GSI1")
    ]
    assert len(moved) == 8
    legacies: list[dict[str, Any]] = []
    for item in moved:  # as the single table held them
        msg_id = item["id"]
        bodies = repository.event_bodies(org, [item["event_id"]])
        legacy = {k: v for k, v in item.items() if not k.startswith("GSI")} | {
            **repository.legacy_delivery_key(org, msg_id),
            "GSI1PK": repository.legacy_deliveries_pk(org),
            "GSI1SK": item["GSI1SK"],
            "body": bodies.get(item["event_id"], "{}"),
        }
        store.put(legacy)
        legacies.append(legacy)
        for attempt in dstore.query_all(item["PK"], sk_prefix=repository.ATTEMPT_PREFIX):
            old_sk = repository.legacy_attempt_prefix(msg_id) + attempt["SK"].removeprefix(repository.ATTEMPT_PREFIX)
            store.put(attempt | {"PK": f"ORG#{org}", "SK": old_sk})
        dstore.batch_delete([{"PK": a["PK"], "SK": a["SK"]} for a in dstore.query_all(item["PK"])])
        dstore.batch_delete([repository.event_key(org, item["event_id"])])
    assert _page(api)[0] == []

    monkeypatch.setattr(service, "MOVE_PAGE", 3)
    cursor, chunks, total = None, 0, 0
    while True:
        cursor, count = service.move_legacy_deliveries_chunk(store, org, cursor)
        chunks += 1
        total += count
        if cursor is None:
            break
        if chunks == 1:  # a crash before the legacy items were deleted: the chunk runs again, moving nothing twice
            gone = [i for i in legacies if store.get({"PK": i["PK"], "SK": i["SK"]}) is None]
            assert len(gone) == 3
            for legacy in gone:
                store.put(legacy)
            assert service.move_legacy_deliveries_chunk(store, org, None)[1] == 0
            assert all(store.get({"PK": i["PK"], "SK": i["SK"]}) is None for i in gone)
    assert chunks == 3 and total == 8
    assert store.query_all(f"ORG#{org}", sk_prefix="DLV#") == []
    failed = {repository.delivery_id(e, endpoint["id"]) for e in events}
    assert set(_page(api, status="exhausted")[0]) == failed
    assert set(_page(api, status="exhausted", endpoint_id=endpoint["id"])[0]) == failed
    assert len(_page(api, status="succeeded")[0]) == 5
    one = sorted(failed)[0]
    listed = api.get(f"{BASE}/deliveries", params={"status": "exhausted"}).json()["data"]
    got = next(d for d in listed if d["id"] == one)
    assert got["payload"]["message_id"].startswith("old-") and got["attempt_count"] == 8
    assert len(api.get(f"{BASE}/deliveries/{one}/attempts", params={"limit": 100}).json()["data"]) == 8

    pending = repository.delivery_id(pending_event, endpoint["id"])
    assert _page(api, status="pending")[0] == [pending]
    pipeline.pump()
    assert _page(api, status="pending")[0] == [] and pending in _page(api, status="succeeded")[0]
    assert [r.path for r in receiver.requests if r.headers.get("webhook-id") == pending] == ["/old"]
