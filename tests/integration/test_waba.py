"""Business-account onboarding (`/v1/waba`) through the gateway against the fake Graph API: the whole embedded signup
ending with a connected whatsapp_cloud channel, Graph's errors in the envelope and in /v1/waba/errors, the step order
(replays and skipped steps are 409), validation, tenant isolation, and the business token never in plain text."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from switchboard.config import get_settings
from switchboard.messaging import messages
from switchboard.store import get_store
from tests.fakes.graph_api import FakeGraphApi
from tests.integration import cloud_queue
from tests.integration.support import Api

TOKEN = "EAAGbusinessTOKEN0123456789abcdefXYZ"
PIN = "246810"


@pytest.fixture
def graph():
    with FakeGraphApi(token="operator-token") as fake:
        yield fake


def _start(api: Api, graph: FakeGraphApi, **extra: Any) -> dict[str, Any]:
    body = {
        "app_id": graph.app_id,
        "app_secret": graph.app_secret,
        "config_id": "998877665544",
        "graph_base_url": graph.url,
        **extra,
    }
    resp = api.post("/v1/waba/oauth/start", json=body)
    assert resp.status_code == 201, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def _ok(resp, status: int = 200) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


def _finish(graph: FakeGraphApi, flow: dict[str, Any]) -> dict[str, Any]:
    return {
        "progress_id": flow["id"],
        "type": "WA_EMBEDDED_SIGNUP",
        "event": "FINISH",
        "data": {"waba_id": graph.waba_id, "phone_number_id": graph.phone_number_id, "business_id": "3300112233"},
    }


def _table_dump() -> str:
    client = get_store().client
    items, start = [], None
    while True:
        kwargs = {"TableName": get_settings().table_name, **({"ExclusiveStartKey": start} if start else {})}
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        start = page.get("LastEvaluatedKey")
        if not start:
            return json.dumps(items)


def test_embedded_signup_end_to_end_ends_with_a_connected_channel(api: Api, graph: FakeGraphApi, caplog):
    caplog.set_level(logging.DEBUG)  # every logger of the process, httpx and botocore included
    flow = _start(api, graph, channel_name="Acme support line")
    assert flow["status"] == "started" and flow["next_step"] == "signup_event"
    assert flow["steps"][0] == {
        "name": "oauth_start",
        "status": "done",
        "completed_at": flow["created_at"],
        "error": None,
    }
    assert flow["state"] and flow["app_id"] == graph.app_id
    assert flow["authorize_url"].startswith("https://www.facebook.com/v23.0/dialog/oauth?")
    assert f"client_id={graph.app_id}" in flow["authorize_url"] and "config_id=998877665544" in flow["authorize_url"]
    assert "app_secret" not in json.dumps(flow) and graph.app_secret not in json.dumps(flow)

    after_finish = _ok(api.post("/v1/waba/signup-event", json=_finish(graph, flow)))
    assert after_finish["waba_id"] == graph.waba_id and after_finish["business_id"] == "3300112233"
    assert after_finish["status"] == "in_progress" and after_finish["next_step"] == "exchange_code"

    code = graph.issue_code(TOKEN)
    exchanged = _ok(
        api.post("/v1/waba/exchange-code", json={"progress_id": flow["id"], "code": code, "state": flow["state"]})
    )
    assert exchanged["token_obtained"] is True and exchanged["next_step"] == "register_phone"
    assert "whatsapp_business_management" in exchanged["granted_scopes"]
    assert [p["id"] for p in exchanged["phone_numbers"]] == [graph.phone_number_id]
    wire = graph.requests_to("GET", "/v23.0/oauth/access_token")[-1]
    assert wire.query == {"client_id": graph.app_id, "client_secret": graph.app_secret, "code": code}
    debug = graph.requests_to("GET", "/v23.0/debug_token")[-1]
    assert debug.headers["authorization"] == f"Bearer {graph.app_id}|{graph.app_secret}"
    assert debug.query == {"input_token": TOKEN}

    registered = _ok(api.post("/v1/waba/register-phone", json={"progress_id": flow["id"], "pin": PIN}))
    assert registered["next_step"] == "subscribe_webhook"
    register_call = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/register")[-1]
    assert register_call.json == {"messaging_product": "whatsapp", "pin": PIN}
    assert register_call.headers["authorization"] == f"Bearer {TOKEN}"

    subscribed = _ok(api.post("/v1/waba/subscribe-webhook", json={"progress_id": flow["id"]}))
    assert subscribed["next_step"] == "sync_meta" and graph.subscribed_apps == [graph.app_id]
    # The app is subscribed with this deployment's app-level callback and a fresh verify token, which Meta's
    # handshake can check at once (before the channel exists) and which is stored only sealed.
    subscription = graph.requests_to("POST", f"/v23.0/{graph.waba_id}/subscribed_apps")[-1].json
    assert subscription["override_callback_uri"].endswith("/v1/providers/whatsapp_cloud/webhook")
    verify_token = subscription["verify_token"]
    assert len(verify_token) >= 32
    handshake = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": "31337"}
    early = api.get("/v1/providers/whatsapp_cloud/webhook", params=handshake, headers={})
    assert early.status_code == 200 and early.text == "31337"
    assert verify_token not in json.dumps(_ok(api.get(f"/v1/waba/progress/{flow['id']}")))

    done = _ok(api.post("/v1/waba/sync-meta", json={"progress_id": flow["id"]}))
    assert done["status"] == "completed" and done["next_step"] is None and done["completed_at"]
    assert [s["status"] for s in done["steps"]] == ["done"] * 6
    assert done["waba"]["message_template_namespace"] == graph.waba["message_template_namespace"]
    assert done["phone"]["display_phone_number"] == graph.phone["display_phone_number"]
    assert done["templates"] == {"count": 1, "by_status": {"APPROVED": 1}, "has_more": False}

    channel = _ok(api.get(f"/v1/channels/{done['channel_id']}"))
    assert channel["platform"] == "whatsapp_cloud" and channel["status"] == "connected"
    assert channel["name"] == "Acme support line"
    assert channel["config"]["phone_number_id"] == graph.phone_number_id
    assert channel["config"]["waba_id"] == graph.waba_id
    assert TOKEN not in json.dumps(channel) and graph.app_secret not in json.dumps(channel)
    assert verify_token not in json.dumps(channel) and channel["config"]["verify_token"].startswith("••••")
    later = api.get("/v1/providers/whatsapp_cloud/webhook", params=handshake, headers={})
    assert later.status_code == 200 and later.text == "31337"  # now through the channel's own (sealed) token
    assert _ok(api.get(f"/v1/waba/progress/{flow['id']}")) == done

    # The channel really works with the onboarded token: a message goes out through Graph.
    sent = _ok(
        api.post("/v1/messages", json={"channel_id": done["channel_id"], "to": "+14155552671", "text": {"body": "hi"}}),
        202,
    )
    assert messages.deliver(get_store(), api.org_id, sent["id"]) == "sent"
    send = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1]
    assert send.headers["authorization"] == f"Bearer {TOKEN}"

    # Meta's callbacks for the number verify with the (sealed) app secret and land in the channel.
    wamid = graph.inbound_message("14155552671")
    body = graph.webhook(
        {
            "messages": [
                {"from": "14155552671", "id": wamid, "timestamp": "1763800000", "type": "text", "text": {"body": "yo"}}
            ]
        }
    )
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": graph.signature(body)}
    received, processed = cloud_queue.post(api, f"/v1/providers/{done['channel_id']}/callback", body, headers)
    assert _ok(received)["queued"] == 1 and processed["received"] == 1

    # The business token and the app secret are nowhere in plain text: not in any answer above, not in the table.
    dump = _table_dump()
    assert TOKEN not in dump and graph.app_secret not in dump and PIN not in dump
    assert flow["state"] not in dump
    # Nor in any log line written meanwhile (the code exchange and debug_token carry them in query strings).
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert caplog.records and TOKEN not in logged and graph.app_secret not in logged
    assert code not in logged and PIN not in logged and flow["state"] not in logged


def test_replayed_and_out_of_order_steps_are_refused(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    pid = flow["id"]
    for path, body in (
        ("/v1/waba/register-phone", {"progress_id": pid, "pin": PIN}),
        ("/v1/waba/subscribe-webhook", {"progress_id": pid}),
        ("/v1/waba/sync-meta", {"progress_id": pid}),
    ):
        error = api.assert_error(api.post(path, json=body), 409, "conflict")
        assert error["details"][0]["next_step"] == "signup_event"
    assert graph.requests == []  # nothing reached Graph

    _ok(api.post("/v1/waba/signup-event", json=_finish(graph, flow)))
    api.assert_error(api.post("/v1/waba/signup-event", json=_finish(graph, flow)), 409, "conflict")
    cancel = {"progress_id": pid, "event": "CANCEL", "data": {"current_step": "PHONE_NUMBER_SETUP"}}
    api.assert_error(api.post("/v1/waba/signup-event", json=cancel), 409, "conflict")

    code = graph.issue_code(TOKEN)
    exchange = {"progress_id": pid, "code": code, "state": flow["state"]}
    _ok(api.post("/v1/waba/exchange-code", json=exchange))
    error = api.assert_error(api.post("/v1/waba/exchange-code", json=exchange), 409, "conflict")
    assert "already done" in error["message"]
    api.assert_error(api.post("/v1/waba/subscribe-webhook", json={"progress_id": pid}), 409, "conflict")
    _ok(api.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": PIN}))
    api.assert_error(api.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": PIN}), 409, "conflict")
    _ok(api.post("/v1/waba/subscribe-webhook", json={"progress_id": pid}))
    done = _ok(api.post("/v1/waba/sync-meta", json={"progress_id": pid}))
    replay = api.assert_error(api.post("/v1/waba/sync-meta", json={"progress_id": pid}), 409, "conflict")
    assert "completed" in replay["message"]
    channels = _ok(api.get("/v1/channels"))
    assert [c["id"] for c in channels] == [done["channel_id"]]  # one channel, however often the steps are tried


def test_cancel_and_error_events_end_the_flow(api: Api, graph: FakeGraphApi):
    canceled = _start(api, graph)
    body = {"progress_id": canceled["id"], "event": "CANCEL", "data": {"current_step": "WABA_SELECTION"}}
    after = _ok(api.post("/v1/waba/signup-event", json=body))
    assert after["status"] == "canceled" and after["next_step"] is None
    assert "WABA_SELECTION" in after["steps"][1]["error"]
    code = graph.issue_code(TOKEN)
    exchange = {"progress_id": canceled["id"], "code": code, "state": canceled["state"]}
    api.assert_error(api.post("/v1/waba/exchange-code", json=exchange), 409, "conflict")
    assert graph.codes[code]["used"] is False  # refused before Graph was asked

    failed = _start(api, graph)
    error_event = {
        "progress_id": failed["id"],
        "event": "ERROR",
        "data": {"error_message": "Your business is not eligible", "error_id": "524126", "session_id": "f3a9c0de"},
    }
    after = _ok(api.post("/v1/waba/signup-event", json=error_event))
    assert after["status"] == "failed" and after["last_error"]["code"] == "signup_error"
    errors = _ok(api.get("/v1/waba/errors", params={"progress_id": failed["id"]}))
    assert len(errors) == 1
    assert errors[0]["message"] == "Your business is not eligible" and errors[0]["support_label"] == "signup_flow"
    assert errors[0]["error_id"] == "524126" and errors[0]["session_id"] == "f3a9c0de"


def test_graph_errors_come_back_in_the_envelope_and_are_recorded(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    pid = flow["id"]
    _ok(api.post("/v1/waba/signup-event", json=_finish(graph, flow)))

    # exchange-code: an unknown code, then a code already used.
    bad = api.post(
        "/v1/waba/exchange-code", json={"progress_id": pid, "code": "AQnot-a-real-code", "state": flow["state"]}
    )
    error = api.assert_error(bad, 422, "provider_rejected")
    assert "Invalid verification code format." in error["message"]
    assert error["details"][0]["provider_code"] == 100 and error["details"][0]["provider_error_subcode"] == 36007
    used = graph.issue_code(TOKEN)
    graph.codes[used]["used"] = True
    error = api.assert_error(
        api.post("/v1/waba/exchange-code", json={"progress_id": pid, "code": used, "state": flow["state"]}),
        422,
        "provider_rejected",
    )
    assert "This authorization code has been used." in error["message"]
    progress = _ok(api.get(f"/v1/waba/progress/{pid}"))
    assert progress["steps"][2]["status"] == "failed" and progress["next_step"] == "exchange_code"
    assert progress["last_error"]["support_label"] == "authorization_code"

    # A fresh code works: a failed step can be retried.
    _ok(
        api.post(
            "/v1/waba/exchange-code", json={"progress_id": pid, "code": graph.issue_code(TOKEN), "state": flow["state"]}
        )
    )

    # register-phone: the number already has another two-step PIN.
    graph.two_step_pin = "135790"
    error = api.assert_error(
        api.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": PIN}), 422, "provider_rejected"
    )
    assert "Two step verification PIN Mismatch" in error["message"]
    assert error["details"][0]["provider_code"] == 133005
    _ok(api.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": "135790"}))

    # subscribe-webhook: Meta throttles (HTTP 400, code 80007 means "retry later") → 503 with Retry-After.
    graph.fail_next(
        status=400,
        body={
            "error": {"message": "(#80007) Rate limit hit", "type": "OAuthException", "code": 80007, "fbtrace_id": "Ax"}
        },
    )
    throttled = api.post("/v1/waba/subscribe-webhook", json={"progress_id": pid})
    error = api.assert_error(throttled, 503, "service_unavailable")
    assert "Rate limit hit" in error["message"] and throttled.headers["Retry-After"]
    _ok(api.post("/v1/waba/subscribe-webhook", json={"progress_id": pid}))

    # sync-meta: the token was revoked at Meta meanwhile.
    graph.issued.clear()
    error = api.assert_error(api.post("/v1/waba/sync-meta", json={"progress_id": pid}), 422, "provider_rejected")
    assert "Invalid OAuth access token" in error["message"]

    errors = _ok(api.get("/v1/waba/errors", params={"progress_id": pid}))
    assert [(e["step"], e["code"], e["support_label"]) for e in errors] == [
        ("sync_meta", "provider_rejected", "access_token"),
        ("subscribe_webhook", "service_unavailable", "rate_limited"),
        ("register_phone", "provider_rejected", "two_step_pin"),
        ("exchange_code", "provider_rejected", "authorization_code"),
        ("exchange_code", "provider_rejected", "authorization_code"),
    ]
    assert errors[0]["provider_code"] == 190 and errors[0]["fbtrace_id"]
    assert errors[2]["provider_code"] == 133005 and "Two step verification PIN Mismatch" in errors[2]["message"]
    page = api.get("/v1/waba/errors", params={"limit": 2}).json()
    assert len(page["data"]) == 2 and page["meta"]["has_more"] is True
    rest = _ok(api.get("/v1/waba/errors", params={"limit": 10, "cursor": page["meta"]["cursor"]}))
    assert [e["id"] for e in page["data"] + rest] == [e["id"] for e in errors]


def test_the_waba_is_found_from_the_token_when_no_finish_event_came(api: Api, graph: FakeGraphApi):
    """The redirect flow: no message event, the code comes back on the redirect with the state; the WABA is found in
    the token's granular scopes and, as it has two numbers, register-phone names one."""
    graph.extra_phones.append({"id": "109876543210999", "display_phone_number": "+1 555-010-0888"})
    flow = _start(api, graph, redirect_uri="https://app.example.com/waba/callback")
    assert "redirect_uri=https%3A%2F%2Fapp.example.com%2Fwaba%2Fcallback" in flow["authorize_url"]
    code = graph.issue_code(TOKEN, redirect_uri="https://app.example.com/waba/callback")
    exchanged = _ok(
        api.post("/v1/waba/exchange-code", json={"progress_id": flow["id"], "code": code, "state": flow["state"]})
    )
    assert exchanged["waba_id"] == graph.waba_id and exchanged["phone_number_id"] is None
    assert exchanged["steps"][1]["status"] == "skipped"
    assert graph.requests_to("GET", "/v23.0/oauth/access_token")[-1].query["redirect_uri"].endswith("/callback")
    missing = api.assert_error(
        api.post("/v1/waba/register-phone", json={"progress_id": flow["id"], "pin": PIN}), 400, "validation_failed"
    )
    assert missing["details"][0]["field"] == "body.phone_number_id"
    stranger = api.post(
        "/v1/waba/register-phone", json={"progress_id": flow["id"], "pin": PIN, "phone_number_id": "123"}
    )
    api.assert_error(stranger, 400, "validation_failed")
    chosen = _ok(
        api.post(
            "/v1/waba/register-phone",
            json={"progress_id": flow["id"], "pin": PIN, "phone_number_id": "109876543210999"},
        )
    )
    assert chosen["phone_number_id"] == "109876543210999" and graph.registered == {"109876543210999": PIN}


