"""Message templates: drafts kept here, submitted to the channel's provider for approval, statuses pulled back
(`/v1/templates/sync`), a built-in library of ready-made templates, and the check that a `template` message uses an
approved template of its channel with the right parameters.

Statuses follow `TRANSITIONS`; any other move is 409 `conflict`. Every status change (and every category change
the provider reports) writes one `template.status_update` event in the transaction of the change.
"""

from __future__ import annotations

import contextlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.catalog import models
from switchboard.errors import Conflict, NotFound, UnsupportedByProvider, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.messaging import channels
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers import provider_for
from switchboard.providers.base import Provider
from switchboard.store import Delete, Put, Store, TxOp, keys, versioned

Item = dict[str, Any]
LIBRARY_PATH = Path(__file__).with_name("library.json")
PARAM = re.compile(r"\{\{\s*(\d+)\s*\}\}")
MAX_SYNC_PAGES = 10

# status → the statuses it may move to
TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"pending"}),
    "pending": frozenset({"approved", "rejected"}),
    "approved": frozenset({"paused", "disabled", "pending"}),
    "rejected": frozenset({"pending", "draft"}),
    "paused": frozenset({"approved", "disabled"}),
    "disabled": frozenset(),
}
EDITABLE = frozenset({"draft", "rejected"})
SUBMITTABLE = frozenset({"draft", "rejected"})  # approved → pending is the provider's re-review, not a submit
# the provider's status words (WhatsApp Business Platform) → ours
PROVIDER_STATUS = {
    "APPROVED": "approved",
    "PENDING": "pending",
    "IN_APPEAL": "pending",
    "REJECTED": "rejected",
    "PAUSED": "paused",
    "DISABLED": "disabled",
    "PENDING_DELETION": "disabled",
    "DELETED": "disabled",
}


def template_key(org: str, template_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"TEMPLATE#{template_id}")


def name_key(org: str, channel_id: str, name: str, language: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"TPLNAME#{channel_id}#{name}#{language}")


def _name_taken(name: str, language: str) -> Conflict:
    return Conflict(
        f"A template named {name!r} in {language} already exists on this channel.",
        details=[{"name": name, "language": language}],
    )


class _Changed(Conflict):
    pass


def view(item: Item) -> models.Template:
    return models.Template.model_validate(item)


def get_item(store: Store, org: str, template_id: str, *, consistent: bool = False) -> Item:
    return store.require(template_key(org, template_id), "No such template.", consistent=consistent)


# Components and parameters -----------------------------------------------------------------------------------------
def parameters_of(components: list[Item], field: str = "body.components") -> dict[str, int]:
    """Parameter count per component (`{{1}}`…`{{n}}`, numbered from 1 without gaps); the component rules."""
    counts: dict[str, int] = {}
    seen: set[str] = set()
    for n, comp in enumerate(components):
        kind, where = comp["type"], f"{field}[{n}]"
        if kind in seen:
            raise ValidationFailed.field(where, f"only one {kind} component is allowed")
        seen.add(kind)
        text = comp.get("text")
        if kind in ("BODY", "FOOTER") and not text:
            raise ValidationFailed.field(f"{where}.text", f"is required on {kind}")
        if kind == "HEADER" and (comp.get("format") or "TEXT") == "TEXT" and not text:
            raise ValidationFailed.field(f"{where}.text", "is required on a TEXT header")
        if kind == "BUTTONS" and not comp.get("buttons"):
            raise ValidationFailed.field(f"{where}.buttons", "is required on BUTTONS")
        if kind in ("HEADER", "FOOTER") and text and len(text) > 60:
            raise ValidationFailed.field(f"{where}.text", f"{kind} text is limited to 60 characters")
        numbers = sorted({int(x) for x in PARAM.findall(text or "")})
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValidationFailed.field(f"{where}.text", "parameters must be numbered {{1}}, {{2}}… without gaps")
        if kind == "FOOTER" and numbers:
            raise ValidationFailed.field(f"{where}.text", "a FOOTER takes no parameters")
        if kind == "HEADER" and len(numbers) > 1:
            raise ValidationFailed.field(f"{where}.text", "a HEADER takes at most one parameter")
        if kind in ("BODY", "HEADER"):
            counts[kind] = len(numbers)
    if "BODY" not in seen:
        raise ValidationFailed.field(field, "a BODY component with text is required")
    return counts


