"""Object types (custom record schemas) and contact objects (records of a type, linked to a contact).

Keys (under `ORG#<org>`): `CDPOTYPE#<oty_id>` the type with its ordered fields embedded (one read validates a
record; reorder is one write, `version`-guarded), `CDPOTYPEKEY#<key>` its unique key; `CDPOBJ#<obj_id>` a record,
GSI1 `ORG#<org>#OBJTYPE#<oty_id>` and GSI2 `ORG#<org>#CONTACTOBJ#<ct_id>` (both `<updated_at>#<id>`), and
`CDPOTYPEREC#<oty_id>#<obj_id>` the record's entry in its type, put and deleted in the record's own transactions.
Record changes emit `crm.record.created|updated|deleted` through the outbox.

Whether a type has records is read from those entries with a consistent Query, never from GSI1 alone (a GSI lags
its table: a record written a moment ago may be missing there). Deleting a type first marks it `deleting_until`
(a short lease); a record's creation checks the type in its transaction, so it either commits before the mark (and
the consistent read sees its entry) or fails against it. Records written before the entries existed are found
through GSI1, each confirmed by a consistent read of the record.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.cdp import models
from switchboard.cdp.fields import check_value
from switchboard.contacts import repository as contact_repo
from switchboard.contacts.identifiers import Numbers, numbers_for
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import ConditionCheck, Delete, Put, Store, keys, versioned

Item = dict[str, Any]
MAX_FIELDS = 100


def type_key(org: str, type_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPOTYPE#{type_id}")


def type_key_sentinel(org: str, key: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPOTYPEKEY#{key}")


def object_key(org: str, object_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPOBJ#{object_id}")


def type_pk(org: str, type_id: str) -> str:
    return f"ORG#{org}#OBJTYPE#{type_id}"


def contact_pk(org: str, contact_id: str) -> str:
    return f"ORG#{org}#CONTACTOBJ#{contact_id}"


def type_entry_key(org: str, type_id: str, object_id: str) -> dict[str, str]:
    """The record's entry in its type (base table): how "does this type have records?" is answered consistently."""
    return keys.key(keys.org_pk(org), f"CDPOTYPEREC#{type_id}#{object_id}")


def type_entry_put(org: str, record: Item) -> Put:
    return Put(
        item={
            **type_entry_key(org, record["object_type_id"], record["id"]),
            "entity": "ObjectTypeEntry",
            "object_id": record["id"],
        }
    )


def type_entry_delete(org: str, record: Item) -> Delete:
    return Delete(key=type_entry_key(org, record["object_type_id"], record["id"]))


def _type_gone() -> NotFound:
    return NotFound("No such object type.")


def view_type(item: Item) -> models.ObjectType:
    return models.ObjectType.model_validate(item)


# Types ----------------------------------------------------------------------------------------------------------------
def list_types(store: Store, auth: AuthContext) -> list[models.ObjectType]:
    rows = store.query_all(keys.org_pk(auth.org_id), sk_prefix="CDPOTYPE#")
    return [view_type(i) for i in sorted(rows, key=lambda i: i["created_at"])]


def get_type_item(store: Store, org: str, type_id: str, *, consistent: bool = False) -> Item:
    item = store.get(type_key(org, type_id), consistent=consistent)
    if item is None:
        raise _type_gone()
    return item


def find_type(store: Store, org: str, ref: str) -> Item:
    if ref.startswith("oty_"):
        return get_type_item(store, org, ref)
    pointer = store.get(type_key_sentinel(org, ref))
    if pointer is None:
        raise _type_gone()
    return get_type_item(store, org, pointer["type_id"])


def get_type(store: Store, auth: AuthContext, type_id: str) -> models.ObjectType:
    return view_type(get_type_item(store, auth.org_id, type_id))


def _field_item(body: models.FieldCreate, position: int) -> Item:
    return {
        "id": new_id("ofl"),
        **body.model_dump(mode="json"),
        "options": [o.model_dump(mode="json") for o in body.options or []],
        "position": position,
    }


def _check_display_field(fields: list[Item], display: str | None, path: str) -> None:
    if display is not None and display not in {f["key"] for f in fields}:
        raise ValidationFailed.field(path, "must be the key of one of the type's fields")


