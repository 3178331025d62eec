"""Outgoing e-mail, through a queue: no request ever calls SES.

A mail is an outbox event (`mail.send`, switchboard.events.outbox) written in the transaction of the change that
causes it — the one-time code, the invitation, the issued invoice, the disabled webhook endpoint — so it exists
exactly when that change does, and a request can never fail after its write committed because a mail could not go
out. Its content (recipient, subject, text) is sealed (switchboard.sealed, AES-256-GCM) and the event expires with the
outbox, a day later: a one-time code is never kept or carried in plain text (the code itself is stored only as a
salted hash, identity/otp.py). The events live in the platform's write shards (`ORG#platform#<n>`): mail is the
platform's, and a pre-session mail has no organization.

The outbox relay (event_publisher) puts the event on the bus like any other; `MailRule` routes `mail.send` to
MailQueue and `WebhookEventsRule` leaves it out, so no tenant's webhook ever carries one. MailFunction
(functions/mail) opens each one and sends it with SES v2 from `MAIL_SENDER`, an identity verified in SES (the local
stack verifies its own at start, as an operator does once per stage). A send that fails is retried by SQS (MailQueue:
5 receives, then MailDLQ and its alarm) and counted (`MailSent`, `MailFailed`, `DlqMoves`); a mail that carries an
`expires_at` (a one-time code: its 10 minutes) and arrives later is dropped instead (`MailExpired`): nobody needs a
dead code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from switchboard import aws, clock, sealed
from switchboard.config import get_settings
from switchboard.events.outbox import outbox_put
from switchboard.store import Put, Store

MAIL_EVENT = "mail.send"
MAIL_ORG = "platform"  # the outbox partition of every mail (`ORG#platform#<shard>`): no tenant's events
_CONTEXT = "switchboard/mail"  # the sealed body's authenticated context: it opens as a mail and nothing else
MAX_PER_TRANSACTION = 100  # DynamoDB's limit on the operations of one transaction

# How a mail's text writes a one-time code ("… code is 123456."): the local stack's mail reader finds codes with it.
ONE_TIME_CODE = re.compile(r"\bcode is (\d{6})\b")


@dataclass(frozen=True)
class Mail:
    to: str
    subject: str
    text: str
    expires_at: datetime | None = None  # not sent after this (a one-time code's expiry)


def code_text(what: str, code: str, minutes: int) -> str:
    """The sentence that carries a one-time code (see ONE_TIME_CODE)."""
    return f"Your {what} code is {code}. It expires in {minutes} minutes."


def mail_put(mail: Mail) -> Put:
    """The transaction operation that sends `mail` once the transaction commits (an outbox event, sealed)."""
    body = json.dumps({"to": mail.to.strip().lower(), "subject": mail.subject, "text": mail.text})
    data: dict[str, Any] = {"mail": sealed.seal(body, _CONTEXT)}
    if mail.expires_at is not None:
        data["expires_at"] = clock.iso(mail.expires_at)
    return outbox_put(MAIL_ORG, MAIL_EVENT, data)


def mail_puts(mails: Iterable[Mail]) -> list[Put]:
    return [mail_put(m) for m in mails]


def enqueue(store: Store, mails: Sequence[Mail]) -> None:
    """Mails that ride no other write (an alert about a change already made): their own transactions."""
    ops = mail_puts(mails)
    for start in range(0, len(ops), MAX_PER_TRANSACTION):
        store.transact(ops[start : start + MAX_PER_TRANSACTION])


# The consumer (MailFunction) ----------------------------------------------------------------------------------------
def open_mail(detail: dict[str, Any]) -> Mail:
    """The mail of a `mail.send` event's `detail` (as the bus delivers it); ValueError when it does not open."""
    data = detail.get("data") or {}
    content = json.loads(sealed.unseal(str(data.get("mail", "")), _CONTEXT))
    expires = data.get("expires_at")
    return Mail(
        to=str(content["to"]),
        subject=str(content["subject"]),
        text=str(content["text"]),
        expires_at=clock.parse_iso(expires) if expires else None,
    )


def deliver(detail: dict[str, Any]) -> str:
    """Send one queued mail with SES v2: `sent`, or `expired` (dropped). A failure of SES raises (SQS retries)."""
    mail = open_mail(detail)
    if mail.expires_at is not None and mail.expires_at <= clock.now():
        return "expired"
    aws.client("sesv2").send_email(
        FromEmailAddress=get_settings().mail_sender,
        Destination={"ToAddresses": [mail.to]},
        Content={
            "Simple": {
                "Subject": {"Data": mail.subject, "Charset": "UTF-8"},
                "Body": {"Text": {"Data": mail.text, "Charset": "UTF-8"}},
            }
        },
    )
    return "sent"
