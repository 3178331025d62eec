"""Customer-data resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from switchboard.models import BaseModel, Name, Storable, Strict

FieldType = Literal["text", "number", "boolean", "date", "single_select", "multi_select", "email", "phone", "url"]
SELECT_TYPES = ("single_select", "multi_select")
Key = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]{0,63}$", description="stable slug")
Iso = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}T")
Properties = Annotated[dict[str, Any], Storable]  # free-form, checked storable (switchboard.models)


# Field definitions (custom fields of contacts and fields of object types) -------------------------------------------
class FieldOption(Strict):
    value: str = Field(min_length=1, max_length=100)
    label: Name | None = Field(default=None, max_length=200)


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
    key: str = Key
    label: Name = Field(min_length=1, max_length=200)
    type: FieldType
    options: list[FieldOption] | None = Field(default=None, max_length=200, validate_default=True)
    required: bool = False
    description: str | None = Field(default=None, max_length=1000)


class FieldUpdate(_FieldBody):
    """The key and the type are stable: a rename changes the label, the data stays under the key."""

    label: Name | None = Field(default=None, min_length=1, max_length=200)
    options: list[FieldOption] | None = Field(default=None, max_length=200)
    required: bool | None = None
    description: str | None = Field(default=None, max_length=1000)


class CustomField(BaseModel):
    id: str
    key: str
    label: str
    type: FieldType
    options: list[FieldOption] = Field(default_factory=list)
    required: bool = False
    description: str | None = None
    created_at: str
    updated_at: str


class ObjectField(BaseModel):
    id: str
    key: str
    label: str
    type: FieldType
    options: list[FieldOption] = Field(default_factory=list)
    required: bool = False
    description: str | None = None
    position: int


# Lifecycle stages -------------------------------------------------------------------------------------------------
class StageCreate(Strict):
    key: str = Key
    name: Name = Field(min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$")
    position: int | None = Field(default=None, ge=0, le=1000)


class StageUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$")
    position: int | None = Field(default=None, ge=0, le=1000)


class Stage(BaseModel):
    id: str
    key: str
    name: str
    description: str | None = None
    color: str | None = None
    position: int
    created_at: str
    updated_at: str


class StageSet(Strict):
    stage: str | None = Field(min_length=1, max_length=64, description="stage key or id; null clears the stage")
    reason: str | None = Field(default=None, max_length=500)


class StageChange(BaseModel):
    contact_id: str
    from_stage: str | None = None
    to_stage: str | None = None
    reason: str | None = None
    changed_by: str | None = None
    changed_at: str


class ContactStage(BaseModel):
    contact_id: str
    stage: Stage | None = None
    history: list[StageChange] = Field(default_factory=list)


class StageCount(BaseModel):
    stage: str
    name: str
    contacts: int
    entered: int
    exited: int


class Conversion(BaseModel):
    from_stage: str | None
    to_stage: str | None
    count: int


class StageMetrics(BaseModel):
    since: str
    until: str
    stages: list[StageCount]
    conversions: list[Conversion]


# Events and activity ----------------------------------------------------------------------------------------------
class EventContact(Strict):
    type: Literal["phone", "whatsapp", "wa_id", "email", "external_id", "instagram"]
    value: str = Field(min_length=1, max_length=320)
    source: str | None = Field(default=None, min_length=1, max_length=64)


class EventIn(Strict):
    event_id: str | None = Field(default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:\-]+$")
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:\- ]+$")
    contact: EventContact | None = None
    contact_id: str | None = Field(default=None, min_length=1, max_length=64)
    properties: Properties = Field(default_factory=dict, max_length=100)
    timestamp: str | None = Iso
    exactly_one_of = (("contact", "contact_id"),)

    @model_validator(mode="after")
    def _one_contact(self) -> EventIn:
        if (self.contact is None) == (self.contact_id is None):
            raise ValueError("give exactly one of contact or contact_id")
        return self


class EventBatch(Strict):
    events: list[EventIn] = Field(min_length=1, max_length=100)


class EventResult(BaseModel):
    index: int
    event_id: str
    status: Literal["accepted", "duplicate", "rejected"]
    contact_id: str | None = None
    error: dict[str, Any] | None = None


class IngestResult(BaseModel):
    accepted: int
    duplicates: int
    rejected: int
    results: list[EventResult]


class Activity(BaseModel):
    id: str
    event_id: str
    name: str
    kind: str = "event"
    contact_id: str
    properties: Properties = Field(default_factory=dict)
    occurred_at: str
    received_at: str


# Object types and contact objects --------------------------------------------------------------------------------
ObjectKind = Literal["custom", "deal", "task"]


class ObjectTypeCreate(Strict):
    key: str = Key
    name: Name = Field(min_length=1, max_length=100)
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
    plural_name: Name | None = Field(default=None, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    display_field: str | None = Field(
        default=None, max_length=64, description="the field key whose value names a record"
    )
    fields: list[FieldCreate] = Field(default_factory=list, max_length=100)


class ObjectTypeUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    plural_name: Name | None = Field(default=None, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    display_field: str | None = Field(default=None, max_length=64)


class ObjectType(BaseModel):
    id: str
    key: str
    name: str
    kind: ObjectKind = "custom"
    status_field: str | None = None
    completed_value: str | None = None
    plural_name: str | None = None
    description: str | None = None
    display_field: str | None = None
    fields: list[ObjectField] = Field(default_factory=list)
    version: int
    created_at: str
    updated_at: str


class FieldReorder(Strict):
    field_ids: list[str] = Field(min_length=1, max_length=100)


class ObjectCreate(Strict):
    object_type_id: str = Field(min_length=1, max_length=64, description="object type id or key")
    contact_id: str = Field(min_length=1, max_length=64)
    display_name: Name | None = Field(default=None, max_length=200)
    properties: Properties = Field(default_factory=dict, max_length=100)


class ObjectUpdate(Strict):
    display_name: Name | None = Field(default=None, max_length=200)
    properties: Properties | None = Field(default=None, max_length=100, description="merged key by key; null removes")


class ContactObject(BaseModel):
    id: str
    object_type_id: str
    object_kind: str
    contact_id: str
    display_name: str
    properties: Properties = Field(default_factory=dict)
    version: int
    created_at: str
    updated_at: str


class CommentCreate(Strict):
    body: str = Field(min_length=1, max_length=5000)


class Comment(BaseModel):
    id: str
    record_id: str
    object_kind: str
    contact_id: str
    body: str
    author_id: str | None = None
    created_at: str


class RelationshipSet(Strict):
    label: Name | None = Field(default=None, max_length=100, description="what the link means, e.g. `billed_to`")


class Relationship(BaseModel):
    record_id: str
    related_id: str
    related_kind: str = Field(description="`contact`, or the object kind of the related record")
    label: str | None = None
    created_at: str
    updated_at: str


# Contacts imports -------------------------------------------------------------------------------------------------
class ImportCreate(Strict):
    format: Literal["csv", "jsonl"]
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
    row: int = Field(description="1-based data row (the CSV header is not counted)")
    field: str
    message: str


class ImportReport(BaseModel):
    id: str
    format: str
    status: Literal["validated", "committed", "partial"]
    dry_run: bool = False
    rows: int
    created: int
    updated: int
    unchanged: int
    rejected: int
    batches: int = Field(description="transactions committed (each all-or-nothing, at most 100 items)")
    errors: list[RejectedRow] = Field(default_factory=list)
    errors_truncated: bool = False
    created_by: str | None = None
    created_at: str
    completed_at: str


# Segments -----------------------------------------------------------------------------------------------------------
class SegmentCreate(Strict):
    name: Name = Field(min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    rules: dict[str, Any] = Field(description="rule tree: {and|or: [...]}, {not: rule}, a field or an event condition")


class SegmentUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    rules: dict[str, Any] | None = None


class Segment(BaseModel):
    id: str
    name: str
    description: str | None = None
    rules: dict[str, Any]
    member_count: int = 0
    built_at: str | None = None
    status: Literal["building", "ready", "failed"] = Field(
        default="ready", description="`building` while the segment.build job fills the membership"
    )
    progress: dict[str, int] | None = Field(default=None, description="the build's counters: contacts_scanned")
    job_id: str | None = Field(default=None, description="the segment.build job of the latest build")
    version: int
    created_at: str
    updated_at: str


class SegmentMember(BaseModel):
    contact_id: str
    name: str | None = None
    email: str | None = None
    phone: str | None = None
    lifecycle_stage: str | None = None
    added_at: str


# Templates ----------------------------------------------------------------------------------------------------------
class TemplateSegment(Strict):
    name: Name = Field(min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    rules: dict[str, Any]


class CdpTemplateCreate(Strict):
    name: Name = Field(min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    custom_fields: list[FieldCreate] = Field(default_factory=list, max_length=100)
    lifecycle_stages: list[StageCreate] = Field(default_factory=list, max_length=50)
    segments: list[TemplateSegment] = Field(default_factory=list, max_length=50)


class CdpTemplateUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=1000)
    custom_fields: list[FieldCreate] | None = Field(default=None, max_length=100)
    lifecycle_stages: list[StageCreate] | None = Field(default=None, max_length=50)
    segments: list[TemplateSegment] | None = Field(default=None, max_length=50)


class CdpTemplate(BaseModel):
    id: str
    name: str
    description: str | None = None
    builtin: bool = False
    custom_fields: list[dict[str, Any]] = Field(default_factory=list)
    lifecycle_stages: list[dict[str, Any]] = Field(default_factory=list)
    segments: list[dict[str, Any]] = Field(default_factory=list)
    created_at: str | None = None
    updated_at: str | None = None


class TemplateAction(Strict):
    action: Literal["apply"]


class ApplyResult(BaseModel):
    template_id: str
    created: dict[str, list[str]]
    skipped: dict[str, list[str]]
