"""Tenant safety of credentials over HTTP against the local stack: an invitation accepted with the token of its
e-mailed link (fragment), an admin who cannot replay the owner's key creation, and a removed member whose keys stop at
once."""

from __future__ import annotations

import re
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.e2e.conftest import Stack
from tests.e2e.test_account_flow import assert_error, latest_code, login, mails, session_client, unique_email

pytestmark = pytest.mark.e2e


def test_a_removed_admin_keeps_nothing(local_only: Stack):
    bob, bob_pw = unique_email("bob-keys"), "bob keeps nothing 7"
    with local_only.client() as owner:
        invitation = owner.post("/v1/invitations", json={"email": bob, "role": "admin"})
        assert invitation.status_code == 201, invitation.text
        link = re.search(r"https?://\S+/accept#token=[A-Za-z0-9_-]+", mails(local_only, bob)[0]["text"])
        assert link, mails(local_only, bob)[0]["text"]
        url = urlsplit(link.group(0))
        token = parse_qs(url.fragment)["token"][0]

        assert owner.post("/v1/auth/email-verification/request", json={"email": bob}).status_code == 202
        weak = {"email": bob, "otp_code": latest_code(local_only, bob, count=2), "password": "password"}
        assert_error(owner.post("/v1/auth/register/verify", json=weak), 400, "validation_failed")
        registered = owner.post("/v1/auth/register/verify", json={**weak, "password": bob_pw})
        assert registered.status_code == 201, registered.text
        bob_id = registered.json()["data"]["id"]
        session = login(owner, bob, bob_pw)

        idem = {"Idempotency-Key": f"owner-key-{uuid.uuid4().hex}"}
        body = {"name": "owner's", "role": "owner"}
        owners_key = owner.post("/v1/api-keys", json=body, headers=idem)
        assert owners_key.status_code == 201, owners_key.text

    with session_client(local_only, session["token"]) as bob_client:
        assert_error(bob_client.post(url.path, json={}), 400, "validation_failed")
        assert bob_client.post(url.path, json={"token": token}).status_code == 200
        replay = bob_client.post("/v1/api-keys", json=body, headers=idem)
        assert_error(replay, 409, "idempotency_key_reused")
        assert owners_key.json()["data"]["key"] not in replay.text
        created = bob_client.post("/v1/api-keys", json={"name": "bob's", "role": "admin"})
        assert created.status_code == 201, created.text
        bob_key = created.json()["data"]["key"]

    with local_only.client(bob_key) as as_key:
        assert as_key.get("/v1/contacts").status_code == 200
        with local_only.client() as owner:
            assert owner.delete(f"/v1/members/{bob_id}").status_code == 204
        assert_error(as_key.get("/v1/contacts"), 401, "unauthenticated")
        assert_error(as_key.post("/v1/api-keys", json={"name": "again", "role": "admin"}), 401, "unauthenticated")