def _components(raw: list[models.TemplateComponent]) -> list[Item]:
    return [c.model_dump(exclude_none=True) for c in raw]


# CRUD --------------------------------------------------------------------------------------------------------------
def _new_item(
    org: str, channel_id: str, name: str, category: str, language: str, components: list[Item], library_id: str | None
) -> Item:
    now, template_id = clock.now_iso(), new_id("tpl")
    return {
        **template_key(org, template_id),
        "entity": "Template",
        "id": template_id,
        "organization_id": org,
        "channel_id": channel_id,
        "name": name,
        "category": category,
        "language": language,
        "components": components,
        "parameters": parameters_of(components),
        "status": "draft",
        "rejection_reason": None,
        "provider_template_id": None,
        "library_item_id": library_id,
        "submitted_at": None,
        "status_updated_at": now,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }


def _insert(store: Store, auth: AuthContext, item: Item, action: str) -> models.Template:
    org = auth.org_id
    channels.get_item(store, org, item["channel_id"])
    store.transact(
        [
            Put(
                item={
                    **name_key(org, item["channel_id"], item["name"], item["language"]),
                    "entity": "TemplateName",
                    "template_id": item["id"],
                },
                condition="attribute_not_exists(PK)",
                error=_name_taken(item["name"], item["language"]),
            ),
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(auth, action, "template", item["id"], after={"name": item["name"], "language": item["language"]}),
        ]
    )
    return view(item)


def create(store: Store, auth: AuthContext, body: models.TemplateCreate) -> models.Template:
    item = _new_item(
        auth.org_id, body.channel_id, body.name, body.category, body.language, _components(body.components), None
    )
    return _insert(store, auth, item, "template.created")


def list_templates(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    status: str | None,
    channel_id: str | None,
    category: str | None,
    name: str | None,
) -> tuple[list[models.Template], str | None]:
    """Oldest first; filters apply while reading (a page may hold fewer than `limit` items when filters thin it)."""
    org = auth.org_id
    params = {"status": status, "channel_id": channel_id, "category": category, "name": name}
    active = {k: v for k, v in params.items() if v}
    fingerprint = query_fingerprint("templates", params)
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, limit=limit, sk_prefix="TEMPLATE#", filters=active)
    return [view(i) for i in rows], next_cursor


def get(store: Store, auth: AuthContext, template_id: str) -> models.Template:
    return view(get_item(store, auth.org_id, template_id))


def _status_event(org: str, item: Item, previous: str, category_changed: bool = False) -> Put:
    data: Item = {
        "template_id": item["id"],
        "status": item["status"],
        "previous_status": previous,
        "name": item["name"],
        "language": item["language"],
        "channel_id": item["channel_id"],
        "organization_id": org,
    }
    if item.get("rejection_reason") and item["status"] == "rejected":
        data["reason"] = item["rejection_reason"]
    if category_changed:
        data["category"] = item["category"]
    return outbox_put(org, "template.status_update", data)


def _versioned(item: Item, new: Item) -> Put:
    return Put(
        item=new,
        **versioned(item["version"]),
        error=_Changed("The template changed meanwhile; retry."),
    )


def _check_transition(item: Item, new_status: str) -> None:
    allowed = TRANSITIONS[item["status"]]
    if new_status not in allowed:
        raise Conflict(
            f"A {item['status']} template cannot become {new_status}.",
            details=[{"status": item["status"], "requested": new_status, "allowed": sorted(allowed)}],
        )


