"""Account flows of CONVENTIONS, through the gateway emulation in-process (authorizer + handlers + moto)."""

from __future__ import annotations

import pytest

from switchboard import clock
from tests.integration.support import PASSWORD, Api, invitation_token, latest_code


def test_register_in_two_steps_then_login_and_create_an_organization(api: Api):
    email = "ada@example.com"
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    code = latest_code(api, email)
    assert api.post("/v1/auth/email-verification/confirm", json={"email": email, "otp_code": code}).status_code == 200
    resp = api.post("/v1/auth/register", json={"email": email, "password": PASSWORD, "name": "Ada King Lovelace"})
    assert resp.status_code == 201, resp.text
    user = resp.json()["data"]
    assert user["email"] == email and user["email_verified"] is True
    assert (user["first_name"], user["last_name"]) == ("Ada", "King Lovelace")
    expected = {
        "id",
        "email",
        "email_verified",
        "name",
        "first_name",
        "last_name",
        "image",
        "timezone",
        "week_start",
        "created_at",
    }
    assert set(user) == expected
    assert "password" not in resp.text and "password_hash" not in resp.text

    # The verification is used up: a second registration without a new proof is refused as unverified (the same
    # answer as for an e-mail without an account); with a new verified code it is a duplicate.
    again = api.post("/v1/auth/register", json={"email": email, "password": PASSWORD})
    api.assert_error(again, 400, "email_not_verified")
    api.post("/v1/auth/email-verification/request", json={"email": email})
    confirm = {"email": email, "otp_code": latest_code(api, email)}
    assert api.post("/v1/auth/email-verification/confirm", json=confirm).status_code == 200
    api.assert_error(api.post("/v1/auth/register", json={"email": email, "password": PASSWORD}), 409, "conflict")

    login = api.post("/v1/auth/login", json={"email": email, "password": PASSWORD})
    assert login.status_code == 200, login.text
    token = login.json()["data"]["token"]
    assert login.json()["data"]["user"]["id"] == user["id"]
    session = {"Authorization": f"Bearer {token}"}

    # No organization yet: org routes are forbidden, creating one works and makes the user its owner.
    api.assert_error(api.get("/v1/organization", headers=session), 403, "forbidden")
    created = api.post("/v1/organizations", json={"name": "Analytical Engines"}, headers=session)
    assert created.status_code == 201, created.text
    org_id = created.json()["data"]["id"]
    org = api.get("/v1/organization", headers=session)
    assert org.json()["data"]["id"] == org_id
    members = api.get("/v1/members", headers=session).json()
    assert [m["role"] for m in members["data"]] == ["owner"]
    assert members["meta"] == {"has_more": False, "limit": 50, "offset": 0, "total": 1}
    assert api.get("/v1/organizations", headers=session).json()["data"][0]["role"] == "owner"


def test_register_verify_in_one_step(api: Api):
    email = "grace@example.com"
    api.post("/v1/auth/email-verification/request", json={"email": email})
    code = latest_code(api, email)
    resp = api.post("/v1/auth/register/verify", json={"email": email, "otp_code": code, "password": PASSWORD})
    assert resp.status_code == 201, resp.text
    assert resp.json()["data"]["name"] == ""


def test_registration_rules(api: Api):
    api.assert_error(api.post("/v1/auth/register", json={"email": "", "password": "short"}), 400, "validation_failed")
    err = api.assert_error(
        api.post("/v1/auth/register", json={"email": "x@y.z", "password": "short"}), 400, "validation_failed"
    )
    assert {"field": "body.password", "message": "String should have at least 8 characters"} in err["details"]
    bad_code = api.post(
        "/v1/auth/register/verify", json={"email": "x@example.com", "otp_code": "12345", "password": PASSWORD}
    )
    assert any(d["field"] == "body.otp_code" for d in api.assert_error(bad_code, 400, "validation_failed")["details"])
    unverified = api.post("/v1/auth/register", json={"email": "nobody@example.com", "password": PASSWORD})
    api.assert_error(unverified, 400, "email_not_verified")
    wrong = api.post(
        "/v1/auth/register/verify", json={"email": "nobody@example.com", "otp_code": "000000", "password": PASSWORD}
    )
    api.assert_error(wrong, 400, "invalid_otp")


