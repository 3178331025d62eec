"""What hangs off a contact: notes, tags, consent (with history), suppressions, blocking, and merging two contacts."""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.contacts import models, search, tag_jobs
from switchboard.contacts import repository as repo
from switchboard.contacts.identifiers import Identifier
from switchboard.contacts.service import get_item, not_found, resolve, view, write_contact
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.ids import new_id, new_ulid
from switchboard.jobs import service as jobs
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers import ProviderRejected, ProviderUnavailable, provider_for
from switchboard.store import ConditionCheck, Delete, Put, Store, TxOp, Update, versioned

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
        jobs.enqueue(new["job_id"], 0)
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
    jobs.enqueue(job.item["id"], 0)


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
    store.transact([_contact_exists(org, contact_id), Put(item=current), Put(item=log)])
    return _consent_view(store, org, contact_id, current)


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


def _suppression_view(item: Item) -> models.Suppression:
    active = not item.get("expires_at") or clock.parse_iso(item["expires_at"]) > clock.now()
    return models.Suppression.model_validate({**item, "active": active})


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
    """Moves identities, notes, tags, consents and suppressions of `from_contact_id` into the target, then deletes
    it. Children move first (copy + delete, idempotent), so an interrupted merge can simply be run again."""
    org = auth.org_id
    if body.from_contact_id == target_id:
        raise ValidationFailed.field("body.from_contact_id", "must differ from the target contact")
    target = get_item(store, org, target_id, consistent=True)
    source = get_item(store, org, body.from_contact_id, consistent=True)
    children = store.query_all(f"ORG#{org}", sk_prefix=repo.child_prefix(source["id"]))
    target_children = {
        c["SK"].split("#", 2)[2] for c in store.query_all(f"ORG#{org}", sk_prefix=repo.child_prefix(target_id))
    }
    ops: list[TxOp] = []
    for child in children:
        suffix = child["SK"].split("#", 2)[2]  # e.g. NOTE#note_…, TAG#tag_…, CONSENT#whatsapp
        ops.append(Delete(key={"PK": child["PK"], "SK": child["SK"]}))
        if child.get("entity") == "ContactTag":
            ops.append(Delete(key=repo.tag_reverse_key(org, child["tag_id"], source["id"])))
        if suffix in target_children:
            continue  # the target's own tag, consent or suppression for the same thing wins
        moved = {**child, "SK": f"CONTACT#{target_id}#{suffix}"}
        if "contact_id" in moved:
            moved["contact_id"] = target_id
        ops.append(Put(item=moved))
        if child.get("entity") == "ContactTag":
            ops.append(
                Put(
                    item={
                        **repo.tag_reverse_key(org, child["tag_id"], target_id),
                        "entity": "TagMember",
                        "contact_id": target_id,
                    }
                )
            )
    for start in range(0, len(ops), 100):
        store.transact(ops[start : start + 100])

    merged = dict(target)
    for field in ("name", "first_name", "last_name", "email", "phone", "company", "avatar_url", "lifecycle_stage"):
        merged[field] = target.get(field) or source.get(field)
    merged["attributes"] = {**(source.get("attributes") or {}), **(target.get("attributes") or {})}
    merged["tags"] = list(dict.fromkeys([*target.get("tags", []), *source.get("tags", [])]))
    merged["identities"] = [*target.get("identities", []), *source.get("identities", [])]
    merged["blocked"] = bool(target.get("blocked") or source.get("blocked"))
    final: list[TxOp] = [
        Update(
            key=repo.sentinel_key(org, Identifier(i["type"], i["value"], i.get("source")).sentinel_sk),
            expression="SET contact_id = :to",
            condition="contact_id = :from",
            values={":to": target_id, ":from": source["id"]},
            error=Conflict("An identity of the merged contact changed meanwhile; retry the merge."),
        )
        for i in source.get("identities", [])
    ]
    final.append(
        Delete(
            key=repo.contact_key(org, source["id"]),
            **versioned(source["version"]),
            error=Conflict("The merged contact changed; retry."),
        )
    )
    final += search.index_ops(org, source, None)
    final.append(
        audit_put(
            auth,
            "contact.merged",
            "contact",
            target_id,
            before={"from_contact_id": source["id"], "from_name": source.get("name")},
            after={"identities": len(merged["identities"])},
        )
    )
    changes = ["merged", "identities"]
    return view(write_contact(store, auth, target, merged, final, changes, "merged"))
