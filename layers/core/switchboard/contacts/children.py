"""What hangs off a contact: notes, tags, consent (with history), suppressions, blocking, and merging two contacts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.contacts import models, tag_jobs
from switchboard.contacts import repository as repo
from switchboard.contacts.identifiers import Identifier
from switchboard.contacts.service import get_item, not_found, resolve, view, write_contact
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.ids import new_id, new_ulid
from switchboard.jobs import service as jobs
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers import ProviderRejected, ProviderUnavailable, provider_for
from switchboard.store import ConditionCheck, Delete, Put, Store, TxOp

Item = dict[str, Any]


def _contact_exists(org: str, contact_id: str) -> ConditionCheck:
    return ConditionCheck(key=repo.contact_key(org, contact_id), condition="attribute_exists(PK)", error=not_found())


# Notes ------------------------------------------------------------------------------------------------------------
def _note_view(item: Item) -> models.Note:
    return models.Note.model_validate(item)


def create_note(store: Store, auth: AuthContext, contact_id: str, body: models.NoteIn) -> models.Note:
    org, now, ulid = auth.org_id, clock.now_iso(), new_ulid()
    note_id = f"note_{ulid.lower()}"
    item = {
        **repo.child_key(org, contact_id, "NOTE", note_id),
        "entity": "ContactNote",
        "id": note_id,
        "contact_id": contact_id,
        "body": body.body,
        "author_id": auth.user_id or auth.principal_id,
        "created_at": now,
        "updated_at": now,
    }
    store.transact([_contact_exists(org, contact_id), Put(item=item, condition="attribute_not_exists(PK)")])
    return _note_view(item)


def list_notes(
    store: Store, auth: AuthContext, contact_id: str, limit: int, cursor: str | None
) -> tuple[list[models.Note], str | None]:
    org = auth.org_id
    get_item(store, org, contact_id)
    fingerprint = query_fingerprint(f"notes:{contact_id}", {})
    rows, next_cursor = cursor_page(
        store, org, fingerprint, cursor, sk_prefix=repo.child_prefix(contact_id, "NOTE#"), forward=False, limit=limit
    )
    return [_note_view(i) for i in rows], next_cursor


def _note_item(store: Store, org: str, contact_id: str, note_id: str) -> Item:
    return store.require(repo.child_key(org, contact_id, "NOTE", note_id), "No such note.")


def get_note(store: Store, auth: AuthContext, contact_id: str, note_id: str) -> models.Note:
    return _note_view(_note_item(store, auth.org_id, contact_id, note_id))


def update_note(store: Store, auth: AuthContext, contact_id: str, note_id: str, body: models.NoteIn) -> models.Note:
    item = store.update(
        repo.child_key(auth.org_id, contact_id, "NOTE", note_id),
        "SET body = :b, updated_at = :now",
        condition="attribute_exists(PK)",
        values={":b": body.body, ":now": clock.now_iso()},
        error=NotFound("No such note."),
    )
    assert item is not None
    return _note_view(item)


def delete_note(store: Store, auth: AuthContext, contact_id: str, note_id: str) -> None:
    store.delete(
        repo.child_key(auth.org_id, contact_id, "NOTE", note_id),
        condition="attribute_exists(PK)",
        error=NotFound("No such note."),
    )


# Tag catalogue ----------------------------------------------------------------------------------------------------
def _tag_view(item: Item) -> models.Tag:
    return models.Tag.model_validate(item)


def _tag_name_taken() -> Conflict:
    return Conflict("A tag with this name already exists.")


def _new_tag_ops(org: str, name: str, color: str | None) -> tuple[Item, list[TxOp]]:
    now, tag_id = clock.now_iso(), new_id("tag")
    item = {
        **repo.tag_key(org, tag_id),
        "entity": "Tag",
        "id": tag_id,
        "name": name.strip(),
        "color": color,
        "created_at": now,
        "updated_at": now,
    }
    return item, [
        Put(item=item, condition="attribute_not_exists(PK)"),
        Put(
            item={**repo.tag_name_key(org, name), "entity": "TagName", "tag_id": tag_id},
            condition="attribute_not_exists(PK)",
            error=_tag_name_taken(),
        ),
    ]


def create_tag(store: Store, auth: AuthContext, body: models.TagCreate) -> models.Tag:
    item, ops = _new_tag_ops(auth.org_id, body.name, body.color)
    store.transact(ops)
    return _tag_view(item)


def list_tags(store: Store, auth: AuthContext) -> list[models.Tag]:
    return sorted(
        (_tag_view(i) for i in store.query_all(f"ORG#{auth.org_id}", sk_prefix="TAG#")), key=lambda t: t.name.lower()
    )


def _tag_item(store: Store, org: str, tag_id: str) -> Item:
    return store.require(repo.tag_key(org, tag_id), "No such tag.", consistent=True)


def get_tag(store: Store, auth: AuthContext, tag_id: str) -> models.Tag:
    return _tag_view(_tag_item(store, auth.org_id, tag_id))


def update_tag(store: Store, auth: AuthContext, tag_id: str, body: models.TagUpdate) -> models.Tag:
    org = auth.org_id
    item = _tag_item(store, org, tag_id)
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None and item.get(k) != v}
    if not changes:
        return _tag_view(item)
    new = {**item, **changes, "updated_at": clock.now_iso()}
    ops: list[TxOp] = [Put(item=new, condition="attribute_exists(PK)", error=NotFound("No such tag."))]
    if "name" in changes and changes["name"].lower() != item["name"].lower():
        ops += [
            Put(
                item={**repo.tag_name_key(org, changes["name"]), "entity": "TagName", "tag_id": tag_id},
                condition="attribute_not_exists(PK)",
                error=_tag_name_taken(),
            ),
            Delete(key=repo.tag_name_key(org, item["name"])),
        ]
    if "name" in changes:  # contacts show tag names: the tag.cascade job renames them on every tagged contact
        job = _start_cascade(org, tag_id, "rename")
        new["job_id"] = job.item["id"]
        ops.append(job)
    store.transact(ops)
    if "name" in changes:
        jobs.enqueue_committed(store, new["job_id"])
    return _tag_view(new)


def _start_cascade(org: str, tag_id: str, action: str) -> Put:
    return jobs.start_op(tag_jobs.KIND, org, checkpoint={"tag_id": tag_id, "action": action, "cursor": None})


def delete_tag(store: Store, auth: AuthContext, tag_id: str) -> None:
    """The catalogue item and its name go at once (the tag can no longer be assigned); the tag.cascade job removes it
    from every contact. Its job id is in the audit record `contacts.tag.deleted`."""
    org = auth.org_id
    item = _tag_item(store, org, tag_id)
    job = _start_cascade(org, tag_id, "delete")
    store.transact(
        [
            Delete(key=repo.tag_key(org, tag_id), condition="attribute_exists(PK)", error=NotFound()),
            Delete(key=repo.tag_name_key(org, item["name"])),
            job,
            audit_put(
                auth,
                "contacts.tag.deleted",
                "tag",
                tag_id,
                before={"name": item["name"]},
                after={"job_id": job.item["id"]},
            ),
        ]
    )
    jobs.enqueue_committed(store, job.item["id"])


# Tags on a contact --------------------------------------------------------------------------------------------------
def assign_tag(store: Store, auth: AuthContext, contact_id: str, body: models.TagAssign) -> models.AssignedTag:
    org = auth.org_id
    if bool(body.name) == bool(body.tag_id):
        raise ValidationFailed.field("body", "give exactly one of name or tag_id")
    contact = get_item(store, org, contact_id, consistent=True)
    extra: list[TxOp] = []
    if body.tag_id:
        tag = _tag_item(store, org, body.tag_id)
    else:
        assert body.name is not None
        pointer = store.get(repo.tag_name_key(org, body.name), consistent=True)
        if pointer:
            tag = _tag_item(store, org, pointer["tag_id"])
        else:
            tag, extra = _new_tag_ops(org, body.name, None)  # a new name joins the catalogue
    now = clock.now_iso()
    row = {
        **repo.child_key(org, contact_id, "TAG", tag["id"]),
        "entity": "ContactTag",
        "tag_id": tag["id"],
        "name": tag["name"],
        "color": tag.get("color"),
        "assigned_at": now,
    }
    if tag["name"] in contact.get("tags", []):
        raise Conflict("The contact already has this tag.")
    extra += [
        Put(item=row, condition="attribute_not_exists(PK)", error=Conflict("The contact already has this tag.")),
        Put(item={**repo.tag_reverse_key(org, tag["id"], contact_id), "entity": "TagMember", "contact_id": contact_id}),
    ]
    if body.tag_id:
        extra.append(
            ConditionCheck(
                key=repo.tag_key(org, tag["id"]), condition="attribute_exists(PK)", error=NotFound("No such tag.")
            )
        )
    write_contact(
        store, auth, contact, {**contact, "tags": [*contact.get("tags", []), tag["name"]]}, extra, ["tags"], "tagged"
    )
    return models.AssignedTag.model_validate(row)


def list_contact_tags(store: Store, auth: AuthContext, contact_id: str) -> list[models.AssignedTag]:
    get_item(store, auth.org_id, contact_id)
    rows = store.query_all(f"ORG#{auth.org_id}", sk_prefix=repo.child_prefix(contact_id, "TAG#"))
    catalogue = {t["id"]: t for t in store.batch_get([repo.tag_key(auth.org_id, r["tag_id"]) for r in rows])}
    return [
        models.AssignedTag.model_validate(
            {**r, "name": catalogue[r["tag_id"]]["name"], "color": catalogue[r["tag_id"]].get("color")}
        )
        for r in rows
        if r["tag_id"] in catalogue
    ]


def unassign_tag(store: Store, auth: AuthContext, contact_id: str, tag_id: str) -> None:
    org = auth.org_id
    contact = get_item(store, org, contact_id, consistent=True)
    row = store.require(
        repo.child_key(org, contact_id, "TAG", tag_id), "The contact does not have this tag.", consistent=True
    )
    extra: list[TxOp] = [
        Delete(
            key=repo.child_key(org, contact_id, "TAG", tag_id),
            condition="attribute_exists(PK)",
            error=NotFound("The contact does not have this tag."),
        ),
        Delete(key=repo.tag_reverse_key(org, tag_id, contact_id)),
    ]
    current = store.get(repo.tag_key(org, tag_id))
    names = {row["name"], current["name"] if current else row["name"]}
    tags = [t for t in contact.get("tags", []) if t not in names]
    write_contact(store, auth, contact, {**contact, "tags": tags}, extra, ["tags"], "untagged")


# Consent and suppressions ---------------------------------------------------------------------------------------------
def put_consent(
    store: Store, auth: AuthContext, contact_id: str, channel: str, body: models.ConsentIn
) -> models.Consent:
    org, now = auth.org_id, clock.now_iso()
    captured = body.captured_at or now
    current = {
        **repo.child_key(org, contact_id, "CONSENT", channel),
        "entity": "ContactConsent",
        "channel": channel,
        "status": body.status,
        "source": body.source,
        "captured_at": captured,
        "updated_at": now,
    }
    log = {
        **repo.child_key(org, contact_id, "CONSENTLOG", new_ulid()),
        "entity": "ContactConsentLog",
        "channel": channel,
        "status": body.status,
        "source": body.source,
        "captured_at": captured,
        "recorded_at": now,
        "actor_id": auth.principal_id,
    }
    for _ in range(3):
        # the contact item carries the current status per channel (`consent`), so a segment rule on consent is
        # evaluated from the contact alone; written with the consent rows, under the contact's version
        contact = get_item(store, org, contact_id, consistent=True)
        consent = {**(contact.get("consent") or {}), channel: body.status}
        try:
            write_contact(
                store,
                auth,
                contact,
                {**contact, "consent": consent},
                [Put(item=current), Put(item=log)],
                ["consent"],
                "consent",
            )
        except Conflict:  # the contact changed meanwhile: read it again
            continue
        return _consent_view(store, org, contact_id, current)
    raise Conflict("The contact keeps changing; retry.")


CONSENT_BACKFILL_CHUNK = 25  # contacts per chunk: ≤ 25 consent Queries and ≤ 25 UpdateItems


def consent_backfill_chunk(store: Store, org: str, start: dict[str, Any] | None) -> dict[str, Any] | None:
    """One resumable chunk (job kind `contacts.consent_backfill`) of giving contacts written before the contact item
    kept its consent (`consent`: channel → status) their map: a page of the organization's contacts (GSI1), and per
    contact without the map one consistent Query of its `CONSENT#` rows and one UpdateItem `SET consent` with
    `version + 1` (so a write that read the contact before it is refused by its version condition and reads it
    again), on condition that it still has no map (a consent change since gave it one). The checkpoint to continue
    from (`repo.walk_page`: every shard of the list and its legacy partition), None when done."""
    contacts, following = repo.walk_page(store, org, start, limit=CONSENT_BACKFILL_CHUNK)
    for contact in contacts:
        if isinstance(contact.get("consent"), dict):
            continue
        rows = store.query_all(f"ORG#{org}", sk_prefix=repo.child_prefix(contact["id"], "CONSENT#"), consistent=True)
        consent = {r["channel"]: r["status"] for r in rows}
        try:
            store.update(
                repo.contact_key(org, contact["id"]),
                "SET consent = :c, version = version + :one",
                condition="attribute_exists(PK) AND attribute_not_exists(consent)",
                values={":c": consent, ":one": 1},
                error=Conflict("given its map meanwhile"),
                return_values="NONE",
            )
        except Conflict:  # deleted, or a consent change gave it its map meanwhile
            continue
    return following


def _consent_view(store: Store, org: str, contact_id: str, current: Item) -> models.Consent:
    history = [
        {k: h.get(k) for k in ("status", "source", "captured_at", "recorded_at", "actor_id")}
        for h in store.query_all(f"ORG#{org}", sk_prefix=repo.child_prefix(contact_id, "CONSENTLOG#"), forward=False)
        if h["channel"] == current["channel"]
    ]
    return models.Consent(
        channel=current["channel"],
        status=current["status"],
        source=current.get("source"),
        captured_at=current["captured_at"],
        updated_at=current["updated_at"],
        history=history,
    )


def list_consents(store: Store, auth: AuthContext, contact_id: str) -> list[models.Consent]:
    org = auth.org_id
    get_item(store, org, contact_id)
    rows = store.query_all(f"ORG#{org}", sk_prefix=repo.child_prefix(contact_id, "CONSENT#"))
    return [_consent_view(store, org, contact_id, r) for r in rows]


def _suppression_ends(item: Item) -> datetime | None:
    """When a stored suppression ends; None: for good. An `expires_at` that cannot be read (stored before inputs were
    checked strictly) counts as absent, so the suppression holds: it was asked for, its end is unknown."""
    return clock.parse_stored(item.get("expires_at"), "suppression expires_at")


def suppression_active(item: Item) -> bool:
    """Whether a stored suppression refuses sends now (the one rule: its view and every send read it)."""
    ends = _suppression_ends(item)
    return ends is None or ends > clock.now()


def _suppression_view(item: Item) -> models.Suppression:
    ends = _suppression_ends(item)
    expires_at = clock.iso(ends) if ends else None  # as the API writes times, whatever an old item holds
    return models.Suppression.model_validate({**item, "expires_at": expires_at, "active": suppression_active(item)})


def put_suppression(
    store: Store, auth: AuthContext, contact_id: str, body: models.SuppressionIn
) -> tuple[models.Suppression, bool]:
    org, now = auth.org_id, clock.now_iso()
    key = repo.child_key(org, contact_id, "SUPP", body.channel)
    existing = store.get(key, consistent=True)
    item = {
        **key,
        "entity": "ContactSuppression",
        "channel": body.channel,
        "reason": body.reason,
        "expires_at": body.expires_at,
        "created_at": existing["created_at"] if existing else now,
        "updated_at": now,
    }
    store.transact([_contact_exists(org, contact_id), Put(item=item)])
    return _suppression_view(item), existing is None


def list_suppressions(store: Store, auth: AuthContext, contact_id: str) -> list[models.Suppression]:
    get_item(store, auth.org_id, contact_id)
    rows = store.query_all(f"ORG#{auth.org_id}", sk_prefix=repo.child_prefix(contact_id, "SUPP#"))
    return [_suppression_view(r) for r in rows]


# Blocking ----------------------------------------------------------------------------------------------------------
def set_blocked(store: Store, auth: AuthContext, body: models.BlockRequest, blocked: bool) -> models.Contact:
    if bool(body.contact_id) == bool(body.identifier):
        raise ValidationFailed.field("body", "give exactly one of contact_id or identifier")
    if body.contact_id:
        item = get_item(store, auth.org_id, body.contact_id, consistent=True)
    else:
        assert body.identifier is not None
        item = resolve(store, auth, [body.identifier], "body.identifier")
    if bool(item.get("blocked")) == blocked:
        return view(item)
    audit = audit_put(auth, "contact.blocked" if blocked else "contact.unblocked", "contact", item["id"])
    action = "blocked" if blocked else "unblocked"
    saved = write_contact(store, auth, item, {**item, "blocked": blocked}, [audit], ["blocked"], action)
    _apply_provider_blocks(store, auth, saved, blocked)
    return view(saved)


def _apply_provider_blocks(store: Store, auth: AuthContext, contact: Item, blocked: bool) -> None:
    """Mirror the block on every connected channel whose provider can block numbers (best effort: the stored
    block already stops our own sends; a provider that is down is recorded in the channel's log)."""
    # on first use: keeps switchboard.messaging.channels off the cold start
    from switchboard.messaging import channels

    numbers = {i["value"] for i in contact.get("identities", []) if Identifier(i["type"], i["value"]).space == "phone"}
    if not numbers:
        return
    for channel in (c for c in channels.all_items(store, auth.org_id) if c.get("status") == "connected"):
        adapter = provider_for(channel)
        if "block" not in adapter.capabilities():
            continue
        for phone in sorted(numbers):
            outcome: dict[str, Any] = {"phone": phone, "blocked": blocked, "contact_id": contact["id"]}
            try:
                adapter.block(phone, blocked)
            except (ProviderUnavailable, ProviderRejected) as err:
                outcome["error"] = str(err)
            key = channels.block_key(auth.org_id, channel["id"], phone)
            if "error" not in outcome:
                if blocked:
                    store.put({**key, "entity": "ChannelBlock", "phone": phone, "blocked_at": clock.now_iso()})
                else:
                    store.delete(key)
            store.put(channels.log_entry(auth.org_id, channel["id"], "contact_block", outcome).item)


# Merge -------------------------------------------------------------------------------------------------------------
def merge(store: Store, auth: AuthContext, target_id: str, body: models.MergeRequest) -> models.Contact:
    """Moves identities, notes, tags, consents and suppressions of `from_contact_id` into the target and deletes it:
    the pointer and the target first, the rest in bounded chunks (switchboard.contacts.merge)."""
    # on a merge only: keeps contacts.merge (and cdp.segments) off the contacts function's cold start
    from switchboard.contacts import merge as merging

    return merging.merge(store, auth, target_id, body)
