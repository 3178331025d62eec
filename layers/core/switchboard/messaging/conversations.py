"""Conversations: one per (channel, contact), threading every message between them; state actions and the lock."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.errors import Conflict, Forbidden, NotFound, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.groups.keys import jid_key
from switchboard.ids import new_id
from switchboard.messaging import models
from switchboard.paging import cursor_page, query_fingerprint, read_page
from switchboard.store import Put, Store, TxOp, keys, shards, versioned

Item = dict[str, Any]
LOCK_TTL = timedelta(seconds=120)


def conv_key(org: str, conv_id: str) -> dict[str, str]:
    """Where a new conversation is written: its id's shard. A stored one is changed at its own key
    (`shards.key_of`): it may be in the legacy partition."""
    return keys.key(shards.pk(org, conv_id), f"CONV#{conv_id}")


def stored_key(store: Store, org: str, conv_id: str) -> dict[str, str]:
    """The key of a stored conversation (wherever it is), or of where it would be when there is none."""
    item = shards.get(store, org, conv_id, f"CONV#{conv_id}")
    return shards.key_of(item) if item else conv_key(org, conv_id)


def pair_key(org: str, channel_id: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CONVKEY#{channel_id}#{contact_id}")


def group_pair_key(org: str, channel_id: str, group_jid: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CONVGROUP#{channel_id}#{group_jid}")


def lock_key(org: str, conv_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CONV#{conv_id}#LOCK")


def list_pk(org: str) -> str:
    """The organization's conversations (GSI1), unsharded: conversations written before sharding."""
    return f"ORG#{org}#CONVS"


def messages_pk(org: str, conv_id: str) -> str:
    return f"ORG#{org}#CONV#{conv_id}"


def view(item: Item) -> models.Conversation:
    # an unreadable stored `muted_until` counts as absent: muted for good, until unmuted
    until = clock.parse_stored(item.get("muted_until"), "conversation muted_until")
    muted = bool(item.get("muted")) and (until is None or until > clock.now())
    muted_until = clock.iso(until) if until else None
    return models.Conversation.model_validate({**item, "muted": muted, "muted_until": muted_until})


def get_item(store: Store, org: str, conv_id: str, *, consistent: bool = False) -> Item:
    item = shards.get(store, org, conv_id, f"CONV#{conv_id}", consistent=consistent)
    if item is None:
        raise NotFound("No such conversation.")
    return item


def get_or_create(
    store: Store,
    org: str,
    channel_id: str,
    contact_id: str,
    pointer: Item | None = None,
    *,
    group_jid: str | None = None,
) -> Item:
    """The conversation of a channel and a contact; created once (a sentinel guards the pair). `pointer` is the
    pair item when the caller already read it (saves a round trip). With `group_jid`, the group's conversation on
    the channel instead (`CONVGROUP#` sentinel; no contact: each message names its sender)."""
    sentinel = group_pair_key(org, channel_id, group_jid) if group_jid else pair_key(org, channel_id, contact_id)
    for attempt in range(3):
        if attempt or pointer is None:
            pointer = store.get(sentinel, consistent=True)
        if pointer:
            return get_item(store, org, pointer["conversation_id"], consistent=True)
        now, conv_id = clock.now_iso(), new_id("cv")
        item: Item = {
            **conv_key(org, conv_id),
            "entity": "Conversation",
            "id": conv_id,
            "organization_id": org,
            "channel_id": channel_id,
            "contact_id": None if group_jid else contact_id,
            "status": "open",
            "archived": False,
            "muted": False,
            "pinned": False,
            "unread_count": 0,
            "assignee": None,
            "labels": [],
            "last_message_at": None,
            "created_at": now,
            "updated_at": now,
            "version": 1,
        }
        if group_jid:
            item |= {"group_jid": group_jid, "group_id": _group_id(store, org, channel_id, group_jid)}
        item |= index_attributes(org, item, now)
        try:
            store.transact(
                [
                    Put(
                        item={
                            **sentinel,
                            "entity": "ConversationKey",
                            "conversation_id": conv_id,
                        },
                        condition="attribute_not_exists(PK)",
                    ),
                    Put(item=item, condition="attribute_not_exists(PK)"),
                ]
            )
            return item
        except Conflict:
            continue
    raise Conflict("The conversation was created concurrently; retry.")


def _group_id(store: Store, org: str, channel_id: str, group_jid: str) -> str | None:
    """Our group record of that WhatsApp group on the channel, when we have one."""
    pointer = store.get(jid_key(org, group_jid.lower(), channel_id))
    return str(pointer["group_id"]) if pointer else None


def assignee_pk(org: str, assignee_id: str) -> str:
    """A conversation's list by assignee (a user's or a team's id, or `none`), on GSI2."""
    return f"ORG#{org}#CONVS#A#{assignee_id}"


