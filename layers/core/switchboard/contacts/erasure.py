"""Erasing a deleted contact: the tombstone the delete request writes, and the cascade that erases the rest.

`DELETE /v1/contacts/{id}` (`delete`) removes the contact item, its name index and its first identity
sentinels in one transaction (the contact reads as 404 at once, by id and by identity), counts the contact out, and
writes the tombstone `ERASURE#CONTACT#<ct_id>` with the cascade's checkpoint and the internal event
`contact.erasure`. The cascade then erases, one bounded chunk at a time (`erase_contact_chunk`: at most one page read
and ~25 writes), in this order:

  identities     the sentinels the request could not release (a contact may own hundreds), 25 per chunk
  children       `CONTACT#<ct>#…` notes, tags (+ `CTAG#` rows), consents and their history, suppressions, stage
                 history (+ `CDPSTAGELOG#`), activity (+ `CDPACT#`, `CDPEVTID#`): a page of 8 per chunk; a log row
                 in the partition its contact row names (`log_pk`: a write shard; absent: `ORG#<org>`)
  objects        the contact's CDP objects (GSI2 `ORG#<org>#CONTACTOBJ#<ct>`): comments, then links, then the object
  links          other records' links to the contact (GSI1 `ORG#<org>#CONTACTLINKS#<ct>`), 8 per chunk
  segments       memberships: a page of 25 segments per chunk, each left (`refresh_contact`; counted from the stream)
  channels       the conversations of the contact: a page of channels per chunk, their `CONVKEY#<ch>#<ct>` pairs
  messages       per conversation, a page of 25 messages (GSI2) per chunk: text, media, contact id and the person's
                 number removed (S3 copies of received media deleted); then the conversation's preview cleared and its
                 lock (a draft) deleted: the conversation row stays, anonymised
  group_messages the person's messages in group conversations (GSI1 `ORG#<org>#CONTACTGROUPMSG#<ct>`), 12 per
                 chunk, redacted the same way (and taken off that list); their conversations' previews cleared
  orders         the person's orders (GSI3 `ORG#<org>#CONTACTORDERS#<ct>`), 25 per chunk: `contact_id` removed and
                 taken off that list; the order (items, totals, statuses) stays for the business's books
  outbox         outbox events from before the deletion that mention the person: deleted (25 per page; each write
                 shard of the outbox in turn, then `ORG#<org>`)
  deliveries     webhook event payloads (DeliveriesTable, one per event, GSI1 shard by shard) from before the
                 deletion whose body mentions the person: the body is cut to its ids and `redacted: true` (25 per page)

The stages that find the person's items through a global secondary index (objects, links, messages, group
messages, orders, deliveries) can miss an item written a moment before the deletion: a GSI lags its table. So after the
first pass the erasure settles (`recheck`): the tombstone waits in the sparse GSI1 partition `ERASURES#settling`
(GSI1SK `<deleted_at + RECHECK_AFTER>#<org>#<ct>`) until the hourly schedule (`release_settled`) hands it a new
`contact.erasure` event, and those stages run once more (`RECHECK_STAGES`, checkpoint `round: 2`) against indexes
that have caught up with everything written before the deletion (a write after it that would name the person checks
their contact item, which is gone). Only then is the erasure `erased`.

The checkpoint (`{"stage", "cursor"?, "conversations"?, "round"?}`) says where the next chunk starts; every chunk may
run again after a crash (deletes and redactions are idempotent). `drive` runs chunks from the tombstone's checkpoint,
saves it after each one (conditional on the tombstone's `step`, so two runners never both advance it), and when its
budget is spent saves the checkpoint together with a new `contact.erasure` event that continues the work. At the end
the tombstone keeps only the contact id and times (`status: "erased"`).
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from switchboard import aws, clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.contacts import repository as repo
from switchboard.contacts import search
from switchboard.contacts import service as contacts
from switchboard.contacts.identifiers import Identifier
from switchboard.errors import Conflict, DomainError
from switchboard.events.outbox import outbox_put, read_detail
from switchboard.ids import ulid_bound
from switchboard.store import Delete, Put, Store, TxOp, Update, keys, shards, versioned
from switchboard.webhooks import repository as webhooks

if TYPE_CHECKING:
    from collections.abc import Callable

Item = dict[str, Any]
Checkpoint = dict[str, Any]
EVENT_TYPE = "contact.erasure"  # internal: not in the webhook catalogue, routed to CdpSegmentEventsQueue
CHUNK = 25  # writes (or items read) per chunk
CHILDREN_PER_CHUNK = 8  # a child and up to two mirrors each
IDENTITIES_IN_REQUEST = 60  # sentinels the delete request releases in its own transaction
CHUNKS_PER_RUN = 50  # chunks one `drive` runs before it hands over to a new event
MIN_NEEDLE = 6  # shorter identity values (an external id "42") would match unrelated event bodies
STAGES = (
    "identities",
    "children",
    "objects",
    "links",
    "segments",
    "channels",
    "messages",
    "group_messages",
    "orders",
    "outbox",
    "deliveries",
)
# The stages that read an index, run again once the indexes have caught up with the deletion.
RECHECK_STAGES = ("objects", "links", "channels", "messages", "group_messages", "orders", "deliveries")
RECHECK_AFTER = timedelta(minutes=10)
RELEASE_PAGE = 100


def tombstone_key(org: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"ERASURE#CONTACT#{contact_id}")


def tombstone_ops(org: str, contact: Item, pending_sentinels: list[str], principal: str | None) -> list[TxOp]:
    """The delete request's part: the tombstone (with the identities still to release and the values the cascade
    looks for in event bodies) and the event that starts the cascade."""
    values = {str(i["value"]) for i in contact.get("identities", []) if len(str(i.get("value") or "")) >= MIN_NEEDLE}
    needles = [contact["id"], *sorted(values)]
    now = clock.now_iso()
    item = {
        **tombstone_key(org, contact["id"]),
        "entity": "ContactErasure",
        "contact_id": contact["id"],
        "organization_id": org,
        "status": "erasing",
        "deleted_at": now,
        "deleted_by": principal,
        "step": 0,
        "checkpoint": {"stage": STAGES[0]},
        "pending_identities": pending_sentinels,
        "needles": needles,
    }
    return [Put(item=item, condition="attribute_not_exists(PK)"), _event(org, contact["id"])]


def delete(store: Store, auth: AuthContext, contact_id: str) -> None:
    """Erases the person (the cascade below). One transaction of at most ~70 operations, whatever the
    contact holds: the contact item goes (every read by id or by identity answers 404 from now on), with its search
    rows, its first identity sentinels (free for reuse at once; the rest are released by the cascade, and a create
    may claim them before: `switchboard.contacts.service`), the audit entry (the id only) and the tombstone
    with the event that starts the cascade."""
    org = auth.org_id
    item = contacts.get_item(store, org, contact_id, consistent=True)
    sentinels = list(  # phone, whatsapp and wa_id of one number share a sentinel: each key once
        dict.fromkeys(
            Identifier(ident["type"], ident["value"], ident.get("source")).sentinel_sk
            for ident in item.get("identities", [])
        )
    )
    now, later = sentinels[:IDENTITIES_IN_REQUEST], sentinels[IDENTITIES_IN_REQUEST:]
    ops: list[TxOp] = [
        Delete(
            key=repo.contact_key(org, contact_id),
            **versioned(item["version"]),
            error=Conflict("The contact changed; retry."),
        )
    ]
    ops += [Delete(key=repo.sentinel_key(org, sk)) for sk in now]
    ops += search.index_ops(org, item, None)  # at most search.MAX_TOKENS
    ops.append(audit_put(auth, "contact.deleted", "contact", contact_id))
    ops += tombstone_ops(org, item, later, auth.principal_id)
    store.transact(ops)


def _event(org: str, contact_id: str) -> Put:
    return outbox_put(org, EVENT_TYPE, {"contact_id": contact_id, "organization_id": org})


# The cascade ----------------------------------------------------------------------------------------------------
def erase_contact_chunk(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    """One bounded step of the erasure from `checkpoint`; → the next checkpoint, or None when everything is erased.
    The first pass ends in `recheck`; the second (`round: 2`) runs `RECHECK_STAGES` only."""
    stage = checkpoint.get("stage", STAGES[0])
    following = _STEPS[stage](store, org, contact_id, checkpoint)
    if checkpoint.get("round") != 2:
        return following if following is not None or stage == "recheck" else {"stage": "recheck"}
    here = RECHECK_STAGES.index(stage)
    if following is not None and following["stage"] in RECHECK_STAGES[here:]:
        return {**following, "round": 2}
    return {"stage": RECHECK_STAGES[here + 1], "round": 2} if here + 1 < len(RECHECK_STAGES) else None


def _recheck(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    """Between the passes: the second starts once released by the schedule or `RECHECK_AFTER` after the deletion;
    until then the erasure is parked (`drive` saves it in `ERASURES#settling`)."""
    tombstone = _tombstone(store, org, contact_id)
    due = clock.parse_iso(tombstone.get("deleted_at") or clock.now_iso()) + RECHECK_AFTER
    if checkpoint.get("released") or clock.now() >= due:
        return {"stage": RECHECK_STAGES[0], "round": 2}
    return {"stage": "recheck", "parked": clock.iso(due)}


def settling_sk(due: str, org: str, contact_id: str) -> str:
    return f"{due}#{org}#{contact_id}"


def release_settled(store: Store, now: datetime | None = None) -> list[str]:
    """The hourly schedule's part: every erasure parked before its second pass whose time has come (one page of
    `RELEASE_PAGE`) gets a `contact.erasure` event that runs it; → the contact ids released. Reading the index late
    only delays a release; the release itself is conditional on the tombstone still being parked there."""
    now_iso = clock.iso(now or clock.now())
    page = store.query(keys.ERASURES_SETTLING, index="GSI1", sk_between=("0", f"{now_iso}#~"), limit=RELEASE_PAGE)
    released: list[str] = []
    for row in page.items:
        org, contact_id = str(row["organization_id"]), str(row["contact_id"])
        try:
            store.transact(
                [
                    Update(
                        key=tombstone_key(org, contact_id),
                        expression="SET #cp.released = :yes REMOVE GSI1PK, GSI1SK",
                        condition="GSI1SK = :sk",
                        names={"#cp": "checkpoint"},
                        values={":yes": True, ":sk": row["GSI1SK"]},
                        error=Conflict("released already"),
                    ),
                    _event(org, contact_id),
                ]
            )
        except Conflict:
            continue
        released.append(contact_id)
    return released


def _next(stage: str) -> Checkpoint | None:
    later = STAGES.index(stage) + 1
    return {"stage": STAGES[later]} if later < len(STAGES) else None


def _tombstone(store: Store, org: str, contact_id: str) -> Item:
    return store.get(tombstone_key(org, contact_id), consistent=True) or {}


def _identities(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    pending = list(_tombstone(store, org, contact_id).get("pending_identities") or [])
    if not pending:
        return _next("identities")
    for sk in pending[:CHUNK]:
        try:  # a sentinel a new contact claimed meanwhile (`service._release_stale`) is not ours any more
            store.delete(
                keys.key(keys.org_pk(org), sk),
                condition="attribute_not_exists(PK) OR contact_id = :me",
                values={":me": contact_id},
            )
        except DomainError:
            continue
    store.update(
        tombstone_key(org, contact_id),
        "SET pending_identities = :rest",
        values={":rest": pending[CHUNK:]},
    )
    return {"stage": "identities"}


def _children(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: switchboard.cdp.events loads when the cascade runs, not for the contacts DELETE route
    from switchboard.cdp.events import event_sentinel
    from switchboard.cdp.logs import mirror_key

    page = store.query(keys.org_pk(org), sk_prefix=f"CONTACT#{contact_id}#", limit=CHILDREN_PER_CHUNK, consistent=True)
    if not page.items:
        return _next("children")
    ops: list[TxOp] = []
    for child in page.items:
        ops.append(Delete(key={"PK": child["PK"], "SK": child["SK"]}))
        kind, _, rest = child["SK"].removeprefix(f"CONTACT#{contact_id}#").partition("#")
        log = mirror_key(org, child)  # a stage change's or an activity's log row, where it was written
        if log is not None:
            ops.append(Delete(key=log))
        if kind == "TAG":
            ops.append(Delete(key=keys.key(keys.org_pk(org), f"CTAG#{rest}#{contact_id}")))
        elif kind == "ACT" and child.get("event_id"):
            ops.append(Delete(key=event_sentinel(org, child["event_id"])))
    store.transact(ops)
    return {"stage": "children"}


def _objects(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: loads when the cascade runs, not for the contacts DELETE route
    from switchboard.cdp import crm, objects

    # The index is walked with a cursor (`after`: the index entry of the last record done), never read from its head
    # again: it may still list a record this erasure deleted a moment ago.
    after = checkpoint.get("after")
    page = store.query(objects.contact_pk(org, contact_id), index="GSI2", limit=1, start_key=after)
    if not page.items:
        return _next("objects")
    entry = page.items[0]
    past = {k: entry[k] for k in ("PK", "SK", "GSI2PK", "GSI2SK")}
    record = store.get(objects.object_key(org, entry["id"]), consistent=True)
    if record is None:  # deleted since the index listed it
        return {"stage": "objects", "after": past}
    here = {"stage": "objects", "after": after}
    pk = keys.org_pk(org)
    comments = store.query(pk, sk_prefix=f"CDPCMT#{record['id']}#", limit=CHUNK, consistent=True)
    if comments.items:
        store.transact([Delete(key={"PK": c["PK"], "SK": c["SK"]}) for c in comments.items])
        return here
    links = store.query(pk, sk_prefix=f"CDPREL#{record['id']}#", limit=CHUNK // 3, consistent=True)
    for link in links.items:
        try:
            store.transact(crm._unlink_ops(org, link))
        except DomainError:
            continue
    if links.items:
        return here
    # The record's own event carries its ids only: its display name and properties are the person's data.
    anonymous = {**record, "display_name": None}
    store.transact(
        [
            Delete(key=objects.object_key(org, record["id"])),
            objects.type_entry_delete(org, record),
            objects.record_event(org, "crm.record.deleted", anonymous),
        ]
    )
    return {"stage": "objects", "after": past}


def _links(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: switchboard.cdp.crm loads when the cascade runs, not for the contacts DELETE route
    from switchboard.cdp import crm

    page = store.query(
        crm.contact_links_pk(org, contact_id), index="GSI1", limit=CHUNK // 3, start_key=checkpoint.get("cursor")
    )
    for link in page.items:
        try:
            store.transact(crm._unlink_ops(org, link))
        except DomainError:
            continue  # unlinked meanwhile (the index may still list it)
    return {"stage": "links", "cursor": page.last_key} if page.last_key else _next("links")


def _segments(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: switchboard.cdp.segments loads when the cascade runs, not for the contacts DELETE route
    from switchboard.cdp import segments

    page = store.query(keys.org_pk(org), sk_prefix="CDPSEG#", limit=CHUNK, start_key=checkpoint.get("cursor"))
    if page.items:  # the contact is gone: it leaves each of these segments
        segments.refresh_contact(store, org, contact_id, segments=page.items)
    return {"stage": "segments", "cursor": page.last_key} if page.last_key else _next("segments")


def _channels(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: switchboard.messaging.conversations loads when the cascade runs, not for the contacts DELETE route
    from switchboard.messaging import conversations

    page = store.query(keys.org_pk(org), sk_prefix="CHANNEL#", limit=100, start_key=checkpoint.get("cursor"))
    channel_ids = [i["id"] for i in page.items if i.get("entity") == "Channel"]
    pairs = store.batch_get([conversations.pair_key(org, ch, contact_id) for ch in channel_ids], consistent=True)
    found = [*checkpoint.get("conversations", []), *(p["conversation_id"] for p in pairs)]
    if page.last_key:
        return {"stage": "channels", "cursor": page.last_key, "conversations": found}
    return {"stage": "messages", "conversations": found}


def _messages(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: switchboard.messaging.conversations loads when the cascade runs, not for the contacts DELETE route
    from switchboard.messaging import conversations

    queue = list(checkpoint.get("conversations", []))
    if not queue:
        return _next("messages")
    conv_id = queue[0]
    page = store.query(
        conversations.messages_pk(org, conv_id), index="GSI2", limit=CHUNK, start_key=checkpoint.get("cursor")
    )
    for message in page.items:
        _redact_message(store, org, message)
    if page.last_key:
        return {"stage": "messages", "conversations": queue, "cursor": page.last_key}
    with contextlib.suppress(DomainError):  # the conversation itself was deleted meanwhile
        store.update(
            conversations.stored_key(store, org, conv_id),
            "SET last_message_preview = :none",
            condition="attribute_exists(PK)",
            values={":none": None},
        )
    store.delete(conversations.lock_key(org, conv_id))
    return {"stage": "messages", "conversations": queue[1:]}


def _group_messages(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    """The person's messages in group conversations (GSI1 `ORG#<org>#CONTACTGROUPMSG#<ct>`), 12 per chunk: each
    redacted (which takes it off that list) and its group conversation's preview cleared (it may quote them). The list
    is walked with a cursor: the index may still show messages redacted a moment ago."""
    # cascade stage: loads when the cascade runs, not for the contacts DELETE route
    from switchboard.messaging import conversations, messages

    page = store.query(
        messages.group_messages_pk(org, contact_id), index="GSI1", limit=CHUNK // 2, start_key=checkpoint.get("cursor")
    )
    for message in page.items:
        _redact_message(store, org, message)
    for conv_id in {m["conversation_id"] for m in page.items if m.get("conversation_id")}:
        with contextlib.suppress(DomainError):
            store.update(
                conversations.stored_key(store, org, conv_id),
                "SET last_message_preview = :none",
                condition="attribute_exists(PK)",
                values={":none": None},
            )
    return {"stage": "group_messages", "cursor": page.last_key} if page.last_key else _next("group_messages")


def _orders(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    # cascade stage: switchboard.commerce.orders loads when the cascade runs, not for the contacts DELETE route
    from switchboard.commerce import orders

    cursor = orders.move_contact_page(store, org, contact_id, None, checkpoint.get("cursor"))
    return {"stage": "orders", "cursor": cursor} if cursor else _next("orders")


def _redact_message(store: Store, org: str, message: Item) -> None:
    """A message without its text, media, contact and the person's number (inbound: the sender; outbound: the
    recipient); it stays in its conversation's history, so the counts and the thread keep their shape."""
    person = "from_phone" if message.get("direction") == "inbound" else "to_phone"
    media = message.get("media") or {}
    if message.get("direction") == "inbound" and isinstance(media, dict) and media.get("id"):
        key = f"media/{org}/{message['channel_id']}/{media['id']}"
        aws.client("s3").delete_object(Bucket=get_settings().media_bucket, Key=key)
    store.update(
        {"PK": message["PK"], "SK": message["SK"]},
        "SET #text = :none, media = :none, #person = :none, contact_id = :none, last_error = :none, erased = :yes"
        " REMOVE GSI1PK, GSI1SK",
        condition="attribute_exists(PK)",
        names={"#text": "text", "#person": person},
        values={":none": None, ":yes": True},
    )