def _check_kind(body: models.ObjectTypeCreate, fields: list[Item]) -> None:
    """Deal and task types name the single-select field whose changes mean a stage move or a completion."""
    bad = ValidationFailed.field
    if body.kind == "custom":
        for name in ("status_field", "completed_value"):
            if getattr(body, name) is not None:
                raise bad(f"body.{name}", "is only allowed on deal and task types")
        return
    if body.status_field is None:
        raise bad("body.status_field", f"is required on {body.kind} types")
    field = next((f for f in fields if f["key"] == body.status_field), None)
    if field is None or field["type"] != "single_select":
        raise bad("body.status_field", "must be the key of one of the type's single_select fields")
    if body.kind == "deal" and body.completed_value is not None:
        raise bad("body.completed_value", "is only allowed on task types")
    if body.kind == "task":
        if body.completed_value is None:
            raise bad("body.completed_value", "is required on task types")
        if body.completed_value not in {o["value"] for o in field["options"]}:
            raise bad("body.completed_value", "must be one of the status field's options")


def create_type(store: Store, auth: AuthContext, body: models.ObjectTypeCreate) -> models.ObjectType:
    org, now = auth.org_id, clock.now_iso()
    keys_seen: set[str] = set()
    for n, f in enumerate(body.fields):
        if f.key in keys_seen:
            raise ValidationFailed.field(f"body.fields[{n}].key", "is used by another field of this type")
        keys_seen.add(f.key)
    fields = [_field_item(f, n) for n, f in enumerate(body.fields)]
    _check_display_field(fields, body.display_field, "body.display_field")
    _check_kind(body, fields)
    type_id = new_id("oty")
    item: Item = {
        **type_key(org, type_id),
        "entity": "ObjectType",
        "id": type_id,
        **body.model_dump(mode="json", exclude={"fields"}),
        "fields": fields,
        "version": 1,
        "created_at": now,
        "updated_at": now,
    }
    taken = Conflict(f"An object type with the key {body.key!r} exists.", details=[{"field": "body.key"}])
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(
                item={**type_key_sentinel(org, body.key), "entity": "ObjectTypeKey", "type_id": type_id},
                condition="attribute_not_exists(PK)",
                error=taken,
            ),
            audit_put(auth, "cdp.object_type.created", "object_type", type_id, after={"key": body.key}),
        ]
    )
    return view_type(item)


def _save_type(store: Store, auth: AuthContext, old: Item, new: Item, action: str) -> Item:
    new = {**new, "version": int(old["version"]) + 1, "updated_at": clock.now_iso()}
    store.transact(
        [
            Put(
                item=new,
                **versioned(old["version"]),
                error=Conflict("The object type changed concurrently; read it again."),
            ),
            audit_put(auth, f"cdp.object_type.{action}", "object_type", old["id"]),
        ]
    )
    return new


def update_type(store: Store, auth: AuthContext, type_id: str, body: models.ObjectTypeUpdate) -> models.ObjectType:
    item = get_type_item(store, auth.org_id, type_id, consistent=True)
    patch = body.model_dump(mode="json", exclude_unset=True)
    if "name" in patch and patch["name"] is None:
        raise ValidationFailed.field("body.name", "cannot be null")
    if "display_field" in patch:
        _check_display_field(item["fields"], patch["display_field"], "body.display_field")
    return view_type(_save_type(store, auth, item, {**item, **patch}, "updated"))


DELETE_LEASE = timedelta(seconds=30)  # how long a type refuses new records while its deletion checks for records
LEGACY_PAGE = 25


def delete_type(store: Store, auth: AuthContext, type_id: str) -> None:
    """Only a type without records can go: marked `deleting_until` first (new records are refused from then on),
    then its entries read consistently; the type goes with the mark as its condition, or the mark is lifted."""
    org = auth.org_id
    item = get_type_item(store, org, type_id, consistent=True)
    now = clock.now()
    mark = clock.iso(now + DELETE_LEASE)
    try:
        store.update(
            type_key(org, type_id),
            "SET deleting_until = :mark",
            condition="attribute_exists(PK) AND (attribute_not_exists(deleting_until) OR deleting_until < :now)",
            values={":mark": mark, ":now": clock.iso(now)},
            error=Conflict("The object type is being deleted already."),
            return_values="NONE",
        )
    except Conflict:
        get_type_item(store, org, type_id, consistent=True)  # 404 when it went meanwhile
        raise
    if _has_records(store, org, type_id):
        store.update(
            type_key(org, type_id),
            "REMOVE deleting_until",
            condition="deleting_until = :mark",
            values={":mark": mark},
            error=Conflict("The object type changed meanwhile."),
            return_values="NONE",
        )
        raise Conflict("Records of this type exist; delete them first.")
    store.transact(
        [
            Delete(
                key=type_key(org, type_id),
                condition="deleting_until = :mark",
                values={":mark": mark},
                error=Conflict("The object type's deletion took too long; retry."),
            ),
            Delete(key=type_key_sentinel(org, item["key"])),
            audit_put(auth, "cdp.object_type.deleted", "object_type", type_id, before={"key": item["key"]}),
        ]
    )


