"""Secrets at rest are sealed (CONVENTIONS "Tenant safety and data lifecycle"): webhook signing secrets (current and
previous), integration secrets (tokens, passwords, webhook URLs), `whatsapp_cloud` `access_token` / `app_secret` /
`verify_token`, `whatsapp_web` `api_key` and a channel proxy's password never appear in plain text in the table, read
raw through moto; they are opened where they are used (sending, signing, verifying), answers keep their masks, and
items written in plain text before sealing still work, are sealed on their next write and by the resumable migration
`switchboard.reseal`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from switchboard import reseal, sealed
from switchboard.providers import provider_for
from switchboard.store import get_store
from switchboard.webhooks import repository
from tests.fakes.graph_api import FakeGraphApi
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api
from tests.integration.test_webhooks import BASE, Pipeline, verify_both
from tests.webhook_receiver import Receiver

CLOUD_TOKEN = "EAAGcloudTokenPlain0000SecretZZ9"  # long: its view shows the last four characters
APP_SECRET = "cloud-app-secret-plain-7777"
VERIFY_TOKEN = "verify-token-plain-4242"
WEB_API_KEY = "web-gateway-api-key-plain-5151"
SLACK_URL = "https://hooks.slack.com/services/T000/B000/plainslackpath31337"
HUBSPOT_TOKEN = "pat-na1-plainhubspottoken-8080"
SMTP_PASSWORD = "smtp-password-plain-6060"
PROXY_PASSWORD = "proxy-password-plain-7373"


def raw_items(api: Api) -> list[dict[str, Any]]:
    """Every item of the table as DynamoDB returns it (no deserialisation)."""
    client = boto3.client("dynamodb")
    table = get_store().table_name
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**params)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def assert_nowhere_in_table(api: Api, *plain: str) -> None:
    text = json.dumps(raw_items(api))
    for value in plain:
        assert value not in text, f"{value!r} is stored in plain text"


@pytest.fixture
def graph() -> Iterator[FakeGraphApi]:
    with FakeGraphApi(token=CLOUD_TOKEN, app_secret=APP_SECRET) as fake:
        yield fake


@pytest.fixture
def gateway() -> Iterator[FakeWaha]:
    with FakeWaha(api_key=WEB_API_KEY) as fake:
        yield fake


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver().running() as running:
        yield running


def cloud_config(graph: FakeGraphApi) -> dict[str, Any]:
    return {
        "base_url": graph.url,
        "access_token": CLOUD_TOKEN,
        "phone_number_id": graph.phone_number_id,
        "waba_id": graph.waba_id,
        "app_secret": APP_SECRET,
        "verify_token": VERIFY_TOKEN,
    }


def create_channels(api: Api, graph: FakeGraphApi, gateway: FakeWaha) -> tuple[dict, dict]:
    cloud = api.post("/v1/channels", json={"name": "c", "platform": "whatsapp_cloud", "config": cloud_config(graph)})
    assert cloud.status_code == 201, cloud.text
    web_config = {"base_url": gateway.url, "api_key": WEB_API_KEY}
    web = api.post("/v1/channels", json={"name": "w", "platform": "whatsapp_web", "config": web_config})
    assert web.status_code == 201, web.text
    return cloud.json()["data"], web.json()["data"]


def create_integrations(api: Api) -> list[dict[str, Any]]:
    bodies = [
        {"type": "slack", "name": "s", "secrets": {"webhook_url": SLACK_URL}, "config": {"channel": "#ops"}},
        {"type": "hubspot", "name": "h", "config": {"portal_id": "123"}, "secrets": {"access_token": HUBSPOT_TOKEN}},
        {
            "type": "smtp",
            "name": "m",
            "config": {"host": "smtp.example.com", "port": 587, "from_email": "ops@example.com", "username": "ops"},
            "secrets": {"password": SMTP_PASSWORD},
        },
    ]
    out = []
    for body in bodies:
        resp = api.post("/v1/settings/integrations", json=body)
        assert resp.status_code == 201, resp.text
        out.append(resp.json()["data"])
    return out


def signed_callback(api: Api, graph: FakeGraphApi, channel_id: str) -> Any:
    body = graph.webhook({"statuses": []})
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": graph.signature(body)}
    return api.post(f"/v1/providers/{channel_id}/callback", content=body, headers=headers)


def handshake(api: Api, channel_id: str, token: str) -> Any:
    params = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": "1158201444"}
    return api.get(f"/v1/providers/{channel_id}/callback", params=params)


# Sealed on write ------------------------------------------------------------------------------------------------
def test_no_secret_is_stored_in_plain_text_and_each_still_works(
    api: Api, graph: FakeGraphApi, gateway: FakeWaha, receiver: Receiver
):
    cloud, web = create_channels(api, graph, gateway)
    # Answers keep their masks: short secrets show nothing, long ones their last four characters.
    assert cloud["config"]["access_token"] == "••••" + CLOUD_TOKEN[-4:]
    assert cloud["config"]["app_secret"] == "••••" + APP_SECRET[-4:]
    assert web["config"]["api_key"] == "••••" + WEB_API_KEY[-4:]
    assert api.get(f"/v1/channels/{cloud['id']}").json()["data"]["config"] == cloud["config"]
    integrations = create_integrations(api)
    assert integrations[0]["secrets"] == {"webhook_url": "••••" + SLACK_URL[-4:]}
    assert api.get(f"/v1/settings/integrations/{integrations[2]['id']}").json()["data"]["secrets"] == {
        "password": "••••" + SMTP_PASSWORD[-4:]
    }
    proxy = {"host": "proxy.example.com", "port": 3128, "username": "u", "password": PROXY_PASSWORD}
    assert api.put(f"/v1/channels/{web['id']}/proxy", json=proxy).json()["data"]["password"] == "••••" + "7373"
    assert api.get(f"/v1/channels/{web['id']}/proxy").json()["data"]["password"] == "••••" + "7373"
    endpoint = api.post(f"{BASE}/endpoints", json={"url": receiver.url("/signed")}).json()["data"]
    first_secret = endpoint["secret"]
    rotated = api.post(f"{BASE}/endpoints/{endpoint['id']}/rotate-secret").json()["data"]["secret"]

    assert_nowhere_in_table(
        api,
        CLOUD_TOKEN,
        APP_SECRET,
        VERIFY_TOKEN,
        WEB_API_KEY,
        SLACK_URL,
        "plainslackpath31337",
        HUBSPOT_TOKEN,
        SMTP_PASSWORD,
        PROXY_PASSWORD,
        first_secret,
        first_secret.removeprefix("whsec_"),
        rotated,
        rotated.removeprefix("whsec_"),
    )
    channel_item = get_store().get({"PK": f"ORG#{api.org_id}", "SK": f"CHANNEL#{cloud['id']}"})
    assert channel_item is not None
    assert all(sealed.is_sealed(channel_item["config"][k]) for k in ("access_token", "app_secret", "verify_token"))
    assert channel_item["verify_token_hash"] == sealed.lookup_hash(VERIFY_TOKEN)

    # Sending: the bearer token reaches Graph (the fake refuses any other); the engine gets its API key.
    assert api.post(f"/v1/channels/{cloud['id']}/connect").json()["data"]["status"] == "connected"
    assert graph.requests[-1].headers.get("authorization") == f"Bearer {CLOUD_TOKEN}"
    assert api.post(f"/v1/channels/{web['id']}/connect").json()["data"]["status"] == "pairing"  # the QR is next
    assert gateway.last.headers.get("x-api-key") == WEB_API_KEY
    # Verifying: Meta's signature with the app secret, the subscription handshake with the verify token.
    assert signed_callback(api, graph, cloud["id"]).status_code == 200
    assert handshake(api, cloud["id"], VERIFY_TOKEN).status_code == 200
    assert handshake(api, cloud["id"], "wrong").status_code == 403
    # Signing: a delivery verifies with the secret shown at rotation, and with the previous one for 24 h.
    pipeline = Pipeline(api)
    pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    (received,) = receiver.of("/signed")
    verify_both(rotated, received)
    verify_both(first_secret, received)
    assert_nowhere_in_table(api, CLOUD_TOKEN, APP_SECRET, VERIFY_TOKEN, WEB_API_KEY, rotated, first_secret)


# Items written before sealing ------------------------------------------------------------------------------------
def write_plain_items(api: Api, graph: FakeGraphApi, receiver: Receiver) -> dict[str, dict[str, Any]]:
    """Items as they were stored before sealing: the same shapes, every secret in plain text."""
    store, org = get_store(), api.org_id
    now = "2026-11-01T00:00:00.000Z"
    channel = {
        "PK": f"ORG#{org}",
        "SK": "CHANNEL#ch_legacycloud",
        "entity": "Channel",
        "id": "ch_legacycloud",
        "organization_id": org,
        "name": "legacy",
        "phone_number": None,
        "platform": "whatsapp_cloud",
        "mode": "live",
        "status": "disconnected",
        "is_active": True,
        "last_connected_at": None,
        "last_error": None,
        "linked_channel_id": None,
        "metadata": {},
        "config": cloud_config(graph),
        "settings": {},
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    pointer = {"PK": "CHANNEL#ch_legacycloud", "SK": "CHANNEL", "entity": "ChannelPointer", "organization_id": org}
    endpoint = {
        **repository.endpoint_key(org, "whe_legacy"),
        "entity": "WebhookEndpoint",
        "id": "whe_legacy",
        "organization_id": org,
        "url": receiver.url("/legacy"),
        "description": None,
        "filter_types": [],
        "enabled": True,
        "disabled_reason": None,
        "disabled_at": None,
        "secret": LEGACY_WEBHOOK_SECRET,
        "previous_secret": LEGACY_PREVIOUS_SECRET,
        "previous_secret_expires_at": "2999-01-01T00:00:00.000Z",
        "consecutive_failures": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    integration = {
        "PK": f"ORG#{org}",
        "SK": "INTEG#int_legacy",
        "entity": "Integration",
        "id": "int_legacy",
        "organization_id": org,
        "type": "slack",
        "name": "legacy",
        "enabled": True,
        "config": {"channel": "#ops"},
        "secrets": {"webhook_url": SLACK_URL},
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    for item in (channel, pointer, endpoint, integration):
        store.put(item)
    return {"channel": channel, "endpoint": endpoint, "integration": integration}


LEGACY_WEBHOOK_SECRET = "whsec_" + "bGVnYWN5LXNlY3JldC1wbGFpbi0wMDAwMDAwMDAwMDA="
LEGACY_PREVIOUS_SECRET = "whsec_" + "cHJldmlvdXMtc2VjcmV0LXBsYWluLTAwMDAwMDAwMDA="
LEGACY_PLAIN = (CLOUD_TOKEN, APP_SECRET, VERIFY_TOKEN, SLACK_URL, LEGACY_WEBHOOK_SECRET, LEGACY_PREVIOUS_SECRET)


def exercise_legacy(api: Api, graph: FakeGraphApi, receiver: Receiver, path: str) -> None:
    """Each legacy secret still does its job: send, verify, sign; and the answers keep their masks. Nothing here
    writes the channel or the integration (a write would seal them)."""
    channel = get_store().get({"PK": f"ORG#{api.org_id}", "SK": "CHANNEL#ch_legacycloud"})
    assert provider_for(channel).connect().status == "connected"
    assert graph.requests[-1].headers.get("authorization") == f"Bearer {CLOUD_TOKEN}"
    assert signed_callback(api, graph, "ch_legacycloud").status_code == 200
    assert handshake(api, "ch_legacycloud", VERIFY_TOKEN).status_code == 200
    view = api.get("/v1/channels/ch_legacycloud").json()["data"]["config"]
    assert view["access_token"] == "••••" + CLOUD_TOKEN[-4:] and view["verify_token"] == "••••" + VERIFY_TOKEN[-4:]
    integration = api.get("/v1/settings/integrations/int_legacy").json()["data"]
    assert integration["secrets"] == {"webhook_url": "••••" + SLACK_URL[-4:]}
    pipeline = Pipeline(api)
    pipeline.emit("message.new", {"message_id": path})
    pipeline.pump()
    received = [r for r in receiver.of("/legacy") if json.loads(r.body) == {"message_id": path}]
    assert len(received) == 1
    verify_both(LEGACY_WEBHOOK_SECRET, received[0])
    verify_both(LEGACY_PREVIOUS_SECRET, received[0])


def test_plain_legacy_items_work_and_the_migration_seals_them_page_by_page(
    api: Api, graph: FakeGraphApi, receiver: Receiver, capsys
):
    write_plain_items(api, graph, receiver)
    exercise_legacy(api, graph, receiver, "before")
    store = get_store()
    assert reseal.run(store, dry_run=True) == 3
    text = json.dumps(raw_items(api))
    assert all(value in text for value in (CLOUD_TOKEN, SLACK_URL, LEGACY_WEBHOOK_SECRET))  # a dry run writes nothing

    # Resumable: one item per page, interrupted after the first page, continued from its checkpoint.
    first = reseal.reseal_page(store, None, page_size=1)
    assert first.checkpoint is not None
    resealed, checkpoint = first.resealed, first.checkpoint
    while checkpoint is not None:
        page = reseal.reseal_page(store, checkpoint, page_size=1)
        resealed += page.resealed
        checkpoint = page.checkpoint
    assert resealed == 3
    assert_nowhere_in_table(api, *LEGACY_PLAIN, "plainslackpath31337")
    assert reseal.run(store) == 0  # nothing left to do
    assert "done: resealed 0 item(s)" in capsys.readouterr().out
    exercise_legacy(api, graph, receiver, "after")
    assert api.post("/v1/channels/ch_legacycloud/connect").json()["data"]["status"] == "connected"
    assert_nowhere_in_table(api, *LEGACY_PLAIN)


def test_a_plain_legacy_item_is_sealed_on_its_next_write(api: Api, graph: FakeGraphApi, receiver: Receiver):
    write_plain_items(api, graph, receiver)
    assert api.patch("/v1/channels/ch_legacycloud", json={"name": "renamed"}).status_code == 200
    assert api.patch(f"{BASE}/endpoints/whe_legacy", json={"description": "renamed"}).status_code == 200
    assert api.patch("/v1/settings/integrations/int_legacy", json={"name": "renamed"}).status_code == 200
    assert_nowhere_in_table(api, *LEGACY_PLAIN, "plainslackpath31337")
    exercise_legacy(api, graph, receiver, "written")


def test_a_sealed_secret_does_not_open_in_another_organization(api: Api, graph: FakeGraphApi):
    cloud = api.post("/v1/channels", json={"name": "c", "platform": "whatsapp_cloud", "config": cloud_config(graph)})
    item = get_store().get({"PK": f"ORG#{api.org_id}", "SK": f"CHANNEL#{cloud.json()['data']['id']}"})
    assert item is not None
    with pytest.raises(ValueError):
        sealed.unseal(item["config"]["access_token"], "org_someone_else")
    assert sealed.unseal(item["config"]["access_token"], api.org_id) == CLOUD_TOKEN
