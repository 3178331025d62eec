"""Who is calling: the credential of a request → organization, principal and role (used by the authorizer)."""

from __future__ import annotations

from collections.abc import Mapping

from switchboard import clock
from switchboard.api.auth import AuthContext
from switchboard.errors import Unauthenticated
from switchboard.identity import repository
from switchboard.identity.credentials import extract_credential, hash_token
from switchboard.store import Store


def authenticate(store: Store, headers: Mapping[str, str] | None) -> AuthContext:
    headers = dict(headers or {})
    token = extract_credential(headers)
    if not token:
        raise Unauthenticated("Send an API key in X-Api-Key or a token in Authorization: Bearer.")
    cred = repository.get_credential(store, hash_token(token))
    if cred is None:
        raise Unauthenticated("The credential is unknown, revoked or expired.")

    if cred["kind"] == "api_key":
        return AuthContext(
            principal_type="api_key",
            principal_id=cred["credential_id"],
            user_id=cred.get("user_id"),
            organization_id=cred["organization_id"],
            role=cred["role"],
            credential_id=cred["credential_id"],
        )

    if cred["kind"] == "session":
        if int(cred.get("expires_at", 0)) <= clock.epoch(clock.now()):
            raise Unauthenticated("The session has expired; log in again.")
        user_id = cred["user_id"]
        org_id, role = _session_organization(store, user_id, headers)
        return AuthContext(
            principal_type="session",
            principal_id=cred["credential_id"],
            user_id=user_id,
            organization_id=org_id,
            role=role,
            credential_id=cred["credential_id"],
        )
    raise Unauthenticated("The credential is unknown, revoked or expired.")


def _session_organization(store: Store, user_id: str, headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The organization named by X-Organization-Id, else the user's only one; none when ambiguous or absent."""
    wanted = next((v for k, v in headers.items() if k.lower() == "x-organization-id"), None)
    if wanted:
        member = repository.get_member(store, wanted.strip(), user_id)
        if member is None:
            # Not a member: act with no organization, so org routes answer 403/404 and never another tenant's data.
            return None, None
        return member["organization_id"], member["role"]
    memberships = repository.user_memberships(store, user_id, limit=2)
    if len(memberships) == 1:
        return memberships[0]["organization_id"], memberships[0]["role"]
    return None, None
