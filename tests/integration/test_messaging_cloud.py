"""Messaging over a whatsapp_cloud channel against the fake Graph API: what reaches the wire, callbacks, outages."""

from __future__ import annotations

import json

import pytest

from switchboard.messaging import messages
from switchboard.store import get_store
from tests.fakes.graph_api import FakeGraphApi
from tests.integration import cloud_queue
from tests.integration.support import Api


@pytest.fixture
def graph():
    with FakeGraphApi(token="tok") as fake:
        yield fake


@pytest.fixture
def cloud(api: Api, graph: FakeGraphApi) -> dict:
    config = graph.channel_config(verify_token="vt")
    ch = api.post("/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": config})
    assert ch.status_code == 201, ch.text
    assert ch.json()["data"]["config"]["access_token"] == "••••"
    connected = api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]
    assert connected["status"] == "connected", connected
    return connected


def _callback(api: Api, graph: FakeGraphApi, channel: dict, value: dict, *, sign: bool = True):
    """The channel's own callback URL, then the changes it queued processed; the answer and what was done."""
    body = graph.webhook(value)
    headers = {"Content-Type": "application/json"}
    if sign:
        headers["X-Hub-Signature-256"] = graph.signature(body)
    return cloud_queue.post(api, f"/v1/providers/{channel['id']}/callback", body, headers)


def test_inbound_reply_and_statuses_round_trip(api: Api, graph: FakeGraphApi, cloud: dict):
    wamid = graph.inbound_message("14155552671")
    inbound = {
        "contacts": [{"profile": {"name": "Ada"}, "wa_id": "14155552671"}],
        "messages": [
            {"from": "14155552671", "id": wamid, "timestamp": "1763800000", "type": "text", "text": {"body": "hello"}}
        ],
    }
    api.assert_error(_callback(api, graph, cloud, inbound, sign=False)[0], 401, "unauthenticated")
    first, done = _callback(api, graph, cloud, inbound)
    assert first.status_code == 200, first.text
    assert done == {"received": 1, "statuses_applied": 0}
    assert _callback(api, graph, cloud, inbound)[0].status_code == 200  # a duplicate callback: still one message
    thread = api.get("/v1/conversations").json()["data"]
    assert len(thread) == 1 and thread[0]["unread_count"] == 1
    original = api.get(f"/v1/conversations/{thread[0]['id']}/messages").json()["data"][0]
    assert original["provider_message_id"] == wamid

    sent = api.post(
        "/v1/messages",
        json={"channel_id": cloud["id"], "to": "+14155552671", "reply_to": original["id"], "text": {"body": "hi Ada"}},
    ).json()["data"]
    assert messages.deliver(get_store(), api.org_id, sent["id"]) == "sent"
    wire = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1].json
    assert wire["to"] == "14155552671" and wire["text"]["body"] == "hi Ada"
    assert wire["context"] == {"message_id": wamid}  # our id became the provider's
    pmid = api.get(f"/v1/messages/{sent['id']}").json()["data"]["provider_message_id"]
    statuses = {
        "statuses": [
            {"id": pmid, "status": "read", "timestamp": "1763800100", "recipient_id": "14155552671"},
            {"id": pmid, "status": "delivered", "timestamp": "1763800050", "recipient_id": "14155552671"},
        ]
    }
    applied = _callback(api, graph, cloud, statuses)[1]
    assert applied == {"received": 0, "statuses_applied": 1}
    assert api.get(f"/v1/messages/{sent['id']}").json()["data"]["status"] == "read"


def test_subscription_handshake(api: Api, cloud: dict):
    ok = api.get(
        f"/v1/providers/{cloud['id']}/callback",
        params={"hub.mode": "subscribe", "hub.verify_token": "vt", "hub.challenge": "42"},
        headers={},
    )
    assert ok.status_code == 200 and ok.text == "42"
    bad = api.get(
        f"/v1/providers/{cloud['id']}/callback",
        params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "42"},
        headers={},
    )
    assert bad.status_code == 403


def test_assets_are_sent_as_links_and_outages_are_retried(api: Api, graph: FakeGraphApi, cloud: dict):
    asset = api.post("/v1/media/uploads", json={"content_type": "image/png", "size": 3}).json()["data"]
    sent = api.post(
        "/v1/messages",
        json={
            "channel_id": cloud["id"],
            "to": "+14155552671",
            "type": "image",
            "media": {"asset_id": asset["id"], "caption": "look"},
        },
    ).json()["data"]
    graph.fail_next(status=503)
    from switchboard.providers import ProviderUnavailable

    with pytest.raises(ProviderUnavailable):
        messages.deliver(get_store(), api.org_id, sent["id"])
    assert api.get(f"/v1/messages/{sent['id']}").json()["data"]["status"] == "pending"  # the queue retries it
    assert messages.deliver(get_store(), api.org_id, sent["id"]) == "sent"
    wire = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1].json
    assert wire["type"] == "image" and wire["image"]["caption"] == "look"
    assert wire["image"]["link"].startswith("http") and asset["id"] in wire["image"]["link"]
    graph.fail_next(status=503)
    down = api.get(f"/v1/channels/{cloud['id']}/profile")
    api.assert_error(down, 503, "service_unavailable")
    assert down.headers["retry-after"] == "5"
    unsupported = api.get(f"/v1/channels/{cloud['id']}/qr")
    api.assert_error(unsupported, 400, "unsupported_by_provider")
    assert json.dumps(wire)


