"""The deploy guard (functions/deploy_guard): a stack update that lowers a grow-only shard count fails before any
function sees it, a rollback is never refused and never lowers a count, and every function's count is the guard's
answer. The guard's `DescribeStacks` runs against a real stack in moto, put in the status each test needs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.cloudformation.models import cloudformation_backends

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
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response?signature=x", answers
    server.shutdown()


class Stack:
    """The guard's stack in moto: DescribeStacks reports the status and the outputs (counts in use) given here."""

    def __init__(self) -> None:
        self.client = boto3.client("cloudformation", region_name="eu-west-1")
        self.id = self.client.create_stack(StackName="switchboard-prod", TemplateBody=self._body({}))["StackId"]
        self.set("UPDATE_IN_PROGRESS")

    @staticmethod
    def _body(in_use: dict[str, int]) -> str:
        outputs = {guard.IN_USE_OUTPUTS[name]: {"Value": str(count)} for name, count in in_use.items()}
        return json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": outputs})

    def set(self, status: str, **in_use: int) -> None:
        if in_use:
            self.client.update_stack(StackName=self.id, TemplateBody=self._body(in_use))
        cloudformation_backends["123456789012"]["eu-west-1"].stacks[self.id].status = status  # moto's own record


@pytest.fixture
def stack(monkeypatch) -> Iterator[Stack]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # the unit tests' dead endpoint: moto answers instead
    with mock_aws():
        yield Stack()


@pytest.fixture
def stack_id(stack: Stack) -> str:
    return stack.id