def test_wrong_codes_slow_down_and_bursts_get_429(api: Api, monkeypatch: pytest.MonkeyPatch):
    email = "eve@example.com"
    now = clock.epoch_now()
    monkeypatch.setattr(clock, "epoch_now", lambda: now)  # one instant: the delay after the fifth failure runs
    api.post("/v1/auth/email-verification/request", json={"email": email})
    code = latest_code(api, email)
    wrong = "000000" if code != "000000" else "111111"
    statuses = [
        api.post("/v1/auth/email-verification/confirm", json={"email": email, "otp_code": wrong}).status_code
        for _ in range(5)
    ]
    assert statuses == [400] * 5
    burst = api.post("/v1/auth/email-verification/confirm", json={"email": email, "otp_code": code})
    api.assert_error(burst, 429, "rate_limited")
    assert int(burst.headers["Retry-After"]) >= 1


def test_wrong_password_bursts_are_bounded(api: Api):
    email, _ = api.register("mallory@example.com", PASSWORD)
    codes = [
        api.post("/v1/auth/login", json={"email": email, "password": "wrong-password"}).status_code for _ in range(5)
    ]
    assert codes == [401] * 5
    refused = api.post("/v1/auth/login", json={"email": email, "password": PASSWORD})
    api.assert_error(refused, 429, "rate_limited")
    assert int(refused.headers["Retry-After"]) > 0


def test_logout_and_session_management(api: Api):
    email, _ = api.register("lin@example.com", PASSWORD)
    first = api.login(email, PASSWORD)
    second = api.login(email, PASSWORD)
    listed = api.get("/v1/settings/sessions", headers=first).json()["data"]
    assert len(listed) == 2 and sum(s["current"] for s in listed) == 1
    other = next(s for s in listed if not s["current"])
    assert api.delete(f"/v1/settings/sessions/{other['id']}", headers=first).status_code == 204
    api.assert_error(api.get("/v1/auth/me", headers=second), 401, "unauthenticated")
    assert api.post("/v1/auth/logout", headers=first).status_code == 204
    api.assert_error(api.get("/v1/auth/me", headers=first), 401, "unauthenticated")


def test_password_reset_ends_every_session(api: Api):
    email, _ = api.register("sam@example.com", PASSWORD)
    session = api.login(email, PASSWORD)
    assert api.post("/v1/auth/password/reset", json={"email": email}).status_code == 202
    assert api.post("/v1/auth/password/reset", json={"email": "unknown@example.com"}).status_code == 202
    code = latest_code(api, email)
    done = api.post("/v1/auth/password/confirm", json={"email": email, "otp_code": code, "password": "new password 1"})
    assert done.status_code == 200, done.text
    assert done.json()["data"]["sessions_ended"] == 1
    api.assert_error(api.get("/v1/auth/me", headers=session), 401, "unauthenticated")
    api.assert_error(api.post("/v1/auth/login", json={"email": email, "password": PASSWORD}), 401, "unauthenticated")
    assert api.post("/v1/auth/login", json={"email": email, "password": "new password 1"}).status_code == 200


