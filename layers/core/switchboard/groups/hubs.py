"""Group hubs (Switchboard's own folders of groups: no provider involved; a group may sit in several hubs) and
communities (the provider's: a community on one channel links groups of that channel, each in at most one community).
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict, ValidationFailed
from switchboard.groups import common, models, service
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import Put, Store, TxOp, Update

Item = dict[str, Any]
MAX_HUB_GROUPS = 500
MAX_COMMUNITY_GROUPS = 50  # one transaction: the community and every linked group


def hub_key(org: str, hub_id: str) -> dict[str, str]:
    return common.org_key(org, f"GROUPHUB#{hub_id}")


def hub_name_key(org: str, name: str) -> dict[str, str]:
    return common.org_key(org, f"GROUPHUBNAME#{name.strip().casefold()}")


def community_key(org: str, community_id: str) -> dict[str, str]:
    return common.org_key(org, f"COMMUNITY#{community_id}")


def hub_view(item: Item) -> models.GroupHub:
    ids = list(item.get("group_ids") or [])
    return models.GroupHub.model_validate({**item, "group_ids": ids, "group_count": len(ids)})


def community_view(item: Item) -> models.Community:
    return models.Community.model_validate({**item, "group_ids": list(item.get("group_ids") or [])})


# Hubs --------------------------------------------------------------------------------------------------------------
def create_hub(store: Store, auth: AuthContext, body: models.GroupHubCreate) -> models.GroupHub:
    org, now, hub_id = auth.org_id, clock.now_iso(), new_id("gh")
    groups = service.resolve_many(store, org, body.group_ids)
    item: Item = {
        **hub_key(org, hub_id),
        "entity": "GroupHub",
        "id": hub_id,
        "organization_id": org,
        "name": body.name,
        "description": body.description or "",
        "group_ids": [g["id"] for g in groups],
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    store.transact(
        [
            Put(
                item={**hub_name_key(org, body.name), "entity": "GroupHubName", "hub_id": hub_id},
                condition="attribute_not_exists(PK)",
                error=Conflict("A group hub with this name already exists."),
            ),
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(auth, "group_hub.created", "group_hub", hub_id, after={"name": body.name}),
        ]
    )
    return hub_view(item)


def list_hubs(
    store: Store, auth: AuthContext, *, limit: int, cursor: str | None
) -> tuple[list[models.GroupHub], str | None]:
    items, nxt = cursor_page(
        store, auth.org_id, query_fingerprint("group-hubs", {}), cursor, limit=limit, sk_prefix="GROUPHUB#"
    )
    return [hub_view(i) for i in items], nxt


def hub_groups(store: Store, auth: AuthContext, hub_id: str, refs: list[str], *, add: bool) -> models.GroupHub:
    """Adds or removes groups (ids or JIDs of the organization's groups; an unknown one is 404)."""
    org = auth.org_id
    hub = store.get(hub_key(org, hub_id), consistent=True)
    if hub is None:
        raise common.not_found("group hub")
    ids = [g["id"] for g in service.resolve_many(store, org, refs)]
    current = list(hub.get("group_ids") or [])
    wanted = [*current, *(i for i in ids if i not in current)] if add else [i for i in current if i not in ids]
    if wanted == current:
        return hub_view(hub)
    if len(wanted) > MAX_HUB_GROUPS:
        raise Conflict(f"A group hub holds at most {MAX_HUB_GROUPS} groups.")
    new, put = common.bump(hub, {"group_ids": wanted}, Conflict("The group hub changed meanwhile; retry."))
    store.transact([put])
    return hub_view(new)


# Communities -------------------------------------------------------------------------------------------------------
def _linkable(groups: list[Item], channel_id: str, community_id: str | None) -> None:
    for g in groups:
        if g["channel_id"] != channel_id:
            raise ValidationFailed.field("body.group_ids", f"{g['id']} is on another channel than the community")
        if g.get("status") != "active" or g.get("self_role") not in service.ADMINS:
            raise Conflict(f"The channel must be an admin of {g['id']} to link it.", details=[{"group_id": g["id"]}])
        if g.get("community_id") and g["community_id"] != community_id:
            raise Conflict(
                f"{g['id']} already belongs to another community.",
                details=[{"group_id": g["id"], "community_id": g["community_id"]}],
            )


def _link_op(org: str, group: Item, community_id: str | None) -> Update:
    """The group's `community_id`, guarded by the version read (so a concurrent link of the same group loses)."""
    expression = "SET #c = :c, #v = #v + :one, #u = :now" if community_id else "REMOVE #c SET #v = #v + :one, #u = :now"
    values: dict[str, Any] = {":read": group.get("version", 1), ":one": 1, ":now": clock.now_iso()}
    if community_id:
        values[":c"] = community_id
    return Update(
        key=service.group_key(org, group["id"]),
        expression=expression,
        condition="#v = :read",
        names={"#c": "community_id", "#v": "version", "#u": "updated_at"},
        values=values,
        error=Conflict(f"The group {group['id']} changed meanwhile; retry."),
    )


def create_community(store: Store, auth: AuthContext, body: models.CommunityCreate) -> models.Community:
    org = auth.org_id
    if len(body.group_ids) > MAX_COMMUNITY_GROUPS:
        raise ValidationFailed.field("body.group_ids", f"link at most {MAX_COMMUNITY_GROUPS} groups at once")
    channel, provider = common.adapter(store, org, body.channel_id, "groups")
    groups = service.resolve_many(store, org, body.group_ids)
    community_id, now = new_id("cm"), clock.now_iso()
    _linkable(groups, channel["id"], community_id)
    made = provider.groups(
        "create_community",
        {"community_id": community_id, "name": body.name, "description": body.description or ""},
    )
    if groups:
        provider.groups("link", {"community_jid": made["jid"], "group_jids": [g["jid"] for g in groups]})
    item: Item = {
        **community_key(org, community_id),
        "entity": "Community",
        "id": community_id,
        "organization_id": org,
        "channel_id": channel["id"],
        "jid": str(made["jid"]).lower(),
        "announcement_group_jid": made.get("announcement_group_jid"),
        "name": body.name,
        "description": body.description or "",
        "group_ids": [g["id"] for g in groups],
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            *(_link_op(org, g, community_id) for g in groups),
            audit_put(auth, "community.created", "community", community_id, after={"name": body.name}),
        ]
    )
    return community_view(item)


