"""Labels, chat and call actions, conversation history sync: through the API (gateway → real handlers, moto)."""

from __future__ import annotations

import pytest

from switchboard.events.outbox import stored_events
from switchboard.messaging import status
from switchboard.providers.sandbox import SandboxProvider
from switchboard.store import get_store
from tests.integration.support import Api, run_jobs

PHONE = "+14155552671"
DIGITS = "14155552671"


@pytest.fixture
def channel(api: Api) -> dict:
    ch = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"})
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


@pytest.fixture
def conv(api: Api, channel: dict) -> dict:
    resp = api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": PHONE, "text": "hello"})
    assert resp.status_code == 202, resp.text
    return api.get(f"/v1/conversations/{resp.json()['data']['conversation_id']}").json()["data"]


def _events(api: Api, kind: str) -> list[dict]:
    return [e for e in stored_events(get_store(), api.org_id) if e["event_type"] == kind]


def _label_events(api: Api) -> list[dict]:
    return [e["payload"] for e in _events(api, "conversation.updated") if "labels" in e["payload"]["changes"]]


def _member_headers(api: Api, role: str) -> dict[str, str]:
    resp = api.post("/v1/api-keys", json={"name": f"{role} key", "role": role})
    assert resp.status_code == 201, resp.text
    return {"X-Api-Key": resp.json()["data"]["key"]}


def test_label_crud_unique_names_and_validation(api: Api):
    created = api.post("/v1/labels", json={"name": "VIP", "color": "#FF0000"})
    assert created.status_code == 201, created.text
    label = created.json()["data"]
    assert label["id"].startswith("lb_") and label["color"] == "#ff0000" and label["name"] == "VIP"
    assert set(label) == {"id", "organization_id", "name", "color", "description", "created_at", "updated_at"}
    api.assert_error(api.post("/v1/labels", json={"name": "vip"}), 409, "conflict")
    api.assert_error(api.post("/v1/labels", json={"name": ""}), 400, "validation_failed")
    api.assert_error(api.post("/v1/labels", json={"name": "x", "color": "red"}), 400, "validation_failed")
    api.assert_error(api.post("/v1/labels", json={"name": "x", "extra": 1}), 400, "validation_failed")
    other = api.post("/v1/labels", json={"name": "Lead"}).json()["data"]
    assert other["color"] == "#9e9e9e"

    page = api.get("/v1/labels", params={"limit": 1}).json()
    assert len(page["data"]) == 1 and page["meta"]["has_more"] is True
    rest = api.get("/v1/labels", params={"limit": 1, "cursor": page["meta"]["cursor"]}).json()
    assert {page["data"][0]["id"], rest["data"][0]["id"]} == {label["id"], other["id"]}
    api.assert_error(api.get("/v1/labels", params={"cursor": "forged.cursor"}), 400, "validation_failed")

    assert api.get(f"/v1/labels/{label['id']}").json()["data"]["name"] == "VIP"
    api.assert_error(api.patch(f"/v1/labels/{label['id']}", json={"name": "lead"}), 409, "conflict")
    renamed = api.patch(f"/v1/labels/{label['id']}", json={"name": "Gold", "description": "top"}).json()["data"]
    assert renamed["name"] == "Gold" and renamed["description"] == "top"
    assert api.post("/v1/labels", json={"name": "VIP"}).status_code == 201  # the old name is free again
    api.assert_error(api.post("/v1/labels", json={"name": "gold"}), 409, "conflict")

    assert api.delete(f"/v1/labels/{label['id']}").status_code == 204
    api.assert_error(api.get(f"/v1/labels/{label['id']}"), 404, "not_found")
    api.assert_error(api.delete(f"/v1/labels/{label['id']}"), 404, "not_found")
    assert api.post("/v1/labels", json={"name": "Gold"}).status_code == 201


