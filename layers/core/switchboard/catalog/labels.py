"""Labels: an organization's catalogue (name unique per organization, colour), attached to conversations (their
`labels` list, which `GET /v1/conversations?label=` filters on) and to messages; mirrored at the channel's provider
when it supports labels (best effort: the stored state is the truth)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Literal

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.catalog import models
from switchboard.errors import Conflict, DomainError, NotFound, UnsupportedByProvider, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.jobs import service as jobs
from switchboard.lazy import lazy_module
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers import ProviderUnavailable, provider_for
from switchboard.store import ConditionCheck, Delete, Put, Store, TxOp, Update, keys, shards, versioned

if TYPE_CHECKING:
    from switchboard.messaging import channels, conversations, status
else:  # the messaging models when a label route first reaches a channel or a conversation, not when labels load
    channels = lazy_module("switchboard.messaging.channels")
    conversations = lazy_module("switchboard.messaging.conversations")
    status = lazy_module("switchboard.messaging.status")

DETACH_JOB = "label.detach"  # the job that detaches a deleted label everywhere (switchboard.catalog.label_jobs)
Item = dict[str, Any]
ProviderSync = Literal["synced", "unsupported", "failed"]


def label_key(org: str, label_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"LABEL#{label_id}")


def name_key(org: str, name: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"LABELNAME#{name.strip().casefold()}")


def conv_link_key(org: str, label_id: str, conv_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"LBLCONV#{label_id}#{conv_id}")


def msg_link_key(org: str, label_id: str, message_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"LBLMSG#{label_id}#{message_id}")


class _Changed(Conflict):
    """The target changed between read and write: read again."""


def view(item: Item) -> models.Label:
    return models.Label.model_validate(item)


def get_item(store: Store, org: str, label_id: str, *, consistent: bool = False) -> Item:
    return store.require(label_key(org, label_id), "No such label.", consistent=consistent)


def _name_taken() -> Conflict:
    return Conflict("A label with this name already exists.")


# Catalogue ---------------------------------------------------------------------------------------------------------
def create(store: Store, auth: AuthContext, body: models.LabelCreate) -> models.Label:
    org, now, label_id = auth.org_id, clock.now_iso(), new_id("lb")
    item: Item = {
        **label_key(org, label_id),
        "entity": "Label",
        "id": label_id,
        "organization_id": org,
        "name": body.name,
        "color": body.color.lower(),
        "description": body.description,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    store.transact(
        [
            Put(
                item={**name_key(org, body.name), "entity": "LabelName", "label_id": label_id},
                condition="attribute_not_exists(PK)",
                error=_name_taken(),
            ),
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(auth, "label.created", "label", label_id, after={"name": body.name, "color": item["color"]}),
        ]
    )
    return view(item)


def by_name(store: Store, org: str, name: str) -> Item | None:
    pointer = store.get(name_key(org, name), consistent=True)
    return store.get(label_key(org, pointer["label_id"]), consistent=True) if pointer else None


def list_labels(
    store: Store, auth: AuthContext, limit: int, cursor: str | None
) -> tuple[list[models.Label], str | None]:
    org = auth.org_id
    fingerprint = query_fingerprint("labels", {})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix="LABEL#", limit=limit)
    return [view(i) for i in rows], next_cursor


def get(store: Store, auth: AuthContext, label_id: str) -> models.Label:
    return view(get_item(store, auth.org_id, label_id))


def update(store: Store, auth: AuthContext, label_id: str, body: models.LabelUpdate) -> models.Label:
    org = auth.org_id
    item = get_item(store, org, label_id, consistent=True)
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k == "description"}
    if "name" in changes and changes["name"] is None:
        raise ValidationFailed.field("body.name", "cannot be null")
    if changes.get("color"):
        changes["color"] = changes["color"].lower()
    changes = {k: v for k, v in changes.items() if item.get(k) != v}
    if not changes:
        return view(item)
    new = {**item, **changes, "updated_at": clock.now_iso(), "version": int(item["version"]) + 1}
    ops: list[TxOp] = [
        Put(
            item=new,
            **versioned(item["version"]),
            error=Conflict("The label changed meanwhile; retry."),
        ),
        audit_put(auth, "label.updated", "label", label_id, before={k: item.get(k) for k in changes}, after=changes),
    ]
    if "name" in changes and name_key(org, changes["name"]) != name_key(org, item["name"]):
        ops += [
            Put(
                item={**name_key(org, changes["name"]), "entity": "LabelName", "label_id": label_id},
                condition="attribute_not_exists(PK)",
                error=_name_taken(),
            ),
            Delete(key=name_key(org, item["name"])),
        ]
    store.transact(ops)
    return view(new)


def delete(store: Store, auth: AuthContext, label_id: str) -> None:
    """Deletes the label from the catalogue at once (no attach succeeds after); the `label.detach` job then detaches
    it from every conversation (one `conversation.updated` each) and message. The job id is in the audit record."""
    org = auth.org_id
    item = get_item(store, org, label_id, consistent=True)
    job = jobs.start_op(DETACH_JOB, org, checkpoint={"label_id": label_id, "phase": "conversations"})
    store.transact(
        [
            Delete(key=label_key(org, label_id), condition="attribute_exists(PK)", error=NotFound("No such label.")),
            Delete(key=name_key(org, item["name"])),
            job,
            audit_put(
                auth,
                "label.deleted",
                "label",
                label_id,
                before={"name": item["name"]},
                after={"job_id": job.item["id"]},
            ),
        ]
    )
    jobs.enqueue_committed(store, job.item["id"])


def detach_conversation(store: Store, auth: AuthContext, conv_id: str, label: Item) -> None:
    """The label off one conversation (the label.detach job); NotFound when the conversation is gone."""
    _set_conversation_label(store, auth, conv_id, label, attach=False)


def detach_message(store: Store, auth: AuthContext, message_id: str, label: Item) -> None:
    """The label off one message (the label.detach job); NotFound when the message is gone."""
    _set_message_label(store, auth, message_id, label, attach=False)


# Conversations -----------------------------------------------------------------------------------------------------
def _set_conversation_label(
    store: Store, auth: AuthContext, conv_id: str, label: Item, *, attach: bool, event_at: int | None = None
) -> tuple[Item, bool]:
    """Add or remove one label id on the conversation's `labels`; one `conversation.updated` per real change.
    Optimistic: the conversation's `version` is the write's condition, re-read on a concurrent change. An engine's
    event (`event_at`, its own time) older than the last one applied to this label on this conversation
    (`label_event_at`) changes nothing; a newer one that finds the label already so is still recorded."""
    org, label_id = auth.org_id, label["id"]
    for _ in range(5):
        conv = conversations.get_item(store, org, conv_id, consistent=True)
        current = list(conv.get("labels") or [])
        times = dict(conv.get("label_event_at") or {})
        if event_at is not None:
            if label_id in times and event_at < int(times[label_id]):
                return conv, False  # a late delivery of an older attach or detach
            stamp = times.get(label_id) != event_at
            times[label_id] = event_at
        else:
            stamp = False
        if (label_id in current) == attach:
            if not stamp:
                return conv, False
            stamped = {**conv, "label_event_at": times, "version": int(conv.get("version", 1)) + 1}
            try:
                store.put(stamped, **versioned(conv.get("version", 1)), error=_Changed())
            except _Changed:
                continue
            return stamped, False
        labels = [*current, label_id] if attach else [x for x in current if x != label_id]
        new = {**conv, "labels": labels, "updated_at": clock.now_iso(), "version": int(conv.get("version", 1)) + 1}
        if event_at is not None:
            new["label_event_at"] = times
        ops: list[TxOp] = [
            Put(
                item=new,
                **versioned(conv.get("version", 1)),
                error=_Changed(),
            ),
            outbox_put(
                org,
                "conversation.updated",
                {
                    "conversation_id": conv_id,
                    "status": new["status"],
                    "organization_id": org,
                    "changes": ["labels"],
                    "labels": labels,
                    "label_id": label_id,
                    "action": "label_added" if attach else "label_removed",
                },
            ),
        ]
        link = conv_link_key(org, label_id, conv_id)
        if attach:
            ops += [
                ConditionCheck(
                    key=label_key(org, label_id), condition="attribute_exists(PK)", error=NotFound("No such label.")
                ),
                Put(item={**link, "entity": "LabelLink", "label_id": label_id, "conversation_id": conv_id}),
            ]
        else:
            ops.append(Delete(key=link))
        try:
            store.transact(ops)
        except _Changed:
            continue
        return new, True
    raise Conflict("The conversation changed meanwhile; retry.")


def _mirror(store: Store, org: str, channel_id: str, action: str, payload: Item) -> ProviderSync:
    """Best effort at the provider: `synced`, `unsupported` or `failed` — never an error for the caller."""
    channel = store.get(channels.channel_key(org, channel_id))
    if channel is None:
        return "unsupported"
    try:
        adapter = provider_for(channel)
        if "labels" not in adapter.capabilities():
            return "unsupported"
        adapter.labels(action, payload)
    except UnsupportedByProvider:  # the engine has labels, but not this use of them (e.g. on messages)
        return "unsupported"
    except (DomainError, ProviderUnavailable):
        return "failed"
    return "synced"


def _contact_phone(store: Store, org: str, contact_id: str | None) -> str | None:
    contact = store.get(keys.key(keys.org_pk(org), f"CONTACT#{contact_id}")) if contact_id else None
    return (contact or {}).get("phone")


def attach_conversation(
    store: Store, auth: AuthContext, label_id: str, conv_id: str, *, attach: bool
) -> models.LabelAttachment:
    org = auth.org_id
    label = get_item(store, org, label_id)
    conv, changed = _set_conversation_label(store, auth, conv_id, label, attach=attach)
    sync: ProviderSync | None = None
    if changed:
        payload = {
            "label_id": label_id,
            "name": label["name"],
            "color": label["color"],
            "chat_id": _contact_phone(store, org, conv.get("contact_id")),
            "conversation_id": conv_id,
        }
        sync = _mirror(store, org, conv["channel_id"], "attach_chat" if attach else "detach_chat", payload)
    return models.LabelAttachment(
        label_id=label_id,
        conversation_id=conv_id,
        attached=attach,
        changed=changed,
        labels=list(conv.get("labels") or []),
        provider_sync=sync,
    )


def resolve_chat(store: Store, auth: AuthContext, chat_id: str, channel_id: str | None) -> str:
    """A conversation id from a chat reference: a conversation id, or the contact's phone / JID (on `channel_id`,
    or on the only channel where the contact has a conversation)."""
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog.chats import conversation_for_chat

    org = auth.org_id
    if channel_id:
        return str(conversation_for_chat(store, auth, channel_id, chat_id)["id"])
    if chat_id.startswith("cv_"):
        return str(conversations.get_item(store, org, chat_id)["id"])
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog.chats import contact_for_chat

    contact_id = contact_for_chat(store, org, chat_id)
    channel_ids = [c["id"] for c in channels.all_items(store, org)]
    pointers = store.batch_get([conversations.pair_key(org, ch, contact_id) for ch in channel_ids])
    if not pointers:
        raise NotFound("No conversation with this chat.")
    if len(pointers) > 1:
        raise ValidationFailed.field("body.channel_id", "the contact has conversations on several channels: give one")
    return str(pointers[0]["conversation_id"])


def chat_label(
    store: Store, auth: AuthContext, body: models.ChatLabelRequest, *, attach: bool
) -> models.LabelAttachment:
    if bool(body.conversation_id) == bool(body.chat_id):
        raise ValidationFailed.field("body", "give exactly one of conversation_id or chat_id")
    get_item(store, auth.org_id, body.label_id)
    conv_id = body.conversation_id or resolve_chat(store, auth, body.chat_id or "", body.channel_id)
    return attach_conversation(store, auth, body.label_id, conv_id, attach=attach)


def conversation_labels(store: Store, auth: AuthContext, conv_id: str) -> list[models.Label]:
    org = auth.org_id
    conv = conversations.get_item(store, org, conv_id)
    ids = list(conv.get("labels") or [])
    found = {i["id"]: i for i in store.batch_get([label_key(org, x) for x in ids])} if ids else {}
    return [view(found[x]) for x in ids if x in found]


def add_to_conversation(
    store: Store, auth: AuthContext, conv_id: str, body: models.ConversationLabelAdd
) -> list[models.Label]:
    if bool(body.label_id) == bool(body.name):
        raise ValidationFailed.field("body", "give exactly one of label_id or name")
    org = auth.org_id
    conversations.get_item(store, org, conv_id)
    label_id = body.label_id
    if body.name:
        existing = by_name(store, org, body.name)
        if existing is None:
            color = body.color or models.LabelCreate.model_fields["color"].default
            try:
                existing = create(store, auth, models.LabelCreate(name=body.name, color=color)).model_dump()
            except Conflict:  # created concurrently under the same name
                existing = by_name(store, org, body.name)
                if existing is None:
                    raise
        label_id = existing["id"]
    attach_conversation(store, auth, label_id or "", conv_id, attach=True)
    return conversation_labels(store, auth, conv_id)


# Messages ----------------------------------------------------------------------------------------------------------
def _set_message_label(store: Store, auth: AuthContext, message_id: str, label: Item, *, attach: bool) -> bool:
    """A link item (the change detector: conditional) and the message's `labels` string set, in one transaction; the
    message is addressed where it is stored (its shard or the legacy partition)."""
    org, label_id = auth.org_id, label["id"]
    link = msg_link_key(org, label_id, message_id)
    missing = NotFound("No such message.")
    stored = status.get_message(store, org, message_id)
    message_key = shards.key_of(stored) if stored else status.message_key(org, message_id)
    ops: list[TxOp]
    if attach:
        ops = [
            ConditionCheck(
                key=label_key(org, label_id), condition="attribute_exists(PK)", error=NotFound("No such label.")
            ),
            Put(
                item={**link, "entity": "LabelLink", "label_id": label_id, "message_id": message_id},
                condition="attribute_not_exists(PK)",
                error=_Changed(),
            ),
            Update(
                key=message_key,
                expression="ADD #l :l",
                condition="attribute_exists(PK)",
                names={"#l": "labels"},
                values={":l": {label_id}},
                error=missing,
            ),
        ]
    else:
        ops = [
            Delete(key=link, condition="attribute_exists(PK)", error=_Changed()),
            Update(
                key=message_key,
                expression="DELETE #l :l",
                condition="attribute_exists(PK)",
                names={"#l": "labels"},
                values={":l": {label_id}},
                error=missing,
            ),
        ]
    try:
        store.transact(ops)
    except _Changed:
        return False
    return True


def message_label(
    store: Store, auth: AuthContext, body: models.MessageLabelRequest, *, attach: bool
) -> models.LabelAttachment:
    org = auth.org_id
    label = get_item(store, org, body.label_id)
    message = status.get_message(store, org, body.message_id)
    if message is None or message.get("entity") != "Message":
        raise NotFound("No such message.")
    changed = _set_message_label(store, auth, body.message_id, label, attach=attach)
    sync: ProviderSync | None = None
    if changed and message.get("provider_message_id"):
        payload = {
            "label_id": label["id"],
            "name": label["name"],
            "color": label["color"],
            "message_id": message["provider_message_id"],
            "chat_id": message.get("to_phone") if message.get("direction") == "outbound" else message.get("from_phone"),
        }
        sync = _mirror(store, org, message["channel_id"], "attach_message" if attach else "detach_message", payload)
    after = status.get_message(store, org, body.message_id, consistent=True) or {}
    return models.LabelAttachment(
        label_id=label["id"],
        message_id=body.message_id,
        attached=attach,
        changed=changed,
        labels=sorted(after.get("labels") or []),
        provider_sync=sync,
    )


def apply_engine_chat_label(
    store: Store, channel: Item, name: str, chat_phone: str, *, attach: bool, event_at: int | None = None
) -> bool:
    """A provider says a chat gained or lost a label (set on the phone): the conversation's labels follow when the
    organization has a label of that name and a conversation with that chat on the channel. Nothing is sent back to
    the provider. True when the conversation changed."""
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog.chats import conversation_for_chat

    org = channel["organization_id"]
    label = by_name(store, org, name)
    if label is None:
        return False
    auth = AuthContext("system", "system", None, org, "owner", "system")
    try:
        conv = conversation_for_chat(store, auth, channel["id"], chat_phone)
    except NotFound:
        return False
    _, changed = _set_conversation_label(store, auth, conv["id"], label, attach=attach, event_at=event_at)
    return changed


def engine_label_key(org: str, channel_id: str, engine_label_id: str) -> dict[str, str]:
    """A channel's engine label id → our label (`label_id`)."""
    return keys.key(keys.org_pk(org), f"ENGLABEL#{channel_id}#{engine_label_id}")


