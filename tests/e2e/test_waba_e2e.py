"""Business-account onboarding over HTTP against the local stack, with the fake Graph API on 127.0.0.1 (the local
stage lets a flow name its Graph base URL): the embedded signup from oauth/start to a connected whatsapp_cloud
channel, a Graph error recorded on the way, and the token never in an answer."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.fakes.graph_api import FakeGraphApi

pytestmark = pytest.mark.e2e


def test_embedded_signup_over_http(local_only):
    token = "EAAGe2e" + uuid.uuid4().hex
    with FakeGraphApi(token="operator") as graph, local_only.client() as client:
        graph.two_step_pin = "975310"
        started = client.post(
            "/v1/waba/oauth/start",
            json={"app_id": graph.app_id, "app_secret": graph.app_secret, "graph_base_url": graph.url},
        )
        assert started.status_code == 201, started.text
        flow = started.json()["data"]
        pid = flow["id"]

        finish = {
            "progress_id": pid,
            "type": "WA_EMBEDDED_SIGNUP",
            "event": "FINISH",
            "data": {"waba_id": graph.waba_id, "phone_number_id": graph.phone_number_id},
        }
        assert client.post("/v1/waba/signup-event", json=finish).status_code == 200
        code = graph.issue_code(token)
        exchanged = client.post(
            "/v1/waba/exchange-code", json={"progress_id": pid, "code": code, "state": flow["state"]}
        )
        assert exchanged.status_code == 200, exchanged.text
        replay = client.post("/v1/waba/exchange-code", json={"progress_id": pid, "code": code, "state": flow["state"]})
        assert replay.status_code == 409 and replay.json()["error"]["code"] == "conflict"

        wrong_pin = client.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": "123456"})
        assert wrong_pin.status_code == 422, wrong_pin.text
        assert "Two step verification PIN Mismatch" in wrong_pin.json()["error"]["message"]
        assert client.post("/v1/waba/register-phone", json={"progress_id": pid, "pin": "975310"}).status_code == 200
        assert client.post("/v1/waba/subscribe-webhook", json={"progress_id": pid}).status_code == 200
        done = client.post("/v1/waba/sync-meta", json={"progress_id": pid})
        assert done.status_code == 200, done.text
        result = done.json()["data"]
        assert result["status"] == "completed" and result["channel_id"]

        channel = client.get(f"/v1/channels/{result['channel_id']}").json()["data"]
        assert channel["platform"] == "whatsapp_cloud" and channel["status"] == "connected"
        errors = client.get("/v1/waba/errors", params={"progress_id": pid}).json()["data"]
        assert [(e["step"], e["provider_code"], e["support_label"]) for e in errors] == [
            ("register_phone", 133005, "two_step_pin")
        ]
        progress = client.get(f"/v1/waba/progress/{pid}")
        for answer in (started, exchanged, done, progress, client.get(f"/v1/channels/{result['channel_id']}")):
            assert token not in answer.text and graph.app_secret not in json.dumps(answer.json())
