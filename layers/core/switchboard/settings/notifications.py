"""Notification preferences: which e-mails each member of the organization gets.

`ORG#<org>` / `NOTIFY#<user_id>` holds the topics a member set explicitly (`emails`), with `version`; topics never
set follow the member's role (`DEFAULTS`). Only current members count: the rows are read together with the
`MEMBER#` items, so a removed member's preferences are ignored. `recipients()` is what a sender of such e-mails
asks (the billing e-mails of issued invoices do).
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import ROLE_RANK, AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict, NotFound
from switchboard.settings import models
from switchboard.store import ConditionCheck, Put, Store, keys, versioned

Item = dict[str, Any]
# The minimum role that gets a topic by default (None: nobody until they opt in).
DEFAULTS: dict[str, str | None] = {
    "invitations": "admin",
    "webhook_failures": "admin",
    "billing": "owner",
    "weekly_digest": None,
}


def prefs_key(org: str, user_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"NOTIFY#{user_id}")


def defaults(role: str) -> dict[str, bool]:
    rank = ROLE_RANK.get(role, 0)
    return {topic: bool(minimum and rank >= ROLE_RANK[minimum]) for topic, minimum in DEFAULTS.items()}


def effective(role: str, stored: Item | None) -> dict[str, bool]:
    explicit = (stored or {}).get("emails") or {}
    return {topic: bool(explicit.get(topic, default)) for topic, default in defaults(role).items()}


def _view(member: Item, stored: Item | None, user: Item | None) -> models.NotificationPreferences:
    return models.NotificationPreferences(
        user_id=member["user_id"],
        user_email=str((user or {}).get("email") or member.get("user_email") or ""),
        role=member["role"],
        emails=models.EmailTopics(**effective(member["role"], stored)),
        customized=bool((stored or {}).get("emails")),
        updated_at=(stored or {}).get("updated_at"),
        version=int((stored or {}).get("version") or 0),
    )


def _members(store: Store, org: str) -> tuple[list[Item], dict[str, Item], dict[str, Item]]:
    """Members, their stored preferences and their users: two Queries and one BatchGet."""
    members = store.query_all(keys.org_pk(org), sk_prefix="MEMBER#")
    stored = {i["user_id"]: i for i in store.query_all(keys.org_pk(org), sk_prefix="NOTIFY#")}
    users = {u["id"]: u for u in store.batch_get([keys.user(m["user_id"]) for m in members])} if members else {}
    return members, stored, users


def list_preferences(store: Store, auth: AuthContext) -> list[models.NotificationPreferences]:
    members, stored, users = _members(store, auth.org_id)
    return [_view(m, stored.get(m["user_id"]), users.get(m["user_id"])) for m in members]


def recipients(store: Store, org: str, topic: str) -> list[str]:
    """E-mail addresses of the members who get `topic`."""
    members, stored, users = _members(store, org)
    out = []
    for m in members:
        email = (users.get(m["user_id"]) or {}).get("email") or m.get("user_email")
        if email and effective(m["role"], stored.get(m["user_id"]))[topic]:
            out.append(str(email).lower())
    return out


def _resolve(auth: AuthContext, user_id: str) -> str:
    """`me` is the signed-in user; an API key is nobody's member (even though it records the user who made it)."""
    if user_id == "me":
        if auth.principal_type != "session" or not auth.user_id:
            raise NotFound("An API key is not a member: name the member's user id.")
        return auth.user_id
    return user_id


def _read(store: Store, org: str, user_id: str) -> tuple[Item, Item | None, Item | None]:
    """Member, stored preferences and user in one BatchGetItem; 404 when the user is not a member."""
    rows = store.batch_get([keys.member(org, user_id), prefs_key(org, user_id), keys.user(user_id)], consistent=True)
    by_sk = {(r["PK"], r["SK"]): r for r in rows}
    member = by_sk.get((keys.org_pk(org), f"MEMBER#{user_id}"))
    if member is None:
        raise NotFound("No such member.")
    return member, by_sk.get((keys.org_pk(org), f"NOTIFY#{user_id}")), by_sk.get((f"USER#{user_id}", "USER"))


def get(store: Store, auth: AuthContext, user_id: str) -> models.NotificationPreferences:
    uid = _resolve(auth, user_id)
    return _view(*_read(store, auth.org_id, uid))


def put(
    store: Store, auth: AuthContext, user_id: str, body: models.NotificationPreferencesPut
) -> models.NotificationPreferences:
    org, uid = auth.org_id, _resolve(auth, user_id)
    member, stored, user = _read(store, org, uid)
    emails = {k: v for k, v in body.emails.model_dump().items() if v is not None}
    before = effective(member["role"], stored)
    version = int((stored or {}).get("version") or 0)
    new: Item = {
        **prefs_key(org, uid),
        "entity": "NotificationPreferences",
        "user_id": uid,
        "emails": emails,
        "updated_at": clock.now_iso(),
        "version": version + 1,
    }
    after = effective(member["role"], new)
    store.transact(
        [
            Put(
                item=new,
                **versioned(version or None),
                error=Conflict("The preferences changed meanwhile; retry."),
            ),
            ConditionCheck(
                key=keys.member(org, uid), condition="attribute_exists(PK)", error=NotFound("No such member.")
            ),
            audit_put(
                auth,
                "notifications.updated",
                "member",
                uid,
                before={k: v for k, v in before.items() if after[k] != v},
                after={k: v for k, v in after.items() if before[k] != v},
            ),
        ]
    )
    return _view(member, new, user)
