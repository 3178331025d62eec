"""Metrics as CloudWatch Embedded Metric Format: what the functions print at the end of each invocation is valid EMF
(namespace, dimension sets, every named metric present as a value), in total and per organization, and the metric
names are the ones template.yaml's dashboard and alarms read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from functions.message_sender.app import handler as sender_handler
from switchboard import metrics
from tests.faults.pipeline import Pipeline
from tests.helpers import FakeContext
from tests.integration.support import Api

ROOT = Path(__file__).resolve().parents[2]


def emf_lines(text: str) -> list[dict[str, Any]]:
    """Every EMF document in captured output, checked against the EMF specification's required structure."""
    docs = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        doc = json.loads(line)
        meta = doc["_aws"]
        assert isinstance(meta["Timestamp"], int)
        for directive in meta["CloudWatchMetrics"]:
            assert directive["Namespace"].startswith("Switchboard/")  # Switchboard/<stage>
            for dimension_set in directive["Dimensions"]:
                assert all(isinstance(doc[d], str) and doc[d] for d in dimension_set), (dimension_set, doc)
            for metric in directive["Metrics"]:
                assert metric["Name"] in doc and metric["Unit"] == "Count"
        docs.append(doc)
    return docs


def totals(docs: list[dict[str, Any]], organization: str | None = None) -> dict[str, float]:
    """Sum of each metric over the documents of one dimension set (service only, or service + organization)."""
    out: dict[str, float] = {}
    for doc in docs:
        if doc.get("organization") != organization:
            continue
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = doc[metric["Name"]]
                out[metric["Name"]] = out.get(metric["Name"], 0) + (sum(value) if isinstance(value, list) else value)
    return out


@pytest.fixture(autouse=True)
def _clean_metrics() -> None:
    metrics.flush()  # nothing left over from another test


def test_api_requests_and_errors_are_counted_per_invocation_and_per_organization(api: Api, capsys):
    capsys.readouterr()
    assert api.post("/v1/contacts", json={"name": "Counted", "phone": "+1 415 555 0801"}).status_code == 201
    assert api.get("/v1/contacts/ct_nope").status_code == 404
    assert api.post("/v1/contacts", json={"name": 5}).status_code == 400
    assert api.get("/v1/health").status_code == 200
    docs = emf_lines(capsys.readouterr().out)
    overall, org = totals(docs), totals(docs, api.org_id)
    assert overall["ApiRequests"] == 4 and overall["ApiClientErrors"] == 2
    assert org["ApiRequests"] == 3 and org["ApiClientErrors"] == 2  # the health check has no organization
    assert "ApiServerErrors" not in overall
    assert metrics.pending() == {}, "every invocation flushes what it counted"


def test_sends_retries_and_dlq_moves_of_the_message_sender(api: Api, capsys, monkeypatch):
    channel = api.post("/v1/channels", json={"name": "m", "platform": "sandbox"}).json()["data"]
    api.post(f"/v1/channels/{channel['id']}/connect")
    for n in range(2):
        sent = api.post(
            "/v1/messages", json={"channel_id": channel["id"], "to": f"+1415555{2601 + n:04d}", "text": {"body": "x"}}
        )
        assert sent.status_code == 202, sent.text
    pipeline = Pipeline(api)
    pipeline.publish()
    records = [r for r in pipeline.receive("OutboundMessagesQueue") if '"message.queued"' in r["body"]]
    assert len(records) == 2
    # The second record fails on its 5th receive (the queue's maxReceiveCount): SQS moves it to the DLQ.
    from switchboard.messaging import messages

    victim = json.loads(records[1]["body"])["detail"]["data"]["message_id"]
    real_deliver = messages.deliver

    def deliver(store, org, message_id):
        if message_id == victim:
            raise RuntimeError("provider exploded")
        return real_deliver(store, org, message_id)

    monkeypatch.setattr(messages, "deliver", deliver)
    records[1]["attributes"]["ApproximateReceiveCount"] = "5"
    capsys.readouterr()
    result = sender_handler({"Records": records}, FakeContext())
    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [records[1]["messageId"]]
    docs = emf_lines(capsys.readouterr().out)
    overall, org = totals(docs), totals(docs, api.org_id)
    assert overall == {"MessagesSent": 1, "MessageSendRetries": 1, "DlqMoves": 1}
    assert org == {"MessagesSent": 1}


def test_event_publisher_counts_published_events(api: Api, capsys):
    assert api.post("/v1/contacts", json={"name": "Evented", "phone": "+1 415 555 0802"}).status_code == 201
    capsys.readouterr()
    published = Pipeline(api).publish()
    overall = totals(emf_lines(capsys.readouterr().out))
    assert overall["EventsPublished"] == len(published) >= 1 and "EventsFailed" not in overall


def test_dlq_move_limits_match_the_template_and_the_dashboard_names_exist():
    template = yaml.load((ROOT / "template.yaml").read_text(), Loader=_CfnLoader)
    resources = template["Resources"]
    for queue, limit in metrics.MAX_RECEIVES.items():
        assert resources[queue]["Properties"]["RedrivePolicy"]["maxReceiveCount"] == limit, queue
    names = set(re.findall(r"^\| `([A-Za-z`, ]+)` \|", metrics.__doc__ or "", flags=re.M))
    documented = {n.strip(" `") for group in names for n in group.split(",")}
    used = set()
    for resource in resources.values():
        if resource["Type"] == "AWS::CloudWatch::Alarm" and resource["Properties"].get("Namespace") == "Switchboard":
            used.add(resource["Properties"]["MetricName"])
    dashboard = json.dumps([r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard"])
    used |= {m for m in documented if re.search(rf"\b{m}\b", dashboard)}
    assert used, "the template reads none of the metrics"
    assert used <= documented, used - documented


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader: yaml.Loader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _tag)


def test_webhook_attempts_are_counted(api: Api, capsys, monkeypatch):
    from functions.webhook_fanout.app import handler as fanout_handler
    from functions.webhook_sender.app import handler as webhook_handler
    from switchboard.webhooks import delivery

    base = "/v1/settings/developer/webhooks/endpoints"
    for n in range(2):
        created = api.post(base, json={"url": f"http://127.0.0.1:9/m{n}", "filter_types": ["contact.updated"]})
        assert created.status_code == 201, created.text
    assert api.post("/v1/contacts", json={"name": "Hooked", "phone": "+1 415 555 0803"}).status_code == 201
    pipeline = Pipeline(api)
    pipeline.publish()
    events = pipeline.receive("WebhookEventsQueue")
    assert fanout_handler({"Records": events}, FakeContext())["batchItemFailures"] == []
    records = pipeline.receive("WebhookDeliveriesQueue")[:2]  # the contact's event, to each endpoint
    assert len(records) == 2
    answers = iter([200, 503])
    monkeypatch.setattr(
        delivery, "attempt_http", lambda endpoint, claimed, body: delivery.HttpResult(next(answers), 5, error=None)
    )
    monkeypatch.setattr(delivery, "reschedule", lambda receipt, seconds: None)
    capsys.readouterr()
    result = webhook_handler({"Records": records[:1]}, FakeContext())
    result2 = webhook_handler({"Records": records[1:]}, FakeContext())
    assert result["batchItemFailures"] == [] and len(result2["batchItemFailures"]) == 1
    docs = emf_lines(capsys.readouterr().out)
    expected = {"WebhookDeliveries": 1, "WebhookDeliveryFailures": 1, "WebhookRetries": 1}
    assert totals(docs) == expected and totals(docs, api.org_id) == expected
