"""The whatsapp_web adapter against a fake linked-device gateway: exact requests, answers, errors, callbacks."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.errors import Unauthenticated, UnsupportedByProvider, ValidationFailed
from switchboard.providers import provider_for
from switchboard.providers.base import (
    ConnectResult,
    InboundMessage,
    OutboundMessage,
    ProviderRejected,
    ProviderUnavailable,
    StatusCallback,
)
from switchboard.providers.whatsapp_web import WhatsAppWebProvider
from tests.fakes import closed_port_url
from tests.fakes.wa_gateway import FakeWaGateway

TO = "15550001111"
SESSION = "ch_web"


@pytest.fixture
def gateway() -> Iterator[FakeWaGateway]:
    with FakeWaGateway(api_key="k") as fake:
        yield fake


def make_channel(gateway: FakeWaGateway | None = None, **config: Any) -> dict[str, Any]:
    base = {"base_url": gateway.url if gateway else "https://gateway.example", "api_key": "k"}
    return {
        "id": SESSION,
        "platform": "whatsapp_web",
        "phone_number": "15550100999",
        "status": "connected",
        "config": {**base, **config},
        "metadata": {},
    }


@pytest.fixture
def adapter(gateway: FakeWaGateway) -> WhatsAppWebProvider:
    return WhatsAppWebProvider(make_channel(gateway))


@pytest.fixture
def linked(gateway: FakeWaGateway, adapter: WhatsAppWebProvider) -> WhatsAppWebProvider:
    """A channel whose session is WORKING; the request log starts empty."""
    gateway.link(SESSION)
    gateway.clear()
    return adapter


def out(type_: str = "text", **kw: Any) -> OutboundMessage:
    return OutboundMessage(message_id="0190a0b0-0000-7000-8000-000000000001", to_phone=TO, type=type_, **kw)


def only(gateway: FakeWaGateway, method: str, path: str) -> Any:
    """The single request the adapter made; checks its method, path and API key; returns its JSON body."""
    [request] = gateway.requests
    assert (request.method, request.path) == (method, path)
    assert request.headers["x-api-key"] == "k"
    if request.body:
        assert request.headers["content-type"] == "application/json"
    return request.json


# Protocol surface --------------------------------------------------------------------------------------------------
def test_registry_builds_the_adapter_without_io():
    adapter = provider_for(make_channel(base_url=closed_port_url()))
    assert isinstance(adapter, WhatsAppWebProvider)
    assert adapter.session == SESSION


def test_the_session_defaults_to_the_channel_id_and_can_be_configured(gateway):
    assert WhatsAppWebProvider(make_channel(gateway)).session == SESSION
    assert WhatsAppWebProvider(make_channel(gateway, session="shop-1")).session == "shop-1"


def test_capabilities_are_exactly_the_gateway_operations():
    assert WhatsAppWebProvider.capabilities() == [
        "block",
        "connect",
        "contact_lookup",
        "delete",
        "edit",
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


@pytest.mark.parametrize("call", ["templates", "groups", "newsletters", "labels"])
def test_operations_the_gateway_lacks_are_unsupported(gateway, adapter, call):
    with pytest.raises(UnsupportedByProvider) as err:
        getattr(adapter, call)("list", {})
    assert err.value.code == "unsupported_by_provider"
    assert gateway.requests == []


# Session lifecycle -------------------------------------------------------------------------------------------------
def test_connect_starts_the_session_and_waits_for_pairing(gateway, adapter):
    result = adapter.connect()
    assert result == ConnectResult("pairing", {"session": SESSION, "gateway_status": "SCAN_QR"})
    assert only(gateway, "POST", f"/sessions/{SESSION}/start") is None


def test_connect_of_a_linked_device_is_connected(gateway, adapter):
    gateway.auto_link = True
    result = adapter.connect()
    assert result.status == "connected"
    assert result.metadata == {
        "session": SESSION,
        "gateway_status": "WORKING",
        "wa_id": "15550100999",
        "push_name": "Acme",
    }


def test_a_failed_start_is_an_error_with_the_gateways_reason(gateway, adapter):
    gateway.fail_start = True
    result = adapter.connect()
    assert result.status == "error"
    assert result.metadata["gateway_error"] == "The device was unlinked from the phone."


def test_a_wrong_api_key_is_rejected_with_the_gateways_message(gateway):
    adapter = WhatsAppWebProvider(make_channel(gateway, api_key="wrong"))
    with pytest.raises(ProviderRejected) as err:
        adapter.connect()
    assert "Missing or invalid X-Api-Key." in err.value.message
    assert err.value.details[0]["http_status"] == 401
    assert err.value.details[0]["provider_code"] == "unauthorized"


def test_missing_config_is_rejected_without_a_request(gateway):
    with pytest.raises(ProviderRejected, match=r"config\.base_url is required"):
        WhatsAppWebProvider(make_channel(gateway, base_url="")).connect()
    with pytest.raises(ProviderRejected, match=r"config\.api_key is required"):
        WhatsAppWebProvider(make_channel(gateway, api_key=None)).connect()
    assert gateway.requests == []


def test_status_follows_the_session(gateway, adapter):
    assert adapter.status() == "disconnected"  # unknown session (404)
    adapter.connect()
    assert adapter.status() == "pairing"
    gateway.link(SESSION)
    assert adapter.status() == "connected"
    gateway.sessions[SESSION].status = "FAILED"
    assert adapter.status() == "error"
    assert gateway.last.method == "GET"
    assert gateway.last.path == f"/sessions/{SESSION}"


def test_status_when_the_gateway_is_down_is_unavailable(gateway, adapter):
    gateway.fail_next(503)
    with pytest.raises(ProviderUnavailable):
        adapter.status()


def test_disconnect_logs_out_and_tolerates_an_unknown_session(gateway, adapter):
    adapter.disconnect()  # unknown session: 404, nothing to do
    gateway.link(SESSION)
    gateway.clear()
    adapter.disconnect()
    assert only(gateway, "POST", f"/sessions/{SESSION}/logout") is None
    assert gateway.sessions[SESSION].status == "STOPPED"


def test_disconnect_when_the_gateway_is_down_is_unavailable(gateway, adapter):
    gateway.fail_next(502)
    with pytest.raises(ProviderUnavailable):
        adapter.disconnect()


def test_qr_and_pairing_code_while_pairing(gateway, adapter):
    adapter.connect()
    gateway.clear()
    qr = adapter.qr()
    assert qr["qr"].startswith("2@")
    assert qr["expires_in"] == 20
    assert only(gateway, "GET", f"/sessions/{SESSION}/qr") is None
    gateway.clear()
    code = adapter.pairing_code("15550100999")
    assert len(code["code"]) == 9
    assert code["code"][4] == "-"
    assert only(gateway, "POST", f"/sessions/{SESSION}/pairing-code") == {"phone": "15550100999"}


def test_qr_once_linked_is_rejected_with_the_gateways_message(gateway, linked):
    with pytest.raises(ProviderRejected, match="The session is WORKING, not SCAN_QR") as err:
        linked.qr()
    assert err.value.details[0]["http_status"] == 409
    with pytest.raises(ProviderRejected, match="not SCAN_QR"):
        linked.pairing_code("15550100999")


def test_session_names_are_path_segments(gateway):
    adapter = WhatsAppWebProvider(make_channel(gateway, session="shop/1 main"))
    adapter.connect()
    assert gateway.last.raw_path == "/sessions/shop%2F1%20main/start"
    assert "shop/1 main" in gateway.sessions


# Messages ----------------------------------------------------------------------------------------------------------
def test_send_text(gateway, linked):
    result = linked.send(out(text="Hello there"))
    assert only(gateway, "POST", f"/sessions/{SESSION}/messages") == {
        "chat_id": f"{TO}@s.whatsapp.net",
        "type": "text",
        "text": "Hello there",
    }
    assert result.provider_message_id in gateway.sessions[SESSION].messages


def test_send_a_reply(gateway, linked):
    quoted = gateway.receive(SESSION, TO, "Do you ship to Berlin?")
    linked.send(out(text="We do", reply_to=quoted))
    assert gateway.last.json == {
        "chat_id": f"{TO}@s.whatsapp.net",
        "type": "text",
        "text": "We do",
        "reply_to": quoted,
    }


def test_send_media_by_url_and_by_id(gateway, linked):
    linked.send(
        out(
            "image",
            media={
                "url": "https://cdn.example/cat.jpg",
                "caption": "A cat",
                "mime_type": "image/jpeg",
                "asset_id": "a",
            },
        )
    )
    assert gateway.last.json == {
        "chat_id": f"{TO}@s.whatsapp.net",
        "type": "image",
        "media": {"url": "https://cdn.example/cat.jpg", "mime_type": "image/jpeg", "caption": "A cat"},
    }
    media_id = gateway.add_media(b"%PDF", "application/pdf", "invoice.pdf")
    linked.send(out("document", text="Invoice", media={"id": media_id, "filename": "invoice.pdf"}))
    assert gateway.last.json["media"] == {"id": media_id, "filename": "invoice.pdf", "caption": "Invoice"}
    linked.send(out("sticker", media={"url": "https://cdn.example/s.webp", "caption": "ignored"}))
    assert gateway.last.json["media"] == {"url": "https://cdn.example/s.webp"}


def test_send_a_location(gateway, linked):
    linked.send(out("location", media={"latitude": 52.52, "longitude": 13.405, "address": "Main St 1"}))
    assert gateway.last.json["location"] == {"latitude": 52.52, "longitude": 13.405, "address": "Main St 1"}


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (out("template", template={"name": "hello_world"}), "cannot send messages of type 'template'"),
        (out("image", media={"asset_id": "asset_1"}), "needs media.url or media.id"),
        (out("text"), "needs a body"),
        (OutboundMessage(message_id="m", to_phone="", type="text", text="x"), "no phone number"),
    ],
)
def test_messages_the_gateway_cannot_take_are_rejected_before_any_request(gateway, linked, message, match):
    with pytest.raises(ProviderRejected, match=match):
        linked.send(message)
    assert gateway.requests == []


def test_sending_before_the_session_works_is_rejected(gateway, adapter):
    adapter.connect()
    with pytest.raises(ProviderRejected, match="The session is SCAN_QR, not WORKING"):
        adapter.send(out(text="hi"))


def test_gateway_validation_errors_keep_their_message(gateway, linked):
    with pytest.raises(ProviderRejected, match="chat_id must look like") as err:
        linked.send(OutboundMessage(message_id="m", to_phone="12", type="text", text="x"))
    assert err.value.details[0] == {
        "provider": "WhatsApp Web gateway",
        "http_status": 400,
        "provider_code": "invalid_chat_id",
    }
    with pytest.raises(ProviderRejected, match="reply_to names no message"):
        linked.send(out(text="x", reply_to="3EB0UNKNOWN"))


def test_edit_delete_react_read(gateway, linked):
    sent = linked.send(out(text="Helo")).provider_message_id
    inbound = gateway.receive(SESSION, TO, "hi")
    gateway.clear()

    linked.edit(sent, "Hello")
    assert only(gateway, "PUT", f"/sessions/{SESSION}/messages/{sent}") == {"text": "Hello"}
    assert gateway.sessions[SESSION].messages[sent]["text"] == "Hello"
    gateway.clear()

    linked.react(inbound, "👍")
    assert only(gateway, "POST", f"/sessions/{SESSION}/messages/{inbound}/reaction") == {"emoji": "👍"}
    gateway.clear()

    linked.read(inbound)
    assert only(gateway, "POST", f"/sessions/{SESSION}/messages/{inbound}/read") is None
    assert gateway.sessions[SESSION].read == [inbound]
    gateway.clear()

    linked.delete(sent)
    assert only(gateway, "DELETE", f"/sessions/{SESSION}/messages/{sent}") is None
    assert gateway.sessions[SESSION].messages[sent]["deleted"] is True


def test_message_actions_on_unknown_or_foreign_messages_are_rejected(gateway, linked):
    inbound = gateway.receive(SESSION, TO, "hi")
    with pytest.raises(ProviderRejected, match="No message 'nope' in this session"):
        linked.edit("nope", "x")
    with pytest.raises(ProviderRejected, match="Only your own messages"):
        linked.delete(inbound)
    with pytest.raises(ProviderRejected, match="No message"):
        linked.read("nope")


def test_presence(gateway, linked):
    linked.presence(TO, "typing")
    assert only(gateway, "POST", f"/sessions/{SESSION}/presence") == {
        "chat_id": f"{TO}@s.whatsapp.net",
        "state": "typing",
    }
    with pytest.raises(ProviderRejected, match="state must be one of"):
        linked.presence(TO, "dancing")


def test_download_media(gateway, linked):
    media_id = gateway.add_media(b"OggS voice", "audio/ogg; codecs=opus")
    got = linked.download_media(media_id, "3A1", "{}")
    assert got.data == b"OggS voice"
    assert got.mime_type == "audio/ogg"
    assert got.file_name == f"{media_id}.oga"
    assert got.source_url == f"{gateway.url}/sessions/{SESSION}/media/{media_id}"
    assert only(gateway, "GET", f"/sessions/{SESSION}/media/{media_id}") is None

    named = gateway.add_media(b"%PDF", "application/pdf", "Order 42.pdf")
    assert linked.download_media(named, "3A2", "{}").file_name == "Order 42.pdf"

    with pytest.raises(ProviderRejected, match="No such media"):
        linked.download_media("expired", "3A3", "{}")


# Account -----------------------------------------------------------------------------------------------------------
def test_profile_read_and_update(gateway, linked):
    assert linked.profile() == {"name": "Acme", "about": "Available", "picture_url": None}
    assert only(gateway, "GET", f"/sessions/{SESSION}/profile") is None
    gateway.clear()
    updated = linked.profile({"about": "Back Monday", "business": True})
    assert only(gateway, "PUT", f"/sessions/{SESSION}/profile") == {"about": "Back Monday"}
    assert updated["about"] == "Back Monday"
    gateway.clear()
    linked.profile({"business": True})
    assert only(gateway, "GET", f"/sessions/{SESSION}/profile") is None
    with pytest.raises(ProviderRejected, match="Unknown profile field 'vertical'"):
        linked.profile({"vertical": "RETAIL"})


def test_privacy_read_and_update(gateway, linked):
    assert linked.privacy()["last_seen"] == "contacts"
    assert only(gateway, "GET", f"/sessions/{SESSION}/privacy") is None
    gateway.clear()
    updated = linked.privacy({"last_seen": "none", "read_receipts": "none"})
    assert only(gateway, "PUT", f"/sessions/{SESSION}/privacy") == {"last_seen": "none", "read_receipts": "none"}
    assert updated["last_seen"] == "none"
    with pytest.raises(ProviderRejected, match="last_seen must be one of"):
        linked.privacy({"last_seen": "everyone"})


def test_lookup_contact(gateway, linked):
    assert linked.lookup_contact(TO) == {"phone": TO, "exists": True, "name": "Ada Lovelace", "wa_id": TO}
    assert only(gateway, "GET", f"/sessions/{SESSION}/contacts/{TO}") is None
    assert linked.lookup_contact("4930123456") == {"phone": "4930123456", "exists": False, "name": None, "wa_id": None}


def test_block_and_unblock(gateway, linked):
    linked.block(TO, True)
    assert only(gateway, "POST", f"/sessions/{SESSION}/contacts/{TO}/block") == {"blocked": True}
    assert gateway.sessions[SESSION].blocked == {TO}
    linked.block(TO, False)
    assert gateway.last.json == {"blocked": False}
    assert gateway.sessions[SESSION].blocked == set()


# Transport failures ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_are_unavailable(gateway, linked, status):
    gateway.fail_next(status, body={"error": {"code": "busy", "message": "Session is restarting"}})
    with pytest.raises(ProviderUnavailable, match=f"HTTP {status}.*Session is restarting"):
        linked.send(out(text="hi"))


def test_a_timeout_is_unavailable(gateway, linked):
    linked.timeout = 0.2
    gateway.hang_next(seconds=3)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match=r"did not answer within 0\.2 s"):
        linked.send(out(text="hi"))
    assert time.monotonic() - started < 2


def test_connection_refused_is_unavailable():
    adapter = WhatsAppWebProvider(make_channel(base_url=closed_port_url()))
    with pytest.raises(ProviderUnavailable, match="could not be reached"):
        adapter.connect()


def test_a_dropped_connection_is_unavailable(gateway, linked):
    gateway.drop_next()
    with pytest.raises(ProviderUnavailable, match="could not be reached"):
        linked.read("3A")


def test_a_plain_text_4xx_is_reported_by_its_status_only(gateway, linked):
    gateway.fail_next(403, body=b"Forbidden by gateway policy")
    with pytest.raises(ProviderRejected, match="HTTP 403") as refused:
        linked.send(out(text="hi"))
    assert "Forbidden" not in str(refused.value.message) + str(refused.value.details)


def test_redirects_are_not_followed(gateway, linked):
    gateway.fail_next(307, headers={"Location": "http://127.0.0.1:1/"})
    with pytest.raises(ProviderRejected, match="redirect"):
        linked.send(out(text="hi"))
    assert len(gateway.requests) == 1


# Callbacks ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("header", ["X-Gateway-Signature", "x-gateway-signature", "X-GATEWAY-SIGNATURE"])
def test_a_signed_callback_is_accepted_whatever_the_header_case(gateway, adapter, header):
    headers, body = gateway.callback("ack", {"id": "3EB0", "ack": 2})
    adapter.verify_callback({header: headers["X-Gateway-Signature"]}, body)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Gateway-Signature": ""},
        {"X-Gateway-Signature": "md5=abc"},
        {"X-Gateway-Signature": "sha256=" + "0" * 64},
        {"X-Hub-Signature-256": "sha256=whatever"},
    ],
)
def test_a_callback_with_a_missing_or_wrong_signature_is_refused(gateway, adapter, headers):
    _, body = gateway.callback("ack", {"id": "3EB0", "ack": 2})
    with pytest.raises(Unauthenticated):
        adapter.verify_callback(headers, body)


def test_a_callback_signed_with_another_key_or_for_another_body_is_refused(gateway, adapter):
    headers, body = gateway.callback("ack", {"id": "3EB0", "ack": 2})
    with pytest.raises(Unauthenticated):
        adapter.verify_callback({"X-Gateway-Signature": gateway.signature(body, key="other")}, body)
    with pytest.raises(Unauthenticated):
        adapter.verify_callback(headers, body.replace(b'"ack": 2', b'"ack": 3'))


def test_parse_callback_messages(gateway, adapter):
    _, text = gateway.callback(
        "message",
        {
            "id": "3A0123456789ABCDEF",
            "from": "4915112345678@s.whatsapp.net",
            "type": "text",
            "body": "Hallo!",
            "push_name": "Jonas",
            "timestamp": 1700000000,
        },
        session=SESSION,
    )
    _, image = gateway.callback(
        "message",
        {
            "id": "3A0123456789ABCDE0",
            "from": "4915112345678:12@s.whatsapp.net",
            "type": "image",
            "media": {"id": "media-9", "mime_type": "image/jpeg", "caption": "Receipt"},
            "push_name": "Jonas",
            "timestamp": 1700000001,
            "reply_to": "3EB0AA",
        },
    )
    _, voice = gateway.callback(
        "message",
        {
            "id": "3A0123456789ABCDE1",
            "from": "4915112345678@s.whatsapp.net",
            "type": "audio",
            "media": {"id": "media-10", "mime_type": "audio/ogg; codecs=opus"},
            "timestamp": 1700000002000,
        },
    )
    assert adapter.parse_callback(text) == [
        InboundMessage(
            "3A0123456789ABCDEF", "4915112345678", "text", "Hallo!", None, "Jonas", "2023-11-14T22:13:20.000Z"
        )
    ]
    assert adapter.parse_callback(image) == [
        InboundMessage(
            "3A0123456789ABCDE0",
            "4915112345678",
            "image",
            "Receipt",
            {"id": "media-9", "mime_type": "image/jpeg", "caption": "Receipt", "context": {"message_id": "3EB0AA"}},
            "Jonas",
            "2023-11-14T22:13:21.000Z",
        )
    ]
    assert adapter.parse_callback(voice) == [
        InboundMessage(
            "3A0123456789ABCDE1",
            "4915112345678",
            "audio",
            None,
            {"id": "media-10", "mime_type": "audio/ogg; codecs=opus"},
            None,
            "2023-11-14T22:13:22.000Z",
        )
    ]


@pytest.mark.parametrize(("ack", "status"), [(1, "sent"), (2, "delivered"), (3, "read"), (4, "played"), (-1, "failed")])
def test_parse_callback_acks(gateway, adapter, ack, status):
    payload: dict[str, Any] = {"id": "3EB0C0FFEE", "ack": ack, "timestamp": 1700000000}
    if ack == -1:
        payload["error"] = "Recipient is not on WhatsApp"
    _, body = gateway.callback("ack", payload)
    [event] = adapter.parse_callback(body)
    assert event == StatusCallback(
        "3EB0C0FFEE", status, "2023-11-14T22:13:20.000Z", "Recipient is not on WhatsApp" if ack == -1 else None
    )


def test_parse_callback_ignores_what_is_not_a_customer_message(gateway, adapter):
    events = [
        {"event": "message", "payload": {"id": "1", "from": f"{TO}@s.whatsapp.net", "from_me": True, "body": "x"}},
        {"event": "message", "payload": {"id": "2", "from": "120363040000000000@g.us", "body": "group"}},
        {"event": "message", "payload": {"id": "3", "from": "status@broadcast", "body": "story"}},
        {"event": "message", "payload": {"id": "4", "from": "123456789@lid", "body": "anonymised"}},
        {"event": "message", "session": "other", "payload": {"id": "5", "from": f"{TO}@s.whatsapp.net"}},
        {"event": "ack", "payload": {"id": "6", "ack": 0}},
        {"event": "presence", "payload": {"chat_id": f"{TO}@s.whatsapp.net", "state": "typing"}},
        {"event": "message", "payload": {"id": "7", "from": f"{TO}@c.us", "body": "ok", "timestamp": "bad"}},
    ]
    parsed = adapter.parse_callback(json.dumps(events).encode())
    assert parsed == [InboundMessage("7", TO, "text", "ok", None, None, None)]


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'"message"',
        json.dumps({"payload": {}}).encode(),
        json.dumps({"event": "message", "payload": "x"}).encode(),
        json.dumps({"event": "message", "payload": {"body": "no id"}}).encode(),
        json.dumps({"event": "ack", "payload": {"id": "1", "ack": "read"}}).encode(),
        json.dumps({"event": "ack", "payload": {"ack": 2}}).encode(),
    ],
)
def test_a_malformed_callback_fails_validation(adapter, body):
    with pytest.raises(ValidationFailed):
        adapter.parse_callback(body)
