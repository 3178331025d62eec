"""Labels, chat actions and templates over HTTP against the local stack (LOCAL_TIME_SCALE=0.001, so the sandbox's
template review delay is ~1 ms): label a chat and filter on it, archive the chat, approve a template through
submit + sync, and send a template message that goes all the way to `read`."""

from __future__ import annotations

import uuid

import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


def _wait(fn, *, timeout: float = 20.0, every: float = 0.1):
    return wait_until(fn, timeout=timeout, every=every)


def test_labels_chats_and_templates_over_http(local_only):
    tag = uuid.uuid4().hex[:6]
    phone = f"+14155{str(uuid.uuid4().int)[:6]}"  # an exchange starting 5: a valid US number
    with local_only.client() as client:
        ch = client.post("/v1/channels", json={"name": f"cat-{tag}", "platform": "sandbox"}).json()["data"]
        channel = client.post(f"/v1/channels/{ch['id']}/connect").json()["data"]
        inbound = client.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": phone, "text": "hi"})
        conv_id = inbound.json()["data"]["conversation_id"]

        label = client.post("/v1/labels", json={"name": f"vip-{tag}", "color": "#123456"})
        assert label.status_code == 201, label.text
        label_id = label.json()["data"]["id"]
        attached = client.post("/v1/labels/chats/attach", json={"label_id": label_id, "chat_id": phone})
        assert attached.status_code == 200 and attached.json()["data"]["conversation_id"] == conv_id, attached.text
        listed = client.get("/v1/conversations", params={"label": label_id}).json()["data"]
        assert [c["id"] for c in listed] == [conv_id]
        labels = client.get(f"/v1/conversations/{conv_id}/labels").json()["data"]
        assert [x["id"] for x in labels] == [label_id]

        archived = client.post("/v1/chats/archive", json={"channel_id": channel["id"], "chat_id": phone})
        assert archived.status_code == 200 and archived.json()["data"]["archived"] is True
        sync = client.post(f"/v1/conversations/{conv_id}/history-sync").json()["data"]
        assert sync["status"] == "completed" and sync["messages_synced"] == 1
        rejected = client.post("/v1/calls/reject", json={"channel_id": channel["id"], "call_id": "c1"})
        assert rejected.status_code == 400 and rejected.json()["error"]["code"] == "unsupported_by_provider"

        name = f"shipped_{tag}"
        created = client.post(
            "/v1/templates",
            json={
                "channel_id": channel["id"],
                "name": name,
                "category": "UTILITY",
                "components": [{"type": "BODY", "text": "Your order {{1}} shipped."}],
            },
        )
        assert created.status_code == 201, created.text
        tpl_id = created.json()["data"]["id"]
        submitted = client.post(f"/v1/templates/{tpl_id}/submit")
        assert submitted.status_code == 200, submitted.text
        assert submitted.json()["data"]["status"] in ("pending", "approved")

        def approved():
            client.post("/v1/templates/sync", json={"channel_id": channel["id"]})
            return client.get(f"/v1/templates/{tpl_id}").json()["data"]["status"] == "approved"

        _wait(approved)
        template = {
            "name": name,
            "language": "en_US",
            "components": [{"type": "body", "parameters": [{"type": "text", "text": "#42"}]}],
        }
        sent = client.post(
            "/v1/messages", json={"channel_id": channel["id"], "to": phone, "type": "template", "template": template}
        )
        assert sent.status_code == 202, sent.text
        msg_id = sent.json()["data"]["id"]
        _wait(lambda: client.get(f"/v1/messages/{msg_id}").json()["data"]["status"] == "read")
        bad = client.post(
            "/v1/messages",
            json={
                "channel_id": channel["id"],
                "to": phone,
                "type": "template",
                "template": {**template, "components": []},
            },
        )
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "validation_failed"