def test_labels_are_per_organization_and_viewers_only_read(api: Api):
    label = api.post("/v1/labels", json={"name": "Mine"}).json()["data"]
    _, session = api.new_org("other@example.com")
    api.assert_error(api.get(f"/v1/labels/{label['id']}", headers=session), 404, "not_found")
    assert api.get("/v1/labels", headers=session).json()["data"] == []
    assert api.post("/v1/labels", json={"name": "Mine"}, headers=session).status_code == 201
    viewer = _member_headers(api, "viewer")
    assert api.get("/v1/labels", headers=viewer).status_code == 200
    api.assert_error(api.post("/v1/labels", json={"name": "x"}, headers=viewer), 403, "forbidden")
    api.assert_error(api.delete(f"/v1/labels/{label['id']}", headers=viewer), 403, "forbidden")


def test_chat_labels_attach_detach_filter_and_events(api: Api, conv: dict, channel: dict):
    vip = api.post("/v1/labels", json={"name": "VIP"}).json()["data"]
    attach = api.post("/v1/labels/chats/attach", json={"label_id": vip["id"], "conversation_id": conv["id"]})
    assert attach.status_code == 200, attach.text
    body = attach.json()["data"]
    assert body["changed"] is True and body["labels"] == [vip["id"]] and body["provider_sync"] == "synced"
    again = api.post("/v1/labels/chats/attach", json={"label_id": vip["id"], "chat_id": PHONE}).json()["data"]
    assert again["changed"] is False and again["conversation_id"] == conv["id"]
    by_jid = {"label_id": vip["id"], "chat_id": f"{DIGITS}@s.whatsapp.net", "channel_id": channel["id"]}
    assert api.post("/v1/labels/chats/attach", json=by_jid).json()["data"]["changed"] is False
    assert len(_label_events(api)) == 1

    listed = api.get("/v1/conversations", params={"label": vip["id"]}).json()["data"]
    assert [c["id"] for c in listed] == [conv["id"]]
    assert api.get(f"/v1/conversations/{conv['id']}").json()["data"]["labels"] == [vip["id"]]

    detach = api.post("/v1/labels/chats/detach", json={"label_id": vip["id"], "conversation_id": conv["id"]})
    assert detach.json()["data"]["changed"] is True and detach.json()["data"]["labels"] == []
    assert (
        api.post("/v1/labels/chats/detach", json={"label_id": vip["id"], "chat_id": PHONE}).json()["data"]["changed"]
        is False
    )
    events = _label_events(api)
    assert [e["action"] for e in events] == ["label_added", "label_removed"]
    assert api.get("/v1/conversations", params={"label": vip["id"]}).json()["data"] == []

    api.assert_error(api.post("/v1/labels/chats/attach", json={"label_id": vip["id"]}), 400, "validation_failed")
    both = {"label_id": vip["id"], "chat_id": PHONE, "conversation_id": conv["id"]}
    api.assert_error(api.post("/v1/labels/chats/attach", json=both), 400, "validation_failed")
    unknown = {"label_id": "lb_nope", "conversation_id": conv["id"]}
    api.assert_error(api.post("/v1/labels/chats/attach", json=unknown), 404, "not_found")
    api.assert_error(
        api.post("/v1/labels/chats/attach", json={"label_id": vip["id"], "chat_id": "+14155550199"}), 404, "not_found"
    )
    api.assert_error(
        api.post("/v1/labels/chats/attach", json={"label_id": vip["id"], "chat_id": "not a phone"}),
        400,
        "validation_failed",
    )