def _move(store: Store, org: str, item: Item, new_status: str, changes: Item | None = None) -> Item:
    """One status (and/or category) change with its event; the status check is the caller's."""
    now = clock.now_iso()
    new = {**item, **(changes or {}), "updated_at": now, "version": int(item["version"]) + 1}
    status_changed = new_status != item["status"]
    category_changed = new.get("category") != item.get("category")
    if status_changed:
        new |= {"status": new_status, "status_updated_at": now}
    ops: list[TxOp] = [_versioned(item, new)]
    if status_changed or category_changed:
        ops.append(_status_event(org, new, item["status"], category_changed))
    store.transact(ops)
    return new


def update(store: Store, auth: AuthContext, template_id: str, body: models.TemplateUpdate) -> models.Template:
    org = auth.org_id
    item = get_item(store, org, template_id, consistent=True)
    if item["status"] not in EDITABLE:
        raise Conflict(
            f"A {item['status']} template cannot be edited; duplicate it instead.",
            details=[{"status": item["status"], "editable": sorted(EDITABLE)}],
        )
    fields = body.model_dump(exclude_unset=True, exclude_none=True)
    if body.components is not None:
        fields["components"] = _components(body.components)
        fields["parameters"] = parameters_of(fields["components"])
    changes = {k: v for k, v in fields.items() if item.get(k) != v}
    if not changes:
        return view(item)
    now = clock.now_iso()
    new = {**item, **changes, "updated_at": now, "version": int(item["version"]) + 1}
    ops: list[TxOp] = [
        _versioned(item, new),
        audit_put(auth, "template.updated", "template", template_id, after={"fields": sorted(changes)}),
    ]
    if item["status"] == "rejected":  # an edited rejected template is a draft again
        new |= {"status": "draft", "status_updated_at": now, "rejection_reason": None}
        ops.append(_status_event(org, new, "rejected"))
    old_name = name_key(org, item["channel_id"], item["name"], item["language"])
    new_name = name_key(org, item["channel_id"], new["name"], new["language"])
    if old_name != new_name:
        ops += [
            Put(
                item={**new_name, "entity": "TemplateName", "template_id": template_id},
                condition="attribute_not_exists(PK)",
                error=_name_taken(new["name"], new["language"]),
            ),
            Delete(key=old_name),
        ]
    store.transact(ops)
    return view(new)


def delete(store: Store, auth: AuthContext, template_id: str) -> None:
    """Deleted here, and at the provider when it was submitted there (an outage is a 503 and deletes nothing)."""
    org = auth.org_id
    item = get_item(store, org, template_id, consistent=True)
    if item.get("provider_template_id"):
        channel = store.get(channels.channel_key(org, item["channel_id"]))
        if channel is not None:
            with contextlib.suppress(UnsupportedByProvider, NotFound):
                provider_for(channel).templates(
                    "delete", {"name": item["name"], "id": item["provider_template_id"], "language": item["language"]}
                )
    store.transact(
        [
            Delete(key=template_key(org, template_id), condition="attribute_exists(PK)", error=NotFound()),
            Delete(key=name_key(org, item["channel_id"], item["name"], item["language"])),
            audit_put(auth, "template.deleted", "template", template_id, before={"name": item["name"]}),
        ]
    )


def duplicate(store: Store, auth: AuthContext, template_id: str, body: models.TemplateDuplicate) -> models.Template:
    org = auth.org_id
    item = get_item(store, org, template_id)
    name = body.name or f"{item['name']}_copy"[:512]
    copy = _new_item(
        org,
        body.channel_id or item["channel_id"],
        name,
        item["category"],
        body.language or item["language"],
        item["components"],
        item.get("library_item_id"),
    )
    return _insert(store, auth, copy, "template.duplicated")


