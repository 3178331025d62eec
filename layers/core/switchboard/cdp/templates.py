"""CDP templates: reusable setups (custom fields, lifecycle stages, segments) and the action that applies one.

Keys (under `ORG#<org>`): `CDPTPL#<cdptpl_id>`. Built-in templates (`cdptpl_builtin_*`) are code, read-only.
Applying creates what is missing and skips what exists (same field key, same stage key, same segment name), so it
can be run again safely.
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.cdp import fields, models, segments, stages
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.ids import new_id
from switchboard.store import Delete, Put, Store, keys

Item = dict[str, Any]

BUILTIN: dict[str, Item] = {
    "cdptpl_builtin_b2b_sales": {
        "id": "cdptpl_builtin_b2b_sales",
        "name": "B2B sales funnel",
        "description": "Lead to customer stages, company size and deal source fields, a hot-leads segment.",
        "builtin": True,
        "custom_fields": [
            {
                "key": "company_size",
                "label": "Company size",
                "type": "single_select",
                "options": [{"value": v} for v in ("1-10", "11-50", "51-200", "201+")],
            },
            {"key": "lead_source", "label": "Lead source", "type": "text"},
            {"key": "annual_revenue", "label": "Annual revenue", "type": "number"},
        ],
        "lifecycle_stages": [
            {"key": "subscriber", "name": "Subscriber", "position": 0},
            {"key": "lead", "name": "Lead", "position": 1},
            {"key": "qualified", "name": "Qualified lead", "position": 2},
            {"key": "opportunity", "name": "Opportunity", "position": 3},
            {"key": "customer", "name": "Customer", "position": 4},
        ],
        "segments": [
            {
                "name": "Qualified leads",
                "rules": {"field": "lifecycle_stage", "op": "in", "value": ["qualified", "opportunity"]},
            }
        ],
    },
    "cdptpl_builtin_ecommerce": {
        "id": "cdptpl_builtin_ecommerce",
        "name": "E-commerce",
        "description": "Shopper stages, a birthday and a marketing-opt-in field, a repeat-buyers segment.",
        "builtin": True,
        "custom_fields": [
            {"key": "birthday", "label": "Birthday", "type": "date"},
            {"key": "marketing_opt_in", "label": "Marketing opt-in", "type": "boolean"},
        ],
        "lifecycle_stages": [
            {"key": "visitor", "name": "Visitor", "position": 0},
            {"key": "shopper", "name": "First-time buyer", "position": 1},
            {"key": "repeat_buyer", "name": "Repeat buyer", "position": 2},
        ],
        "segments": [
            {
                "name": "Repeat buyers (90 days)",
                "rules": {"event": "order.placed", "op": "gte", "count": 2, "within_days": 90},
            }
        ],
    },
}


def template_key(org: str, template_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPTPL#{template_id}")


def view(item: Item) -> models.CdpTemplate:
    return models.CdpTemplate.model_validate(item)


def _content(body: models.CdpTemplateCreate | models.CdpTemplateUpdate) -> Item:
    out = body.model_dump(mode="json", exclude_unset=True, exclude_none=False)
    for n, seg in enumerate(out.get("segments") or []):
        segments.check_rules(seg["rules"], f"body.segments[{n}].rules")
    return out


def list_templates(store: Store, auth: AuthContext) -> list[models.CdpTemplate]:
    rows = store.query_all(keys.org_pk(auth.org_id), sk_prefix="CDPTPL#")
    return [view(i) for i in BUILTIN.values()] + [view(i) for i in sorted(rows, key=lambda i: i["created_at"])]


def get_item(store: Store, org: str, template_id: str) -> Item:
    if template_id in BUILTIN:
        return BUILTIN[template_id]
    return store.require(template_key(org, template_id), "No such CDP template.")


def get(store: Store, auth: AuthContext, template_id: str) -> models.CdpTemplate:
    return view(get_item(store, auth.org_id, template_id))


def create(store: Store, auth: AuthContext, body: models.CdpTemplateCreate) -> models.CdpTemplate:
    org, now = auth.org_id, clock.now_iso()
    template_id = new_id("cdptpl")
    item = {
        **template_key(org, template_id),
        "entity": "CdpTemplate",
        "id": template_id,
        **_content(body),
        "builtin": False,
        "created_at": now,
        "updated_at": now,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(auth, "cdp.template.created", "cdp_template", template_id, after={"name": body.name}),
        ]
    )
    return view(item)


def _writable(store: Store, org: str, template_id: str) -> Item:
    item = get_item(store, org, template_id)
    if item.get("builtin"):
        raise Conflict("Built-in templates cannot be changed; create your own from it.")
    return item


def update(store: Store, auth: AuthContext, template_id: str, body: models.CdpTemplateUpdate) -> models.CdpTemplate:
    org = auth.org_id
    item = _writable(store, org, template_id)
    patch = _content(body)
    if "name" in patch and patch["name"] is None:
        raise ValidationFailed.field("body.name", "cannot be null")
    new = {**item, **{k: ([] if v is None and k != "description" else v) for k, v in patch.items()}}
    new["updated_at"] = clock.now_iso()
    store.transact(
        [
            Put(item=new, condition="attribute_exists(PK)", error=NotFound("No such CDP template.")),
            audit_put(auth, "cdp.template.updated", "cdp_template", template_id),
        ]
    )
    return view(new)


def delete(store: Store, auth: AuthContext, template_id: str) -> None:
    org = auth.org_id
    _writable(store, org, template_id)
    store.transact(
        [
            Delete(
                key=template_key(org, template_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such CDP template."),
            ),
            audit_put(auth, "cdp.template.deleted", "cdp_template", template_id),
        ]
    )


def apply(store: Store, auth: AuthContext, template_id: str) -> models.ApplyResult:
    org = auth.org_id
    item = get_item(store, org, template_id)
    created: dict[str, list[str]] = {"custom_fields": [], "lifecycle_stages": [], "segments": []}
    skipped: dict[str, list[str]] = {"custom_fields": [], "lifecycle_stages": [], "segments": []}
    for spec in item.get("custom_fields") or []:
        body = models.FieldCreate.model_validate(spec)
        try:
            fields.create(store, auth, body)
            created["custom_fields"].append(body.key)
        except Conflict:
            skipped["custom_fields"].append(body.key)
    for spec in item.get("lifecycle_stages") or []:
        stage = models.StageCreate.model_validate(spec)
        try:
            stages.create(store, auth, stage)
            created["lifecycle_stages"].append(stage.key)
        except Conflict:
            skipped["lifecycle_stages"].append(stage.key)
    names = {s.name for s in segments.list_segments(store, auth)}
    for spec in item.get("segments") or []:
        seg = models.SegmentCreate.model_validate(spec)
        if seg.name in names:
            skipped["segments"].append(seg.name)
            continue
        segments.create(store, auth, seg)
        created["segments"].append(seg.name)
        names.add(seg.name)
    return models.ApplyResult(template_id=template_id, created=created, skipped=skipped)
