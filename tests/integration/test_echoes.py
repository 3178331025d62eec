"""issue 30 item 2: messages typed on the linked phone (engines' `fromMe`) are stored as outbound messages of their
conversation (`sent_by: device`) with `message.new` `direction: outbound`; an echo of our own API send is never a
second message."""

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


def _events(api: Api, kind: str) -> list[dict]:
    return [e["payload"] for e in stored_events(get_store(), api.org_id) if e["event_type"] == kind]


def _thread(api: Api, conv_id: str) -> list[dict]:
    return _ok(api.get(f"/v1/conversations/{conv_id}/messages"))


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


def _waha_post(api: Api, waha: FakeWaha, cid: str, payload: dict, event: str = "message") -> None:
    body, headers = waha.webhook(cid, event, payload)
    _ok(api.post(f"/v1/providers/{cid}/callback", content=body, headers=headers))


def test_a_message_typed_on_the_phone_is_an_outbound_message_on_waha(
    api: Api, waha: FakeWaha, waha_web: dict[str, Any]
):
    cid = waha_web["id"]
    incoming = waha.inbound(cid, ADA, "hello shop")
    _waha_post(api, waha, cid, incoming)
    _waha_post(api, waha, cid, incoming, "message.any")  # WAHA posts the customer's message twice: stored once
    (first,) = _events(api, "message.new")
    conv_id = first["conversation_id"]
    echo = {
        **waha.inbound(cid, ADA, "typed on the phone"),
        "id": f"true_{ADA}@c.us_3EB0PHONE1",
        "fromMe": True,
        "from": f"{waha.phone}@c.us",
        "to": f"{ADA}@c.us",
    }
    _waha_post(api, waha, cid, echo, "message.any")
    _waha_post(api, waha, cid, echo, "message.any")  # a redelivery: one message
    news = _events(api, "message.new")
    assert len(news) == 2
    assert news[1]["direction"] == "outbound" and news[1]["conversation_id"] == conv_id
    assert news[1]["contact_id"] == first["contact_id"] and news[1]["sent_by"] == "device"
    thread = _thread(api, conv_id)
    assert len(thread) == 2
    mine = next(m for m in thread if m["text"] == "typed on the phone")
    stored = messages.get_item(get_store(), api.org_id, mine["id"])
    assert stored["direction"] == "outbound" and stored["sent_by"] == "device" and stored["status"] == "sent"
    assert stored["provider_message_id"] == echo["id"] and stored["to_phone"] == ADA
    conv = _ok(api.get(f"/v1/conversations/{conv_id}"))
    assert conv["unread_count"] == 1 and conv["last_message_preview"] == "typed on the phone"
    updates = [u for u in _events(api, "conversation.updated") if u["conversation_id"] == conv_id]
    assert [u["changes"] for u in updates] == [["preview", "unread_count"], ["preview"]]


def test_the_echo_of_an_api_send_is_not_a_second_message_on_waha(api: Api, waha: FakeWaha, waha_web: dict[str, Any]):
    cid = waha_web["id"]
    sent = _ok(api.post("/v1/messages", json={"channel_id": cid, "to": ADA, "text": {"body": "from the API"}}), 202)
    assert messages.deliver(get_store(), api.org_id, sent["id"]) == "sent"
    pmid = messages.get_item(get_store(), api.org_id, sent["id"])["provider_message_id"]
    echo = {**waha.inbound(cid, ADA, "from the API"), "id": pmid, "fromMe": True, "to": f"{ADA}@c.us"}
    _waha_post(api, waha, cid, echo, "message.any")
    assert _events(api, "message.new") == []
    conv_id = messages.get_item(get_store(), api.org_id, sent["id"])["conversation_id"]
    assert [m["id"] for m in _thread(api, conv_id)] == [sent["id"]]


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


def _evo_post(api: Api, evo: FakeEvolution, cid: str, data: dict) -> None:
    body, headers = evo.webhook(cid, "messages.upsert", data)
    _ok(api.post(f"/v1/providers/{cid}/callback", content=body, headers=headers))