def test_me_preferences_presence_onboarding_fingerprint(api: Api):
    email, _ = api.register("joan@example.com", PASSWORD)
    s = api.login(email, PASSWORD)
    patched = api.patch("/v1/auth/me", json={"name": "Joan Clarke", "timezone": "Europe/London"}, headers=s)
    assert patched.json()["data"]["timezone"] == "Europe/London"
    api.assert_error(api.patch("/v1/auth/me", json={"timezone": "Mars/Base"}, headers=s), 400, "validation_failed")
    assert api.get("/v1/users/me/profile", headers=s).json()["data"]["last_name"] == "Clarke"
    prefs = {"preferences": {"theme": "dark", "compact": True}}
    assert api.put("/v1/auth/me/preferences", json=prefs, headers=s).status_code == 200
    assert api.get("/v1/auth/me/preferences", headers=s).json()["data"] == prefs
    assert api.get("/v1/auth/me/presence", headers=s).json()["data"]["status"] == "offline"
    api.put("/v1/auth/me/presence", json={"status": "busy", "message": "deep work"}, headers=s)
    assert api.get("/v1/auth/me/presence", headers=s).json()["data"]["status"] == "busy"
    step = api.post("/v1/auth/onboarding", json={"step": "profile"}, headers=s).json()["data"]
    assert step["completed_steps"] == ["profile"] and step["completed"] is False
    fp = api.post("/v1/auth/fingerprint-events", json={"telemetry_id": "dev-1", "event_type": "app_open"}, headers=s)
    assert fp.status_code == 202 and fp.json()["data"]["id"].startswith("fpe_")
    # API keys have no "me".
    api.assert_error(api.get("/v1/auth/me", headers=api.owner_headers), 403, "forbidden")


def test_invitation_flow_and_member_management(api: Api):
    owner_email, _ = api.register("owner2@example.com", PASSWORD)
    owner = api.login(owner_email, PASSWORD)
    org_id = api.post("/v1/organizations", json={"name": "Org Two"}, headers=owner).json()["data"]["id"]
    invited_email, invited_id = api.register("bob@example.com", PASSWORD)
    inv = api.post("/v1/invitations", json={"email": invited_email, "role": "admin"}, headers=owner)
    assert inv.status_code == 201, inv.text
    invitation = inv.json()["data"]
    assert invitation["status"] == "pending" and invitation["organization_id"] == org_id
    mail = api.mail(invited_email)[0]
    assert invitation["id"] in mail["text"]
    bob = api.login(invited_email, PASSWORD)
    # Someone else cannot accept it.
    eve_email, _ = api.register("eve2@example.com", PASSWORD)
    eve = api.login(eve_email, PASSWORD)
    token = {"token": invitation_token(api, invited_email)}
    api.assert_error(api.post(f"/v1/invitations/{invitation['id']}/accept", json=token, headers=eve), 404, "not_found")
    accepted = api.post(f"/v1/invitations/{invitation['id']}/accept", json=token, headers=bob)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["data"]["status"] == "accepted"
    api.assert_error(api.post(f"/v1/invitations/{invitation['id']}/accept", json=token, headers=bob), 409, "conflict")
    roles = {m["user_email"]: m["role"] for m in api.get("/v1/members", headers=owner).json()["data"]}
    assert roles == {owner_email: "owner", invited_email: "admin"}

    # An admin cannot promote to owner or touch the owner; the last owner can never be removed or demoted.
    bob_org = {**bob, "X-Organization-Id": org_id}
    owner_id = api.get("/v1/auth/me", headers=owner).json()["data"]["id"]
    api.assert_error(api.patch(f"/v1/members/{owner_id}", json={"role": "admin"}, headers=bob_org), 403, "forbidden")
    api.assert_error(api.patch(f"/v1/members/{owner_id}", json={"role": "admin"}, headers=owner), 409, "conflict")
    api.assert_error(api.delete(f"/v1/members/{owner_id}", headers=owner), 409, "conflict")
    promoted = api.patch(f"/v1/members/{invited_id}", json={"role": "owner"}, headers=owner)
    assert promoted.json()["data"]["role"] == "owner"
    assert api.patch(f"/v1/members/{owner_id}", json={"role": "viewer"}, headers=owner).status_code == 200
    assert api.delete(f"/v1/members/{owner_id}", headers=bob_org).status_code == 204
    assert [m["user_email"] for m in api.get("/v1/members", headers=bob_org).json()["data"]] == [invited_email]

    # Revoked invitations cannot be accepted.
    inv2 = api.post("/v1/invitations", json={"email": eve_email, "role": "viewer"}, headers=bob_org).json()["data"]
    assert api.delete(f"/v1/invitations/{inv2['id']}", headers=bob_org).status_code == 204
    assert api.get(f"/v1/invitations/{inv2['id']}", headers=bob_org).json()["data"]["status"] == "revoked"
    inv2_token = {"token": invitation_token(api, eve_email)}
    api.assert_error(api.post(f"/v1/invitations/{inv2['id']}/accept", json=inv2_token, headers=eve), 409, "conflict")


