"""API keys: created with a role no higher than the creator's, shown once, revoked at once."""

from __future__ import annotations

from typing import Any

from switchboard.api.auth import ROLE_RANK, AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Forbidden, NotFound
from switchboard.identity import models, repository
from switchboard.identity.credentials import display_prefix, hash_token, new_api_key
from switchboard.identity.security import get_security
from switchboard.ids import new_id
from switchboard.store import Delete, Store, keys


def _view(item: dict[str, Any]) -> models.ApiKey:
    return models.ApiKey.model_validate({k: item.get(k) for k in models.ApiKey.model_fields})


def create_api_key(store: Store, auth: AuthContext, body: models.ApiKeyCreate) -> models.ApiKeyCreated:
    if ROLE_RANK[body.role] > ROLE_RANK.get(auth.role or "", 0):
        raise Forbidden("A key cannot carry a higher role than its creator's.")
    plain = new_api_key(get_settings().api_key_mode)
    key_id = new_id("key")
    record, ops = repository.api_key_ops(
        auth.org_id,
        key_id,
        body.name,
        body.role,
        hash_token(plain),
        display_prefix(plain),
        auth.user_id,
        allowed_cidrs=get_security(store, auth.org_id).api_key_allowed_cidrs,
    )
    store.transact(
        [
            *ops,
            repository.organization_active_check(auth.org_id),
            audit_put(auth, "api_key.created", "api_key", key_id, after={"name": body.name, "role": body.role}),
        ]
    )
    return models.ApiKeyCreated(**_view(record).model_dump(), key=plain)


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
    store.transact(
        [
            Delete(key=keys.api_key_record(auth.org_id, key_id), condition="attribute_exists(PK)", error=gone),
            Delete(key=keys.credential(record["token_hash"])),
            audit_put(
                auth, "api_key.revoked", "api_key", key_id, before={"name": record["name"], "role": record["role"]}
            ),
        ]
    )
