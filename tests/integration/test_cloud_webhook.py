"""Meta's app-level callback for whatsapp_cloud channels: routing by phone_number_id, the platform-wide claim of a
number, the GET handshake, and the per-channel URL."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from tests.integration import cloud_queue
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
    assert resp.json()["data"] == {"queued": 2, "received": 0, "statuses_applied": 0}  # nobody's number: dropped
    assert _inbound(api, a["id"]) == []  # answered before anything is processed
    assert cloud_queue.drain(api) == {"received": 2, "statuses_applied": 0}
    assert _inbound(api, a["id"]) == ["to A"]
    assert _inbound(api, b["id"]) == ["to B"]
    # A second number's traffic posted to the first channel's own URL lands on the second channel too.
    other = _body(_change(NUMBER_B, "14155552672", "wamid.B2", "via A's url"))
    resp, _ = cloud_queue.post(api, f"/v1/providers/{a['id']}/callback", other, _signed(other))
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
    assert cloud_queue.drain(api) == {"received": 0, "statuses_applied": 0}  # nothing was queued either
    ok, done = cloud_queue.post(api, URL, only_b, _signed(only_b, "another-apps-secret"))
    assert ok.status_code == 200 and done["received"] == 1
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
    assert cloud_queue.post(api, URL, body, _signed(body))[1]["received"] == 1
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


# Senders without a phone number (business-scoped user ids) ------------------------------------------------------------
BSUID = "US.13491208655302741918"


def _user_change(message: dict[str, Any], contact: dict[str, Any]) -> dict[str, Any]:
    return {
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": NUMBER_A},
            "contacts": [contact],
            "messages": [{"timestamp": "1763800000", "type": "text", **message}],
        },
    }


def _resolve(api: Api, type_: str, value: str) -> Any:
    return api.post("/v1/contacts/resolve", json={"identifiers": [{"type": type_, "value": value}]})


def test_a_sender_with_only_a_user_id_is_accepted_resolvable_and_merged_with_the_phone_when_both_arrive(api: Api):
    channel = _channel(api, NUMBER_A).json()["data"]
    # a customer known by phone from an earlier message
    earlier = _body(_change(NUMBER_A, "14155552671", "wamid.P1", "by phone"))
    assert cloud_queue.post(api, URL, earlier, _signed(earlier))[1]["received"] == 1
    by_phone = _resolve(api, "whatsapp", "+14155552671").json()["data"]
    # the same person, now with a username: no phone in the webhook at all
    username_only = _body(
        _user_change(
            {"from_user_id": BSUID, "id": "wamid.U1", "text": {"body": "by username"}},
            {"profile": {"name": "Ada", "username": "@ada"}, "user_id": BSUID},
        )
    )
    resp, done = cloud_queue.post(api, URL, username_only, _signed(username_only))
    assert resp.status_code == 200, resp.text
    assert done["received"] == 1
    by_user = _resolve(api, "whatsapp_user_id", BSUID)
    assert by_user.status_code == 200, by_user.text
    assert by_user.json()["data"]["id"] != by_phone["id"]  # nothing told us yet that they are one person
    assert by_user.json()["data"]["name"] == "Ada"
    assert [i["type"] for i in by_user.json()["data"]["identities"]] == ["whatsapp_user_id"]
    # both identifiers in one message: the two contacts become one, owning both identities
    both = _body(
        _user_change(
            {"from": "14155552671", "from_user_id": BSUID, "id": "wamid.B1", "text": {"body": "both"}},
            {"profile": {"name": "Ada"}, "wa_id": "14155552671", "user_id": BSUID},
        )
    )
    assert cloud_queue.post(api, URL, both, _signed(both))[1]["received"] == 1
    merged = _resolve(api, "whatsapp_user_id", BSUID).json()["data"]
    assert merged["id"] == by_phone["id"] == _resolve(api, "whatsapp", "14155552671").json()["data"]["id"]
    assert sorted(i["type"] for i in merged["identities"]) == ["whatsapp", "whatsapp_user_id"]
    api.assert_error(api.get(f"/v1/contacts/{by_user.json()['data']['id']}"), 404, "not_found")
    assert _inbound(api, channel["id"]) == ["both", "by phone", "by username"]
    # the user id is a contact identity like any other, with its own format
    api.assert_error(_resolve(api, "whatsapp_user_id", "not-a-bsuid"), 400, "validation_failed")
    created = api.post(
        "/v1/contacts", json={"identities": [{"type": "whatsapp_user_id", "value": "BR.ENT.1502576394655843"}]}
    )
    assert created.status_code == 201, created.text
    assert (
        _resolve(api, "whatsapp_user_id", "BR.ENT.1502576394655843").json()["data"]["id"]
        == created.json()["data"]["id"]
    )


def test_a_message_without_from_and_from_user_id_is_refused(api: Api):
    _channel(api, NUMBER_A)
    body = _body(_user_change({"id": "wamid.N1", "text": {"body": "who?"}}, {"profile": {"name": "Nobody"}}))
    api.assert_error(api.post(URL, content=body, headers=_signed(body)), 400, "validation_failed")


def test_a_tenant_cannot_inject_traffic_for_another_tenants_number_through_its_own_channel_url(api: Api):
    victim = _channel(api, NUMBER_A).json()["data"]
    _, intruder = api.new_org("intruder@example.com")
    own = _channel(api, NUMBER_B, headers=intruder, app_secret="intruders-secret").json()["data"]
    forged = _body(_change(NUMBER_A, "14155552671", "wamid.F1", "forged"))
    signed_by_intruder = _signed(forged, "intruders-secret")
    resp = api.post(f"/v1/providers/{own['id']}/callback", content=forged, headers=signed_by_intruder)
    api.assert_error(resp, 401, "unauthenticated")
    api.assert_error(api.post(URL, content=forged, headers=signed_by_intruder), 401, "unauthenticated")
    assert _inbound(api, victim["id"]) == []
    assert cloud_queue.drain(api) == {"received": 0, "statuses_applied": 0}


def test_an_organization_pending_deletion_receives_nothing(api: Api):
    from switchboard.store import get_store, keys

    channel = _channel(api, NUMBER_A).json()["data"]
    store = get_store()
    organization = store.get(keys.organization(api.org_id))
    assert organization is not None
    store.put({**organization, "status": "pending_deletion"})
    body = _body(_change(NUMBER_A, "14155552671", "wamid.D1", "after deletion"))
    resp, done = cloud_queue.post(api, URL, body, _signed(body))
    assert resp.status_code == 200 and done["received"] == 0
    # a change queued before the deletion began is dropped by the consumer too
    store.put(organization)
    queued = api.post(URL, content=body, headers=_signed(body))
    assert queued.status_code == 200 and queued.json()["data"]["queued"] == 1
    store.put({**organization, "status": "pending_deletion"})
    assert cloud_queue.drain(api)["received"] == 0
    store.put(organization)
    assert _inbound(api, channel["id"]) == []


def test_metas_retries_of_a_change_are_processed_once(api: Api):
    from switchboard.store import get_store

    channel = _channel(api, NUMBER_A).json()["data"]
    update = {
        "field": "account_update",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": NUMBER_A},
            "event": "VERIFIED_ACCOUNT",
        },
    }
    body = _body(_change(NUMBER_A, "14155552671", "wamid.R1", "once"), update)
    for _ in range(3):  # Meta retries the same body; two copies may even be queued before either is processed
        assert api.post(URL, content=body, headers=_signed(body)).json()["data"]["queued"] == 2
    assert cloud_queue.drain(api) == {"received": 1, "statuses_applied": 0}
    assert cloud_queue.post(api, URL, body, _signed(body))[1] == {"received": 0, "statuses_applied": 0}
    assert _inbound(api, channel["id"]) == ["once"]
    logs = [
        e
        for e in api.get(f"/v1/channels/{channel['id']}/logs").json()["data"]
        if e["event"] == "whatsapp.account_update"
    ]
    assert len(logs) == 1
    markers = get_store().query_all(f"ORG#{api.org_id}", sk_prefix="WACHANGE#")
    assert len(markers) == 2 and all(m["ttl"] > 0 for m in markers)


def test_a_change_that_fails_is_retried_by_the_queue_and_then_stored_once(api: Api, monkeypatch: Any):
    import boto3

    from functions.cloud_webhook.app import handler
    from local.pollers import lambda_sqs_record
    from switchboard.messaging import messages
    from tests.helpers import FakeContext

    channel = _channel(api, NUMBER_A).json()["data"]
    body = _body(
        _change(NUMBER_A, "14155552671", "wamid.T0", "fine"),
        _change(NUMBER_A, "14155552672", "wamid.T1", "after a fault"),
    )
    assert api.post(URL, content=body, headers=_signed(body)).json()["data"]["queued"] == 2
    real, failed = messages.receive, []

    def flaky(store: Any, org: str, ch: Any, event: Any) -> Any:
        if event.provider_message_id == "wamid.T1" and not failed:
            failed.append(event.provider_message_id)
            raise RuntimeError("the table hiccuped")
        return real(store, org, ch, event)

    monkeypatch.setattr(messages, "receive", flaky)
    sqs, url = boto3.client("sqs"), api.resources.queue_url("CloudWebhookQueue")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    records = [lambda_sqs_record(m, api.resources.queue_arn("CloudWebhookQueue")) for m in got]
    assert len(records) == 2
    result = handler({"Records": records}, FakeContext())
    (bad,) = [r for r in records if "wamid.T1" in r["body"]]
    assert result == {"batchItemFailures": [{"itemIdentifier": bad["messageId"]}]}  # only it is left to retry
    assert _inbound(api, channel["id"]) == ["fine"]
    for record in records:
        if record is not bad:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=bad["receiptHandle"], VisibilityTimeout=0)
    assert cloud_queue.drain(api) == {"received": 1, "statuses_applied": 0}
    assert _inbound(api, channel["id"]) == ["after a fault", "fine"]


def test_changes_are_queued_in_batches_and_one_too_large_for_sqs_is_processed_at_once(api: Api):
    from switchboard.api.app import MAX_BODY_BYTES

    channel = _channel(api, NUMBER_A).json()["data"]
    many = _body(*(_change(NUMBER_A, "14155552671", f"wamid.M{n}", f"n{n:02d}") for n in range(11)))
    assert api.post(URL, content=many, headers=_signed(many)).json()["data"]["queued"] == 11  # two batches
    assert cloud_queue.drain(api)["received"] == 11

    def update(padding: int) -> bytes:
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550100999", "phone_number_id": NUMBER_A},
            "event": "PADDED",
            "padding": "x" * padding,
        }
        doc = {
            "object": "whatsapp_business_account",
            "entry": [{"id": "2", "changes": [{"field": "account_update", "value": value}]}],
        }
        return json.dumps(doc, separators=(",", ":")).encode()  # compact, as Meta sends it

    body = update(0)
    body = update(MAX_BODY_BYTES - len(body))  # the largest body the API accepts
    assert len(body) == MAX_BODY_BYTES
    resp = api.post(URL, content=body, headers=_signed(body))
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"] == {"queued": 0, "received": 0, "statuses_applied": 0}  # processed in the request
    logs = api.get(f"/v1/channels/{channel['id']}/logs").json()["data"]
    assert [e["detail"]["keys"] for e in logs if e["event"] == "whatsapp.account_update"] == [["event", "padding"]]
    assert cloud_queue.drain(api) == {"received": 0, "statuses_applied": 0}