def list_communities(
    store: Store, auth: AuthContext, *, limit: int, cursor: str | None, channel_id: str | None
) -> tuple[list[models.Community], str | None]:
    items, nxt = cursor_page(
        store,
        auth.org_id,
        query_fingerprint("communities", {"channel_id": channel_id}),
        cursor,
        limit=limit,
        sk_prefix="COMMUNITY#",
        filters={"channel_id": channel_id},
    )
    return [community_view(i) for i in items], nxt


def community_groups(
    store: Store, auth: AuthContext, body: models.CommunityGroupsRequest, *, add: bool
) -> models.Community:
    """Links groups of the community's channel (the channel must administer them) or unlinks them."""
    org = auth.org_id
    community = store.get(community_key(org, body.community_id), consistent=True)
    if community is None:
        raise common.not_found("community")
    groups = service.resolve_many(store, org, body.group_ids)
    _, provider = common.adapter(store, org, community["channel_id"], "groups")
    current = list(community.get("group_ids") or [])
    if add:
        if len(groups) > MAX_COMMUNITY_GROUPS:
            raise ValidationFailed.field("body.group_ids", f"link at most {MAX_COMMUNITY_GROUPS} groups at once")
        _linkable(groups, community["channel_id"], community["id"])
        moving = [g for g in groups if g["id"] not in current]
    else:
        moving = [g for g in groups if g["id"] in current]
    if not moving:
        return community_view(community)
    provider.groups(
        "link" if add else "unlink", {"community_jid": community["jid"], "group_jids": [g["jid"] for g in moving]}
    )
    moved = {g["id"] for g in moving}
    wanted = [*current, *(g["id"] for g in moving)] if add else [i for i in current if i not in moved]
    new, put = common.bump(community, {"group_ids": wanted}, Conflict("The community changed meanwhile; retry."))
    ops: list[TxOp] = [put, *(_link_op(org, g, community["id"] if add else None) for g in moving)]
    store.transact(ops)
    return community_view(new)
