"""Organizations, members and API keys: the rules, independent of HTTP."""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.api.auth import ROLE_RANK, AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Forbidden, NotFound
from switchboard.identity import models, repository
from switchboard.identity.credentials import display_prefix, hash_token, new_api_key
from switchboard.ids import new_id
from switchboard.store import Delete, Store, Update, keys


def _organization(item: dict[str, Any]) -> models.Organization:
    return models.Organization.model_validate(item, from_attributes=False)


def get_organization(store: Store, auth: AuthContext) -> models.Organization:
    item = store.get(keys.organization(auth.org_id))
    if item is None:
        raise NotFound("The organization no longer exists.")
    return _organization(item)


def update_organization(store: Store, auth: AuthContext, body: models.OrganizationUpdate) -> models.Organization:
    current = get_organization(store, auth)
    if current.name == body.name:
        return current
    now = clock.now_iso()
    store.transact(
        [
            Update(
                key=keys.organization(auth.org_id),
                expression="SET #name = :name, updated_at = :now ADD version :one",
                condition="attribute_exists(PK)",
                names={"#name": "name"},
                values={":name": body.name, ":now": now, ":one": 1},
                error=NotFound("The organization no longer exists."),
            ),
            audit_put(
                auth,
                "organization.updated",
                "organization",
                auth.org_id,
                before={"name": current.name},
                after={"name": body.name},
            ),
        ]
    )
    return current.model_copy(update={"name": body.name, "updated_at": now})


def list_my_organizations(store: Store, auth: AuthContext) -> list[dict[str, Any]]:
    if auth.principal_type == "api_key":
        org = store.get(keys.organization(auth.org_id))
        return [{**_organization(org).model_dump(), "role": auth.role}] if org else []
    if not auth.user_id:
        return []
    memberships = repository.user_memberships(store, auth.user_id)
    orgs = store.batch_get([keys.organization(m["organization_id"]) for m in memberships])
    by_id = {o["id"]: o for o in orgs}
    return [
        {**_organization(by_id[m["organization_id"]]).model_dump(), "role": m["role"]}
        for m in memberships
        if m["organization_id"] in by_id
    ]


def create_organization(store: Store, auth: AuthContext, body: models.OrganizationCreate) -> models.Organization:
    if auth.principal_type != "session" or not auth.user_id:
        raise Forbidden("Organizations are created by a signed-in user (session token).")
    user = store.get(keys.user(auth.user_id))
    if user is None:
        raise NotFound("The user no longer exists.")
    org_id = new_id("org")
    item = repository.organization_item(org_id, body.name, auth.user_id)
    store.transact(
        [
            repository.Put(item=item, condition="attribute_not_exists(PK)"),
            *repository.membership_ops(org_id, auth.user_id, "owner", user["email"], user.get("name", "")),
            audit_put(auth, "organization.created", "organization", org_id, after={"name": body.name}, org_id=org_id),
        ]
    )
    return _organization(item)


def list_members(store: Store, auth: AuthContext, limit: int, offset: int) -> tuple[list[models.Member], bool, int]:
    items = store.query_all(keys.org_pk(auth.org_id), sk_prefix="MEMBER#")
    users = {u["id"]: u for u in store.batch_get([keys.user(i["user_id"]) for i in items[offset : offset + limit]])}
    page = [
        models.Member(
            id=i["id"],
            user_id=i["user_id"],
            role=i["role"],
            user_email=str(users.get(i["user_id"], {}).get("email") or i.get("user_email") or ""),
            user_name=str(users.get(i["user_id"], {}).get("name") or i.get("user_name") or ""),
            user_image=str(users.get(i["user_id"], {}).get("image") or ""),
            created_at=i["created_at"],
        )
        for i in items[offset : offset + limit]
    ]
    return page, offset + limit < len(items), len(items)


def _api_key(item: dict[str, Any]) -> models.ApiKey:
    return models.ApiKey.model_validate({k: item.get(k) for k in models.ApiKey.model_fields})


def create_api_key(store: Store, auth: AuthContext, body: models.ApiKeyCreate) -> models.ApiKeyCreated:
    if ROLE_RANK[body.role] > ROLE_RANK.get(auth.role or "", 0):
        raise Forbidden("A key cannot carry a higher role than its creator's.")
    plain = new_api_key(get_settings().api_key_mode)
    key_id = new_id("key")
    record, ops = repository.api_key_ops(
        auth.org_id, key_id, body.name, body.role, hash_token(plain), display_prefix(plain), auth.user_id
    )
    store.transact(
        [*ops, audit_put(auth, "api_key.created", "api_key", key_id, after={"name": body.name, "role": body.role})]
    )
    return models.ApiKeyCreated(**_api_key(record).model_dump(), key=plain)


def list_api_keys(store: Store, auth: AuthContext) -> list[models.ApiKey]:
    return [_api_key(i) for i in store.query_all(keys.org_pk(auth.org_id), sk_prefix="APIKEY#")]


def revoke_api_key(store: Store, auth: AuthContext, key_id: str) -> None:
    record = store.get(keys.api_key_record(auth.org_id, key_id), consistent=True)
    if record is None:
        raise NotFound("No such API key.")
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
