"""Customer-data resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from switchboard.models import BaseModel, DateTimeIn, Name, Storable, Strict, Timestamp

FieldType = Literal["text", "number", "boolean", "date", "single_select", "multi_select", "email", "phone", "url"]
SELECT_TYPES = ("single_select", "multi_select")
Key = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]{0,63}$", description="stable slug")
Properties = Annotated[dict[str, Any], Storable]  # free-form, checked storable (switchboard.models)
# At most 100 keys, documented as `maxProperties` on the object itself (an optional field's bound would sit on the
# union and read as `maxLength`).
BoundedProperties = Annotated[dict[str, Any], Field(max_length=100), Storable]


# Field definitions (custom fields of contacts and fields of object types) -------------------------------------------
class FieldOption(Strict):
    """One choice of a select field."""

    openapi_examples = ({"value": "11-50", "label": "11 to 50 employees"},)
    value: str = Field(min_length=1, max_length=100, description="the stored value")
    label: Name | None = Field(default=None, max_length=200, description="the shown text (default: the value)")


class _FieldBody(Strict):
    @field_validator("options", check_fields=False)
    @classmethod
    def _options_fit_the_type(cls, options: list[FieldOption] | None, info: ValidationInfo) -> Any:
        """Reported on `options` (runs on the default too, so a select field without options is caught)."""
        field_type = info.data.get("type")
        if field_type in SELECT_TYPES and not options:
            raise PydanticCustomError("options", "are required for select fields")
        if field_type is not None and field_type not in SELECT_TYPES and options:
            raise PydanticCustomError("options", "are only allowed on select fields")
        if options and len({o.value for o in options}) != len(options):
            raise PydanticCustomError("options", "must have unique values")
        return options


class FieldCreate(_FieldBody):
    """A new field definition (a contact custom field, or a field of an object type)."""

    openapi_examples = (
        {
            "key": "company_size",
            "label": "Company size",
            "type": "single_select",
            "options": [{"value": "1-10"}, {"value": "11-50"}],
        },
        {"key": "renewal_date", "label": "Renewal date", "type": "date", "required": False},
    )
    key: str = Key
    label: Name = Field(min_length=1, max_length=200, description="the name people see")
    type: FieldType = Field(description="the value's type; select types need `options`")
    options: list[FieldOption] | None = Field(
        default=None,
        max_length=200,
        validate_default=True,
        description="the choices of a `single_select` or `multi_select` field (values unique)",
    )
    required: bool = Field(default=False, description="whether every record should have a value")
    description: str | None = Field(default=None, max_length=1000, description="free text about the field")


class FieldUpdate(_FieldBody):
    """The key and the type are stable: a rename changes the label, the data stays under the key."""

    openapi_examples = ({"label": "Team size", "options": [{"value": "1-10"}, {"value": "11-50"}, {"value": "51+"}]},)
    label: Name | None = Field(default=None, min_length=1, max_length=200, description="the name people see")
    options: list[FieldOption] | None = Field(
        default=None,
        max_length=200,
        description="the choices of a `single_select` or `multi_select` field (values unique)",
    )
    required: bool | None = Field(default=None, description="whether every record should have a value")
    description: str | None = Field(default=None, max_length=1000, description="free text about the field")


class CustomField(BaseModel):
    """A contact custom field: the definition of the `attributes.<key>` of every contact."""

    openapi_examples = (
        {
            "id": "fld_01jd8x2b3c4d5e6f7g8h9j0k1m",
            "key": "company_size",
            "label": "Company size",
            "type": "single_select",
            "options": [{"value": "1-10", "label": None}, {"value": "11-50", "label": None}],
            "required": False,
            "description": None,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the field's id")
    key: str = Field(description="stable slug that names the value; never changes")
    label: str = Field(description="the name people see")
    type: FieldType = Field(description="the value's type")
    options: list[FieldOption] = Field(
        default_factory=list, description="the choices of a `single_select` or `multi_select` field (values unique)"
    )
    required: bool = Field(default=False, description="whether every record should have a value")
    description: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class ObjectField(BaseModel):
    """A field of an object type, in display order (`position`)."""

    openapi_examples = (
        {
            "id": "ofl_01jd8x2c3d4e5f6g7h8j9k0m1n",
            "key": "amount",
            "label": "Amount",
            "type": "number",
            "options": [],
            "required": False,
            "description": None,
            "position": 1,
        },
    )
    id: str = Field(description="the field's id")
    key: str = Field(description="stable slug that names the value; never changes")
    label: str = Field(description="the name people see")
    type: FieldType = Field(description="the value's type")
    options: list[FieldOption] = Field(
        default_factory=list, description="the choices of a `single_select` or `multi_select` field (values unique)"
    )
    required: bool = Field(default=False, description="whether every record should have a value")
    description: str | None = Field(default=None, description="free text about the field")
    position: int = Field(description="order among its siblings, from 0")


# Lifecycle stages -------------------------------------------------------------------------------------------------
class StageCreate(Strict):
    """A new lifecycle stage."""

    openapi_examples = (
        {"key": "customer", "name": "Customer", "description": "Paid at least once", "color": "#4caf50", "position": 4},
    )
    key: str = Key
    name: Name = Field(min_length=1, max_length=100, description="the stage's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the stage")
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$", description="`#rrggbb`")
    position: int | None = Field(default=None, ge=0, le=1000, description="order among its siblings, from 0")


class StageUpdate(Strict):
    """The stage's fields to change (the key stays)."""

    openapi_examples = ({"name": "Paying customer", "position": 5},)
    name: Name | None = Field(default=None, min_length=1, max_length=100, description="the stage's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the stage")
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$", description="`#rrggbb`")
    position: int | None = Field(default=None, ge=0, le=1000, description="order among its siblings, from 0")