# Provider: submit and sync -----------------------------------------------------------------------------------------
def _adapter(store: Store, org: str, channel_id: str) -> Provider:
    adapter = provider_for(channels.get_item(store, org, channel_id))
    if "templates" not in adapter.capabilities():
        raise UnsupportedByProvider(
            f"The {adapter.platform} provider does not support templates.",
            details=[{"platform": adapter.platform, "operation": "templates"}],
        )
    return adapter


def _provider_status(value: Any) -> str | None:
    return PROVIDER_STATUS.get(str(value or "").upper())


def submit(store: Store, auth: AuthContext, template_id: str) -> models.Template:
    """draft / rejected → pending at the provider; a provider that decides at once moves it on in the same call."""
    org = auth.org_id
    item = get_item(store, org, template_id, consistent=True)
    if item["status"] not in SUBMITTABLE:
        raise Conflict(
            f"A {item['status']} template cannot be submitted.",
            details=[{"status": item["status"], "submittable": sorted(SUBMITTABLE)}],
        )
    _check_transition(item, "pending")
    adapter = _adapter(store, org, item["channel_id"])
    result = adapter.templates(
        "create",
        {
            "name": item["name"],
            "language": item["language"],
            "category": item["category"],
            "components": item["components"],
            "allow_category_change": True,
        },
    )
    changes = {
        "provider_template_id": str(result.get("id") or "") or None,
        "submitted_at": clock.now_iso(),
        "rejection_reason": None,
    }
    new = _move(store, org, item, "pending", changes)
    return view(_apply_provider(store, org, new, result))


def _apply_provider(store: Store, org: str, item: Item, remote: Item) -> Item:
    """Apply the provider's view of one template (status, category, reason) when it is an allowed move."""
    target = _provider_status(remote.get("status")) or item["status"]
    changes: Item = {}
    if remote.get("category") and str(remote["category"]).upper() in ("MARKETING", "UTILITY", "AUTHENTICATION"):
        changes["category"] = str(remote["category"]).upper()
    if target == "rejected":
        changes["rejection_reason"] = str(remote.get("rejected_reason") or remote.get("reason") or "rejected")
    status_ok = target == item["status"] or target in TRANSITIONS[item["status"]]
    if not status_ok:
        target = item["status"]
        changes.pop("rejection_reason", None)
    if target == item["status"] and all(item.get(k) == v for k, v in changes.items()):
        return item
    return _move(store, org, item, target, changes)


def sync(store: Store, auth: AuthContext, body: models.TemplateSyncRequest) -> models.TemplateSyncResult:
    """Pull statuses from each channel's provider for the templates submitted there."""
    org = auth.org_id
    if body.channel_id:
        channels.get_item(store, org, body.channel_id)
    submitted = [
        i
        for i in store.query_all(keys.org_pk(org), sk_prefix="TEMPLATE#")
        if i.get("provider_template_id") and (not body.channel_id or i["channel_id"] == body.channel_id)
    ]
    by_channel: dict[str, list[Item]] = {}
    for item in submitted:
        by_channel.setdefault(item["channel_id"], []).append(item)
    changed: list[models.TemplateChange] = []
    unsupported: list[str] = []
    for channel_id, items in sorted(by_channel.items()):
        try:
            adapter = _adapter(store, org, channel_id)
        except (UnsupportedByProvider, NotFound):
            unsupported.append(channel_id)
            continue
        remote = _remote_templates(adapter, items)
        for item in items:
            found = remote.get(("id", item["provider_template_id"])) or remote.get(
                ("name", item["name"], item["language"])
            )
            if not found:
                continue
            for _ in range(3):
                try:
                    new = _apply_provider(store, org, item, found)
                    break
                except _Changed:
                    item = get_item(store, org, item["id"], consistent=True)
            else:
                continue
            if new is not item and (new["status"] != item["status"] or new["category"] != item["category"]):
                changed.append(
                    models.TemplateChange(
                        template_id=item["id"],
                        previous_status=item["status"],
                        status=new["status"],
                        category=new["category"] if new["category"] != item["category"] else None,
                    )
                )
    return models.TemplateSyncResult(
        channels=sorted(by_channel), checked=len(submitted), changed=changed, unsupported_channels=unsupported
    )


