"""Messaging rules through the API and the services: status precedence, duplicates, capabilities, idempotency."""

from __future__ import annotations

import base64
import json

import pytest

from switchboard.events.outbox import stored_events
from switchboard.messaging import messages, status
from switchboard.providers.base import InboundMessage, StatusCallback
from switchboard.store import get_store
from tests.helpers import count_query_items
from tests.integration.support import Api


@pytest.fixture
def channel(api: Api) -> dict:
    ch = api.post(
        "/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {"api_token": "long-secret-value-1234"}}
    )
    assert ch.status_code == 201, ch.text
    assert ch.json()["data"]["config"] == {"api_token": "••••1234"}
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


def _events(api: Api, kind: str) -> list[dict]:
    return [e for e in stored_events(get_store(), api.org_id) if e["event_type"] == kind]


def _send(api: Api, channel: dict, to: str = "+14155552671", **extra) -> dict:
    resp = api.post("/v1/messages", json={"channel_id": channel["id"], "to": to, "text": {"body": "hi"}}, **extra)
    assert resp.status_code == 202, resp.text
    return resp.json()["data"]


def test_channel_fields_list_and_lifecycle(api: Api, channel: dict):
    expected = {
        "id",
        "organization_id",
        "name",
        "phone_number",
        "platform",
        "mode",
        "status",
        "is_active",
        "last_connected_at",
        "last_error",
        "linked_channel_id",
        "metadata",
        "config",
        "created_at",
        "updated_at",
    }
    assert set(channel) == expected and channel["status"] == "connected" and channel["mode"] == "sandbox"
    listed = api.get("/v1/channels", params={"limit": 1, "offset": 0}).json()
    assert listed["meta"] == {"has_more": False, "limit": 1, "offset": 0, "total": 1}
    api.assert_error(api.get("/v1/channels", params={"limit": 101}), 400, "validation_failed")
    api.assert_error(api.get("/v1/channels", params={"offset": -1}), 400, "validation_failed")
    assert api.post(f"/v1/channels/{channel['id']}/disconnect").json()["data"]["status"] == "disconnected"
    assert api.post(f"/v1/channels/{channel['id']}/reconnect").json()["data"]["status"] == "connected"
    assert api.post(f"/v1/channels/{channel['id']}/reconnect/force").json()["data"]["status"] == "connected"
    assert api.get(f"/v1/channels/{channel['id']}/status").json()["data"]["status"] == "connected"
    events = [e["event"] for e in api.get(f"/v1/channels/{channel['id']}/logs").json()["data"]]
    assert events[:3] == ["reconnected", "connected", "disconnected"]
    caps = api.get(f"/v1/channels/{channel['id']}/capabilities").json()["data"]["capabilities"]
    assert "send" in caps and "qr" not in caps
    api.assert_error(api.get(f"/v1/channels/{channel['id']}/qr"), 400, "unsupported_by_provider")
    api.assert_error(api.post("/v1/channels", json={"name": "x", "platform": "telegram"}), 400, "validation_failed")


def test_settings_documents_and_provider_lookup(api: Api, channel: dict):
    cid = channel["id"]
    assert api.put(f"/v1/channels/{cid}/settings/advanced", json={"auto_read": True}).json()["data"] == {
        "auto_read": True
    }
    assert api.get(f"/v1/channels/{cid}/settings/advanced").json()["data"] == {"auto_read": True}
    proxy = {"host": "proxy.example.com", "port": 8080, "password": "hunter22"}
    assert api.put(f"/v1/channels/{cid}/proxy", json=proxy).json()["data"]["password"] == "••••"
    api.assert_error(api.put(f"/v1/channels/{cid}/proxy", json={"host": "x", "port": 0}), 400, "validation_failed")
    enabled = api.post(f"/v1/channels/{cid}/settings/phone/two-step/enable", json={"pin": "123456"}).json()["data"]
    assert enabled == {"enabled": True, "email": None}
    assert "pin" not in api.get(f"/v1/channels/{cid}/settings/phone/two-step").text
    looked = api.post(f"/v1/channels/{cid}/contacts/lookup", json={"phone": "+1 415 555 2671"}).json()["data"]
    assert looked["exists"] is True and looked["phone"] == "14155552671"
    assert api.put(f"/v1/channels/{cid}/profile", json={"about": "Hi"}).json()["data"]["about"] == "Hi"