class Stage(BaseModel):
    """A lifecycle stage of the organization's funnel; contacts name it by `key` in `lifecycle_stage`."""

    openapi_examples = (
        {
            "id": "stg_01jd8x2a3b4c5d6e7f8g9h0j1k",
            "key": "customer",
            "name": "Customer",
            "description": "Paid at least once",
            "color": "#4caf50",
            "position": 4,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the stage's id")
    key: str = Field(description="stable slug that names the value; never changes")
    name: str = Field(description="the stage's name")
    description: str | None = Field(default=None, description="free text about the stage")
    color: str | None = Field(default=None, description="`#rrggbb`")
    position: int
    created_at: Timestamp
    updated_at: Timestamp


class StageSet(Strict):
    """The stage to move a contact to."""

    openapi_examples = ({"stage": "customer", "reason": "first order paid"}, {"stage": None})
    stage: str | None = Field(min_length=1, max_length=64, description="stage key or id; null clears the stage")
    reason: str | None = Field(default=None, max_length=500, description="why, kept in the history")


class StageChange(BaseModel):
    """One move of a contact between stages."""

    openapi_examples = (
        {
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "from_stage": "lead",
            "to_stage": "customer",
            "reason": "first order paid",
            "changed_by": "usr_01jd8x0a1b2c3d4e5f6g7h8j9k",
            "changed_at": "2026-11-21T10:30:00.000Z",
        },
    )
    contact_id: str = Field(description="the contact (`ct_…`)")
    from_stage: str | None = Field(default=None, description="the stage key before (null: none)")
    to_stage: str | None = Field(default=None, description="the stage key after (null: none)")
    reason: str | None = Field(default=None, description="why, as given")
    changed_by: str | None = None
    changed_at: Timestamp


class ContactStage(BaseModel):
    """A contact's current lifecycle stage and its history, newest first."""

    openapi_examples = (
        {
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "stage": {
                "id": "stg_01jd8x2a3b4c5d6e7f8g9h0j1k",
                "key": "customer",
                "name": "Customer",
                "description": "Paid at least once",
                "color": "#4caf50",
                "position": 4,
                "created_at": "2026-11-21T10:00:00.000Z",
                "updated_at": "2026-11-21T10:00:00.000Z",
            },
            "history": [StageChange.openapi_examples[0]],
        },
    )
    contact_id: str = Field(description="the contact (`ct_…`)")
    stage: Stage | None = Field(default=None, description="the current stage; null when none")
    history: list[StageChange] = Field(default_factory=list, description="the moves, newest first")


class StageCount(BaseModel):
    """One stage's figures in the metrics window."""

    openapi_examples = ({"stage": "customer", "name": "Customer", "contacts": 120, "entered": 14, "exited": 2},)
    stage: str = Field(description="the stage key")
    name: str = Field(description="the stage's name")
    contacts: int = Field(description="contacts in the stage now")
    entered: int = Field(description="contacts that entered the stage in the window")
    exited: int = Field(description="contacts that left the stage in the window")


class Conversion(BaseModel):
    """Contacts that moved from one stage to another in the metrics window."""

    openapi_examples = ({"from_stage": "lead", "to_stage": "customer", "count": 9},)
    from_stage: str | None = Field(description="the stage key before (null: none)")
    to_stage: str | None = Field(description="the stage key after (null: none)")
    count: int = Field(description="how many contacts made this move in the window")


class StageMetrics(BaseModel):
    """Funnel figures for `[since, until]`."""

    openapi_examples = (
        {
            "since": "2026-10-22T10:00:00.000Z",
            "until": "2026-11-21T10:00:00.000Z",
            "stages": [{"stage": "customer", "name": "Customer", "contacts": 120, "entered": 14, "exited": 2}],
            "conversions": [{"from_stage": "lead", "to_stage": "customer", "count": 9}],
        },
    )
    since: Timestamp = Field(description="start of the window")
    until: Timestamp = Field(description="end of the window")
    stages: list[StageCount] = Field(description="one entry per stage, in funnel order")
    conversions: list[Conversion] = Field(description="moves between stages in the window")


# Events and activity ----------------------------------------------------------------------------------------------
class EventContact(Strict):
    """The identity an event is about; a contact that owns nobody is created."""

    openapi_examples = ({"type": "email", "value": "ada@example.com"},)
    type: Literal["phone", "whatsapp", "wa_id", "email", "external_id", "instagram"] = Field(
        description="the identity's type"
    )
    value: str = Field(min_length=1, max_length=320, description="the identity's value, any common form")
    source: str | None = Field(default=None, min_length=1, max_length=64, description="where it came from")


class EventIn(Strict):
    """One event about a contact, named by `contact` (an identity) or `contact_id`."""

    openapi_examples = (
        {
            "event_id": "order-7781",
            "name": "order.completed",
            "contact": {"type": "email", "value": "ada@example.com"},
            "properties": {"total": 129.5, "currency": "EUR"},
            "timestamp": "2026-11-21T09:59:00Z",
        },
    )
    event_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:\-]+$",
        description="the event's idempotency key: an event with a known `event_id` counts once (`duplicate`)",
    )
    name: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9_.:\- ]+$",
        description="the event's name, e.g. `order.completed`",
    )
    contact: EventContact | None = Field(
        default=None, description="the identity of the contact (a contact owning nobody yet is created)"
    )
    contact_id: str | None = Field(
        default=None, min_length=1, max_length=64, description="the contact (`ct_…`), instead of `contact`"
    )
    properties: Properties = Field(
        default_factory=dict, max_length=100, description="free-form JSON about the event (at most 100 keys)"
    )
    timestamp: DateTimeIn | None = Field(default=None, description="when it happened; default: when received")
    exactly_one_of = (("contact", "contact_id"),)

    @model_validator(mode="after")
    def _one_contact(self) -> EventIn:
        if (self.contact is None) == (self.contact_id is None):
            raise ValueError("give exactly one of contact or contact_id")
        return self


