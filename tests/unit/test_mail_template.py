"""What template.yaml says about mail, read as CloudFormation reads it: MailSender must be given and cannot be a
placeholder (`AllowedPattern` is checked by CloudFormation at deploy time, before anything is created); only
MailFunction may send with SES, and only from MailSender; no tenant's webhook fan-out sees a mail."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from local.template import LOCAL_PARAMETERS, parse_yaml

TEMPLATE = parse_yaml((Path(__file__).resolve().parents[2] / "template.yaml").read_text())
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]


def _allowed(value: str) -> bool:
    # CloudFormation matches the whole value (Java regex; the pattern uses nothing Python reads differently)
    return re.fullmatch(TEMPLATE["Parameters"]["MailSender"]["AllowedPattern"], value) is not None


def test_mail_sender_has_no_default_so_a_deploy_must_name_it():
    assert "Default" not in TEMPLATE["Parameters"]["MailSender"]


@pytest.mark.parametrize(
    "sender",
    [
        "no-reply@example.com",
        "no-reply@EXAMPLE.org",
        "ops@mail.example.net",
        "no-reply@switchboard.test",
        "a@b.invalid",
        "a@host.localhost",
        "a@corp.example",
        "",
        "no-reply",
        "two words@acme.io",
    ],
)
def test_mail_sender_refuses_placeholders_and_reserved_domains(sender: str):
    assert not _allowed(sender)


@pytest.mark.parametrize(
    "sender",
    ["no-reply@acme.io", "Mail@Notifications.Acme-Corp.com", "x@example.company", LOCAL_PARAMETERS["MailSender"]],
)
def test_mail_sender_accepts_real_addresses(sender: str):
    assert _allowed(sender)


def _statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in resource["Properties"].get("Policies") or []:
        if isinstance(policy, dict) and "Statement" in policy:
            out += policy["Statement"]
    return out


def _mentions_ses(resource: dict[str, Any]) -> bool:
    policies = resource["Properties"].get("Policies") or []
    text = repr(policies)
    return "ses:" in text or "SESCrudPolicy" in text or "SESBulkTemplatedCrudPolicy" in text


def test_only_mail_function_may_send_mail_and_only_from_mail_sender():
    functions = {k: v for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::Function"}
    assert {name for name, fn in functions.items() if _mentions_ses(fn)} == {"MailFunction"}
    (grant,) = [s for s in _statements(functions["MailFunction"]) if "ses:SendEmail" in repr(s["Action"])]
    assert grant["Action"] == "ses:SendEmail" and grant["Effect"] == "Allow"
    assert grant["Condition"] == {"StringEquals": {"ses:FromAddress": {"Ref": "MailSender"}}}
    assert grant["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/*"}


def test_mail_reaches_the_mail_queue_and_never_the_webhook_fan_out():
    webhook = RESOURCES["WebhookEventsRule"]["Properties"]["EventPattern"]["detail-type"]
    assert {"anything-but": ["message.queued", "mail.send"]} in webhook
    mail = RESOURCES["MailRule"]["Properties"]
    assert mail["EventPattern"] == {"source": ["switchboard"], "detail-type": ["mail.send"]}
    assert mail["Targets"][0]["Arn"] == {"Fn::GetAtt": ["MailQueue", "Arn"]}
    (mapping,) = RESOURCES["MailFunction"]["Properties"]["Events"].values()
    assert mapping["Properties"]["Queue"] == {"Fn::GetAtt": ["MailQueue", "Arn"]}
    assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    dlq = RESOURCES["MailQueue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]
    assert dlq == {"Fn::GetAtt": ["MailDLQ", "Arn"]}
    alarmed = [r for r in RESOURCES.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert any(
        a["Properties"].get("Dimensions") == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["MailDLQ", "QueueName"]}}]
        for a in alarmed
    )
