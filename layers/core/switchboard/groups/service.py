"""Groups: kept in the table (one record per channel and group) and carried out through the channel's provider.

A group is named by its id (`grp_…`) or its JID (`120363…@g.us`); a JID can name the same WhatsApp group on several
of the organization's channels, so `channel_id` picks one when it does. The provider is called first and the record
written after it, with the `version` read as the write's condition (a concurrent change is 409 `conflict`).
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard import media as s3_media
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.contacts.identifiers import numbers_for
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.groups import common, models
from switchboard.groups.common import resolve
from switchboard.groups.keys import group_key, invite_key, jid_key, request_key
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers.base import GroupEvent, Provider
from switchboard.store import Put, Store, TxOp, keys

Item = dict[str, Any]
MAX_PARTICIPANTS = 1023  # WhatsApp's 1024 members, the channel itself included
ADMINS = ("admin", "superadmin")
DONE = {"add": "added", "remove": "removed", "promote": "promoted", "demote": "demoted"}


def _changed() -> Conflict:
    return Conflict("The group changed meanwhile; retry.")


def view(item: Item) -> models.Group:
    participants = list(item.get("participants") or [])
    return models.Group.model_validate(
        {
            **item,
            "participants": participants,
            "participant_count": len(participants),
            "invite_link": common.group_link(item.get("invite_code")) if item.get("self_role") in ADMINS else None,
        }
    )


# Lookups -----------------------------------------------------------------------------------------------------------
def resolve_many(store: Store, org: str, refs: list[str]) -> list[Item]:
    """Groups by id or JID, in the order given, duplicates dropped; any unknown one is 404."""
    by_id = {i["id"]: i for i in store.batch_get([group_key(org, r) for r in refs if r.startswith("grp_")])}
    out: list[Item] = []
    for ref in refs:
        try:
            item = by_id.get(ref) if ref.startswith("grp_") else resolve(store, org, ref)
        except ValidationFailed:
            raise ValidationFailed.field(
                "body.group_ids", f"{ref} is on several of your channels: give its group id (grp_…)"
            ) from None
        if item is None:
            raise NotFound(f"No such group: {ref}.", details=[{"group": ref}])
        if all(o["id"] != item["id"] for o in out):
            out.append(item)
    return out


def get(store: Store, auth: AuthContext, ref: str, channel_id: str | None = None) -> models.Group:
    return view(resolve(store, auth.org_id, ref, channel_id))


def list_groups(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    channel_id: str | None = None,
    status: str | None = None,
    mine: bool = False,
) -> tuple[list[models.Group], str | None]:
    """Every stored group (filters: channel, status); `mine`: the active groups the channel administers."""
    org = auth.org_id
    filters: dict[str, Any] = {"channel_id": channel_id, "status": "active" if mine else status}
    if mine:
        filters["self_role"] = list(ADMINS)
    fingerprint = query_fingerprint("groups", {**filters, "mine": mine})
    items, nxt = cursor_page(store, org, fingerprint, cursor, limit=limit, sk_prefix="GROUP#", filters=filters)
    return [view(i) for i in items], nxt


def channel_groups(store: Store, auth: AuthContext, channel_id: str) -> list[models.Group]:
    """`GET /v1/channels/{id}/groups`: the channel's active groups as its provider reports them (the sandbox echoes
    what the table holds)."""
    org = auth.org_id
    _, provider = common.adapter(store, org, channel_id, "groups", connected=False)
    known = store.query_all(
        keys.org_pk(org),
        sk_prefix="GROUP#",
        filter_expression="#c = :c AND #s = :s",
        names={"#c": "channel_id", "#s": "status"},
        values={":c": channel_id, ":s": "active"},
    )
    reported = provider.groups("list", {"known": [{"jid": i["jid"], "id": i["id"]} for i in known]})
    jids = {g.get("jid") for g in reported.get("groups") or []}
    return [view(i) for i in known if i["jid"] in jids]


# Create ------------------------------------------------------------------------------------------------------------
def _participants(rows: list[dict[str, Any]], now: str) -> list[Item]:
    return [{"phone": r["phone"], "role": r.get("role") or "member", "added_at": now} for r in rows]


def create(
    store: Store, auth: AuthContext, body: models.GroupCreate
) -> tuple[models.Group, list[models.ParticipantResult]]:
    """Creates the group at the provider with the channel as its creator (`superadmin`); numbers the provider refuses
    are returned in `failed` and left out."""
    org = auth.org_id
    wanted = common.phones(body.participants, "body.participants", numbers_for(store, org))
    if len(wanted) > MAX_PARTICIPANTS:
        raise ValidationFailed.field("body.participants", f"a group holds at most {MAX_PARTICIPANTS} participants")
    channel, provider = common.adapter(store, org, body.channel_id, "groups")
    group_id, now = new_id("grp"), clock.now_iso()
    made = provider.groups(
        "create",
        {"group_id": group_id, "name": body.name, "description": body.description or "", "participants": wanted},
    )
    if made.get("pending"):
        return _create_pending(store, auth, channel, group_id, body, made, now)
    jid = common.group_jid(str(made["jid"]))
    item: Item = {
        **group_key(org, group_id),
        "entity": "Group",
        "id": group_id,
        "organization_id": org,
        "channel_id": channel["id"],
        "jid": jid,
        "name": body.name,
        "description": body.description or "",
        "participants": _participants(made.get("participants") or [], now),
        "self_role": "superadmin",
        "status": "active",
        "invite_code": made.get("invite_code"),
        "invite_revision": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    ops: list[TxOp] = [
        Put(item=item, condition="attribute_not_exists(PK)"),
        Put(
            item={**jid_key(org, jid, channel["id"]), "entity": "GroupJid", "group_id": group_id},
            condition="attribute_not_exists(PK)",
            error=Conflict("This group is already stored for the channel.", details=[{"group_jid": jid}]),
        ),
        audit_put(auth, "group.created", "group", group_id, after={"jid": jid, "name": body.name}),
    ]
    if item["invite_code"]:
        ops.append(_invite_put(org, item["invite_code"], group_id))
    store.transact(ops)
    failed = [
        models.ParticipantResult(phone=f["phone"], status="failed", reason=f.get("reason"))
        for f in made.get("failed") or []
    ]
    return view(item), failed


def _create_pending(
    store: Store,
    auth: AuthContext,
    channel: Item,
    group_id: str,
    body: models.GroupCreate,
    made: Item,
    now: str,
) -> tuple[models.Group, list[models.ParticipantResult]]:
    """A provider that creates groups asynchronously (Meta's Cloud API) answered a request id: the record waits in
    `status: creating` (no `jid`) until the provider's event with that request id completes it (`apply_event`)."""
    org, request_id = auth.org_id, str(made["request_id"])
    item: Item = {
        **group_key(org, group_id),
        "entity": "Group",
        "id": group_id,
        "organization_id": org,
        "channel_id": channel["id"],
        "jid": None,
        "name": body.name,
        "description": body.description or "",
        "participants": [],
        "self_role": "superadmin",
        "status": "creating",
        "provider_request_id": request_id,
        "invite_code": None,
        "invite_revision": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(
                item={**request_key(org, channel["id"], request_id), "entity": "GroupRequest", "group_id": group_id},
                condition="attribute_not_exists(PK)",
                error=Conflict(
                    "The provider answered a request id already used.", details=[{"request_id": request_id}]
                ),
            ),
            audit_put(auth, "group.created", "group", group_id, after={"request_id": request_id, "name": body.name}),
        ]
    )
    failed = [
        models.ParticipantResult(phone=f["phone"], status="failed", reason=f.get("reason"))
        for f in made.get("failed") or []
    ]
    return view(item), failed


