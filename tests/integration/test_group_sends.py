"""issue 30 item 4: `POST /v1/messages` answers a group (`group_id`) or a conversation (`conversation_id`, 1:1 or
group) instead of `to`/`contact_id`; the message reaches the group's chat on WAHA, Evolution and the Cloud API, and
`message.sent` / `message.status_update` follow as for a 1:1 message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.events.outbox import stored_events
from switchboard.messaging import messages
from switchboard.store import get_store
from tests.fakes.evolution import FakeEvolution
from tests.fakes.graph_api import FakeGraphApi
from tests.fakes.waha import FakeWaha
from tests.integration import cloud_queue
from tests.integration.support import Api

ADA = "4915112345671"


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def _events(api: Api, kind: str, message_id: str) -> list[dict]:
    return [
        e["payload"]
        for e in stored_events(get_store(), api.org_id)
        if e["event_type"] == kind and e["payload"].get("message_id") == message_id
    ]


def _send(api: Api, channel_id: str, **recipient: str) -> dict:
    return _ok(
        api.post("/v1/messages", json={"channel_id": channel_id, **recipient, "text": {"body": "hello all"}}), 202
    )


@pytest.fixture
def waha() -> Iterator[FakeWaha]:
    with FakeWaha(api_key="k") as fake:
        yield fake


@pytest.fixture
def waha_web(api: Api, waha: FakeWaha) -> dict[str, Any]:
    config = {"engine": "waha", "base_url": waha.url, "api_key": "k"}
    channel = _ok(api.post("/v1/channels", json={"name": "web", "platform": "whatsapp_web", "config": config}), 201)
    _ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    waha.link(channel["id"])
    body, headers = waha.webhook(channel["id"], "session.status", waha.session_status(channel["id"]))
    _ok(api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers))
    return channel


def test_a_group_send_on_waha_reaches_the_groups_chat_and_its_statuses_follow(
    api: Api, waha: FakeWaha, waha_web: dict[str, Any]
):
    cid = waha_web["id"]
    waha.numbers_on_whatsapp = {ADA}
    group = _ok(api.post("/v1/groups", json={"channel_id": cid, "name": "Team", "participants": [ADA]}), 201)
    msg = _send(api, cid, group_id=group["id"])
    assert msg["to_phone"] is None
    store, org = get_store(), api.org_id
    assert messages.deliver(store, org, msg["id"]) == "sent"
    (sent_body,) = [r.json for r in waha.requests_to("POST", "/api/sendText")]
    assert sent_body["chatId"] == group["jid"] and sent_body["text"] == "hello all"
    stored = messages.get_item(store, org, msg["id"])
    assert stored["group_jid"] == group["jid"] and stored.get("contact_id") is None
    conv = _ok(api.get(f"/v1/conversations/{stored['conversation_id']}"))
    assert conv["last_message_preview"] == "hello all"
    assert len(_events(api, "message.sent", msg["id"])) == 1

    pmid = stored["provider_message_id"]
    body, headers = waha.webhook(cid, "message.ack", waha.ack(cid, pmid, 3))
    _ok(api.post(f"/v1/providers/{cid}/callback", content=body, headers=headers))
    assert _ok(api.get(f"/v1/messages/{msg['id']}"))["status"] == "read"
    assert {e["status"] for e in _events(api, "message.status_update", msg["id"])} == {"sent", "read"}

    # the same conversation answered by its id
    again = _send(api, cid, conversation_id=stored["conversation_id"])
    assert messages.deliver(store, org, again["id"]) == "sent"
    assert waha.requests_to("POST", "/api/sendText")[-1].json["chatId"] == group["jid"]
    assert messages.get_item(store, org, again["id"])["conversation_id"] == stored["conversation_id"]


@pytest.fixture
def evo() -> Iterator[FakeEvolution]:
    with FakeEvolution(api_key="k") as fake:
        yield fake


@pytest.fixture
def evo_web(api: Api, evo: FakeEvolution) -> dict[str, Any]:
    config = {"engine": "evolution", "base_url": evo.url, "api_key": "k"}
    channel = _ok(api.post("/v1/channels", json={"name": "evo", "platform": "whatsapp_web", "config": config}), 201)
    _ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    evo.link(channel["id"])
    body, headers = evo.webhook(channel["id"], "connection.update", evo.connection_update(channel["id"]))
    _ok(api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers))
    return channel


def test_a_group_send_on_evolution_names_the_groups_jid(api: Api, evo: FakeEvolution, evo_web: dict[str, Any]):
    cid = evo_web["id"]
    group = _ok(api.post("/v1/groups", json={"channel_id": cid, "name": "Team", "participants": [ADA]}), 201)
    msg = _send(api, cid, group_id=group["jid"])
    assert messages.deliver(get_store(), api.org_id, msg["id"]) == "sent"
    (sent_body,) = [r.json for r in evo.requests_to("POST", f"/message/sendText/{cid}")]
    assert sent_body["number"] == group["jid"]
    assert len(_events(api, "message.sent", msg["id"])) == 1


@pytest.fixture
def graph() -> Iterator[FakeGraphApi]:
    with FakeGraphApi(token="tok") as fake:
        yield fake


def test_a_group_send_on_the_cloud_api_is_a_group_recipient(api: Api, graph: FakeGraphApi):
    config = graph.channel_config()
    cloud = _ok(api.post("/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": config}), 201)
    cloud = _ok(api.post(f"/v1/channels/{cloud['id']}/connect"))
    group = _ok(
        api.post("/v1/groups", json={"channel_id": cloud["id"], "name": "Buyers", "participants": ["+14155552671"]}),
        201,
    )
    (request_id,) = graph.group_requests
    gid, body = graph.complete_group(request_id, ["14155552671"])
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": graph.signature(body)}
    assert cloud_queue.post(api, "/v1/providers/whatsapp_cloud/webhook", body, headers)[0].status_code == 200
    msg = _send(api, cloud["id"], group_id=group["id"])
    assert messages.deliver(get_store(), api.org_id, msg["id"]) == "sent"
    (sent,) = [m for m in graph.messages.values() if m.get("to") == gid]
    assert sent["recipient_type"] == "group" and sent["text"]["body"] == "hello all"
    assert len(_events(api, "message.sent", msg["id"])) == 1


@pytest.fixture
def sandbox(api: Api) -> dict:
    ch = _ok(
        api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {"api_token": "x" * 20}}), 201
    )
    return _ok(api.post(f"/v1/channels/{ch['id']}/connect"))


def test_exactly_one_recipient_and_a_conversation_of_the_channel(api: Api, sandbox: dict):
    first = _send(api, sandbox["id"], to="+14155552671")
    conv_id = messages.get_item(get_store(), api.org_id, first["id"])["conversation_id"]
    reply = _send(api, sandbox["id"], conversation_id=conv_id)  # a 1:1 conversation: its contact
    assert reply["to_phone"] == "14155552671"
    assert messages.get_item(get_store(), api.org_id, reply["id"])["conversation_id"] == conv_id
    text = {"text": {"body": "x"}, "channel_id": sandbox["id"]}
    for recipients in (
        {},
        {"to": "+14155552671", "conversation_id": conv_id},
        {"group_id": "grp_x", "contact_id": "c"},
    ):
        api.assert_error(api.post("/v1/messages", json={**text, **recipients}), 400, "validation_failed")
    api.assert_error(api.post("/v1/messages", json={**text, "conversation_id": "cv_nope"}), 404, "not_found")
    api.assert_error(api.post("/v1/messages", json={**text, "group_id": "grp_nope"}), 404, "not_found")
    other = _ok(
        api.post("/v1/channels", json={"name": "b", "platform": "sandbox", "config": {"api_token": "y" * 20}}), 201
    )
    other = _ok(api.post(f"/v1/channels/{other['id']}/connect"))
    wrong = api.post("/v1/messages", json={**text, "channel_id": other["id"], "conversation_id": conv_id})
    assert api.assert_error(wrong, 400, "validation_failed")["details"][0]["field"] == "body.conversation_id"
