"""whatsapp_web channels on Evolution API, against a fake that behaves like the real engine
(tests/fakes/evolution.py): the requests the adapter makes, the instance lifecycle, sends, JWT-signed callbacks and
the never-twice send when the engine's answer is lost."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from switchboard.errors import Unauthenticated, UnsupportedByProvider, ValidationFailed
from switchboard.messaging import messages
from switchboard.providers import provider_for
from switchboard.providers.base import (
    MessageChange,
    OutboundMessage,
    ProviderRejected,
    ProviderUnavailable,
    SendUncertain,
    SessionStatus,
    StatusCallback,
)
from switchboard.providers.evolution import EvolutionProvider, verify_jwt
from switchboard.providers.whatsapp_web import callback_secret
from switchboard.store import get_store
from tests.fakes import closed_port_url
from tests.fakes.evolution import FakeEvolution, jwt_hs256
from tests.integration.support import Api

TO = "14155550111"
JID = f"{TO}@s.whatsapp.net"
CHANNEL = "ch_evo"


@pytest.fixture
def evo() -> Iterator[FakeEvolution]:
    with FakeEvolution(api_key="k") as fake:
        yield fake


def make_channel(fake: FakeEvolution | None = None, **config: Any) -> dict[str, Any]:
    base = {"engine": "evolution", "base_url": fake.url if fake else "https://evo.example", "api_key": "k"}
    return {"id": CHANNEL, "platform": "whatsapp_web", "status": "connected", "config": {**base, **config}}


@pytest.fixture
def adapter(evo: FakeEvolution) -> EvolutionProvider:
    found = provider_for(make_channel(evo))
    assert isinstance(found, EvolutionProvider)
    return found


@pytest.fixture
def linked(evo: FakeEvolution, adapter: EvolutionProvider) -> EvolutionProvider:
    adapter.connect()
    evo.link(CHANNEL)
    evo.clear()
    return adapter


def out(type_: str = "text", **kw: Any) -> OutboundMessage:
    return OutboundMessage(message_id="0190a0b0-0000-7000-8000-000000000002", to_phone=TO, type=type_, **kw)


def test_capabilities_include_groups_labels_profile_and_privacy():
    assert EvolutionProvider.capabilities() == [
        "block",
        "connect",
        "contact_lookup",
        "delete",
        "edit",
        "groups",
        "labels",
        "media_download",
        "pairing_code",
        "presence",
        "privacy",
        "profile",
        "qr",
        "react",
        "read",
        "send",
    ]


# Instance lifecycle ------------------------------------------------------------------------------------------------
def test_connect_creates_the_instance_with_our_jwt_webhook(evo, adapter):
    result = adapter.connect()
    assert result.status == "pairing"  # created, waiting for a QR code or a pairing code to be asked for
    assert result.metadata == {"session": CHANNEL, "engine": "evolution", "engine_status": "close"}
    state, create = evo.requests
    assert (state.method, state.path) == ("GET", f"/instance/connectionState/{CHANNEL}")
    assert (create.method, create.path, create.headers["apikey"]) == ("POST", "/instance/create", "k")
    assert create.json == {
        "instanceName": CHANNEL,
        "integration": "WHATSAPP-BAILEYS",
        "qrcode": False,
        "webhook": {
            "enabled": True,
            "url": f"https://switchboard.test/v1/providers/{CHANNEL}/callback",
            "byEvents": False,
            "base64": False,
            "headers": {"jwt_key": callback_secret(CHANNEL)},
            "events": [
                "MESSAGES_UPSERT",
                "MESSAGES_UPDATE",
                "CONNECTION_UPDATE",
                "GROUP_PARTICIPANTS_UPDATE",
                "LABELS_ASSOCIATION",
                "LABELS_EDIT",
                "MESSAGES_EDITED",
                "MESSAGES_DELETE",
            ],
        },
    }


def test_connect_of_an_existing_instance_sets_the_webhook_and_connects(evo, adapter):
    adapter.connect()
    evo.instances[CHANNEL].state = "close"
    evo.clear()
    assert adapter.connect().status == "pairing"
    assert [(r.method, r.path) for r in evo.requests] == [
        ("GET", f"/instance/connectionState/{CHANNEL}"),
        ("POST", f"/webhook/set/{CHANNEL}"),
        ("GET", f"/instance/connect/{CHANNEL}"),
        ("GET", f"/instance/connectionState/{CHANNEL}"),
    ]
    evo.link(CHANNEL)
    assert adapter.connect().status == "connected"
    assert adapter.status() == "connected"


def test_qr_pairing_code_status_and_disconnect(evo, adapter):
    assert adapter.status() == "disconnected"
    adapter.connect()
    assert adapter.qr()["qr"].startswith("2@")
    evo.link(CHANNEL)
    with pytest.raises(ProviderRejected, match="no QR code"):
        adapter.qr()
    adapter.disconnect()
    assert (evo.last.method, evo.last.path) == ("DELETE", f"/instance/delete/{CHANNEL}")
    adapter.disconnect()  # unknown instance: 404, nothing to do


def test_a_pairing_code_starts_the_connection_with_the_number(evo, adapter):
    """instance.controller.ts `connectToWhatsapp`: only a `close` instance starts with `?number=`; one created with
    `qrcode: true` is `connecting` and answers its QR code with `pairingCode: null` (what the fake answers too)."""
    adapter.connect()
    assert evo.instances[CHANNEL].state == "close"
    evo.clear()
    code = adapter.pairing_code("+1 555 0100 999")["code"]
    assert len(code) == 8 and evo.instances[CHANNEL].state == "connecting"
    assert [(r.method, r.path, r.query) for r in evo.requests] == [
        ("GET", f"/instance/connectionState/{CHANNEL}", {}),
        ("GET", f"/instance/connect/{CHANNEL}", {"number": "15550100999"}),
    ]


def test_a_pairing_code_after_a_qr_code_recreates_the_instance_with_the_number(evo, adapter):
    adapter.connect()
    assert adapter.qr()["qr"].startswith("2@")  # now `connecting` with a QR code of no number
    answer = httpx.get(f"{evo.url}/instance/connect/{CHANNEL}", params={"number": "15550100999"},
                       headers={"apikey": "k"}).json()  # fmt: skip
    assert answer["pairingCode"] is None  # what Evolution answers a connecting instance, number or not
    evo.clear()
    code = adapter.pairing_code("+1 555 0100 999")["code"]
    assert len(code) == 8
    calls = [(r.method, r.path) for r in evo.requests]
    assert calls == [("GET", f"/instance/connectionState/{CHANNEL}"), ("DELETE", f"/instance/delete/{CHANNEL}"),
                     ("POST", "/instance/create")]  # fmt: skip
    create = evo.requests[-1].json
    assert create["qrcode"] is True and create["number"] == "15550100999"
    assert create["webhook"]["events"] and create["webhook"]["headers"]["jwt_key"]
    evo.link(CHANNEL)
    with pytest.raises(ProviderRejected, match="already paired"):
        adapter.pairing_code("+1 555 0100 999")


def test_the_fake_refuses_what_evolution_refuses(evo):
    """src/validate/instance.schema.ts and webhook.schema.ts, webhook.controller.ts `set`."""
    headers = {"apikey": "k"}
    bad_number = {"instanceName": "x", "integration": "WHATSAPP-BAILEYS", "qrcode": True, "number": "+49 151"}
    assert httpx.post(f"{evo.url}/instance/create", json=bad_number, headers=headers).status_code == 400
    ok = {"instanceName": "x", "integration": "WHATSAPP-BAILEYS", "qrcode": False}
    assert httpx.post(f"{evo.url}/instance/create", json=ok, headers=headers).status_code == 201
    no_events = {"webhook": {"enabled": True, "url": "https://example.test/hook"}}
    assert httpx.post(f"{evo.url}/webhook/set/x", json=no_events, headers=headers).status_code == 500
    no_url = {"webhook": {"enabled": True, "events": ["MESSAGES_UPSERT"]}}
    assert httpx.post(f"{evo.url}/webhook/set/x", json=no_url, headers=headers).status_code == 400
    assert httpx.post(f"{evo.url}/webhook/set/x", json={}, headers=headers).status_code == 400
    good = {"webhook": {"enabled": True, "url": "https://example.test/hook", "events": ["MESSAGES_UPSERT"]}}
    assert httpx.post(f"{evo.url}/webhook/set/x", json=good, headers=headers).status_code == 201


def test_a_wrong_api_key_and_an_outage(evo):
    with pytest.raises(ProviderRejected, match="Unauthorized"):
        EvolutionProvider(make_channel(evo, api_key="wrong")).connect()
    evo.fail_next(502)
    with pytest.raises(ProviderUnavailable):
        EvolutionProvider(make_channel(evo)).status()


# Sends -------------------------------------------------------------------------------------------------------------
def test_send_every_type(evo, linked):
    first = linked.send(out(text="Hello")).provider_message_id
    key_id, record = evo.last_sent(CHANNEL)
    assert first == f"true_{JID}_{key_id}" and record["text"] == "Hello"
    assert (evo.last.path, evo.last.json) == (f"/message/sendText/{CHANNEL}", {"number": TO, "text": "Hello"})
    linked.send(out(text="re", reply_to=first))
    assert evo.last.json["quoted"] == {"key": {"remoteJid": JID, "fromMe": True, "id": key_id}}
    media = {"url": "https://cdn.example/f.pdf", "mime_type": "application/pdf", "filename": "f.pdf", "caption": "F"}
    linked.send(out("document", media=media))
    assert evo.last.json == {
        "number": TO,
        "mediatype": "document",
        "media": "https://cdn.example/f.pdf",
        "mimetype": "application/pdf",
        "fileName": "f.pdf",
        "caption": "F",
    }
    linked.send(out("audio", media={"url": "https://cdn.example/a.ogg"}))
    assert (evo.last.path, evo.last.json) == (
        f"/message/sendWhatsAppAudio/{CHANNEL}",
        {"number": TO, "audio": "https://cdn.example/a.ogg"},
    )
    linked.send(out("sticker", media={"url": "https://cdn.example/s.webp"}))
    assert evo.last.path == f"/message/sendSticker/{CHANNEL}"
    linked.send(out("location", media={"latitude": 52.52, "longitude": 13.405, "name": "Office"}))
    # locationMessageSchema requires name and address: the fake refuses the send without them, as Evolution does
    assert evo.last.json == {"number": TO, "latitude": 52.52, "longitude": 13.405, "name": "Office", "address": ""}
    linked.send(
        out(
            "contacts",
            contacts=[
                {"name": {"formatted_name": "Ada"}, "phones": [{"phone": "+49 151 12345678", "wa_id": "4915112345678"}]}
            ],
        )
    )
    assert evo.last.json["contact"] == [{"fullName": "Ada", "wuid": "4915112345678", "phoneNumber": "+4915112345678"}]


def test_engine_refusals_and_uncertain_sends(evo, linked):
    evo.numbers_on_whatsapp = set()
    with pytest.raises(ProviderRejected, match='"exists": false'):
        linked.send(out(text="x"))
    evo.numbers_on_whatsapp = None
    linked.timeout = 0.3
    evo.accept_then_hang(1.0)
    with pytest.raises(SendUncertain):
        linked.send(out(text="x"))
    assert len(evo.sent(CHANNEL)) == 1
    with pytest.raises(ProviderUnavailable, match="nothing was sent"):
        EvolutionProvider(make_channel(base_url=closed_port_url())).send(out(text="x"))
    with pytest.raises(ProviderRejected, match="cannot send messages of type 'template'"):
        linked.send(out("template"))


def test_message_actions_account_and_lookup(evo, linked):
    sent = linked.send(out(text="Helo")).provider_message_id
    key_id = sent.rsplit("_", 1)[1]
    key = {"remoteJid": JID, "fromMe": True, "id": key_id}
    linked.edit(sent, "Hello")
    assert (evo.last.path, evo.last.json) == (
        f"/chat/updateMessage/{CHANNEL}",
        {"number": TO, "key": key, "text": "Hello"},
    )
    linked.react(sent, "👍")
    assert evo.last.json == {"key": key, "reaction": "👍"}
    linked.read(sent)
    assert evo.last.json == {"readMessages": [key]}
    linked.presence(TO, "typing")
    assert evo.last.json == {"number": TO, "presence": "composing", "delay": 1200}
    linked.delete(sent)
    assert (evo.last.method, evo.last.json) == ("DELETE", key)
    assert evo.instances[CHANNEL].messages[key_id]["deleted"] is True
    evo.media[key_id] = (b"%PDF", "application/pdf", "a.pdf")
    got = linked.download_media(key_id, sent, "{}")
    assert (got.data, got.mime_type, got.file_name) == (b"%PDF", "application/pdf", "a.pdf")
    assert linked.lookup_contact(TO) == {"phone": TO, "exists": True, "name": "Ada", "wa_id": TO}
    linked.block(TO, True)
    assert evo.instances[CHANNEL].blocked == {TO}
    assert linked.profile({"name": "Shop", "about": "Open"})["name"] == "Shop"
    assert evo.instances[CHANNEL].profile["status"] == "Open"
    assert linked.privacy({"last": "none"})["last"] == "none"
    assert linked.profile({"business": True})["isBusiness"] is True
    with pytest.raises(UnsupportedByProvider):
        linked.profile({"business": True, "description": "x"})
    with pytest.raises(ProviderRejected, match="unknown privacy settings"):
        linked.privacy({"nope": "x"})


# Callbacks ---------------------------------------------------------------------------------------------------------
def test_callbacks_need_evolutions_jwt_signed_with_the_channel_key(evo, linked):
    body, headers = evo.webhook(CHANNEL, "messages.upsert", evo.inbound(CHANNEL, TO, "hi"))
    linked.verify_callback(headers, body)
    _, wrong = evo.webhook(CHANNEL, "messages.upsert", {}, key="other-key")
    _, expired = evo.webhook(CHANNEL, "messages.upsert", {}, exp_in=-5)
    for bad in ({}, {"Authorization": "Basic x"}, {"Authorization": "Bearer a.b"}, wrong, expired):
        with pytest.raises(Unauthenticated):
            linked.verify_callback(bad, body)
    now = int(time.time())
    other_app = jwt_hs256({"iat": now, "exp": now + 60, "app": "other", "action": "webhook"}, callback_secret(CHANNEL))
    with pytest.raises(Unauthenticated, match="not an Evolution API webhook token"):
        verify_jwt(other_app, callback_secret(CHANNEL))


def test_parse_upsert_update_and_connection(evo, linked):
    data = evo.inbound(CHANNEL, TO, "Do you ship?")
    body, _ = evo.webhook(CHANNEL, "messages.upsert", data)
    [inbound] = linked.parse_callback(body)
    assert (inbound.from_phone, inbound.text, inbound.contact_name) == (TO, "Do you ship?", "Ada")
    assert inbound.provider_message_id == f"false_{JID}_{data['key']['id']}"
    sent = linked.send(out(text="yes")).provider_message_id
    key_id = sent.rsplit("_", 1)[1]
    for raw, status in (("SERVER_ACK", "sent"), ("DELIVERY_ACK", "delivered"), ("READ", "read"), ("ERROR", "failed")):
        [ack] = linked.parse_callback(evo.webhook(CHANNEL, "messages.update", evo.update(CHANNEL, key_id, raw))[0])
        assert ack == StatusCallback(sent, status, error=ack.error, to_phone=TO)
    assert (
        linked.parse_callback(evo.webhook(CHANNEL, "messages.update", evo.update(CHANNEL, key_id, "PENDING"))[0]) == []
    )
    emitted = "2025-05-01T10:00:00.000Z"  # `date_time`: when Evolution emitted it, which orders the events
    update = evo.webhook(CHANNEL, "connection.update", evo.connection_update(CHANNEL), at=emitted)[0]
    [state] = linked.parse_callback(update)
    assert state == SessionStatus(
        "connected",
        "open",
        {"engine_status": "open", "wa_id": "15550100999", "push_name": "Acme"},
        event_at=1746093600000,
    )
    lid = evo.inbound(CHANNEL, "12345678901234@lid", "hi", remoteJidAlt="4915112345678@s.whatsapp.net")
    [from_lid] = linked.parse_callback(evo.webhook(CHANNEL, "messages.upsert", lid)[0])
    assert from_lid.from_phone == "4915112345678"
    reaction = evo.inbound(CHANNEL, TO, "")
    reaction |= {"message": {"reactionMessage": {"text": "👍", "key": data["key"]}}, "messageType": "reactionMessage"}
    [change] = linked.parse_callback(evo.webhook(CHANNEL, "messages.upsert", reaction)[0])  # not a new message
    assert isinstance(change, MessageChange) and (change.kind, change.text) == ("reaction", "👍")
    assert inbound.provider_message_id in change.targets
    other = json.loads(body) | {"instance": "someone-else"}
    assert linked.parse_callback(json.dumps(other).encode()) == []
    with pytest.raises(ValidationFailed):
        linked.parse_callback(evo.webhook(CHANNEL, "connection.update", {"state": "weird"})[0])


# Through the API -----------------------------------------------------------------------------------------------------
@pytest.fixture
def web(api: Api, evo: FakeEvolution) -> dict[str, Any]:
    config = {"engine": "evolution", "base_url": evo.url, "api_key": "k"}
    created = api.post("/v1/channels", json={"name": "evo", "platform": "whatsapp_web", "config": config})
    assert created.status_code == 201, created.text
    return created.json()["data"]


def _post(api: Api, evo: FakeEvolution, channel: dict[str, Any], event: str, data: Any, **kw: Any):
    body, headers = evo.webhook(channel["id"], event, data, **kw)
    return api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers)


def test_linked_device_journey(api: Api, evo: FakeEvolution, web: dict[str, Any]):
    channel_id = web["id"]
    assert api.post(f"/v1/channels/{channel_id}/connect").json()["data"]["status"] == "pairing"
    assert api.get(f"/v1/channels/{channel_id}/qr").json()["data"]["qr"].startswith("2@")
    evo.link(channel_id)
    api.assert_error(
        _post(api, evo, web, "connection.update", evo.connection_update(channel_id), key="nope"), 401, "unauthenticated"
    )
    assert api.get(f"/v1/channels/{channel_id}").json()["data"]["status"] == "pairing"
    _post(api, evo, web, "connection.update", evo.connection_update(channel_id))
    assert api.get(f"/v1/channels/{channel_id}").json()["data"]["status"] == "connected"

    message_id = api.post("/v1/messages", json={"channel_id": channel_id, "to": TO, "text": {"body": "hi"}}).json()[
        "data"
    ]["id"]
    assert messages.deliver(get_store(), api.org_id, message_id) == "sent"
    key_id, _ = evo.last_sent(channel_id)
    _post(api, evo, web, "messages.update", evo.update(channel_id, key_id, "READ"))
    record = api.get(f"/v1/messages/{message_id}").json()["data"]
    assert record["status"] == "read" and record["provider_message_id"] == f"true_{JID}_{key_id}"
    assert _post(api, evo, web, "messages.upsert", evo.inbound(channel_id, TO, "thanks")).json()["data"] == {
        "received": 1,
        "statuses_applied": 0,
    }
    assert api.post(f"/v1/channels/{channel_id}/disconnect").json()["data"]["status"] == "disconnected"
    assert channel_id not in evo.instances


def test_a_send_evolution_accepts_but_never_answers_is_sent_once(
    api: Api, evo: FakeEvolution, web: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    channel_id = web["id"]
    api.post(f"/v1/channels/{channel_id}/connect")
    evo.link(channel_id)
    _post(api, evo, web, "connection.update", evo.connection_update(channel_id))
    message_id = api.post("/v1/messages", json={"channel_id": channel_id, "to": TO, "text": {"body": "once"}}).json()[
        "data"
    ]["id"]
    import switchboard.providers.evolution as evolution_module

    original = evolution_module.EvolutionProvider.__init__

    def short_timeout(self: EvolutionProvider, channel: dict[str, Any]) -> None:
        original(self, channel)
        self.timeout = 0.3

    monkeypatch.setattr(evolution_module.EvolutionProvider, "__init__", short_timeout)
    evo.accept_then_hang(1.0)
    assert messages.deliver(get_store(), api.org_id, message_id) == "uncertain"
    assert messages.deliver(get_store(), api.org_id, message_id) == "skipped"
    assert len(evo.sent(channel_id)) == 1  # 0 duplicate sends
    key_id, _ = evo.last_sent(channel_id)
    _post(api, evo, web, "messages.update", evo.update(channel_id, key_id, "DELIVERY_ACK"))
    record = api.get(f"/v1/messages/{message_id}").json()["data"]
    assert (record["status"], record["uncertain"], record["provider_message_id"]) == (
        "delivered",
        False,
        f"true_{JID}_{key_id}",
    )