def _invite_put(org: str, code: str, group_id: str) -> Put:
    return Put(item={**invite_key(org, code), "entity": "GroupInvite", "group_id": group_id, "revoked": False})


# Changes -----------------------------------------------------------------------------------------------------------
def _active(
    store: Store, auth: AuthContext, ref: str, channel_id: str | None, *, admin: bool = False
) -> tuple[Item, Provider]:
    org = auth.org_id
    group = resolve(store, org, ref, channel_id, consistent=True)
    _, provider = common.adapter(store, org, group["channel_id"], "groups")
    if group.get("status") == "creating":
        raise Conflict("The provider is still creating this group; retry once it is active.")
    if group.get("status") != "active":
        raise Conflict("The channel has left this group; join it again first.")
    if admin and group.get("self_role") not in ADMINS:
        raise Conflict("The channel is not an admin of this group.")
    return group, provider


def _save(store: Store, group: Item, changes: Item, *extra: TxOp) -> Item:
    new, put = common.bump(group, changes, _changed())
    store.transact([put, *extra])
    return new


def rename(store: Store, auth: AuthContext, ref: str, name: str, channel_id: str | None = None) -> models.Group:
    group, provider = _active(store, auth, ref, channel_id)
    if group["name"] == name:
        return view(group)
    provider.groups("set_name", {"jid": group["jid"], "name": name})
    return view(_save(store, group, {"name": name}))


