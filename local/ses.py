"""SES in the local stack and the integration tests: moto's SES v2 is the mail service, as SES is on AWS.

- `verify_sender(template, session)`: what an operator does once per stage, by hand — the stack's `MailSender`
  becomes a verified SES identity (CreateEmailIdentity). moto, like SES, refuses a send whose From address is not a
  verified identity (`MessageRejected`), so a stack sending from any other address fails locally too.
- `sent_mail(to)`: what moto's SES accepted, the rows of `GET /_local/mail` — `to`, `subject`, `text`, `sent_at` and,
  when the text carries a one-time code, `otp_code` (read from the text as its reader would, with
  `switchboard.mail.ONE_TIME_CODE`) — newest first. moto keeps no time per message: `patch_ses()` stamps each one as
  it is accepted.

moto runs in this process (the local stack's server thread, or `mock_aws` in the tests), so its backend is read
directly.
"""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime
from typing import Any

from local.template import ACCOUNT_ID, REGION, LocalTemplate

_patch_lock = threading.Lock()


def mail_sender(template: LocalTemplate) -> str:
    return str(template.parameters["MailSender"])


def verify_sender(template: LocalTemplate, session: Any = None) -> str:
    """Make the template's `MailSender` a verified identity of moto's SES (as the operator verifies it in SES), with
    the send times stamped (`patch_ses`)."""
    import boto3

    patch_ses()
    sender = mail_sender(template)
    client = (session or boto3.session.Session()).client("sesv2", region_name=REGION)
    with contextlib.suppress(client.exceptions.AlreadyExistsException):
        client.create_email_identity(EmailIdentity=sender)
    return sender


def patch_ses() -> None:
    """Stamp every message moto's SES accepts with the time it was accepted (`sent_at`). Idempotent."""
    from moto.ses.models import SESBackend

    with _patch_lock:
        if getattr(SESBackend.send_email, "_stamps_sent_at", False):
            return
        original = SESBackend.send_email

        def send_email(self: Any, *args: Any, **kwargs: Any) -> Any:
            message = original(self, *args, **kwargs)
            message.sent_at = datetime.now(UTC)
            return message

        send_email._stamps_sent_at = True  # type: ignore[attr-defined]
        SESBackend.send_email = send_email  # type: ignore[method-assign]


def _backend() -> Any:
    from moto.ses.models import ses_backends

    return ses_backends[ACCOUNT_ID][REGION]


def _iso(at: datetime | None) -> str | None:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z") if at else None


def sent_mail(to: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The mails moto's SES accepted, newest first, optionally only those to `to`."""
    from switchboard.mail import ONE_TIME_CODE

    wanted = to.strip().lower() if to else None
    rows: list[dict[str, Any]] = []
    for message in reversed(list(getattr(_backend(), "sent_messages", []))):
        destinations = getattr(message, "destinations", None)
        if not isinstance(destinations, dict) or not hasattr(message, "subject"):
            continue  # a raw or templated message: the stack sends neither
        kinds = ("ToAddresses", "CcAddresses", "BccAddresses")
        recipients = [str(a).lower() for kind in kinds for a in destinations.get(kind) or []]
        for recipient in recipients:
            if wanted is not None and recipient != wanted:
                continue
            row: dict[str, Any] = {
                "to": recipient,
                "subject": message.subject,
                "text": message.body,
                "sent_at": _iso(getattr(message, "sent_at", None)),
            }
            code = ONE_TIME_CODE.search(message.body or "")
            if code:
                row["otp_code"] = code.group(1)
            rows.append({k: v for k, v in row.items() if v is not None})
        if len(rows) >= limit:
            break
    return rows[:limit]