def test_conversation_label_routes_and_label_delete_detaches(api: Api, conv: dict):
    cid = conv["id"]
    assert api.get(f"/v1/conversations/{cid}/labels").json() == {
        "data": [],
        "meta": {"has_more": False, "limit": 0, "total": 0},
    }
    by_name = api.post(f"/v1/conversations/{cid}/labels", json={"name": "Urgent", "color": "#00ff00"})
    assert by_name.status_code == 200, by_name.text
    (urgent,) = by_name.json()["data"]
    assert urgent["name"] == "Urgent" and urgent["color"] == "#00ff00"
    assert [x["id"] for x in api.get("/v1/labels").json()["data"]] == [urgent["id"]]
    vip = api.post("/v1/labels", json={"name": "VIP"}).json()["data"]
    both = api.post(f"/v1/conversations/{cid}/labels", json={"label_id": vip["id"]}).json()["data"]
    assert [x["id"] for x in both] == [urgent["id"], vip["id"]]
    again = api.post(f"/v1/conversations/{cid}/labels", json={"name": "urgent"}).json()["data"]
    assert len(again) == 2
    assert len(_label_events(api)) == 2
    api.assert_error(api.post(f"/v1/conversations/{cid}/labels", json={}), 400, "validation_failed")
    api.assert_error(api.post("/v1/conversations/cv_nope/labels", json={"label_id": vip["id"]}), 404, "not_found")

    assert api.delete(f"/v1/conversations/{cid}/labels/{urgent['id']}").status_code == 204
    assert api.delete(f"/v1/conversations/{cid}/labels/{urgent['id']}").status_code == 204  # no-op
    assert [x["id"] for x in api.get(f"/v1/conversations/{cid}/labels").json()["data"]] == [vip["id"]]
    assert len(_label_events(api)) == 3

    assert api.delete(f"/v1/labels/{vip['id']}").status_code == 204
    run_jobs(api)  # the label.detach job
    assert api.get(f"/v1/conversations/{cid}").json()["data"]["labels"] == []
    assert [e["action"] for e in _label_events(api)][-1] == "label_removed"
    assert len(_label_events(api)) == 4


def test_message_labels(api: Api, channel: dict, conv: dict):
    label = api.post("/v1/labels", json={"name": "Invoice"}).json()["data"]
    msg = api.get(f"/v1/conversations/{conv['id']}/messages").json()["data"][0]
    ref = {"label_id": label["id"], "message_id": msg["id"]}
    first = api.post("/v1/labels/messages/attach", json=ref).json()["data"]
    assert first == {
        "label_id": label["id"],
        "conversation_id": None,
        "message_id": msg["id"],
        "attached": True,
        "changed": True,
        "labels": [label["id"]],
        "provider_sync": "synced",
    }
    assert api.post("/v1/labels/messages/attach", json=ref).json()["data"]["changed"] is False
    gone = api.post("/v1/labels/messages/detach", json=ref).json()["data"]
    assert gone["changed"] is True and gone["labels"] == []
    assert api.post("/v1/labels/messages/detach", json=ref).json()["data"]["changed"] is False
    api.assert_error(api.post("/v1/labels/messages/attach", json={**ref, "message_id": "0190-nope"}), 404, "not_found")
    api.assert_error(api.post("/v1/labels/messages/attach", json={"label_id": label["id"]}), 400, "validation_failed")
    api.post("/v1/labels/messages/attach", json=ref)
    assert api.delete(f"/v1/labels/{label['id']}").status_code == 204
    run_jobs(api)
    assert "labels" not in status.get_message(get_store(), api.org_id, msg["id"])


