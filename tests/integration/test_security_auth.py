"""Attacks on the auth routes and the unauthenticated entry points (CONVENTIONS "Tenant safety and data lifecycle"):
lock-outs, unlimited pre-session routes, credential floods and account enumeration, through the gateway."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from starlette.testclient import TestClient

from switchboard import clock
from switchboard.config import reset_settings
from switchboard.providers.whatsapp_web import callback_secret
from tests.integration.support import PASSWORD, Api, latest_code


def from_ip(api: Api, ip: str, headers: dict[str, str] | None = None) -> TestClient:
    """A client of the same gateway whose socket peer (the gateway's `sourceIp`) is `ip`."""
    return TestClient(
        api.client.app, base_url="http://127.0.0.1:3000", client=(ip, 40000), headers=headers or api.owner_headers
    )


def limits(monkeypatch: pytest.MonkeyPatch, **values: int) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name.upper(), str(value))
    reset_settings()


def assert_rate_limited(api: Api, response) -> int:
    api.assert_error(response, 429, "rate_limited")
    retry_after = int(response.headers["Retry-After"])
    assert retry_after >= 1
    return retry_after


def login(client: TestClient, email: str, password: str):
    return client.post("/v1/auth/login", json={"email": email, "password": password})


# Failed logins: progressive delays per (e-mail, IP), never a lock-out elsewhere -------------------------------------
def test_a_wrong_password_flood_from_one_ip_does_not_lock_the_user_out_elsewhere(
    api: Api, monkeypatch: pytest.MonkeyPatch
):
    email, _ = api.register("victim@example.com")
    attacker, user = from_ip(api, "198.51.100.66"), from_ip(api, "203.0.113.10")
    now = clock.epoch_now()
    monkeypatch.setattr(clock, "epoch_now", lambda: now)  # one instant: no delay runs out on a slow machine
    statuses = [login(attacker, email, f"guess-{i:04d}").status_code for i in range(12)]
    assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}
    # The attacker's place waits, even with the right password ...
    assert_rate_limited(api, login(attacker, email, PASSWORD))
    # ... the real user, elsewhere, signs in during the flood.
    ok = login(user, email, PASSWORD)
    assert ok.status_code == 200, ok.text


def test_failed_logins_slow_down_exponentially_and_are_bounded(api: Api, monkeypatch: pytest.MonkeyPatch):
    email, _ = api.register("slow@example.com")
    attacker = from_ip(api, "198.51.100.67")
    now = [clock.epoch_now()]
    monkeypatch.setattr(clock, "epoch_now", lambda: now[0])
    for i in range(5):
        assert login(attacker, email, f"guess-{i}").status_code == 401
    waits = []
    for i in range(4):
        waits.append(assert_rate_limited(api, login(attacker, email, "again")))
        now[0] += waits[-1]  # the delay runs out: one more try is let through, and fails
        assert login(attacker, email, f"more-{i}").status_code == 401
    assert waits == [2, 4, 8, 16]
    from switchboard.ratelimit import backoff_delay

    assert backoff_delay(10_000, free=5, base_seconds=2, max_seconds=900) == 900
    # Once the delay has run, the right password works and clears the slate.
    now[0] += 32
    assert login(attacker, email, PASSWORD).status_code == 200
    assert login(attacker, email, "wrong-again").status_code == 401


