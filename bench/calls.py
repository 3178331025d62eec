"""AWS calls per operation for the main routes, with the minimum the route's rules need beside it.

Every route runs through the in-process gateway (moto as AWS, the authorizer and the function as on AWS, tests'
`running_api`); botocore's `_make_api_call` is counted while one request is served, split between the authorizer and
the route's function. Counts, not times: moto's speed does not matter here. A row over its minimum is `OVER`, and
`--check` fails. Run: `python -m bench.calls`.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

AUTHORIZER = "AuthorizerFunction"
# An API key: one GetItem of the key by its hash (the key item carries the organization and role).
AUTHORIZER_MINIMUM = {"dynamodb.GetItem": 1}
RATE = "dynamodb.UpdateItem"  # the organization's and credential's rate limit: one UpdateItem on every request


@dataclass(frozen=True)
class Operation:
    name: str
    method: str
    path: str
    status: int
    minimum: dict[str, int]
    why: str
    body: Any = None


def _operations(ids: dict[str, str]) -> list[Operation]:
    contact, channel, message, conversation = ids["contact"], ids["channel"], ids["message"], ids["conversation"]
    return [
        Operation(
            "read the organization",
            "GET",
            "/v1/organization",
            200,
            {RATE: 1, "dynamodb.GetItem": 1},
            "rate limit; the organization",
        ),
        Operation(
            "create a contact",
            "POST",
            "/v1/contacts",
            201,
            {RATE: 1, "dynamodb.BatchGetItem": 1, "dynamodb.TransactWriteItems": 1},
            "rate limit; identity sentinels (owned?); contact + sentinels + name index + counter + event",
            {"name": "Grace Hopper", "phone": "+1 415 555 0199", "email": "grace@example.com"},
        ),
        Operation(
            "read a contact",
            "GET",
            f"/v1/contacts/{contact}",
            200,
            {RATE: 1, "dynamodb.GetItem": 1},
            "rate limit; the contact",
        ),
        Operation(
            "update a contact",
            "PATCH",
            f"/v1/contacts/{contact}",
            200,
            {RATE: 1, "dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1},
            "rate limit; the contact (version, changes); versioned put + event",
            {"company": "Analytical Engines"},
        ),
        Operation(
            "list contacts",
            "GET",
            "/v1/contacts?limit=20",
            200,
            {RATE: 1, "dynamodb.Query": 16 + 1},
            "rate limit; one page of the contacts index: one Query per write shard (16) and the legacy one",
        ),
        Operation(
            "resolve a contact",
            "POST",
            "/v1/contacts/resolve",
            200,
            {RATE: 1, "dynamodb.BatchGetItem": 1, "dynamodb.GetItem": 1},
            "rate limit; the identifiers' sentinels; their owner",
            {"identifiers": [{"type": "phone", "value": "+1 415 555 2671"}]},
        ),
        Operation(
            "send a message (known contact)",
            "POST",
            "/v1/messages",
            202,
            {RATE: 2, "dynamodb.GetItem": 3, "dynamodb.BatchGetItem": 2, "dynamodb.TransactWriteItems": 1},
            "rate limits (organization, sends); channel; sentinel; contact; conversation key + suppression + consent; "
            "conversation; message + conversation + status + event (SQS: none, the outbox queues it)",
            {"channel_id": channel, "to": "+1 415 555 2671", "type": "text", "text": {"body": "hello"}},
        ),
        Operation(
            "read a message",
            "GET",
            f"/v1/messages/{message}",
            200,
            {RATE: 1, "dynamodb.GetItem": 1},
            "rate limit; the message",
        ),
        Operation(
            "list a conversation's messages",
            "GET",
            f"/v1/conversations/{conversation}/messages?limit=20",
            200,
            {RATE: 1, "dynamodb.GetItem": 1, "dynamodb.Query": 1},
            "rate limit; the conversation (404 and tenancy); one page of its messages",
        ),
        Operation(
            "list conversations",
            "GET",
            "/v1/conversations?limit=20",
            200,
            {RATE: 1, "dynamodb.Query": 16 + 1},
            "rate limit; one page of the conversations index: one Query per write shard (16) and the legacy one",
        ),
    ]


class _Recorder:
    """botocore calls by (function being served, service.operation), while `recording`."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.recording = False

    def hit(self, service: str, operation: str) -> None:
        if self.recording:
            with self.lock:
                self.calls[(getattr(self.local, "function", "outside"), f"{service}.{operation}")] += 1


