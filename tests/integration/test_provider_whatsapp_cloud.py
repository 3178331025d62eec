"""The whatsapp_cloud adapter against a fake Graph API: exact requests, answers, error mapping, callbacks."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.config import reset_settings
from switchboard.errors import Forbidden, Unauthenticated, UnsupportedByProvider, ValidationFailed
from switchboard.providers import provider_for
from switchboard.providers.base import (
    ConnectResult,
    InboundMessage,
    OutboundMessage,
    ProviderRejected,
    ProviderUnavailable,
    StatusCallback,
)
from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider
from tests.fakes import closed_port_url
from tests.fakes.graph_api import FakeGraphApi

TO = "15550001111"
FAKE_SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:switchboard-prod-CursorSecret-AbCdEf"


@pytest.fixture
def graph() -> Iterator[FakeGraphApi]:
    with FakeGraphApi(token="t") as fake:
        yield fake


def make_channel(graph: FakeGraphApi | None = None, **config: Any) -> dict[str, Any]:
    base = {
        "base_url": graph.url if graph else "https://graph.facebook.com/v23.0",
        "access_token": "t",
        "phone_number_id": graph.phone_number_id if graph else "1",
        "waba_id": graph.waba_id if graph else "2",
        "app_secret": "app-secret",
        "verify_token": "verify-me",
    }
    return {
        "id": "ch_cloud",
        "platform": "whatsapp_cloud",
        "phone_number": "15550100999",
        "status": "connected",
        "config": {**base, **config},
        "metadata": {},
    }


@pytest.fixture
def adapter(graph: FakeGraphApi) -> WhatsAppCloudProvider:
    return WhatsAppCloudProvider(make_channel(graph))


def out(type_: str = "text", **kw: Any) -> OutboundMessage:
    return OutboundMessage(message_id="0190a0b0-0000-7000-8000-000000000001", to_phone=TO, type=type_, **kw)


def sent_json(graph: FakeGraphApi) -> dict[str, Any]:
    request = graph.last
    assert (request.method, request.path) == ("POST", f"/v23.0/{graph.phone_number_id}/messages")
    assert request.headers["authorization"] == "Bearer t"
    assert request.headers["content-type"] == "application/json"
    return request.json  # type: ignore[no-any-return]


# Protocol surface -----------------------------------------------------------------------------------------------------
def test_registry_builds_the_adapter_without_io():
    adapter = provider_for(make_channel(base_url=closed_port_url()))
    assert isinstance(adapter, WhatsAppCloudProvider)
    assert adapter.platform == "whatsapp_cloud"


def test_capabilities_are_exactly_the_cloud_api_operations():
    assert WhatsAppCloudProvider.capabilities() == [
        "block",
        "connect",
        "groups",
        "media_download",
        "profile",
        "react",
        "read",
        "send",
        "templates",
    ]


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("edit", ("wamid.x", "new text")),
        ("delete", ("wamid.x",)),
        ("presence", (TO, "typing")),
        ("qr", ()),
        ("pairing_code", (TO,)),
        ("privacy", (None,)),
        ("lookup_contact", (TO,)),
        ("newsletters", ("list", {})),
        ("labels", ("list", {})),
    ],
)
def test_operations_the_cloud_api_lacks_are_unsupported(graph, adapter, call, args):
    with pytest.raises(UnsupportedByProvider) as err:
        getattr(adapter, call)(*args)
    assert err.value.status == 400
    assert err.value.code == "unsupported_by_provider"
    assert graph.requests == []


# Connect --------------------------------------------------------------------------------------------------------------
def test_connect_reads_the_phone_number(graph, adapter):
    result = adapter.connect()

    assert result == ConnectResult(
        "connected",
        {
            "display_phone_number": "+1 555-010-0999",
            "verified_name": "Acme Support",
            "quality_rating": "GREEN",
            "phone_number_id": graph.phone_number_id,
        },
    )
    [request] = graph.requests
    assert request.method == "GET"
    assert request.path == f"/v23.0/{graph.phone_number_id}"
    assert request.query == {"fields": "display_phone_number,verified_name,quality_rating"}
    assert request.headers["authorization"] == "Bearer t"
    assert request.body == b""


def test_connect_with_a_wrong_token_is_rejected_with_metas_message(graph):
    adapter = WhatsAppCloudProvider(make_channel(graph, access_token="wrong"))
    with pytest.raises(ProviderRejected) as err:
        adapter.connect()
    assert "Invalid OAuth access token - Cannot parse access token" in err.value.message
    assert err.value.details[0]["http_status"] == 401
    assert err.value.details[0]["provider_code"] == 190
    assert err.value.details[0]["provider_fbtrace_id"]


def test_connect_to_an_unknown_phone_number_id_is_rejected(graph):
    adapter = WhatsAppCloudProvider(make_channel(graph, phone_number_id="999"))
    with pytest.raises(ProviderRejected) as err:
        adapter.connect()
    assert "Unsupported get request. Object with ID '999' does not exist" in err.value.message


def test_missing_config_is_rejected_without_a_request(graph):
    adapter = WhatsAppCloudProvider(make_channel(graph, access_token=""))
    with pytest.raises(ProviderRejected, match=r"config\.access_token is required"):
        adapter.connect()
    assert graph.requests == []


# Send -----------------------------------------------------------------------------------------------------------------
def test_send_text(graph, adapter):
    result = adapter.send(out(text="Hello there"))

    assert sent_json(graph) == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": TO,
        "type": "text",
        "text": {"preview_url": False, "body": "Hello there"},
    }
    assert result.provider_message_id.startswith("wamid.")
    assert graph.messages[result.provider_message_id]["to"] == TO


def test_send_a_reply_sets_the_context(graph, adapter):
    quoted = graph.inbound_message(TO)
    adapter.send(out(text="Sure", reply_to=quoted))
    assert sent_json(graph)["context"] == {"message_id": quoted}


@pytest.mark.parametrize(
    ("type_", "media", "expected"),
    [
        (
            "image",
            {"url": "https://cdn.example/cat.jpg", "caption": "A cat", "mime_type": "image/jpeg"},
            {"link": "https://cdn.example/cat.jpg", "caption": "A cat"},
        ),
        ("video", {"url": "https://cdn.example/v.mp4"}, {"link": "https://cdn.example/v.mp4"}),
        (
            "audio",
            {"url": "https://cdn.example/a.ogg", "caption": "audio has no caption"},
            {"link": "https://cdn.example/a.ogg"},
        ),
        ("sticker", {"url": "https://cdn.example/s.webp"}, {"link": "https://cdn.example/s.webp"}),
    ],
)
def test_send_media_by_link(graph, adapter, type_, media, expected):
    adapter.send(out(type_, media=media))
    body = sent_json(graph)
    assert body == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": TO,
        "type": type_,
        type_: expected,
    }


def test_send_a_document_by_media_id_with_filename_and_caption(graph, adapter):
    media_id = graph.add_media(b"%PDF-1.7", "application/pdf")
    adapter.send(out("document", text="Your invoice", media={"id": media_id, "filename": "invoice.pdf"}))
    assert sent_json(graph)["document"] == {"id": media_id, "caption": "Your invoice", "filename": "invoice.pdf"}


def test_send_a_template(graph, adapter):
    components = [{"type": "body", "parameters": [{"type": "text", "text": "Ada"}]}]
    result = adapter.send(
        out("template", template={"name": "hello_world", "language": "en_US", "components": components})
    )
    assert sent_json(graph)["template"] == {
        "name": "hello_world",
        "language": {"policy": "deterministic", "code": "en_US"},
        "components": components,
    }
    assert result.provider_message_id.startswith("wamid.")


def test_a_template_without_components_omits_them(graph, adapter):
    adapter.send(out("template", template={"name": "hello_world", "language": {"code": "en_US"}, "components": []}))
    assert sent_json(graph)["template"] == {
        "name": "hello_world",
        "language": {"policy": "deterministic", "code": "en_US"},
    }


def test_send_a_location(graph, adapter):
    adapter.send(out("location", media={"latitude": 52.52, "longitude": 13.405, "name": "Office"}))
    assert sent_json(graph)["location"] == {"latitude": "52.52", "longitude": "13.405", "name": "Office"}


def test_a_location_on_the_equator_and_the_prime_meridian_is_sent(graph, adapter):
    adapter.send(out("location", media={"latitude": 0, "longitude": 0}))
    assert sent_json(graph)["location"] == {"latitude": "0.0", "longitude": "0.0"}


def test_an_invalid_recipient_is_rejected_with_metas_message(graph):
    adapter = WhatsAppCloudProvider(make_channel(graph))
    with pytest.raises(ProviderRejected) as err:
        adapter.send(OutboundMessage(message_id="m", to_phone="12", type="text", text="hi"))
    assert "(#131009) Parameter value is not valid" in err.value.message
    assert err.value.details[0]["http_status"] == 400
    assert err.value.details[0]["provider_code"] == 131009


def test_a_recipient_outside_the_allowed_list_is_rejected(graph, adapter):
    graph.not_allowed.add(TO)
    with pytest.raises(ProviderRejected) as err:
        adapter.send(out(text="hi"))
    assert "(#131030) Recipient phone number not in allowed list" in err.value.message
    assert "Add recipient phone number to recipient list" in err.value.message


def test_an_unknown_template_is_rejected(graph, adapter):
    with pytest.raises(ProviderRejected) as err:
        adapter.send(out("template", template={"name": "nope", "language": "en_US", "components": []}))
    assert "(#132001) Template name does not exist in the translation" in err.value.message
    assert err.value.details[0]["http_status"] == 404


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (out("image", media={"asset_id": "asset_1"}), "needs media.url or media.id"),
        (out("text"), "needs a body"),
        (out("template", template={"language": "en_US"}), "needs template.name"),
        (out("location", media={"name": "somewhere"}), "latitude and longitude"),
        (out("poll"), "cannot send messages of type 'poll'"),
    ],
)
def test_messages_the_api_cannot_take_are_rejected_before_any_request(graph, adapter, message, match):
    with pytest.raises(ProviderRejected, match=match):
        adapter.send(message)
    assert graph.requests == []


# React, read ----------------------------------------------------------------------------------------------------------
def test_react_sends_a_reaction_to_the_stored_counterpart(graph, adapter):
    wamid = graph.inbound_message("4915112345678")
    adapter.react_in_chat(wamid, "👍", "4915112345678")
    assert sent_json(graph) == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "4915112345678",
        "type": "reaction",
        "reaction": {"message_id": wamid, "emoji": "👍"},
    }


def test_react_with_an_empty_emoji_removes_the_reaction(graph, adapter):
    sent = adapter.send(out(text="hi")).provider_message_id
    adapter.react_in_chat(sent, "", TO)
    assert sent_json(graph)["reaction"] == {"message_id": sent, "emoji": ""}
    assert sent_json(graph)["to"] == TO


def test_a_reaction_is_never_addressed_by_decoding_the_message_id(graph, adapter):
    wamid = graph.inbound_message("4915112345678")
    with pytest.raises(ProviderRejected, match="other party"):
        adapter.react(wamid, "👍")
    with pytest.raises(ProviderRejected, match="no phone number"):
        adapter.react_in_chat(wamid, "👍", "")
    assert graph.requests == []


def test_read_marks_an_inbound_message_read(graph, adapter):
    wamid = graph.inbound_message(TO)
    adapter.read(wamid)
    assert sent_json(graph) == {"messaging_product": "whatsapp", "status": "read", "message_id": wamid}
    assert graph.reads == [wamid]


def test_read_of_an_unknown_message_is_rejected(graph, adapter):
    with pytest.raises(ProviderRejected, match=r"\(#100\) Invalid parameter"):
        adapter.read("wamid.unknown")


# Media ----------------------------------------------------------------------------------------------------------------
def test_download_media_fetches_the_url_then_the_bytes_with_the_token(graph, adapter):
    media_id = graph.add_media(b"\xff\xd8\xff\xe0jpeg bytes", "image/jpeg")
    got = adapter.download_media(media_id, "wamid.x", json.dumps({"type": "image", "image": {"id": media_id}}))

    assert got.data == b"\xff\xd8\xff\xe0jpeg bytes"
    assert got.mime_type == "image/jpeg"
    assert got.file_name == f"{media_id}.jpg"
    assert got.source_url.startswith(f"{graph.root}/whatsapp_business/attachments/?mid={media_id}")
    info, download = graph.requests
    assert (info.method, info.path) == ("GET", f"/v23.0/{media_id}")
    assert (download.method, download.path) == ("GET", "/whatsapp_business/attachments/")
    assert download.query["mid"] == media_id
    assert info.headers["authorization"] == download.headers["authorization"] == "Bearer t"


def test_download_media_keeps_a_documents_file_name(graph, adapter):
    media_id = graph.add_media(b"%PDF-1.7 ...", "application/pdf")
    payload = json.dumps({"type": "document", "document": {"id": media_id, "filename": "../../Invoice 42.pdf"}})
    got = adapter.download_media(media_id, "wamid.x", payload)
    assert got.file_name == "Invoice 42.pdf"
    assert got.mime_type == "application/pdf"


def test_a_corrupt_download_is_retried_later(graph, adapter):
    media_id = graph.add_media(b"abc", "image/png")
    graph.corrupt_media.add(media_id)
    with pytest.raises(ProviderUnavailable, match="SHA-256"):
        adapter.download_media(media_id, "wamid.x", "{}")


def test_an_unknown_media_id_is_rejected(graph, adapter):
    with pytest.raises(ProviderRejected, match="Unsupported get request"):
        adapter.download_media("424242", "wamid.x", "{}")


def test_a_media_id_cannot_escape_its_path(graph, adapter):
    with pytest.raises(ProviderRejected):
        adapter.download_media("../v23.0/" + graph.phone_number_id, "wamid.x", "{}")
    assert graph.last.raw_path == f"/v23.0/..%2Fv23.0%2F{graph.phone_number_id}"


# Business profile -----------------------------------------------------------------------------------------------------
def test_profile_reads_the_business_profile(graph, adapter):
    profile = adapter.profile()
    assert profile == {
        "about": "Hi there",
        "address": "1 Main St",
        "description": "We sell things",
        "email": "hello@acme.test",
        "profile_picture_url": "https://pps.whatsapp.net/v/acme.jpg",
        "websites": ["https://acme.test/"],
        "vertical": "RETAIL",
    }
    [request] = graph.requests
    assert (request.method, request.path) == ("GET", f"/v23.0/{graph.phone_number_id}/whatsapp_business_profile")
    assert request.query == {"fields": "about,address,description,email,profile_picture_url,websites,vertical"}


def test_profile_update_posts_then_reads_back(graph, adapter):
    profile = adapter.profile({"about": "Open 9-5", "websites": ["https://acme.test/help"], "business": True})
    post, get = graph.requests
    assert (post.method, post.path) == ("POST", f"/v23.0/{graph.phone_number_id}/whatsapp_business_profile")
    assert post.json == {"messaging_product": "whatsapp", "about": "Open 9-5", "websites": ["https://acme.test/help"]}
    assert get.method == "GET"
    assert profile["about"] == graph.profile["about"] == "Open 9-5"
    assert profile["websites"] == ["https://acme.test/help"]


def test_the_business_marker_alone_is_a_read(graph, adapter):
    adapter.profile({"business": True})
    assert [r.method for r in graph.requests] == ["GET"]


def test_unknown_profile_fields_fail_validation_before_any_request(graph, adapter):
    with pytest.raises(ValidationFailed) as err:
        adapter.profile({"name": "Acme", "about": "x"})
    assert err.value.details == [{"field": "body.name", "message": "not a WhatsApp business profile field"}]
    assert graph.requests == []


def test_graph_side_profile_validation_is_a_rejection(graph, adapter):
    with pytest.raises(ProviderRejected, match=r"\(#100\) Invalid parameter") as err:
        adapter.profile({"about": "x" * 200})
    assert len(err.value.message) < 300  # Meta's message, cut short: it echoes the refused value
    assert graph.violations  # Meta's document refuses it as Graph does; the fake saw an invalid request
    graph.violations.clear()


# Templates ------------------------------------------------------------------------------------------------------------
def test_templates_list(graph, adapter):
    result = adapter.templates("list", {"limit": 10})
    assert [t["name"] for t in result["templates"]] == ["hello_world"]
    assert result["next_cursor"] is None
    [request] = graph.requests
    assert (request.method, request.path) == ("GET", f"/v23.0/{graph.waba_id}/message_templates")
    assert request.query == {"limit": "10"}


def test_templates_create_list_with_cursor_and_delete(graph, adapter):
    template = {
        "name": "order_shipped",
        "language": "en_US",
        "category": "UTILITY",
        "components": [{"type": "BODY", "text": "Your order {{1}} has shipped."}],
    }
    created = adapter.templates("create", template)
    assert created["status"] == "PENDING"
    assert created["category"] == "UTILITY"
    post = graph.last
    assert (post.method, post.path, post.json) == ("POST", f"/v23.0/{graph.waba_id}/message_templates", template)

    first = adapter.templates("list", {"limit": 1})
    assert [t["name"] for t in first["templates"]] == ["hello_world"]
    assert first["next_cursor"]
    second = adapter.templates("list", {"limit": 1, "after": first["next_cursor"]})
    assert [t["name"] for t in second["templates"]] == ["order_shipped"]

    assert adapter.templates("delete", {"name": "order_shipped"}) == {"deleted": True, "name": "order_shipped"}
    delete = graph.last
    assert (delete.method, delete.path, delete.query) == (
        "DELETE",
        f"/v23.0/{graph.waba_id}/message_templates",
        {"name": "order_shipped"},
    )
    assert [t["name"] for t in graph.templates] == ["hello_world"]


def test_template_errors(graph, adapter):
    with pytest.raises(ProviderRejected, match="Content in this language already exists"):
        adapter.templates(
            "create",
            {"name": "hello_world", "language": "en_US", "category": "UTILITY", "components": [{"type": "BODY"}]},
        )
    with pytest.raises(ProviderRejected, match="Template gone was not found"):
        adapter.templates("delete", {"name": "gone"})
    with pytest.raises(ValidationFailed):
        adapter.templates("create", {"name": "x"})
    with pytest.raises(ValidationFailed):
        adapter.templates("delete", {})
    with pytest.raises(ValidationFailed):
        adapter.templates("approve", {})


# Transport failures ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_5xx_and_429_are_unavailable(graph, adapter, status):
    graph.fail_next(status, body={"error": {"message": "Service temporarily unavailable", "code": 2}})
    with pytest.raises(ProviderUnavailable, match=f"HTTP {status}"):
        adapter.send(out(text="hi"))


@pytest.mark.parametrize(
    "error",
    [
        {"message": "(#130429) Rate limit hit", "type": "OAuthException", "code": 130429},
        {"message": "(#4) Application request limit reached", "type": "OAuthException", "code": 4},
        {"message": "(#131000) Something went wrong", "code": 131000, "is_transient": True},
    ],
)
def test_graph_throttling_reported_as_400_is_unavailable(graph, adapter, error):
    graph.fail_next(400, body={"error": error})
    with pytest.raises(ProviderUnavailable, match=r"\(#"):
        adapter.send(out(text="hi"))


def test_a_timeout_is_unavailable(graph, adapter):
    adapter.timeout = 0.2
    graph.hang_next(seconds=3)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match=r"did not answer within 0\.2 s"):
        adapter.send(out(text="hi"))
    assert time.monotonic() - started < 2


def test_connection_refused_is_unavailable(graph):
    adapter = WhatsAppCloudProvider(make_channel(graph, base_url=closed_port_url() + "/v21.0"))
    with pytest.raises(ProviderUnavailable, match="could not be reached"):
        adapter.connect()


def test_a_dropped_connection_is_unavailable(graph, adapter):
    graph.drop_next()
    with pytest.raises(ProviderUnavailable, match="could not be reached"):
        adapter.connect()


def test_redirects_are_not_followed(graph, adapter):
    graph.fail_next(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
    with pytest.raises(ProviderRejected, match="redirect"):
        adapter.connect()
    assert len(graph.requests) == 1


def test_a_2xx_that_is_not_json_is_unavailable(graph, adapter):
    graph.fail_next(200, body=b"<html>proxy</html>")
    with pytest.raises(ProviderUnavailable, match="not JSON"):
        adapter.connect()


def test_a_2xx_without_a_message_id_is_unavailable(graph, adapter):
    graph.fail_next(200, body={"messaging_product": "whatsapp", "messages": []})
    with pytest.raises(ProviderUnavailable, match="without its id"):
        adapter.send(out(text="hi"))


@pytest.fixture
def prod_stage(monkeypatch):
    monkeypatch.setenv("STAGE", "prod")
    monkeypatch.setenv("CURSOR_SECRET_ARN", FAKE_SECRET_ARN)  # a deployed stage names its secret (never read here)
    reset_settings()
    yield
    monkeypatch.undo()
    reset_settings()


@pytest.mark.parametrize(
    "base_url",
    [
        "http://graph.facebook.com/v23.0",  # not https
        "https://127.0.0.1/v21.0",  # loopback
        "https://169.254.169.254/latest",  # cloud metadata
        "https://10.0.0.7/v21.0",  # private
        "https://[::1]/v21.0",  # loopback v6
        "ftp://graph.facebook.com/v23.0",
    ],
)
def test_outside_local_stages_only_public_https_destinations_are_used(graph, prod_stage, base_url):
    adapter = WhatsAppCloudProvider(make_channel(graph, base_url=base_url))
    with pytest.raises(ProviderRejected, match="base_url"):
        adapter.connect()


# Callbacks ------------------------------------------------------------------------------------------------------------
def test_subscription_handshake(adapter):
    params = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "1158201444"}
    assert WhatsAppCloudProvider.verify_subscription(params, "verify-me") == "1158201444"
    assert adapter.verify_subscription(params, "verify-me") == "1158201444"
    with pytest.raises(Forbidden):
        WhatsAppCloudProvider.verify_subscription({**params, "hub.verify_token": "nope"}, "verify-me")
    with pytest.raises(Forbidden):
        WhatsAppCloudProvider.verify_subscription({**params, "hub.verify_token": ""}, "")
    with pytest.raises(ValidationFailed):
        WhatsAppCloudProvider.verify_subscription({**params, "hub.mode": "unsubscribe"}, "verify-me")


@pytest.mark.parametrize("header", ["X-Hub-Signature-256", "x-hub-signature-256", "X-HUB-SIGNATURE-256"])
def test_a_signed_callback_is_accepted_whatever_the_header_case(graph, adapter, header):
    body = graph.webhook({"statuses": []})
    adapter.verify_callback({"Content-Type": "application/json", header: graph.signature(body)}, body)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Hub-Signature-256": ""},
        {"X-Hub-Signature-256": "sha1=abc"},
        {"X-Hub-Signature-256": "sha256=" + "0" * 64},
        {"X-Hub-Signature": "sha256=whatever"},
    ],
)
def test_a_callback_with_a_missing_or_wrong_signature_is_refused(graph, adapter, headers):
    with pytest.raises(Unauthenticated):
        adapter.verify_callback(headers, graph.webhook({}))


def test_a_callback_signed_with_another_secret_or_for_another_body_is_refused(graph, adapter):
    body = graph.webhook({})
    with pytest.raises(Unauthenticated):
        adapter.verify_callback({"X-Hub-Signature-256": graph.signature(body, secret="other")}, body)
    with pytest.raises(Unauthenticated):
        adapter.verify_callback({"X-Hub-Signature-256": graph.signature(body)}, body + b" ")


def test_a_channel_without_app_secret_refuses_every_callback(graph):
    adapter = WhatsAppCloudProvider(make_channel(graph, app_secret=""))
    body = graph.webhook({})
    with pytest.raises(Unauthenticated):
        adapter.verify_callback({"X-Hub-Signature-256": graph.signature(body, secret="")}, body)


def test_parse_callback_messages_of_several_types(graph, adapter):
    image_sha = hashlib.sha256(b"img").hexdigest()
    body = graph.webhook(
        {
            "contacts": [{"profile": {"name": "Kerry Fisher"}, "wa_id": "16315551234"}],
            "messages": [
                {
                    "from": "16315551234",
                    "id": "wamid.text1",
                    "timestamp": "1700000000",
                    "type": "text",
                    "text": {"body": "Hello, I need help"},
                },
                {
                    "from": "16315551234",
                    "id": "wamid.image1",
                    "timestamp": "1700000001",
                    "type": "image",
                    "image": {"caption": "My receipt", "mime_type": "image/jpeg", "sha256": image_sha, "id": "9001"},
                },
                {
                    "from": "16315551234",
                    "id": "wamid.doc1",
                    "timestamp": "1700000002",
                    "type": "document",
                    "document": {"filename": "order.pdf", "mime_type": "application/pdf", "sha256": "x", "id": "9002"},
                },
                {
                    "from": "16315551234",
                    "id": "wamid.loc1",
                    "timestamp": "1700000003",
                    "type": "location",
                    "location": {"latitude": 52.52, "longitude": 13.405, "name": "Office", "address": "Main St 1"},
                },
                {
                    "context": {"from": "15550100999", "id": "wamid.ours"},
                    "from": "16315551234",
                    "id": "wamid.button1",
                    "timestamp": "1700000004",
                    "type": "interactive",
                    "interactive": {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes please"}},
                },
                {
                    "from": "16315551234",
                    "id": "wamid.react1",
                    "timestamp": "1700000005",
                    "type": "reaction",
                    "reaction": {"message_id": "wamid.ours", "emoji": "❤️"},
                },
            ],
        }
    )
    events = adapter.parse_callback(body)

    assert events == [
        InboundMessage(
            "wamid.text1", "16315551234", "text", "Hello, I need help", None, "Kerry Fisher", "2023-11-14T22:13:20.000Z"
        ),
        InboundMessage(
            "wamid.image1",
            "16315551234",
            "image",
            "My receipt",
            {"id": "9001", "mime_type": "image/jpeg", "sha256": image_sha, "caption": "My receipt"},
            "Kerry Fisher",
            "2023-11-14T22:13:21.000Z",
        ),
        InboundMessage(
            "wamid.doc1",
            "16315551234",
            "document",
            None,
            {"id": "9002", "mime_type": "application/pdf", "sha256": "x", "filename": "order.pdf"},
            "Kerry Fisher",
            "2023-11-14T22:13:22.000Z",
        ),
        InboundMessage(
            "wamid.loc1",
            "16315551234",
            "location",
            None,
            {"latitude": 52.52, "longitude": 13.405, "name": "Office", "address": "Main St 1"},
            "Kerry Fisher",
            "2023-11-14T22:13:23.000Z",
        ),
        InboundMessage(
            "wamid.button1",
            "16315551234",
            "interactive",
            "Yes please",
            {
                "reply_type": "button_reply",
                "reply_id": "yes",
                "context": {"message_id": "wamid.ours", "from": "15550100999"},
            },
            "Kerry Fisher",
            "2023-11-14T22:13:24.000Z",
        ),
        InboundMessage(
            "wamid.react1",
            "16315551234",
            "reaction",
            "❤️",
            {"reaction_to": "wamid.ours"},
            "Kerry Fisher",
            "2023-11-14T22:13:25.000Z",
        ),
    ]


def test_parse_callback_statuses_including_a_failure(graph, adapter):
    conversation = {"id": "c1", "origin": {"type": "service"}}
    body = graph.webhook(
        {
            "statuses": [
                {
                    "id": "wamid.a",
                    "status": "sent",
                    "timestamp": "1700000000",
                    "recipient_id": TO,
                    "conversation": conversation,
                },
                {"id": "wamid.a", "status": "delivered", "timestamp": "1700000001", "recipient_id": TO},
                {"id": "wamid.a", "status": "read", "timestamp": "1700000002", "recipient_id": TO},
                {
                    "id": "wamid.b",
                    "status": "failed",
                    "timestamp": "1700000003",
                    "recipient_id": TO,
                    "errors": [
                        {
                            "code": 131026,
                            "title": "Message undeliverable",
                            "message": "Message undeliverable",
                            "error_data": {"details": "Unable to deliver message: the recipient is not on WhatsApp"},
                        }
                    ],
                },
                {"id": "wamid.c", "status": "deleted", "timestamp": "1700000004", "recipient_id": TO},
            ]
        }
    )
    assert adapter.parse_callback(body) == [
        StatusCallback("wamid.a", "sent", "2023-11-14T22:13:20.000Z"),
        StatusCallback("wamid.a", "delivered", "2023-11-14T22:13:21.000Z"),
        StatusCallback("wamid.a", "read", "2023-11-14T22:13:22.000Z"),
        StatusCallback(
            "wamid.b",
            "failed",
            "2023-11-14T22:13:23.000Z",
            "(131026) Message undeliverable: Unable to deliver message: the recipient is not on WhatsApp",
        ),
    ]


def test_parse_callback_ignores_other_numbers_and_other_fields(graph, adapter):
    doc = json.loads(
        graph.webhook({"messages": [{"from": "1", "id": "wamid.z", "type": "text", "text": {"body": "x"}}]})
    )
    doc["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "someone-else"
    doc["entry"].append({"id": graph.waba_id, "changes": [{"field": "message_template_status_update", "value": {}}]})
    assert adapter.parse_callback(json.dumps(doc).encode()) == []


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        json.dumps({"object": "page", "entry": []}).encode(),
        json.dumps({"object": "whatsapp_business_account"}).encode(),
        json.dumps({"object": "whatsapp_business_account", "entry": [{"changes": "x"}]}).encode(),
        json.dumps(
            {
                "object": "whatsapp_business_account",
                "entry": [{"changes": [{"field": "messages", "value": {"messages": [{"type": "text"}]}}]}],
            }
        ).encode(),
        json.dumps(
            {
                "object": "whatsapp_business_account",
                "entry": [{"changes": [{"field": "messages", "value": {"statuses": "sent"}}]}],
            }
        ).encode(),
    ],
)
def test_a_malformed_callback_fails_validation(adapter, body):
    with pytest.raises(ValidationFailed):
        adapter.parse_callback(body)


def test_parse_callback_flow_replies_and_senders_known_only_by_user_id(graph, adapter):
    body = graph.webhook(
        {
            "contacts": [
                {"profile": {"name": "Ada", "username": "@ada"}, "user_id": "US.13491208655302741918"},
                {"profile": {"name": "Bob"}, "wa_id": "14155552672", "user_id": "US.99"},
            ],
            "messages": [
                {
                    "from_user_id": "US.13491208655302741918",
                    "id": "wamid.flow1",
                    "timestamp": "1763800000",
                    "type": "interactive",
                    "interactive": {
                        "type": "nfm_reply",
                        "nfm_reply": {
                            "name": "flow",
                            "body": "Sent",
                            "response_json": '{"flow_token": "t", "ok": true}',
                        },
                    },
                },
                {
                    "from": "14155552672",
                    "id": "wamid.b1",
                    "timestamp": "1763800001",
                    "type": "text",
                    "text": {"body": "hi"},
                },
            ],
        }
    )
    flow, bob = adapter.parse_callback(body)
    assert isinstance(flow, InboundMessage) and isinstance(bob, InboundMessage)
    assert (flow.from_phone, flow.from_user_id, flow.contact_name) == ("", "US.13491208655302741918", "Ada")
    assert flow.text == "Sent"
    assert flow.media == {"reply_type": "nfm_reply", "name": "flow", "response_json": '{"flow_token": "t", "ok": true}'}
    assert (bob.from_phone, bob.from_user_id, bob.contact_name) == ("14155552672", "US.99", "Bob")