def test_api_keys_show_once_and_revocation_is_immediate(api: Api):
    created = api.post("/v1/api-keys", json={"name": "ci", "role": "member"}, headers=api.owner_headers)
    assert created.status_code == 201, created.text
    key = created.json()["data"]
    assert key["key"].startswith("sk_test_") and key["prefix"] == key["key"][:12]
    listed = api.get("/v1/api-keys", headers=api.owner_headers).json()["data"]
    assert key["id"] in {k["id"] for k in listed}
    assert all("key" not in k for k in listed)
    new_headers = {"X-Api-Key": key["key"]}
    assert api.get("/v1/organization", headers=new_headers).status_code == 200
    assert api.get("/v1/organization", headers={"Authorization": f"Bearer {key['key']}"}).status_code == 200
    # member may not manage keys, or mint a stronger one
    api.assert_error(api.get("/v1/api-keys", headers=new_headers), 403, "forbidden")
    assert api.delete(f"/v1/api-keys/{key['id']}", headers=api.owner_headers).status_code == 204
    api.assert_error(api.get("/v1/organization", headers=new_headers), 401, "unauthenticated")
    api.assert_error(api.delete(f"/v1/api-keys/{key['id']}", headers=api.owner_headers), 404, "not_found")


def test_audit_log_records_changes_and_paginates(api: Api):
    h = api.owner_headers
    for i in range(3):
        api.post("/v1/teams", json={"name": f"team {i}"}, headers=h)
    api.patch("/v1/organization", json={"name": "Renamed"}, headers=h)
    page = api.get("/v1/audit-logs", params={"limit": 2}, headers=h).json()
    assert len(page["data"]) == 2 and page["meta"]["has_more"] is True
    assert page["data"][0]["action"] == "organization.updated"
    assert page["data"][0]["before"] == {"name": "Local Organization"} or page["data"][0]["before"]["name"]
    nxt = api.get("/v1/audit-logs", params={"limit": 2, "cursor": page["meta"]["cursor"]}, headers=h).json()
    assert {e["id"] for e in nxt["data"]}.isdisjoint({e["id"] for e in page["data"]})
    teams = api.get("/v1/audit-logs", params={"action": "team.created"}, headers=h).json()["data"]
    assert len(teams) == 3 and all(e["actor_type"] == "api_key" for e in teams)
    tampered = page["meta"]["cursor"][:-3] + "AAA"
    api.assert_error(api.get("/v1/audit-logs", params={"cursor": tampered}, headers=h), 400, "validation_failed")
    other_query = api.get("/v1/audit-logs", params={"cursor": page["meta"]["cursor"], "action": "x"}, headers=h)
    api.assert_error(other_query, 400, "validation_failed")
    # Found by the contract fuzzer: a time bound matching the documented pattern but not a date was a 500.
    for bad in ({"since": "1316-25-64T"}, {"until": "4707-82-04T10:00"}):
        err = api.assert_error(api.get("/v1/audit-logs", params=bad, headers=h), 400, "validation_failed")
        assert err["details"][0]["field"] == f"query.{next(iter(bad))}"