def _remote_templates(adapter: Provider, items: list[Item]) -> dict[tuple[str, ...], Item]:
    known = [
        {
            "id": i["provider_template_id"],
            "name": i["name"],
            "language": i["language"],
            "category": i["category"],
            "submitted_at": i.get("submitted_at"),
        }
        for i in items
    ]
    out: dict[tuple[str, ...], Item] = {}
    after = None
    for _ in range(MAX_SYNC_PAGES):
        page = adapter.templates("list", {"limit": 100, "after": after, "known": known})
        for row in page.get("templates") or []:
            if row.get("id"):
                out[("id", str(row["id"]))] = row
            if row.get("name"):
                out[("name", str(row["name"]), str(row.get("language") or ""))] = row
        after = page.get("next_cursor")
        if not after:
            break
    return out


# Library -----------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _library() -> dict[str, Item]:
    rows = json.loads(LIBRARY_PATH.read_text())
    return {row["id"]: row for row in rows}


def library(category: str | None, language: str | None) -> list[models.LibraryItem]:
    return [
        models.LibraryItem.model_validate(row)
        for row in _library().values()
        if (not category or row["category"] == category) and (not language or row["language"] == language)
    ]


def library_item(item_id: str) -> models.LibraryItem:
    row = _library().get(item_id)
    if row is None:
        raise NotFound("No such library template.")
    return models.LibraryItem.model_validate(row)


def import_library_item(store: Store, auth: AuthContext, item_id: str, body: models.LibraryImport) -> models.Template:
    row = library_item(item_id)
    item = _new_item(
        auth.org_id,
        body.channel_id,
        body.name or row.name,
        row.category,
        body.language or row.language,
        row.components,
        row.id,
    )
    return _insert(store, auth, item, "template.imported")


# Sending -----------------------------------------------------------------------------------------------------------
def validate_template_message(store: Store, org: str, channel_id: str, template: Any) -> Item:
    """A `template` message names an approved template of its channel (name + language) and gives exactly the
    parameters it declares: `components: [{"type": "body"|"header", "parameters": [{"type": "text", "text"}…]}]`."""
    field = "body.template"
    pointer = store.get(name_key(org, channel_id, template.name, template.language))
    item = store.get(template_key(org, pointer["template_id"])) if pointer else None
    if item is None:
        raise ValidationFailed.field(
            f"{field}.name", f"no template {template.name!r} in {template.language} on this channel"
        )
    if item["status"] != "approved":
        raise Conflict(
            f"The template {template.name!r} is {item['status']}, not approved.",
            details=[{"template_id": item["id"], "status": item["status"]}],
        )
    given: dict[str, int] = {}
    for n, comp in enumerate(template.components or []):
        kind = str(comp.get("type") or "").upper()
        params = comp.get("parameters") or []
        if not isinstance(params, list):
            raise ValidationFailed.field(f"{field}.components[{n}].parameters", "must be a list")
        for m, param in enumerate(params):
            if not isinstance(param, dict) or not param.get("type"):
                raise ValidationFailed.field(f"{field}.components[{n}].parameters[{m}]", "needs a type")
            if param["type"] == "text" and not str(param.get("text") or "").strip():
                raise ValidationFailed.field(f"{field}.components[{n}].parameters[{m}].text", "must not be empty")
        if kind in ("BODY", "HEADER"):
            given[kind] = given.get(kind, 0) + len(params)
    expected = item.get("parameters") or {}
    for kind in ("HEADER", "BODY"):
        want, got = int(expected.get(kind, 0)), given.get(kind, 0)
        if want != got:
            raise ValidationFailed(
                f"{field}.components: the template's {kind} takes {want} parameter(s), {got} given",
                details=[{"field": f"{field}.components", "message": f"{kind} expects {want} parameters, got {got}"}],
            )
    return item
