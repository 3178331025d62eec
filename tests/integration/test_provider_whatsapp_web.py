"""whatsapp_web channels on WAHA, against a fake that behaves like the real engine (tests/fakes/waha.py): the exact
requests the adapter makes, the session lifecycle, sends in every shape, signed callbacks, and the never-twice send
when the engine's answer is lost."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.errors import Unauthenticated, UnsupportedByProvider, ValidationFailed
from switchboard.messaging import messages
from switchboard.providers import provider_for
from switchboard.providers.base import (
    InboundMessage,
    OutboundMessage,
    ProviderRejected,
    ProviderUnavailable,
    SendUncertain,
    SessionStatus,
    StatusCallback,
)
from switchboard.providers.waha import WahaProvider, message_id_of
from switchboard.providers.whatsapp_web import callback_secret
from switchboard.store import get_store
from tests.fakes import closed_port_url
from tests.fakes.waha import FakeWaha, Session
from tests.integration.support import Api

TO = "14155550111"
CHANNEL = "ch_web"


@pytest.fixture
def waha() -> Iterator[FakeWaha]:
    with FakeWaha(api_key="k") as fake:
        yield fake


def make_channel(fake: FakeWaha | None = None, **config: Any) -> dict[str, Any]:
    base = {"engine": "waha", "base_url": fake.url if fake else "https://waha.example", "api_key": "k"}
    return {"id": CHANNEL, "platform": "whatsapp_web", "status": "connected", "config": {**base, **config}}


@pytest.fixture
def adapter(waha: FakeWaha) -> WahaProvider:
    found = provider_for(make_channel(waha))
    assert isinstance(found, WahaProvider)
    return found


@pytest.fixture
def linked(waha: FakeWaha, adapter: WahaProvider) -> WahaProvider:
    adapter.connect()
    waha.link(CHANNEL)
    waha.clear()
    return adapter


def out(type_: str = "text", **kw: Any) -> OutboundMessage:
    return OutboundMessage(message_id="0190a0b0-0000-7000-8000-000000000001", to_phone=TO, type=type_, **kw)


def signed(body: dict[str, Any], key: str | None = None) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    mac = hmac.new((key or callback_secret(CHANNEL)).encode(), raw, hashlib.sha512).hexdigest()
    return raw, {"X-Webhook-Hmac": mac, "X-Webhook-Hmac-Algorithm": "sha512"}


# Engine choice -----------------------------------------------------------------------------------------------------
def test_waha_is_the_default_engine_and_builds_without_io():
    channel = make_channel(base_url=closed_port_url())
    del channel["config"]["engine"]
    adapter = provider_for(channel)
    assert isinstance(adapter, WahaProvider) and adapter.session == CHANNEL
    assert provider_for(make_channel(session="default")).session == "default"


def test_an_unknown_engine_is_a_validation_error():
    with pytest.raises(ValidationFailed) as err:
        provider_for(make_channel(engine="baileys"))
    assert err.value.details[0]["field"] == "body.config.engine"


def test_capabilities_are_what_the_adapter_implements():
    assert WahaProvider.capabilities() == [
        "block",
        "connect",
        "contact_lookup",
        "delete",
        "edit",
        "groups",
        "labels",
        "media_download",
        "newsletters",
        "pairing_code",
        "presence",
        "profile",
        "qr",
        "react",
        "read",
        "send",
    ]


# Session lifecycle -------------------------------------------------------------------------------------------------
def test_connect_creates_and_starts_the_session_with_our_signed_webhook(waha, adapter):
    result = adapter.connect()
    assert result.status == "pairing"
    assert result.metadata == {"session": CHANNEL, "engine": "waha", "engine_status": "SCAN_QR_CODE"}
    lookup, create = waha.requests
    assert (lookup.method, lookup.path) == ("GET", f"/api/sessions/{CHANNEL}")  # 404: not there yet
    assert (create.method, create.path) == ("POST", "/api/sessions")
    assert create.headers["x-api-key"] == "k"
    assert create.json == {
        "name": CHANNEL,
        "start": True,
        "config": {
            "webhooks": [
                {
                    "url": f"https://switchboard.test/v1/providers/{CHANNEL}/callback",
                    "events": [
                        "message",
                        "message.any",
                        "message.ack",
                        "session.status",
                        "group.v2.participants",
                        "group.v2.update",
                        "group.v2.leave",
                        "label.chat.added",
                        "label.chat.deleted",
                        "label.upsert",
                        "label.deleted",
                        "message.reaction",
                        "message.revoked",
                        "message.edited",
                        "poll.vote",
                    ],
                    "hmac": {"key": callback_secret(CHANNEL)},
                    "retries": {"policy": "exponential", "delaySeconds": 2, "attempts": 10},
                }
            ]
        },
    }


def test_connect_of_an_existing_session_keeps_the_operators_settings_and_starts_it(waha, adapter):
    waha.sessions[CHANNEL] = Session(
        CHANNEL, config={"webhooks": [{"url": "https://ops.example/hook", "events": ["message"]}], "debug": True}
    )
    assert adapter.connect().status == "pairing"
    methods = [(r.method, r.path) for r in waha.requests]
    assert methods == [
        ("GET", f"/api/sessions/{CHANNEL}"),
        ("PUT", f"/api/sessions/{CHANNEL}"),
        ("POST", f"/api/sessions/{CHANNEL}/start"),
    ]
    config = waha.sessions[CHANNEL].config
    assert config["debug"] is True
    assert [h["url"] for h in config["webhooks"]] == [
        "https://ops.example/hook",
        f"https://switchboard.test/v1/providers/{CHANNEL}/callback",
    ]
    waha.clear()
    adapter.connect()  # already configured: no PUT (a PUT restarts a running session)
    assert [(r.method, r.path) for r in waha.requests][1:] == [("POST", f"/api/sessions/{CHANNEL}/start")]


def test_connect_of_a_linked_device_is_connected(waha, adapter):
    adapter.connect()
    waha.link(CHANNEL)
    result = adapter.connect()
    assert result.status == "connected"
    assert result.metadata["wa_id"] == "15550100999" and result.metadata["push_name"] == "Acme"


def test_a_failed_session_is_an_error(waha, adapter):
    adapter.connect()
    waha.sessions[CHANNEL].status = "FAILED"
    assert adapter.status() == "error"


def test_status_follows_the_session(waha, adapter):
    assert adapter.status() == "disconnected"  # unknown session (404)
    adapter.connect()
    assert adapter.status() == "pairing"
    waha.link(CHANNEL)
    assert adapter.status() == "connected"


def test_qr_and_pairing_code_while_pairing(waha, adapter):
    adapter.connect()
    waha.clear()
    qr = adapter.qr()
    assert qr["qr"].startswith("2@")
    [request] = waha.requests
    assert (request.method, request.path, request.query) == ("GET", f"/api/{CHANNEL}/auth/qr", {"format": "raw"})
    code = adapter.pairing_code("+1 555 0100 999")
    assert len(code["code"]) == 9 and code["code"][4] == "-"
    assert waha.last.json == {"phoneNumber": "15550100999"}


def test_qr_once_linked_is_rejected_with_the_engines_reason(waha, linked):
    with pytest.raises(ProviderRejected, match="Session status is not as expected") as err:
        linked.qr()
    assert err.value.details[0]["http_status"] == 422
    assert err.value.details[0]["engine_status"] == "WORKING"


def test_disconnect_deletes_the_session_and_tolerates_an_unknown_one(waha, linked):
    linked.disconnect()
    assert (waha.last.method, waha.last.path) == ("DELETE", f"/api/sessions/{CHANNEL}")
    assert CHANNEL not in waha.sessions
    linked.disconnect()  # idempotent


def test_a_wrong_api_key_is_rejected(waha):
    with pytest.raises(ProviderRejected, match="Unauthorized") as err:
        WahaProvider(make_channel(waha, api_key="wrong")).connect()
    assert err.value.details[0]["http_status"] == 401


def test_missing_config_is_rejected_without_a_request(waha):
    with pytest.raises(ProviderRejected, match=r"config\.base_url is required"):
        WahaProvider(make_channel(waha, base_url="")).connect()
    assert waha.requests == []


def test_session_names_are_path_segments(waha):
    adapter = WahaProvider(make_channel(waha, session="shop/1"))
    adapter.connect()
    adapter.status()
    assert waha.last.raw_path == "/api/sessions/shop%2F1"


# Sends -------------------------------------------------------------------------------------------------------------
def test_send_text_and_reply(waha, linked):
    first = linked.send(out(text="Hello")).provider_message_id
    assert first.startswith(f"true_{TO}@c.us_")
    assert (waha.last.method, waha.last.path) == ("POST", "/api/sendText")
    assert waha.last.json == {"session": CHANNEL, "chatId": f"{TO}@c.us", "text": "Hello"}
    linked.send(out(text="again", reply_to=first))
    assert waha.last.json["reply_to"] == first


@pytest.mark.parametrize(
    ("kind", "route", "extra"),
    [
        ("image", "/api/sendImage", {"caption": "A cat"}),
        ("document", "/api/sendFile", {"caption": "A cat"}),
        ("video", "/api/sendVideo", {"caption": "A cat"}),
        ("audio", "/api/sendVoice", {}),
    ],
)
def test_send_media(waha, linked, kind, route, extra):
    media = {"url": "https://cdn.example/f", "mime_type": "image/jpeg", "filename": "f.jpg", "caption": "A cat"}
    linked.send(out(kind, media=media))
    assert waha.last.path == route
    assert waha.last.json == {
        "session": CHANNEL,
        "chatId": f"{TO}@c.us",
        "file": {"url": "https://cdn.example/f", "mimetype": "image/jpeg", "filename": "f.jpg"},
        **extra,
    }


def test_send_location_and_contact_card(waha, linked):
    linked.send(out("location", media={"latitude": 52.52, "longitude": 13.405, "name": "Office"}))
    assert waha.last.json == {
        "session": CHANNEL,
        "chatId": f"{TO}@c.us",
        "latitude": 52.52,
        "longitude": 13.405,
        "title": "Office",
    }
    linked.send(
        out(
            "contacts",
            contacts=[
                {"name": {"formatted_name": "Ada"}, "phones": [{"phone": "+49 151 12345678", "wa_id": "4915112345678"}]}
            ],
        )
    )
    assert waha.last.path == "/api/sendContactVcard"
    assert waha.last.json["contacts"] == [
        {"fullName": "Ada", "organization": "", "phoneNumber": "+4915112345678", "whatsappId": "4915112345678"}
    ]


def test_types_the_engine_cannot_send_are_rejected_before_any_request(waha, linked):
    with pytest.raises(ProviderRejected, match="cannot send messages of type 'template'"):
        linked.send(out("template", template={"name": "hello"}))
    assert "template" not in WahaProvider.message_types and "sticker" not in WahaProvider.message_types
    assert waha.requests == []


def test_every_answer_shape_gives_the_serialized_id():
    assert message_id_of({"id": "true_1@c.us_A"}) == "true_1@c.us_A"
    assert message_id_of({"id": {"_serialized": "true_1@c.us_B"}}) == "true_1@c.us_B"
    assert message_id_of({"id": {"fromMe": True, "remote": "1@c.us", "id": "C"}}) == "true_1@c.us_C"
    assert message_id_of({"key": {"remoteJid": "1@s.whatsapp.net", "fromMe": True, "id": "D"}}) == "true_1@c.us_D"
    assert message_id_of({"_data": {"id": {"_serialized": "true_1@c.us_E"}}}) == "true_1@c.us_E"
    assert message_id_of({"key": {"id": "F"}}) is None
    assert message_id_of(None) is None


def test_noweb_answers_are_read_and_an_answer_without_id_is_uncertain():
    with FakeWaha(api_key="k", engine="NOWEB") as waha:
        adapter = WahaProvider(make_channel(waha))
        adapter.connect()
        waha.link(CHANNEL)
        sent = adapter.send(out(text="hi")).provider_message_id
        assert sent == waha.last_sent(CHANNEL)[0]  # `{key: {id}}` became WAHA's serialized id
        with pytest.raises(SendUncertain, match="without its id"):
            adapter.send(
                out(
                    "contacts",
                    contacts=[
                        {
                            "name": {"formatted_name": "Ada"},
                            "phones": [{"phone": "+49 151 12345678", "wa_id": "4915112345678"}],
                        }
                    ],
                )
            )


def test_a_send_whose_answer_is_lost_is_uncertain_but_a_refused_connection_is_not(waha, linked):
    linked.timeout = 0.3
    waha.accept_then_hang(1.0)
    with pytest.raises(SendUncertain):
        linked.send(out(text="hi"))
    assert len(waha.sent(CHANNEL)) == 1  # the engine has it
    waha.drop_next()
    with pytest.raises(SendUncertain):
        linked.send(out(text="hi"))
    refused = WahaProvider(make_channel(base_url=closed_port_url()))
    with pytest.raises(ProviderUnavailable, match="nothing was sent"):
        refused.send(out(text="hi"))


@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_on_a_send_are_unavailable(waha, linked, status):
    waha.fail_next(status, body={"statusCode": status, "message": "boom"})
    with pytest.raises(ProviderUnavailable, match=f"HTTP {status}"):
        linked.send(out(text="hi"))


def test_engine_validation_errors_keep_their_message(waha, linked):
    with pytest.raises(ProviderRejected, match="reply_to message 'nope' not found") as err:
        linked.send(out(text="x", reply_to="nope"))
    assert err.value.details[0]["http_status"] == 400


def test_sending_before_the_session_works_is_rejected(waha, adapter):
    adapter.connect()
    with pytest.raises(ProviderRejected, match="not as expected"):
        adapter.send(out(text="hi"))


# Message actions ---------------------------------------------------------------------------------------------------
def test_edit_delete_react_read_presence(waha, linked):
    sent = linked.send(out(text="Helo")).provider_message_id
    inbound = waha.inbound(CHANNEL, TO, "hi")["id"]
    waha.clear()
    linked.edit(sent, "Hello")
    assert (waha.last.method, waha.last.path, waha.last.json) == (
        "PUT",
        f"/api/{CHANNEL}/chats/{TO}@c.us/messages/{sent}",
        {"text": "Hello"},
    )
    linked.react(inbound, "👍")
    assert (waha.last.path, waha.last.json) == (
        "/api/reaction",
        {"session": CHANNEL, "messageId": inbound, "reaction": "👍"},
    )
    linked.read(inbound)
    assert (waha.last.path, waha.last.json) == (
        "/api/sendSeen",
        {"session": CHANNEL, "chatId": f"{TO}@c.us", "messageId": inbound},
    )
    linked.presence(TO, "available")
    assert waha.last.json == {"chatId": f"{TO}@c.us", "presence": "online"}
    linked.delete(sent)
    assert (waha.last.method, waha.last.path) == ("DELETE", f"/api/{CHANNEL}/chats/{TO}@c.us/messages/{sent}")
    assert waha.sessions[CHANNEL].messages[sent]["deleted"] is True
    with pytest.raises(ProviderRejected, match="not a WAHA message id"):
        linked.edit("garbage", "x")


def test_lookup_block_and_media_download(waha, linked):
    waha.numbers_on_whatsapp = {TO}
    assert linked.lookup_contact(TO) == {"phone": TO, "exists": True, "name": None, "wa_id": TO}
    assert linked.lookup_contact("15550009999")["exists"] is False
    linked.block(TO, True)
    assert waha.sessions[CHANNEL].blocked == {f"{TO}@c.us"}
    linked.block(TO, False)
    assert waha.sessions[CHANNEL].blocked == set()
    url = waha.add_media(CHANNEL, b"\xff\xd8jpeg", "image/jpeg")
    got = linked.download_media(url, "m", json.dumps({"media": {"url": url}}))
    assert (got.data, got.mime_type) == (b"\xff\xd8jpeg", "image/jpeg")
    internal = url.replace(waha.url, "http://waha-internal:3000")  # WAHA naming itself by its own host name
    assert linked.download_media(internal, "m", "{}").data == b"\xff\xd8jpeg"
    with pytest.raises(ProviderRejected, match="not on this channel's WAHA server"):
        linked.download_media("https://evil.example/x", "m", "{}")


# Callbacks ---------------------------------------------------------------------------------------------------------
def test_callbacks_must_carry_the_channels_hmac(waha, adapter):
    body, headers = signed({"event": "message", "session": CHANNEL, "payload": {}})
    adapter.verify_callback(headers, body)
    adapter.verify_callback({k.upper(): v for k, v in headers.items()}, body)
    for bad in ({}, {"X-Webhook-Hmac": ""}, signed({"x": 1})[1], signed({"a": 1}, key="other")[1]):
        with pytest.raises(Unauthenticated):
            adapter.verify_callback(bad, body)


def test_parse_message_ack_and_session_status(waha, linked):
    payload = waha.inbound(CHANNEL, TO, "Do you ship?")
    [inbound] = linked.parse_callback(json.dumps({"event": "message", "session": CHANNEL, "payload": payload}).encode())
    assert inbound == InboundMessage(
        provider_message_id=payload["id"],
        from_phone=TO,
        type="text",
        text="Do you ship?",
        contact_name="Ada",
        timestamp=inbound.timestamp,
    )
    sent = linked.send(out(text="yes")).provider_message_id
    for level, status in ((1, "sent"), (2, "delivered"), (3, "read"), (4, "played"), (-1, "failed")):
        body = {"event": "message.ack", "session": CHANNEL, "payload": waha.ack(CHANNEL, sent, level)}
        [ack] = linked.parse_callback(json.dumps(body).encode())
        assert isinstance(ack, StatusCallback) and ack.status == status and ack.to_phone == TO
    body = {"event": "session.status", "session": CHANNEL, "payload": {"name": CHANNEL, "status": "WORKING"}}
    assert linked.parse_callback(json.dumps(body).encode()) == [
        SessionStatus("connected", "WORKING", {"engine_status": "WORKING"})
    ]


def test_lid_senders_are_resolved_through_the_engine(waha, linked):
    waha.sessions[CHANNEL].lids["12345678901234@lid"] = "4915112345678@c.us"
    payload = waha.inbound(CHANNEL, "12345678901234@lid", "hi from a lid")
    [inbound] = linked.parse_callback(json.dumps({"event": "message", "session": CHANNEL, "payload": payload}).encode())
    assert inbound.from_phone == "4915112345678"
    assert waha.last.path == f"/api/{CHANNEL}/lids/12345678901234@lid"
    unknown = waha.inbound(CHANNEL, "99999999999999@lid", "who am I")  # the engine has no phone for it
    assert (
        linked.parse_callback(json.dumps({"event": "message", "session": CHANNEL, "payload": unknown}).encode()) == []
    )


def test_what_is_not_ours_is_ignored(waha, linked):
    group = waha.inbound(CHANNEL, "120363000000000000@g.us", "group")
    theirs_ack = {**waha.ack(CHANNEL, waha.inbound(CHANNEL, TO, "y")["id"], 3), "fromMe": False}
    for event, payload, session in (
        ("message", group, CHANNEL),
        ("message.ack", theirs_ack, CHANNEL),
        ("message", waha.inbound(CHANNEL, TO, "z"), "another-session"),
        ("presence.update", {"id": "x"}, CHANNEL),
    ):
        assert (
            linked.parse_callback(json.dumps({"event": event, "session": session, "payload": payload}).encode()) == []
        )


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"event": 1}', b'{"event": "message", "session": "ch_web", "payload": []}',
     b'{"event": "message", "session": "ch_web", "payload": {"id": "x"}}',
     b'{"event": "session.status", "session": "ch_web", "payload": {"status": "NOPE"}}'],
)  # fmt: skip
def test_malformed_callbacks_fail_validation(linked, body):
    with pytest.raises(ValidationFailed):
        linked.parse_callback(body)


def test_features_waha_lacks_are_unsupported(waha, adapter):
    with pytest.raises(UnsupportedByProvider):
        adapter.templates("list", {})
    with pytest.raises(UnsupportedByProvider):
        adapter.privacy()
    with pytest.raises(UnsupportedByProvider):
        adapter.profile({"business": True})
    assert waha.requests == []


def test_profile_read_and_update(waha, linked):
    assert linked.profile() == {"name": "Acme", "picture_url": None, "wa_id": "15550100999"}
    waha.clear()
    changed = linked.profile({"name": "Shop", "about": "Open", "picture_url": "https://cdn.example/me.jpg"})
    assert changed == {
        "name": "Shop",
        "picture_url": "https://cdn.example/me.jpg",
        "wa_id": "15550100999",
        "about": "Open",
    }
    paths = [(r.method, r.path, r.json) for r in waha.requests]
    assert paths[:3] == [
        ("PUT", f"/api/{CHANNEL}/profile/name", {"name": "Shop"}),
        ("PUT", f"/api/{CHANNEL}/profile/status", {"status": "Open"}),
        ("PUT", f"/api/{CHANNEL}/profile/picture", {"file": {"url": "https://cdn.example/me.jpg"}}),
    ]
    with pytest.raises(ProviderRejected, match="not websites"):
        linked.profile({"websites": ["x"]})


# Through the API: the linked-device journey and the never-twice send ----------------------------------------------
@pytest.fixture
def web(api: Api, waha: FakeWaha) -> dict[str, Any]:
    config = {"engine": "waha", "base_url": waha.url, "api_key": "k"}
    created = api.post("/v1/channels", json={"name": "web", "platform": "whatsapp_web", "config": config})
    assert created.status_code == 201, created.text
    return created.json()["data"]


def _post_event(api: Api, waha: FakeWaha, channel: dict[str, Any], event: str, payload: dict[str, Any], **kw: Any):
    body, headers = waha.webhook(channel["id"], event, payload, **kw)
    return api.post(f"/v1/providers/{channel['id']}/callback", content=body, headers=headers)


def test_config_engine_is_validated_on_create_and_update(api: Api, web: dict[str, Any]):
    bad = api.post("/v1/channels", json={"name": "x", "platform": "whatsapp_web", "config": {"engine": "nope"}})
    api.assert_error(bad, 400, "validation_failed")
    assert bad.json()["error"]["details"][0]["field"] == "body.config.engine"
    api.assert_error(
        api.patch(f"/v1/channels/{web['id']}", json={"config": {"engine": "nope"}}), 400, "validation_failed"
    )
    assert api.get(f"/v1/channels/{web['id']}").json()["data"]["config"]["api_key"] == "••••"


def test_linked_device_journey(api: Api, waha: FakeWaha, web: dict[str, Any]):
    channel_id = web["id"]
    connected = api.post(f"/v1/channels/{channel_id}/connect").json()["data"]
    assert connected["status"] == "pairing"
    assert connected["metadata"]["engine_status"] == "SCAN_QR_CODE"
    hook = waha.sessions[channel_id].config["webhooks"][0]
    assert hook["url"] == f"https://switchboard.test/v1/providers/{channel_id}/callback"
    qr = api.get(f"/v1/channels/{channel_id}/qr").json()["data"]
    assert qr["channel_id"] == channel_id and qr["qr"].startswith("2@")
    code = api.post(f"/v1/channels/{channel_id}/pairing-code", json={"phone_number": "+1 555 0100 999"})
    assert code.status_code == 200 and len(code.json()["data"]["code"]) == 9

    waha.link(channel_id)  # the phone scanned the QR: WAHA says so in a signed session.status
    unsigned = api.post(
        f"/v1/providers/{channel_id}/callback",
        content=json.dumps({"event": "session.status", "session": channel_id, "payload": {"status": "WORKING"}}),
        headers={"Content-Type": "application/json"},
    )
    api.assert_error(unsigned, 401, "unauthenticated")
    api.assert_error(
        _post_event(api, waha, web, "session.status", waha.session_status(channel_id), key="wrong"),
        401,
        "unauthenticated",
    )
    assert api.get(f"/v1/channels/{channel_id}").json()["data"]["status"] == "pairing"  # nothing stored
    assert _post_event(api, waha, web, "session.status", waha.session_status(channel_id)).status_code == 200
    channel = api.get(f"/v1/channels/{channel_id}").json()["data"]
    assert channel["status"] == "connected" and channel["metadata"]["wa_id"] == "15550100999"
    assert api.get(f"/v1/channels/{channel_id}/status").json()["data"]["status"] == "connected"

    sent = api.post("/v1/messages", json={"channel_id": channel_id, "to": "+1 415 555 0111", "text": {"body": "hi"}})
    assert sent.status_code == 202, sent.text
    message_id = sent.json()["data"]["id"]
    assert messages.deliver(get_store(), api.org_id, message_id) == "sent"
    pmid, wire = waha.last_sent(channel_id)
    assert wire["text"] == "hi" and wire["chatId"] == f"{TO}@c.us"
    assert api.get(f"/v1/messages/{message_id}").json()["data"]["provider_message_id"] == pmid
    for level in (3, 2):  # read, then a late delivered: never backwards
        assert _post_event(api, waha, web, "message.ack", waha.ack(channel_id, pmid, level)).status_code == 200
    assert api.get(f"/v1/messages/{message_id}").json()["data"]["status"] == "read"

    payload = waha.inbound(channel_id, TO, "thanks!")
    first = _post_event(api, waha, web, "message", payload)
    assert first.json()["data"] == {"received": 1, "statuses_applied": 0}
    _post_event(api, waha, web, "message", payload)  # WAHA retries: still one message
    [conv] = api.get("/v1/conversations").json()["data"]
    texts = [m["text"] for m in api.get(f"/v1/conversations/{conv['id']}/messages").json()["data"]]
    assert sorted(texts) == ["hi", "thanks!"]

    waha.sessions[channel_id].status = "FAILED"
    _post_event(api, waha, web, "session.status", waha.session_status(channel_id))
    failed = api.get(f"/v1/channels/{channel_id}").json()["data"]
    assert failed["status"] == "error" and "FAILED" in failed["last_error"]
    waha.sessions[channel_id].status = "WORKING"  # the callback saying so was lost: /status asks and corrects
    assert api.get(f"/v1/channels/{channel_id}/status").json()["data"]["status"] == "connected"
    assert api.get(f"/v1/channels/{channel_id}").json()["data"]["status"] == "connected"
    waha.sessions[channel_id].status = "FAILED"
    assert api.get(f"/v1/channels/{channel_id}/status").json()["data"]["status"] == "error"
    refused = api.post("/v1/messages", json={"channel_id": channel_id, "to": TO, "text": {"body": "x"}})
    api.assert_error(refused, 409, "conflict")
    assert api.post(f"/v1/channels/{channel_id}/disconnect").json()["data"]["status"] == "disconnected"
    assert channel_id not in waha.sessions


def test_an_unknown_channel_or_another_session_stores_nothing(api: Api, waha: FakeWaha, web: dict[str, Any]):
    api.post(f"/v1/channels/{web['id']}/connect")
    waha.link(web["id"])
    body, headers = waha.webhook(web["id"], "message", waha.inbound(web["id"], TO, "hello"))
    api.assert_error(api.post("/v1/providers/ch_nope/callback", content=body, headers=headers), 404, "not_found")
    other = json.loads(body) | {"session": "someone-else"}
    raw = json.dumps(other).encode()
    mac = hmac.new(callback_secret(web["id"]).encode(), raw, hashlib.sha512).hexdigest()
    answer = api.post(f"/v1/providers/{web['id']}/callback", content=raw, headers={"X-Webhook-Hmac": mac})
    assert answer.json()["data"] == {"received": 0, "statuses_applied": 0}
    assert api.get("/v1/conversations").json()["data"] == []


def test_a_send_the_engine_accepts_but_never_answers_is_sent_once(
    api: Api, waha: FakeWaha, web: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    """Fault: the engine accepts the send and times out. The message is never handed over again, however often
    the queue redelivers it, and WAHA's ack fills in the provider id."""
    channel_id = web["id"]
    api.post(f"/v1/channels/{channel_id}/connect")
    waha.link(channel_id)
    _post_event(api, waha, web, "session.status", waha.session_status(channel_id))
    message_id = api.post("/v1/messages", json={"channel_id": channel_id, "to": TO, "text": {"body": "once"}}).json()[
        "data"
    ]["id"]
    import switchboard.providers.waha as waha_module

    original = waha_module.WahaProvider.__init__

    def short_timeout(self: WahaProvider, channel: dict[str, Any]) -> None:
        original(self, channel)
        self.timeout = 0.3

    waha.accept_then_hang(1.0)
    monkeypatch.setattr(waha_module.WahaProvider, "__init__", short_timeout)
    assert messages.deliver(get_store(), api.org_id, message_id) == "uncertain"
    for _ in range(3):  # the queue hands the record out again
        assert messages.deliver(get_store(), api.org_id, message_id) == "skipped"
    assert len(waha.requests_to("POST", "/api/sendText")) == 1
    assert len(waha.sent(channel_id)) == 1  # 0 duplicate sends
    record = api.get(f"/v1/messages/{message_id}").json()["data"]
    assert (record["status"], record["uncertain"], record["provider_message_id"]) == ("sent", True, None)

    pmid, _ = waha.last_sent(channel_id)
    assert _post_event(api, waha, web, "message.ack", waha.ack(channel_id, pmid, 2)).json()["data"] == {
        "received": 0,
        "statuses_applied": 1,
    }
    record = api.get(f"/v1/messages/{message_id}").json()["data"]
    assert (record["status"], record["uncertain"], record["provider_message_id"]) == ("delivered", False, pmid)
    _post_event(api, waha, web, "message.ack", waha.ack(channel_id, pmid, 3))
    assert api.get(f"/v1/messages/{message_id}").json()["data"]["status"] == "read"


