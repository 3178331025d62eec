"""API keys: created with a role no higher than the creator's, shown once, revoked at once; each tied to the member who
created it (at most MAX_KEYS_PER_MEMBER each), revoked when that member leaves and capped at their current role."""

from __future__ import annotations

from typing import Any

from switchboard.access import ROLE_RANK, AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Conflict, Forbidden, NotFound
from switchboard.identity import models, repository
from switchboard.identity.credentials import display_prefix, hash_token, new_api_key
from switchboard.identity.security import get_security
from switchboard.ids import new_id
from switchboard.store import Delete, Store, TxOp, Update, keys

MAX_KEYS_PER_MEMBER = 25


def _view(item: dict[str, Any]) -> models.ApiKey:
    return models.ApiKey.model_validate({k: item.get(k) for k in models.ApiKey.model_fields})


def create_api_key(store: Store, auth: AuthContext, body: models.ApiKeyCreate) -> models.ApiKeyCreated:
    """A key is tied to the member behind the caller (the user of the session, or the creator of the calling key):
    listed on their member row (at most MAX_KEYS_PER_MEMBER), revoked when they leave, capped at their role."""
    if ROLE_RANK[body.role] > ROLE_RANK.get(auth.role or "", 0):
        raise Forbidden("A key cannot carry a higher role than its creator's.")
    org_id = auth.org_id
    plain = new_api_key(get_settings().api_key_mode)
    token_hash = hash_token(plain)
    key_id = new_id("key")
    member_ops: list[TxOp] = []
    creator_role = None
    if auth.user_id:
        creator_role, member_op = member_key_op(store, org_id, auth.user_id, key_id, token_hash)
        member_ops.append(member_op)
    record, ops = repository.api_key_ops(
        org_id,
        key_id,
        body.name,
        body.role,
        token_hash,
        display_prefix(plain),
        auth.user_id,
        allowed_cidrs=get_security(store, org_id).api_key_allowed_cidrs,
        creator_role=creator_role,
    )
    store.transact(
        [
            *ops,
            *member_ops,
            repository.organization_active_check(auth.org_id),
            audit_put(auth, "api_key.created", "api_key", key_id, after={"name": body.name, "role": body.role}),
        ]
    )
    return models.ApiKeyCreated(**_view(record).model_dump(), key=plain)


def member_key_op(store: Store, org_id: str, user_id: str, key_id: str, token_hash: str) -> tuple[str, Update]:
    """The creator's member row gains the key (at most MAX_KEYS_PER_MEMBER), on condition that neither its role nor
    its keys changed since read: → (the member's role, the key's `creator_role`; the Update for the transaction)."""
    member = repository.get_member(store, org_id, user_id)
    if member is None:
        raise Forbidden("Only a member of the organization can create its API keys.")
    creator_role = str(member["role"])
    if len(member.get("api_keys") or ()) >= MAX_KEYS_PER_MEMBER:
        raise Conflict(f"A member can hold at most {MAX_KEYS_PER_MEMBER} API keys; revoke one first.")
    unchanged, values = repository.member_keys_unchanged(member)
    return creator_role, Update(
        key=keys.member(org_id, user_id),
        expression="ADD api_keys :entry, keys_version :one",
        condition=f"#role = :creator_role AND {unchanged}",
        names={"#role": "role"},
        values={
            ":entry": {repository.key_entry(key_id, token_hash)},
            ":one": 1,
            ":creator_role": creator_role,
            **values,
        },
        error=Conflict("The member's keys or role changed meanwhile; retry."),
    )


def list_api_keys(store: Store, auth: AuthContext) -> list[models.ApiKey]:
    return [_view(i) for i in store.query_all(keys.org_pk(auth.org_id), sk_prefix="APIKEY#")]


def get_api_key(store: Store, auth: AuthContext, key_id: str) -> models.ApiKey:
    item = store.require(keys.api_key_record(auth.org_id, key_id), "No such API key.")
    return _view(item)


def revoke_api_key(store: Store, auth: AuthContext, key_id: str) -> None:
    record = store.require(keys.api_key_record(auth.org_id, key_id), "No such API key.", consistent=True)
    if ROLE_RANK.get(record["role"], 0) > ROLE_RANK.get(auth.role or "", 0):
        raise Forbidden("A key with a higher role than yours can only be revoked by an owner.")
    gone = NotFound("No such API key.")
    ops: list[TxOp] = [
        Delete(key=keys.api_key_record(auth.org_id, key_id), condition="attribute_exists(PK)", error=gone),
        Delete(key=keys.credential(record["token_hash"])),
        audit_put(auth, "api_key.revoked", "api_key", key_id, before={"name": record["name"], "role": record["role"]}),
    ]
    entry = repository.key_entry(key_id, record["token_hash"])
    creator = str(record.get("created_by") or "")
    member = repository.get_member(store, auth.org_id, creator) if creator else None
    if member is not None and entry in (member.get("api_keys") or ()):
        ops.append(
            Update(
                key=keys.member(auth.org_id, creator),
                expression="DELETE api_keys :entry ADD keys_version :one",
                condition="attribute_exists(PK)",
                values={":entry": {entry}, ":one": 1},
                error=Conflict("The key's creator changed meanwhile; retry."),
            )
        )
    store.transact(ops)