def apply_engine_label(
    store: Store,
    channel: Item,
    engine_label_id: str,
    name: str | None,
    color: str | None,
    *,
    deleted: bool,
    event_at: int | None = None,
) -> bool:
    """A label created, changed or deleted on the phone: our label for that engine label id follows. A new engine
    label becomes the organization's label of that name (created when there is none) and is remembered by its
    engine id; a rename or recolour updates it (a rename onto another label's name keeps ours); a deletion deletes
    it. A repeat changes nothing. True when our catalogue changed. An event with the engine's own time (`event_at`)
    older than the last one applied to that engine label changes nothing (the pointer keeps that time; a deletion
    leaves it for a day as a tombstone so a late, older upsert cannot bring the label back)."""
    org = channel["organization_id"]
    auth = AuthContext("system", "system", None, org, "owner", "system")
    pointer_key = engine_label_key(org, channel["id"], engine_label_id)
    pointer = store.get(pointer_key, consistent=True)
    if event_at is not None and pointer and pointer.get("event_at") is not None and event_at < pointer["event_at"]:
        return False  # a late delivery of an older event about this label
    if pointer and pointer.get("deleted"):
        pointer = None
    label = store.get(label_key(org, pointer["label_id"]), consistent=True) if pointer else None
    stamp: dict[str, Any] = {} if event_at is None else {"event_at": event_at}
    if deleted:
        if pointer is None:
            return False
        if event_at is None:
            store.delete(pointer_key)
        else:
            store.put({**pointer, **stamp, "deleted": True, "ttl": clock.epoch_now() + 86400})
        if label is None:
            return False
        with contextlib.suppress(NotFound):
            delete(store, auth, label["id"])
        return True
    if not name:
        return False
    if label is not None:
        changes: dict[str, Any] = {}
        if label["name"] != name and (by_name(store, org, name) or {}).get("id") in (None, label["id"]):
            changes["name"] = name
        if color and label["color"] != color:
            changes["color"] = color
        if stamp and pointer and pointer.get("event_at") != event_at:
            store.put({**pointer, **stamp})
        if not changes:
            return False
        with contextlib.suppress(Conflict, NotFound):
            update(store, auth, label["id"], models.LabelUpdate(**changes))
            return True
        return False
    created = False
    label = by_name(store, org, name)
    if label is None:
        try:
            label = create(store, auth, models.LabelCreate(name=name, color=color or "#9e9e9e")).model_dump()
            created = True
        except Conflict:  # created concurrently under the same name
            label = by_name(store, org, name)
            if label is None:
                raise
    store.put({**pointer_key, "entity": "EngineLabel", "label_id": label["id"], "channel_id": channel["id"], **stamp})
    return created
