"""Who is calling: the credential of a request → organization, principal and role (used by the authorizer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchboard import clock
from switchboard.access import ROLE_RANK, AuthContext
from switchboard.errors import Unauthenticated
from switchboard.identity import repository, sessions
from switchboard.identity.credentials import credential_of, hash_token
from switchboard.identity.security import ip_allowed, session_idle
from switchboard.store import Store


def authenticate(store: Store, headers: Mapping[str, str] | None, source_ip: str | None = None) -> AuthContext:
    headers = dict(headers or {})
    found = credential_of(headers)
    if not found:
        raise Unauthenticated("Send an API key in X-Api-Key or a token in Authorization: Bearer.")
    token, carrier = found
    cred = repository.get_credential(store, hash_token(token))
    if cred is None:
        raise Unauthenticated("The credential is unknown, revoked or expired.")
    if carrier == "x-api-key" and cred["kind"] != "api_key":
        raise Unauthenticated("X-Api-Key carries API keys only; send a session token as Authorization: Bearer.")

    if cred["kind"] == "api_key":
        if cred.get("suspended"):  # its organization is pending deletion; a restore lifts it
            raise Unauthenticated("The credential is unknown, revoked or expired.")
        if not ip_allowed(source_ip, cred.get("allowed_cidrs")):
            raise Unauthenticated("This API key may not be used from this IP address.")
        key_role = effective_key_role(store, cred)
        repository.touch_api_key(store, cred)
        return AuthContext(
            principal_type="api_key",
            principal_id=cred["credential_id"],
            user_id=cred.get("user_id"),
            organization_id=cred["organization_id"],
            role=key_role,
            credential_id=cred["credential_id"],
        )

    if cred["kind"] == "session":
        if int(cred.get("expires_at", 0)) <= clock.epoch(clock.now()):
            raise Unauthenticated("The session has expired; log in again.")
        user_id = cred["user_id"]
        org_id, role, idle_timeout, org_status = _session_organization(store, user_id, headers)
        if session_idle(cred, idle_timeout):
            raise Unauthenticated("The session was idle too long for this organization; log in again.")
        sessions.touch(store, cred)
        return AuthContext(
            principal_type="session",
            principal_id=cred["credential_id"],
            user_id=user_id,
            organization_id=org_id,
            role=role,
            credential_id=cred["credential_id"],
            org_status=org_status,
        )
    raise Unauthenticated("The credential is unknown, revoked or expired.")


def effective_key_role(store: Store, cred: dict[str, Any]) -> str:
    """An API key acts with at most its creator's current role (CONVENTIONS "Tenant safety and data lifecycle"): the
    lower of the key's role and `creator_role`, which the transaction changing the creator's role rewrites (and the
    one removing the creator deletes the credential). A key stored before credentials carried `creator_role` reads
    its creator's member row instead: gone → 401. A key without a creator has its own role."""
    role = str(cred["role"])
    creator = cred.get("user_id")
    if not creator:
        return role
    creator_role = cred.get("creator_role")
    if creator_role is None:
        member = repository.get_member(store, cred["organization_id"], creator)
        if member is None:
            raise Unauthenticated("The credential is unknown, revoked or expired.")
        creator_role = member["role"]
    return min(role, str(creator_role), key=lambda r: ROLE_RANK.get(r, 0))


def _session_organization(
    store: Store, user_id: str, headers: Mapping[str, str]
) -> tuple[str | None, str | None, int | None, str | None]:
    """The organization named by X-Organization-Id, else the user's only one; none when ambiguous or absent. The
    membership row carries the organization's `org_status` while it is pending deletion (no extra read)."""
    wanted = next((v for k, v in headers.items() if k.lower() == "x-organization-id"), None)
    if wanted:
        member = repository.get_member(store, wanted.strip(), user_id)
        if member is None:
            # Not a member: act with no organization, so org routes answer 403/404 and never another tenant's data.
            return None, None, None, None
        return (
            member["organization_id"],
            member["role"],
            member.get("session_idle_timeout_minutes"),
            member.get("org_status"),
        )
    memberships = repository.user_memberships(store, user_id, limit=2)
    if len(memberships) == 1:
        only = memberships[0]
        return (
            only["organization_id"],
            only["role"],
            only.get("session_idle_timeout_minutes"),
            only.get("org_status"),
        )
    return None, None, None, None