def test_engine_errors_through_the_api_are_clear_envelopes(api: Api, waha: FakeWaha, web: dict[str, Any]):
    waha.fail_next(503, body={"statusCode": 503, "message": "engine down"})
    down = api.post(f"/v1/channels/{web['id']}/connect").json()["data"]
    assert down["status"] == "error" and "HTTP 503" in down["last_error"]
    api.post(f"/v1/channels/{web['id']}/connect")
    waha.link(web["id"])
    qr = api.get(f"/v1/channels/{web['id']}/qr")  # linked: WAHA refuses the QR with 422
    api.assert_error(qr, 422, "provider_rejected")
    assert "engine down" not in qr.text
    sticker = api.post(
        "/v1/messages",
        json={"channel_id": web["id"], "to": TO, "type": "sticker", "media": {"url": "https://cdn.example/s.webp"}},
    )
    api.assert_error(sticker, 400, "unsupported_by_provider")


def test_engine_outages_through_the_api_lose_nothing(api: Api, waha: FakeWaha, web: dict[str, Any]):
    api.post(f"/v1/channels/{web['id']}/connect")
    slow = WahaProvider.__init__

    def short_timeout(self: WahaProvider, channel: dict[str, Any]) -> None:
        slow(self, channel)
        self.timeout = 0.3

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WahaProvider, "__init__", short_timeout)
        waha.hang_next(1.0)
        api.assert_error(api.get(f"/v1/channels/{web['id']}/qr"), 503, "service_unavailable")
    waha.link(web["id"])
    _post_event(api, waha, web, "session.status", waha.session_status(web["id"]))
    message_id = api.post("/v1/messages", json={"channel_id": web["id"], "to": TO, "text": {"body": "later"}}).json()[
        "data"
    ]["id"]
    waha.fail_next(503, body={"statusCode": 503, "message": "restarting"})
    with pytest.raises(ProviderUnavailable):
        messages.deliver(get_store(), api.org_id, message_id)
    assert api.get(f"/v1/messages/{message_id}").json()["data"]["status"] == "pending"  # the queue retries it
    assert messages.deliver(get_store(), api.org_id, message_id) == "sent"
    assert len(waha.sent(web["id"])) == 1
    waha.fail_next(400, body={"statusCode": 400, "message": "chatId is not valid", "error": "Bad Request"})
    refused = api.post("/v1/messages", json={"channel_id": web["id"], "to": TO, "text": {"body": "bad"}}).json()["data"]
    assert messages.deliver(get_store(), api.org_id, refused["id"]) == "failed"
    failed = api.get(f"/v1/messages/{refused['id']}").json()["data"]
    assert failed["status"] == "failed" and "chatId is not valid" in failed["last_error"]
