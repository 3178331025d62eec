"""Organizations, members, invitations and teams."""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Any

from switchboard import clock, ratelimit
from switchboard.access import ROLE_RANK, AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Conflict, Forbidden, NotFound, ValidationFailed
from switchboard.identity import models, repository
from switchboard.identity.accounts import get_user, normalize_email, require_user
from switchboard.identity.credentials import hash_token
from switchboard.identity.security import get_security
from switchboard.ids import new_id
from switchboard.mail import Mail, mail_put
from switchboard.store import ConditionCheck, Delete, Put, Store, TxOp, Update, keys

INVITATION_TTL = timedelta(days=7)
LAST_OWNER = Conflict("The organization must keep at least one owner.", code="conflict")


# Organizations ---------------------------------------------------------------------------------------------------
def _organization(item: dict[str, Any]) -> models.Organization:
    return models.Organization.model_validate(item)


def get_organization(store: Store, auth: AuthContext) -> models.Organization:
    item = store.require(keys.organization(auth.org_id), "The organization no longer exists.")
    return _organization(item)


def update_organization(store: Store, auth: AuthContext, body: models.OrganizationUpdate) -> models.Organization:
    """The fields sent change (`default_phone_region: null` removes it); one audited update, nothing when nothing
    changes."""
    current = get_organization(store, auth)
    sent = [f for f in ("name", "default_phone_region") if f in body.model_fields_set]
    changed: dict[str, Any] = {f: getattr(body, f) for f in sent if getattr(current, f) != getattr(body, f)}
    if not changed:
        return current
    now = clock.now_iso()
    sets = [*(f"#{f} = :{f}" for f, v in changed.items() if v is not None), "updated_at = :now"]
    removes = [f"#{f}" for f, v in changed.items() if v is None]
    expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "") + " ADD version :one"
    store.transact(
        [
            Update(
                key=keys.organization(auth.org_id),
                expression=expression,
                condition="attribute_exists(PK)",
                names={f"#{f}": f for f in changed},
                values={**{f":{f}": v for f, v in changed.items() if v is not None}, ":now": now, ":one": 1},
                error=NotFound("The organization no longer exists."),
            ),
            audit_put(
                auth,
                "organization.updated",
                "organization",
                auth.org_id,
                before={f: getattr(current, f) for f in changed},
                after=changed,
            ),
        ]
    )
    return current.model_copy(update={**changed, "updated_at": now})


def list_my_organizations(store: Store, auth: AuthContext) -> list[models.OrganizationWithRole]:
    if auth.principal_type == "api_key":
        org = store.get(keys.organization(auth.org_id))
        return [models.OrganizationWithRole(**_organization(org).model_dump(), role=auth.role or "")] if org else []
    memberships = repository.user_memberships(store, require_user(auth))
    orgs = {o["id"]: o for o in store.batch_get([keys.organization(m["organization_id"]) for m in memberships])}
    return [
        models.OrganizationWithRole(**_organization(orgs[m["organization_id"]]).model_dump(), role=m["role"])
        for m in memberships
        if m["organization_id"] in orgs
    ]


def create_organization(store: Store, auth: AuthContext, body: models.OrganizationCreate) -> models.Organization:
    user_id = require_user(auth)
    limit = get_settings().organizations_per_user_per_day
    ratelimit.hit(store, f"organizations:{user_id}", limit=limit, window_seconds=24 * 3600)
    user = get_user(store, user_id)
    org_id = new_id("org")
    item = repository.organization_item(org_id, body.name, user_id)
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            *repository.membership_ops(org_id, user_id, "owner", user["email"], user.get("name", "")),
            audit_put(auth, "organization.created", "organization", org_id, after={"name": body.name}, org_id=org_id),
        ]
    )
    return _organization(item)


# Members ---------------------------------------------------------------------------------------------------------
def _member_view(item: dict[str, Any], user: dict[str, Any] | None) -> models.Member:
    user = user or {}
    return models.Member(
        id=item["id"],
        user_id=item["user_id"],
        role=item["role"],
        user_email=str(user.get("email") or item.get("user_email") or ""),
        user_name=str(user.get("name") or item.get("user_name") or ""),
        user_image=str(user.get("image") or ""),
        created_at=item["created_at"],
    )


