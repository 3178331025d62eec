"""Logs are JSON lines with the request id as correlation id, and carry no credential even when an exception message
does (switchboard/logs.py redacts at the formatter). The account flows' logs are checked secret by secret in
test_secrets.py; this file covers the formatter itself and the worst case: an unexpected error whose text holds the
caller's API key, a session token, a webhook secret and a password."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from switchboard.contacts import service as contacts_service
from switchboard.logs import redact
from tests.integration.support import Api

SECRETS = {
    "api key": "sk_test_q8Kx2pLmN4vB7cD1eF5gH9jK3lM6nP0rS2tU",
    "session": "sess_Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1HgFeDcBa0987",
    "webhook secret": "whsec_MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=",
    "portal token": "whp_a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6",
    "password": "correct-horse-battery-staple-9",
    "invitation token": "Qw3rTy7uIo9pAs1dFg5hJk",
}


@pytest.mark.parametrize(
    "template",
    [
        "key {api key} refused",
        "Authorization: Bearer {session}",
        '{{"headers": {{"X-Api-Key": "{api key}", "authorization": "Bearer {session}"}}}}',
        "rotated to {webhook secret} (previous kept 24 h)",
        '{{"email": "a@example.com", "password": "{password}"}}',
        '"message": "{{\\"password\\": \\"{password}\\", \\"otp_code\\": \\"123456\\"}}"',
        "https://app.example.com/invite?id=inv_1&token={invitation token}",
        "portal link https://portal.example.com/#{portal token}",
    ],
)
def test_the_formatter_hides_every_kind_of_credential(template: str):
    text = template.format(**SECRETS)
    out = redact(text)
    assert "[REDACTED]" in out, out
    for what, value in SECRETS.items():
        assert value not in out, f"{what} left in {out!r}"
    assert "123456" not in out or "otp_code" not in text


def test_ordinary_log_content_is_left_alone():
    line = json.dumps(
        {
            "message": "webhook attempt",
            "delivery_id": "msg_01jd8x7k2m3n4p5q6r7s8t9v0w",
            "event_type": "message.sent",
            "status_code": 503,
            "error": {"code": "validation_failed", "field": "body.phone"},
            "correlation_id": "0b4c2d8e-1f3a-4b5c-9d6e-7f8a9b0c1d2e",
            "idempotency_key_present": True,
            "sk": "CONTACT#ct_01jd8x7k2m3n4p5q6r7s8t9v0w",
        }
    )
    assert redact(line) == line


@pytest.fixture
def function_logs(api: Api) -> Iterator[io.StringIO]:
    """Every line the functions' Powertools handler writes, through its own (redacting) formatter."""
    assert api.get("/v1/organization").status_code == 200  # the functions build their loggers
    service = logging.getLogger("switchboard")
    sink = io.StringIO()
    mirror = logging.StreamHandler(sink)
    mirror.setFormatter(service.handlers[0].formatter)
    service.addHandler(mirror)
    try:
        yield sink
    finally:
        service.removeHandler(mirror)


def test_an_unexpected_error_holding_credentials_is_logged_redacted_with_the_request_id(
    api: Api, function_logs: io.StringIO, monkeypatch
):
    def explode(*_args, **_kwargs):
        raise RuntimeError(
            f"upstream said: key={api.owner_key} Authorization: Bearer {SECRETS['session']} "
            f"secret {SECRETS['webhook secret']} password={SECRETS['password']}"
        )

    monkeypatch.setattr(contacts_service, "get", explode)
    resp = api.get("/v1/contacts/ct_anything")
    error = api.assert_error(resp, 500, "internal_error")
    assert api.owner_key not in resp.text and "upstream" not in resp.text

    lines = [json.loads(line) for line in function_logs.getvalue().splitlines() if line.strip()]
    mine = [line for line in lines if line.get("correlation_id") == error["request_id"]]
    assert mine, f"no log line carries the request id {error['request_id']}: {lines}"
    logged = json.dumps(mine)
    assert any(line["level"] == "ERROR" and line["message"] == "unhandled error" for line in mine)
    assert "RuntimeError" in logged and "[REDACTED]" in logged, "the traceback should be there, redacted"
    for what, value in {**SECRETS, "owner API key": api.owner_key}.items():
        assert value not in logged, f"{what} in the log"
