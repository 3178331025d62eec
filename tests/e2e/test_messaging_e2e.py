"""Messaging through the local stack: the whole pipeline (outbox → stream → bus → queue → message_sender →
sandbox provider → status timers) with the real handlers, on a compressed clock."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


def _wait(fn, *, timeout: float = 20.0, every: float = 0.1):
    return wait_until(fn, timeout=timeout, every=every)


def _channel(client) -> dict:
    ch = client.post("/v1/channels", json={"name": f"sbx-{uuid.uuid4().hex[:6]}", "platform": "sandbox"})
    assert ch.status_code == 201, ch.text
    assert ch.json()["data"]["status"] == "disconnected"
    connected = client.post(f"/v1/channels/{ch.json()['data']['id']}/connect")
    assert connected.status_code == 200 and connected.json()["data"]["status"] == "connected"
    return connected.json()["data"]


def _number(suffix: str = "") -> str:
    """A fresh valid US number (+1 415, an exchange starting 5, six more digits), optionally ending in `suffix`."""
    digits = str(uuid.uuid4().int)[:6]
    return f"+14155{digits[: 6 - len(suffix)]}{suffix}"


def test_send_moves_pending_sent_delivered_read(local_only):
    with local_only.client() as client:
        channel = _channel(client)
        resp = client.post(
            "/v1/messages",
            json={"channel_id": channel["id"], "to": _number(), "type": "text", "text": {"body": "hello"}},
        )
        assert resp.status_code == 202, resp.text
        msg = resp.json()["data"]
        assert msg["status"] == "pending" and len(msg["id"]) == 36
        assert set(msg) >= {
            "id",
            "channel_id",
            "to_phone",
            "type",
            "status",
            "provider_message_id",
            "created_at",
            "updated_at",
        }
        assert msg["to_phone"].isdigit()
        final = _wait(lambda: (r := client.get(f"/v1/messages/{msg['id']}").json()["data"])["status"] == "read" and r)
        assert final["provider_message_id"].startswith("sbx_")
        history = client.get(f"/v1/messages/{msg['id']}/status").json()["data"]["history"]
        assert [h["status"] for h in history if h["applied"]] == ["pending", "sent", "delivered", "read"]


def test_sandbox_refuses_numbers_ending_0000(local_only):
    with local_only.client() as client:
        channel = _channel(client)
        msg = client.post(
            "/v1/messages", json={"channel_id": channel["id"], "to": _number("0000"), "text": {"body": "x"}}
        ).json()["data"]
        failed = _wait(
            lambda: (r := client.get(f"/v1/messages/{msg['id']}").json()["data"])["status"] == "failed" and r
        )
        assert "0000" in failed["last_error"]


def test_sending_needs_a_connected_channel_and_an_allowed_recipient(local_only):
    with local_only.client() as client:
        ch = client.post("/v1/channels", json={"name": "off", "platform": "sandbox"}).json()["data"]
        refused = client.post("/v1/messages", json={"channel_id": ch["id"], "to": _number(), "text": {"body": "x"}})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"
        channel = _channel(client)
        contact = client.post("/v1/contacts", json={"phone": _number()}).json()["data"]
        client.post("/v1/contacts/block", json={"contact_id": contact["id"]})
        blocked = client.post(
            "/v1/messages", json={"channel_id": channel["id"], "contact_id": contact["id"], "text": {"body": "x"}}
        )
        assert blocked.json()["error"]["code"] == "recipient_blocked"
        other = client.post("/v1/contacts", json={"phone": _number()}).json()["data"]
        client.put(f"/v1/contacts/{other['id']}/consent/whatsapp", json={"status": "opted_out"})
        opted_out = client.post(
            "/v1/messages", json={"channel_id": channel["id"], "contact_id": other["id"], "text": {"body": "x"}}
        )
        assert opted_out.json()["error"]["code"] == "recipient_opted_out"
        third = client.post("/v1/contacts", json={"phone": _number()}).json()["data"]
        client.post(f"/v1/contacts/{third['id']}/suppressions", json={"channel": "whatsapp", "reason": "bounced"})
        suppressed = client.post(
            "/v1/messages", json={"channel_id": channel["id"], "contact_id": third["id"], "text": {"body": "x"}}
        )
        assert suppressed.json()["error"]["code"] == "recipient_suppressed"
        invalid = client.post("/v1/messages", json={"channel_id": channel["id"], "to": _number(), "type": "text"})
        assert invalid.status_code == 400 and invalid.json()["error"]["details"][0]["field"] == "body.text"


def test_inbound_creates_contact_conversation_and_message_new(local_only):
    phone = _number()
    with local_only.client() as client:
        channel = _channel(client)
        resp = client.post(
            f"/v1/channels/{channel['id']}/sandbox/inbound",
            json={"from_phone": phone, "text": "hi there", "name": "Grace"},
        )
        assert resp.status_code == 202, resp.text
        accepted = resp.json()["data"]
        contact = client.get(f"/v1/contacts/{accepted['contact_id']}").json()["data"]
        assert contact["name"] == "Grace" and contact["identities"][0]["type"] == "whatsapp"
        conv = client.get(f"/v1/conversations/{accepted['conversation_id']}").json()["data"]
        assert conv["contact_id"] == contact["id"] and conv["unread_count"] == 1
        thread = client.get(f"/v1/conversations/{conv['id']}/messages").json()["data"]
        assert [(m["direction"], m["text"]) for m in thread] == [("inbound", "hi there")]
        reply = client.post(
            "/v1/messages",
            json={"channel_id": channel["id"], "contact_id": contact["id"], "text": {"body": "hello Grace"}},
        ).json()["data"]
        thread = client.get(f"/v1/conversations/{conv['id']}/messages").json()["data"]
        assert thread[0]["id"] == reply["id"]
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=local_only.aws_endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    table = next(t for t in dynamodb.list_tables()["TableNames"] if "Table" in t)
    partitions = [f"ORG#{local_only.organization_id}#{n}" for n in range(int(os.environ.get("TENANT_SHARDS", "16")))]
    events = [  # the outbox is write-sharded (switchboard.store.shards): every shard of the organization
        item
        for pk in partitions
        for item in dynamodb.query(
            TableName=table,
            KeyConditionExpression="PK = :pk AND begins_with(SK, :e)",
            ExpressionAttributeValues={":pk": {"S": pk}, ":e": {"S": "EVENT#"}},
        )["Items"]
    ]
    new = [
        e
        for e in events
        if e["event_type"]["S"] == "message.new" and e["payload"]["M"]["message_id"]["S"] == accepted["message_id"]
    ]
    assert len(new) == 1
    payload = new[0]["payload"]["M"]
    assert {
        k: payload[k]["S"]
        for k in ("conversation_id", "contact_id", "channel_id", "direction", "from_phone", "msg_type")
    } == {
        "conversation_id": accepted["conversation_id"],
        "contact_id": accepted["contact_id"],
        "channel_id": channel["id"],
        "direction": "inbound",
        "from_phone": phone.lstrip("+"),
        "msg_type": "text",
    }


def test_twenty_parallel_lock_claims_make_one_owner(local_only):
    with local_only.client() as client:
        channel = _channel(client)
        accepted = client.post(
            f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": _number(), "text": "lock me"}
        ).json()["data"]
        keys = [
            client.post("/v1/api-keys", json={"name": f"agent-{n}", "role": "member"}).json()["data"]["key"]
            for n in range(20)
        ]

    def claim(key: str):
        with local_only.client(api_key=key) as c:
            return c.post(f"/v1/conversations/{accepted['conversation_id']}/lock", json={"lock_owner_name": key[-6:]})

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(claim, keys))
    assert sorted(r.status_code for r in results) == [200] + [409] * 19
    winner = next(r.json()["data"] for r in results if r.status_code == 200)
    losers = [r.json()["error"] for r in results if r.status_code == 409]
    assert all(e["code"] == "lock_held" and e["details"][0]["lock_owner_id"] == winner["lock_owner_id"] for e in losers)
    assert set(winner) >= {
        "conversation_id",
        "organization_id",
        "lock_owner_id",
        "lock_owner_name",
        "draft_id",
        "expires_at",
        "updated_at",
    }
