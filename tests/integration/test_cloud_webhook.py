"""Meta's app-level callback for whatsapp_cloud channels: routing by phone_number_id, the platform-wide claim of a
number, the GET handshake, and the per-channel URL."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from tests.integration.support import Api

APP_SECRET = "one-app-secret"
URL = "/v1/providers/whatsapp_cloud/webhook"
NUMBER_A, NUMBER_B = "100000000000001", "100000000000002"


def _config(number: str, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": "https://graph.facebook.com/v23.0",
        "access_token": "tok",
        "phone_number_id": number,
        "waba_id": "200000000000001",
        "app_secret": APP_SECRET,
        "verify_token": "app-verify-token",
        **extra,
    }


def _channel(api: Api, number: str, headers: dict[str, str] | None = None, **extra: Any) -> Any:
    body = {"name": f"cloud {number}", "platform": "whatsapp_cloud", "config": _config(number, **extra)}
    return api.post("/v1/channels", json=body, **({"headers": headers} if headers else {}))


def _change(number: str, sender: str, wamid: str, text: str) -> dict[str, Any]:
    return {
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": number},
            "contacts": [{"profile": {"name": "Ada"}, "wa_id": sender}],
            "messages": [
                {"from": sender, "id": wamid, "timestamp": "1763800000", "type": "text", "text": {"body": text}}
            ],
        },
    }


def _body(*changes: dict[str, Any]) -> bytes:
    doc = {"object": "whatsapp_business_account", "entry": [{"id": "200000000000001", "changes": list(changes)}]}
    return json.dumps(doc).encode()


def _signed(body: bytes, secret: str = APP_SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Hub-Signature-256": f"sha256={digest}"}


def _inbound(api: Api, channel_id: str, headers: dict[str, str] | None = None) -> list[str]:
    kw = {"headers": headers} if headers else {}
    convs = api.get("/v1/conversations", **kw).json()["data"]
    texts: list[str] = []
    for conv in convs:
        if conv["channel_id"] == channel_id:
            rows = api.get(f"/v1/conversations/{conv['id']}/messages", **kw).json()["data"]
            texts.extend(r["text"] for r in rows if r["direction"] == "inbound")
    return sorted(texts)


def test_two_numbers_of_one_app_both_receive_through_the_app_level_url(api: Api):
    a = _channel(api, NUMBER_A).json()["data"]
    b = _channel(api, NUMBER_B).json()["data"]
    body = _body(
        _change(NUMBER_A, "14155552671", "wamid.A1", "to A"),
        _change(NUMBER_B, "14155552672", "wamid.B1", "to B"),
        _change("100000000000999", "14155552673", "wamid.X1", "nobody's number"),
    )
    resp = api.post(URL, content=body, headers=_signed(body))
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"] == {"received": 2, "statuses_applied": 0}
    assert _inbound(api, a["id"]) == ["to A"]
    assert _inbound(api, b["id"]) == ["to B"]
    # A second number's traffic posted to the first channel's own URL lands on the second channel too.
    other = _body(_change(NUMBER_B, "14155552672", "wamid.B2", "via A's url"))
    resp = api.post(f"/v1/providers/{a['id']}/callback", content=other, headers=_signed(other))
    assert resp.status_code == 200, resp.text
    assert _inbound(api, b["id"]) == ["to B", "via A's url"]
    assert _inbound(api, a["id"]) == ["to A"]


def test_every_routed_number_is_verified_with_its_own_channels_secret_before_anything_is_stored(api: Api):
    a = _channel(api, NUMBER_A).json()["data"]
    b = _channel(api, NUMBER_B, app_secret="another-apps-secret").json()["data"]
    body = _body(
        _change(NUMBER_A, "14155552671", "wamid.A1", "to A"),
        _change(NUMBER_B, "14155552672", "wamid.B1", "to B"),
    )
    api.assert_error(api.post(URL, content=body, headers=_signed(body)), 401, "unauthenticated")
    api.assert_error(api.post(URL, content=body, headers={"Content-Type": "application/json"}), 401, "unauthenticated")
    assert _inbound(api, a["id"]) == [] and _inbound(api, b["id"]) == []
    only_b = _body(_change(NUMBER_B, "14155552672", "wamid.B1", "to B"))
    api.assert_error(api.post(URL, content=only_b, headers=_signed(only_b)), 401, "unauthenticated")
    ok = api.post(URL, content=only_b, headers=_signed(only_b, "another-apps-secret"))
    assert ok.status_code == 200 and ok.json()["data"]["received"] == 1
    assert _inbound(api, b["id"]) == ["to B"]


def test_a_phone_number_id_is_claimed_once_on_the_whole_platform(api: Api):
    first = _channel(api, NUMBER_A)
    assert first.status_code == 201, first.text
    api.assert_error(_channel(api, NUMBER_A), 409, "conflict")
    _, other_org = api.new_org("intruder@example.com")
    api.assert_error(_channel(api, NUMBER_A, headers=other_org), 409, "conflict")
    # a config update onto a claimed number is refused; the intruder's own number then never receives A's traffic
    mine = _channel(api, NUMBER_B, headers=other_org).json()["data"]
    moved = api.patch(f"/v1/channels/{mine['id']}", json={"config": {"phone_number_id": NUMBER_A}}, headers=other_org)
    api.assert_error(moved, 409, "conflict")
    body = _body(_change(NUMBER_A, "14155552671", "wamid.A1", "secret for A"))
    assert api.post(URL, content=body, headers=_signed(body)).json()["data"]["received"] == 1
    assert _inbound(api, mine["id"], other_org) == []
    assert _inbound(api, first.json()["data"]["id"]) == ["secret for A"]
    # moving to a free number frees the old one; deleting a channel frees its number
    moved = api.patch(
        f"/v1/channels/{mine['id']}", json={"config": {"phone_number_id": "100000000000003"}}, headers=other_org
    )
    assert moved.status_code == 200, moved.text
    assert _channel(api, NUMBER_B).status_code == 201
    assert api.delete(f"/v1/channels/{first.json()['data']['id']}").status_code == 204
    assert _channel(api, NUMBER_A, headers=other_org).status_code == 201


def test_app_level_handshake_echoes_the_challenge_for_a_channels_verify_token(api: Api):
    params = {"hub.mode": "subscribe", "hub.verify_token": "app-verify-token", "hub.challenge": "1158201444"}
    assert api.get(URL, params=params, headers={}).status_code == 403  # no channel holds it yet
    channel = _channel(api, NUMBER_A).json()["data"]
    ok = api.get(URL, params=params, headers={})
    assert ok.status_code == 200 and ok.text == "1158201444"
    assert api.get(URL, params={**params, "hub.verify_token": "app-verify-tokeN"}, headers={}).status_code == 403
    patched = api.patch(f"/v1/channels/{channel['id']}", json={"config": {"verify_token": "rotated"}})
    assert patched.status_code == 200, patched.text
    assert api.get(URL, params=params, headers={}).status_code == 403
    assert api.get(URL, params={**params, "hub.verify_token": "rotated"}, headers={}).text == "1158201444"
    assert api.get(URL, params={"hub.mode": "subscribe"}, headers={}).status_code == 400