class EventBatch(Strict):
    """Up to 100 events."""

    openapi_examples = (
        {
            "events": [
                {
                    "event_id": "order-7781",
                    "name": "order.completed",
                    "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
                    "properties": {"total": 129.5},
                }
            ]
        },
    )
    events: list[EventIn] = Field(min_length=1, max_length=100, description="1 to 100 events")


class EventResult(BaseModel):
    """What became of one event of the batch (its `index`)."""

    openapi_examples = (
        {
            "index": 0,
            "event_id": "order-7781",
            "status": "accepted",
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "error": None,
        },
    )
    index: int = Field(description="the event's position in the batch, from 0")
    event_id: str = Field(description="the event's idempotency key (generated when the event had none)")
    status: Literal["accepted", "duplicate", "rejected"] = Field(
        description="`duplicate`: an event with this `event_id` was recorded before; `rejected`: see `error`"
    )
    contact_id: str | None = Field(default=None, description="the contact the event was recorded on")
    error: dict[str, Any] | None = Field(default=None, description="why the event was rejected (`code`, `message`)")


class IngestResult(BaseModel):
    """Counts and one result per event, in the order sent."""

    openapi_examples = (
        {
            "accepted": 1,
            "duplicates": 0,
            "rejected": 0,
            "results": [
                {
                    "index": 0,
                    "event_id": "order-7781",
                    "status": "accepted",
                    "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
                    "error": None,
                }
            ],
        },
    )
    accepted: int = Field(description="events recorded")
    duplicates: int = Field(description="events already recorded before (same `event_id`)")
    rejected: int = Field(description="events refused (see their `error`)")
    results: list[EventResult] = Field(description="one result per item, in the order sent")


