"""CONVENTIONS "Account flows" 1 → 6 over HTTP against the local stack: verification code by e-mail, registration,
login, an organization, API keys (shown once, revoked at once), an invitation e-mailed, registered for and accepted.

The stack is shared by every test of a worker, so every e-mail is unique.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e

USER_FIELDS = {
    "id",
    "email",
    "email_verified",
    "name",
    "image",
    "timezone",
    "week_start",
    "created_at",
    "first_name",
    "last_name",
}
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], list)
    assert isinstance(error["request_id"], str) and error["request_id"]
    return error


def unique_email(label: str) -> str:
    return f"e2e-{label}-{uuid.uuid4().hex[:12]}@example.com"


MAIL_WAIT = 15.0  # seconds: mail leaves through the queue (outbox → bus → MailQueue → SES), a moment after its request


def mails(stack: Stack, to: str, count: int = 1) -> list[dict]:
    """The mails SES received for `to`, newest first, once there are at least `count` of them (or after MAIL_WAIT
    seconds, whatever arrived)."""
    deadline = time.monotonic() + MAIL_WAIT
    with stack.client(auth=False) as client:
        while True:
            response = client.get("/_local/mail", params={"to": to})
            assert response.status_code == 200, response.text
            rows: list[dict] = response.json()["data"]
            if len(rows) >= count or time.monotonic() > deadline:
                return rows
            time.sleep(0.05)


def latest_code(stack: Stack, to: str, count: int = 1) -> str:
    """The code of the newest mail to `to`, once `count` mails reached it (the one carrying the code is the last)."""
    rows = mails(stack, to, count)
    assert len(rows) >= count and rows[0].get("otp_code"), f"no code was mailed to {to}: {rows}"
    code = rows[0]["otp_code"]
    assert re.fullmatch(r"\d{6}", code) and code in rows[0]["text"]
    return str(code)


def session_client(stack: Stack, token: str) -> httpx.Client:
    """A client that carries only the session token (no platform key)."""
    return stack.client(auth=False, headers={"Authorization": f"Bearer {token}"})


def login(platform: httpx.Client, email: str, password: str) -> dict:
    response = platform.post("/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    return response.json()["data"]  # type: ignore[no-any-return]


def test_account_flow_from_verification_code_to_an_accepted_invitation(local_only: Stack):
    ada, ada_pw = unique_email("ada"), "ada-password-1815"
    bob, bob_pw = unique_email("bob"), "bob-password-1955"
    with local_only.client() as platform:  # X-Api-Key: the stack's platform key (the calling app)
        # 1. A code is e-mailed.
        requested = platform.post("/v1/auth/email-verification/request", json={"email": ada})
        assert requested.status_code == 202, requested.text
        code = latest_code(local_only, ada)

        # 2. Verified, then registered: 201 with every field of the spec's User.
        confirmed = platform.post("/v1/auth/email-verification/confirm", json={"email": ada, "otp_code": code})
        assert confirmed.status_code == 200, confirmed.text
        registered = platform.post("/v1/auth/register", json={"email": ada, "password": ada_pw, "name": "Ada Lovelace"})
        assert registered.status_code == 201, registered.text
        user = registered.json()["data"]
        assert set(user) == USER_FIELDS, set(user) ^ USER_FIELDS
        assert user["email"] == ada and user["email_verified"] is True
        assert (user["name"], user["first_name"], user["last_name"]) == ("Ada Lovelace", "Ada", "Lovelace")
        assert user["id"].startswith("usr_")
        assert all(isinstance(user[f], str) for f in ("image", "timezone", "week_start"))
        assert user["timezone"] and user["week_start"]
        assert ISO_Z.match(user["created_at"]), user["created_at"]
        assert "password" not in registered.text
        # The new user did not join the platform key's organization.
        platform_members = platform.get("/v1/members", params={"limit": 100}).json()["data"]
        assert ada not in {m["user_email"] for m in platform_members}

        # 3. Login: a session token, its expiry, the user.
        session = login(platform, ada, ada_pw)
        assert set(session) == {"token", "expires_at", "user"}
        assert session["user"]["id"] == user["id"] and set(session["user"]) == USER_FIELDS
        expires = datetime.fromisoformat(session["expires_at"].replace("Z", "+00:00"))
        assert expires > datetime.now(UTC) + timedelta(days=1)

    with session_client(local_only, session["token"]) as ada_session:
        # 4. An organization, created with the session: the caller is its owner.
        created = ada_session.post("/v1/organizations", json={"name": "Analytical Engines"})
        assert created.status_code == 201, created.text
        org_id = created.json()["data"]["id"]
        assert org_id.startswith("org_")
        mine = ada_session.get("/v1/organizations").json()["data"]
        assert [(o["id"], o["role"]) for o in mine] == [(org_id, "owner")]
        assert ada_session.get("/v1/organization").json()["data"]["id"] == org_id  # the only organization

        # 5. An API key: the plain key only in the creation response; listed without it; works; revoked at once.
        made = ada_session.post("/v1/api-keys", json={"name": "ci", "role": "member"})
        assert made.status_code == 201, made.text
        key = made.json()["data"]
        assert set(key) >= {"id", "name", "role", "prefix", "key", "created_at"}
        assert (key["name"], key["role"]) == ("ci", "member")
        assert re.fullmatch(r"sk_(test|live)_[A-Za-z0-9_-]{32,}", key["key"]), key["key"]
        assert key["key"].startswith(key["prefix"]) and len(key["prefix"]) < len(key["key"])
        listed = ada_session.get("/v1/api-keys")
        assert listed.status_code == 200
        rows = {k["id"]: k for k in listed.json()["data"]}
        assert key["id"] in rows and all("key" not in k for k in rows.values())
        assert key["key"] not in listed.text
        assert ada_session.get(f"/v1/api-keys/{key['id']}").json()["data"].get("key") is None
        with local_only.client(key["key"]) as as_key:
            works = as_key.get("/v1/organization")
            assert works.status_code == 200, works.text
            assert works.json()["data"]["id"] == org_id
            assert ada_session.delete(f"/v1/api-keys/{key['id']}").status_code == 204
            assert_error(as_key.get("/v1/organization"), 401, "unauthenticated")
        assert key["id"] not in {k["id"] for k in ada_session.get("/v1/api-keys").json()["data"]}

        # 6. An invitation e-mails a link ...
        invited = ada_session.post("/v1/invitations", json={"email": bob, "role": "admin"})
        assert invited.status_code == 201, invited.text
        invitation = invited.json()["data"]
        assert (invitation["email"], invitation["role"], invitation["status"]) == (bob, "admin", "pending")
        assert invitation["organization_id"] == org_id
        invite_mail = mails(local_only, bob)[0]
        link = re.search(r"https?://\S+/v1/invitations/\S+/accept#token=[A-Za-z0-9_-]+", invite_mail["text"])
        assert link, invite_mail["text"]
        url = urlsplit(link.group(0))
        assert url.path == f"/v1/invitations/{invitation['id']}/accept" and not url.query
        token = parse_qs(url.fragment)["token"][0]

    with local_only.client() as platform:
        # ... the invited person registers (verify and register in one step) and logs in ...
        assert platform.post("/v1/auth/email-verification/request", json={"email": bob}).status_code == 202
        bob_code = latest_code(local_only, bob, count=2)  # after the invitation
        bob_user = platform.post(
            "/v1/auth/register/verify", json={"email": bob, "otp_code": bob_code, "password": bob_pw, "name": "Bob"}
        )
        assert bob_user.status_code == 201, bob_user.text
        assert set(bob_user.json()["data"]) == USER_FIELDS
        bob_session = login(platform, bob, bob_pw)

    with session_client(local_only, bob_session["token"]) as bob_client:
        # ... and accepts with the link: the membership exists.
        assert_error(bob_client.get("/v1/organization"), 403, "forbidden")  # no organization yet
        assert_error(bob_client.post(url.path, json={}), 400, "validation_failed")  # the token is required
        accepted = bob_client.post(url.path, json={"token": token})
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["data"]["status"] == "accepted"
        assert bob_client.get("/v1/organization").json()["data"]["id"] == org_id
        assert_error(bob_client.post(url.path, json={"token": token}), 409, "conflict")  # used up

    with session_client(local_only, session["token"]) as ada_session:
        members = ada_session.get("/v1/members")
        assert members.status_code == 200, members.text
        roles = {m["user_email"]: (m["role"], m["user_id"]) for m in members.json()["data"]}
        assert roles == {ada: ("owner", user["id"]), bob: ("admin", bob_user.json()["data"]["id"])}
        assert members.json()["meta"]["total"] == 2
        statuses = {i["id"]: i["status"] for i in ada_session.get("/v1/invitations").json()["data"]}
        assert statuses == {invitation["id"]: "accepted"}


def test_account_flow_refusals(local_only: Stack):
    carol, carol_pw = unique_email("carol"), "carol-password-42"
    with local_only.client() as platform:
        # register without a verified code → 400 email_not_verified
        unverified = platform.post("/v1/auth/register", json={"email": carol, "password": carol_pw})
        error = assert_error(unverified, 400, "email_not_verified")
        assert error["request_id"] == unverified.headers["x-amzn-requestid"]

        # a wrong code → 400 invalid_otp, on both registration routes
        assert platform.post("/v1/auth/email-verification/request", json={"email": carol}).status_code == 202
        code = latest_code(local_only, carol)
        wrong = "000000" if code != "000000" else "111111"
        assert_error(
            platform.post("/v1/auth/email-verification/confirm", json={"email": carol, "otp_code": wrong}),
            400,
            "invalid_otp",
        )
        assert_error(
            platform.post("/v1/auth/register/verify", json={"email": carol, "otp_code": wrong, "password": carol_pw}),
            400,
            "invalid_otp",
        )
        # The right code still works after the wrong ones; the registration succeeds once.
        assert (
            platform.post(
                "/v1/auth/register/verify", json={"email": carol, "otp_code": code, "password": carol_pw}
            ).status_code
            == 201
        )

        # an e-mail already registered → 409 conflict after a verified code (both routes, any letter case); without
        # one, 400 email_not_verified as for an e-mail without an account
        assert platform.post("/v1/auth/email-verification/request", json={"email": carol}).status_code == 202
        again = latest_code(local_only, carol, count=2)
        assert_error(
            platform.post(
                "/v1/auth/register/verify", json={"email": carol.upper(), "otp_code": again, "password": carol_pw}
            ),
            409,
            "conflict",
        )
        plain = {"email": carol, "password": carol_pw}
        assert_error(platform.post("/v1/auth/register", json=plain), 400, "email_not_verified")
        assert platform.post("/v1/auth/email-verification/request", json={"email": carol}).status_code == 202
        confirm = {"email": carol, "otp_code": latest_code(local_only, carol, count=3)}
        assert platform.post("/v1/auth/email-verification/confirm", json=confirm).status_code == 200
        assert_error(platform.post("/v1/auth/register", json=plain), 409, "conflict")

        # wrong credentials → 401 in the envelope, the same for an unknown e-mail
        assert_error(
            platform.post("/v1/auth/login", json={"email": carol, "password": "not-the-password"}),
            401,
            "unauthenticated",
        )
        assert_error(
            platform.post("/v1/auth/login", json={"email": unique_email("nobody"), "password": carol_pw}),
            401,
            "unauthenticated",
        )
        assert login(platform, carol, carol_pw)["user"]["email"] == carol

    # The pre-session routes take the platform key: without any credential they are 401.
    with local_only.client(auth=False) as anonymous:
        assert_error(
            anonymous.post("/v1/auth/email-verification/request", json={"email": carol}), 401, "unauthenticated"
        )
        assert_error(
            anonymous.post("/v1/auth/login", json={"email": carol, "password": carol_pw}), 401, "unauthenticated"
        )
