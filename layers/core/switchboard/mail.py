"""Outgoing e-mail: one interface, two implementations.

In AWS, SES sends it (sender from the MAIL_SENDER parameter). In the local stack and tests, it is written to a local
outbox in the table (partition `LOCALMAIL`), which `GET /_local/mail` lists newest first. The stage decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from switchboard import aws, clock
from switchboard.config import get_settings
from switchboard.ids import new_ulid
from switchboard.store import Store, get_store

OUTBOX_PK = "LOCALMAIL"


@dataclass(frozen=True)
class Mail:
    to: str
    subject: str
    text: str
    otp_code: str | None = None  # only surfaced by the local outbox, so tests can read codes


class MailSender(Protocol):
    def send(self, mail: Mail) -> None: ...


class SesMailSender:
    def __init__(self, sender: str) -> None:
        self.sender = sender

    def send(self, mail: Mail) -> None:
        aws.client("sesv2").send_email(
            FromEmailAddress=self.sender,
            Destination={"ToAddresses": [mail.to]},
            Content={"Simple": {"Subject": {"Data": mail.subject}, "Body": {"Text": {"Data": mail.text}}}},
        )


class OutboxMailSender:
    def __init__(self, store: Store) -> None:
        self.store = store

    def send(self, mail: Mail) -> None:
        now = clock.now()
        self.store.put(
            {
                "PK": OUTBOX_PK,
                "SK": new_ulid(),
                "entity": "LocalMail",
                "to": mail.to.lower(),
                "subject": mail.subject,
                "text": mail.text,
                "otp_code": mail.otp_code,
                "sent_at": clock.iso(now),
                "ttl": clock.epoch(now + timedelta(days=1)),
            }
        )


def read_outbox(store: Store, to: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The local outbox, newest first, optionally only mail to one address."""
    page = store.query(OUTBOX_PK, forward=False, limit=None if to else limit, consistent=True)
    rows = [
        {k: item[k] for k in ("to", "subject", "text", "sent_at", "otp_code") if item.get(k) is not None}
        for item in page.items
        if to is None or item.get("to") == to.strip().lower()
    ]
    return rows[:limit]


def get_mail_sender() -> MailSender:
    settings = get_settings()
    if settings.is_local:
        return OutboxMailSender(get_store())
    return SesMailSender(settings.mail_sender)