def _has_records(store: Store, org: str, type_id: str) -> bool:
    """A record of the type exists: its entry (consistent Query, one item); or a record written before entries
    existed, found through GSI1 and confirmed by a consistent read (the index may still list records just deleted)."""
    entries = store.query(keys.org_pk(org), sk_prefix=f"CDPOTYPEREC#{type_id}#", limit=1, consistent=True)
    if entries.items:
        return True
    start = None
    while True:
        page = store.query(type_pk(org, type_id), index="GSI1", limit=LEGACY_PAGE, start_key=start)
        if page.items and store.batch_get([object_key(org, r["id"]) for r in page.items], consistent=True):
            return True
        if page.last_key is None:
            return False
        start = page.last_key


def type_open_check(org: str, type_id: str, now: str) -> ConditionCheck:
    """In a record's creation: the type exists and no deletion of it is under way."""
    return ConditionCheck(
        key=type_key(org, type_id),
        condition="attribute_exists(PK) AND (attribute_not_exists(deleting_until) OR deleting_until < :now)",
        values={":now": now},
        error=Conflict("The object type is being deleted or is gone; read it again."),
    )


# Fields of a type ---------------------------------------------------------------------------------------------------
def list_type_fields(store: Store, auth: AuthContext, type_id: str) -> list[models.ObjectField]:
    return view_type(get_type_item(store, auth.org_id, type_id)).fields


def _field_of(item: Item, field_id: str) -> Item:
    for f in item["fields"]:
        if f["id"] == field_id:
            return f  # type: ignore[no-any-return]
    raise NotFound("No such field on this object type.")


def get_type_field(store: Store, auth: AuthContext, type_id: str, field_id: str) -> models.ObjectField:
    return models.ObjectField.model_validate(_field_of(get_type_item(store, auth.org_id, type_id), field_id))


def add_field(store: Store, auth: AuthContext, type_id: str, body: models.FieldCreate) -> models.ObjectField:
    item = get_type_item(store, auth.org_id, type_id, consistent=True)
    if any(f["key"] == body.key for f in item["fields"]):
        raise Conflict(f"The type has a field with the key {body.key!r}.", details=[{"field": "body.key"}])
    if len(item["fields"]) >= MAX_FIELDS:
        raise Conflict(f"An object type holds at most {MAX_FIELDS} fields.")
    field = _field_item(body, len(item["fields"]))
    _save_type(store, auth, item, {**item, "fields": [*item["fields"], field]}, "field_added")
    return models.ObjectField.model_validate(field)


def update_field(
    store: Store, auth: AuthContext, type_id: str, field_id: str, body: models.FieldUpdate
) -> models.ObjectField:
    item = get_type_item(store, auth.org_id, type_id, consistent=True)
    field = _field_of(item, field_id)
    patch = body.model_dump(mode="json", exclude_unset=True)
    if "label" in patch and patch["label"] is None:
        raise ValidationFailed.field("body.label", "cannot be null")
    if "options" in patch and (field["type"] not in models.SELECT_TYPES or not patch["options"]):
        raise ValidationFailed.field("body.options", "are required on select fields and allowed only there")
    done = item.get("completed_value")
    keeps = done is None or done in {o["value"] for o in patch.get("options") or []}
    if "options" in patch and field["key"] == item.get("status_field") and not keeps:
        raise ValidationFailed.field("body.options", f"must keep {done!r}, the type's completed value")
    new_field = {**field, **{k: v for k, v in patch.items() if not (k == "required" and v is None)}}
    fields = [new_field if f["id"] == field_id else f for f in item["fields"]]
    _save_type(store, auth, item, {**item, "fields": fields}, "field_updated")
    return models.ObjectField.model_validate(new_field)


