"""The in-process API for integration tests: moto as AWS, the resources built from template.yaml, and the local
gateway's ASGI app (routing, authorizer, gateway responses) driving the real handlers — no sockets, no subprocess."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import boto3
import httpx
from moto import mock_aws
from starlette.testclient import TestClient

from local.functions import FunctionPool, FunctionRegistry, serialize_resolvers
from local.gateway import Gateway
from local.iam import PolicyModel
from local.iam_recorder import CHECK
from local.iam_recorder import install as install_iam_check
from local.moto_server import patch_limits, patch_transactions, unpatch_limits, unpatch_transactions
from local.resources import Resources, create_resources
from local.ses import sent_mail, verify_sender
from local.template import LocalTemplate, load_template
from switchboard import aws
from switchboard.config import reset_settings
from switchboard.identity.bootstrap import Bootstrapped, bootstrap_organization
from switchboard.store import get_store

PASSWORD = "correct horse battery"


class _SetupClients:
    """The boto3 clients `create_resources` builds each test's tables, queues and bus with, made once per test
    process: creating a client costs more than the whole moto setup, and moto intercepts a client's requests while a
    mock is active whenever the client was made. Only the setup uses them; the code under test makes its own."""

    def __init__(self) -> None:
        self._session: boto3.session.Session | None = None
        self._clients: dict[tuple[Any, ...], Any] = {}

    def client(self, service: str, **kwargs: Any) -> Any:
        key = (service, *sorted(kwargs.items()))
        if key not in self._clients:
            self._session = self._session or boto3.session.Session()
            self._clients[key] = self._session.client(service, **kwargs)  # type: ignore[call-overload]
        return self._clients[key]


_setup_clients = _SetupClients()


def serialize_dynamodb(monkeypatch: Any) -> None:
    """moto's DynamoDB is not thread-safe in-process: two conditional writes on one item from two threads can both
    pass their condition. The local stack serializes DynamoDB requests (local/moto_server.py), and so does the
    in-process emulator here, so that tests with concurrent writers see DynamoDB's one-winner behaviour."""
    import threading

    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with lock:
            return original(self)

    monkeypatch.setattr(DynamoHandler, "call_action", call_action)


@contextmanager
def moto_resources(monkeypatch: Any) -> Iterator[tuple[LocalTemplate, Resources]]:
    """moto in-process with every resource of template.yaml; the functions' environment set as in AWS; every AWS call
    a function makes checked against its IAM grants with these resources' ARNs (tests/iam_check.py)."""
    with mock_aws():
        patch_transactions()
        patch_limits()
        serialize_dynamodb(monkeypatch)
        try:
            install_iam_check()
            template = load_template(stage="local")
            resources = create_resources(template, prefix="switchboard-it", session=_setup_clients)
            verify_sender(template, session=_setup_clients)  # as the operator verifies MailSender in SES
            for name, value in resources.function_env(template.function("SystemFunction")).items():
                monkeypatch.setenv(name, value)
            monkeypatch.setenv("PUBLIC_BASE_URL", "https://switchboard.test")  # the stack parameter of a deployment
            reset_settings()
            aws.reset_clients()
            checked = os.environ.get("IAM_CHECK") != "off"
            with CHECK.checking(PolicyModel.build(template, resources) if checked else None):
                yield template, resources
        finally:
            unpatch_transactions()
            unpatch_limits()
            reset_settings()
            aws.reset_clients()