def test_the_message_sender_hands_meta_an_asset_link_its_role_may_sign(api: Api, graph: FakeGraphApi, cloud: dict):
    """The uploaded asset reaches Meta as a presigned GET URL signed by MessageSenderFunction (the queue consumer),
    which AWS authorizes as that function's role: its s3:GetObject grant is checked here (tests/iam_check.py)."""
    from functions.message_sender.app import handler as sender_handler
    from tests.faults.pipeline import Pipeline
    from tests.helpers import FakeContext

    asset = api.post("/v1/media/uploads", json={"content_type": "image/png", "size": 3}).json()["data"]
    sent = api.post(
        "/v1/messages",
        json={"channel_id": cloud["id"], "to": "+14155552671", "type": "image", "media": {"asset_id": asset["id"]}},
    )
    assert sent.status_code == 202, sent.text
    pipeline = Pipeline(api)
    pipeline.publish()
    records = [r for r in pipeline.receive("OutboundMessagesQueue") if '"message.queued"' in r["body"]]
    assert len(records) == 1
    assert sender_handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}
    wire = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1].json
    assert wire["type"] == "image"
    assert f"assets/{api.org_id}/{asset['id']}" in wire["image"]["link"]
    assert api.get(f"/v1/messages/{sent.json()['data']['id']}").json()["data"]["status"] == "sent"


# The spec's routes on a whatsapp_cloud channel ------------------------------------------------------------------------
def _inbound_from(api: Api, graph: FakeGraphApi, cloud: dict, phone: str) -> tuple[str, dict]:
    wamid = graph.inbound_message(phone)
    value = {
        "messages": [{"from": phone, "id": wamid, "timestamp": "1763800000", "type": "text", "text": {"body": "hi"}}]
    }
    assert _callback(api, graph, cloud, value)[0].status_code == 200
    conv = api.get("/v1/conversations").json()["data"][0]
    return wamid, api.get(f"/v1/conversations/{conv['id']}/messages").json()["data"][0]


def test_interactive_contacts_and_preview_messages_go_out_as_metas_bodies(api: Api, graph: FakeGraphApi, cloud: dict):
    interactive = {
        "type": "button",
        "body": {"text": "Pick"},
        "action": {"buttons": [{"type": "reply", "reply": {"id": "y", "title": "Yes"}}]},
    }
    card = {"name": {"formatted_name": "Ada"}, "phones": [{"phone": "+14155552671", "type": "WORK"}]}
    bodies = [
        {"type": "interactive", "interactive": interactive},
        {"type": "contacts", "contacts": [card]},
        {"type": "text", "text": {"body": "https://example.com", "preview_url": True}},
        {"type": "location", "location": {"latitude": 0, "longitude": 0}},
    ]
    for body in bodies:
        sent = api.post("/v1/messages", json={"channel_id": cloud["id"], "to": "+14155552671", **body})
        assert sent.status_code == 202, sent.text
        assert messages.deliver(get_store(), api.org_id, sent.json()["data"]["id"]) == "sent"
    wire = [r.json for r in graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-4:]]
    assert wire[0]["interactive"] == interactive
    assert wire[1]["contacts"] == [card]
    assert wire[2]["text"] == {"preview_url": True, "body": "https://example.com"}
    assert wire[3]["location"] == {"latitude": "0.0", "longitude": "0.0"}
    api.assert_error(
        api.post("/v1/messages", json={"channel_id": cloud["id"], "to": "+14155552671", "type": "interactive"}),
        400,
        "validation_failed",
    )


def test_reaction_typing_block_and_call_reject_routes_reach_the_cloud_api(api: Api, graph: FakeGraphApi, cloud: dict):
    wamid, message = _inbound_from(api, graph, cloud, "14155552671")
    reacted = api.post("/v1/messages/react", json={"message_id": message["id"], "emoji": "👍"})
    assert reacted.status_code == 200, reacted.text
    sent = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1].json
    assert sent["to"] == "14155552671" and sent["reaction"] == {"message_id": wamid, "emoji": "👍"}

    typing = api.post(
        "/v1/messages/presence", json={"channel_id": cloud["id"], "to": "+14155552671", "state": "typing"}
    )
    assert typing.status_code == 200, typing.text
    assert graph.typing == [wamid]
    other = api.post("/v1/messages/presence", json={"channel_id": cloud["id"], "to": "+14155552671", "state": "paused"})
    api.assert_error(other, 400, "unsupported_by_provider")
    stranger = api.post(
        "/v1/messages/presence", json={"channel_id": cloud["id"], "to": "+14155550000", "state": "typing"}
    )
    api.assert_error(stranger, 409, "conflict")

    blocked = api.post(f"/v1/channels/{cloud['id']}/blocked-contacts", json={"phone": "+14155552671"})
    assert blocked.status_code == 200, blocked.text
    assert graph.blocked == ["14155552671"]
    listed = api.get(f"/v1/channels/{cloud['id']}/blocked-contacts").json()["data"]
    assert [b["phone"] for b in listed] == ["14155552671"]
    unblocked = api.post(
        f"/v1/channels/{cloud['id']}/blocked-contacts", json={"phone": "+14155552671", "blocked": False}
    )
    assert unblocked.status_code == 200 and graph.blocked == []

    graph.calls["wacid.ABC123"] = "ringing"
    rejected = api.post(
        "/v1/calls/reject", json={"channel_id": cloud["id"], "call_id": "wacid.ABC123", "from": "+14155552671"}
    )
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["data"]["status"] == "rejected" and graph.calls["wacid.ABC123"] == "reject"
    no_caller = api.post("/v1/calls/reject", json={"channel_id": cloud["id"], "call_id": "wacid.ABC123"})
    api.assert_error(no_caller, 400, "validation_failed")
