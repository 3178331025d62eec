"""Custom fields of contacts: the catalogue, and the validation of contact `attributes` against it.

Keys (under `ORG#<org>`): `CDPFIELD#<fld_id>` the definition, `CDPFIELDKEY#<key>` the sentinel that keeps keys unique.
The key is stable (it names the data in every contact's `attributes`); a rename changes the label only.
Undefined attribute keys are accepted as they are; defined ones are checked and normalised on every contact write.
"""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING, Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.cdp import models
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.ids import new_id
from switchboard.store import Delete, Put, Store, keys

if TYPE_CHECKING:
    from switchboard.contacts.identifiers import Numbers

Item = dict[str, Any]
MAX_FIELDS = 200
_URL = re.compile(r"^https?://[^\s/$.?#][^\s]*$", re.IGNORECASE)


def field_key(org: str, field_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPFIELD#{field_id}")


def field_key_sentinel(org: str, key: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPFIELDKEY#{key}")


def view(item: Item) -> models.CustomField:
    return models.CustomField.model_validate(item)


# Values ---------------------------------------------------------------------------------------------------------------
def _bad(path: str, message: str) -> ValidationFailed:
    return ValidationFailed.field(path, message)


def check_value(definition: Item, value: Any, path: str, numbers: Numbers | None = None) -> Any:
    """One value against one field definition → the normalised value (ValidationFailed on `path` otherwise); a phone
    is read by `numbers` (switchboard.contacts.identifiers.Numbers; default: strict, no default region)."""
    kind = definition["type"]
    if value is None:
        if definition.get("required"):
            raise _bad(path, "is required and cannot be removed")
        return None
    options = {o["value"] for o in definition.get("options") or []}
    if kind == "text":
        if not isinstance(value, str) or len(value) > 5000:
            raise _bad(path, "must be text of at most 5000 characters")
        if definition.get("required") and not value.strip():
            raise _bad(path, "is required and cannot be empty")
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _bad(path, "must be a number")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _bad(path, "must be true or false")
        return value
    if kind == "date":
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            return date.fromisoformat(value[:10]).isoformat()
        except ValueError:
            raise _bad(path, "must be a date (YYYY-MM-DD)") from None
    if kind == "single_select":
        if not isinstance(value, str) or value not in options:
            raise _bad(path, f"must be one of: {', '.join(sorted(options))}")
        return value
    if kind == "multi_select":
        if not isinstance(value, list) or not all(isinstance(v, str) and v in options for v in value):
            raise _bad(path, f"must be a list of: {', '.join(sorted(options))}")
        return list(dict.fromkeys(value))
    if kind == "email":
        # on first use: keeps switchboard.contacts.identifiers off the cold start
        from switchboard.contacts.identifiers import normalize_email

        if not isinstance(value, str):
            raise _bad(path, "must be an e-mail address")
        return normalize_email(value, path)
    if kind == "phone":
        # on first use: keeps switchboard.contacts.identifiers off the cold start
        from switchboard.contacts.identifiers import normalize_phone

        if not isinstance(value, str | int) or isinstance(value, bool):
            raise _bad(path, "must be a phone number")
        return normalize_phone(str(value), path, numbers)
    if kind == "url":
        if not isinstance(value, str) or len(value) > 2048 or not _URL.match(value):
            raise _bad(path, "must be an http(s) URL")
        return value
    raise _bad(path, f"has an unknown field type {kind}")  # pragma: no cover


def validate_attributes(
    store: Store, org: str, attributes: dict[str, Any] | None, path: str, numbers: Numbers | None = None
) -> dict[str, Any] | None:
    """The contact-write hook: defined keys are checked and normalised, undefined keys pass through."""
    if not attributes:
        return attributes
    definitions = {d["key"]: d for d in _all(store, org)}
    out = dict(attributes)
    problems: list[dict[str, str]] = []
    for key, value in attributes.items():
        if key in definitions:
            try:
                out[key] = check_value(definitions[key], value, f"{path}.{key}", numbers)
            except ValidationFailed as err:
                problems.extend(err.details)
    if problems:
        raise ValidationFailed("; ".join(f"{p['field']}: {p['message']}" for p in problems[:3]), details=problems)
    return out


# Catalogue --------------------------------------------------------------------------------------------------------
def _all(store: Store, org: str) -> list[Item]:
    return store.query_all(keys.org_pk(org), sk_prefix="CDPFIELD#")


def list_definitions(store: Store, org: str) -> list[Item]:
    return _all(store, org)


def list_fields(store: Store, auth: AuthContext) -> list[models.CustomField]:
    return [view(i) for i in sorted(_all(store, auth.org_id), key=lambda i: i["created_at"])]


def get_item(store: Store, org: str, field_id: str) -> Item:
    return store.require(field_key(org, field_id), "No such custom field.")


def get(store: Store, auth: AuthContext, field_id: str) -> models.CustomField:
    return view(get_item(store, auth.org_id, field_id))


def create(store: Store, auth: AuthContext, body: models.FieldCreate) -> models.CustomField:
    org, now = auth.org_id, clock.now_iso()
    if len(_all(store, org)) >= MAX_FIELDS:
        raise Conflict(f"An organization holds at most {MAX_FIELDS} custom fields.")
    field_id = new_id("fld")
    item: Item = {
        **field_key(org, field_id),
        "entity": "CustomField",
        "id": field_id,
        **body.model_dump(mode="json"),
        "options": [o.model_dump(mode="json") for o in body.options or []],
        "created_at": now,
        "updated_at": now,
    }
    taken = Conflict(f"A custom field with the key {body.key!r} exists.", details=[{"field": "body.key"}])
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(
                item={**field_key_sentinel(org, body.key), "entity": "CustomFieldKey", "field_id": field_id},
                condition="attribute_not_exists(PK)",
                error=taken,
            ),
            audit_put(auth, "cdp.custom_field.created", "custom_field", field_id, after={"key": body.key}),
        ]
    )
    return view(item)


def update(store: Store, auth: AuthContext, field_id: str, body: models.FieldUpdate) -> models.CustomField:
    org = auth.org_id
    item = get_item(store, org, field_id)
    patch = body.model_dump(mode="json", exclude_unset=True)
    if "label" in patch and patch["label"] is None:
        raise ValidationFailed.field("body.label", "cannot be null")
    if "options" in patch:
        if item["type"] not in models.SELECT_TYPES:
            raise ValidationFailed.field("body.options", "are only allowed on select fields")
        if not patch["options"]:
            raise ValidationFailed.field("body.options", "are required for select fields")
    new = {**item, **{k: v for k, v in patch.items() if not (k == "required" and v is None)}}
    new["updated_at"] = clock.now_iso()
    store.transact(
        [
            Put(item=new, condition="attribute_exists(PK)", error=NotFound("No such custom field.")),
            audit_put(
                auth, "cdp.custom_field.updated", "custom_field", field_id, before=_brief(item), after=_brief(new)
            ),
        ]
    )
    return view(new)


def _brief(item: Item) -> Item:
    return {"label": item["label"], "required": item.get("required", False)}


def delete(store: Store, auth: AuthContext, field_id: str) -> None:
    """The definition goes; the values stay in the contacts' attributes, as undefined keys."""
    org = auth.org_id
    item = get_item(store, org, field_id)
    store.transact(
        [
            Delete(key=field_key(org, field_id), condition="attribute_exists(PK)", error=NotFound("No such field.")),
            Delete(key=field_key_sentinel(org, item["key"])),
            audit_put(auth, "cdp.custom_field.deleted", "custom_field", field_id, before={"key": item["key"]}),
        ]
    )