def describe(
    store: Store, auth: AuthContext, ref: str, description: str, channel_id: str | None = None
) -> models.Group:
    group, provider = _active(store, auth, ref, channel_id)
    if group.get("description", "") == description:
        return view(group)
    provider.groups("set_description", {"jid": group["jid"], "description": description})
    return view(_save(store, group, {"description": description}))


def set_photo(
    store: Store, auth: AuthContext, ref: str, body: models.PhotoChange, channel_id: str | None = None
) -> models.Group:
    # on first use: keeps switchboard.messaging.media off the cold start
    from switchboard.messaging import media

    group, provider = _active(store, auth, ref, channel_id)
    payload: Item = {"jid": group["jid"], "image_url": body.image_url, "asset_id": body.asset_id, "remove": body.remove}
    if body.asset_id:
        media.get_asset(store, auth, body.asset_id)  # 404 unless it is the organization's upload
        asset = store.get(common.org_key(auth.org_id, f"ASSET#{body.asset_id}"))
        if asset and asset.get("object_key") and provider.platform == "whatsapp_cloud":  # Meta takes the file itself
            # on first use: keeps switchboard.providers.whatsapp_cloud off the cold start
            from switchboard.providers.whatsapp_cloud import GROUP_PHOTO_MAX

            data = s3_media.read_object(str(asset["object_key"]), GROUP_PHOTO_MAX)
            if data is None:
                raise ValidationFailed.field("body.asset_id", "has no uploaded file yet")
            payload["image_bytes"], payload["mime_type"] = data, str(asset.get("content_type") or "")
        elif asset and asset.get("object_key") and provider.platform != "sandbox":  # engines fetch it by URL
            payload["asset_url"] = s3_media.presign_download(str(asset["object_key"]))[0]
    answer = provider.groups("set_photo", payload)
    photo = None
    if not body.remove:
        photo = {
            "url": body.image_url,
            "asset_id": body.asset_id,
            "provider_photo_id": answer.get("photo_id"),
            "updated_at": clock.now_iso(),
        }
    return view(_save(store, group, {"photo": photo}))