def test_a_token_without_the_waba_or_the_scope_is_refused(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    _ok(api.post("/v1/waba/signup-event", json=_finish(graph, flow)))
    other = graph.issue_code(waba_ids=["777000111"])
    error = api.assert_error(
        api.post("/v1/waba/exchange-code", json={"progress_id": flow["id"], "code": other, "state": flow["state"]}),
        422,
        "provider_rejected",
    )
    assert "does not grant access" in error["message"]
    no_scope = graph.issue_code(scopes=["public_profile"])
    error = api.assert_error(
        api.post("/v1/waba/exchange-code", json={"progress_id": flow["id"], "code": no_scope, "state": flow["state"]}),
        422,
        "provider_rejected",
    )
    assert "whatsapp_business_management" in error["message"]
    assert _ok(api.get(f"/v1/waba/progress/{flow['id']}"))["token_obtained"] is False


def test_validation(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    pid = flow["id"]
    cases = [
        ("/v1/waba/oauth/start", {"app_secret": "s3cret-value"}, "body.app_secret"),
        ("/v1/waba/oauth/start", {"app_id": "abc"}, "body.app_id"),
        ("/v1/waba/oauth/start", {"app_id": "123"}, "body.app_secret"),
        (
            "/v1/waba/oauth/start",
            {"app_id": "123", "app_secret": "x" * 10, "redirect_uri": "http://evil.example/"},
            "body.redirect_uri",
        ),
        ("/v1/waba/oauth/start", {"bogus": 1}, "body.bogus"),
        (
            "/v1/waba/signup-event",
            {"progress_id": pid, "event": "FINISH", "data": {"waba_id": graph.waba_id}},
            "body.data.phone_number_id",
        ),
        ("/v1/waba/signup-event", {"progress_id": pid, "event": "FINISH_ONLY_WABA", "data": {}}, "body.data.waba_id"),
        ("/v1/waba/signup-event", {"progress_id": pid, "event": "DONE"}, "body.event"),
        (
            "/v1/waba/signup-event",
            {"progress_id": pid, "event": "FINISH", "data": {"waba_id": "12a"}},
            "body.data.waba_id",
        ),
        ("/v1/waba/exchange-code", {"progress_id": pid, "code": "short", "state": flow["state"]}, "body.code"),
        (
            "/v1/waba/exchange-code",
            {"progress_id": pid, "code": "AQlong-enough", "state": "wrong-state-value"},
            "body.state",
        ),
        ("/v1/waba/register-phone", {"progress_id": pid, "pin": "12345"}, "body.pin"),
        ("/v1/waba/register-phone", {"progress_id": pid, "pin": "12345a"}, "body.pin"),
        ("/v1/waba/sync-meta", {"progress_id": "nope"}, "body.progress_id"),
        ("/v1/waba/sync-meta", {}, "body.progress_id"),
    ]
    for path, body, field in cases:
        error = api.assert_error(api.post(path, json=body), 400, "validation_failed")
        assert field in [d["field"] for d in error["details"]], (path, body, error)
    api.assert_error(api.get("/v1/waba/errors", params={"limit": 0}), 400, "validation_failed")
    api.assert_error(api.get("/v1/waba/errors", params={"cursor": "tampered"}), 400, "validation_failed")
    assert graph.requests == []


def test_another_organizations_flow_is_not_found(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    _other_org, session = api.new_org("waba-other@example.com")
    api.assert_error(api.get(f"/v1/waba/progress/{flow['id']}", headers=session), 404, "not_found")
    for path, body in (
        ("/v1/waba/signup-event", _finish(graph, flow)),
        ("/v1/waba/exchange-code", {"progress_id": flow["id"], "code": graph.issue_code(), "state": flow["state"]}),
        ("/v1/waba/register-phone", {"progress_id": flow["id"], "pin": PIN}),
        ("/v1/waba/subscribe-webhook", {"progress_id": flow["id"]}),
        ("/v1/waba/sync-meta", {"progress_id": flow["id"]}),
    ):
        api.assert_error(api.post(path, json=body, headers=session), 404, "not_found")
    assert _ok(api.get("/v1/waba/errors", headers=session)) == []
    api.assert_error(api.get("/v1/waba/progress/wbp_01unknown"), 404, "not_found")
    assert _ok(api.get(f"/v1/waba/progress/{flow['id']}"))["status"] == "started"


def test_support_labels_catalogue(api: Api):
    labels = _ok(api.get("/v1/waba/labels/support"))
    keys = [label["key"] for label in labels]
    assert len(keys) == len(set(keys)) and {"authorization_code", "two_step_pin", "rate_limited", "unknown"} <= set(
        keys
    )
    for label in labels:
        assert label["name"] and label["description"] and label["action"] and label["steps"]
    pin = _ok(api.get("/v1/waba/labels/support", params={"code": 133005}))
    assert [label["key"] for label in pin] == ["two_step_pin"]
    used = _ok(api.get("/v1/waba/labels/support", params={"code": 100, "subcode": 36009}))
    assert [label["key"] for label in used] == ["authorization_code"]
    plain = _ok(api.get("/v1/waba/labels/support", params={"code": 100}))
    assert [label["key"] for label in plain] == ["invalid_parameter"]
    assert [label["key"] for label in _ok(api.get("/v1/waba/labels/support", params={"code": 999999}))] == ["unknown"]


def test_viewers_read_and_only_admins_run_steps(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    viewer = _ok(api.post("/v1/api-keys", json={"name": "v", "role": "viewer"}), 201)["key"]
    member = _ok(api.post("/v1/api-keys", json={"name": "m", "role": "member"}), 201)["key"]
    assert _ok(api.get(f"/v1/waba/progress/{flow['id']}", headers={"X-Api-Key": viewer}))["id"] == flow["id"]
    assert api.get("/v1/waba/errors", headers={"X-Api-Key": viewer}).status_code == 200
    denied = api.post("/v1/waba/signup-event", json=_finish(graph, flow), headers={"X-Api-Key": member})
    api.assert_error(denied, 403, "forbidden")
    api.assert_error(api.post("/v1/waba/oauth/start", json={}, headers={"X-Api-Key": member}), 403, "forbidden")


def test_a_step_in_flight_holds_the_flow_until_its_lease_ends(api: Api, graph: FakeGraphApi):
    """A request running a step has claimed the flow (the lease is what a concurrent request sees): the same or
    another step waits for it; a lease left by a crashed request ends on its own."""
    from switchboard.waba import service

    flow = _start(api, graph)
    store = get_store()
    item = service.get_item(store, api.org_id, flow["id"], consistent=True)
    claimed = service._claim(store, item, "exchange_code")
    exchange = {"progress_id": flow["id"], "code": graph.issue_code(TOKEN), "state": flow["state"]}
    busy = api.assert_error(api.post("/v1/waba/exchange-code", json=exchange), 409, "conflict")
    assert "Another request is running exchange_code" in busy["message"]
    api.assert_error(api.post("/v1/waba/signup-event", json=_finish(graph, flow)), 409, "conflict")
    assert graph.requests == []

    store.put({**claimed, "lease_until": "2000-01-01T00:00:00.000Z"})  # the claimer crashed long ago
    assert _ok(api.post("/v1/waba/exchange-code", json=exchange))["token_obtained"] is True


def test_an_idempotent_retry_replays_the_answer_instead_of_refusing(api: Api, graph: FakeGraphApi):
    flow = _start(api, graph)
    exchange = {"progress_id": flow["id"], "code": graph.issue_code(TOKEN), "state": flow["state"]}
    first = api.post("/v1/waba/exchange-code", json=exchange, headers={**api.owner_headers, "Idempotency-Key": "x-1"})
    again = api.post("/v1/waba/exchange-code", json=exchange, headers={**api.owner_headers, "Idempotency-Key": "x-1"})
    assert first.status_code == again.status_code == 200, again.text
    assert again.headers.get("Idempotent-Replayed") == "true" and again.json() == first.json()
    assert len(graph.requests_to("GET", "/v23.0/oauth/access_token")) == 1
    api.assert_error(api.post("/v1/waba/exchange-code", json=exchange), 409, "conflict")  # without the key: a replay


def test_an_expired_flow_refuses_every_step(api: Api, graph: FakeGraphApi):
    from switchboard.waba import service

    flow = _start(api, graph)
    store = get_store()
    item = service.get_item(store, api.org_id, flow["id"], consistent=True)
    store.put({**item, "expires_at": "2026-01-01T00:00:00.000Z"})
    for path, body in (
        ("/v1/waba/signup-event", _finish(graph, flow)),
        ("/v1/waba/exchange-code", {"progress_id": flow["id"], "code": graph.issue_code(), "state": flow["state"]}),
    ):
        error = api.assert_error(api.post(path, json=body), 409, "conflict")
        assert "expired" in error["message"]
    assert graph.requests == []
    assert _ok(api.get(f"/v1/waba/progress/{flow['id']}"))["expires_at"] == "2026-01-01T00:00:00.000Z"


def test_the_stage_app_from_the_settings(api: Api, graph: FakeGraphApi, monkeypatch):
    """Without app_id in the request, the flow uses META_APP_ID / META_APP_SECRET / META_CONFIG_ID; the secret stays
    in the settings (nothing sealed on the record) and the channel gets it sealed."""
    from switchboard.config import reset_settings

    monkeypatch.setenv("META_APP_ID", graph.app_id)
    monkeypatch.setenv("META_APP_SECRET", graph.app_secret)
    monkeypatch.setenv("META_CONFIG_ID", "112233445566")
    reset_settings()
    try:
        started = api.post("/v1/waba/oauth/start", json={"graph_base_url": graph.url})
        flow = _ok(started, 201)
        assert flow["app_id"] == graph.app_id and flow["config_id"] == "112233445566"
        other_app = api.post("/v1/waba/oauth/start", json={"app_id": "5566", "graph_base_url": graph.url})
        assert api.assert_error(other_app, 400, "validation_failed")["details"][0]["field"] == "body.app_secret"
        pid = flow["id"]
        _ok(api.post("/v1/waba/signup-event", json=_finish(graph, flow)))
        exchange = {"progress_id": pid, "code": graph.issue_code(TOKEN), "state": flow["state"]}
        _ok(api.post("/v1/waba/exchange-code", json=exchange))
        _ok(api.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": PIN}))
        _ok(api.post("/v1/waba/subscribe-webhook", json={"progress_id": pid}))
        done = _ok(api.post("/v1/waba/sync-meta", json={"progress_id": pid}))
        assert _ok(api.get(f"/v1/channels/{done['channel_id']}"))["status"] == "connected"
        dump = _table_dump()
        assert TOKEN not in dump and graph.app_secret not in dump
    finally:
        for name in ("META_APP_ID", "META_APP_SECRET", "META_CONFIG_ID"):
            monkeypatch.delenv(name)  # only these: the fixture's environment stays
        reset_settings()
    missing = api.post("/v1/waba/oauth/start", json={"graph_base_url": graph.url})
    assert api.assert_error(missing, 400, "validation_failed")["details"][0]["field"] == "body.app_id"