def _outbox(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    tombstone = _tombstone(store, org, contact_id)
    needles = tombstone.get("needles") or [contact_id]
    deleted = clock.parse_stored(tombstone.get("deleted_at"), "tombstone deleted_at") or clock.now()
    before = "EVENT#" + ulid_bound(deleted, high=False)
    partitions = shards.all_pks(org)  # every shard of the outbox, then the legacy partition
    # a checkpoint from before sharding (a cursor, no partition) continues in `ORG#<org>`: its events all predate
    # the shards
    part = int(checkpoint.get("partition", len(partitions) - 1 if checkpoint.get("cursor") else 0))
    page = store.query(partitions[part], sk_between=("EVENT#", before), limit=CHUNK, start_key=checkpoint.get("cursor"))
    ops: list[TxOp] = [
        Delete(key={"PK": e["PK"], "SK": e["SK"]})
        for e in page.items
        if e.get("event_type") != EVENT_TYPE and _mentions(e.get("payload"), needles)
    ]
    if ops:
        store.transact(ops)
    if page.last_key:
        return {"stage": "outbox", "partition": part, "cursor": page.last_key}
    return {"stage": "outbox", "partition": part + 1} if part + 1 < len(partitions) else _next("outbox")


def _deliveries(store: Store, org: str, contact_id: str, checkpoint: Checkpoint) -> Checkpoint | None:
    tombstone = _tombstone(store, org, contact_id)
    needles = tombstone.get("needles") or [contact_id]
    deleted_at = tombstone.get("deleted_at") or clock.now_iso()
    found, after = webhooks.shard_walk(
        webhooks.deliveries_store(),
        lambda n: webhooks.events_pk(org, n),
        index="GSI1",
        position=checkpoint.get("position"),
        budget=CHUNK,
    )
    for event in found:
        if (event.get("occurred_at") or "") >= deleted_at or event.get("redacted"):
            continue
        body = webhooks.payload_of(event.get("body"))
        if not _mentions(body, needles):
            continue
        kept = {k: v for k, v in body.items() if k.endswith("_id") and not _mentions(v, needles[1:])}
        webhooks.deliveries_store().update(
            {"PK": event["PK"], "SK": event["SK"]},
            "SET body = :body, redacted = :yes",
            condition="attribute_exists(PK)",
            values={":body": json.dumps({**kept, "redacted": True}, separators=(",", ":")), ":yes": True},
        )
    if after is not None:
        return {"stage": "deliveries", "position": after}
    return _next("deliveries")


def _mentions(value: Any, needles: list[str]) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return any(n and n in text for n in needles)


_STEPS: dict[str, Callable[[Store, str, str, Checkpoint], Checkpoint | None]] = {
    "recheck": _recheck,
    "identities": _identities,
    "children": _children,
    "objects": _objects,
    "links": _links,
    "segments": _segments,
    "channels": _channels,
    "messages": _messages,
    "group_messages": _group_messages,
    "orders": _orders,
    "outbox": _outbox,
    "deliveries": _deliveries,
}


# The driver (an event of CdpSegmentEventsQueue today; a job of the job mechanism later) ------------------------------
class _Superseded(DomainError):
    """Another runner advanced the checkpoint first."""


def drive(
    store: Store,
    org: str,
    contact_id: str,
    *,
    max_chunks: int | None = None,
    has_time: Callable[[], bool] | None = None,
) -> bool:
    """Run chunks from the tombstone's checkpoint until the erasure is done (→ True), another runner took over
    (→ True: that one continues), or the budget (`max_chunks`, `has_time()`) is spent: then the checkpoint is saved
    with a new `contact.erasure` event that continues it (→ False)."""
    budget = CHUNKS_PER_RUN if max_chunks is None else max_chunks
    tombstone = store.get(tombstone_key(org, contact_id), consistent=True)
    if tombstone is None or tombstone.get("status") == "erased":
        return True
    step, checkpoint = int(tombstone.get("step", 0)), tombstone.get("checkpoint") or {"stage": STAGES[0]}
    for done in range(budget):
        if done and has_time is not None and not has_time():
            break
        following = erase_contact_chunk(store, org, contact_id, checkpoint)
        try:
            if following is None:
                _save(store, org, contact_id, step, None)
                return True
            if following.get("parked"):  # until the second pass: the hourly schedule releases it
                _save(store, org, contact_id, step, following, parked=str(following["parked"]))
                return True
            _save(store, org, contact_id, step, following)
        except _Superseded:
            return True
        step, checkpoint = step + 1, following
    try:
        _save(store, org, contact_id, step, checkpoint, extra=[_event(org, contact_id)], same=True)
    except _Superseded:
        return True
    return False


def _save(
    store: Store,
    org: str,
    contact_id: str,
    step: int,
    checkpoint: Checkpoint | None,
    *,
    extra: list[TxOp] | None = None,
    same: bool = False,
    parked: str | None = None,
) -> None:
    if checkpoint is None:
        expression = (
            "SET #s = :s, erased_at = :now, step = :next REMOVE checkpoint, needles, pending_identities, GSI1PK, GSI1SK"
        )
        values: Item = {":s": "erased", ":now": clock.now_iso()}
    elif parked is not None:
        expression = "SET checkpoint = :c, step = :next, GSI1PK = :gpk, GSI1SK = :gsk"
        values = {
            ":c": checkpoint,
            ":gpk": keys.ERASURES_SETTLING,
            ":gsk": settling_sk(parked, org, contact_id),
        }
    else:
        expression, values = "SET checkpoint = :c, step = :next", {":c": checkpoint}
    ops: list[TxOp] = [
        Update(
            key=tombstone_key(org, contact_id),
            expression=expression,
            condition="step = :step",
            names={"#s": "status"} if checkpoint is None else None,
            values={**values, ":step": step, ":next": step if same else step + 1},
            error=_Superseded(),
        ),
        *(extra or []),
    ]
    store.transact(ops)


def is_erasure_record(record: Item) -> bool:
    try:
        return json.loads(record["body"]).get("detail-type") == EVENT_TYPE
    except (KeyError, TypeError, ValueError):
        return False


def handle_record(store: Store, record: Item, has_time: Callable[[], bool] | None = None) -> None:
    """One SQS record carrying a `contact.erasure` event (EventBridge envelope): the cascade driven from its
    checkpoint. Raises when it fails: the consumer's `BatchProcessor` reports the record alone (SQS retries it)."""
    detail = read_detail(store, json.loads(record["body"])["detail"])
    contact_id = ((detail or {}).get("data") or {}).get("contact_id")
    if detail is not None and contact_id:
        drive(store, detail["organization_id"], contact_id, has_time=has_time)
