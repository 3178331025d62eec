"""Tenant safety of credentials (CONVENTIONS "Tenant safety and data lifecycle"), each rule written as the attack it
stops: idempotency records belong to their principal, an API key acts with at most its creator's current role,
weak passwords are refused, and an invitation is accepted only with its token."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from switchboard import clock
from switchboard.store import get_store
from tests.integration.support import PASSWORD, Api, invitation_token, latest_code


def _data(resp: httpx.Response, status: int = 200) -> Any:
    assert resp.status_code == status, resp.text
    return resp.json()["data"] if resp.content else None


def _join(api: Api, owner: dict[str, str], email: str, role: str) -> tuple[str, dict[str, str]]:
    """A registered user who accepted an invitation to the owner's organization with `role`: (user id, session)."""
    _, user_id = api.register(email)
    invitation = _data(api.post("/v1/invitations", json={"email": email, "role": role}, headers=owner), 201)
    session = api.login(email)
    token = invitation_token(api, email)
    _data(api.post(f"/v1/invitations/{invitation['id']}/accept", json={"token": token}, headers=session))
    return user_id, session


# 1. Idempotency records belong to the principal that made them --------------------------------------------------
def test_an_admin_cannot_replay_the_owners_key_creation_to_obtain_an_owner_key(api: Api):
    _, admin = _join(api, {"X-Api-Key": api.owner_key}, "admin-replay@example.com", "admin")
    body = {"name": "owner's key", "role": "owner"}
    idem = {"Idempotency-Key": "create-owner-key-1"}
    created = _data(api.post("/v1/api-keys", json=body, headers={**api.owner_headers, **idem}), 201)
    assert created["key"].startswith("sk_")

    stolen = api.post("/v1/api-keys", json=body, headers={**admin, **idem})
    api.assert_error(stolen, 409, "idempotency_key_reused")
    assert created["key"] not in stolen.text
    # An admin's own key with the same Idempotency-Key and a role the admin may grant is refused too: the key is the
    # owner's, and its answer says nothing about the owner's request.
    api.assert_error(
        api.post("/v1/api-keys", json={"name": "mine", "role": "admin"}, headers={**admin, **idem}),
        409,
        "idempotency_key_reused",
    )
    # The owner's own retry still replays the first answer.
    again = api.post("/v1/api-keys", json=body, headers={**api.owner_headers, **idem})
    assert again.status_code == 201 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["data"]["key"] == created["key"]


def test_a_users_sessions_share_their_idempotency_records(api: Api):
    _, first = _join(api, {"X-Api-Key": api.owner_key}, "two-sessions@example.com", "admin")
    second = api.login("two-sessions@example.com")
    idem = {"Idempotency-Key": "team-once"}
    team = _data(api.post("/v1/teams", json={"name": "Once"}, headers={**first, **idem}), 201)
    replay = api.post("/v1/teams", json={"name": "Once"}, headers={**second, **idem})
    assert replay.status_code == 201 and replay.json()["data"]["id"] == team["id"]


def test_a_demoted_caller_cannot_replay_a_response_its_role_no_longer_allows(api: Api):
    user_id, admin = _join(api, {"X-Api-Key": api.owner_key}, "demoted-replay@example.com", "admin")
    idem = {"Idempotency-Key": "key-before-demotion"}
    body = {"name": "admin key", "role": "admin"}
    _data(api.post("/v1/api-keys", json=body, headers={**admin, **idem}), 201)
    _data(api.patch(f"/v1/members/{user_id}", json={"role": "member"}))
    api.assert_error(api.post("/v1/api-keys", json=body, headers={**admin, **idem}), 403, "forbidden")