def test_channel_update_refuses_null_for_required_fields(api: Api, channel: dict):
    # Found by the contract fuzzer: PATCH {"name": null} was stored, and every later read of the channel was a 500.
    cid = channel["id"]
    for body in ({"name": None}, {"is_active": None}, {"linked_channel_id": None, "name": None}):
        api.assert_error(api.patch(f"/v1/channels/{cid}", json=body), 400, "validation_failed")
    assert api.patch(f"/v1/channels/{cid}", json={"linked_channel_id": None}).status_code == 200
    assert api.get(f"/v1/channels/{cid}").json()["data"]["name"] == channel["name"]
    assert api.delete(f"/v1/channels/{cid}").status_code == 204


def test_settings_document_with_an_empty_key_is_refused_and_the_channel_stays_readable(api: Api, channel: dict):
    # Found by the contract fuzzer: `{"a": {"": [false]}}` was stored, and every later read of the channel was a 500.
    cid = channel["id"]
    for path in ("privacy", "profile", "settings/advanced"):
        resp = api.put(f"/v1/channels/{cid}/{path}", json={"a": {"": [False], "b": 1}})
        api.assert_error(resp, 400, "validation_failed")
    deep: dict = {}
    for _ in range(20):
        deep = {"x": deep}
    api.assert_error(api.put(f"/v1/channels/{cid}/privacy", json=deep), 400, "validation_failed")
    # ... and a number DynamoDB cannot hold (1.8e257) was a 500 from the table.
    for number in (1.8392826729454388e257, 1e-200, 10**40 + 1):
        resp = api.put(f"/v1/channels/{cid}/settings/advanced", json={"x": [None, {"n": number}]})
        api.assert_error(resp, 400, "validation_failed")
    assert api.put(f"/v1/channels/{cid}/settings/advanced", json={"x": 1.5e100, "y": 10**30}).status_code == 200
    # The same rule for a channel's config, on create and update.
    for config in ({"": 1}, {"a": {"n": 1.8e257}}):
        body = {"name": "bad config", "platform": "sandbox", "config": config}
        api.assert_error(api.post("/v1/channels", json=body), 400, "validation_failed")
        api.assert_error(api.patch(f"/v1/channels/{cid}", json={"config": config}), 400, "validation_failed")
    assert api.get(f"/v1/channels/{cid}").status_code == 200
    assert api.get(f"/v1/channels/{cid}").status_code == 200
    assert api.get(f"/v1/channels/{cid}/privacy").status_code == 200


def test_status_never_moves_backwards_and_each_change_emits_one_event(api: Api, channel: dict):
    msg = _send(api, channel)
    store, org = get_store(), api.org_id
    item = messages.get_item(store, org, msg["id"])
    assert messages.deliver(store, org, msg["id"]) == "sent"
    assert messages.deliver(store, org, msg["id"]) == "skipped"  # a redelivered queue message does nothing
    sent = messages.get_item(store, org, msg["id"])
    assert sent["status"] == "sent" and sent["provider_message_id"].startswith("sbx_")
    ch = {"id": channel["id"]}
    pmid = sent["provider_message_id"]
    assert messages.status_callback(store, org, ch, StatusCallback(pmid, "read")) is True
    assert messages.status_callback(store, org, ch, StatusCallback(pmid, "delivered")) is False  # late: recorded only
    assert messages.status_callback(store, org, ch, StatusCallback(pmid, "failed", error="late")) is False
    assert messages.status_callback(store, org, ch, StatusCallback("unknown", "read")) is False
    final = api.get(f"/v1/messages/{msg['id']}").json()["data"]
    assert final["status"] == "read" and final["last_error"] is None
    updates = [
        e["payload"]["status"] for e in _events(api, "message.status_update") if e["payload"]["message_id"] == msg["id"]
    ]
    assert sorted(updates) == ["read", "sent"]
    assert len([e for e in _events(api, "message.sent") if e["payload"]["message_id"] == msg["id"]]) == 1
    history = api.get(f"/v1/messages/{msg['id']}/status").json()["data"]["history"]
    assert [(h["status"], h["applied"]) for h in history] == [
        ("pending", True),
        ("sent", True),
        ("read", True),
        ("delivered", False),
        ("failed", False),
    ]
    assert item["status"] == "pending"