def list_members(store: Store, auth: AuthContext, limit: int, offset: int) -> tuple[list[models.Member], bool, int]:
    items = store.query_all(keys.org_pk(auth.org_id), sk_prefix="MEMBER#")
    page = items[offset : offset + limit]
    users = {u["id"]: u for u in store.batch_get([keys.user(i["user_id"]) for i in page])}
    return [_member_view(i, users.get(i["user_id"])) for i in page], offset + limit < len(items), len(items)


def _get_member(store: Store, org_id: str, user_id: str) -> dict[str, Any]:
    return store.require(keys.member(org_id, user_id), "No such member.", consistent=True)


def get_member(store: Store, auth: AuthContext, user_id: str) -> models.Member:
    item = _get_member(store, auth.org_id, user_id)
    return _member_view(item, store.get(keys.user(user_id)))


def _owner_guard(org_id: str, delta: int) -> Update:
    """Keep `owner_count` exact; a decrement may never reach zero (checked in the same transaction)."""
    if delta < 0:
        return Update(
            key=keys.organization(org_id),
            expression="ADD owner_count :d",
            condition="owner_count > :one",
            values={":d": delta, ":one": 1},
            error=LAST_OWNER,
        )
    return Update(key=keys.organization(org_id), expression="ADD owner_count :d", values={":d": delta})


def _require_can_manage(auth: AuthContext, role: str) -> None:
    if ROLE_RANK[role] > ROLE_RANK.get(auth.role or "", 0):
        raise Forbidden(f"Only an {role} or higher can grant or manage the {role} role.")


def update_member_role(store: Store, auth: AuthContext, user_id: str, body: models.MemberUpdate) -> models.Member:
    org_id = auth.org_id
    item = _get_member(store, org_id, user_id)
    old = item["role"]
    if old == body.role:
        return _member_view(item, store.get(keys.user(user_id)))
    _require_can_manage(auth, old)
    _require_can_manage(auth, body.role)
    unchanged, kept = repository.member_keys_unchanged(item)
    ops: list[TxOp] = [
        Update(
            key=keys.member(org_id, user_id),
            expression="SET #role = :role",
            condition=f"#role = :old AND {unchanged}",
            names={"#role": "role"},
            values={":role": body.role, ":old": old, **kept},
            error=Conflict("The member's role or keys changed meanwhile; retry."),
        ),
        Update(
            key={"PK": keys.user_pk(user_id), "SK": f"MEMBERSHIP#{org_id}"},
            expression="SET #role = :role",
            names={"#role": "role"},
            values={":role": body.role},
        ),
        audit_put(auth, "member.role_changed", "member", user_id, before={"role": old}, after={"role": body.role}),
        # The member's API keys act with at most the new role from the next request (a bounded list).
        *(
            Update(
                key=keys.credential(token_hash),
                expression="SET creator_role = :role",
                condition="attribute_exists(PK)",
                values={":role": body.role},
                error=Conflict("The member's keys changed meanwhile; retry."),
            )
            for _, token_hash in map(repository.parse_key_entry, sorted(item.get("api_keys") or ()))
        ),
    ]
    if old == "owner":
        ops.append(_owner_guard(org_id, -1))
    elif body.role == "owner":
        ops.append(_owner_guard(org_id, +1))
    store.transact(ops)
    return _member_view({**item, "role": body.role}, store.get(keys.user(user_id)))


def remove_member(store: Store, auth: AuthContext, user_id: str) -> None:
    """The membership ends and, in the same transaction, every API key the member created (a bounded list on the
    member row): the next request with one of them is 401. Team rows follow, in the same transaction as far as it
    holds them."""
    org_id = auth.org_id
    item = _get_member(store, org_id, user_id)
    if user_id != auth.user_id:
        _require_can_manage(auth, item["role"])
    unchanged, kept = repository.member_keys_unchanged(item)
    api_keys = [repository.parse_key_entry(e) for e in sorted(item.get("api_keys") or ())]
    ops: list[TxOp] = [
        Delete(
            key=keys.member(org_id, user_id),
            condition=f"attribute_exists(PK) AND {unchanged}",
            values=kept or None,
            error=Conflict("The member's keys changed meanwhile; retry."),
        ),
        Delete(key={"PK": keys.user_pk(user_id), "SK": f"MEMBERSHIP#{org_id}"}),
        audit_put(
            auth,
            "member.removed",
            "member",
            user_id,
            before={"role": item["role"], "api_keys": [key_id for key_id, _ in api_keys]},
        ),
    ]
    for key_id, token_hash in api_keys:
        ops += [Delete(key=keys.api_key_record(org_id, key_id)), Delete(key=keys.credential(token_hash))]
    if item["role"] == "owner":
        ops.append(_owner_guard(org_id, -1))
    team_rows = [t for t in store.query_all(keys.org_pk(org_id), sk_prefix="TEAMMEMBER#") if t["user_id"] == user_id]
    team_ops: list[TxOp] = [Delete(key={"PK": t["PK"], "SK": t["SK"]}) for t in team_rows]
    room = 100 - len(ops)
    store.transact(ops + team_ops[:room])
    for start in range(room, len(team_ops), 100):
        store.transact(team_ops[start : start + 100])