class Activity(BaseModel):
    """An event on a contact's timeline."""

    openapi_examples = (
        {
            "id": "cev_01jd8x5a6b7c8d9e0f1g2h3j4k",
            "event_id": "order-7781",
            "name": "order.completed",
            "kind": "event",
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "properties": {"total": 129.5},
            "occurred_at": "2026-11-21T09:59:00.000Z",
            "received_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the activity entry's id")
    event_id: str = Field(
        description="the event's idempotency key: an event with a known `event_id` counts once (`duplicate`)"
    )
    name: str = Field(description="the event's name")
    kind: str = Field(default="event", description="`event` for ingested events; other kinds may be added")
    contact_id: str = Field(description="the contact (`ct_…`)")
    properties: Properties = Field(default_factory=dict)
    occurred_at: Timestamp
    received_at: Timestamp


# Object types and contact objects --------------------------------------------------------------------------------
ObjectKind = Literal["custom", "deal", "task"]


class ObjectTypeCreate(Strict):
    """A new object type with its fields."""

    openapi_examples = (
        {
            "key": "deal",
            "name": "Deal",
            "plural_name": "Deals",
            "kind": "deal",
            "status_field": "stage",
            "display_field": "title",
            "fields": [
                {"key": "title", "label": "Title", "type": "text"},
                {
                    "key": "stage",
                    "label": "Stage",
                    "type": "single_select",
                    "options": [{"value": "open"}, {"value": "won"}, {"value": "lost"}],
                },
                {"key": "amount", "label": "Amount", "type": "number"},
            ],
        },
    )
    key: str = Key
    name: Name = Field(min_length=1, max_length=100, description="the object type's name")
    kind: ObjectKind = Field(
        default="custom",
        description="`deal`: its records move through stages (`crm.deal.stage_changed`); `task`: its records get "
        "completed (`crm.task.completed`); `custom`: neither",
    )
    status_field: str | None = Field(
        default=None,
        max_length=64,
        description="deal and task types: the key of the single-select field holding the stage or the status",
    )
    completed_value: str | None = Field(
        default=None, max_length=100, description="task types: the status option that means done"
    )
    plural_name: Name | None = Field(
        default=None, max_length=100, description="the name of several records, e.g. `Deals`"
    )
    description: str | None = Field(default=None, max_length=1000, description="free text about the object type")
    display_field: str | None = Field(
        default=None, max_length=64, description="the field key whose value names a record"
    )
    fields: list[FieldCreate] = Field(default_factory=list, max_length=100, description="the fields of the type")


class ObjectTypeUpdate(Strict):
    """The type's names to change (the key, the kind and the fields stay; fields have their own routes)."""

    openapi_examples = ({"plural_name": "Opportunities"},)
    name: Name | None = Field(default=None, min_length=1, max_length=100, description="the object type's name")
    plural_name: Name | None = Field(
        default=None, max_length=100, description="the name of several records, e.g. `Deals`"
    )
    description: str | None = Field(default=None, max_length=1000, description="free text about the object type")
    display_field: str | None = Field(
        default=None, max_length=64, description="the key of the field whose value names a record"
    )


class ObjectType(BaseModel):
    """A kind of record linked to contacts (deals, tasks, subscriptions…) with its fields."""

    openapi_examples = (
        {
            "id": "oty_01jd8x2z3y4x5w6v7t8s9r0q1p",
            "key": "deal",
            "name": "Deal",
            "kind": "deal",
            "status_field": "stage",
            "completed_value": None,
            "plural_name": "Deals",
            "description": None,
            "display_field": "title",
            "fields": [
                {
                    "id": "ofl_01jd8x2c3d4e5f6g7h8j9k0m1n",
                    "key": "title",
                    "label": "Title",
                    "type": "text",
                    "options": [],
                    "required": False,
                    "description": None,
                    "position": 0,
                }
            ],
            "version": 1,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the object type's id")
    key: str = Field(description="stable slug that names the value; never changes")
    name: str = Field(description="the object type's name")
    kind: ObjectKind = Field(default="custom", description="`event` for ingested events")
    status_field: str | None = Field(
        default=None,
        description="deal and task types: the key of the single-select field holding the stage or the status",
    )
    completed_value: str | None = Field(default=None, description="task types: the status option that means done")
    plural_name: str | None = Field(default=None, description="the name of several records, e.g. `Deals`")
    description: str | None = Field(default=None, description="free text about the object type")
    display_field: str | None = Field(default=None, description="the key of the field whose value names a record")
    fields: list[ObjectField] = Field(default_factory=list, description="the fields of the type")
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class FieldReorder(Strict):
    """Every field id of the type, once each, in the new order."""

    openapi_examples = ({"field_ids": ["ofl_01jd8x2c3d4e5f6g7h8j9k0m1n", "ofl_01jd8x2d3e4f5g6h7j8k9m0n1p"]},)
    field_ids: list[str] = Field(
        min_length=1, max_length=100, description="every field id of the type exactly once, in the new order"
    )


class ObjectCreate(Strict):
    """A new record of an object type, linked to a contact."""

    openapi_examples = (
        {
            "object_type_id": "deal",
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "display_name": "Annual plan",
            "properties": {"stage": "open", "amount": 1200},
        },
    )
    object_type_id: str = Field(min_length=1, max_length=64, description="object type id or key")
    contact_id: str = Field(min_length=1, max_length=64, description="the contact (`ct_…`)")
    display_name: Name | None = Field(
        default=None,
        max_length=200,
        description="the record's name as shown (default: the value of the type's display field)",
    )
    properties: Properties = Field(
        default_factory=dict, max_length=100, description="values by field key of the type (at most 100)"
    )


class ObjectUpdate(Strict):
    """The record's changes: `properties` merge key by key."""

    openapi_examples = ({"properties": {"stage": "won", "lost_reason": None}},)
    display_name: Name | None = Field(
        default=None,
        max_length=200,
        description="the record's name as shown (default: the value of the type's display field)",
    )
    properties: BoundedProperties | None = Field(default=None, description="merged key by key; null removes")


class ContactObject(BaseModel):
    """A record of an object type linked to a contact."""

    openapi_examples = (
        {
            "id": "obj_01jd8x3a4b5c6d7e8f9g0h1j2k",
            "object_type_id": "oty_01jd8x2z3y4x5w6v7t8s9r0q1p",
            "object_kind": "deal",
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "display_name": "Annual plan",
            "properties": {"stage": "open", "amount": 1200},
            "version": 1,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the record's id")
    object_type_id: str = Field(description="the object type (`oty_…`)")
    object_kind: str = Field(description="the key of its object type")
    contact_id: str = Field(description="the contact (`ct_…`)")
    display_name: str = Field(description="the record's name as shown")
    properties: Properties = Field(default_factory=dict, description="values by field key of its type")
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class CommentCreate(Strict):
    """A comment's text."""

    openapi_examples = ({"body": "Sent the revised quote."},)
    body: str = Field(min_length=1, max_length=5000, description="the comment's text")


class Comment(BaseModel):
    """A comment on a record."""

    openapi_examples = (
        {
            "id": "cmt_01jd8x6a7b8c9d0e1f2g3h4j5k",
            "record_id": "obj_01jd8x3a4b5c6d7e8f9g0h1j2k",
            "object_kind": "deal",
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "body": "Sent the revised quote.",
            "author_id": "usr_01jd8x0a1b2c3d4e5f6g7h8j9k",
            "created_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the comment's id")
    record_id: str = Field(description="the record (`obj_…`)")
    object_kind: str = Field(description="the key of its object type")
    contact_id: str = Field(description="the contact (`ct_…`)")
    body: str = Field(description="the comment's text")
    author_id: str | None = None
    created_at: Timestamp


class RelationshipSet(Strict):
    """The link's label."""

    openapi_examples = ({"label": "billed_to"},)
    label: Name | None = Field(default=None, max_length=100, description="what the link means, e.g. `billed_to`")


class Relationship(BaseModel):
    """A link from a record to another record or a contact."""

    openapi_examples = (
        {
            "record_id": "obj_01jd8x3a4b5c6d7e8f9g0h1j2k",
            "related_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "related_kind": "contact",
            "label": "billed_to",
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    record_id: str = Field(description="the record the link starts from (`obj_…`)")
    related_id: str = Field(description="the linked record (`obj_…`) or contact (`ct_…`)")
    related_kind: str = Field(description="`contact`, or the object kind of the related record")
    label: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


# Contacts imports -------------------------------------------------------------------------------------------------
class ImportCreate(Strict):
    """A contacts file to import (or, with `dry_run`, only to check)."""

    openapi_examples = (
        {
            "format": "csv",
            "content": "name,email,phone,attributes.plan\nAda Lovelace,ada@example.com,+14155552671,pro\n",
            "dry_run": False,
        },
    )
    format: Literal["csv", "jsonl"] = Field(
        description="`csv` (header row first) or `jsonl` (one JSON object per line)"
    )
    content: str = Field(
        min_length=1,
        max_length=250_000,
        description="CSV with a header row, or one JSON object per line. Columns / keys: name, first_name, "
        "last_name, email, phone, whatsapp, instagram, company, avatar_url, `external_id.<source>`, "
        "`attributes.<key>` (JSON lines may also give `attributes` as an object). At most 500 rows (the request "
        "body is at most 256 KiB); CSV cells of number, boolean and multi-select (`a;b`) custom fields are converted.",
    )
    dry_run: bool = Field(default=False, description="validate and report without writing")


class RejectedRow(BaseModel):
    """Why one row was not imported."""

    openapi_examples = ({"row": 3, "field": "email", "message": "not a valid e-mail address"},)
    row: int = Field(description="1-based data row (the CSV header is not counted)")
    field: str = Field(description="the column (CSV) or key (JSON lines) at fault")
    message: str = Field(description="why the row was refused")


class ImportReport(BaseModel):
    """The report of an import: counts, and the rejected rows with their reasons."""

    openapi_examples = (
        {
            "id": "imp_01jd8x7a8b9c0d1e2f3g4h5j6k",
            "format": "csv",
            "status": "committed",
            "dry_run": False,
            "rows": 3,
            "created": 1,
            "updated": 1,
            "unchanged": 0,
            "rejected": 1,
            "batches": 1,
            "errors": [{"row": 3, "field": "email", "message": "not a valid e-mail address"}],
            "errors_truncated": False,
            "created_by": "usr_01jd8x0a1b2c3d4e5f6g7h8j9k",
            "created_at": "2026-11-21T10:00:00.000Z",
            "completed_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the import's id")
    format: str = Field(description="`csv` or `jsonl`")
    status: Literal["validated", "committed", "partial"] = Field(
        description="`validated`: a dry run; `committed`: every batch written (rejected rows are in `errors`); "
        "`partial`: a batch failed and its rows were not committed"
    )
    dry_run: bool = Field(default=False, description="true: validate and report without writing")
    rows: int = Field(description="data rows read")
    created: int = Field(description="contacts created")
    updated: int = Field(description="existing contacts changed")
    unchanged: int = Field(description="rows that matched a contact without changing it")
    rejected: int = Field(description="rows refused (see `errors`)")
    batches: int = Field(description="transactions committed (each all-or-nothing, at most 100 items)")
    errors: list[RejectedRow] = Field(default_factory=list, description="rejected rows (at most 100)")
    errors_truncated: bool = Field(default=False, description="true when more rows were rejected than `errors` lists")
    created_by: str | None = None
    created_at: Timestamp
    completed_at: Timestamp


# Segments -----------------------------------------------------------------------------------------------------------
class SegmentCreate(Strict):
    """A new segment: the contacts its rule tree matches."""

    openapi_examples = (
        {
            "name": "Recent buyers",
            "description": "Leads with an order in the last 30 days",
            "rules": {
                "and": [
                    {"field": "lifecycle_stage", "op": "eq", "value": "lead"},
                    {"event": "order.completed", "op": "gte", "count": 1, "within_days": 30},
                ]
            },
        },
    )
    name: Name = Field(min_length=1, max_length=100, description="the segment's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the segment")
    rules: dict[str, Any] = Field(description="rule tree: {and|or: [...]}, {not: rule}, a field or an event condition")


class SegmentUpdate(Strict):
    """The segment's changes; new `rules` (or an empty body) rebuild the membership."""

    openapi_examples = ({"rules": {"field": "lifecycle_stage", "op": "eq", "value": "customer"}},)
    name: Name | None = Field(default=None, min_length=1, max_length=100, description="the segment's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the segment")
    rules: dict[str, Any] | None = Field(default=None, description="a new rule tree (rebuilds the membership)")


class Segment(BaseModel):
    """A dynamic list of contacts kept up to date from its rules."""

    openapi_examples = (
        {
            "id": "seg_01jd8x4a5b6c7d8e9f0g1h2j3k",
            "name": "Recent buyers",
            "description": "Leads with an order in the last 30 days",
            "rules": {
                "and": [
                    {"field": "lifecycle_stage", "op": "eq", "value": "lead"},
                    {"event": "order.completed", "op": "gte", "count": 1, "within_days": 30},
                ]
            },
            "member_count": 42,
            "built_at": "2026-11-21T10:30:00.000Z",
            "status": "ready",
            "progress": {"contacts_scanned": 1800},
            "job_id": "job_01jd8x4z5y6x7w8v9t0s1r2q3p",
            "version": 1,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:30:00.000Z",
        },
    )
    id: str = Field(description="the segment's id")
    name: str = Field(description="the segment's name")
    description: str | None = Field(default=None, description="free text about the segment")
    rules: dict[str, Any] = Field(description="the rule tree (see `SegmentCreate.rules`)")
    member_count: int = 0
    built_at: Timestamp | None = None
    status: Literal["building", "ready", "failed"] = Field(
        default="ready", description="`building` while the segment.build job fills the membership"
    )
    progress: dict[str, int] | None = Field(default=None, description="the build's counters: contacts_scanned")
    job_id: str | None = Field(default=None, description="the segment.build job of the latest build")
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class SegmentMember(BaseModel):
    """A contact in a segment."""

    openapi_examples = (
        {
            "contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "name": "Ada Lovelace",
            "email": "ada@example.com",
            "phone": "14155552671",
            "lifecycle_stage": "lead",
            "added_at": "2026-11-21T10:30:00.000Z",
        },
    )
    contact_id: str = Field(description="the contact (`ct_…`)")
    name: str | None = Field(default=None, description="the contact's name")
    email: str | None = Field(default=None, description="the contact's primary e-mail")
    phone: str | None = Field(default=None, description="the contact's primary phone (digits)")
    lifecycle_stage: str | None = None
    added_at: Timestamp


# Templates ----------------------------------------------------------------------------------------------------------
class TemplateSegment(Strict):
    """A segment a CDP template creates."""

    openapi_examples = ({"name": "VIPs", "rules": {"field": "tags", "op": "contains", "value": "vip"}},)
    name: Name = Field(min_length=1, max_length=100, description="the segment's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the segment")
    rules: dict[str, Any] = Field(description="the segment's rule tree (see `SegmentCreate.rules`)")


class CdpTemplateCreate(Strict):
    """A new CDP template: custom fields, lifecycle stages and segments to apply together."""

    openapi_examples = (
        {
            "name": "Support desk",
            "description": "Ticket priority and a VIP segment",
            "custom_fields": [
                {
                    "key": "priority",
                    "label": "Priority",
                    "type": "single_select",
                    "options": [{"value": "low"}, {"value": "high"}],
                }
            ],
            "lifecycle_stages": [{"key": "customer", "name": "Customer"}],
            "segments": [{"name": "VIPs", "rules": {"field": "tags", "op": "contains", "value": "vip"}}],
        },
    )
    name: Name = Field(min_length=1, max_length=100, description="the template's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the template")
    custom_fields: list[FieldCreate] = Field(
        default_factory=list, max_length=100, description="custom field definitions"
    )
    lifecycle_stages: list[StageCreate] = Field(
        default_factory=list, max_length=50, description="lifecycle stage definitions"
    )
    segments: list[TemplateSegment] = Field(default_factory=list, max_length=50, description="segment definitions")


class CdpTemplateUpdate(Strict):
    """The template's parts to replace."""

    openapi_examples = ({"description": "Ticket priority, VIP and at-risk segments"},)
    name: Name | None = Field(default=None, min_length=1, max_length=100, description="the template's name")
    description: str | None = Field(default=None, max_length=1000, description="free text about the template")
    custom_fields: list[FieldCreate] | None = Field(
        default=None, max_length=100, description="custom field definitions"
    )
    lifecycle_stages: list[StageCreate] | None = Field(
        default=None, max_length=50, description="lifecycle stage definitions"
    )
    segments: list[TemplateSegment] | None = Field(default=None, max_length=50, description="segment definitions")


class CdpTemplate(BaseModel):
    """A bundle of custom fields, lifecycle stages and segments; `builtin` ones are read-only."""

    openapi_examples = (
        {
            "id": "cdptpl_builtin_b2b_sales",
            "name": "B2B sales funnel",
            "description": "Lead to customer stages, company size and deal source fields, a hot-leads segment.",
            "builtin": True,
            "custom_fields": [{"key": "lead_source", "label": "Lead source", "type": "text"}],
            "lifecycle_stages": [{"key": "lead", "name": "Lead", "position": 1}],
            "segments": [
                {
                    "name": "Qualified leads",
                    "rules": {"field": "lifecycle_stage", "op": "in", "value": ["qualified", "opportunity"]},
                }
            ],
            "created_at": None,
            "updated_at": None,
        },
    )
    id: str = Field(description="the template's id")
    name: str = Field(description="the template's name")
    description: str | None = Field(default=None, description="free text about the template")
    builtin: bool = Field(default=False, description="built-in templates are read-only")
    custom_fields: list[dict[str, Any]] = Field(
        default_factory=list, description="custom field definitions (as in `FieldCreate`)"
    )
    lifecycle_stages: list[dict[str, Any]] = Field(
        default_factory=list, description="lifecycle stage definitions (as in `StageCreate`)"
    )
    segments: list[dict[str, Any]] = Field(default_factory=list)
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None


class TemplateAction(Strict):
    """What to do with the template."""

    openapi_examples = ({"action": "apply"},)
    action: Literal["apply"] = Field(description="`apply`: create the template's parts that do not exist yet")


class ApplyResult(BaseModel):
    """What applying a template created, and what already existed (by key or name)."""

    openapi_examples = (
        {
            "template_id": "cdptpl_builtin_b2b_sales",
            "created": {"custom_fields": ["lead_source"], "lifecycle_stages": ["lead"], "segments": []},
            "skipped": {"custom_fields": [], "lifecycle_stages": [], "segments": ["Qualified leads"]},
        },
    )
    template_id: str = Field(description="the template applied")
    created: dict[str, list[str]] = Field(description="keys (fields, stages) and names (segments) created, by part")
    skipped: dict[str, list[str]] = Field(description="what existed already (by key or name) and was left as it was")
