"""Contact rules: create-or-upsert by identity, resolution, updates with optimistic concurrency, deletion, merge.

Identity uniqueness lives in the database: every identity has a sentinel item written with
`attribute_not_exists(PK)` in the same transaction as the contact, so two concurrent creates with the same phone
yield one contact — the loser re-reads and upserts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.contacts import repository as repo
from switchboard.contacts import search
from switchboard.contacts.identifiers import Identifier, Numbers, normalize, normalize_phone, numbers_for, sentinel_sk
from switchboard.errors import Conflict, NotFound
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.paging import query_fingerprint, read_page
from switchboard.store import Delete, Put, Store, TxOp, shards, versioned

if TYPE_CHECKING:
    from switchboard.contacts import models
else:  # the model classes (~10 ms) load on first use: messaging imports this module for its rules at init
    from switchboard.lazy import lazy_module

    models = lazy_module("switchboard.contacts.models")

Item = dict[str, Any]
PROFILE_FIELDS = ("name", "first_name", "last_name", "company", "avatar_url", "lifecycle_stage")
MAX_ATTEMPTS = 4


class IdentityConflict(Conflict):
    code = "identity_conflict"
    default_message = "The identifiers belong to different contacts."

    def __init__(self, contact_ids: set[str]) -> None:
        super().__init__(details=[{"contact_ids": sorted(contact_ids)}])


def not_found() -> NotFound:
    return NotFound("No such contact.")


def view(item: Item) -> models.Contact:
    return models.Contact.model_validate(item)


# Reads ------------------------------------------------------------------------------------------------------------
def get_item(store: Store, org_id: str, contact_id: str, *, consistent: bool = False) -> Item:
    item = store.get(repo.contact_key(org_id, contact_id), consistent=consistent)
    if item is None:
        raise not_found()
    return item


def live_owner(store: Store, org_id: str, contact_id: str, *, consistent: bool = True) -> Item | None:
    """The contact an identity sentinel's `contact_id` stands for: that contact, or, when it was merged into another
    (its sentinels are re-pointed by the merge job meanwhile), the contact it went into (`MERGED#CONTACT#` pointer,
    followed through at most 3 merges); None when it is gone otherwise. Reads the pointer only for a missing contact."""
    for _ in range(4):
        item = store.get(repo.contact_key(org_id, contact_id), consistent=consistent)
        if item is not None:
            return item
        pointer = store.get(repo.merged_key(org_id, contact_id), consistent=True)
        if pointer is None:
            return None
        contact_id = str(pointer["target_id"])
    return None


def _live_owners(store: Store, org_id: str, owners: set[str]) -> set[str]:
    """Several owners for one set of identities: those merged into another count as that one (a merge in progress
    still has sentinels naming the merged-away contact)."""
    if len(owners) < 2:
        return owners
    return {(found["id"] if (found := live_owner(store, org_id, owner)) else owner) for owner in owners}


def get(store: Store, auth: AuthContext, contact_id: str) -> models.Contact:
    return view(get_item(store, auth.org_id, contact_id))


def _normalized(ids: list[Any], field: str, numbers: Numbers) -> list[Any]:
    out: list[Any] = []
    for n, ident in enumerate(ids):
        if ident.type == "contact_id":
            out.append(("contact_id", ident.value.strip()))
        else:
            out.append(normalize(ident.type, ident.value, ident.source, f"{field}[{n}]", numbers))
    return out


def resolve(
    store: Store,
    auth: AuthContext,
    identifiers: list[Any],
    field: str = "body.identifiers",
    numbers: Numbers | None = None,
) -> Item:
    """One BatchGetItem for every identifier (sentinels and direct ids), then at most one GetItem: ≤ 2 round trips
    (a third, the organization's default region, only for a number written in national form). `numbers`: how
    numbers are read (default: the organization's caller's rules, `numbers_for`)."""
    org = auth.org_id
    parsed = _normalized(identifiers, field, numbers or numbers_for(store, org))
    request = [
        repo.contact_key(org, p[1]) if isinstance(p, tuple) else repo.sentinel_key(org, p.sentinel_sk) for p in parsed
    ]
    found = store.batch_get(request)
    contacts = {i["id"]: i for i in found if i.get("entity") == "Contact"}
    owners = {i["contact_id"] for i in found if i.get("entity") == "Identity"} | set(contacts)
    if not owners:
        raise NotFound("No stored contact matches these identifiers.")
    owners = _live_owners(store, org, owners)
    if len(owners) > 1:
        raise IdentityConflict(owners)
    (contact_id,) = owners
    owner = contacts.get(contact_id) or live_owner(store, org, contact_id, consistent=False)
    if owner is None:
        raise not_found()
    return owner


def by_phone(store: Store, auth: AuthContext, phone: str) -> models.Contact:
    number = normalize_phone(phone, "path.phone", numbers_for(store, auth.org_id))
    sentinel = store.require(
        repo.sentinel_key(auth.org_id, Identifier("phone", number).sentinel_sk),
        "No stored contact has this phone number.",
    )
    owner = live_owner(store, auth.org_id, sentinel["contact_id"], consistent=False)
    if owner is None:
        raise not_found()
    return view(owner)


def list_contacts(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    tag: str | None,
    lifecycle_stage: str | None,
    updated_since: str | None,
    q: str | None,
) -> tuple[list[models.Contact], str | None]:
    org = auth.org_id
    params = {"tag": tag, "lifecycle_stage": lifecycle_stage, "updated_since": updated_since, "q": q}
    fingerprint = query_fingerprint("contacts", params)

    def read(start: dict | None) -> tuple[list[Item], dict | None]:
        if q:
            tag_name = _find_tag(store, org, tag)["name"] if tag else None
            return search.search(
                store,
                org,
                q,
                limit,
                start,
                keep=lambda c: _matches(c, lifecycle_stage, updated_since) and (not tag_name or tag_name in c["tags"]),
            )
        if tag:
            return _by_tag(store, org, tag, limit, start)
        # the stage's own list (GSI2) or every contact (GSI1), newest change first: an ordered merge of the list's
        # shards and its legacy partition, `updated_since` the lower bound of the sort key (`<updated_at>#<id>`)
        index, pk = ("GSI2", repo.stage_pk(org, lifecycle_stage)) if lifecycle_stage else ("GSI1", repo.list_pk(org))
        within = (updated_since or shards.LOW, shards.HIGH)
        return shards.merged_state_page(
            store, start, pks=shards.index_pks(pk), index=index, limit=limit, forward=False, within=within
        )

    items, next_cursor = read_page(org, fingerprint, cursor, read)
    return [view(i) for i in items if _matches(i, lifecycle_stage, updated_since)], next_cursor


def _matches(item: Item, stage: str | None, since: str | None) -> bool:
    return (not stage or item.get("lifecycle_stage") == stage) and (not since or item["updated_at"] >= since)


def _by_tag(store: Store, org: str, tag_ref: str, limit: int, start: dict | None) -> tuple[list[Item], dict | None]:
    tag = _find_tag(store, org, tag_ref)
    page = store.query(f"ORG#{org}", sk_prefix=f"CTAG#{tag['id']}#", limit=limit, start_key=start)
    contacts = store.batch_get([repo.contact_key(org, r["contact_id"]) for r in page.items])
    order = {r["contact_id"]: n for n, r in enumerate(page.items)}
    return sorted(contacts, key=lambda c: order[c["id"]]), page.last_key


# Create or upsert -------------------------------------------------------------------------------------------------
def _identities_of(body: models.ContactCreate, field: str, numbers: Numbers) -> list[tuple[Identifier, str | None]]:
    wanted: list[tuple[Identifier, str | None]] = []
    if body.phone:
        wanted.append((normalize("phone", body.phone, None, f"{field}.phone", numbers), None))
    if body.email:
        wanted.append((normalize("email", body.email, None, f"{field}.email"), None))
    for n, given in enumerate(body.identities):
        ident = normalize(given.type, given.value, given.source, f"{field}.identities[{n}]", numbers)
        wanted.append((ident, given.channel_id))
    unique: dict[str, tuple[Identifier, str | None]] = {}
    for ident, channel in wanted:
        unique.setdefault(ident.sentinel_sk, (ident, channel))
    return list(unique.values())


def _identity_record(ident: Identifier, channel_id: str | None, now: str) -> Item:
    return {
        "type": ident.type,
        "value": ident.value,
        "source": ident.source,
        "channel_id": channel_id,
        "created_at": now,
    }


def _sentinel_put(org: str, contact_id: str, ident: Identifier, channel_id: str | None, now: str) -> Put:
    return Put(
        item={
            **repo.sentinel_key(org, ident.sentinel_sk),
            "entity": "Identity",
            "contact_id": contact_id,
            **_identity_record(ident, channel_id, now),
        },
        condition="attribute_not_exists(PK)",
        error=_SentinelTaken(),
    )


class _SentinelTaken(Conflict):
    """An identity was claimed concurrently: re-read and retry."""


def _derive_names(fields: Item) -> Item:
    name, first, last = fields.get("name"), fields.get("first_name"), fields.get("last_name")
    if name and not (first or last):
        parts = name.split()
        fields["first_name"], fields["last_name"] = (parts[0], " ".join(parts[1:]) or None) if parts else (None, None)
    elif (first or last) and not name:
        fields["name"] = " ".join(p for p in (first, last) if p)
    return fields


def _names_for_update(item: Item, fields: Item) -> Item:
    """Keep name, first_name and last_name consistent with whichever of them the caller changed."""
    if "name" in fields and not ({"first_name", "last_name"} & fields.keys()):
        return _derive_names(fields)
    if {"first_name", "last_name"} & fields.keys() and "name" not in fields:
        parts = (fields.get("first_name", item.get("first_name")), fields.get("last_name", item.get("last_name")))
        fields["name"] = " ".join(p for p in parts if p) or None
    return fields


def _merge_attributes(old: Item, patch: Item | None) -> Item:
    """Attributes merge key by key; a null value removes the key."""
    merged = {**old, **(patch or {})}
    return {k: v for k, v in merged.items() if v is not None}


def _changed_fields(item: Item, fields: Item) -> Item:
    """The new values of the fields that really change (attributes merged)."""
    out: Item = {}
    for key, value in fields.items():
        new_value = _merge_attributes(item.get("attributes") or {}, value) if key == "attributes" else value
        if item.get(key) != new_value:
            out[key] = new_value
    return out


def _checked_attributes[B: models.ContactFields](
    store: Store, org: str, body: B, numbers: Numbers, path: str = "body.attributes"
) -> B:
    """Custom fields (switchboard.cdp.fields): defined attribute keys are validated and normalised, others pass."""
    if not body.attributes:
        return body
    # on first use: keeps switchboard.cdp.fields off the cold start
    from switchboard.cdp.fields import validate_attributes

    checked = validate_attributes(store, org, body.attributes, path, numbers)
    return body.model_copy(update={"attributes": checked})


def upsert(
    store: Store, auth: AuthContext, body: models.ContactCreate, numbers: Numbers | None = None
) -> tuple[models.Contact, bool]:
    """Creates the contact, or updates the single contact that already owns one of the identities (→ created?).
    `numbers`: how its numbers are read (default: the organization's caller's rules, `numbers_for`)."""
    item, created = upsert_item(store, auth, body, numbers)
    return view(item), created


def upsert_item(
    store: Store, auth: AuthContext, body: models.ContactCreate, numbers: Numbers | None = None
) -> tuple[Item, bool]:
    """`upsert`, answering the stored item (for callers that read a field or two of it)."""
    numbers = numbers or numbers_for(store, auth.org_id)
    body = _checked_attributes(store, auth.org_id, body, numbers)
    return _upsert(store, auth, _fields_of(body), _identities_of(body, "body", numbers))


def upsert_identity(
    store: Store, auth: AuthContext, ident: Identifier, channel_id: str | None = None
) -> tuple[Item, bool]:
    """`upsert_item` of a body naming this one normalised identity and nothing else (a send's recipient, an event's
    contact): the same rules, without a body to build and check."""
    return _upsert(store, auth, {}, [(ident, channel_id)])


def _upsert(store: Store, auth: AuthContext, fields: Item, idents: list) -> tuple[Item, bool]:
    org = auth.org_id
    for _ in range(MAX_ATTEMPTS):
        owners = {
            i["contact_id"] for i in store.batch_get([repo.sentinel_key(org, ident.sentinel_sk) for ident, _ in idents])
        }
        owners = _live_owners(store, org, owners)
        if len(owners) > 1:
            raise IdentityConflict(owners)
        try:
            if owners:
                (owner,) = owners
                found = live_owner(store, org, owner)
                if found is None:
                    _release_stale(store, org, owner, idents)
                    continue
                item = found
                new, extra, changes = _applied(auth, item, fields, idents)
                return write_contact(store, auth, item, new, extra, changes, "upserted"), False
            return _create(store, auth, fields, idents), True
        except _SentinelTaken:
            continue
        except Conflict as err:
            if err.code != "conflict":
                raise
            continue
    raise Conflict("The contact changed concurrently; retry.")


@dataclass(frozen=True)
class UpsertPlan:
    """What `upsert` would write for one body, uncommitted (`ops` is empty when nothing would change)."""

    item: Item
    ops: list[TxOp]
    created: bool
    identity_keys: tuple[str, ...]


def plan_upsert(
    store: Store, auth: AuthContext, body: models.ContactCreate, field: str = "body", numbers: Numbers | None = None
) -> UpsertPlan:
    """The upsert rules (custom-field checks, identity sentinels, one owner at most) for a caller that commits the
    operations itself, e.g. with other contacts' in one transaction; a sentinel claimed meanwhile cancels it.
    `numbers`: how its numbers are read (default `numbers_for`; an import passes one for all its rows)."""
    org = auth.org_id
    numbers = numbers or numbers_for(store, org)
    body = _checked_attributes(store, org, body, numbers, f"{field}.attributes")
    idents = _identities_of(body, field, numbers)
    identity_keys = tuple(ident.sentinel_sk for ident, _ in idents)
    owners = {i["contact_id"] for i in store.batch_get([repo.sentinel_key(org, sk) for sk in identity_keys])}
    owners = _live_owners(store, org, owners)
    if len(owners) > 1:
        raise IdentityConflict(owners)
    if not owners:
        item, ops = creation_ops(auth, _fields_of(body), idents)
        return UpsertPlan(item, ops, True, identity_keys)
    (owner,) = owners
    found = live_owner(store, org, owner)
    if found is None:  # a deleted contact's identities: released, then planned as a new contact
        _release_stale(store, org, owner, idents)
        item, ops = creation_ops(auth, _fields_of(body), idents)
        return UpsertPlan(item, ops, True, identity_keys)
    old = found
    new, extra, changes = _applied(auth, old, _fields_of(body), idents)
    if not changes and not extra:
        return UpsertPlan(old, [], False, identity_keys)
    new, ops = write_ops(auth, old, new, extra, changes, "upserted")
    return UpsertPlan(new, ops, False, identity_keys)


_FIELDS_OF = frozenset((*PROFILE_FIELDS, "attributes"))


def _fields_of(body: models.ContactFields) -> Item:
    if _FIELDS_OF.isdisjoint(body.model_fields_set):
        return {}  # identities only: no dump
    fields = body.model_dump(exclude_unset=True, exclude={"identities", "phone", "email"})
    return {k: v for k, v in fields.items() if k in PROFILE_FIELDS or k == "attributes"}


def _create(store: Store, auth: AuthContext, fields: Item, idents: list) -> Item:
    item, ops = creation_ops(auth, fields, idents)
    store.transact(ops)
    return item


def creation_ops(auth: AuthContext, fields: Item, idents: list) -> tuple[Item, list[TxOp]]:
    """The new contact and the operations that create it (item, identity sentinels, search rows, the organization's
    event) uncommitted: the caller transacts them, alone or with others (a contacts import commits a batch of rows
    at once). `fields` are the body's profile fields and attributes (`_fields_of`)."""
    org, now, contact_id = auth.org_id, clock.now_iso(), new_id("ct")
    fields = _derive_names(fields)
    item: Item = {
        **repo.contact_key(org, contact_id),
        "entity": "Contact",
        "id": contact_id,
        "organization_id": org,
        **{k: fields.get(k) for k in PROFILE_FIELDS},
        "attributes": fields.get("attributes") or {},
        "email": next((i.value for i, _ in idents if i.type == "email"), None),
        "phone": next((i.value for i, _ in idents if i.space == "phone"), None),
        "tags": [],
        "identities": [_identity_record(i, ch, now) for i, ch in idents],
        "blocked": False,
        "consent": {},  # channel → status, kept by consent changes (children.put_consent) for segment rules
        "version": 1,
        "created_at": now,
        "updated_at": now,
    }
    item |= repo.index_attributes(org, item)
    ops: list[TxOp] = [Put(item=item, condition="attribute_not_exists(PK)")]
    ops += [_sentinel_put(org, contact_id, i, ch, now) for i, ch in idents]
    ops += search.index_ops(org, None, item)
    ops.append(_event(org, item, ["created"], "created"))
    return item, ops


def _event(org: str, item: Item, changes: list[str], action: str) -> Put:
    return outbox_put(
        org,
        "contact.updated",
        {
            "contact_id": item["id"],
            "name": item.get("name"),
            "organization_id": org,
            "action": action,
            "changes": changes,
        },
    )


def write_contact(
    store: Store, auth: AuthContext, old: Item, new: Item, extra: list[TxOp], changes: list[str], action: str
) -> Item:
    """Persist `new` over `old` (optimistic: the version read must still be current), with the side items."""
    if not changes and not extra:
        return old
    new, ops = write_ops(auth, old, new, extra, changes, action)
    store.transact(ops)
    return new


def write_ops(
    auth: AuthContext, old: Item, new: Item, extra: list[TxOp], changes: list[str], action: str
) -> tuple[Item, list[TxOp]]:
    """`write_contact` without the commit: the versioned item, its name index, `extra` and the event."""
    org = auth.org_id
    new = {**new, "version": int(old["version"]) + 1, "updated_at": clock.now_iso()}
    new = {k: v for k, v in new.items() if not k.startswith("GSI")} | repo.index_attributes(org, new)
    ops: list[TxOp] = [
        Put(
            item=new,
            **versioned(old["version"]),
            error=Conflict("The contact was changed by another request; read it again."),
        )
    ]
    ops += search.index_ops(org, old, new)
    ops += extra
    if changes:
        ops.append(_event(org, new, changes, action))
    return new, ops


def _applied(auth: AuthContext, item: Item, fields: Item, idents: list) -> tuple[Item, list[TxOp], list]:
    """An upsert's changes to an existing contact (`fields`: the body's, `_fields_of`): the new item, the sentinels
    of added identities, the changes."""
    org = auth.org_id
    changed = _changed_fields(item, _names_for_update(item, fields)) if fields else {}
    owned = {sentinel_sk(i["type"], i["value"], i.get("source")) for i in item.get("identities", [])}
    unowned = [(ident, channel) for ident, channel in idents if ident.sentinel_sk not in owned]
    if not changed and not unowned:
        return item, [], []  # nothing changes (a send to a known number): no copy of the item
    new = {**item, **changed}
    changes = list(changed)
    extra: list[TxOp] = []
    added = []
    now = clock.now_iso() if unowned else ""  # read once, when an identity is added
    for ident, channel in unowned:
        extra.append(_sentinel_put(org, item["id"], ident, channel, now))
        added.append(_identity_record(ident, channel, now))
    if added:
        new["identities"] = [*item.get("identities", []), *added]
        changes.append("identities")
        new["email"] = new.get("email") or next((a["value"] for a in added if a["type"] == "email"), None)
        new["phone"] = new.get("phone") or next(
            (a["value"] for a in added if Identifier(a["type"], a["value"]).space == "phone"), None
        )
    return new, extra, changes


# Update and delete --------------------------------------------------------------------------------------------------
def update(
    store: Store, auth: AuthContext, contact_id: str, body: models.ContactUpdate, if_match: int | None
) -> models.Contact:
    org, now = auth.org_id, clock.now_iso()
    item = get_item(store, org, contact_id, consistent=True)
    numbers = numbers_for(store, org)
    body = _checked_attributes(store, org, body, numbers)
    if if_match is not None and int(item["version"]) != if_match:
        raise Conflict(
            "The contact's version is not the one in If-Match; read it again.",
            details=[{"field": "headers.if-match", "current_version": item["version"]}],
        )
    changed = _changed_fields(item, _names_for_update(item, _fields_of(body)))
    new, changes = {**item, **changed}, list(changed)
    extra: list[TxOp] = []
    for field, space in (("phone", "phone"), ("email", "email")):
        raw = getattr(body, field)
        if field not in body.model_fields_set:
            continue
        ident = normalize(space, raw, None, f"body.{field}", numbers) if raw else None
        if (ident.value if ident else None) == item.get(field):
            continue
        identities = [
            i
            for i in new.get("identities", [])
            if not (Identifier(i["type"], i["value"]).space == space and i["value"] == item.get(field))
        ]
        if item.get(field):
            old_sk = Identifier(space, item[field]).sentinel_sk
            extra.append(
                Delete(key=repo.sentinel_key(org, old_sk), condition="contact_id = :me", values={":me": contact_id})
            )
        if ident and not any(
            i["value"] == ident.value and Identifier(i["type"], i["value"]).space == ident.space for i in identities
        ):
            extra.append(_sentinel_put(org, contact_id, ident, None, now))
            identities.append(_identity_record(ident, None, now))
        new[field] = ident.value if ident else None
        new["identities"] = identities
        changes.append(field)
    try:
        return view(write_contact(store, auth, item, new, extra, changes, "updated"))
    except _SentinelTaken:
        raise Conflict("That phone or e-mail already belongs to another contact.", code="identity_conflict") from None


def _release_stale(store: Store, org: str, owner: str, idents: list) -> None:
    """Sentinels that still name `owner`, a contact that no longer exists (deleted: its erasure releases the rest of
    its identities shortly): released now, so a new contact may take them (each conditional on still naming it)."""
    for ident, _ in idents:
        try:
            store.delete(
                repo.sentinel_key(org, ident.sentinel_sk), condition="contact_id = :gone", values={":gone": owner}
            )
        except Conflict:
            continue


def identities(store: Store, auth: AuthContext, contact_id: str) -> list[models.Identity]:
    return get(store, auth, contact_id).identities


# Tags (the catalogue is needed by the list filter) -----------------------------------------------------------------
def _find_tag(store: Store, org: str, ref: str) -> Item:
    if ref.startswith("tag_"):
        tag = store.get(repo.tag_key(org, ref))
    else:
        pointer = store.get(repo.tag_name_key(org, ref))
        tag = store.get(repo.tag_key(org, pointer["tag_id"])) if pointer else None
    if tag is None:
        raise NotFound("No such tag.")
    return tag
