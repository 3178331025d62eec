"""Tenant safety, round three (issue 29): portal access that ends with its creator, no 500 from any body, bounded
callback tokens and budgets, bounded CDP batches, public media URLs, plain file names, lockouts that do not lock the
owner out, and the requests every route refuses (CONVENTIONS "Requests the service refuses (every route)").

Each test is an attack the black-box probe made, answered as the issue expects."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import socket
import time
from collections.abc import Iterator
from html import unescape
from typing import Any

import pytest
from starlette.testclient import TestClient

from switchboard import clock, netguard
from switchboard.cdp import events as cdp_events
from switchboard.config import reset_settings
from switchboard.contacts import service as contacts_service
from switchboard.contacts.models import ContactCreate
from switchboard.messaging import messages
from switchboard.providers.whatsapp_web import callback_secret
from switchboard.store import get_store
from tests.fakes.evolution import FakeEvolution, jwt_hs256
from tests.integration.support import Api, invitation_token, latest_code

DEEP = 20_000  # levels: ~120 KB, under the 256 KiB body limit; the JSON scanner recursed past ~1,000 before


def _deep(levels: int = DEEP, leaf: str = "1") -> str:
    return '{"a":' * levels + leaf + "}" * levels


def _json(api: Api, method: str, path: str, text: str, headers: dict[str, str] | None = None):
    sent = {**(api.owner_headers if headers is None else headers), "Content-Type": "application/json"}
    return api.request(method, path, content=text.encode(), headers=sent)


# Row 2: deep nesting is 400 invalid_json on every route that reads JSON, never a 500 --------------------------------
def test_a_deeply_nested_body_is_invalid_json_on_every_kind_of_route(api: Api):
    deep = _deep()
    no_credential: dict[str, str] = {}
    api.assert_error(
        _json(api, "POST", "/v1/providers/whatsapp_cloud/webhook", deep, no_credential), 400, "invalid_json"
    )
    attributes = '{"name": "Ada", "attributes": ' + _deep() + "}"
    api.assert_error(_json(api, "POST", "/v1/contacts", attributes), 400, "invalid_json")
    login = '{"email": "owner@example.com", "password": ' + _deep() + "}"
    api.assert_error(_json(api, "POST", "/v1/auth/login", login), 400, "invalid_json")
    error = api.assert_error(_json(api, "PATCH", "/v1/organization", _deep(65)), 400, "invalid_json")
    assert "64" in error["message"], error
    assert api.get("/v1/contacts").json()["data"] == []  # nothing was stored


def test_sixty_four_levels_are_still_read(api: Api):
    inner = '{"a":' * 60 + "1" + "}" * 60  # 62 levels with the body and `attributes`: read, then refused by the model
    body = '{"name": "Ada", "attributes": {"deep": ' + inner + "}}"
    error = api.assert_error(_json(api, "POST", "/v1/contacts", body), 400, "validation_failed")
    assert error["details"][0]["field"].startswith("body.attributes"), error


def test_a_deep_body_on_a_channels_callback_url_is_refused_before_its_signature_is_read(api: Api):
    config = {
        "base_url": "https://graph.facebook.com/v23.0",
        "access_token": "tok",
        "phone_number_id": "100000000000009",
        "waba_id": "200000000000009",
        "app_secret": "the-app-secret",
    }
    cloud = api.post("/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": config})
    assert cloud.status_code == 201, cloud.text
    raw = ('{"object": "whatsapp_business_account", "entry": ' + _deep() + "}").encode()
    digest = hmac.new(b"the-app-secret", raw, hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": f"sha256={digest}"}
    url = f"/v1/providers/{cloud.json()['data']['id']}/callback"
    api.assert_error(api.post(url, content=raw, headers=headers), 400, "invalid_json")

    web = api.post(
        "/v1/channels",
        json={
            "name": "web",
            "platform": "whatsapp_web",
            "config": {"base_url": "https://waha.example", "api_key": "k"},
        },
    ).json()["data"]
    raw = ('{"event": "message", "session": "' + web["id"] + '", "payload": ' + _deep() + "}").encode()
    signed = hmac.new(callback_secret(web["id"]).encode(), raw, hashlib.sha512).hexdigest()
    headers = {"Content-Type": "application/json", "X-Webhook-Hmac": signed, "X-Webhook-Hmac-Algorithm": "sha512"}
    api.assert_error(api.post(f"/v1/providers/{web['id']}/callback", content=raw, headers=headers), 400, "invalid_json")


def test_a_deep_json_lines_row_is_a_rejected_row_not_a_500(api: Api):
    content = '{"email": "ada@example.com"}\n' + _deep(2_000, '"x"') + "\n"
    resp = api.post("/v1/cdp/imports", json={"format": "jsonl", "content": content})
    assert resp.status_code == 201, resp.text
    report = resp.json()["data"]
    assert (report["created"], report["rejected"]) == (1, 1), report
    assert "64" in report["errors"][0]["message"], report["errors"]


# Row 9: unknown query parameters ------------------------------------------------------------------------------------
def test_an_unknown_query_parameter_is_refused_not_ignored(api: Api):
    error = api.assert_error(
        api.get("/v1/conversations", params={"contact_id": "ct_someone", "limit": "5"}), 400, "validation_failed"
    )
    assert [d["field"] for d in error["details"]] == ["query.contact_id"], error
    error = api.assert_error(api.get("/v1/organization", params={"b": "1", "a": "2"}), 400, "validation_failed")
    assert [d["field"] for d in error["details"]] == ["query.a", "query.b"], error
    api.assert_error(api.post("/v1/contacts?dry_run=true", json={"name": "Ada"}), 400, "validation_failed")
    assert api.get("/v1/contacts").json()["data"] == []
    assert api.get("/v1/conversations", params={"limit": "5"}).status_code == 200  # declared ones still work
    assert api.get("/v1/health", params={"x": "1"}, headers={}).status_code == 400  # public routes too


def test_metas_handshake_parameters_are_declared_on_the_channel_url(api: Api):
    config = {
        "base_url": "https://graph.facebook.com/v23.0",
        "access_token": "tok",
        "phone_number_id": "100000000000008",
        "waba_id": "200000000000008",
        "app_secret": "s",
        "verify_token": "the-verify-token",
    }
    channel = api.post("/v1/channels", json={"name": "c", "platform": "whatsapp_cloud", "config": config}).json()
    query = {"hub.mode": "subscribe", "hub.verify_token": "the-verify-token", "hub.challenge": "1158201444"}
    url = f"/v1/providers/{channel['data']['id']}/callback"
    answer = api.get(url, params=query, headers={})
    assert (answer.status_code, answer.text) == (200, "1158201444")
    api.assert_error(api.get(url, params={**query, "extra": "1"}, headers={}), 400, "validation_failed")


# Row 10: X-Api-Key carries API keys only ----------------------------------------------------------------------------
def test_a_session_token_is_refused_in_x_api_key(api: Api):
    session = api.login("owner@example.com")
    token = session["Authorization"].removeprefix("Bearer ")
    assert api.get("/v1/organization", headers=session).status_code == 200
    api.assert_error(api.get("/v1/organization", headers={"X-Api-Key": token}), 401, "unauthenticated")
    api.assert_error(api.get("/v1/auth/me", headers={"X-Api-Key": token}), 401, "unauthenticated")
    # API keys keep working in either header
    assert api.get("/v1/organization", headers={"Authorization": f"Bearer {api.owner_key}"}).status_code == 200


# Row 11: a repeated Idempotency-Key --------------------------------------------------------------------------------
def test_a_repeated_idempotency_key_header_is_refused(api: Api):
    headers = [("X-Api-Key", api.owner_key), ("Idempotency-Key", "k-1"), ("Idempotency-Key", "k-2")]
    resp = api.client.post("/v1/contacts", json={"name": "Ada"}, headers=headers)
    error = api.assert_error(resp, 400, "validation_failed")
    assert error["details"][0]["field"] == "headers.idempotency-key", error
    assert api.get("/v1/contacts").json()["data"] == []
    once = api.post("/v1/contacts", json={"name": "Ada"}, headers={**api.owner_headers, "Idempotency-Key": "k-1"})
    assert once.status_code == 201, once.text


# Row 1: portal links and sessions end with their creator ------------------------------------------------------------
PORTAL = "/portal/webhooks"
ORIGIN = "http://127.0.0.1:3000"


def _join(api: Api, email: str, role: str) -> tuple[str, dict[str, str]]:
    """A registered user who accepted an invitation to the organization with `role`: (user id, session)."""
    _, user_id = api.register(email)
    invitation = api.post("/v1/invitations", json={"email": email, "role": role}).json()["data"]
    session = {**api.login(email), "X-Organization-Id": api.org_id}
    accepted = api.post(
        f"/v1/invitations/{invitation['id']}/accept", json={"token": invitation_token(api, email)}, headers=session
    )
    assert accepted.status_code == 200, accepted.text
    return user_id, session


def _portal_link(api: Api, headers: dict[str, str]) -> str:
    resp = api.post("/v1/settings/developer/webhooks/portal-access", json={}, headers=headers)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["data"]["url"].split("#token=", 1)[1])


def _visitor(api: Api, ip: str = "testclient") -> TestClient:
    return TestClient(api.client.app, base_url=ORIGIN, follow_redirects=False, client=(ip, 40000))


def _open(api: Api, token: str, ip: str = "testclient") -> tuple[int, TestClient]:
    visitor = _visitor(api, ip)
    resp = visitor.post(f"{PORTAL}/session", data={"token": token}, headers={"Origin": ORIGIN})
    return resp.status_code, visitor


def _create_endpoint(visitor: TestClient) -> int:
    page = visitor.get(f"{PORTAL}/endpoints")
    if page.status_code != 200:
        return page.status_code
    csrf = unescape(re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1))  # type: ignore[union-attr]
    form = {"csrf_token": csrf, "url": "http://127.0.0.1:9/hook", "description": "from the portal"}
    return visitor.post(f"{PORTAL}/endpoints", data=form, headers={"Origin": ORIGIN}).status_code


@pytest.mark.parametrize("change", ["removed", "demoted", "key_revoked"])
def test_portal_links_and_sessions_stop_when_their_creator_could_no_longer_mint_them(api: Api, change: str):
    user_id, admin = _join(api, f"portal-{change}@example.com", "admin")
    minter = admin
    if change == "key_revoked":
        key = api.post("/v1/api-keys", json={"name": "portal minter", "role": "admin"}, headers=admin).json()["data"]
        minter = {"X-Api-Key": key["key"]}
    used, spare = _portal_link(api, minter), _portal_link(api, minter)
    status, visitor = _open(api, used)
    assert status == 303
    assert visitor.get(f"{PORTAL}/endpoints").status_code == 200

    if change == "removed":
        assert api.delete(f"/v1/members/{user_id}").status_code == 204
    elif change == "demoted":
        assert api.patch(f"/v1/members/{user_id}", json={"role": "member"}).status_code == 200
    else:
        assert api.delete(f"/v1/api-keys/{key['id']}").status_code == 204

    assert visitor.get(f"{PORTAL}/endpoints").status_code == 401
    assert _create_endpoint(visitor) == 401
    assert _open(api, spare)[0] == 401  # the unused link opens nothing either
    assert api.get("/v1/settings/developer/webhooks/endpoints").json()["data"] == []
    # the owner's own links are untouched
    status, owners = _open(api, _portal_link(api, api.owner_headers))
    assert status == 303 and _create_endpoint(owners) == 201


# Row 7: portal token failures are counted per IP and per token prefix, apart -----------------------------------------
def test_wrong_portal_tokens_from_one_ip_do_not_lock_out_valid_links_from_it(api: Api, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PORTAL_FAILURES_PER_IP", "3")
    monkeypatch.setenv("PORTAL_FAILURES_PER_TOKEN_PREFIX", "2")
    reset_settings()
    guesser = "198.51.100.90"
    statuses = [_open(api, f"whp_{secrets.token_urlsafe(32)}", guesser)[0] for _ in range(5)]
    assert statuses == [401, 401, 401, 429, 429]
    assert _open(api, _portal_link(api, api.owner_headers), guesser)[0] == 303  # checked before the IP's budget
    # guesses on one prefix stop there, from any address, while other links still open
    prefix = f"whp_{secrets.token_urlsafe(6)[:8]}"
    tries = [_open(api, prefix + secrets.token_urlsafe(30), f"203.0.113.{n}")[0] for n in range(1, 5)]
    assert tries == [401, 401, 429, 429]
    assert _open(api, _portal_link(api, api.owner_headers), "203.0.113.9")[0] == 303


# Row 5: media.url in sends follows the webhook URL rule outside the local stack ---------------------------------------
@pytest.fixture
def channel(api: Api) -> dict[str, Any]:
    made = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"}).json()["data"]
    connected = api.post(f"/v1/channels/{made['id']}/connect")
    assert connected.status_code == 200, connected.text
    return connected.json()["data"]  # type: ignore[no-any-return]


@pytest.fixture
def outside_local(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("STAGE", "dev")
    reset_settings()
    yield
    monkeypatch.setenv("STAGE", "local")
    reset_settings()


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "https://169.254.169.254/latest/meta-data/",
        "https://127.0.0.1/x.png",
        "https://localhost/x.png",
        "https://10.0.0.5/x.png",
        "https://[::ffff:192.168.1.10]/x.png",
        "https://[fd00:ec2::254]/x.png",
        "http://cdn.example.com/x.png",
    ],
)
def test_a_media_url_must_be_a_public_https_url(
    api: Api, channel: dict[str, Any], outside_local: None, monkeypatch: pytest.MonkeyPatch, url: str
):
    monkeypatch.setattr(netguard, "getaddrinfo", _public_dns)
    send = {"channel_id": channel["id"], "to": "+14155550123", "type": "image", "media": {"url": url}}
    error = api.assert_error(api.post("/v1/messages", json=send), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.media.url", error
    assert api.get("/v1/conversations").json()["data"] == []  # nothing was sent
    public = {**send, "media": {"url": "https://cdn.example.com/x.png"}}
    assert api.post("/v1/messages", json=public).status_code == 202


def _public_dns(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
    """DNS for the media tests: every name is one public address, but `localhost` stays loopback."""
    address = "127.0.0.1" if host in ("localhost", b"localhost") else "93.184.216.34"
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]


# Row 6: an upload's file_name is a plain file name --------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["../../../etc/passwd", "..\\..\\boot.ini", "dir/file.pdf", "..", ".", "invoice\u202egnp.pdf", "a\x00b"]
)
def test_an_upload_file_name_is_a_plain_name(api: Api, name: str):
    body = {"content_type": "application/pdf", "size": 1024, "file_name": name}
    error = api.assert_error(api.post("/v1/media/uploads", json=body), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.file_name", error
    image = {"content_type": "image/png", "size": 1024, "file_name": name}
    api.assert_error(api.post("/v1/messages/uploads/image", json=image), 400, "validation_failed")
    assert api.get("/v1/media/assets").json()["data"] == []


def test_ordinary_file_names_still_pass(api: Api):
    for name in ("invoice-A-1042.pdf", "Relevé de compte.pdf", "..report.pdf", "スクリーンショット.png"):
        made = api.post("/v1/media/uploads", json={"content_type": "application/pdf", "size": 10, "file_name": name})
        assert made.status_code == 201, made.text
        assert made.json()["data"]["file_name"] == name


# Row 8: wrong one-time codes slow down where they come from; the right code keeps working ----------------------------
def _client(api: Api, ip: str) -> TestClient:
    return TestClient(api.client.app, base_url=ORIGIN, client=(ip, 40000), headers=api.owner_headers)


def _wrong(code: str) -> str:
    return "000000" if code != "000000" else "111111"


def test_wrong_codes_from_elsewhere_never_block_the_owners_password_reset(api: Api, monkeypatch: pytest.MonkeyPatch):
    email, _ = api.register("reset-victim@example.com")
    now = clock.epoch_now()
    monkeypatch.setattr(clock, "epoch_now", lambda: now)  # one instant: no delay runs out on a slow machine
    owner, attacker = _client(api, "192.0.2.10"), _client(api, "198.51.100.66")
    assert owner.post("/v1/auth/password/reset", json={"email": email}).status_code == 202
    code = latest_code(api, email)
    guess = {"email": email, "otp_code": _wrong(code), "password": "another long passphrase"}
    answers = [attacker.post("/v1/auth/password/confirm", json=guess).status_code for _ in range(8)]
    assert answers[:5] == [400] * 5 and set(answers[5:]) == {429}, answers  # slowed down, not locking
    right = {"email": email, "otp_code": code, "password": "another long passphrase"}
    assert owner.post("/v1/auth/password/confirm", json=right).status_code == 200
    api.login(email, "another long passphrase")


def test_wrong_codes_slow_down_progressively_and_the_right_code_works_after_the_delay(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    email = "verify-slow@example.com"
    now = [clock.epoch_now()]
    monkeypatch.setattr(clock, "epoch_now", lambda: now[0])
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    code = latest_code(api, email)
    confirm = "/v1/auth/email-verification/confirm"
    for _ in range(5):
        api.assert_error(api.post(confirm, json={"email": email, "otp_code": _wrong(code)}), 400, "invalid_otp")
    waits = []
    for _ in range(3):
        slowed = api.post(confirm, json={"email": email, "otp_code": code})  # even the right one waits its turn
        api.assert_error(slowed, 429, "rate_limited")
        waits.append(int(slowed.headers["Retry-After"]))
        now[0] += waits[-1]
        api.assert_error(api.post(confirm, json={"email": email, "otp_code": _wrong(code)}), 400, "invalid_otp")
    assert waits == sorted(waits) and waits[-1] >= 4 * waits[0], waits  # the delay doubles with every failure
    now[0] += 3600
    assert api.post(confirm, json={"email": email, "otp_code": code}).status_code == 200  # still the live code


def test_a_new_code_can_be_requested_and_starts_without_a_delay(api: Api, monkeypatch: pytest.MonkeyPatch):
    email = "verify-new@example.com"
    now = clock.epoch_now()
    monkeypatch.setattr(clock, "epoch_now", lambda: now)
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    first = latest_code(api, email)
    confirm = "/v1/auth/email-verification/confirm"
    for _ in range(6):
        api.post(confirm, json={"email": email, "otp_code": _wrong(first)})
    api.assert_error(api.post(confirm, json={"email": email, "otp_code": first}), 429, "rate_limited")
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    second = latest_code(api, email)
    assert api.post(confirm, json={"email": email, "otp_code": second}).status_code == 200


# A channel's callback budget: refused callbacks never spend what its real engine needs ----------------------------
def _waha_channel(api: Api) -> str:
    engine = {"base_url": "https://waha.example", "api_key": "k"}
    made = api.post("/v1/channels", json={"name": "web", "platform": "whatsapp_web", "config": engine})
    assert made.status_code == 201, made.text
    return str(made.json()["data"]["id"])


def test_an_unsigned_flood_does_not_spend_the_budget_of_the_channels_real_engine(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    channel_id = _waha_channel(api)
    monkeypatch.setenv("CALLBACKS_PER_CHANNEL_PER_MINUTE", "3")
    monkeypatch.setenv("CALLBACK_FAILURES_PER_CHANNEL_PER_MINUTE", "2")
    reset_settings()
    url = f"/v1/providers/{channel_id}/callback"
    raw = b'{"event": "message", "session": "elsewhere", "payload": {}}'
    forged = [api.post(url, content=raw, headers={"X-Webhook-Hmac": "0" * 128}).status_code for _ in range(5)]
    assert forged == [401, 401, 429, 429, 429]
    mac = hmac.new(callback_secret(channel_id).encode(), raw, hashlib.sha512).hexdigest()
    signed = [api.post(url, content=raw, headers={"X-Webhook-Hmac": mac}).status_code for _ in range(4)]
    assert signed == [200, 200, 200, 429]  # the engine's own budget, whole, then spent


# Row 3: Evolution's callback tokens are short-lived, bound to their body once, and the key rotates --------------------
@pytest.fixture
def evo() -> Iterator[FakeEvolution]:
    with FakeEvolution(api_key="k") as fake:
        yield fake


@pytest.fixture
def evo_channel(api: Api, evo: FakeEvolution) -> dict[str, Any]:
    config = {"engine": "evolution", "base_url": evo.url, "api_key": "k"}
    made = api.post("/v1/channels", json={"name": "evo", "platform": "whatsapp_web", "config": config})
    assert made.status_code == 201, made.text
    channel = made.json()["data"]
    assert api.post(f"/v1/channels/{channel['id']}/connect").json()["data"]["status"] == "pairing"
    evo.link(channel["id"])
    return channel  # type: ignore[no-any-return]


def _evo_post(api: Api, channel_id: str, body: bytes, claims: dict[str, Any], key: str | None = None):
    token = jwt_hs256({"app": "evolution", "action": "webhook", **claims}, key or callback_secret(channel_id))
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    return api.post(f"/v1/providers/{channel_id}/callback", content=body, headers=headers)


def _inbound_texts(api: Api) -> list[str]:
    texts = []
    for conv in api.get("/v1/conversations").json()["data"]:
        rows = api.get(f"/v1/conversations/{conv['id']}/messages").json()["data"]
        texts += [r["text"] for r in rows if r["direction"] == "inbound"]
    return sorted(texts)


def test_an_evolution_token_must_be_recent_and_short_lived(api: Api, evo: FakeEvolution, evo_channel: dict[str, Any]):
    channel_id = evo_channel["id"]
    now = int(time.time())
    body, _ = evo.webhook(channel_id, "messages.upsert", evo.inbound(channel_id, "15550001111", "forged"))
    for claims in (
        {"iat": now, "exp": 4102444800},  # exp in 2100
        {"exp": now + 300},  # no iat
        {"iat": now - 700, "exp": now + 100},  # issued 11 minutes ago, lives 13
        {"iat": now + 3600, "exp": now + 3900},  # issued in the future
        {"iat": str(now), "exp": now + 600},  # not a number
    ):
        api.assert_error(_evo_post(api, channel_id, body, claims), 401, "unauthenticated")
    assert _inbound_texts(api) == []
    ok = _evo_post(api, channel_id, body, {"iat": now, "exp": now + 600})  # what Evolution itself signs
    assert ok.status_code == 200, ok.text
    assert _inbound_texts(api) == ["forged"]


def test_one_evolution_token_and_body_are_accepted_once(api: Api, evo: FakeEvolution, evo_channel: dict[str, Any]):
    channel_id = evo_channel["id"]
    now = int(time.time())
    claims = {"iat": now, "exp": now + 600}
    first, _ = evo.webhook(channel_id, "messages.upsert", evo.inbound(channel_id, "15550001111", "one"))
    assert _evo_post(api, channel_id, first, claims).status_code == 200
    api.assert_error(_evo_post(api, channel_id, first, claims), 401, "unauthenticated")  # the replay
    # Evolution signs one token per second for every event of an instance: another event in that second passes
    second, _ = evo.webhook(channel_id, "messages.upsert", evo.inbound(channel_id, "15550001111", "two"))
    assert _evo_post(api, channel_id, second, claims).status_code == 200
    assert _inbound_texts(api) == ["one", "two"]


def test_an_evolution_callback_that_failed_is_accepted_when_the_engine_retries_it(
    api: Api, evo: FakeEvolution, evo_channel: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    channel_id = evo_channel["id"]
    now = int(time.time())
    claims = {"iat": now, "exp": now + 600}
    body, _ = evo.webhook(channel_id, "messages.upsert", evo.inbound(channel_id, "15550001111", "retried"))
    real_receive = messages.receive
    monkeypatch.setattr(messages, "receive", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("table down")))
    assert _evo_post(api, channel_id, body, claims).status_code == 500
    monkeypatch.setattr(messages, "receive", real_receive)
    assert _evo_post(api, channel_id, body, claims).status_code == 200
    assert _inbound_texts(api) == ["retried"]


def test_reconnect_rotates_the_channels_callback_key(api: Api, evo: FakeEvolution, evo_channel: dict[str, Any]):
    channel_id = evo_channel["id"]
    old_key = callback_secret(channel_id)
    assert (evo.instances[channel_id].webhook.get("headers") or {}).get("jwt_key") == old_key
    assert api.post(f"/v1/channels/{channel_id}/reconnect/force").status_code == 200
    new_key = (evo.instances[channel_id].webhook.get("headers") or {}).get("jwt_key")
    assert new_key and new_key != old_key
    now = int(time.time())
    body, _ = evo.webhook(channel_id, "messages.upsert", evo.inbound(channel_id, "15550001111", "after"))
    claims = {"iat": now, "exp": now + 600}
    api.assert_error(_evo_post(api, channel_id, body, claims, key=old_key), 401, "unauthenticated")
    assert _evo_post(api, channel_id, body, claims, key=new_key).status_code == 200
    engine_body, engine_headers = evo.webhook(  # signed as the engine now signs, with the key it was handed
        channel_id, "messages.upsert", evo.inbound(channel_id, "15550001111", "from the engine")
    )
    assert (
        api.post(f"/v1/providers/{channel_id}/callback", content=engine_body, headers=engine_headers).status_code == 200
    )
    assert _inbound_texts(api) == ["after", "from the engine"]


# Row 4: an events batch is planned and written as a batch ------------------------------------------------------------
def _day_count(api: Api, contact_id: str, name: str) -> int:
    day = clock.now_iso()[:10]
    item = get_store().get({"PK": f"ORG#{api.org_id}", "SK": f"CONTACT#{contact_id}#EVDAY#{name}#{day}"})
    return int((item or {}).get("events", 0))


def test_a_batched_events_ingest_keeps_every_per_event_rule(api: Api):
    known = api.post("/v1/contacts", json={"name": "Known", "phone": "+1 415 555 0001"}).json()["data"]
    new_phone = {"type": "phone", "value": "+1 415 555 0002"}
    batch = [
        {"event_id": "b-1", "name": "visit", "contact": new_phone},
        {"event_id": "b-2", "name": "visit", "contact": new_phone},  # the same new person twice: one contact
        {"event_id": "b-3", "name": "visit", "contact": {"type": "phone", "value": "+1 415 555 0001"}},
        {"event_id": "b-4", "name": "visit", "contact_id": known["id"]},
        {"event_id": "b-1", "name": "visit", "contact": new_phone},  # the same id again in the batch
        {"event_id": "b-5", "name": "visit", "contact_id": "ct_nobody"},
        {"event_id": "b-6", "name": "visit", "contact": new_phone, "timestamp": "1969-12-31T23:59:59Z"},
    ]
    result = api.post("/v1/cdp/events", json={"events": batch}).json()["data"]
    statuses = [r["status"] for r in result["results"]]
    assert statuses == ["accepted", "accepted", "accepted", "accepted", "duplicate", "rejected", "rejected"]
    assert [r["index"] for r in result["results"]] == list(range(7))
    new_id = result["results"][0]["contact_id"]
    assert result["results"][1]["contact_id"] == new_id != known["id"]
    assert {result["results"][2]["contact_id"], result["results"][3]["contact_id"]} == {known["id"]}
    assert _day_count(api, new_id, "visit") == 2 and _day_count(api, known["id"], "visit") == 2
    activity = api.get(f"/v1/cdp/contacts/{new_id}/activity").json()["data"]
    assert [a["event_id"] for a in activity] == ["b-2", "b-1"]  # newest first: the batch's order
    again = api.post("/v1/cdp/events", json={"events": batch[:4]}).json()["data"]
    assert again["duplicates"] == 4 and _day_count(api, new_id, "visit") == 2


def test_a_batch_whose_transaction_is_cancelled_is_written_one_event_at_a_time(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    """Someone claims a phone between the batch's reads and its transaction: the transaction is cancelled whole
    (nothing half-written) and its events go the one-by-one way, to the contact that claimed the phone."""
    real_plan = cdp_events._plan
    claimed: dict[str, Any] = {}

    def plan_then_race(store: Any, auth: Any, *args: Any) -> Any:
        planned = real_plan(store, auth, *args)
        racer = ContactCreate.model_validate({"name": "Racer", "phone": "+1 415 555 0003"})
        claimed.update(contacts_service.upsert_item(store, auth, racer)[0])  # another request, in between
        return planned

    monkeypatch.setattr(cdp_events, "_plan", plan_then_race)
    events = [{"name": "signup", "contact": {"type": "phone", "value": f"+1 415 555 000{n}"}} for n in (3, 4, 5)]
    result = api.post("/v1/cdp/events", json={"events": events}).json()["data"]
    assert result["accepted"] == 3, result
    assert result["results"][0]["contact_id"] == claimed["id"]
    phones = sorted(c["phone"] for c in api.get("/v1/contacts").json()["data"])
    assert phones == ["14155550003", "14155550004", "14155550005"]  # no second contact for the raced phone