def delete_field(store: Store, auth: AuthContext, type_id: str, field_id: str) -> None:
    """The definition goes; values already stored on records stay (and are dropped on the record's next write)."""
    item = get_type_item(store, auth.org_id, type_id, consistent=True)
    field = _field_of(item, field_id)
    if field["key"] == item.get("status_field"):
        raise Conflict(f"The field holds the {item['kind']}'s status; a {item['kind']} type keeps it.")
    fields = [{**f, "position": n} for n, f in enumerate(f for f in item["fields"] if f["id"] != field_id)]
    new = {**item, "fields": fields}
    if item.get("display_field") == field["key"]:
        new["display_field"] = None
    _save_type(store, auth, item, new, "field_deleted")


def reorder_fields(
    store: Store, auth: AuthContext, type_id: str, body: models.FieldReorder
) -> list[models.ObjectField]:
    item = get_type_item(store, auth.org_id, type_id, consistent=True)
    current = {f["id"]: f for f in item["fields"]}
    if len(set(body.field_ids)) != len(body.field_ids) or set(body.field_ids) != set(current):
        raise ValidationFailed.field("body.field_ids", "must list every field id of the type exactly once")
    fields = [{**current[fid], "position": n} for n, fid in enumerate(body.field_ids)]
    saved = _save_type(store, auth, item, {**item, "fields": fields}, "fields_reordered")
    return view_type(saved).fields


# Records ------------------------------------------------------------------------------------------------------------
def _validate_properties(
    type_item: Item, props: Item, numbers: Numbers, *, creating: bool, path: str = "body.properties"
) -> Item:
    defs = {f["key"]: f for f in type_item["fields"]}
    problems: list[dict[str, Any]] = []
    out: Item = {}
    for key, value in props.items():
        if key not in defs:
            problems.append({"field": f"{path}.{key}", "message": "is not a field of this object type"})
            continue
        try:
            out[key] = check_value(defs[key], value, f"{path}.{key}", numbers)
        except ValidationFailed as err:
            problems.extend(err.details)
    if creating:
        for key, d in defs.items():
            if d.get("required") and out.get(key) in (None, "", []):
                problems.append({"field": f"{path}.{key}", "message": "Field required"})
    if problems:
        raise ValidationFailed("; ".join(f"{p['field']}: {p['message']}" for p in problems[:3]), details=problems)
    return out


def _display_name(type_item: Item, record: Item) -> str:
    if record.get("explicit_name"):
        return str(record["explicit_name"])
    display = type_item.get("display_field")
    value = record["properties"].get(display) if display else None
    if value is None:
        first_text = next((f["key"] for f in type_item["fields"] if f["type"] == "text"), None)
        value = record["properties"].get(first_text) if first_text else None
    return str(value) if value not in (None, "") else f"{type_item['name']} {record['id']}"


def record_event(org: str, event: str, record: Item) -> Put:
    return outbox_put(
        org,
        event,
        {
            "object_kind": record["object_kind"],
            "record_id": record["id"],
            "display_name": record["display_name"],
            "organization_id": org,
            "object_type_id": record["object_type_id"],
            "contact_id": record["contact_id"],
        },
    )


def _transition_events(org: str, type_item: Item, old: Item, new: Item) -> list[Put]:
    """`crm.deal.stage_changed` when a deal's stage field really changes, `crm.task.completed` when a task's status
    becomes the completed value (not when it stays there)."""
    kind, status = type_item.get("kind", "custom"), type_item.get("status_field")
    if kind == "custom" or not status:
        return []
    before, after = old["properties"].get(status), new["properties"].get(status)
    if before == after:
        return []
    base = {
        "object_kind": new["object_kind"],
        "record_id": new["id"],
        "display_name": new["display_name"],
        "organization_id": org,
        "contact_id": new["contact_id"],
    }
    if kind == "deal":
        return [outbox_put(org, "crm.deal.stage_changed", {**base, "from_stage": before, "to_stage": after})]
    if after == type_item.get("completed_value"):
        return [outbox_put(org, "crm.task.completed", {**base, "previous_status": before})]
    return []


