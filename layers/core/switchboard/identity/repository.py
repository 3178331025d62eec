"""Identity items and their keys. Every write that must stay consistent goes through one transaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.errors import Conflict, DomainError, NotFound
from switchboard.store import ConditionCheck, Put, Store, keys

Item = dict[str, Any]


def organization_item(org_id: str, name: str, created_by: str | None) -> Item:
    now = clock.now_iso()
    return {
        **keys.organization(org_id),
        "entity": "Organization",
        "id": org_id,
        "name": name,
        "created_by": created_by,
        "owner_count": 1 if created_by else 0,
        "contact_counts": "stream",  # contacts.counter: counted from the stream since creation, nothing to seed
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }


def user_item(user_id: str, email: str, name: str, password_hash: str | None, *, verified: bool) -> Item:
    now = clock.now_iso()
    return {
        **keys.user(user_id),
        "entity": "User",
        "id": user_id,
        "email": email,
        "email_verified": verified,
        "name": name,
        "password_hash": password_hash,
        "image": "",
        "timezone": "UTC",
        "week_start": "monday",
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }


def membership_ops(
    org_id: str,
    user_id: str,
    role: str,
    email: str,
    name: str,
    *,
    idle_timeout: int | None = None,
    api_keys: set[str] | None = None,
) -> list[Put]:
    """The member row in the organization and its mirror in the user's partition (consistent "my orgs" query).
    `api_keys`: the `key_entry` of each API key the member creates with it (bootstrap)."""
    now = clock.now_iso()
    member: Item = {
        **keys.member(org_id, user_id),
        "entity": "Member",
        "id": f"mem_{org_id[4:]}_{user_id[4:]}",
        "organization_id": org_id,
        "user_id": user_id,
        "role": role,
        "user_email": email,
        "user_name": name,
        "session_idle_timeout_minutes": idle_timeout,
        "created_at": now,
    }
    if api_keys:
        member |= {"api_keys": set(api_keys), "keys_version": 1}
    mirror = {
        "PK": keys.user_pk(user_id),
        "SK": f"MEMBERSHIP#{org_id}",
        "entity": "Membership",
        "organization_id": org_id,
        "role": role,
        "session_idle_timeout_minutes": idle_timeout,
        "created_at": now,
    }
    already = Conflict("The user is already a member of this organization.")
    return [
        Put(item=member, condition="attribute_not_exists(PK)", error=already),
        Put(item=mirror, condition="attribute_not_exists(PK)", error=already),
    ]


def user_ops(user: Item) -> list[Put]:
    """The user and its e-mail sentinel: one account per e-mail, enforced by the database."""
    sentinel = {**keys.user_email(user["email"]), "entity": "EmailSentinel", "user_id": user["id"]}
    return [
        Put(item=user, condition="attribute_not_exists(PK)"),
        Put(
            item=sentinel,
            condition="attribute_not_exists(PK)",
            error=Conflict("An account with this e-mail already exists."),
        ),
    ]


def api_key_ops(
    org_id: str,
    key_id: str,
    name: str,
    role: str,
    token_hash: str,
    prefix: str,
    created_by: str | None,
    allowed_cidrs: list[str] | None = None,
    creator_role: str | None = None,
) -> tuple[Item, list[Put]]:
    """The key's record (listed by the organization) and its credential (read by the authorizer). A key created by a
    member carries `creator_role`, that member's current role, kept up to date by every change of the member's role:
    the key acts with the lower of its own role and its creator's (`effective_key_role`)."""
    now = clock.now_iso()
    record = {
        **keys.api_key_record(org_id, key_id),
        "entity": "ApiKey",
        "id": key_id,
        "organization_id": org_id,
        "name": name,
        "role": role,
        "prefix": prefix,
        "token_hash": token_hash,
        "created_by": created_by,
        "created_at": now,
    }
    credential = {
        **keys.credential(token_hash),
        "entity": "Credential",
        "kind": "api_key",
        "credential_id": key_id,
        "organization_id": org_id,
        "role": role,
        "user_id": created_by,
        "allowed_cidrs": allowed_cidrs or None,
        "created_at": now,
    }
    if created_by and creator_role:
        credential["creator_role"] = creator_role
    return record, [
        Put(item=record, condition="attribute_not_exists(PK)"),
        Put(item=credential, condition="attribute_not_exists(PK)", error=Conflict("This key already exists.")),
    ]