def test_security_settings_restrict_api_keys_by_ip(api: Api):
    h = api.owner_headers
    key = api.post("/v1/api-keys", json={"name": "ip", "role": "viewer"}, headers=h).json()["data"]["key"]
    bad = api.patch("/v1/settings/security", json={"api_key_allowed_cidrs": ["not-an-ip"]}, headers=h)
    api.assert_error(bad, 400, "validation_failed")
    # An API key may not lock itself out; an owner session may set any range.
    api.assert_error(
        api.patch("/v1/settings/security", json={"api_key_allowed_cidrs": ["10.0.0.0/8"]}, headers=h), 409, "conflict"
    )
    owner = api.login("owner@example.com")
    ok = api.patch("/v1/settings/security", json={"api_key_allowed_cidrs": ["10.0.0.0/8"]}, headers=owner)
    assert ok.json()["data"]["api_key_allowed_cidrs"] == ["10.0.0.0/8"]
    api.assert_error(api.get("/v1/organization", headers={"X-Api-Key": key}), 401, "unauthenticated")
    api.assert_error(api.get("/v1/organization", headers=h), 401, "unauthenticated")
    new_key = api.post("/v1/api-keys", json={"name": "ip2", "role": "viewer"}, headers=owner).json()["data"]["key"]
    api.assert_error(api.get("/v1/organization", headers={"X-Api-Key": new_key}), 401, "unauthenticated")
    api.patch("/v1/settings/security", json={"api_key_allowed_cidrs": []}, headers=owner)
    assert api.get("/v1/organization", headers={"X-Api-Key": key}).status_code == 200
    assert api.get("/v1/organization", headers={"X-Api-Key": new_key}).status_code == 200


def test_session_idle_timeout_applies_per_organization(api: Api):
    owner = api.login("owner@example.com")
    resp = api.patch("/v1/settings/security", json={"session_idle_timeout_minutes": 5}, headers=owner)
    assert resp.json()["data"]["session_idle_timeout_minutes"] == 5
    assert api.get("/v1/organization", headers=owner).status_code == 200
    api.assert_error(
        api.patch("/v1/settings/security", json={"session_idle_timeout_minutes": 1}, headers=owner),
        400,
        "validation_failed",
    )


def test_teams(api: Api):
    h = api.owner_headers
    team = api.post("/v1/teams", json={"name": "Support"}, headers=h).json()["data"]
    api.assert_error(api.post("/v1/teams", json={"name": "support"}, headers=h), 409, "conflict")
    owner_id = api.get("/v1/members", headers=h).json()["data"][0]["user_id"]
    added = api.post(f"/v1/teams/{team['id']}/members", json={"user_id": owner_id}, headers=h)
    assert added.status_code == 201, added.text
    api.assert_error(
        api.post(f"/v1/teams/{team['id']}/members", json={"user_id": owner_id}, headers=h), 409, "conflict"
    )
    api.assert_error(
        api.post(f"/v1/teams/{team['id']}/members", json={"user_id": "usr_nobody"}, headers=h), 404, "not_found"
    )
    assert api.get(f"/v1/teams/{team['id']}", headers=h).json()["data"]["member_count"] == 1
    renamed = api.patch(f"/v1/teams/{team['id']}", json={"name": "Care"}, headers=h).json()["data"]
    assert renamed["name"] == "Care"
    # a null name changes nothing (found by fuzzing: it used to build an empty SET and answer 500)
    same = api.patch(f"/v1/teams/{team['id']}", json={"name": None}, headers=h)
    assert same.status_code == 200 and same.json()["data"]["name"] == "Care"
    described = api.patch(f"/v1/teams/{team['id']}", json={"name": None, "description": "Tier 1"}, headers=h)
    assert described.json()["data"]["name"] == "Care" and described.json()["data"]["description"] == "Tier 1"
    cleared = api.patch(f"/v1/teams/{team['id']}", json={"description": None}, headers=h).json()["data"]
    assert cleared["description"] is None and cleared["name"] == "Care"
    assert api.post("/v1/teams", json={"name": "Support"}, headers=h).status_code == 201  # old name is free again
    assert api.delete(f"/v1/teams/{team['id']}/members/{owner_id}", headers=h).status_code == 204
    assert api.delete(f"/v1/teams/{team['id']}", headers=h).status_code == 204
    api.assert_error(api.get(f"/v1/teams/{team['id']}", headers=h), 404, "not_found")