def test_a_message_its_first_status_and_its_event_carry_one_time(api: Api, channel: dict):
    """A send reads the clock once: the message's `created_at`, its `pending` status row and its `message.queued`
    event's `occurred_at` are the same instant; an inbound message and its `message.new` event likewise."""
    store, org = get_store(), api.org_id
    msg = _send(api, channel)
    (queued,) = [e for e in _events(api, "message.queued") if e["payload"]["message_id"] == msg["id"]]
    (pending,) = api.get(f"/v1/messages/{msg['id']}/status").json()["data"]["history"]
    assert msg["created_at"] == pending["at"] == queued["occurred_at"]

    ch = store.get({"PK": f"ORG#{org}", "SK": f"CHANNEL#{channel['id']}"})
    inbound = InboundMessage(provider_message_id="wamid.T1", from_phone="14155552671", type="text", text="hi")
    received = messages.receive(store, org, ch, inbound)
    (new,) = [e for e in _events(api, "message.new") if e["payload"]["message_id"] == received.message_id]
    assert messages.get_item(store, org, received.message_id)["created_at"] == new["occurred_at"]


def test_message_actions_record_their_change_on_the_message(api: Api, channel: dict):
    """`text` is a DynamoDB reserved word: the edit wrote `SET text = :text` and answered 500."""
    msg = _send(api, channel)
    assert messages.deliver(get_store(), api.org_id, msg["id"]) == "sent"
    edited = api.post("/v1/messages/edit", json={"message_id": msg["id"], "text": "hi again"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["data"]["text"] == "hi again" and edited.json()["data"]["action"] == "edit"
    assert messages.get_item(get_store(), api.org_id, msg["id"])["text"] == "hi again"
    reacted = api.post("/v1/messages/react", json={"message_id": msg["id"], "emoji": "👍"})
    assert reacted.status_code == 200 and reacted.json()["data"]["reaction"] == "👍"
    assert api.post("/v1/messages/read", json={"message_id": msg["id"]}).status_code == 200
    deleted = api.post("/v1/messages/delete", json={"message_id": msg["id"]})
    assert deleted.status_code == 200 and messages.get_item(get_store(), api.org_id, msg["id"])["deleted"] is True


def test_failed_replaces_only_pending_or_sent():
    assert status.allowed_from("failed") == ["pending", "sent"]
    assert status.allowed_from("read") == ["pending", "sent", "delivered"]
    assert "read" not in status.allowed_from("delivered")


def test_refused_recipient_fails_with_last_error(api: Api, channel: dict):
    msg = _send(api, channel, to="+14155550000")
    assert messages.deliver(get_store(), api.org_id, msg["id"]) == "failed"
    failed = api.get(f"/v1/messages/{msg['id']}").json()["data"]
    assert failed["status"] == "failed" and "0000" in failed["last_error"]


def test_duplicate_inbound_callbacks_store_one_message_and_one_event(api: Api, channel: dict):
    store, org = get_store(), api.org_id
    ch = store.get({"PK": f"ORG#{org}", "SK": f"CHANNEL#{channel['id']}"})
    inbound = InboundMessage(provider_message_id="wamid.X1", from_phone="14155552671", type="text", text="hi")
    first = messages.receive(store, org, ch, inbound)
    second = messages.receive(store, org, ch, inbound)
    assert second.duplicate is True and second.message_id == first.message_id
    assert len([e for e in _events(api, "message.new") if e["payload"]["message_id"] == first.message_id]) == 1
    thread = api.get(f"/v1/conversations/{first.conversation_id}/messages").json()["data"]
    assert len(thread) == 1


def test_send_honours_idempotency_key(api: Api, channel: dict):
    headers = {**api.owner_headers, "Idempotency-Key": "send-1"}
    body = {"channel_id": channel["id"], "to": "+14155552671", "text": {"body": "once"}}
    first = api.post("/v1/messages", json=body, headers=headers)
    again = api.post("/v1/messages", json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json() and again.headers["idempotent-replayed"] == "true"
    other = api.post("/v1/messages", json={**body, "text": {"body": "twice"}}, headers=headers)
    api.assert_error(other, 409, "idempotency_key_reused")
    queued = _events(api, "message.queued")
    assert len(queued) == 1


def test_conversation_actions_and_filters(api: Api, channel: dict):
    msg = _send(api, channel)
    conv_id = messages.get_item(get_store(), api.org_id, msg["id"])["conversation_id"]
    for action, field, value in (("archive", "archived", True), ("pin", "pinned", True), ("close", "status", "closed")):
        assert api.post(f"/v1/conversations/{conv_id}/{action}").json()["data"][field] == value
    assert api.get("/v1/conversations", params={"status": "closed"}).json()["data"][0]["id"] == conv_id
    assert api.get("/v1/conversations", params={"status": "open"}).json()["data"] == []
    # Found by the contract fuzzer: an `until` that is no date was a 500.
    bad = api.post(f"/v1/conversations/{conv_id}/mute", json={"until": "0000-00-00T"})
    assert api.assert_error(bad, 400, "validation_failed")["details"][0]["field"] == "body.until"
    muted = api.post(f"/v1/conversations/{conv_id}/mute", json={"until": "2999-01-01T00:00:00Z"}).json()["data"]
    assert muted["muted"] is True
    owner_id = api.get("/v1/members").json()["data"][0]["user_id"]
    assigned = api.post(f"/v1/conversations/{conv_id}/assign", json={"user_id": owner_id}).json()["data"]
    assert assigned["assignee"] == {"type": "user", "id": owner_id}
    assert api.get("/v1/conversations", params={"assignee": owner_id}).json()["data"][0]["id"] == conv_id
    api.assert_error(api.post(f"/v1/conversations/{conv_id}/assign", json={"user_id": "usr_x"}), 404, "not_found")
    updates = _events(api, "conversation.updated")
    # the sent message's preview, then one per action that changed something
    assert len(updates) == 6 and all(e["payload"]["conversation_id"] == conv_id for e in updates)
    before = len(updates)
    api.post(f"/v1/conversations/{conv_id}/archive")  # no change, no event
    assert len(_events(api, "conversation.updated")) == before


def test_lock_claim_refresh_conflict_release(api: Api, channel: dict):
    msg = _send(api, channel)
    conv_id = messages.get_item(get_store(), api.org_id, msg["id"])["conversation_id"]
    mine = api.post(f"/v1/conversations/{conv_id}/lock", json={"lock_owner_name": "Ann", "draft_id": "d1"})
    assert mine.status_code == 200 and mine.json()["data"]["draft_id"] == "d1"
    assert api.post(f"/v1/conversations/{conv_id}/lock", json={"lock_owner_name": "Ann"}).status_code == 200
    other_key = api.post("/v1/api-keys", json={"name": "agent", "role": "member"}).json()["data"]["key"]
    other = {"X-Api-Key": other_key}
    held = api.post(f"/v1/conversations/{conv_id}/lock", json={"lock_owner_name": "Bob"}, headers=other)
    err = api.assert_error(held, 409, "lock_held")
    assert err["details"][0]["lock_owner_name"] == "Ann"
    api.assert_error(api.delete(f"/v1/conversations/{conv_id}/lock", headers=other), 403, "forbidden")
    assert api.delete(f"/v1/conversations/{conv_id}/lock").status_code == 204
    assert (
        api.post(f"/v1/conversations/{conv_id}/lock", json={"lock_owner_name": "Bob"}, headers=other).status_code == 200
    )
    api.assert_error(
        api.post(f"/v1/conversations/{conv_id}/lock", json={"lock_owner_name": ""}), 400, "validation_failed"
    )


def test_media_download_and_uploads(api: Api, channel: dict):
    body = {"channel_id": channel["id"], "media_id": "m1", "message_id": "wamid.1", "message_payload": "{}"}
    got = api.post("/v1/messages/media/download", json=body).json()["data"]
    assert set(got) == {"media_id", "data", "file_name", "mime_type", "size", "source_url", "expires_at"}
    assert got["media_id"] == "m1" and got["expires_at"] is None and got["size"] == len(base64.b64decode(got["data"]))
    short = api.post("/v1/messages/media/download", json={**body, "message_payload": "x"})
    assert api.assert_error(short, 400, "validation_failed")["details"][0]["field"] == "body.message_payload"
    ticket = api.post("/v1/media/uploads", json={"content_type": "image/png", "size": 10, "file_name": "a.png"})
    assert ticket.status_code == 201 and ticket.json()["data"]["upload_url"].startswith("http")
    asset_id = ticket.json()["data"]["id"]
    assert api.get(f"/v1/media/assets/{asset_id}").json()["data"]["file_name"] == "a.png"
    assert [a["id"] for a in api.get("/v1/media/assets").json()["data"]] == [asset_id]
    api.assert_error(
        api.post("/v1/media/uploads", json={"content_type": "application/x-sh", "size": 1}), 400, "validation_failed"
    )
    assert api.delete(f"/v1/media/assets/{asset_id}").status_code == 204
    api.assert_error(
        api.post("/v1/messages/uploads/image", json={"content_type": "text/plain", "size": 1}), 400, "validation_failed"
    )
    assert json.dumps(got)


def test_message_ids_in_paths_are_uuids(api: Api):
    """The spec: messageID is a UUID. Anything else is refused before a read; an unknown UUID is 404."""
    for path in ("/v1/messages/not-a-uuid", "/v1/messages/msg_123/status"):
        error = api.assert_error(api.get(path), 400, "validation_failed")
        assert error["details"][0]["field"] == "path.messageID", error
    api.assert_error(api.get("/v1/messages/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"), 404, "not_found")


def test_channel_contacts_come_a_page_at_a_time_with_a_cursor_bound_to_the_channel(api: Api, channel: dict):
    numbers = [f"+1415555{3100 + n}" for n in range(5)]
    for number in numbers:
        _send(api, channel, to=number)
    other = api.post("/v1/channels", json={"name": "Other", "platform": "sandbox"}).json()["data"]
    seen: list[str] = []
    page = api.get(f"/v1/channels/{channel['id']}/contacts", params={"limit": 2}).json()
    while True:
        assert len(page["data"]) <= 2 and page["meta"]["limit"] == 2
        seen += [c["phone"] for c in page["data"]]
        if not page["meta"]["has_more"]:
            break
        cursor = page["meta"]["cursor"]
        page = api.get(f"/v1/channels/{channel['id']}/contacts", params={"limit": 2, "cursor": cursor}).json()
    assert sorted(seen) == sorted(n.lstrip("+") for n in numbers)
    assert api.get(f"/v1/channels/{other['id']}/contacts").json()["data"] == []
    first = api.get(f"/v1/channels/{channel['id']}/contacts", params={"limit": 2}).json()["meta"]["cursor"]
    api.assert_error(
        api.get(f"/v1/channels/{other['id']}/contacts", params={"cursor": first}), 400, "validation_failed"
    )


def test_channel_log_and_block_rows_live_apart_from_the_channels_and_older_rows_are_moved(api: Api, channel: dict):
    from switchboard.messaging import channels

    store = get_store()
    blocked = api.post(f"/v1/channels/{channel['id']}/blocked-contacts", json={"phone": "+1 415 555 0199"})
    assert blocked.status_code in (200, 201), blocked.text
    rows = store.query_all(f"ORG#{api.org_id}", sk_prefix="CHANNEL#")
    assert [r["entity"] for r in rows] == ["Channel"]  # listing channels reads no log or block row
    assert store.query_all(f"ORG#{api.org_id}", sk_prefix=f"CHLOG#{channel['id']}#")
    assert api.get(f"/v1/channels/{channel['id']}/blocked-contacts").json()["data"][0]["phone"] == "14155550199"

    # Rows written under the channel's own prefix before: moved by the resumable chunk, then read as usual.
    pk = f"ORG#{api.org_id}"
    store.put({"PK": pk, "SK": f"CHANNEL#{channel['id']}#BLOCK#14155550123", "entity": "ChannelBlock",
               "phone": "14155550123", "blocked_at": "2026-01-01T00:00:00.000Z"})  # fmt: skip
    store.put({"PK": pk, "SK": f"CHANNEL#{channel['id']}#LOG#01JD0000000000000000000000", "entity": "ChannelLog",
               "id": "log_01jd0000000000000000000000", "event": "connected", "detail": {},
               "created_at": "2026-01-01T00:00:00.000Z"})  # fmt: skip
    checkpoint = channels.move_legacy_rows_chunk(store, api.org_id, None)
    while checkpoint is not None:
        checkpoint = channels.move_legacy_rows_chunk(store, api.org_id, checkpoint)
    assert [r["entity"] for r in store.query_all(pk, sk_prefix="CHANNEL#")] == ["Channel"]
    phones = {b["phone"] for b in api.get(f"/v1/channels/{channel['id']}/blocked-contacts").json()["data"]}
    assert phones == {"14155550199", "14155550123"}
    events = [e["event"] for e in api.get(f"/v1/channels/{channel['id']}/logs", params={"limit": 100}).json()["data"]]
    assert "connected" in events and events.count("connected") >= 2


def test_an_assignee_filter_reads_that_assignees_list_and_older_conversations_are_reindexed(
    api: Api, channel: dict, monkeypatch: pytest.MonkeyPatch
):
    from switchboard.messaging import conversations

    convs = [messages.get_item(get_store(), api.org_id, _send(api, channel, to=f"+1415555{3200 + n}")["id"])
             ["conversation_id"] for n in range(30)]  # fmt: skip
    owner_id = api.get("/v1/members").json()["data"][0]["user_id"]
    mine = convs[3]
    assert api.post(f"/v1/conversations/{mine}/assign", json={"user_id": owner_id}).status_code == 200

    read = count_query_items(monkeypatch)
    assert [c["id"] for c in api.get("/v1/conversations", params={"assignee": owner_id}).json()["data"]] == [mine]
    assert sum(read) == 1  # one row read, not the 30 conversations
    read.clear()
    unassigned = api.get("/v1/conversations", params={"assignee": "none", "limit": 100}).json()["data"]
    assert {c["id"] for c in unassigned} == set(convs) - {mine} and sum(read) == 29
    monkeypatch.undo()

    # Conversations written before the assignee list exist only in the organization's list (the unsharded one, as
    # they predate write sharding too) until reindexed.
    store = get_store()
    for conv_id in convs:
        store.update(
            conversations.conv_key(api.org_id, conv_id),
            "SET GSI1PK = :legacy REMOVE GSI2PK, GSI2SK",
            values={":legacy": conversations.list_pk(api.org_id)},
            return_values="NONE",
        )
    assert api.get("/v1/conversations", params={"assignee": "none"}).json()["data"] == []
    checkpoint = conversations.reindex_chunk(store, api.org_id, None)
    while checkpoint is not None:
        checkpoint = conversations.reindex_chunk(store, api.org_id, checkpoint)
    assert [c["id"] for c in api.get("/v1/conversations", params={"assignee": owner_id}).json()["data"]] == [mine]
    assert len(api.get("/v1/conversations", params={"assignee": "none", "limit": 100}).json()["data"]) == 29