# 12. An invitation is accepted only with its token; the link carries it in the fragment --------------------------
def test_an_invitation_is_accepted_only_with_its_token_from_the_mailed_link(api: Api):
    email = "invitee-token@example.com"
    api.register(email)
    invitation = _data(api.post("/v1/invitations", json={"email": email, "role": "admin"}), 201)
    session = api.login(email)
    text = api.mail(email)[0]["text"]
    link = re.search(r"https?://\S+/v1/invitations/(\S+)/accept(\S*)", text)
    assert link and link.group(1) == invitation["id"], text
    assert link.group(2).startswith("#token="), link.group(0)  # never in the query: it would reach logs and proxies
    assert "?" not in link.group(0)
    token = link.group(2).removeprefix("#token=")
    path = f"/v1/invitations/{invitation['id']}/accept"

    # Without the token (no body, an empty body, or the token in the query) the invited user cannot join.
    api.assert_error(api.post(path, headers=session), 400, "validation_failed")
    missing = api.assert_error(api.post(path, json={}, headers=session), 400, "validation_failed")
    assert [d["field"] for d in missing["details"]] == ["body.token"]
    api.assert_error(api.post(path, params={"token": token}, json={}, headers=session), 400, "validation_failed")
    api.assert_error(api.post(path, json={"token": token[:-1] + "x"}, headers=session), 400, "validation_failed")
    assert api.get("/v1/organization", headers=session).status_code == 403  # still no organization
    assert _data(api.get(f"/v1/invitations/{invitation['id']}"))["status"] == "pending"

    accepted = _data(api.post(path, json={"token": token}, headers=session))
    assert accepted["status"] == "accepted"
    assert _data(api.get("/v1/organization", headers=session))["id"] == api.org_id


def test_the_invitation_token_is_stored_only_hashed(api: Api):
    from switchboard.store import get_store

    email = "invitee-hash@example.com"
    invitation = _data(api.post("/v1/invitations", json={"email": email, "role": "viewer"}), 201)
    token = invitation_token(api, email)
    items = get_store().query_all(f"ORG#{api.org_id}", sk_prefix=f"INVITE#{invitation['id']}")
    assert items and all(token not in str(item) for item in items)


# 11. Weak passwords are refused on every route that sets one ------------------------------------------------------
WEAK = ["aaaaaaaa", "password", "12345678", "PASSWORD1", "abcdefgh", "87654321", "abababab", "qwertyuiop"]


@pytest.mark.parametrize("password", WEAK)
def test_register_verify_refuses_a_weak_password(api: Api, password: str):
    email = "weak-verify@example.com"
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    body = {"email": email, "otp_code": latest_code(api, email), "password": password}
    error = api.assert_error(api.post("/v1/auth/register/verify", json=body), 400, "validation_failed")
    assert [d["field"] for d in error["details"]] == ["body.password"]
    assert "password" in error["message"].lower()
    # The code was not used up by the refusal: a strong password registers with it.
    assert api.post("/v1/auth/register/verify", json={**body, "password": PASSWORD}).status_code == 201


def test_the_email_is_not_a_password_and_every_password_route_applies_the_rules(api: Api):
    email = "Same.As.Mail@example.com"
    assert api.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
    code = latest_code(api, email.lower())
    for password in (email, email.lower(), "same.as.mail"):
        body = {"email": email, "otp_code": code, "password": password}
        error = api.assert_error(api.post("/v1/auth/register/verify", json=body), 400, "validation_failed")
        assert "e-mail" in error["details"][0]["message"]
    assert api.post("/v1/auth/email-verification/confirm", json={"email": email, "otp_code": code}).status_code == 200
    for password in ("password", email):
        api.assert_error(
            api.post("/v1/auth/register", json={"email": email, "password": password}), 400, "validation_failed"
        )
    assert api.post("/v1/auth/register", json={"email": email, "password": PASSWORD}).status_code == 201

    assert api.post("/v1/auth/password/reset", json={"email": email}).status_code == 202
    reset_code = latest_code(api, email.lower())
    for password in ("11111111", "12345678", email):
        body = {"email": email, "otp_code": reset_code, "password": password}
        api.assert_error(api.post("/v1/auth/password/confirm", json=body), 400, "validation_failed")
    confirm = {"email": email, "otp_code": reset_code, "password": "a much better passphrase"}
    assert api.post("/v1/auth/password/confirm", json=confirm).status_code == 200
    api.login(email, "a much better passphrase")


# 2. An API key acts with at most its creator's current role ------------------------------------------------------
def _key(api: Api, headers: dict[str, str], role: str, name: str = "k") -> dict[str, str]:
    created = _data(api.post("/v1/api-keys", json={"name": name, "role": role}, headers=headers), 201)
    return {"X-Api-Key": created["key"], "id": created["id"]}