def change_participants(
    store: Store, auth: AuthContext, ref: str, body: models.ParticipantsChange, channel_id: str | None = None
) -> models.ParticipantsResult:
    """Adds, removes, promotes or demotes; each number gets its own result (`unchanged` / `not_participant` when
    there is nothing to do, `failed` when the provider refuses it). Only the numbers that change reach the provider."""
    # a number joining is checked like any new number; the others name participants the provider already listed
    numbers = numbers_for(store, auth.org_id, possible_only=body.action != "add")
    wanted = common.phones(body.participants, "body.participants", numbers)
    group, provider = _active(store, auth, ref, channel_id, admin=True)
    current: dict[str, Item] = {p["phone"]: dict(p) for p in group.get("participants") or []}
    results: dict[str, models.ParticipantResult] = {}
    to_call: list[str] = []
    for phone in wanted:
        member = current.get(phone)
        if body.action == "add":
            status = "unchanged" if member else None
        elif member is None:
            status = "not_participant"
        elif body.action == "promote":
            status = "unchanged" if member["role"] in ADMINS else None
        elif body.action == "demote" and member["role"] == "superadmin":
            results[phone] = models.ParticipantResult(phone=phone, status="failed", reason="is the group's creator")
            continue
        else:
            status = "unchanged" if body.action == "demote" and member["role"] == "member" else None
        if status:
            results[phone] = models.ParticipantResult(phone=phone, status=status)  # type: ignore[arg-type]
        else:
            to_call.append(phone)
    if body.action == "add" and len(current) + len(to_call) > MAX_PARTICIPANTS:
        raise Conflict(f"A group holds at most {MAX_PARTICIPANTS} participants besides the channel.")
    if to_call:
        answer = provider.groups("participants", {"jid": group["jid"], "action": body.action, "participants": to_call})
        now = clock.now_iso()
        for row in answer.get("results") or []:
            phone = row["phone"]
            if phone not in to_call:
                continue
            if row.get("status") != "ok":
                results[phone] = models.ParticipantResult(phone=phone, status="failed", reason=row.get("reason"))
                continue
            if body.action == "add":
                current[phone] = {"phone": phone, "role": "member", "added_at": now}
            elif body.action == "remove":
                current.pop(phone, None)
            else:
                current[phone]["role"] = "admin" if body.action == "promote" else "member"
            results[phone] = models.ParticipantResult(phone=phone, status=DONE[body.action])  # type: ignore[arg-type]
    if any(r.status == DONE[body.action] for r in results.values()):
        group = _save(store, group, {"participants": list(current.values())})
    ordered = [results[p] for p in wanted if p in results]
    return models.ParticipantsResult(action=body.action, results=ordered, group=view(group))


# Invite links, join, leave -----------------------------------------------------------------------------------------
def invite_link(
    store: Store, auth: AuthContext, ref: str, *, revoke: bool, channel_id: str | None = None
) -> models.InviteLink:
    """The group's invite link (admins only); `revoke` resets it at the provider: the old code stops working."""
    org = auth.org_id
    group, provider = _active(store, auth, ref, channel_id, admin=True)
    code = group.get("invite_code")
    if revoke or not code:
        revision = int(group.get("invite_revision", 0)) + (1 if code else 0)
        new_code = str(provider.groups("invite_code", {"jid": group["jid"], "revision": revision})["invite_code"])
        ops: list[TxOp] = [_invite_put(org, new_code, group["id"])]
        if code and code != new_code:
            old = {**invite_key(org, code), "entity": "GroupInvite", "group_id": group["id"], "revoked": True}
            ops.append(Put(item=old))
        group = _save(store, group, {"invite_code": new_code, "invite_revision": revision}, *ops)
    return models.InviteLink(
        group_id=group["id"],
        group_jid=group["jid"],
        invite_code=group["invite_code"],
        invite_link=common.group_link(group["invite_code"]) or "",
        revoked=revoke and bool(code),
    )


