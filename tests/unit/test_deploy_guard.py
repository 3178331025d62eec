"""The deploy guard (functions/deploy_guard): a stack update that lowers a grow-only shard count fails before any
function sees it, and every function's count is the guard's answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from functions.deploy_guard import app as guard
from local.template import parse_yaml

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture
def cloudformation() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A stand-in for the presigned S3 URL CloudFormation waits on: it records every PUT body."""
    answers: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            answers.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response?signature=x", answers
    server.shutdown()


def event(url: str, kind: str, new: dict[str, Any] | None, old: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "RequestType": kind,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/switchboard-prod/1",
        "RequestId": "req-1",
        "LogicalResourceId": "GrowOnlyParameters",
        "ResourceType": "Custom::GrowOnlyParameters",
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:fn", **(new or {})},
    }
    if kind != "Create":
        out["PhysicalResourceId"] = "GrowOnlyParameters-first"
    if old is not None:
        out["OldResourceProperties"] = {"ServiceToken": "arn:aws:lambda:fn", **old}
    return out


def test_create_accepts_and_answers_the_counts(cloudformation):
    url, answers = cloudformation
    guard.handler(event(url, "Create", {"TenantShards": "16", "WebhookDeliveryShards": "12"}), None)
    [answer] = answers
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"] == {"TenantShards": "16", "WebhookDeliveryShards": "12"}
    assert answer["PhysicalResourceId"] == "GrowOnlyParameters-req-1"
    assert answer["RequestId"] == "req-1" and answer["LogicalResourceId"] == "GrowOnlyParameters"


def test_an_update_that_grows_keeps_the_resource(cloudformation):
    url, answers = cloudformation
    old = {"TenantShards": "16", "WebhookDeliveryShards": "16"}
    guard.handler(event(url, "Update", {"TenantShards": "32", "WebhookDeliveryShards": "16"}, old), None)
    [answer] = answers
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"]["TenantShards"] == "32"
    assert answer["PhysicalResourceId"] == "GrowOnlyParameters-first"  # same id: not a replacement


@pytest.mark.parametrize(
    ("new", "old", "words"),
    [
        (
            {"TenantShards": "8", "WebhookDeliveryShards": "16"},
            {"TenantShards": "16", "WebhookDeliveryShards": "16"},
            "TenantShards may only grow",
        ),
        (
            {"TenantShards": "16", "WebhookDeliveryShards": "4"},
            {"TenantShards": "16", "WebhookDeliveryShards": "16"},
            "WebhookDeliveryShards may only grow",
        ),
        (
            {"TenantShards": "24", "WebhookDeliveryShards": "16"},
            {"TenantShards": "16", "WebhookDeliveryShards": "16"},
            "power of two",
        ),
        ({"TenantShards": "0", "WebhookDeliveryShards": "16"}, None, "at least 1"),
        ({"WebhookDeliveryShards": "16"}, None, "TenantShards must be given"),
    ],
)
def test_a_lowering_or_invalid_count_fails_the_update(cloudformation, new, old, words):
    url, answers = cloudformation
    guard.handler(event(url, "Update" if old else "Create", new, old), None)
    [answer] = answers
    assert answer["Status"] == "FAILED"
    assert words in answer["Reason"]
    assert answer["Data"] == {}


def test_the_rollback_of_a_refused_update_is_accepted(cloudformation):
    """CloudFormation rolls back by updating to the earlier properties, the refused ones as the old: that grows."""
    url, answers = cloudformation
    refused = {"TenantShards": "8", "WebhookDeliveryShards": "16"}
    guard.handler(event(url, "Update", {"TenantShards": "16", "WebhookDeliveryShards": "16"}, refused), None)
    assert answers[0]["Status"] == "SUCCESS"


def test_delete_always_succeeds(cloudformation):
    url, answers = cloudformation
    guard.handler(event(url, "Delete", {"TenantShards": "16", "WebhookDeliveryShards": "16"}), None)
    assert answers[0]["Status"] == "SUCCESS"


def test_an_unexpected_error_still_answers(cloudformation):
    url, answers = cloudformation
    broken = event(url, "Update", {"TenantShards": "16", "WebhookDeliveryShards": "16"}, {"TenantShards": "x"})
    guard.handler(broken, None)
    assert answers[0]["Status"] == "FAILED"
    assert "deploy guard error" in answers[0]["Reason"]


def test_every_function_reads_the_counts_the_guard_answers():
    raw = parse_yaml((ROOT / "template.yaml").read_text())
    env = raw["Globals"]["Function"]["Environment"]["Variables"]
    assert env["TENANT_SHARDS"] == {"Fn::GetAtt": ["GrowOnlyParameters", "TenantShards"]}
    assert env["WEBHOOK_DELIVERY_SHARDS"] == {"Fn::GetAtt": ["GrowOnlyParameters", "WebhookDeliveryShards"]}
    props = raw["Resources"]["GrowOnlyParameters"]["Properties"]
    assert props["TenantShards"] == {"Ref": "TenantShards"}
    assert props["WebhookDeliveryShards"] == {"Ref": "WebhookDeliveryShards"}
    assert props["ServiceToken"] == {"Fn::GetAtt": ["DeployGuardFunction", "Arn"]}
    function = raw["Resources"]["DeployGuardFunction"]
    assert function["Type"] == "AWS::Lambda::Function"  # no Globals: no layer, no environment from its own answer
    assert function["Properties"]["Code"] == "functions/deploy_guard/"
    assert set(guard.GROW_ONLY) == {"TenantShards", "WebhookDeliveryShards"}


def test_the_sample_event_is_a_refused_lowering():
    """events/cloudformation_grow_only_update.json (for `sam local invoke DeployGuardFunction`) lowers TenantShards."""
    sample = json.loads((ROOT / "events" / "cloudformation_grow_only_update.json").read_text())
    with pytest.raises(guard.Refused, match="TenantShards may only grow"):
        guard.decide(sample)