# Invitations -----------------------------------------------------------------------------------------------------
def _invitation_key(org_id: str, invitation_id: str) -> dict[str, str]:
    return {"PK": keys.org_pk(org_id), "SK": f"INVITE#{invitation_id}"}


def _invitation_pointer(invitation_id: str) -> dict[str, str]:
    return {"PK": f"INVITE#{invitation_id}", "SK": "INVITE"}


def _invitation_view(item: dict[str, Any]) -> models.Invitation:
    status = item["status"]
    if status == "pending":
        expires = clock.parse_stored(item.get("expires_at"), "invitation expires_at")
        status = "expired" if expires is None or expires <= clock.now() else status  # unreadable: expired
    return models.Invitation.model_validate({**item, "status": status})


def create_invitation(
    store: Store, auth: AuthContext, body: models.InvitationCreate, accept_url: str
) -> models.Invitation:
    """The invitation and the mail with its link are written together (switchboard.mail): the mail goes out after."""
    _require_can_manage(auth, body.role)
    org = get_organization(store, auth)
    email = normalize_email(body.email)
    sentinel = store.get(keys.user_email(email))
    if sentinel and store.get(keys.member(auth.org_id, sentinel["user_id"])):
        raise Conflict("That person is already a member of this organization.")
    invitation_id = new_id("inv")
    token = secrets.token_urlsafe(24)
    now = clock.now()
    item = {
        **_invitation_key(auth.org_id, invitation_id),
        "entity": "Invitation",
        "id": invitation_id,
        "organization_id": auth.org_id,
        "email": email,
        "role": body.role,
        "status": "pending",
        "invited_by": auth.user_id or auth.principal_id,
        "token_hash": hash_token(token),
        "created_at": clock.iso(now),
        "expires_at": clock.iso(now + INVITATION_TTL),
        "ttl": clock.epoch(now + INVITATION_TTL + timedelta(days=30)),
    }
    # The token rides in the fragment: browsers and proxies never send or log a fragment, unlike a query string.
    link = f"{accept_url.rstrip('/')}/v1/invitations/{invitation_id}/accept#token={token}"
    invitation_mail = Mail(
        to=email,
        subject=f"You are invited to {org.name} on Switchboard",
        text=f"You were invited to join {org.name} as {body.role}. Sign in or register with this e-mail, then "
        f'accept: {link} (POST /v1/invitations/{invitation_id}/accept with {{"token": "{token}"}}). '
        "It expires in 7 days.",
    )
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(
                item={
                    **_invitation_pointer(invitation_id),
                    "entity": "InvitationPointer",
                    "organization_id": auth.org_id,
                    "ttl": item["ttl"],
                }
            ),
            audit_put(
                auth, "invitation.created", "invitation", invitation_id, after={"email": email, "role": body.role}
            ),
            mail_put(invitation_mail),
        ]
    )
    return _invitation_view(item)


def list_invitations(store: Store, auth: AuthContext) -> list[models.Invitation]:
    return [_invitation_view(i) for i in store.query_all(keys.org_pk(auth.org_id), sk_prefix="INVITE#")]


def get_invitation(store: Store, auth: AuthContext, invitation_id: str) -> models.Invitation:
    item = store.require(_invitation_key(auth.org_id, invitation_id), "No such invitation.")
    return _invitation_view(item)


