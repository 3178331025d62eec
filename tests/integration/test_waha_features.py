"""Groups, newsletters (WAHA "channels"), labels, chats and calls of a whatsapp_web channel on WAHA, through the API
against the fake engine: what reaches the engine, what is stored, and what WAHA lacks (400 unsupported_by_provider)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.waha import FakeWaha
from tests.integration.support import Api

ADA, BOB, CAT = "4915112345671", "4915112345672", "4915112345673"


@pytest.fixture
def waha() -> Iterator[FakeWaha]:
    with FakeWaha(api_key="k") as fake:
        yield fake


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture
def web(api: Api, waha: FakeWaha) -> dict[str, Any]:
    config = {"engine": "waha", "base_url": waha.url, "api_key": "k"}
    channel = _ok(api.post("/v1/channels", json={"name": "web", "platform": "whatsapp_web", "config": config}), 201)
    _ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    waha.link(channel["id"])
    body, headers = waha.webhook(channel["id"], "session.status", waha.session_status(channel["id"]))
    _ok(api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers))
    return channel


def test_capabilities(api: Api, web: dict[str, Any]):
    caps = _ok(api.get(f"/v1/channels/{web['id']}/capabilities"))["capabilities"]
    assert {"groups", "newsletters", "labels", "send", "qr"} <= set(caps)
    assert "templates" not in caps and "privacy" not in caps


def test_group_lifecycle_reaches_waha(api: Api, waha: FakeWaha, web: dict[str, Any]):
    session = waha.sessions[web["id"]]
    waha.numbers_on_whatsapp = {ADA, BOB, CAT}
    created = api.post(
        "/v1/groups",
        json={"channel_id": web["id"], "name": "Team", "description": "Ours", "participants": [ADA, "+1 415 555 0999"]},
    )
    group = _ok(created, 201)
    jid = group["jid"]
    assert jid in session.groups and session.groups[jid]["subject"] == "Team"
    assert session.groups[jid]["desc"] == "Ours"
    assert [p["phone"] for p in group["participants"]] == [ADA]
    assert group["invite_link"] == f"https://chat.whatsapp.com/{session.groups[jid]['invite']}"
    create = waha.requests_to("POST", f"/api/{web['id']}/groups")[0].json
    assert create == {"name": "Team", "participants": [{"id": f"{ADA}@c.us"}, {"id": "14155550999@c.us"}]}

    _ok(api.post(f"/v1/groups/{jid}/name", json={"name": "Renamed"}))
    assert session.groups[jid]["subject"] == "Renamed"
    _ok(api.post(f"/v1/groups/{group['id']}/description", json={"description": "About"}))
    assert session.groups[jid]["desc"] == "About"
    _ok(api.post(f"/v1/groups/{group['id']}/photo", json={"image_url": "https://cdn.example/p.png"}))
    assert session.groups[jid]["picture"] == "https://cdn.example/p.png"
    asset = _ok(api.post("/v1/media/uploads", json={"content_type": "image/png", "size": 10}), 201)
    _ok(api.post(f"/v1/groups/{group['id']}/photo", json={"asset_id": asset["id"]}))
    assert session.groups[jid]["picture"].startswith("http") and asset["id"] in session.groups[jid]["picture"]
    _ok(api.post(f"/v1/groups/{group['id']}/photo", json={"remove": True}))
    assert session.groups[jid]["picture"] is None

    path = f"/v1/groups/{group['id']}/participants/actions"
    added = _ok(api.post(path, json={"action": "add", "participants": [BOB, CAT]}))
    assert [r["status"] for r in added["results"]] == ["added", "added"]
    assert {p["id"] for p in session.groups[jid]["participants"]} == {f"{ADA}@c.us", f"{BOB}@c.us", f"{CAT}@c.us"}
    _ok(api.post(path, json={"action": "promote", "participants": [BOB]}))
    assert next(p for p in session.groups[jid]["participants"] if p["id"] == f"{BOB}@c.us")["admin"] == "admin"
    _ok(api.post(path, json={"action": "demote", "participants": [BOB]}))
    _ok(api.post(path, json={"action": "remove", "participants": [CAT]}))
    assert f"{CAT}@c.us" not in {p["id"] for p in session.groups[jid]["participants"]}
    waha.numbers_on_whatsapp = {ADA, BOB}
    refused = _ok(api.post(path, json={"action": "add", "participants": [CAT]}))
    assert refused["results"][0]["status"] == "failed"

    link = _ok(api.get(f"/v1/groups/{group['id']}/invite-link"))
    assert link["invite_code"] == session.groups[jid]["invite"]
    revoked = _ok(api.post(f"/v1/groups/{group['id']}/invite-link", json={"revoke": True}))
    assert revoked["invite_code"] != link["invite_code"]
    assert revoked["invite_code"] == session.groups[jid]["invite"]
    assert waha.requests_to("POST", f"/api/{web['id']}/groups/{jid}/invite-code/revoke")

    assert jid in {g["jid"] for g in _ok(api.get(f"/v1/channels/{web['id']}/groups"))}
    left = _ok(api.post(f"/v1/groups/{group['id']}/leave"))
    assert left["status"] == "left" and session.groups[jid]["member"] is False


def test_join_by_invite_link(api: Api, waha: FakeWaha, web: dict[str, Any]):
    code = waha.add_invite(web["id"], "Neighbours", [ADA, BOB])
    joined = _ok(
        api.post("/v1/groups/join", json={"channel_id": web["id"], "invite_link": f"https://chat.whatsapp.com/{code}"})
    )
    assert joined["name"] == "Neighbours" and {p["phone"] for p in joined["participants"]} == {ADA, BOB}
    assert waha.requests_to("POST", f"/api/{web['id']}/groups/join")[0].json == {"code": code}
    bad = api.post("/v1/groups/join", json={"channel_id": web["id"], "invite_code": "nosuchcode123"})
    api.assert_error(bad, 422, "provider_rejected")


def test_communities_are_not_a_waha_feature(api: Api, web: dict[str, Any]):
    api.assert_error(
        api.post("/v1/communities", json={"channel_id": web["id"], "name": "C"}), 400, "unsupported_by_provider"
    )


def test_newsletters_are_waha_channels(api: Api, waha: FakeWaha, web: dict[str, Any]):
    session = waha.sessions[web["id"]]
    created = _ok(
        api.post("/v1/newsletters", json={"channel_id": web["id"], "name": "News", "description": "Daily"}), 201
    )
    jid = created["jid"]
    assert session.channels[jid]["name"] == "News"
    link = _ok(api.post("/v1/newsletters/invite-link", json={"channel_id": web["id"], "newsletter_jid": jid}))
    assert link["invite_code"] == session.channels[jid]["invite"].rsplit("/", 1)[-1]
    api.assert_error(
        api.post("/v1/newsletters/invite-link", json={"channel_id": web["id"], "newsletter_jid": jid, "revoke": True}),
        400,
        "unsupported_by_provider",
    )
    other = waha.sessions[web["id"]].channels
    other_jid = "120363300000000001@newsletter"
    other[other_jid] = {"id": other_jid, "name": "Elsewhere", "invite": "https://www.whatsapp.com/channel/Abc123XyZ",
                        "verified": True, "role": "GUEST"}  # fmt: skip
    followed = _ok(
        api.post(
            "/v1/newsletters/subscribe",
            json={"channel_id": web["id"], "invite_link": "https://whatsapp.com/channel/Abc123XyZ"},
        )
    )
    assert followed["jid"] == other_jid and other_jid in session.following
    for n in range(3):
        waha.add_post(web["id"], other_jid, f"post {n}")
    page = _ok(api.get(f"/v1/newsletters/{other_jid}/messages", params={"channel_id": web["id"], "limit": 2}))
    assert [m["body"] for m in page["messages"]] == ["post 2", "post 1"] and page["next_cursor"]
    rest = _ok(
        api.get(
            f"/v1/newsletters/{other_jid}/messages",
            params={"channel_id": web["id"], "limit": 2, "cursor": page["next_cursor"]},
        )
    )
    assert [m["body"] for m in rest["messages"]] == ["post 0"] and rest["next_cursor"] == ""
    _ok(
        api.post(
            "/v1/newsletters/subscribe",
            json={"channel_id": web["id"], "newsletter_jid": other_jid, "unsubscribe": True},
        )
    )
    assert other_jid not in session.following


def _conversation(api: Api, waha: FakeWaha, web: dict[str, Any]) -> dict[str, Any]:
    body, headers = waha.webhook(web["id"], "message", waha.inbound(web["id"], ADA, "hello"))
    _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))
    [conv] = _ok(api.get("/v1/conversations"))
    return conv


def test_labels_on_chats_reach_waha_and_messages_are_unsupported(api: Api, waha: FakeWaha, web: dict[str, Any]):
    session = waha.sessions[web["id"]]
    conv = _conversation(api, waha, web)
    label = _ok(api.post("/v1/labels", json={"name": "VIP", "color": "#ff9485"}), 201)
    attached = _ok(api.post("/v1/labels/chats/attach", json={"label_id": label["id"], "conversation_id": conv["id"]}))
    assert attached["provider_sync"] == "synced"
    [engine_label] = session.labels.values()
    assert engine_label["name"] == "VIP" and session.chat_labels[f"{ADA}@c.us"] == [engine_label["id"]]
    assert waha.requests_to("POST", f"/api/{web['id']}/labels")[0].json == {"name": "VIP", "color": 0}
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == [label["id"]]
    detached = _ok(api.post("/v1/labels/chats/detach", json={"label_id": label["id"], "conversation_id": conv["id"]}))
    assert detached["provider_sync"] == "synced" and session.chat_labels[f"{ADA}@c.us"] == []
    [message] = _ok(api.get(f"/v1/conversations/{conv['id']}/messages"))
    on_message = _ok(
        api.post("/v1/labels/messages/attach", json={"label_id": label["id"], "message_id": message["id"]})
    )
    assert on_message["provider_sync"] == "unsupported"


def test_chat_actions_and_call_reject(api: Api, waha: FakeWaha, web: dict[str, Any]):
    session = waha.sessions[web["id"]]
    _conversation(api, waha, web)
    archived = _ok(api.post("/v1/chats/archive", json={"channel_id": web["id"], "chat_id": ADA}))
    assert archived["archived"] is True and f"{ADA}@c.us" in session.archived
    _ok(api.post("/v1/chats/unarchive", json={"channel_id": web["id"], "chat_id": ADA}))
    assert session.archived == set()
    for action in ("pin", "mute"):
        api.assert_error(
            api.post(f"/v1/chats/{action}", json={"channel_id": web["id"], "chat_id": ADA}),
            400,
            "unsupported_by_provider",
        )
    [conv] = _ok(api.get("/v1/conversations"))
    assert conv["pinned"] is False and conv["muted"] is False  # nothing changed
    api.assert_error(api.post(f"/v1/conversations/{conv['id']}/history-sync"), 400, "unsupported_by_provider")
    rejected = _ok(api.post("/v1/calls/reject", json={"channel_id": web["id"], "call_id": "ABC123", "from": ADA}))
    assert rejected["status"] == "rejected"
    assert session.rejected_calls == [{"from": f"{ADA}@c.us", "id": "ABC123"}]


def test_group_events_update_the_record(api: Api, waha: FakeWaha, web: dict[str, Any]):
    group = _ok(api.post("/v1/groups", json={"channel_id": web["id"], "name": "Team", "participants": [ADA]}), 201)
    jid = group["jid"]

    def event(name: str, payload: dict[str, Any]) -> None:
        body, headers = waha.webhook(web["id"], name, payload)
        _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))

    def stored() -> dict[str, Any]:
        return _ok(api.get(f"/v1/groups/{group['id']}"))

    event("group.v2.participants", waha.group_participants(jid, "join", [BOB, CAT]))
    assert {p["phone"] for p in stored()["participants"]} == {ADA, BOB, CAT}
    event("group.v2.participants", waha.group_participants(jid, "promote", [BOB], role="admin"))
    assert {p["phone"]: p["role"] for p in stored()["participants"]}[BOB] == "admin"
    event("group.v2.participants", waha.group_participants(jid, "leave", [CAT], role="left"))
    assert {p["phone"] for p in stored()["participants"]} == {ADA, BOB}
    event("group.v2.update", {"group": {"id": jid, "subject": "Renamed on the phone"}, "timestamp": 1, "_data": {}})
    assert stored()["name"] == "Renamed on the phone"
    event("group.v2.participants", waha.group_participants("120363999999999999@g.us", "join", [BOB]))  # unknown group
    event("group.v2.leave", {"group": {"id": jid}, "timestamp": 2, "_data": {}})
    assert stored()["status"] == "left"


def test_chat_labels_set_on_the_phone_follow(api: Api, waha: FakeWaha, web: dict[str, Any]):
    session = waha.sessions[web["id"]]
    conv = _conversation(api, waha, web)
    ours = _ok(api.post("/v1/labels", json={"name": "Paid", "color": "#55ccb3"}), 201)
    session.labels["5"] = {"id": "5", "name": "paid", "color": 5, "colorHex": "#55ccb3"}

    def event(name: str, payload: dict[str, Any]) -> None:
        body, headers = waha.webhook(web["id"], name, payload)
        _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))

    chat = f"{ADA}@c.us"
    event("label.chat.added", {"labelId": "5", "label": session.labels["5"], "chatId": chat})
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == [ours["id"]]
    event("label.chat.deleted", {"labelId": "5", "label": None, "chatId": chat})  # the name comes from the engine
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == []
    session.labels["6"] = {"id": "6", "name": "Only on the phone", "color": 1, "colorHex": "#64c4ff"}
    event("label.chat.added", {"labelId": "6", "label": session.labels["6"], "chatId": chat})
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == []
    assert session.chat_labels == {}  # nothing was written back to the engine