# Rate limits on the pre-session routes: per client IP and per e-mail --------------------------------------------------
def test_verification_mails_to_many_addresses_from_one_ip_are_limited(api: Api, monkeypatch: pytest.MonkeyPatch):
    limits(monkeypatch, auth_ip_limit=5)
    flooder = from_ip(api, "198.51.100.70")
    statuses = [
        flooder.post("/v1/auth/email-verification/request", json={"email": f"target{i}@example.com"}).status_code
        for i in range(8)
    ]
    assert statuses == [202] * 5 + [429] * 3
    refused = flooder.post("/v1/auth/email-verification/request", json={"email": "one-more@example.com"})
    assert_rate_limited(api, refused)
    assert all(name in refused.headers for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"))
    assert api.mail("target7@example.com") == []
    # Every pre-session route counts against the same budget of that IP; another IP is not affected.
    for path, body in [
        ("/v1/auth/login", {"email": "a@example.com", "password": PASSWORD}),
        ("/v1/auth/register", {"email": "a@example.com", "password": PASSWORD}),
        ("/v1/auth/register/verify", {"email": "a@example.com", "otp_code": "123456", "password": PASSWORD}),
        ("/v1/auth/email-verification/confirm", {"email": "a@example.com", "otp_code": "123456"}),
        ("/v1/auth/password/reset", {"email": "a@example.com"}),
        ("/v1/auth/password/confirm", {"email": "a@example.com", "otp_code": "123456", "password": PASSWORD}),
    ]:
        assert_rate_limited(api, flooder.post(path, json=body))
    other = from_ip(api, "198.51.100.71")
    assert other.post("/v1/auth/email-verification/request", json={"email": "fine@example.com"}).status_code == 202


def test_requests_about_one_email_are_limited_across_ips(api: Api, monkeypatch: pytest.MonkeyPatch):
    limits(monkeypatch, auth_email_limit=4)
    email = "popular@example.com"
    statuses = [
        from_ip(api, f"198.51.100.{i + 1}").post("/v1/auth/password/reset", json={"email": email}).status_code
        for i in range(6)
    ]
    assert statuses == [202] * 4 + [429] * 2
    assert from_ip(api, "198.51.100.99").post("/v1/auth/password/reset", json={"email": "x@example.com"}).status_code
    assert_rate_limited(
        api,
        from_ip(api, "198.51.100.98").post(
            "/v1/auth/register/verify", json={"email": email, "otp_code": "123456", "password": PASSWORD}
        ),
    )


# Per credential, beside per organization ----------------------------------------------------------------------------
def test_a_session_without_an_organization_is_rate_limited(api: Api, monkeypatch: pytest.MonkeyPatch):
    email, _ = api.register("loner@example.com")
    session = api.login(email)
    limits(monkeypatch, rate_limit_credential_per_minute=3)
    now = clock.epoch_now()
    monkeypatch.setattr(clock, "epoch_now", lambda: now)  # one minute's window: none ends on a slow machine
    statuses = [api.get("/v1/auth/me", headers=session).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    refused = api.get("/v1/auth/me", headers=session)
    assert_rate_limited(api, refused)
    assert refused.headers["RateLimit-Limit"] == "3" and refused.headers["RateLimit-Remaining"] == "0"


def test_one_api_key_cannot_spend_its_organizations_whole_budget(api: Api, monkeypatch: pytest.MonkeyPatch):
    limits(monkeypatch, rate_limit_credential_per_minute=3, rate_limit_per_minute=100)
    created = api.post("/v1/api-keys", json={"name": "second", "role": "admin"})
    assert created.status_code == 201, created.text
    assert created.headers["RateLimit-Limit"] == "3" and created.headers["RateLimit-Remaining"] == "2"
    second = {"X-Api-Key": created.json()["data"]["key"]}
    statuses = [api.get("/v1/organization").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert api.get("/v1/organization", headers=second).status_code == 200


def test_organization_creation_is_limited_per_user(api: Api, monkeypatch: pytest.MonkeyPatch):
    email, _ = api.register("founder@example.com")
    session = api.login(email)
    limits(monkeypatch, organizations_per_user_per_day=3)
    statuses = [api.post("/v1/organizations", json={"name": f"Org {i}"}, headers=session).status_code for i in range(5)]
    assert statuses == [201, 201, 201, 429, 429]
    assert_rate_limited(api, api.post("/v1/organizations", json={"name": "Org 9"}, headers=session))
    assert len(api.get("/v1/organizations", headers=session).json()["data"]) == 3


def test_provider_callbacks_are_limited_per_channel(api: Api, monkeypatch: pytest.MonkeyPatch):
    engine = {"base_url": "https://waha.example", "api_key": "k"}
    channel = api.post("/v1/channels", json={"name": "web", "platform": "whatsapp_web", "config": engine})
    assert channel.status_code == 201, channel.text
    channel_id = channel.json()["data"]["id"]
    limits(monkeypatch, callbacks_per_channel_per_minute=3)

    def signed(n: int) -> int:
        raw = json.dumps({"event": "message", "session": "elsewhere", "payload": {"n": n}}).encode()
        mac = hmac.new(callback_secret(channel_id).encode(), raw, hashlib.sha512).hexdigest()
        return api.post(
            f"/v1/providers/{channel_id}/callback", content=raw, headers={"X-Webhook-Hmac": mac}
        ).status_code

    assert [signed(n) for n in range(5)] == [200, 200, 200, 429, 429]
    other = api.post("/v1/providers/ch_unknown/callback", json={}, headers={})
    assert other.status_code != 429


def test_portal_token_guesses_are_limited_per_ip(api: Api, monkeypatch: pytest.MonkeyPatch):
    limits(monkeypatch, portal_failures_per_ip=3)
    guesser = from_ip(api, "198.51.100.80", headers={})
    statuses = [
        guesser.post(
            "/portal/webhooks/session",
            data={"token": f"whp_guess{i:040d}"},
            headers={"Origin": "http://127.0.0.1:3000"},
            follow_redirects=False,
        ).status_code
        for i in range(5)
    ]
    assert statuses == [401, 401, 401, 429, 429]
    link = api.post("/v1/settings/developer/webhooks/portal-access", json={})
    assert link.status_code in (200, 201), link.text
    token = link.json()["data"]["url"].split("#token=", 1)[1]
    # a valid link is checked before the IP's spent budget refuses it (test_security_round3.py)
    opened = guesser.post(
        "/portal/webhooks/session",
        data={"token": token},
        headers={"Origin": "http://127.0.0.1:3000"},
        follow_redirects=False,
    )
    assert opened.status_code == 303, opened.text
    again = guesser.post("/portal/webhooks/session", data={"token": token}, headers={"Origin": "http://127.0.0.1:3000"})
    assert again.status_code == 429 and int(again.headers["Retry-After"]) >= 1  # used now: a failure, still limited


# Enumeration -------------------------------------------------------------------------------------------------------
def test_user_lookup_by_email_sees_only_the_callers_organization(api: Api):
    api.new_org("outsider@example.com", name="Elsewhere")
    for path in ("/v1/users/lookup/info", "/v1/users/lookup/check"):
        found = api.post(path, json={"email": "outsider@example.com"})
        assert found.status_code == 200, found.text
        assert found.json()["data"]["exists"] is False
    info = api.post("/v1/users/lookup/info", json={"email": "owner@example.com"}).json()["data"]
    assert info["exists"] is True and info["user_id"]


def test_register_answers_do_not_reveal_whether_an_email_has_an_account(api: Api):
    api.register("known@example.com")
    answers = []
    for email in ("known@example.com", "unknown@example.com"):
        plain = api.post("/v1/auth/register", json={"email": email, "password": PASSWORD})
        coded = api.post("/v1/auth/register/verify", json={"email": email, "otp_code": "000000", "password": PASSWORD})
        answers.append(
            (plain.status_code, plain.json()["error"]["code"], coded.status_code, coded.json()["error"]["code"])
        )
    assert answers[0] == answers[1] == (400, "email_not_verified", 400, "invalid_otp")
    # With a right code, the known e-mail is a conflict.
    api.post("/v1/auth/email-verification/request", json={"email": "known@example.com"})
    code = latest_code(api, "known@example.com")
    dup = api.post(
        "/v1/auth/register/verify", json={"email": "known@example.com", "otp_code": code, "password": PASSWORD}
    )
    api.assert_error(dup, 409, "conflict")


def test_login_of_an_unknown_email_verifies_a_hash_like_a_known_one(api: Api, monkeypatch: pytest.MonkeyPatch):
    from argon2 import PasswordHasher

    email, _ = api.register("timing@example.com")
    calls: list[str] = []
    original = PasswordHasher.verify

    def counting(self, hash, password):
        calls.append(hash)
        return original(self, hash, password)

    monkeypatch.setattr(PasswordHasher, "verify", counting)
    api.assert_error(
        api.post("/v1/auth/login", json={"email": email, "password": "wrong-pass"}), 401, "unauthenticated"
    )
    assert len(calls) == 1
    unknown = api.post("/v1/auth/login", json={"email": "nobody-here@example.com", "password": "wrong-pass"})
    api.assert_error(unknown, 401, "unauthenticated")
    assert len(calls) == 2 and calls[1].startswith("$argon2id$")
