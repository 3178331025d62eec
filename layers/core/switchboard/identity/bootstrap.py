"""First organization of a fresh stack: an owner user, the organization, and an owner API key."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.identity import repository
from switchboard.identity.credentials import display_prefix, hash_token, new_api_key
from switchboard.identity.passwords import hash_password
from switchboard.ids import new_id
from switchboard.store import Store


@dataclass(frozen=True)
class Bootstrapped:
    organization_id: str
    user_id: str
    api_key_id: str
    api_key: str
    owner_email: str
    owner_password: str


def bootstrap_organization(
    store: Store,
    *,
    org_name: str,
    owner_email: str,
    owner_password: str,
    api_key: str | None,
    key_mode: str,
) -> Bootstrapped:
    org_id, user_id, key_id = new_id("org"), new_id("usr"), new_id("key")
    plain = api_key or new_api_key(key_mode)
    user = repository.user_item(user_id, owner_email, "Local Owner", hash_password(owner_password), verified=True)
    token_hash = hash_token(plain)
    _, key_ops = repository.api_key_ops(
        org_id, key_id, "bootstrap", "owner", token_hash, display_prefix(plain), user_id, creator_role="owner"
    )
    owned = {repository.key_entry(key_id, token_hash)}
    store.transact(
        [
            *repository.user_ops(user),
            repository.Put(item=repository.organization_item(org_id, org_name, user_id), condition=None),
            *repository.membership_ops(org_id, user_id, "owner", owner_email, "Local Owner", api_keys=owned),
            *key_ops,
        ]
    )
    return Bootstrapped(org_id, user_id, key_id, plain, owner_email, owner_password)