def index_attributes(org: str, conv: Item, last_at: str) -> Item:
    """Both lists of a conversation, newest activity first: the organization's (GSI1) and its assignee's (GSI2),
    each in the conversation's shard (`<list>#<shard>`, read with an ordered merge)."""
    order = f"{last_at}#{conv['id']}"
    assignee = (conv.get("assignee") or {}).get("id") or "none"
    return {
        "GSI1PK": shards.index_pk(list_pk(org), conv["id"]),
        "GSI1SK": order,
        "GSI2PK": shards.index_pk(assignee_pk(org, assignee), conv["id"]),
        "GSI2SK": order,
    }


REINDEX_CHUNK = 100


def reindex_chunk(store: Store, org: str, start: dict[str, Any] | None) -> dict[str, Any] | None:
    """One resumable chunk of giving conversations written before the assignee list their GSI2 keys: a page of the
    organization's list (GSI1; the legacy unsharded one, where every such conversation is), one conditional
    UpdateItem per conversation that lacks them. The checkpoint to continue from, None when done."""
    page = store.query(list_pk(org), index="GSI1", limit=REINDEX_CHUNK, start_key=start)
    for conv in page.items:
        if conv.get("GSI2PK"):
            continue
        attrs = index_attributes(org, conv, str(conv["GSI1SK"]).rsplit("#", 1)[0])
        with contextlib.suppress(Conflict):  # changed meanwhile: that write gave it its keys
            store.update(
                shards.key_of(conv),
                "SET GSI2PK = :pk, GSI2SK = :sk",
                condition="attribute_exists(PK) AND attribute_not_exists(GSI2PK)",
                values={":pk": attrs["GSI2PK"], ":sk": attrs["GSI2SK"]},
                return_values="NONE",
            )
    return page.last_key


def touch_ops(
    org: str, conv: Item, *, at: str, preview: str, inbound: bool, occurred: datetime | None = None
) -> list[TxOp]:
    """The conversation's side of a new message, in the message's own transaction: last message, unread count,
    reopened (and unarchived) when closed; and its one `conversation.updated` event (`changes`: `preview` always, a
    new message either way, with `unread_count`, `status` and `archived` when they change)."""
    changes: Item = {
        "last_message_at": at,
        "last_message_preview": preview[:120],
        "updated_at": at,
    }
    if inbound:
        changes |= {
            "unread_count": int(conv.get("unread_count", 0)) + 1,
            "last_inbound_at": at,
            "status": "open",
            "archived": False,
        }
    new = {**conv, **changes, "version": int(conv.get("version", 1)) + 1}
    new |= index_attributes(org, new, at)
    changed = ["preview"] + [
        k for k in ("unread_count", "status", "archived") if k in changes and conv.get(k) != new[k]
    ]
    return [
        Put(
            item=new,
            **versioned(conv.get("version", 1)),
            error=Conflict("The conversation changed meanwhile; retry."),
        ),
        outbox_put(
            org,
            "conversation.updated",
            {
                "conversation_id": conv["id"],
                "status": new["status"],
                "organization_id": org,
                "changes": sorted(changed),
            },
            occurred=occurred,
        ),
    ]


def list_conversations(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    status: str | None,
    assignee: str | None,
    label: str | None,
    channel_id: str | None,
    unread: bool | None,
) -> tuple[list[models.Conversation], str | None]:
    org = auth.org_id
    params = {"status": status, "assignee": assignee, "label": label, "channel_id": channel_id, "unread": unread}
    fingerprint = query_fingerprint("conversations", params)

    def keep(i: Item) -> bool:
        a = i.get("assignee") or {}
        return (
            (not status or i["status"] == status)
            and (not channel_id or i["channel_id"] == channel_id)
            and (not label or label in (i.get("labels") or []))
            and (not assignee or a.get("id") == assignee or (assignee == "none" and not a))
            and (unread is None or (int(i.get("unread_count", 0)) > 0) == unread)
        )

    # An assignee filter reads that assignee's own list (GSI2), however rare its conversations are; either list is
    # an ordered merge of its shards and the legacy partition.
    index, pk = ("GSI2", assignee_pk(org, assignee)) if assignee else ("GSI1", list_pk(org))
    filtered = bool(status or label or channel_id) or unread is not None  # an assignee list needs no filter
    items, nxt = read_page(
        org,
        fingerprint,
        cursor,
        lambda state: shards.merged_state_page(
            store,
            state,
            pks=shards.index_pks(pk),
            index=index,
            limit=limit,
            forward=False,
            keep=keep if filtered else None,
        ),
    )
    return [view(i) for i in items], nxt


def messages(
    store: Store, auth: AuthContext, conv_id: str, limit: int, cursor: str | None
) -> tuple[list[models.ConversationMessage], str | None]:
    org = auth.org_id
    get_item(store, org, conv_id)
    fingerprint = query_fingerprint(f"conversation-messages:{conv_id}", {})
    rows, next_cursor = cursor_page(
        store, org, fingerprint, cursor, pk=messages_pk(org, conv_id), index="GSI2", forward=False, limit=limit
    )
    return (
        [models.ConversationMessage.model_validate(i) for i in rows],
        next_cursor,
    )


