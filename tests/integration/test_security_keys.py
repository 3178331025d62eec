"""Tenant safety of credentials (CONVENTIONS "Tenant safety and data lifecycle"), each rule written as the attack it
stops: idempotency records belong to their principal, an API key acts with at most its creator's current role,
weak passwords are refused, and an invitation is accepted only with its token."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.support import Api, invitation_token


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