def event(
    url: str, kind: str, new: dict[str, Any] | None, old: dict[str, Any] | None = None, *, stack_id: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "RequestType": kind,
        "ResponseURL": url,
        "StackId": stack_id or "arn:aws:cloudformation:eu-west-1:123456789012:stack/switchboard-prod/1",
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


def test_an_update_that_grows_keeps_the_resource(cloudformation, stack_id):
    url, answers = cloudformation
    old = {"TenantShards": "16", "WebhookDeliveryShards": "16"}
    guard.handler(
        event(url, "Update", {"TenantShards": "32", "WebhookDeliveryShards": "16"}, old, stack_id=stack_id), None
    )
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
def test_a_lowering_or_invalid_count_fails_the_update(cloudformation, stack_id, new, old, words):
    url, answers = cloudformation
    guard.handler(event(url, "Update" if old else "Create", new, old, stack_id=stack_id), None)
    [answer] = answers
    assert answer["Status"] == "FAILED"
    assert words in answer["Reason"]
    assert answer["Data"] == {}


def test_the_rollback_of_a_refused_update_is_accepted(cloudformation, stack):
    """CloudFormation rolls back by updating to the earlier properties, the refused ones as the old: that grows."""
    url, answers = cloudformation
    stack.set("UPDATE_ROLLBACK_IN_PROGRESS", TenantShards=16, WebhookDeliveryShards=16)
    refused = {"TenantShards": "8", "WebhookDeliveryShards": "16"}
    new = {"TenantShards": "16", "WebhookDeliveryShards": "16"}
    guard.handler(event(url, "Update", new, refused, stack_id=stack.id), None)
    assert answers[0]["Status"] == "SUCCESS"
    assert answers[0]["Data"] == {"TenantShards": "16", "WebhookDeliveryShards": "16"}


def test_the_rollback_of_a_raise_succeeds_and_keeps_the_raised_count(cloudformation, stack):
    """TenantShards went 16 → 32, a later resource of the same update failed, CloudFormation rolls back: its Update
    carries 16 as the properties and 32 as the old ones. The guard must answer SUCCESS (a FAILED answer leaves the
    stack in UPDATE_ROLLBACK_FAILED) and keep 32: the functions may have written in shards 16..31 meanwhile."""
    url, answers = cloudformation
    stack.set("UPDATE_ROLLBACK_IN_PROGRESS")
    raised = {"TenantShards": "32", "WebhookDeliveryShards": "32"}
    previous = {"TenantShards": "16", "WebhookDeliveryShards": "16"}
    guard.handler(event(url, "Update", previous, raised, stack_id=stack.id), None)
    [answer] = answers
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Data"] == {"TenantShards": "32", "WebhookDeliveryShards": "32"}
    assert "rollback" in answer["Reason"]
    assert answer["PhysicalResourceId"] == "GrowOnlyParameters-first"


def test_the_same_lowering_outside_a_rollback_is_refused(cloudformation, stack):
    url, answers = cloudformation
    stack.set("UPDATE_IN_PROGRESS")
    guard.handler(
        event(
            url,
            "Update",
            {"TenantShards": "16", "WebhookDeliveryShards": "16"},
            {"TenantShards": "32", "WebhookDeliveryShards": "16"},
            stack_id=stack.id,
        ),
        None,
    )
    [answer] = answers
    assert answer["Status"] == "FAILED"
    assert "TenantShards may only grow" in answer["Reason"]


def test_after_a_rolled_back_raise_no_update_goes_below_the_count_in_use(cloudformation, stack):
    """The rollback kept 32 while the parameter is 16 again. A later update that changes only WebhookDeliveryShards
    carries TenantShards 16 as both old and new: the functions read 32 (the stack's output), so it is refused, with
    the count to deploy with."""
    url, answers = cloudformation
    stack.set("UPDATE_IN_PROGRESS", TenantShards=32, WebhookDeliveryShards=16)
    old = {"TenantShards": "16", "WebhookDeliveryShards": "16"}
    guard.handler(
        event(url, "Update", {"TenantShards": "16", "WebhookDeliveryShards": "32"}, old, stack_id=stack.id), None
    )
    guard.handler(
        event(url, "Update", {"TenantShards": "32", "WebhookDeliveryShards": "32"}, old, stack_id=stack.id), None
    )
    refused, accepted = answers
    assert refused["Status"] == "FAILED"
    assert "the functions read 32" in refused["Reason"] and "TenantShards=32" in refused["Reason"]
    assert accepted["Status"] == "SUCCESS"
    assert accepted["Data"] == {"TenantShards": "32", "WebhookDeliveryShards": "32"}


def test_an_unreadable_stack_status_never_fails_an_update_nor_lowers_a_count(cloudformation):
    """No stack to describe (the unit tests' AWS endpoint refuses every call): the update may be a rollback, so the
    guard answers SUCCESS with the higher counts."""
    url, answers = cloudformation
    raised = {"TenantShards": "64", "WebhookDeliveryShards": "16"}
    guard.handler(event(url, "Update", {"TenantShards": "16", "WebhookDeliveryShards": "20"}, raised), None)
    [answer] = answers
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"] == {"TenantShards": "64", "WebhookDeliveryShards": "20"}


def test_the_stack_state_is_read_from_describe_stacks(stack):
    stack.set("UPDATE_ROLLBACK_IN_PROGRESS", TenantShards=32, WebhookDeliveryShards=16)
    state = guard.stack_state(stack.id)
    assert state == guard.StackState("UPDATE_ROLLBACK_IN_PROGRESS", {"TenantShards": 32, "WebhookDeliveryShards": 16})
    assert state.rolling_back
    assert not guard.StackState("UPDATE_IN_PROGRESS").rolling_back


def test_delete_always_succeeds(cloudformation):
    url, answers = cloudformation
    guard.handler(event(url, "Delete", {"TenantShards": "16", "WebhookDeliveryShards": "16"}), None)
    assert answers[0]["Status"] == "SUCCESS"


def test_an_unexpected_error_still_answers(cloudformation, stack_id):
    url, answers = cloudformation
    broken = event(url, "Update", None, {"TenantShards": "16"}, stack_id=stack_id)
    broken["ResourceProperties"] = ["not", "an", "object"]
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
    for name, output in guard.IN_USE_OUTPUTS.items():  # what the guard reads back as the counts in use
        assert raw["Outputs"][output]["Value"] == {"Fn::GetAtt": ["GrowOnlyParameters", name]}
    role = raw["Resources"]["DeployGuardRole"]["Properties"]
    [statement] = role["Policies"][0]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "cloudformation:DescribeStacks"
    assert statement["Resource"] == {"Ref": "AWS::StackId"}


def test_the_sample_event_is_a_refused_lowering():
    """events/cloudformation_grow_only_update.json (for `sam local invoke DeployGuardFunction`) lowers TenantShards."""
    sample = json.loads((ROOT / "events" / "cloudformation_grow_only_update.json").read_text())
    with pytest.raises(guard.Refused, match="TenantShards may only grow"):
        guard.decide(sample, guard.StackState("UPDATE_IN_PROGRESS"))