def _change(store: Store, auth: AuthContext, conv_id: str, changes: Item) -> models.Conversation:
    """Apply state changes; one `conversation.updated` event when something really changed."""
    org = auth.org_id
    item = get_item(store, org, conv_id, consistent=True)
    changed = {k: v for k, v in changes.items() if item.get(k) != v}
    if not changed:
        return view(item)
    new = {**item, **changed, "updated_at": clock.now_iso(), "version": int(item.get("version", 1)) + 1}
    new |= index_attributes(org, new, str(item["GSI1SK"]).rsplit("#", 1)[0])
    store.transact(
        [
            Put(
                item=new,
                **versioned(item.get("version", 1)),
                error=Conflict("The conversation changed meanwhile; retry."),
            ),
            outbox_put(
                org,
                "conversation.updated",
                {
                    "conversation_id": conv_id,
                    "status": new["status"],
                    "organization_id": org,
                    "changes": sorted(changed),
                },
            ),
        ]
    )
    return view(new)


ACTIONS: dict[str, Item] = {
    "archive": {"archived": True},
    "unarchive": {"archived": False},
    "close": {"status": "closed"},
    "reopen": {"status": "open"},
    "pin": {"pinned": True},
    "unpin": {"pinned": False},
    "unmute": {"muted": False, "muted_until": None},
    "read": {"unread_count": 0},
}


def act(store: Store, auth: AuthContext, conv_id: str, action: str) -> models.Conversation:
    return _change(store, auth, conv_id, ACTIONS[action])


def mute(store: Store, auth: AuthContext, conv_id: str, body: models.MuteRequest) -> models.Conversation:
    if body.until and clock.parse_iso_input(body.until, "body.until") <= clock.now():
        raise ValidationFailed.field("body.until", "must be in the future")
    return _change(store, auth, conv_id, {"muted": True, "muted_until": body.until})


def assign(store: Store, auth: AuthContext, conv_id: str, body: models.AssignRequest) -> models.Conversation:
    if body.user_id and body.team_id:
        raise ValidationFailed.field("body", "give user_id or team_id, not both")
    org = auth.org_id
    assignee = None
    if body.user_id:
        if store.get(keys.member(org, body.user_id)) is None:
            raise NotFound("No such member.")
        assignee = {"type": "user", "id": body.user_id}
    elif body.team_id:
        if store.get(keys.key(keys.org_pk(org), f"TEAM#{body.team_id}")) is None:
            raise NotFound("No such team.")
        assignee = {"type": "team", "id": body.team_id}
    return _change(store, auth, conv_id, {"assignee": assignee})


def get(store: Store, auth: AuthContext, conv_id: str) -> models.Conversation:
    return view(get_item(store, auth.org_id, conv_id))


# Lock --------------------------------------------------------------------------------------------------------------
def _lock_view(item: Item) -> models.ConversationLock:
    return models.ConversationLock.model_validate(item)


def claim_lock(store: Store, auth: AuthContext, conv_id: str, body: models.LockRequest) -> models.ConversationLock:
    """Claim or refresh: the owner is the calling user (or API key); 120 s from the last refresh."""
    org = auth.org_id
    get_item(store, org, conv_id)
    owner = auth.user_id if auth.principal_type == "session" and auth.user_id else auth.principal_id
    now = clock.now()
    item = {
        **lock_key(org, conv_id),
        "entity": "ConversationLock",
        "conversation_id": conv_id,
        "organization_id": org,
        "lock_owner_id": owner,
        "lock_owner_name": body.lock_owner_name,
        "draft_id": body.draft_id,
        "expires_at": clock.iso(now + LOCK_TTL),
        "expires_epoch_ms": int((now + LOCK_TTL).timestamp() * 1000),
        "updated_at": clock.iso(now),
        "ttl": clock.epoch(now + LOCK_TTL) + 3600,
    }
    try:
        store.put(
            item,
            condition="attribute_not_exists(PK) OR lock_owner_id = :me OR expires_epoch_ms < :now",
            values={":me": owner, ":now": int(now.timestamp() * 1000)},
        )
    except Conflict:
        current = store.get(lock_key(org, conv_id), consistent=True)
        details = [_lock_view(current).model_dump()] if current else []
        raise Conflict("Another user holds the lock on this conversation.", code="lock_held", details=details) from None
    return _lock_view(item)


def release_lock(store: Store, auth: AuthContext, conv_id: str) -> None:
    """The owner (or an admin) releases the lock; releasing a lock nobody holds is a no-op."""
    org = auth.org_id
    get_item(store, org, conv_id)
    current = store.get(lock_key(org, conv_id), consistent=True)
    if current is None:
        return
    owner = auth.user_id if auth.principal_type == "session" and auth.user_id else auth.principal_id
    expired = int(current.get("expires_epoch_ms", 0)) < int(clock.now().timestamp() * 1000)
    if current["lock_owner_id"] != owner and not expired and not auth.has_role("admin"):
        raise Forbidden("Only the lock's owner or an admin can release it.")
    store.delete(
        lock_key(org, conv_id), condition="lock_owner_id = :owner", values={":owner": current["lock_owner_id"]}
    )