class Api:
    """httpx-like calls against the gateway. Without `headers`, the bootstrap owner's API key is sent."""

    def __init__(
        self,
        client: TestClient,
        boot: Bootstrapped,
        template: LocalTemplate,
        resources: Resources,
        relay: MailRelay | None = None,
    ):
        self.client = client
        self.boot = boot
        self.template = template
        self.resources = resources
        self.relay = relay or MailRelay(resources)

    @property
    def owner_key(self) -> str:
        return self.boot.api_key

    @property
    def owner_headers(self) -> dict[str, str]:
        return {"X-Api-Key": self.boot.api_key}

    @property
    def org_id(self) -> str:
        return self.boot.organization_id

    def request(self, method: str, path: str, *, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        return self.client.request(method, path, headers=self.owner_headers if headers is None else headers, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def pages(self, path: str, limit: int, **params: str) -> list[list[str]]:
        """The ids of every page of a cursor list, following `meta.cursor` until `has_more` is false (asserting
        that a cursor comes exactly with more to read)."""
        pages: list[list[str]] = []
        cursor = None
        while True:
            query = {"limit": str(limit), **params, **({"cursor": cursor} if cursor else {})}
            resp = self.get(path, params=query)
            assert resp.status_code == 200, resp.text
            body = resp.json()
            pages.append([c["id"] for c in body["data"]])
            cursor = body["meta"].get("cursor")
            if not body["meta"]["has_more"]:
                assert cursor is None
                return pages
            assert cursor

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", path, **kw)

    def patch(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", path, **kw)

    def mail(self, to: str) -> list[dict[str, Any]]:
        """What SES received for `to`, newest first, once every mail queued so far went the deployed way."""
        self.relay.run()
        return sent_mail(to)

    def register(self, email: str, password: str = PASSWORD, name: str | None = None) -> tuple[str, str]:
        """A verified, registered user (through the API); returns (email, user id)."""
        assert self.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
        body = {"email": email, "otp_code": latest_code(self, email), "password": password}
        if name:
            body["name"] = name
        resp = self.post("/v1/auth/register/verify", json=body)
        assert resp.status_code == 201, resp.text
        return email, resp.json()["data"]["id"]

    def login(self, email: str, password: str = PASSWORD) -> dict[str, str]:
        resp = self.post("/v1/auth/login", json={"email": email, "password": password})
        assert resp.status_code == 200, resp.text
        return {"Authorization": f"Bearer {resp.json()['data']['token']}"}

    def new_org(self, email: str, name: str = "Another Org") -> tuple[str, dict[str, str]]:
        """A registered user owning a fresh organization; returns (org id, session headers)."""
        self.register(email)
        session = self.login(email)
        resp = self.post("/v1/organizations", json={"name": name}, headers=session)
        assert resp.status_code == 201, resp.text
        return resp.json()["data"]["id"], session

    @staticmethod
    def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
        assert response.status_code == status, (response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert set(body) == {"error"}, body
        error = body["error"]
        assert error["code"] == code, error
        assert isinstance(error["message"], str) and error["message"]
        assert isinstance(error["details"], list)
        assert error["request_id"]
        return error  # type: ignore[no-any-return]


def latest_code(api: Api, email: str) -> str:
    rows = api.mail(email)
    assert rows and rows[0].get("otp_code"), f"no code was mailed to {email}"
    return str(rows[0]["otp_code"])


@contextmanager
def running_api(template: LocalTemplate, resources: Resources) -> Iterator[Api]:
    serialize_resolvers()
    pools = {
        spec.logical_id: FunctionPool(
            spec,
            root=template.root,
            size=1,
            function_name=resources.function_name(spec.logical_id),
            function_arn=resources.function_arn(spec.logical_id),
        )
        for spec in template.functions
    }
    executor = ThreadPoolExecutor(max_workers=8)
    relay = MailRelay(resources)

    def read_mail(to: str | None) -> list[dict[str, Any]]:
        relay.run()
        return sent_mail(to)

    gateway = Gateway(template, FunctionRegistry(pools), executor=executor, mail_reader=read_mail)
    boot = bootstrap_organization(
        get_store(),
        org_name="Local Organization",
        owner_email="owner@example.com",
        owner_password=PASSWORD,
        api_key=None,
        key_mode="test",
    )
    try:
        with TestClient(gateway, base_url="http://127.0.0.1:3000", raise_server_exceptions=True) as client:
            yield Api(client, boot, template, resources, relay)
    finally:
        executor.shutdown(wait=True)


class MailRelay:
    """Plays, when asked, what a deployed stack does with the mails requests queue (switchboard.mail): the `mail.send`
    outbox events not handed over yet → stream records → the real event_publisher → moto's EventBridge (MailRule) →
    MailQueue → the real MailFunction → moto's SES v2. Nothing else of the outbox is published."""

    def __init__(self, resources: Resources) -> None:
        self.resources = resources
        self.relayed: set[str] = set()
        self._seq = 10**9
        self._lock = threading.Lock()

    def pending(self) -> list[dict[str, Any]]:
        from switchboard.events.outbox import stored_events
        from switchboard.mail import MAIL_EVENT, MAIL_ORG

        events = stored_events(get_store(), MAIL_ORG)
        return [e for e in events if e["event_type"] == MAIL_EVENT and e["event_id"] not in self.relayed]

    def publish(self) -> int:
        """Hand the new mail events to the real publisher (→ bus → MailRule → MailQueue); → how many."""
        from functions.event_publisher.app import handler
        from tests.helpers import FakeContext, stream_record

        records = []
        for item in self.pending():
            self._seq += 1
            records.append(stream_record(item, str(self._seq)))
        if records:
            assert handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}
            self.relayed.update(r["dynamodb"]["NewImage"]["event_id"]["S"] for r in records)
        return len(records)

    def receive(self) -> list[dict[str, Any]]:
        """The MailQueue messages visible now, as Lambda's SQS records."""
        import boto3

        from local.pollers import lambda_sqs_record

        sqs = boto3.client("sqs")
        url, arn = self.resources.queue_url("MailQueue"), self.resources.queue_arn("MailQueue")
        records: list[dict[str, Any]] = []
        while True:
            got = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            if not got:
                return records
            records += [lambda_sqs_record(m, arn) for m in got]

    def deliver(self, records: list[dict[str, Any]]) -> list[str]:
        """Run the real MailFunction on `records`; delete what it did not report failed (Lambda's part); → the ids of
        the failed ones (they come back after the queue's visibility timeout)."""
        import boto3

        from functions.mail.app import handler
        from tests.helpers import FakeContext

        if not records:
            return []
        result = handler({"Records": records}, FakeContext())
        failed = [f["itemIdentifier"] for f in result["batchItemFailures"]]
        sqs = boto3.client("sqs")
        for record in records:
            if record["messageId"] not in failed:
                sqs.delete_message(
                    QueueUrl=self.resources.queue_url("MailQueue"), ReceiptHandle=record["receiptHandle"]
                )
        return failed

    def run(self) -> list[str]:
        with self._lock:
            self.publish()
            return self.deliver(self.receive())


def invitation_token(api: Api, email: str) -> str:
    """The token of the newest invitation link e-mailed to `email`."""
    import re

    for row in api.mail(email):
        match = re.search(r"/accept[#?&]token=([A-Za-z0-9_-]+)", row["text"])
        if match:
            return match.group(1)
    raise AssertionError(f"no invitation link was mailed to {email}")


class JobsQueue:
    """Plays Lambda's part for JobsQueue (switchboard.jobs): receive, invoke the real JobsFunction handler, delete
    what it did not report as failed."""

    def __init__(self, api: Api) -> None:
        import boto3

        self.api = api
        self.sqs = boto3.client("sqs")
        self.url = api.resources.queue_url("JobsQueue")

    def receive(self) -> list[dict[str, Any]]:
        from local.pollers import lambda_sqs_record

        got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, AttributeNames=["All"])
        arn = self.api.resources.queue_arn("JobsQueue")
        return [lambda_sqs_record(m, arn) for m in got.get("Messages") or []]

    def run(self, records: list[dict[str, Any]], *, delete: bool = True) -> dict[str, Any]:
        from functions.jobs.app import handler as jobs_handler
        from tests.helpers import FakeContext

        result: dict[str, Any] = jobs_handler({"Records": records}, FakeContext())
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for record in records:
            if delete and record["messageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=record["receiptHandle"])
        return result

    def step(self) -> int:
        """Runs the messages waiting now (one chunk of each running job); → how many."""
        records = self.receive()
        if records:
            assert self.run(records) == {"batchItemFailures": []}
        return len(records)

    def drain(self, limit: int = 1000) -> int:
        """Runs chunks until the queue is empty; → the number of receives that found messages."""
        for n in range(limit):
            if not self.step():
                return n
        raise AssertionError("the jobs did not finish")


def run_jobs(api: Api) -> int:
    """Runs every queued background job to its end (segment builds, cascades, …) through the real consumer."""
    return JobsQueue(api).drain()
