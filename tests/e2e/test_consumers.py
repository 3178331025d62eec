"""The local stack's queue consumers, end to end and in-process: the project's template plus one probe function
subscribed to WebhookEventsQueue (as webhook_fanout will be). An outbox item must reach the probe through
stream → event_publisher → bus → rule → queue → SQS poller, and the consumed message must leave the queue."""

from __future__ import annotations

import textwrap
import time
import uuid
from pathlib import Path

import boto3
import pytest
import yaml

from local.stack import LocalStack
from local.template import parse_yaml
from tests.e2e import recorder

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
from tests.e2e import recorder

def handler(event, context):
    failures = []
    for record in event["Records"]:
        body = json.loads(record["body"])
        recorder.record("probe", body)
        if body["detail"]["data"].get("fail"):
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
"""


@pytest.fixture(scope="module")
def consumer_stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("stack-with-probe")
    (root / "functions").symlink_to(ROOT / "functions", target_is_directory=True)
    (root / "probe").mkdir()
    (root / "probe" / "app.py").write_text(textwrap.dedent(PROBE))
    template = parse_yaml((ROOT / "template.yaml").read_text())
    # The probe is the queue's only consumer here: the project's own consumer (webhook fan-out) is switched off.
    for resource in template["Resources"].values():
        for event in ((resource.get("Properties") or {}).get("Events") or {}).values():
            if event.get("Type") == "SQS" and event["Properties"].get("Queue") == {
                "Fn::GetAtt": ["WebhookEventsQueue", "Arn"]
            }:
                event["Properties"]["Enabled"] = False
    template["Resources"]["ProbeFunction"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            "CodeUri": "probe/",
            "Handler": "app.handler",
            "Events": {
                "Queue": {
                    "Type": "SQS",
                    "Properties": {
                        "Queue": {"Fn::GetAtt": ["WebhookEventsQueue", "Arn"]},
                        "BatchSize": 5,
                        "FunctionResponseTypes": ["ReportBatchItemFailures"],
                    },
                }
            },
        },
    }
    (root / "template.yaml").write_text(yaml.safe_dump(template, sort_keys=False))
    recorder.reset()
    stack = LocalStack(template_path=root / "template.yaml", http=False, prefix=f"sb-consumers-{uuid.uuid4().hex[:6]}")
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def test_a_subscribed_function_consumes_the_events_of_its_queue(consumer_stack):
    from switchboard.events.outbox import outbox_put
    from switchboard.store import get_store

    org = consumer_stack.info.organization_id
    get_store().transact([outbox_put(org, "contact.created", {"contact_id": "ct_9"})])

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not recorder.of("probe"):
        time.sleep(0.05)
    (event,) = recorder.of("probe")
    assert event["detail-type"] == "contact.created"
    assert event["detail"]["data"] == {"contact_id": "ct_9"}

    sqs = boto3.client("sqs")
    url = consumer_stack.resources.queue_url("WebhookEventsQueue")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        if attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}:
            break
        time.sleep(0.05)
    assert attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}


def test_a_reported_failure_stays_on_the_queue(consumer_stack):
    from switchboard.events.outbox import outbox_put
    from switchboard.store import get_store

    recorder.reset()
    org = consumer_stack.info.organization_id
    get_store().transact([outbox_put(org, "contact.updated", {"contact_id": "ct_10", "fail": True})])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not recorder.of("probe"):
        time.sleep(0.05)
    assert [e["detail"]["data"]["contact_id"] for e in recorder.of("probe")] == ["ct_10"]

    sqs = boto3.client("sqs")
    url = consumer_stack.resources.queue_url("WebhookEventsQueue")
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"  # back after its 180 s timeout