def key_entry(key_id: str, token_hash: str) -> str:
    """How a member row lists an API key its member created (`api_keys`, a string set): enough to revoke it (its
    record and its credential) or to update its credential, in the transaction that removes or re-roles the member."""
    return f"{key_id}:{token_hash}"


def parse_key_entry(entry: str) -> tuple[str, str]:
    key_id, _, token_hash = entry.partition(":")
    return key_id, token_hash


def member_keys_unchanged(member: Item) -> tuple[str, dict[str, Any]]:
    """A condition on the member row (and its values) that holds while nobody created or revoked a key of the member
    since `member` was read (`keys_version`): a transaction acting on the member's keys from that read acts on all."""
    version = member.get("keys_version")
    if version is None:
        return "attribute_not_exists(keys_version)", {}
    return "keys_version = :keys_version", {":keys_version": version}


def organization_active_check(org_id: str) -> ConditionCheck:
    """For the transaction that adds a credential or an endpoint: refused (404) once the organization is pending
    deletion, so nothing added while the deletion request suspends the rest escapes it (identity.lifecycle)."""
    return ConditionCheck(
        key=keys.organization(org_id),
        condition="attribute_exists(PK) AND attribute_not_exists(#status)",
        names={"#status": "status"},
        error=NotFound("The organization no longer exists."),
    )


def organization_active(store: Store, org_id: str) -> bool:
    """The organization exists and is not pending deletion: provider callbacks and the webhook portal ask this before
    acting for it (identity.lifecycle)."""
    item = store.get(keys.organization(org_id), consistent=True)
    return item is not None and item.get("status", "active") == "active"


def get_credential(store: Store, token_hash: str) -> Item | None:
    # Consistent read: a key works on the request after its creation and stops on the request after revocation.
    return store.get(keys.credential(token_hash), consistent=True)


def get_member(store: Store, org_id: str, user_id: str) -> Item | None:
    return store.get(keys.member(org_id, user_id), consistent=True)


def user_memberships(store: Store, user_id: str, limit: int | None = None) -> list[Item]:
    page = store.query(keys.user_pk(user_id), sk_prefix="MEMBERSHIP#", consistent=True, limit=limit)
    return page.items


KEY_USE_EVERY = timedelta(minutes=1)


def touch_api_key(store: Store, cred: Item) -> None:
    """Keep the key's `last_used_at` (GET /v1/api-keys shows it), written at most once a minute per key: the
    credential's own copy (read by the authorizer anyway) says when it was last written, a conditional update on the
    credential lets one request of the minute win, and only that one writes the key's record. Bookkeeping never
    fails a request: a lost race or a throttled write is skipped."""
    now = clock.now()
    last = cred.get("last_used_at")
    stamped = clock.parse_stored(last, "api key last_used_at") if isinstance(last, str) else None
    if stamped is not None and now - stamped < KEY_USE_EVERY:
        return
    stamp = clock.iso(now)
    try:
        store.update(
            {"PK": cred["PK"], "SK": cred["SK"]},
            "SET last_used_at = :now",
            condition="attribute_exists(PK) AND (attribute_not_exists(last_used_at) OR last_used_at < :cutoff)",
            values={":now": stamp, ":cutoff": clock.iso(now - KEY_USE_EVERY)},
            return_values="NONE",
        )
        store.update(
            keys.api_key_record(cred["organization_id"], cred["credential_id"]),
            "SET last_used_at = :now",
            condition="attribute_exists(PK)",
            values={":now": stamp},
            return_values="NONE",
        )
    except DomainError:  # another request of this minute wrote it, the key was just revoked, or the table is busy
        return
