"""Meta's OpenAPI document as the whatsapp_cloud contract: every request the adapter can make validates against it
(the fake Graph server checks each one with openapi-core), and every `/whatsapp/webhooks` example in it is accepted
through the app-level callback and lands where it should."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.commerce import orders
from switchboard.config import reset_settings
from switchboard.errors import UnsupportedByProvider, ValidationFailed
from switchboard.providers.base import OutboundMessage, ProviderRejected
from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider
from tests.fakes import FakeServer, Request, Response, meta_contract
from tests.fakes.graph_api import FakeGraphApi
from tests.integration import cloud_queue
from tests.integration.support import Api

TO = "15550001111"


@pytest.fixture
def graph() -> Iterator[FakeGraphApi]:
    with FakeGraphApi(token="t") as fake:
        yield fake


@pytest.fixture
def adapter(graph: FakeGraphApi) -> WhatsAppCloudProvider:
    return WhatsAppCloudProvider(
        {
            "id": "ch_cloud",
            "platform": "whatsapp_cloud",
            "status": "connected",
            "config": {
                "base_url": graph.url,
                "access_token": "t",
                "phone_number_id": graph.phone_number_id,
                "waba_id": graph.waba_id,
                "app_secret": graph.app_secret,
            },
        }
    )


def out(type_: str, **kw: Any) -> OutboundMessage:
    return OutboundMessage(message_id="0190a0b0-0000-7000-8000-000000000001", to_phone=TO, type=type_, **kw)


INTERACTIVE = {
    "button": {
        "type": "button",
        "body": {"text": "Pick one"},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": "yes", "title": "Yes"}},
                {"type": "reply", "reply": {"id": "no", "title": "No"}},
            ]
        },
    },
    "list": {
        "type": "list",
        "header": {"type": "text", "text": "Menu"},
        "body": {"text": "What would you like?"},
        "footer": {"text": "Tap to choose"},
        "action": {
            "button": "Options",
            "sections": [{"title": "Drinks", "rows": [{"id": "tea", "title": "Tea", "description": "Green"}]}],
        },
    },
    "cta_url": {
        "type": "cta_url",
        "body": {"text": "See the schedule"},
        "action": {"name": "cta_url", "parameters": {"display_text": "Open", "url": "https://example.com/s"}},
    },
    "flow": {
        "type": "flow",
        "body": {"text": "Sign up"},
        "action": {
            "name": "flow",
            "parameters": {"flow_message_version": "3", "flow_id": "1234567890", "flow_cta": "Start"},
        },
    },
    "order_details": {
        "type": "order_details",
        "body": {"text": "Your bill"},
        "action": {
            "name": "review_and_pay",
            "parameters": {
                "reference_id": "ord_01jd8a1b2c3d4e5f6g7h8j9kmn",
                "type": "physical-goods",
                "currency": "INR",
                "total_amount": {"value": 2100, "offset": 100},
                "order": {
                    "status": "pending",
                    "catalog_id": "194836987003835",
                    "items": [
                        {
                            "retailer_id": "di9ozbzfi4",
                            "name": "Mug",
                            "amount": {"value": 1000, "offset": 100},
                            "quantity": 2,
                        }
                    ],
                    "subtotal": {"value": 2000, "offset": 100},
                    "tax": {"value": 100, "offset": 100, "description": "GST"},
                },
            },
        },
    },
    "order_status": {
        "type": "order_status",
        "body": {"text": "Order 1043: partially shipped."},
        "action": {
            "name": "review_order",
            "parameters": {
                "reference_id": "ord_01jd8a1b2c3d4e5f6g7h8j9kmn",
                "order": {"status": "partially-shipped", "description": "The mugs are on their way"},
            },
        },
    },
}
CONTACT_CARD = {
    "name": {"formatted_name": "Ada Lovelace", "first_name": "Ada", "last_name": "Lovelace"},
    "phones": [{"phone": "+44 20 7946 0000", "type": "WORK", "wa_id": "442079460000"}],
    "emails": [{"email": "ada@example.com", "type": "WORK"}],
}
TEMPLATE_COMPONENTS = [
    {"type": "header", "parameters": [{"type": "image", "image": {"link": "https://example.com/h.jpg"}}]},
    {"type": "body", "parameters": [{"type": "text", "text": "Ada"}]},
]

# Every operation of Meta's document the adapter reaches (its operationId), and the calls that reach it.
EXPECTED_OPERATIONS = {
    "getPhoneNumberById",
    "sendMessage",
    "uploadImage",
    "retrieveMediaUrl",
    "getWhatsAppBusinessProfile",
    "updateWhatsAppBusinessProfileInformation",
    "getTemplateByNameDefaultFields",
    "createAuthenticationTemplateWOtpCopyCodeButton",
    "deleteTemplateByName",
    "blockUserS",
    "unblockUserS",
    "manageCalls",
    "createGroup",
    "getActiveGroups",
    "updateGroupSettings",
    "removeGroupParticipants",
    "createGroupInviteLink",
}


def test_every_request_the_adapter_can_make_validates_against_metas_document(graph, adapter):
    adapter.connect()
    inbound = graph.inbound_message(TO)
    image_id = adapter.upload_media(b"\x89PNG\r\n", "image/png", "dot.png")
    sticker_id = adapter.upload_media(b"RIFF....WEBP", "image/webp", "s.webp")
    sends = [
        out("text", text="see https://example.com", preview_url=True),
        out("text", text="no preview"),
        out("text", text="a reply", reply_to=inbound),
        out("image", media={"url": "https://example.com/a.jpg", "caption": "look"}),
        out("image", media={"id": image_id}),
        out("video", media={"url": "https://example.com/a.mp4", "caption": "watch"}),
        out("audio", media={"url": "https://example.com/a.ogg"}),
        out("document", media={"url": "https://example.com/a.pdf", "filename": "a.pdf", "caption": "read"}),
        out("sticker", media={"url": "https://example.com/a.webp"}),
        out("sticker", media={"id": sticker_id}),
        out("location", media={"latitude": 52.52, "longitude": 13.405, "name": "Office", "address": "Mitte"}),
        out("location", media={"latitude": 0, "longitude": 0}),
        out("contacts", contacts=[CONTACT_CARD]),
        *(out("interactive", interactive=body) for body in INTERACTIVE.values()),
        out("template", template={"name": "hello_world", "language": "en_US"}),
        out("template", template={"name": "hello_world", "language": "en_US", "components": TEMPLATE_COMPONENTS}),
    ]
    for message in sends:
        assert adapter.send(message).provider_message_id.startswith("wamid.")
    adapter.react_in_chat(inbound, "👍", TO)
    adapter.react_in_chat(inbound, "", TO)
    adapter.read(inbound)
    adapter.typing_indicator(inbound)
    assert adapter.download_media(image_id, "wamid.x", "{}").data == b"\x89PNG\r\n"
    adapter.profile()
    adapter.profile({"about": "We are open", "websites": ["https://acme.test/"]})
    adapter.templates("list", {"limit": 10})
    adapter.templates(
        "create",
        {
            "name": "order_ready",
            "language": "en_US",
            "category": "UTILITY",
            "components": [{"type": "BODY", "text": "Hi"}],
        },
    )
    adapter.templates("delete", {"name": "order_ready"})
    adapter.block(TO, True)
    adapter.block(TO, False)
    graph.calls["wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA"] = "ringing"
    assert adapter.reject_call("wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA", TO) == {"success": True}
    made = adapter.groups("create", {"name": "Inquiry", "description": "New cars", "participants": [TO]})
    assert made["pending"] and made["failed"][0]["phone"] == TO
    adapter.groups("create", {"name": "No description", "participants": []})
    group_id, _ = graph.complete_group(made["request_id"], [TO, "15550002222"])
    assert adapter.groups("list", {})["groups"] == [{"jid": group_id}]
    adapter.groups("set_name", {"jid": group_id, "name": "Renamed"})
    adapter.groups("set_description", {"jid": group_id, "description": ""})
    nine = [str(15550003000 + i) for i in range(9)]  # Meta takes at most 8 a call
    removed = adapter.groups("participants", {"jid": group_id, "action": "remove", "participants": [TO, *nine]})
    assert len(removed["results"]) == 10
    assert (
        adapter.groups("invite_code", {"jid": group_id, "revision": 0})["invite_code"]
        == graph.groups[group_id]["invite"]
    )
    adapter.groups("set_photo", {"jid": group_id, "image_bytes": PNG, "mime_type": "image/png"})
    with ImageHost(JPEG) as host:
        adapter.groups("set_photo", {"jid": group_id, "image_url": f"{host.root}/p.jpg"})
    assert graph.groups[group_id]["photo"] == ("image/jpeg", JPEG)

    assert graph.violations == []
    assert set(graph.operations) == EXPECTED_OPERATIONS
    assert Counter(graph.operations)["sendMessage"] == len(sends) + 4  # two reactions, a read, a typing indicator
    assert Counter(graph.operations)["removeGroupParticipants"] == 2
    assert Counter(graph.operations)["updateGroupSettings"] == 4  # name, description, two photos
    kinds = [r.json.get("type") for r in graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")]
    assert set(kinds) >= {"text", "image", "video", "audio", "document", "sticker", "location", "contacts"}
    assert set(kinds) >= {"interactive", "template", "reaction", None}
    assert graph.typing == [inbound] and graph.blocked == [] and graph.calls[next(iter(graph.calls))] == "reject"
    assert graph.media[image_id] == (b"\x89PNG\r\n", "image/png")


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x01" * 32 + b"\xff\xd9"


class ImageHost(FakeServer):
    """Another host serving one body at any path (a group photo's image URL)."""

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body

    def handle(self, request: Request) -> Response:
        return Response(200, self.body, content_type="image/jpeg")


def test_a_group_photo_url_is_fetched_without_the_token_and_bounded(graph, adapter):
    made = adapter.groups("create", {"name": "Inquiry", "participants": []})
    group_id, _ = graph.complete_group(made["request_id"], [TO])
    with ImageHost(JPEG) as host:
        adapter.groups("set_photo", {"jid": group_id, "image_url": f"{host.root}/p.jpg"})
        (fetched,) = host.requests
    assert "authorization" not in fetched.headers  # Meta's token never leaves for another host
    with ImageHost(JPEG + b"\x00" * (5 * 1024 * 1024)) as host, pytest.raises(ProviderRejected, match="larger"):
        adapter.groups("set_photo", {"jid": group_id, "image_url": f"{host.root}/big.jpg"})
    with ImageHost(b"GIF89a" + b"\x00" * 32) as host, pytest.raises(ValidationFailed, match="JPEG or PNG"):
        adapter.groups("set_photo", {"jid": group_id, "image_url": f"{host.root}/p.gif"})
    with pytest.raises(ProviderRejected):  # the address checks of every provider request
        adapter.groups("set_photo", {"jid": group_id, "image_url": "http://169.254.169.254/latest/meta-data"})
    with pytest.raises(UnsupportedByProvider, match="removing a group photo"):
        adapter.groups("set_photo", {"jid": group_id, "remove": True})
    assert len(graph.requests_to("POST", f"/v23.0/{group_id}")) == 1


def test_a_request_metas_document_refuses_fails_the_contract(graph, adapter):
    """The check bites: a body Meta's document does not allow is refused and recorded."""
    with pytest.raises(ProviderRejected, match="does not match the API's description"):
        adapter.send(out("interactive", interactive={"type": "button", "body": {"text": "x"}, "action": {}}))
    with pytest.raises(ProviderRejected, match="does not match the API's description"):
        adapter.send(out("contacts", contacts=[{"name": {"formatted_name": "A"}, "nickname": "not a field"}]))
    assert len(graph.violations) == 2
    graph.violations.clear()


def test_the_repairs_are_the_listed_ones_and_metas_own_examples_validate_where_the_document_is_right():
    doc = meta_contract.repaired()
    send = doc["paths"]["/{Version}/{Phone-Number-ID}/messages"]["post"]["requestBody"]["content"]["application/json"]
    results = {}
    for name, example in meta_contract.document()["paths"]["/{Version}/{Phone-Number-ID}/messages"]["post"][
        "requestBody"
    ]["content"]["application/json"]["examples"].items():
        body = json.dumps(example["value"]).encode()
        headers = {"Authorization": "Bearer t", "Content-Type": "application/json"}
        path_params = {"Version": "v23.0", "Phone-Number-ID": "1"}
        template = "/{Version}/{Phone-Number-ID}/messages"
        results[name] = meta_contract.check("POST", template, "/v23.0/1/messages", path_params, {}, headers, body)
    assert len(results) == 50 and "oneOf" in send["schema"]
    # With the repairs, an example fails only for what the document really requires of it (a recipient_type, a
    # template language policy, coordinates as strings, a boolean where a string is due, ...), never for a property
    # its own allOf members define.
    passing = [name for name, errors in results.items() if not errors]
    assert len(passing) >= 34, {name: errors[:1] for name, errors in results.items() if errors}
    # repair 8: Meta's own order examples validate, and they are what POST /v1/messages takes for these types
    assert {"Send Order Details Message", "Send Order Status Message"} <= set(passing)
    examples = meta_contract.document()["paths"]["/{Version}/{Phone-Number-ID}/messages"]["post"]["requestBody"]
    for name in ("Send Order Details Message", "Send Order Status Message"):
        interactive = examples["content"]["application/json"]["examples"][name]["value"]["interactive"]
        checked = orders.parse_interactive(interactive)
        assert checked is not None and checked.interactive == interactive, name
    for errors in results.values():
        assert not any("were unexpected" in e and "type" in e and "to" in e for e in errors), errors


def test_a_channels_base_url_points_away_from_meta_only_on_the_local_stage(graph, adapter, monkeypatch):
    monkeypatch.setenv("STAGE", "prod")
    # a deployed stage names its platform secret (never read here)
    monkeypatch.setenv("CURSOR_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:1:secret:sb-prod-Cursor-AbCdEf")
    reset_settings()
    try:
        with pytest.raises(ProviderRejected, match="only on the local"):
            adapter.connect()
        meta = WhatsAppCloudProvider(
            {**adapter.channel, "config": {**adapter.config, "base_url": "https://graph.facebook.com/v21.0"}}
        )
        assert meta._base_url() == "https://graph.facebook.com/v23.0"  # Meta's, with the pinned version
        monkeypatch.setenv("GRAPH_API_VERSION", "v24.0")
        reset_settings()
        assert meta._base_url() == "https://graph.facebook.com/v24.0"
    finally:
        monkeypatch.undo()
        reset_settings()
    assert graph.requests == []


# Webhook examples -----------------------------------------------------------------------------------------------------
EXAMPLE_NUMBER = "106540352242922"


def _signed(body: bytes, secret: str) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Hub-Signature-256": f"sha256={digest}"}


def _stored(api: Api, channel_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for conv in api.get("/v1/conversations", params={"limit": 100}).json()["data"]:
        if conv["channel_id"] == channel_id:
            rows += api.get(f"/v1/conversations/{conv['id']}/messages", params={"limit": 100}).json()["data"]
    return rows


def test_every_webhook_example_of_metas_document_is_accepted_and_lands_where_it_should(api: Api):
    """Each example is replayed, signed, through the app-level URL to a channel of its number (a fresh one per
    example: Meta's examples reuse message ids, and a repeated id is a duplicate delivery)."""
    config = {
        "access_token": "tok",
        "phone_number_id": EXAMPLE_NUMBER,
        "waba_id": "419561257915477",
        "app_secret": "example-app-secret",
    }
    examples = meta_contract.webhook_examples()
    assert len(examples) == 16
    landed: dict[str, dict[str, Any]] = {}
    for name, body in examples.items():
        created = api.post("/v1/channels", json={"name": "meta", "platform": "whatsapp_cloud", "config": config})
        assert created.status_code == 201, created.text
        channel_id = created.json()["data"]["id"]
        url = "/v1/providers/whatsapp_cloud/webhook"
        api.assert_error(
            api.post(url, content=body, headers={"Content-Type": "application/json"}), 401, "unauthenticated"
        )
        resp, done = cloud_queue.post(api, url, body, _signed(body, "example-app-secret"))
        assert resp.status_code == 200, (name, resp.text)
        doc = json.loads(body)
        messages = [m for e in doc["entry"] for c in e["changes"] for m in c["value"].get("messages", [])]
        assert done == {"received": len(messages), "statuses_applied": 0}, name
        rows = _stored(api, channel_id)
        assert [(r["provider_message_id"], r["type"]) for r in rows] == [(m["id"], m["type"]) for m in messages], name
        for row in rows:
            landed[name] = row
        updates = [c for e in doc["entry"] for c in e["changes"] if c["field"] != "messages"]
        logs = api.get(f"/v1/channels/{channel_id}/logs", params={"limit": 100}).json()["data"]
        logged = [entry for entry in logs if entry["event"].startswith("whatsapp.")]
        assert [entry["event"] for entry in logged] == [f"whatsapp.{c['field']}" for c in updates], name
        for entry in logged:
            landed[name] = entry
        assert api.delete(f"/v1/channels/{channel_id}").status_code == 204
    assert set(landed) == set(examples)
    group = landed["Group Create Message"]["detail"]
    assert group["field"] == "group_lifecycle_update" and group["value"]["groups"][0]["type"] == "group_create"
    assert landed["Group Remove Participants"]["event"] == "whatsapp.group_participants_update"
    assert landed["Text Message"]["text"] == "Does it come in another color?"
    assert landed["Text Message"]["from_phone"] == "16505551234"
    assert landed["Text Message with Context (Product Inquiry)"]["media"]["context"]["message_id"].startswith("wamid.")
    assert "referral" in landed["Text Message from Click to WhatsApp Ad"]["media"]
    assert landed["Reaction Message"]["media"]["reaction_to"].startswith("wamid.")
    assert landed["Image Message"]["media"]["id"]
    assert landed["Location Message"]["media"]["latitude"] is not None
    assert landed["Contact Sharing Message"]["media"]["contacts"]
    assert landed["Order Message"]["media"]["product_items"][0]["product_retailer_id"] == "di9ozbzfi4"
    [order] = api.get("/v1/orders").json()["data"]  # the cart of Meta's example is an order
    assert [(i["product_retailer_id"], i["quantity"], i["item_price"]) for i in order["items"]] == [
        ("di9ozbzfi4", 2, 30),
        ("nqryix03ez", 1, 25),
    ]
    assert (order["currency"], order["total_amount"], order["status"]) == ("USD", 85, "pending")
    assert landed["Unsupported Message"]["media"]["errors"][0]["code"] == 131051
    assert landed["Button Message"]["media"]["payload"]
    assert landed["Interactive List Reply Message"]["media"]["reply_type"] == "list_reply"
    assert landed["Interactive Button Reply Message"]["media"]["reply_type"] == "button_reply"
    assert landed["System Message"]["media"]["type"] == "user_changed_number"