def test_fromme_on_evolution_is_stored_once_and_api_sends_are_not_echoed(
    api: Api, evo: FakeEvolution, evo_web: dict[str, Any]
):
    cid = evo_web["id"]
    _evo_post(api, evo, cid, evo.inbound(cid, ADA, "typed on the phone", fromMe=True))
    (echo,) = _events(api, "message.new")
    assert echo["direction"] == "outbound" and echo["sent_by"] == "device"
    stored = messages.get_item(get_store(), api.org_id, echo["message_id"])
    assert stored["sent_by"] == "device" and stored["to_phone"] == ADA and stored["direction"] == "outbound"
    contact = _ok(api.get(f"/v1/contacts/{echo['contact_id']}"))
    assert contact.get("name") in (None, "")  # the pushName of our own echo is ours, not the customer's

    sent = _ok(api.post("/v1/messages", json={"channel_id": cid, "to": ADA, "text": {"body": "from the API"}}), 202)
    assert messages.deliver(get_store(), api.org_id, sent["id"]) == "sent"
    pmid = messages.get_item(get_store(), api.org_id, sent["id"])["provider_message_id"]
    _, jid, key_id = pmid.split("_", 2)
    again = evo.inbound(cid, jid, "from the API", fromMe=True)
    again["key"]["id"] = key_id
    _evo_post(api, evo, cid, again)
    assert len(_events(api, "message.new")) == 1


@pytest.fixture
def graph() -> Iterator[FakeGraphApi]:
    with FakeGraphApi(token="tok") as fake:
        yield fake


def test_coexistence_echoes_on_the_cloud_api_are_outbound_messages(api: Api, graph: FakeGraphApi):
    config = graph.channel_config()
    cloud = _ok(api.post("/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": config}), 201)
    cloud = _ok(api.post(f"/v1/channels/{cloud['id']}/connect"))
    customer = "14155552671"

    def deliver(value: dict, field: str = "messages") -> None:
        body = graph.webhook(value, field)
        headers = {"Content-Type": "application/json", "X-Hub-Signature-256": graph.signature(body)}
        assert cloud_queue.post(api, "/v1/providers/whatsapp_cloud/webhook", body, headers)[0].status_code == 200

    deliver(
        {
            "contacts": [{"profile": {"name": "Ada"}, "wa_id": customer}],
            "messages": [
                {
                    "from": customer,
                    "id": graph.inbound_message(customer),
                    "timestamp": "1750269342",
                    "type": "text",
                    "text": {"body": "do you ship?"},
                }
            ],
        }
    )
    echo = {
        "from": "15550100999",
        "to": customer,
        "id": "wamid.ECHO1",
        "timestamp": "1750269400",
        "type": "text",
        "text": {"body": "yes, tomorrow"},
    }
    deliver({"message_echoes": [echo]}, "smb_message_echoes")
    deliver({"message_echoes": [echo]}, "smb_message_echoes")  # Meta's retry: one message
    news = _events(api, "message.new")
    assert [n["direction"] for n in news] == ["inbound", "outbound"]
    assert news[1]["contact_id"] == news[0]["contact_id"] and news[1]["conversation_id"] == news[0]["conversation_id"]
    stored = messages.get_item(get_store(), api.org_id, news[1]["message_id"])
    assert stored["sent_by"] == "device" and stored["provider_message_id"] == "wamid.ECHO1"
    assert stored["to_phone"] == customer and stored["text"] == "yes, tomorrow"
    conv = _ok(api.get(f"/v1/conversations/{news[0]['conversation_id']}"))
    assert conv["last_message_preview"] == "yes, tomorrow" and conv["unread_count"] == 1


def test_an_echo_arriving_while_our_send_is_in_flight_is_not_a_second_message(
    api: Api, waha: FakeWaha, waha_web: dict[str, Any]
):
    cid = waha_web["id"]
    store, org = get_store(), api.org_id
    sent = _ok(api.post("/v1/messages", json={"channel_id": cid, "to": ADA, "text": {"body": "racing"}}), 202)
    claimed = messages._claim_send(store, org, sent["id"])  # the sender holds it: the engine is being called
    assert claimed is not None
    echo = {**waha.inbound(cid, ADA, "racing"), "id": f"true_{ADA}@c.us_3EB0RACE", "fromMe": True}
    _waha_post(api, waha, cid, echo, "message.any")  # the engine's echo overtakes its answer
    assert _events(api, "message.new") == []
    conv_id = messages.get_item(store, org, sent["id"])["conversation_id"]
    assert [m["id"] for m in _thread(api, conv_id)] == [sent["id"]]