def _h(key: dict[str, str]) -> dict[str, str]:
    return {"X-Api-Key": key["X-Api-Key"]}


def test_a_removed_members_keys_stop_at_once(api: Api):
    user_id, admin = _join(api, {"X-Api-Key": api.owner_key}, "leaver@example.com", "admin")
    admin_key = _key(api, admin, "admin", "leaver's key")
    # A key minted by that key belongs to the same person: it goes too.
    minted = _key(api, _h(admin_key), "member", "minted by the key")
    assert api.get("/v1/contacts", headers=_h(admin_key)).status_code == 200
    assert api.get("/v1/contacts", headers=_h(minted)).status_code == 200

    assert api.delete(f"/v1/members/{user_id}").status_code == 204

    for key in (admin_key, minted):
        api.assert_error(api.get("/v1/contacts", headers=_h(key)), 401, "unauthenticated")
        api.assert_error(
            api.post("/v1/api-keys", json={"name": "again", "role": "admin"}, headers=_h(key)), 401, "unauthenticated"
        )
    listed = {k["id"] for k in _data(api.get("/v1/api-keys"))}
    assert admin_key["id"] not in listed and minted["id"] not in listed
    # The owner's own key is untouched.
    assert api.get("/v1/contacts").status_code == 200


def test_a_member_who_leaves_loses_their_keys_too(api: Api):
    user_id, admin = _join(api, {"X-Api-Key": api.owner_key}, "quitter@example.com", "admin")
    key = _key(api, admin, "admin")
    assert api.delete(f"/v1/members/{user_id}", headers={**admin, "X-Organization-Id": api.org_id}).status_code == 204
    api.assert_error(api.get("/v1/contacts", headers=_h(key)), 401, "unauthenticated")


def test_a_demoted_members_keys_act_with_the_new_role_from_the_next_request(api: Api):
    user_id, admin = _join(api, {"X-Api-Key": api.owner_key}, "demoted@example.com", "admin")
    key = _key(api, admin, "admin")
    contact = {"name": "Before", "email": "before@example.com"}
    _data(api.post("/v1/contacts", json=contact, headers=_h(key)), 201)

    _data(api.patch(f"/v1/members/{user_id}", json={"role": "viewer"}))
    # Reads the viewer role allows keep working; writes above it are 403, minting keys included.
    assert api.get("/v1/contacts", headers=_h(key)).status_code == 200
    api.assert_error(
        api.post("/v1/contacts", json={"name": "After", "email": "after@example.com"}, headers=_h(key)),
        403,
        "forbidden",
    )
    for role in ("admin", "viewer"):
        api.assert_error(api.post("/v1/api-keys", json={"name": "n", "role": role}, headers=_h(key)), 403, "forbidden")
    api.assert_error(api.delete(f"/v1/api-keys/{key['id']}", headers=_h(key)), 403, "forbidden")
    me = _data(api.get("/v1/organizations", headers=_h(key)))
    assert [o["role"] for o in me] == ["viewer"]

    # Promoted to member: the key acts as a member (still capped below its own admin role).
    _data(api.patch(f"/v1/members/{user_id}", json={"role": "member"}))
    _data(api.post("/v1/contacts", json={"name": "Member", "email": "m@example.com"}, headers=_h(key)), 201)
    api.assert_error(api.post("/v1/api-keys", json={"name": "n", "role": "member"}, headers=_h(key)), 403, "forbidden")
    # Back to admin: the key's own role is the ceiling again.
    _data(api.patch(f"/v1/members/{user_id}", json={"role": "admin"}))
    _key(api, _h(key), "admin", "admin again")


def test_a_key_never_acts_above_its_own_role_when_its_creator_is_promoted(api: Api):
    user_id, member = _join(api, {"X-Api-Key": api.owner_key}, "promoted@example.com", "admin")
    key = _key(api, member, "member")
    _data(api.patch(f"/v1/members/{user_id}", json={"role": "owner"}))
    api.assert_error(api.post("/v1/api-keys", json={"name": "n", "role": "member"}, headers=_h(key)), 403, "forbidden")
    assert [o["role"] for o in _data(api.get("/v1/organizations", headers=_h(key)))] == ["member"]


