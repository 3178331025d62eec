"""Webhook signatures (Standard Webhooks): what we send verifies unchanged with the `standardwebhooks` and `svix`
receiver libraries, before and across a secret rotation; anything altered does not."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
import svix.webhooks
from standardwebhooks.webhooks import WebhookVerificationError

from switchboard.webhooks import signing

BODY = '{"message_id":"m-1","text":"héllo ✓ 👋","n":1}'.encode()


def headers_for(secrets: list[str], msg_id: str = "msg_0123", timestamp: int | None = None) -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    return signing.delivery_headers(secrets, msg_id, ts, BODY, "message.new")


def verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    """Both libraries agree on every case."""
    results = []
    for verifier in (standardwebhooks.Webhook(secret), svix.webhooks.Webhook(secret)):
        try:
            verifier.verify(body, headers)
        except WebhookVerificationError:
            results.append(False)
        else:
            results.append(True)
    assert results[0] == results[1], results
    return results[0]


def test_secret_is_whsec_and_32_random_bytes():
    secret = signing.generate_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert signing.generate_secret() != secret
    assert signing.secret_key(secret) == base64.b64decode(secret[6:])


def test_signature_is_the_standard_webhooks_signature_of_the_raw_bytes():
    secret = signing.generate_secret()
    when = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    expected = standardwebhooks.Webhook(secret).sign("msg_1", when, BODY.decode())
    assert signing.sign(secret, "msg_1", int(when.timestamp()), BODY) == expected
    assert svix.webhooks.Webhook(secret).sign("msg_1", when, BODY.decode()) == expected


def test_delivery_headers_verify_with_both_libraries():
    secret = signing.generate_secret()
    headers = headers_for([secret])
    assert verifies(secret, BODY, headers)
    assert headers["webhook-id"] == headers["switchboard-id"] == "msg_0123"
    assert headers["webhook-timestamp"] == headers["switchboard-timestamp"]
    assert headers["webhook-signature"] == headers["switchboard-signature"]
    assert headers["switchboard-event-type"] == "message.new"
    assert headers["content-type"] == "application/json"
    assert signing.verify(secret, headers, BODY)


def test_a_rotation_signs_with_both_secrets_and_each_one_verifies():
    old, new = signing.generate_secret(), signing.generate_secret()
    headers = headers_for([new, old])
    parts = headers["webhook-signature"].split(" ")
    assert len(parts) == 2 and all(p.startswith("v1,") for p in parts)
    assert verifies(new, BODY, headers)
    assert verifies(old, BODY, headers)
    assert not verifies(signing.generate_secret(), BODY, headers)
    # After the 24 h overlap only the new secret signs: receivers still on the old one are refused.
    after = headers_for([new])
    assert verifies(new, BODY, after)
    assert not verifies(old, BODY, after)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda body, h: (body + b" ", h),  # re-encoded or altered body
        lambda body, h: (body.replace(b"1", b"2"), h),
        lambda body, h: (body, {**h, "webhook-id": "msg_other"}),
        lambda body, h: (body, {**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}),
    ],
)
def test_anything_altered_fails_verification(tamper):
    secret = signing.generate_secret()
    body, headers = tamper(BODY, headers_for([secret]))
    assert not verifies(secret, body, headers)
    assert not signing.verify(secret, headers, body)


def test_old_timestamps_are_refused_by_receivers_so_we_sign_with_the_real_time():
    secret = signing.generate_secret()
    stale = headers_for([secret], timestamp=int(time.time()) - 3600)
    assert not verifies(secret, BODY, stale)
    assert signing.verify(secret, stale, BODY)  # our own check has no tolerance; the libraries add it