@contextmanager
def _recording(recorder: _Recorder) -> Iterator[None]:
    """Every AWS call of a client made while recording is counted, through botocore's `before-call` event; the
    functions' cached clients are dropped on entry and exit, so theirs are made (and counted) anew."""
    from botocore.session import Session

    from local.functions import FunctionPool
    from switchboard import aws

    create_client: Callable[..., Any] = Session.create_client
    invoke: Callable[..., Any] = FunctionPool.invoke

    def counted_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = create_client(self, *args, **kwargs)
        service = client.meta.service_model.service_name

        def count(model: Any, **_: Any) -> None:
            recorder.hit(service, model.name)

        client.meta.events.register("before-call", count)
        return client

    def attributed_invoke(self: Any, event: dict[str, Any], context: Any = None, **kwargs: Any) -> Any:
        previous = getattr(recorder.local, "function", None)
        recorder.local.function = self.spec.logical_id
        try:
            return invoke(self, event, context, **kwargs)
        finally:
            recorder.local.function = previous

    Session.create_client = counted_client  # type: ignore[method-assign]
    FunctionPool.invoke = attributed_invoke  # type: ignore[method-assign]
    aws.reset_clients()
    try:
        yield
    finally:
        Session.create_client = create_client  # type: ignore[method-assign]
        FunctionPool.invoke = invoke  # type: ignore[method-assign]
        aws.reset_clients()


def run() -> list[dict[str, Any]]:
    import os

    import pytest

    import tests.conftest  # noqa: F401 - the tests' fake AWS environment (region, credentials), set on import

    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"  # EMF lines are stdout only: no AWS call either way
    from tests.integration.support import moto_resources, running_api

    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        moto_resources(monkeypatch) as (template, resources),
        running_api(template, resources) as api,
    ):
        return measure(api)


def measure(api: Any) -> list[dict[str, Any]]:
    """Each operation's calls through `api` (tests.integration.support.Api), after creating what they read."""
    recorder = _Recorder()
    rows = []
    with _recording(recorder):
        ids = _setup(api)
        for op in _operations(ids):
            api.get("/v1/organization")  # warm: the first request of a function pays its imports
            recorder.calls.clear()
            recorder.recording = True
            response = api.request(op.method, op.path, json=op.body)
            recorder.recording = False
            assert response.status_code == op.status, (op.name, response.status_code, response.text)
            route = {k: v for (fn, k), v in recorder.calls.items() if fn != AUTHORIZER}
            authorizer = {k: v for (fn, k), v in recorder.calls.items() if fn == AUTHORIZER}
            rows.append(
                {
                    "operation": op,
                    "route": dict(sorted(route.items())),
                    "authorizer": dict(sorted(authorizer.items())),
                    "at_minimum": route == op.minimum and authorizer == AUTHORIZER_MINIMUM,
                }
            )
    return rows


def _setup(api: Any) -> dict[str, str]:
    contact = api.post("/v1/contacts", json={"name": "Ada Lovelace", "phone": "+1 415 555 2671"})
    assert contact.status_code == 201, contact.text
    channel = api.post(
        "/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {"api_token": "long-secret-value-1234"}}
    )
    assert channel.status_code == 201, channel.text
    channel_id = channel.json()["data"]["id"]
    assert api.post(f"/v1/channels/{channel_id}/connect").status_code == 200
    body = {"channel_id": channel_id, "to": "+1 415 555 2671", "type": "text", "text": {"body": "first"}}
    sent = api.post("/v1/messages", json=body)
    assert sent.status_code == 202, sent.text
    conversations = api.get("/v1/conversations?limit=1").json()["data"]
    return {
        "contact": contact.json()["data"]["id"],
        "channel": channel_id,
        "message": sent.json()["data"]["id"],
        "conversation": conversations[0]["id"],
    }


def _fmt(calls: dict[str, int]) -> str:
    return ", ".join(f"{name.split('.', 1)[1]} {n}" for name, n in calls.items()) or "none"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.calls")
    parser.add_argument("--check", action="store_true")
    args, _ = parser.parse_known_args(argv)
    rows = run()
    print("AWS calls per operation (function; the authorizer's API-key lookup is listed apart), against the minimum")
    print(f"  authorizer, every authenticated request: minimum {_fmt(AUTHORIZER_MINIMUM)}")
    for row in rows:
        op = row["operation"]
        verdict = "at minimum" if row["at_minimum"] else "OVER"
        print(f"  {op.name:32s} {op.method:5s} {_fmt(row['route']):58s} {verdict}")
        if not row["at_minimum"]:
            print(f"        minimum {_fmt(op.minimum)}; authorizer {_fmt(row['authorizer'])}")
        print(f"        ({op.why})")
    over = [r for r in rows if not r["at_minimum"]]
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
