"""Standard Webhooks signatures.

A secret is `whsec_` + base64 of 32 random bytes; the HMAC key is those 32 bytes. The signature of a delivery is
`v1,` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")) over the body bytes exactly as sent.
Several signatures (the current and, within 24 h of a rotation, the previous secret) are separated by a space;
receivers using the `standardwebhooks` or `svix` libraries accept the request when any one of them matches.
Written with `hmac` directly (the same computation as `standardwebhooks.Webhook.sign`, which takes text, not bytes),
so the runtime needs no extra dependency; the tests verify with both libraries.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from functools import lru_cache

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def generate_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    raw = secret.removeprefix(SECRET_PREFIX)
    return base64.b64decode(raw + "=" * (-len(raw) % 4))


@lru_cache(maxsize=256)
def _keyed(secret: str) -> hmac.HMAC:
    """The HMAC keyed with `secret`, kept per secret (the key is decoded and padded once); `sign` works on a copy."""
    return hmac.new(secret_key(secret), digestmod=hashlib.sha256)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    mac = _keyed(secret).copy()
    mac.update(f"{msg_id}.{timestamp}.".encode())
    mac.update(body)
    return "v1," + base64.b64encode(mac.digest()).decode()


def signature_header(secrets_: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    return " ".join(sign(s, msg_id, timestamp, body) for s in secrets_)


def delivery_headers(
    secrets_: Iterable[str], msg_id: str, timestamp: int, body: bytes, event_type: str
) -> dict[str, str]:
    """Every header of a delivery: the Standard Webhooks three, the same under `switchboard-`, and the event type."""
    signature = signature_header(secrets_, msg_id, timestamp, body)
    return {
        "content-type": "application/json",
        "user-agent": "Switchboard-Webhooks/1.0",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
        "switchboard-id": msg_id,
        "switchboard-timestamp": str(timestamp),
        "switchboard-signature": signature,
        "switchboard-event-type": event_type,
    }


def verify(secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """True when one `v1,` signature of the headers matches (no timestamp tolerance: the libraries add that)."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id, timestamp = lower.get("webhook-id"), lower.get("webhook-timestamp")
    if not msg_id or not timestamp or not timestamp.isdigit():
        return False
    expected = sign(secret, msg_id, int(timestamp), body)
    return any(hmac.compare_digest(expected, part) for part in lower.get("webhook-signature", "").split(" "))