def revoke_invitation(store: Store, auth: AuthContext, invitation_id: str) -> None:
    store.require(_invitation_key(auth.org_id, invitation_id), "No such invitation.", consistent=True)
    store.transact(
        [
            Update(
                key=_invitation_key(auth.org_id, invitation_id),
                expression="SET #status = :revoked",
                condition="#status = :pending",
                names={"#status": "status"},
                values={":revoked": "revoked", ":pending": "pending"},
                error=Conflict("Only a pending invitation can be revoked."),
            ),
            audit_put(auth, "invitation.revoked", "invitation", invitation_id),
        ]
    )


def accept_invitation(store: Store, auth: AuthContext, invitation_id: str, token: str) -> models.Invitation:
    """The invited user (signed in with the invited e-mail, holding the token of the e-mailed link) joins the
    organization with the invited role. The token is compared by its hash, in constant time."""
    user_id = require_user(auth)
    pointer = store.get(_invitation_pointer(invitation_id), consistent=True)
    item = store.get(_invitation_key(pointer["organization_id"], invitation_id), consistent=True) if pointer else None
    user = get_user(store, user_id)
    if item is None or item["email"] != user["email"]:
        raise NotFound("No such invitation for this user.")
    if not hmac.compare_digest(str(item.get("token_hash") or ""), hash_token(token)):
        raise ValidationFailed.field("body.token", "does not match the invitation")
    view = _invitation_view(item)
    if view.status != "pending":
        raise Conflict(f"The invitation is {view.status}.")
    org_id = item["organization_id"]
    security = get_security(store, org_id)
    now = clock.now_iso()
    ops: list[TxOp] = [
        Update(
            key=_invitation_key(org_id, invitation_id),
            expression="SET #status = :accepted, accepted_at = :now, accepted_by = :uid",
            condition="#status = :pending",
            names={"#status": "status"},
            values={":accepted": "accepted", ":pending": "pending", ":now": now, ":uid": user_id},
            error=Conflict("The invitation is no longer pending."),
        ),
        repository.organization_active_check(org_id),  # an organization pending deletion gains no members
        *repository.membership_ops(
            org_id,
            user_id,
            item["role"],
            user["email"],
            user.get("name", ""),
            idle_timeout=security.session_idle_timeout_minutes,
        ),
        audit_put(
            auth, "invitation.accepted", "invitation", invitation_id, after={"role": item["role"]}, org_id=org_id
        ),
    ]
    if item["role"] == "owner":
        ops.append(_owner_guard(org_id, +1))
    store.transact(ops)
    return view.model_copy(update={"status": "accepted", "accepted_at": now})


# Teams -----------------------------------------------------------------------------------------------------------
def _team_key(org_id: str, team_id: str) -> dict[str, str]:
    return {"PK": keys.org_pk(org_id), "SK": f"TEAM#{team_id}"}


def _team_name_key(org_id: str, name: str) -> dict[str, str]:
    return {"PK": keys.org_pk(org_id), "SK": f"TEAMNAME#{name.strip().lower()}"}


def _team_member_key(org_id: str, team_id: str, user_id: str) -> dict[str, str]:
    return {"PK": keys.org_pk(org_id), "SK": f"TEAMMEMBER#{team_id}#{user_id}"}


def _team_view(item: dict[str, Any]) -> models.Team:
    return models.Team.model_validate(item)


def _name_taken() -> Conflict:
    return Conflict("A team with this name already exists.")


def create_team(store: Store, auth: AuthContext, body: models.TeamCreate) -> models.Team:
    team_id = new_id("team")
    now = clock.now_iso()
    item = {
        **_team_key(auth.org_id, team_id),
        "entity": "Team",
        "id": team_id,
        "name": body.name,
        "description": body.description,
        "member_count": 0,
        "created_at": now,
        "updated_at": now,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(
                item={**_team_name_key(auth.org_id, body.name), "entity": "TeamName", "team_id": team_id},
                condition="attribute_not_exists(PK)",
                error=_name_taken(),
            ),
            audit_put(auth, "team.created", "team", team_id, after={"name": body.name}),
        ]
    )
    return _team_view(item)


def list_teams(store: Store, auth: AuthContext) -> list[models.Team]:
    return [_team_view(i) for i in store.query_all(keys.org_pk(auth.org_id), sk_prefix="TEAM#")]


def _get_team_item(store: Store, org_id: str, team_id: str) -> dict[str, Any]:
    return store.require(_team_key(org_id, team_id), "No such team.", consistent=True)


def get_team(store: Store, auth: AuthContext, team_id: str) -> models.Team:
    return _team_view(_get_team_item(store, auth.org_id, team_id))


