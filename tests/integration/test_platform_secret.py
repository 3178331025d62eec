"""The platform secret (`CursorSecret`) is read at run time from Secrets Manager (moto here, as the local stack does),
never resolved into the functions' environment, and rotates without a deploy (issue 28 finding 8).

A rotation is `put-secret-value`: the new value becomes AWSCURRENT, the old one AWSPREVIOUS. Each function reads the
value through Powertools Parameters and keeps it `platform_secret.MAX_AGE` seconds; `platform_secret.reset()` plays
that time passing. Everything signed or sealed under the previous value keeps working (cursors, idempotency replays,
sealed secrets at rest, linked-device engines' webhook signatures); `switchboard.reseal` moves what is stored to the
current value, so a second rotation loses nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from switchboard import platform_secret, reseal, sealed
from switchboard.config import Settings, get_settings
from switchboard.messaging import channels
from switchboard.store import get_store
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api
from tests.integration.test_webhooks import create_endpoint

PERSON = "14155550{:03d}"


@pytest.fixture(autouse=True)
def fresh_secret_cache() -> Iterator[None]:
    platform_secret.reset()
    yield
    platform_secret.reset()


def rotate(value: str) -> None:
    """`aws secretsmanager put-secret-value` (docs/operations.md), then the functions' cached value ages out."""
    boto3.client("secretsmanager").put_secret_value(SecretId=get_settings().cursor_secret_arn, SecretString=value)
    platform_secret.reset()


