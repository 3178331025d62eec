"""Meta's app-level callback over HTTP on the local stack: two numbers of one Meta app, one callback URL, each
number's traffic on its own channel (processed by the queue's consumer after the answer); the GET handshake; an
unsigned body refused."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets

import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

URL = "/v1/providers/whatsapp_cloud/webhook"


def _change(number: str, sender: str, text: str) -> dict:
    wamid = "wamid.E2E" + secrets.token_hex(12)
    return {
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": number},
            "contacts": [{"profile": {"name": "Ada"}, "wa_id": sender}],
            "messages": [
                {"from": sender, "id": wamid, "timestamp": "1763800000", "type": "text", "text": {"body": text}}
            ],
        },
    }


def test_two_numbers_of_one_app_receive_through_one_callback_url(stack):
    secret, verify = secrets.token_hex(16), secrets.token_hex(16)
    numbers = [str(10**14 + secrets.randbelow(10**14)) for _ in range(2)]
    with stack.client() as client:
        channels = []
        for number in numbers:
            config = {
                "access_token": "tok",
                "phone_number_id": number,
                "waba_id": "2001",
                "app_secret": secret,
                "verify_token": verify,
            }
            made = client.post(
                "/v1/channels", json={"name": f"cloud {number}", "platform": "whatsapp_cloud", "config": config}
            )
            assert made.status_code == 201, made.text
            channels.append(made.json()["data"]["id"])
        again = client.post(
            "/v1/channels",
            json={
                "name": "thief",
                "platform": "whatsapp_cloud",
                "config": {"phone_number_id": numbers[0], "access_token": "x"},
            },
        )
        assert again.status_code == 409, again.text

        handshake = client.get(URL, params={"hub.mode": "subscribe", "hub.verify_token": verify, "hub.challenge": "77"})
        assert handshake.status_code == 200 and handshake.text == "77"

        doc = {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "2001",
                    "changes": [
                        _change(numbers[0], "14155552671", "for the first"),
                        _change(numbers[1], "14155552672", "for the second"),
                    ],
                }
            ],
        }
        body = json.dumps(doc).encode()
        unsigned = client.post(URL, content=body, headers={"Content-Type": "application/json"})
        assert unsigned.status_code == 401, unsigned.text
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        resp = client.post(
            URL, content=body, headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature}
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["data"] == {"queued": 2, "received": 0, "statuses_applied": 0}  # answered before processing

        def texts() -> dict[str, list[str]]:
            found: dict[str, list[str]] = {}
            for conv in client.get("/v1/conversations", params={"limit": 100}).json()["data"]:
                if conv["channel_id"] in channels:
                    rows = client.get(f"/v1/conversations/{conv['id']}/messages").json()["data"]
                    found.setdefault(conv["channel_id"], []).extend(r["text"] for r in rows)
            return found

        expected = {channels[0]: ["for the first"], channels[1]: ["for the second"]}
        wait_until(lambda: texts() == expected)  # the stack's poller hands the queued changes to their consumer
        assert texts() == expected
        for channel_id in channels:
            assert client.delete(f"/v1/channels/{channel_id}").status_code == 204
