"""Mail leaves through a queue (switchboard.mail): every request that mails writes a sealed `mail.send` outbox event
in its own transaction and never calls SES, so a mail service that refuses or fails cannot turn a committed change
into an error; MailFunction sends from MAIL_SENDER with SES v2 (moto's, which, like SES, refuses an unverified From
address), retried by SQS, its failures counted, the content sealed until SES gets it."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import boto3
import pytest

from functions.mail.app import handler as mail_handler
from local.ses import mail_sender, sent_mail
from switchboard import clock
from switchboard.config import get_settings
from switchboard.events.outbox import stored_events
from switchboard.mail import MAIL_EVENT, MAIL_ORG
from switchboard.store import get_store
from tests.helpers import FakeContext
from tests.integration.support import PASSWORD, Api
from tests.integration.test_metrics import emf_lines, totals


def mail_events() -> list[dict[str, Any]]:
    return [e for e in stored_events(get_store(), MAIL_ORG) if e["event_type"] == MAIL_EVENT]


def make_visible(api: Api, records: list[dict[str, Any]]) -> None:
    sqs = boto3.client("sqs")
    url = api.resources.queue_url("MailQueue")
    for record in records:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0)


def test_requests_that_mail_answer_when_ses_refuses_and_their_mails_go_out_once_it_accepts(api: Api, capsys):
    """With MAIL_SENDER not (or no longer) a verified identity, SES refuses every send: the code, reset, invitation
    and invoice requests still answer their 2xx with everything written, the mails wait on MailQueue (failures
    counted, the last receive counted as a DLQ move), and once the identity is verified they go out."""
    sesv2 = boto3.client("sesv2")
    sesv2.delete_email_identity(EmailIdentity=mail_sender(api.template))

    ada = "ada.queued@example.com"
    assert api.post("/v1/auth/email-verification/request", json={"email": ada}).status_code == 202
    assert api.post("/v1/auth/password/reset", json={"email": "owner@example.com"}).status_code == 202
    invited = api.post("/v1/invitations", json={"email": "bob.queued@example.com", "role": "member"})
    assert invited.status_code == 201, invited.text
    assert api.get(f"/v1/invitations/{invited.json()['data']['id']}").json()["data"]["status"] == "pending"
    profile = {"legal_name": "Acme", "billing_email": "billing@acme.example.com", "address_line_1": "1 Road"}
    profile["country_code"] = "DE"
    assert api.patch("/v1/settings/billing", json={"billing_profile": profile}).status_code == 200
    invoice = api.post("/v1/settings/billing/invoices", json={"period": "2026-01"})  # an empty past month
    assert invoice.status_code == 201, invoice.text
    issued = api.post(f"/v1/settings/billing/invoices/{invoice.json()['data']['id']}/finalize")
    assert issued.status_code == 200 and issued.json()["data"]["status"] == "open", issued.text
    queued = mail_events()
    # verification, reset, invitation, invoice to the billing e-mail and to the owner (billing mails by default)
    assert len(queued) == 5

    capsys.readouterr()
    relay = api.relay
    assert relay.publish() == 5
    records = relay.receive()
    assert len(records) == 5
    assert sorted(relay.deliver(records)) == sorted(r["messageId"] for r in records)  # every send refused
    assert sent_mail() == []
    last = [{**r, "attributes": {**r["attributes"], "ApproximateReceiveCount": "5"}} for r in records[:1]]
    assert mail_handler({"Records": last}, FakeContext())["batchItemFailures"] == [
        {"itemIdentifier": last[0]["messageId"]}
    ]
    counted = totals(emf_lines(capsys.readouterr().out))
    assert counted.get("MailFailed") == 6 and counted.get("DlqMoves") == 1 and "MailSent" not in counted
    # The webhook fan-out never saw a mail: WebhookEventsRule leaves mail.send out.
    events = boto3.client("sqs").receive_message(QueueUrl=api.resources.queue_url("WebhookEventsQueue"))
    assert [m for m in events.get("Messages", []) if MAIL_EVENT in m["Body"]] == []

    sesv2.create_email_identity(EmailIdentity=mail_sender(api.template))  # the operator verifies the identity
    make_visible(api, records)
    assert relay.deliver(relay.receive()) == []
    got = {m["to"]: m for m in sent_mail()}
    assert set(got) == {ada, "owner@example.com", "bob.queued@example.com", "billing@acme.example.com"}
    assert got[ada]["otp_code"].isdigit()
    code = got[ada]["otp_code"]
    registered = api.post("/v1/auth/register/verify", json={"email": ada, "otp_code": code, "password": PASSWORD})
    assert registered.status_code == 201, registered.text
    assert re.search(r"/accept#token=[A-Za-z0-9_-]+", got["bob.queued@example.com"]["text"])


def test_the_mail_is_sealed_at_rest_and_sent_from_mail_sender_only(api: Api, monkeypatch):
    """The queued event holds no readable recipient, code or text; SES gets it from MAIL_SENDER."""
    email = "ada.at.rest@example.com"
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    (event,) = mail_events()
    stored = json.dumps(event, default=str)
    assert email not in stored and "ada.at.rest" not in stored and "verification" not in stored
    assert event["payload"]["mail"].startswith("sealed:v1:")
    expires = clock.parse_iso(event["payload"]["expires_at"])
    assert timedelta(minutes=9) < expires - clock.now() <= timedelta(minutes=10)
    assert event["ttl"] <= clock.epoch(clock.now() + timedelta(days=1))  # gone from the table within a day
    (row,) = api.mail(email)
    assert not re.search(rf"\b{row['otp_code']}\b", stored)
    from moto.ses.models import ses_backends

    (message,) = [m for m in ses_backends["123456789012"]["us-east-1"].sent_messages if email in str(m.destinations)]
    assert message.source == get_settings().mail_sender == mail_sender(api.template)


def test_a_one_time_code_that_arrives_after_its_expiry_is_dropped_not_sent(api: Api, monkeypatch, capsys):
    email = "late.code@example.com"
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    api.relay.publish()
    records = api.relay.receive()
    later = clock.now() + timedelta(minutes=11)
    monkeypatch.setattr(clock, "now", lambda: later)
    capsys.readouterr()
    assert api.relay.deliver(records) == []  # handled: not retried
    assert sent_mail(email) == []
    assert totals(emf_lines(capsys.readouterr().out)) == {"MailExpired": 1}


def test_an_invitation_mail_has_no_expiry_and_is_sent_however_late(api: Api, monkeypatch):
    assert api.post("/v1/invitations", json={"email": "late.invite@example.com", "role": "viewer"}).status_code == 201
    (event,) = mail_events()
    assert "expires_at" not in event["payload"]
    api.relay.publish()
    records = api.relay.receive()
    later = clock.now() + timedelta(days=2)
    monkeypatch.setattr(clock, "now", lambda: later)
    assert api.relay.deliver(records) == []
    subjects = [m["subject"] for m in sent_mail("late.invite@example.com")]
    assert subjects == ["You are invited to Local Organization on Switchboard"]


UNOPENABLE = json.dumps({"detail": {"event_id": "evt_x", "data": {"mail": "sealed:v1:AAAA"}}})


@pytest.mark.parametrize("body", ["not json", UNOPENABLE])
def test_a_mail_that_does_not_open_is_retried_then_parked(api: Api, body: str):
    """A body that does not parse or open (another stage's key, a rotated secret) fails its record alone."""
    from local.pollers import lambda_sqs_record

    sqs = boto3.client("sqs")
    url = api.resources.queue_url("MailQueue")
    sqs.send_message(QueueUrl=url, MessageBody=body)
    got = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"]
    records = [lambda_sqs_record(m, api.resources.queue_arn("MailQueue")) for m in got]
    assert api.relay.deliver(records) == [records[0]["messageId"]]
    assert sent_mail() == []