def stored_value() -> str:
    arn = get_settings().cursor_secret_arn
    return str(boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def first_page(api: Api) -> tuple[str, str]:
    """(id of the first contact, cursor to the second page) of a list of contacts one per page."""
    body = ok(api.get("/v1/contacts", params={"limit": "1"}))
    assert body["meta"]["has_more"] and body["meta"]["cursor"]
    return body["data"][0]["id"], body["meta"]["cursor"]


def test_functions_get_the_secrets_arn_and_read_its_value_at_run_time(api: Api):
    settings = get_settings()
    assert settings.cursor_secret_arn and settings.cursor_secret_arn.startswith("arn:aws:secretsmanager:")
    env = api.resources.function_env(api.template.function("ContactsFunction"))
    assert "CURSOR_SECRET" not in env and env["CURSOR_SECRET_ARN"] == settings.cursor_secret_arn
    assert platform_secret.current() == stored_value().encode()


def test_a_deployed_stage_never_takes_the_value_from_its_environment():
    values = {k: v for k, v in get_settings().model_dump().items() if k not in ("cursor_secret", "cursor_secret_arn")}
    with pytest.raises(ValueError, match="CURSOR_SECRET_ARN is required"):
        Settings(**{**values, "stage": "prod", "cursor_secret": "x" * 32, "cursor_secret_arn": None})
    assert Settings(**{**values, "stage": "prod", "cursor_secret_arn": "arn:aws:secretsmanager:r:1:secret:s"})
    assert Settings(**{**values, "stage": "test", "cursor_secret": "x" * 32, "cursor_secret_arn": None})


def test_a_rotation_reaches_the_functions_without_a_deploy_and_breaks_nothing_in_flight(api: Api):
    for n in range(3):
        ok(api.post("/v1/contacts", json={"phone": PERSON.format(n)}), 201)
    first, cursor = first_page(api)
    replayed = {"Idempotency-Key": "rotation-1", **api.owner_headers}
    created = ok(api.post("/v1/contacts", json={"phone": PERSON.format(9), "name": "Ada"}, headers=replayed), 201)
    old = stored_value()

    rotate("rotated-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyz")

    assert platform_secret.current() == b"rotated-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
    # a cursor handed out before the rotation still reads on
    second = ok(api.get("/v1/contacts", params={"limit": "1", "cursor": cursor}))
    assert second["data"][0]["id"] != first
    # a retried POST still replays its first answer, never runs twice
    again = api.post("/v1/contacts", json={"phone": PERSON.format(9), "name": "Ada"}, headers=replayed)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == created
    # new cursors are signed with the new value: the old one alone no longer makes them
    _, fresh = first_page(api)
    boto3.client("secretsmanager").put_secret_value(SecretId=get_settings().cursor_secret_arn, SecretString=old)
    platform_secret.reset()  # current: the old value again, previous: the rotated one: both still verify
    assert ok(api.get("/v1/contacts", params={"limit": "1", "cursor": fresh}))["data"]


def test_a_cursor_from_before_the_previous_version_is_refused(api: Api):
    for n in range(2):
        ok(api.post("/v1/contacts", json={"phone": PERSON.format(n)}), 201)
    _, cursor = first_page(api)
    rotate("second-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyz")
    rotate("third-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyzA")  # the first value is no longer kept
    refused = api.get("/v1/contacts", params={"limit": "1", "cursor": cursor})
    assert api.assert_error(refused, 400, "validation_failed")["details"][0]["field"] == "query.cursor"


def test_a_container_that_read_the_value_before_the_rotation_reads_it_again_when_nothing_fits(api: Api):
    before = platform_secret.current()
    boto3.client("secretsmanager").put_secret_value(
        SecretId=get_settings().cursor_secret_arn, SecretString="newer-platform-secret-0123456789-abcdefghijklmnopqrstu"
    )
    # still cached here; another container already signs with the new value: verifying reads it again
    assert list(platform_secret.candidates()) == [before, b"newer-platform-secret-0123456789-abcdefghijklmnopqrstu"]
    # read again now: the new value first, the old one as AWSPREVIOUS; no second refresh within REFRESH_AFTER
    assert list(platform_secret.candidates()) == [b"newer-platform-secret-0123456789-abcdefghijklmnopqrstu", before]


def _endpoint_secret(org: str) -> str:
    """The sealed signing secret of the organization's one webhook endpoint, as stored."""
    rows = get_store().query_all(f"ORG#{org}")
    (endpoint,) = [r for r in rows if r.get("entity") == "WebhookEndpoint"]
    return str(endpoint["secret"])


def test_sealed_secrets_open_after_a_rotation_and_reseal_moves_them_to_the_new_value(api: Api):
    signing = create_endpoint(api, "http://127.0.0.1:9/hook")["secret"]
    config = {"access_token": "EAAG-long-lived-access-token-0001", "phone_number_id": "1", "waba_id": "2"}
    channel = ok(api.post("/v1/channels", json={"name": "c", "platform": "whatsapp_cloud", "config": config}), 201)
    store, org = get_store(), api.org_id
    token = channels.get_item(store, org, channel["data"]["id"])["config"]["access_token"]
    stored_signing = _endpoint_secret(org)
    assert sealed.is_sealed(token) and sealed.is_sealed(stored_signing)

    rotate("second-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyz")
    assert sealed.unseal(token, org) == "EAAG-long-lived-access-token-0001"  # under AWSPREVIOUS
    assert sealed.unseal(stored_signing, org) == signing
    assert reseal.reseal_page(store, page_size=1000, dry_run=True).resealed == 2  # the channel and the endpoint
    assert reseal.run(store) == 2
    assert reseal.reseal_page(store, page_size=1000, dry_run=True).resealed == 0

    rotate("third-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyzA")  # the first value is gone
    moved = channels.get_item(store, org, channel["data"]["id"])["config"]["access_token"]
    assert moved != token and sealed.unseal(moved, org) == "EAAG-long-lived-access-token-0001"
    assert sealed.unseal(_endpoint_secret(org), org) == signing
    with pytest.raises(ValueError):
        sealed.unseal(token, org)  # what reseal did not move would be lost: hence the check before rotating again


def test_a_linked_device_engine_keeps_its_webhook_secret_through_a_rotation(api: Api):
    with FakeWaha(api_key="k") as waha:
        config = {"engine": "waha", "base_url": waha.url, "api_key": "k"}
        channel = ok(api.post("/v1/channels", json={"name": "w", "platform": "whatsapp_web", "config": config}), 201)
        channel_id = channel["data"]["id"]
        ok(api.post(f"/v1/channels/{channel_id}/connect"))
        waha.link(channel_id)

        rotate("second-platform-secret-0123456789-abcdefghijklmnopqrstuvwxyz")
        body, headers = waha.webhook(channel_id, "session.status", waha.session_status(channel_id))
        assert api.post(f"/v1/providers/{channel_id}/callback", content=body, headers=headers).status_code == 200
        body, headers = waha.webhook(channel_id, "session.status", waha.session_status(channel_id), key="forged")
        api.assert_error(
            api.post(f"/v1/providers/{channel_id}/callback", content=body, headers=headers), 401, "unauthenticated"
        )