def join(store: Store, auth: AuthContext, channel_id: str, code: str, known: Item | None = None) -> models.Group:
    """Joins by invite code: a group the organization knows (its record on this channel is active again) or a new
    one (a record is created from what the provider tells)."""
    org = auth.org_id
    channel, provider = common.adapter(store, org, channel_id, "groups")
    invite = store.get(invite_key(org, code), consistent=True)
    if invite and invite.get("revoked"):
        raise NotFound("The invite link is not valid, or it was reset.")
    source = known or (store.get(group_key(org, invite["group_id"])) if invite else None)
    pointer_jid = source["jid"] if source else None
    if pointer_jid:
        pointer = store.get(jid_key(org, pointer_jid, channel_id), consistent=True)
        if pointer:
            mine = resolve(store, org, pointer["group_id"], consistent=True)
            if mine.get("status") == "active":
                raise Conflict("The channel is already in this group.", details=[{"group_id": mine["id"]}])
    answer = provider.groups("join", {"invite_code": code, "known_jid": pointer_jid})
    jid, now = common.group_jid(str(answer["jid"])), clock.now_iso()
    pointer = store.get(jid_key(org, jid, channel_id), consistent=True)
    if pointer:
        group = resolve(store, org, pointer["group_id"], consistent=True)
        if group.get("status") == "active":
            raise Conflict("The channel is already in this group.", details=[{"group_id": group["id"]}])
        changes = {"status": "active", "self_role": answer.get("role") or "member", "left_at": None}
        if not group.get("invite_code"):
            changes["invite_code"] = code
        return view(_save(store, group, changes))
    group_id = new_id("grp")
    base = source or {}
    item: Item = {
        **group_key(org, group_id),
        "entity": "Group",
        "id": group_id,
        "organization_id": org,
        "channel_id": channel["id"],
        "jid": jid,
        "name": answer.get("name") or base.get("name") or jid,
        "description": answer.get("description") or base.get("description") or "",
        "participants": _participants(answer.get("participants") or [], now)
        if "participants" in answer
        else list(base.get("participants") or []),
        "self_role": answer.get("role") or "member",
        "status": "active",
        "invite_code": code,
        "invite_revision": int(base.get("invite_revision", 0)),
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    ops: list[TxOp] = [
        Put(item=item, condition="attribute_not_exists(PK)"),
        Put(
            item={**jid_key(org, jid, channel["id"]), "entity": "GroupJid", "group_id": group_id},
            condition="attribute_not_exists(PK)",
            error=Conflict("The channel joined this group meanwhile.", details=[{"group_jid": jid}]),
        ),
        audit_put(auth, "group.joined", "group", group_id, after={"jid": jid}),
    ]
    if not invite:
        ops.append(_invite_put(org, code, group_id))
    store.transact(ops)
    return view(item)


def rejoin(store: Store, auth: AuthContext, ref: str, code: str | None, channel_id: str | None = None) -> models.Group:
    """`POST /v1/groups/{groupID}/join`: back into a group the channel left, with the given or the last known code."""
    group = resolve(store, auth.org_id, ref, channel_id, consistent=True)
    if group.get("status") == "active":
        raise Conflict("The channel is already in this group.", details=[{"group_id": group["id"]}])
    code = code or group.get("invite_code")
    if not code:
        raise ValidationFailed.field("body.invite_code", "no invite code is known for this group: give one")
    return join(store, auth, group["channel_id"], code, known=group)


def leave(store: Store, auth: AuthContext, ref: str, channel_id: str | None = None) -> models.Group:
    """The channel leaves; the record stays (`status: left`) so the group can be joined again."""
    group, provider = _active(store, auth, ref, channel_id)
    provider.groups("leave", {"jid": group["jid"]})
    now = clock.now_iso()
    new = _save(
        store,
        group,
        {"status": "left", "self_role": None, "left_at": now},
        audit_put(auth, "group.left", "group", group["id"], before={"status": "active"}, after={"status": "left"}),
    )
    return view(new)


# Provider events -----------------------------------------------------------------------------------------------------
_ROLES = {"join": "member", "promote": "admin", "demote": "member"}


def apply_event(store: Store, channel: Item, event: GroupEvent) -> bool:
    """A provider's group event updates the group's record on that channel (unknown groups are ignored; the record's
    `version` guards the write, read again once on a race). True when the record changed. An event carrying the
    engine's own time (`event_at`) is ordered by it: the record keeps, in `engine_event_at`, the time of the latest
    event applied to its info (`info`), to the channel's own membership (`self`) and to each participant (the
    phone), and an older event about the same thing changes nothing (engines post concurrently and retry)."""
    org = channel["organization_id"]
    me = str((channel.get("metadata") or {}).get("wa_id") or channel.get("phone_number") or "")
    if event.kind in ("created", "create_failed"):
        return _complete_create(store, channel, event)
    at = event.event_at
    for attempt in range(2):
        pointer = store.get(jid_key(org, common.group_jid(event.jid), channel["id"]), consistent=True)
        if pointer is None:
            return False
        group = store.get(group_key(org, pointer["group_id"]), consistent=True)
        if group is None:
            return False
        times: dict[str, Any] = dict(group.get("engine_event_at") or {})

        def current(subject: str, times: dict[str, Any] = times) -> bool:
            """The event is not older than the last one applied to `subject` (and stamps it)."""
            if at is None:
                return True
            if subject in times and at < int(times[subject]):
                return False
            times[subject] = at
            return True

        changes: Item = {}
        if event.kind == "left" or (
            event.kind == "participants" and event.action == "leave" and me in event.participants
        ):
            if current("self") and group.get("status") != "left":
                changes = {"status": "left", "left_at": clock.now_iso()}
        elif event.kind == "update":
            if current("info"):
                if event.name is not None and event.name != group.get("name"):
                    changes["name"] = event.name
                if event.description is not None and event.description != group.get("description"):
                    changes["description"] = event.description
        elif event.kind == "participants" and event.action in ("join", "leave", "promote", "demote"):
            members = {p["phone"]: dict(p) for p in group.get("participants") or []}
            now = clock.now_iso()
            for phone in event.participants:
                if phone == me or not current(phone):
                    continue
                if event.action == "leave":
                    members.pop(phone, None)
                elif event.action == "join":
                    members.setdefault(phone, {"phone": phone, "role": "member", "added_at": now})
                elif phone in members:
                    members[phone]["role"] = _ROLES[event.action]
            if list(members.values()) != list(group.get("participants") or []):
                changes["participants"] = list(members.values())
        stamped = times != (group.get("engine_event_at") or {})
        if not changes and not stamped:
            return False
        if stamped:
            changes["engine_event_at"] = times
        try:
            _save(store, group, changes)
            return set(changes) != {"engine_event_at"}
        except Conflict:
            if attempt:
                raise
    return False


def _complete_create(store: Store, channel: Item, event: GroupEvent) -> bool:
    """The provider's answer to an asynchronous create: the waiting record becomes `active` with the provider's id
    (and its JID pointer), or `failed`. Redelivered events change nothing (the record is no longer `creating`)."""
    org = channel["organization_id"]
    if not event.request_id:
        return False
    pointer = store.get(request_key(org, channel["id"], event.request_id), consistent=True)
    group = store.get(group_key(org, pointer["group_id"]), consistent=True) if pointer else None
    if group is None or group.get("status") != "creating":
        return False
    if event.kind == "create_failed":
        _save(store, group, {"status": "failed", "self_role": None})
        return True
    jid, now = common.group_jid(event.jid), clock.now_iso()
    me = str((channel.get("metadata") or {}).get("wa_id") or channel.get("phone_number") or "")
    changes: Item = {
        "jid": jid,
        "status": "active",
        "participants": [
            {"phone": p, "role": "member", "added_at": now} for p in dict.fromkeys(event.participants) if p != me
        ],
    }
    if event.name:
        changes["name"] = event.name
    if event.description is not None:
        changes["description"] = event.description
    try:
        _save(
            store,
            group,
            changes,
            Put(
                item={**jid_key(org, jid, channel["id"]), "entity": "GroupJid", "group_id": group["id"]},
                condition="attribute_not_exists(PK)",
                error=_changed(),
            ),
        )
    except Conflict:
        return False  # a concurrent delivery of the same event completed it
    return True