def update_team(store: Store, auth: AuthContext, team_id: str, body: models.TeamUpdate) -> models.Team:
    item = _get_team_item(store, auth.org_id, team_id)
    # a team always has a name: `"name": null` changes nothing (a null description clears it)
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k == "description"}
    if not changes or all(item.get(k) == v for k, v in changes.items()):
        return _team_view(item)
    now = clock.now_iso()
    ops: list[TxOp] = []
    if "name" in changes and changes["name"].lower() != item["name"].lower():
        ops += [
            Put(
                item={**_team_name_key(auth.org_id, changes["name"]), "entity": "TeamName", "team_id": team_id},
                condition="attribute_not_exists(PK)",
                error=_name_taken(),
            ),
            Delete(key=_team_name_key(auth.org_id, item["name"])),
        ]
    ops.insert(
        0,
        Update(
            key=_team_key(auth.org_id, team_id),
            expression="SET " + ", ".join(f"#{k} = :{k}" for k in changes) + ", updated_at = :now",
            condition="attribute_exists(PK)",
            names={f"#{k}": k for k in changes},
            values={**{f":{k}": v for k, v in changes.items()}, ":now": now},
            error=NotFound("No such team."),
        ),
    )
    before = {k: item.get(k) for k in changes}
    ops.append(audit_put(auth, "team.updated", "team", team_id, before=before, after=changes))
    store.transact(ops)
    return _team_view({**item, **changes, "updated_at": now})


def delete_team(store: Store, auth: AuthContext, team_id: str) -> None:
    item = _get_team_item(store, auth.org_id, team_id)
    members = store.query_all(keys.org_pk(auth.org_id), sk_prefix=f"TEAMMEMBER#{team_id}#")
    ops: list[TxOp] = [
        Delete(key=_team_key(auth.org_id, team_id), condition="attribute_exists(PK)", error=NotFound("No such team.")),
        Delete(key=_team_name_key(auth.org_id, item["name"])),
        audit_put(auth, "team.deleted", "team", team_id, before={"name": item["name"]}),
    ]
    ops += [Delete(key={"PK": m["PK"], "SK": m["SK"]}) for m in members]
    for start in range(0, len(ops), 100):
        store.transact(ops[start : start + 100])


def add_team_member(store: Store, auth: AuthContext, team_id: str, body: models.TeamMemberAdd) -> models.TeamMember:
    _get_team_item(store, auth.org_id, team_id)
    member = _get_member(store, auth.org_id, body.user_id)
    now = clock.now_iso()
    row = {
        **_team_member_key(auth.org_id, team_id, body.user_id),
        "entity": "TeamMember",
        "team_id": team_id,
        "user_id": body.user_id,
        "user_email": member.get("user_email", ""),
        "user_name": member.get("user_name", ""),
        "added_at": now,
    }
    store.transact(
        [
            Put(item=row, condition="attribute_not_exists(PK)", error=Conflict("Already a member of this team.")),
            Update(
                key=_team_key(auth.org_id, team_id),
                expression="ADD member_count :one",
                condition="attribute_exists(PK)",
                values={":one": 1},
                error=NotFound("No such team."),
            ),
            ConditionCheck(
                key=keys.member(auth.org_id, body.user_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such member."),
            ),
            audit_put(auth, "team.member_added", "team", team_id, after={"user_id": body.user_id}),
        ]
    )
    return models.TeamMember.model_validate(row)


def list_team_members(store: Store, auth: AuthContext, team_id: str) -> list[models.TeamMember]:
    _get_team_item(store, auth.org_id, team_id)
    rows = store.query_all(keys.org_pk(auth.org_id), sk_prefix=f"TEAMMEMBER#{team_id}#")
    return [models.TeamMember.model_validate(r) for r in rows]


def remove_team_member(store: Store, auth: AuthContext, team_id: str, user_id: str) -> None:
    store.transact(
        [
            Delete(
                key=_team_member_key(auth.org_id, team_id, user_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such team member."),
            ),
            Update(
                key=_team_key(auth.org_id, team_id),
                expression="ADD member_count :minus",
                condition="attribute_exists(PK)",
                values={":minus": -1},
                error=NotFound("No such team."),
            ),
            audit_put(auth, "team.member_removed", "team", team_id, before={"user_id": user_id}),
        ]
    )