def _index(org: str, record: Item) -> Item:
    order = f"{record['updated_at']}#{record['id']}"
    return {
        "GSI1PK": type_pk(org, record["object_type_id"]),
        "GSI1SK": order,
        "GSI2PK": contact_pk(org, record["contact_id"]),
        "GSI2SK": order,
    }


def view_object(item: Item) -> models.ContactObject:
    return models.ContactObject.model_validate(item)


def get_object_item(store: Store, org: str, object_id: str, *, consistent: bool = False) -> Item:
    return store.require(object_key(org, object_id), "No such contact object.", consistent=consistent)


def get_object(store: Store, auth: AuthContext, object_id: str) -> models.ContactObject:
    return view_object(get_object_item(store, auth.org_id, object_id))


def create_object(store: Store, auth: AuthContext, body: models.ObjectCreate) -> models.ContactObject:
    org, now = auth.org_id, clock.now_iso()
    type_item = find_type(store, org, body.object_type_id)
    if store.get(contact_repo.contact_key(org, body.contact_id)) is None:
        raise NotFound("No such contact.")
    props = _validate_properties(type_item, body.properties, numbers_for(store, org), creating=True)
    object_id = new_id("obj")
    record: Item = {
        **object_key(org, object_id),
        "entity": "ContactObject",
        "id": object_id,
        "organization_id": org,
        "object_type_id": type_item["id"],
        "object_kind": type_item["key"],
        "contact_id": body.contact_id,
        "explicit_name": body.display_name,
        "properties": props,
        "version": 1,
        "created_at": now,
        "updated_at": now,
    }
    record["display_name"] = _display_name(type_item, record)
    record |= _index(org, record)
    store.transact(
        [
            Put(item=record, condition="attribute_not_exists(PK)"),
            type_entry_put(org, record),
            type_open_check(org, type_item["id"], now),
            ConditionCheck(
                key=contact_repo.contact_key(org, body.contact_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such contact."),
            ),
            record_event(org, "crm.record.created", record),
        ]
    )
    return view_object(record)


def update_object(store: Store, auth: AuthContext, object_id: str, body: models.ObjectUpdate) -> models.ContactObject:
    org = auth.org_id
    record = get_object_item(store, org, object_id, consistent=True)
    type_item = get_type_item(store, org, record["object_type_id"])
    patch = body.model_dump(exclude_unset=True)
    merged = {**record["properties"], **(patch.get("properties") or {})}
    changed_props = dict(patch.get("properties") or {})
    checked = _validate_properties(type_item, changed_props, numbers_for(store, org), creating=False)
    props = {k: v for k, v in {**merged, **checked}.items() if v is not None}
    new = {**record, "properties": props}
    if "display_name" in patch:
        new["explicit_name"] = patch["display_name"]
    new["display_name"] = _display_name(type_item, new)
    if new["properties"] == record["properties"] and new["display_name"] == record["display_name"]:
        return view_object(record)
    new["version"] = int(record["version"]) + 1
    new["updated_at"] = clock.now_iso()
    new = {k: v for k, v in new.items() if not k.startswith("GSI")} | _index(org, new)
    store.transact(
        [
            Put(
                item=new,
                **versioned(record["version"]),
                error=Conflict("The record changed concurrently; read it again."),
            ),
            record_event(org, "crm.record.updated", new),
            *_transition_events(org, type_item, record, new),
        ]
    )
    return view_object(new)


def list_objects(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    object_type_id: str | None,
    contact_id: str | None,
) -> tuple[list[models.ContactObject], str | None]:
    """By contact (GSI2), by type (GSI1), or every record (newest first by id)."""
    org = auth.org_id
    fingerprint = query_fingerprint("cdp.objects", {"type": object_type_id, "contact": contact_id})
    type_id = find_type(store, org, object_type_id)["id"] if object_type_id else None
    if contact_id:
        where: dict[str, Any] = {
            "pk": contact_pk(org, contact_id),
            "index": "GSI2",
            "filters": {"object_type_id": type_id},
        }
    elif type_id:
        where = {"pk": type_pk(org, type_id), "index": "GSI1"}
    else:
        where = {"sk_prefix": "CDPOBJ#"}
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, limit=limit, forward=False, **where)
    return [view_object(i) for i in rows], next_cursor