def test_chat_actions_change_the_conversation(api: Api, channel: dict, conv: dict):
    ref = {"channel_id": channel["id"], "chat_id": PHONE}
    archived = api.post("/v1/chats/archive", json=ref)
    assert archived.status_code == 200, archived.text
    assert archived.json()["data"]["archived"] is True and archived.json()["data"]["id"] == conv["id"]
    assert api.post("/v1/chats/unarchive", json={**ref, "chat_id": conv["id"]}).json()["data"]["archived"] is False
    assert api.post("/v1/chats/pin", json=ref).json()["data"]["pinned"] is True
    assert api.post("/v1/chats/unpin", json=ref).json()["data"]["pinned"] is False
    muted = api.post("/v1/chats/mute", json={**ref, "until": "2999-01-01T00:00:00.000Z"}).json()["data"]
    assert muted["muted"] is True and muted["muted_until"] == "2999-01-01T00:00:00.000Z"
    assert api.post("/v1/chats/unmute", json=ref).json()["data"]["muted"] is False
    api.assert_error(
        api.post("/v1/chats/mute", json={**ref, "until": "2000-01-01T00:00:00Z"}), 400, "validation_failed"
    )
    changes = [e["payload"]["changes"] for e in _events(api, "conversation.updated")]
    assert len(changes) == 7 and changes[0] == ["preview", "unread_count"]  # its inbound message, then each action
    assert api.post("/v1/chats/unpin", json=ref).status_code == 200
    assert len(_events(api, "conversation.updated")) == 7  # no real change, no event

    other = api.post("/v1/channels", json={"name": "other", "platform": "sandbox"}).json()["data"]
    api.assert_error(api.post("/v1/chats/pin", json={"channel_id": other["id"], "chat_id": PHONE}), 404, "not_found")
    api.assert_error(
        api.post("/v1/chats/pin", json={"channel_id": other["id"], "chat_id": conv["id"]}), 404, "not_found"
    )
    api.assert_error(api.post("/v1/chats/pin", json={"channel_id": "ch_nope", "chat_id": PHONE}), 404, "not_found")
    api.assert_error(api.post("/v1/chats/pin", json={"channel_id": channel["id"]}), 400, "validation_failed")
    viewer = _member_headers(api, "viewer")
    api.assert_error(api.post("/v1/chats/pin", json=ref, headers=viewer), 403, "forbidden")


def test_chat_actions_reach_a_provider_that_has_them(api: Api, channel: dict, conv: dict, monkeypatch):
    calls: list[tuple[str, dict]] = []
    monkeypatch.setattr(SandboxProvider, "chats", lambda self, action, payload: calls.append((action, payload)), False)
    assert api.post("/v1/chats/pin", json={"channel_id": channel["id"], "chat_id": PHONE}).status_code == 200
    assert calls == [("pin", {"chat_id": DIGITS, "conversation_id": conv["id"]})]


def test_call_reject_needs_a_provider_that_can(api: Api, channel: dict, monkeypatch):
    body = {"channel_id": channel["id"], "call_id": "call-1", "from": PHONE}
    error = api.assert_error(api.post("/v1/calls/reject", json=body), 400, "unsupported_by_provider")
    assert error["details"] == [{"platform": "sandbox", "operation": "rejecting calls"}]
    seen: list[tuple] = []

    def reject_call(self, call_id, from_phone):
        seen.append((call_id, from_phone))
        return {"ok": True}

    monkeypatch.setattr(SandboxProvider, "reject_call", reject_call, False)
    resp = api.post("/v1/calls/reject", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"] == {
        "channel_id": channel["id"],
        "call_id": "call-1",
        "status": "rejected",
        "provider": {"ok": True},
    }
    assert seen == [("call-1", DIGITS)]
    api.assert_error(api.post("/v1/calls/reject", json={"channel_id": channel["id"]}), 400, "validation_failed")
    api.assert_error(api.post("/v1/calls/reject", json={**body, "channel_id": "ch_x"}), 404, "not_found")


def test_history_sync_on_the_sandbox_completes_at_once(api: Api, channel: dict, conv: dict):
    api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": PHONE, "text": "again"})
    api.assert_error(api.get(f"/v1/conversations/{conv['id']}/history-sync"), 404, "not_found")
    resp = api.post(f"/v1/conversations/{conv['id']}/history-sync")
    assert resp.status_code == 200, resp.text
    sync = resp.json()["data"]
    assert sync["status"] == "completed" and sync["messages_synced"] == 2 and sync["id"].startswith("hs_")
    assert sync["completed_at"] and sync["conversation_id"] == conv["id"] and sync["channel_id"] == channel["id"]
    assert api.get(f"/v1/conversations/{conv['id']}/history-sync").json()["data"] == sync
    by_chat = api.post("/v1/chats/history-sync", json={"channel_id": channel["id"], "chat_id": PHONE})
    assert by_chat.status_code == 200 and by_chat.json()["data"]["messages_synced"] == 2
    assert api.get(f"/v1/conversations/{conv['id']}/history-sync").json()["data"]["id"] == by_chat.json()["data"]["id"]
    api.assert_error(api.post("/v1/conversations/cv_nope/history-sync"), 404, "not_found")