def test_a_member_holds_a_bounded_number_of_keys(api: Api):
    from switchboard.identity.apikeys import MAX_KEYS_PER_MEMBER

    _, admin = _join(api, {"X-Api-Key": api.owner_key}, "hoarder@example.com", "admin")
    made = [_key(api, admin, "viewer", f"k{i}") for i in range(MAX_KEYS_PER_MEMBER)]
    error = api.assert_error(
        api.post("/v1/api-keys", json={"name": "one more", "role": "viewer"}, headers=admin), 409, "conflict"
    )
    assert str(MAX_KEYS_PER_MEMBER) in error["message"]
    # Revoking one frees its place.
    assert api.delete(f"/v1/api-keys/{made[0]['id']}", headers=admin).status_code == 204
    _key(api, admin, "viewer", "replacement")


def test_last_used_at_is_kept_at_most_once_a_minute(api: Api, monkeypatch: pytest.MonkeyPatch):
    from datetime import timedelta

    key = _key(api, api.owner_headers, "viewer")
    assert _data(api.get(f"/v1/api-keys/{key['id']}"))["last_used_at"] is None
    assert api.get("/v1/organization", headers=_h(key)).status_code == 200
    first = _data(api.get(f"/v1/api-keys/{key['id']}"))["last_used_at"]
    assert first is not None
    assert api.get("/v1/organization", headers=_h(key)).status_code == 200
    assert _data(api.get(f"/v1/api-keys/{key['id']}"))["last_used_at"] == first  # within the minute: not written

    later = clock.now() + timedelta(seconds=61)
    monkeypatch.setattr(clock, "now", lambda: later)
    assert api.get("/v1/organization", headers=_h(key)).status_code == 200
    assert _data(api.get(f"/v1/api-keys/{key['id']}"))["last_used_at"] == clock.iso(later)


def test_removing_a_member_never_misses_a_key_created_meanwhile(api: Api, monkeypatch: pytest.MonkeyPatch):
    from switchboard.identity import organizations

    user_id, admin = _join(api, {"X-Api-Key": api.owner_key}, "racer@example.com", "admin")
    first = _key(api, admin, "admin", "first")
    read = organizations._get_member
    stale = read(get_store(), api.org_id, user_id)  # the removal's read, before the second key exists
    second = _key(api, admin, "admin", "second")

    monkeypatch.setattr(organizations, "_get_member", lambda *_: stale)
    api.assert_error(api.delete(f"/v1/members/{user_id}"), 409, "conflict")
    assert api.get("/v1/contacts", headers=_h(second)).status_code == 200  # nothing was half-done
    monkeypatch.setattr(organizations, "_get_member", read)
    assert api.delete(f"/v1/members/{user_id}").status_code == 204
    for key in (first, second):
        api.assert_error(api.get("/v1/contacts", headers=_h(key)), 401, "unauthenticated")


def test_a_key_written_before_creator_role_follows_its_creators_membership(api: Api):
    from switchboard.identity.credentials import hash_token
    from switchboard.store import keys

    store = get_store()
    user_id, admin = _join(api, {"X-Api-Key": api.owner_key}, "old-key@example.com", "admin")
    key = _key(api, admin, "admin")
    # As such a key was stored: no `creator_role` on its credential, not listed on its creator's member row.
    store.update(keys.credential(hash_token(key["X-Api-Key"])), "REMOVE creator_role")
    store.update(keys.member(api.org_id, user_id), "REMOVE api_keys, keys_version")

    _data(api.patch(f"/v1/members/{user_id}", json={"role": "viewer"}))
    assert api.get("/v1/contacts", headers=_h(key)).status_code == 200
    api.assert_error(
        api.post("/v1/contacts", json={"name": "No", "email": "no@example.com"}, headers=_h(key)), 403, "forbidden"
    )
    assert api.delete(f"/v1/members/{user_id}").status_code == 204
    api.assert_error(api.get("/v1/contacts", headers=_h(key)), 401, "unauthenticated")