def test_users_area(api: Api):
    email, _ = api.register("kay@example.com", PASSWORD)
    s = api.login(email, PASSWORD)
    other_email, other_id = api.register("lee@example.com", PASSWORD)
    ticket = api.post("/v1/users/me/avatar", json={"content_type": "image/png", "size": 1024}, headers=s).json()
    assert ticket["data"]["upload_url"].startswith("http") and ticket["data"]["method"] == "PUT"
    api.assert_error(
        api.post("/v1/users/me/avatar", json={"content_type": "image/gif", "size": 1}, headers=s),
        400,
        "validation_failed",
    )
    assert api.get("/v1/users/me/avatar", headers=s).json()["data"]["url"].startswith("http")
    assert api.put("/v1/users/me/privacy", json={"last_seen": "nobody"}, headers=s).status_code == 200
    assert api.get("/v1/users/me/privacy", headers=s).json()["data"]["last_seen"] == "nobody"
    blocked = api.post("/v1/users/me/blocks", json={"user_ref": other_email}, headers=s)
    assert blocked.status_code == 201 and blocked.json()["data"]["user_id"] == other_id
    api.assert_error(api.post("/v1/users/me/blocks", json={"user_ref": other_id}, headers=s), 409, "conflict")
    assert [b["user_id"] for b in api.get("/v1/users/me/blocklist", headers=s).json()["data"]] == [other_id]
    assert api.delete(f"/v1/users/me/blocks/{other_id}", headers=s).status_code == 204
    assert api.get("/v1/users/me/blocks", headers=s).json()["data"] == []
    assert api.get("/v1/users/me/contacts", headers=s).json()["data"] == []
    # Lookup by e-mail sees the caller's organization only: lee has an account but is no member of it.
    found = api.post("/v1/users/lookup/info", json={"email": other_email}, headers=api.owner_headers).json()["data"]
    assert found == {"exists": False, "user_id": None, "name": None, "image": None}
    owner = api.post("/v1/users/lookup/info", json={"email": "owner@example.com"}, headers=api.owner_headers)
    assert owner.json()["data"]["exists"] is True and owner.json()["data"]["user_id"] == api.boot.user_id
    nobody = api.post("/v1/users/lookup/check", json={"email": "none@example.com"}, headers=api.owner_headers)
    assert nobody.json()["data"] == {"exists": False}
    api.assert_error(
        api.post("/v1/users/lookup/check", json={"phone": "+15550100"}, headers=api.owner_headers),
        400,
        "validation_failed",
    )


@pytest.mark.parametrize("header", ["X-Api-Key", "Authorization"])
def test_both_credential_headers_work_and_bad_ones_are_401(api: Api, header: str):
    value = api.owner_key if header == "X-Api-Key" else f"Bearer {api.owner_key}"
    assert api.get("/v1/organization", headers={header: value}).status_code == 200
    api.assert_error(api.get("/v1/organization", headers={header: value + "x"}), 401, "unauthenticated")
    api.assert_error(api.get("/v1/organization", headers={}), 401, "unauthenticated")


def test_phone_lookup_asks_the_channels_provider(api: Api):
    channel = api.post(
        "/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {"api_token": "long-secret-value-1234"}}
    ).json()["data"]
    found = api.post("/v1/users/lookup/info", json={"phone": "+1 415 555 2671", "channel_id": channel["id"]})
    assert found.status_code == 200, found.text
    assert found.json()["data"] == {"exists": True, "user_id": "14155552671", "name": "Sandbox 2671", "image": ""}
    check = api.post("/v1/users/lookup/check", json={"phone": "+14155552671", "channel_id": channel["id"]})
    assert check.json()["data"] == {"exists": True}
    # the sandbox answers "no account" for numbers ending in 0000
    absent = api.post("/v1/users/lookup/info", json={"phone": "+14155550000", "channel_id": channel["id"]})
    assert absent.json()["data"] == {"exists": False, "user_id": None, "name": None, "image": None}
    api.assert_error(
        api.post("/v1/users/lookup/check", json={"phone": "+14155552671", "channel_id": "ch_missing"}), 404, "not_found"
    )
    api.assert_error(
        api.post("/v1/users/lookup/check", json={"phone": "not a number", "channel_id": channel["id"]}),
        400,
        "validation_failed",
    )
