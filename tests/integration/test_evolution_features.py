"""Groups, labels and chats of a whatsapp_web channel on Evolution API, through the API against the fake engine; what
Evolution lacks (newsletters, communities, label creation, pin, mute, call rejection) is 400 unsupported_by_provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.evolution import FakeEvolution
from tests.integration.support import Api

ADA, BOB, CAT = "4915112345671", "4915112345672", "4915112345673"


@pytest.fixture
def evo() -> Iterator[FakeEvolution]:
    with FakeEvolution(api_key="k") as fake:
        yield fake


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture
def web(api: Api, evo: FakeEvolution) -> dict[str, Any]:
    config = {"engine": "evolution", "base_url": evo.url, "api_key": "k"}
    channel = _ok(api.post("/v1/channels", json={"name": "evo", "platform": "whatsapp_web", "config": config}), 201)
    _ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    evo.link(channel["id"])
    body, headers = evo.webhook(channel["id"], "connection.update", evo.connection_update(channel["id"]))
    _ok(api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers))
    return channel


def test_group_lifecycle_reaches_evolution(api: Api, evo: FakeEvolution, web: dict[str, Any]):
    instance = evo.instances[web["id"]]
    evo.numbers_on_whatsapp = {ADA, BOB, CAT}
    group = _ok(
        api.post(
            "/v1/groups",
            json={
                "channel_id": web["id"],
                "name": "Team",
                "description": "Ours",
                "participants": [ADA, "+14155550999"],
            },
        ),
        201,
    )
    jid = group["jid"]
    assert instance.groups[jid]["subject"] == "Team" and instance.groups[jid]["desc"] == "Ours"
    assert [p["phone"] for p in group["participants"]] == [ADA]
    assert evo.requests_to("POST", f"/group/create/{web['id']}")[0].json == {
        "subject": "Team",
        "participants": [ADA, "14155550999"],
        "description": "Ours",
    }
    _ok(api.post(f"/v1/groups/{jid}/name", json={"name": "Renamed"}))
    assert instance.groups[jid]["subject"] == "Renamed"
    assert evo.last.query == {"groupJid": jid}
    _ok(api.post(f"/v1/groups/{group['id']}/description", json={"description": "About"}))
    _ok(api.post(f"/v1/groups/{group['id']}/photo", json={"image_url": "https://cdn.example/p.png"}))
    assert instance.groups[jid]["picture"] == "https://cdn.example/p.png"
    api.assert_error(api.post(f"/v1/groups/{group['id']}/photo", json={"remove": True}), 400, "unsupported_by_provider")
    path = f"/v1/groups/{group['id']}/participants/actions"
    added = _ok(api.post(path, json={"action": "add", "participants": [BOB]}))
    assert added["results"][0]["status"] == "added"
    _ok(api.post(path, json={"action": "promote", "participants": [BOB]}))
    assert next(p for p in instance.groups[jid]["participants"] if p["id"].startswith(BOB))["admin"] == "admin"
    evo.numbers_on_whatsapp = {ADA, BOB}
    assert _ok(api.post(path, json={"action": "add", "participants": [CAT]}))["results"][0]["status"] == "failed"
    link = _ok(api.get(f"/v1/groups/{group['id']}/invite-link"))
    revoked = _ok(api.post(f"/v1/groups/{group['id']}/invite-link", json={"revoke": True}))
    assert revoked["invite_code"] == instance.groups[jid]["code"] != link["invite_code"]
    assert _ok(api.post(f"/v1/groups/{group['id']}/leave"))["status"] == "left"
    assert instance.groups[jid]["member"] is False


def test_join_and_what_evolution_lacks(api: Api, evo: FakeEvolution, web: dict[str, Any]):
    code = evo.add_invite(web["id"], "Neighbours", [ADA, BOB])
    joined = _ok(api.post("/v1/groups/join", json={"channel_id": web["id"], "invite_code": code}))
    assert joined["name"] == "Neighbours" and {p["phone"] for p in joined["participants"]} == {ADA, BOB}
    assert evo.requests_to("GET", f"/group/acceptInviteCode/{web['id']}")[0].query == {"inviteCode": code}
    for path, body in (
        ("/v1/communities", {"channel_id": web["id"], "name": "C"}),
        ("/v1/newsletters", {"channel_id": web["id"], "name": "N"}),
        ("/v1/calls/reject", {"channel_id": web["id"], "call_id": "X1", "from": ADA}),
    ):
        api.assert_error(api.post(path, json=body), 400, "unsupported_by_provider")


def test_labels_and_chat_archive(api: Api, evo: FakeEvolution, web: dict[str, Any]):
    instance = evo.instances[web["id"]]
    body, headers = evo.webhook(web["id"], "messages.upsert", evo.inbound(web["id"], ADA, "hello"))
    _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))
    [conv] = _ok(api.get("/v1/conversations"))
    vip = _ok(api.post("/v1/labels", json={"name": "VIP", "color": "#ff9485"}), 201)
    missing = _ok(api.post("/v1/labels/chats/attach", json={"label_id": vip["id"], "conversation_id": conv["id"]}))
    assert missing["provider_sync"] == "unsupported"  # Evolution cannot create labels; the phone has none yet
    instance.labels["7"] = {"id": "7", "name": "vip", "color": "#ff9485", "predefinedId": None}
    _ok(api.post("/v1/labels/chats/detach", json={"label_id": vip["id"], "conversation_id": conv["id"]}))
    attached = _ok(api.post("/v1/labels/chats/attach", json={"label_id": vip["id"], "conversation_id": conv["id"]}))
    assert attached["provider_sync"] == "synced" and instance.chat_labels[f"{ADA}@s.whatsapp.net"] == {"7"}
    archived = _ok(api.post("/v1/chats/archive", json={"channel_id": web["id"], "chat_id": ADA}))
    assert archived["archived"] is True and f"{ADA}@s.whatsapp.net" in instance.archived
    api.assert_error(
        api.post("/v1/chats/pin", json={"channel_id": web["id"], "chat_id": ADA}), 400, "unsupported_by_provider"
    )


def test_group_participant_events_update_the_record(api: Api, evo: FakeEvolution, web: dict[str, Any]):
    group = _ok(api.post("/v1/groups", json={"channel_id": web["id"], "name": "Team", "participants": [ADA]}), 201)
    for action, phones, expected in (("add", [BOB], {ADA, BOB}), ("remove", [ADA], {BOB})):
        data = evo.group_participants(group["jid"], action, phones)
        body, headers = evo.webhook(web["id"], "group-participants.update", data)
        _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))
        assert {p["phone"] for p in _ok(api.get(f"/v1/groups/{group['id']}"))["participants"]} == expected


def test_chat_labels_set_on_the_phone_follow(api: Api, evo: FakeEvolution, web: dict[str, Any]):
    body, headers = evo.webhook(web["id"], "messages.upsert", evo.inbound(web["id"], ADA, "hello"))
    _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))
    [conv] = _ok(api.get("/v1/conversations"))
    ours = _ok(api.post("/v1/labels", json={"name": "Paid", "color": "#55ccb3"}), 201)
    evo.instances[web["id"]].labels["3"] = {"id": "3", "name": "Paid", "color": "#55ccb3"}
    for kind, expected in (("add", [ours["id"]]), ("remove", [])):
        data = {"instance": web["id"], "type": kind, "chatId": f"{ADA}@s.whatsapp.net", "labelId": "3"}
        body, headers = evo.webhook(web["id"], "labels.association", data)
        _ok(api.post(f"/v1/providers/{web['id']}/callback", content=body, headers=headers))
        assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == expected
