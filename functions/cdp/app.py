"""Customer data (/v1/cdp): custom fields, lifecycle stages, events and activity, object types and contact objects,
segments, CDP templates. Reads: viewer; CRM operations and definitions: member; CDP templates: admin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.models import DateTimeIn
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.cdp import crm, events, fields, imports, models, objects, segments, stages, templates
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    crm = lazy_module("switchboard.cdp.crm")
    events = lazy_module("switchboard.cdp.events")
    fields = lazy_module("switchboard.cdp.fields")
    imports = lazy_module("switchboard.cdp.imports")
    models = lazy_module("switchboard.cdp.models")
    objects = lazy_module("switchboard.cdp.objects")
    segments = lazy_module("switchboard.cdp.segments")
    stages = lazy_module("switchboard.cdp.stages")
    templates = lazy_module("switchboard.cdp.templates")

app = create_resolver()
# Path parameters, described once for every route of the group.
ContactID = Annotated[str, Path(description="the contact's id (`ct_…`)")]
FieldID = Annotated[str, Path(description="the field's id")]
StageID = Annotated[str, Path(description="the lifecycle stage's id (`stg_…`)")]
ObjectTypeID = Annotated[str, Path(description="the object type's id (`oty_…`)")]
ObjectID = Annotated[str, Path(description="the contact object's id (`obj_…`)")]
CommentID = Annotated[str, Path(description="the comment's id (`cmt_…`)")]
RelatedID = Annotated[str, Path(description="the linked record: a contact object (`obj_…`) or a contact (`ct_…`)")]
ImportID = Annotated[str, Path(description="the import's id (`imp_…`)")]
SegmentID = Annotated[str, Path(description="the segment's id (`seg_…`)")]
TemplateID = Annotated[str, Path(description="the CDP template's id (`cdptpl_…`)")]
Limit = Annotated[int, Query(ge=1, le=100, description="page size")]
Cursor = Annotated[
    str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
]
Time = Annotated[DateTimeIn | None, Query(description="an RFC 3339 date-time with its offset")]
FIELDS, STAGES, EVENTS, OBJECTS, SEGMENTS, TEMPLATES, IMPORTS = (
    ["cdp: custom fields"],
    ["cdp: lifecycle stages"],
    ["cdp: events"],
    ["cdp: objects"],
    ["cdp: segments"],
    ["cdp: templates"],
    ["cdp: imports"],
)


def _page[T](items: list[T], limit: int, cursor: str | None) -> ListData[T]:
    return cursor_list(items, limit, cursor)


# Custom fields --------------------------------------------------------------------------------------------------------
@app.get(
    "/v1/cdp/custom-fields",
    middlewares=requires("viewer"),
    tags=FIELDS,
    summary="List custom fields",
    description=(
        "The contact custom fields of the organization. Not paginated: the whole list in one "
        "page. Role: viewer or above."
    ),
)
def list_custom_fields() -> ListData[models.CustomField]:
    return whole_list(fields.list_fields(get_store(), current_auth(app)))


@app.post(
    "/v1/cdp/custom-fields",
    middlewares=requires("member"),
    tags=FIELDS,
    status_code=201,
    summary="Create a custom field",
    description=(
        "Defines a contact attribute: its `key` (stable, unique) names the value in every "
        "contact's `attributes`; select types need `options`. 409 `conflict` when the key exists "
        "or the organization already holds 200 fields. Role: member or above."
    ),
)
def create_custom_field(body: Annotated[models.FieldCreate, Body()]) -> Data[models.CustomField]:
    """Defines a contact attribute: its `key` (stable, unique) names the value in every contact's `attributes`."""
    return Data(data=fields.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/custom-fields/<fieldID>",
    middlewares=requires("viewer"),
    tags=FIELDS,
    summary="Get a custom field",
    description=(
        "Reads one custom field definition. 404 `not_found` when the field is not in your "
        "organization. Role: viewer or above."
    ),
)
def get_custom_field(fieldID: FieldID) -> Data[models.CustomField]:
    return Data(data=fields.get(get_store(), current_auth(app), fieldID))


@app.patch(
    "/v1/cdp/custom-fields/<fieldID>",
    middlewares=requires("member"),
    tags=FIELDS,
    summary="Update a custom field",
    description=(
        "Changes the label, options, `required` or description; the key and the type never "
        "change, so the data stays. 400 `validation_failed` for options on a non-select field. "
        "404 `not_found` when the field is not in your organization. Role: member or above."
    ),
)
def update_custom_field(fieldID: FieldID, body: Annotated[models.FieldUpdate, Body()]) -> Data[models.CustomField]:
    """Label, options, required, description; the key and the type never change, so the data stays."""
    return Data(data=fields.update(get_store(), current_auth(app), fieldID, body))


@app.delete(
    "/v1/cdp/custom-fields/<fieldID>",
    middlewares=requires("member"),
    tags=FIELDS,
    status_code=204,
    summary="Delete a custom field",
    description=(
        "Removes the definition; the values stay in the contacts' attributes as undefined keys. "
        "404 `not_found` when the field is not in your organization. Role: member or above."
    ),
)
def delete_custom_field(fieldID: FieldID) -> None:
    """The values stay in the contacts' attributes, as undefined keys."""
    fields.delete(get_store(), current_auth(app), fieldID)


# Lifecycle stages -----------------------------------------------------------------------------------------------------
@app.get(
    "/v1/cdp/lifecycle-stages",
    middlewares=requires("viewer"),
    tags=STAGES,
    summary="List lifecycle stages",
    description=(
        "The organization's stages in funnel order (`position`). Not paginated: the whole list in"
        " one page. Role: viewer or above."
    ),
)
def list_lifecycle_stages() -> ListData[models.Stage]:
    """In funnel order (`position`)."""
    return whole_list(stages.list_stages(get_store(), current_auth(app)))


@app.post(
    "/v1/cdp/lifecycle-stages",
    middlewares=requires("member"),
    tags=STAGES,
    status_code=201,
    summary="Create a lifecycle stage",
    description=(
        "Adds a stage to the funnel. 409 `conflict` when the key exists or the organization "
        "already holds 50 stages. Role: member or above."
    ),
)
def create_lifecycle_stage(body: Annotated[models.StageCreate, Body()]) -> Data[models.Stage]:
    return Data(data=stages.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/lifecycle-stages/metrics",
    middlewares=requires("viewer"),
    tags=STAGES,
    summary="Lifecycle stage metrics",
    description=(
        "Contacts now in each stage, with entries, exits and conversions between stages in "
        "`[since, until]` (default: the last 30 days). 400 `validation_failed` when `since` is "
        "after `until`. Role: viewer or above."
    ),
)
def lifecycle_stage_metrics(since: Time = None, until: Time = None) -> Data[models.StageMetrics]:
    """Contacts now in each stage; entries, exits and conversions between stages in [since, until] (30 days)."""
    return Data(data=stages.metrics(get_store(), current_auth(app), since, until))


@app.get(
    "/v1/cdp/lifecycle-stages/<stageID>",
    middlewares=requires("viewer"),
    tags=STAGES,
    summary="Get a lifecycle stage",
    description=("Reads one stage. 404 `not_found` when the stage is not in your organization. Role: viewer or above."),
)
def get_lifecycle_stage(stageID: StageID) -> Data[models.Stage]:
    return Data(data=stages.get(get_store(), current_auth(app), stageID))


@app.patch(
    "/v1/cdp/lifecycle-stages/<stageID>",
    middlewares=requires("member"),
    tags=STAGES,
    summary="Update a lifecycle stage",
    description=(
        "Changes the name, description, colour or position; the key stays. 404 `not_found` when "
        "the stage is not in your organization. Role: member or above."
    ),
)
def update_lifecycle_stage(stageID: StageID, body: Annotated[models.StageUpdate, Body()]) -> Data[models.Stage]:
    return Data(data=stages.update(get_store(), current_auth(app), stageID, body))


@app.delete(
    "/v1/cdp/lifecycle-stages/<stageID>",
    middlewares=requires("member"),
    tags=STAGES,
    status_code=204,
    summary="Delete a lifecycle stage",
    description=(
        "Deletes an empty stage; 409 `conflict` while contacts are in it. 404 `not_found` when "
        "the stage is not in your organization. Role: member or above."
    ),
)
def delete_lifecycle_stage(stageID: StageID) -> None:
    """Only an empty stage (409 while contacts are in it)."""
    stages.delete(get_store(), current_auth(app), stageID)


@app.get(
    "/v1/cdp/contacts/<contactID>/lifecycle-stage",
    middlewares=requires("viewer"),
    tags=STAGES,
    summary="Get a contact's lifecycle stage",
    description=(
        "The contact's current stage and its stage history. 404 `not_found` when the contact is "
        "not in your organization. Role: viewer or above."
    ),
)
def get_contact_lifecycle_stage(contactID: ContactID) -> Data[models.ContactStage]:
    return Data(data=stages.contact_stage(get_store(), current_auth(app), contactID))


@app.put(
    "/v1/cdp/contacts/<contactID>/lifecycle-stage",
    middlewares=requires("member"),
    tags=STAGES,
    summary="Move a contact to a lifecycle stage",
    description=(
        "Moves the contact to a stage (key or id; `null` clears it) and records the change in its"
        " history. 404 `not_found` for an unknown contact or stage; 409 `conflict` when the "
        "contact changes meanwhile (retry). Role: member or above."
    ),
)
def set_contact_lifecycle_stage(
    contactID: ContactID, body: Annotated[models.StageSet, Body()]
) -> Data[models.ContactStage]:
    """Moves the contact to a stage (key or id; null clears it), recording the change in its history."""
    return Data(data=stages.set_contact_stage(get_store(), current_auth(app), contactID, body))


# Events and activity --------------------------------------------------------------------------------------------------
@app.post(
    "/v1/cdp/events",
    middlewares=requires("member"),
    tags=EVENTS,
    summary="Ingest CDP events",
    description=(
        "Records up to 100 events. Each counts once per `event_id` (a repeat is `duplicate`); an "
        "identity nobody owns yet creates the contact; an unknown `contact_id` or an identity "
        "conflict rejects that event only (its `error` says why), the others are still recorded. "
        "Role: member or above."
    ),
)
def ingest_events(body: Annotated[models.EventBatch, Body()]) -> Data[models.IngestResult]:
    """Up to 100 events; each counts once per `event_id` (a repeat is `duplicate`). An identity nobody owns yet
    creates the contact; an unknown `contact_id` or an identity conflict rejects that event only."""
    return Data(data=events.ingest(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/contacts/<contactID>/activity",
    middlewares=requires("viewer"),
    tags=EVENTS,
    summary="List a contact's activity",
    description=(
        "The contact's events, newest first, optionally only those named `name`. "
        "Cursor-paginated: pass `meta.cursor` back as `cursor` while `meta.has_more` is true. 404"
        " `not_found` when the contact is not in your organization. Role: viewer or above."
    ),
)
def contact_activity(
    contactID: ContactID,
    limit: Limit = 20,
    cursor: Cursor = None,
    name: Annotated[str | None, Query(max_length=100, description="only events of this name")] = None,
) -> ListData[models.Activity]:
    """Newest first."""
    items, next_cursor = events.contact_activity(
        get_store(), current_auth(app), contactID, limit=limit, cursor=cursor, name=name
    )
    return _page(items, limit, next_cursor)


@app.get(
    "/v1/cdp/activity-log",
    middlewares=requires("viewer"),
    tags=EVENTS,
    summary="List the activity log",
    description=(
        "Every contact's events, newest first, filtered by `name`, `contact_id` and the `since` /"
        " `until` window (ISO 8601; `since` after `until` is 400 `validation_failed`). Cursor-paginated: "
        "pass `meta.cursor` back as `cursor` while `meta.has_more` is true. Role: viewer or above."
    ),
)
def activity_log(
    limit: Limit = 20,
    cursor: Cursor = None,
    name: Annotated[str | None, Query(max_length=100, description="only events of this name")] = None,
    contact_id: Annotated[str | None, Query(max_length=64, description="only this contact's")] = None,
    since: Time = None,
    until: Time = None,
) -> ListData[models.Activity]:
    """Every contact's activity, newest first."""
    items, next_cursor = events.activity_log(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        name=name,
        contact_id=contact_id,
        since=since,
        until=until,
    )
    return _page(items, limit, next_cursor)


# Object types -----------------------------------------------------------------------------------------------------
@app.get(
    "/v1/cdp/object-types",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="List object types",
    description=(
        "The organization's custom object types (deals, tasks, …). Not paginated: the whole list "
        "in one page. Role: viewer or above."
    ),
)
def list_object_types() -> ListData[models.ObjectType]:
    return whole_list(objects.list_types(get_store(), current_auth(app)))


@app.post(
    "/v1/cdp/object-types",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=201,
    summary="Create an object type",
    description=(
        "Defines a kind of record linked to contacts, with its fields. `deal` types need a "
        "single-select `status_field`; `task` types also a `completed_value`. 409 `conflict` when"
        " the key exists; 400 `validation_failed` for a field key used twice or a `display_field`"
        " that is not one of the fields. Role: member or above."
    ),
)
def create_object_type(body: Annotated[models.ObjectTypeCreate, Body()]) -> Data[models.ObjectType]:
    return Data(data=objects.create_type(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/object-types/<objectTypeID>",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="Get an object type",
    description=(
        "Reads one object type with its fields. 404 `not_found` when the object type is not in "
        "your organization. Role: viewer or above."
    ),
)
def get_object_type(objectTypeID: ObjectTypeID) -> Data[models.ObjectType]:
    return Data(data=objects.get_type(get_store(), current_auth(app), objectTypeID))


@app.patch(
    "/v1/cdp/object-types/<objectTypeID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    summary="Update an object type",
    description=(
        "Changes the names, description or display field; the key and the kind stay. 409 "
        "`conflict` when the type changes meanwhile. 404 `not_found` when the object type is not "
        "in your organization. Role: member or above."
    ),
)
def update_object_type(
    objectTypeID: ObjectTypeID, body: Annotated[models.ObjectTypeUpdate, Body()]
) -> Data[models.ObjectType]:
    return Data(data=objects.update_type(get_store(), current_auth(app), objectTypeID, body))


@app.delete(
    "/v1/cdp/object-types/<objectTypeID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
    summary="Delete an object type",
    description=(
        "Deletes a type that has no records (409 `conflict` otherwise). 404 `not_found` when the "
        "object type is not in your organization. Role: member or above."
    ),
)
def delete_object_type(objectTypeID: ObjectTypeID) -> None:
    """Only a type without records (409 otherwise)."""
    objects.delete_type(get_store(), current_auth(app), objectTypeID)


@app.get(
    "/v1/cdp/object-types/<objectTypeID>/fields",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="List an object type's fields",
    description=(
        "The type's fields in display order. Not paginated: the whole list in one page. 404 "
        "`not_found` when the object type is not in your organization. Role: viewer or above."
    ),
)
def list_object_type_fields(objectTypeID: ObjectTypeID) -> ListData[models.ObjectField]:
    return whole_list(objects.list_type_fields(get_store(), current_auth(app), objectTypeID))


@app.post(
    "/v1/cdp/object-types/<objectTypeID>/fields",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=201,
    summary="Add a field to an object type",
    description=(
        "Adds a field at the end. 409 `conflict` when the key is taken or the type already holds "
        "100 fields. 404 `not_found` when the object type is not in your organization. Role: "
        "member or above."
    ),
)
def add_object_type_field(
    objectTypeID: ObjectTypeID, body: Annotated[models.FieldCreate, Body()]
) -> Data[models.ObjectField]:
    return Data(data=objects.add_field(get_store(), current_auth(app), objectTypeID, body))


@app.post(
    "/v1/cdp/object-types/<objectTypeID>/fields/reorder",
    middlewares=requires("member"),
    tags=OBJECTS,
    summary="Reorder an object type's fields",
    description=(
        "`field_ids` lists every field id of the type exactly once, in the new order (400 "
        "`validation_failed` otherwise); answers the fields in that order. 404 `not_found` when "
        "the object type is not in your organization. Role: member or above."
    ),
)
def reorder_object_type_fields(
    objectTypeID: ObjectTypeID, body: Annotated[models.FieldReorder, Body()]
) -> ListData[models.ObjectField]:
    """`field_ids`: every field id of the type, in the new order."""
    return whole_list(objects.reorder_fields(get_store(), current_auth(app), objectTypeID, body))


@app.get(
    "/v1/cdp/object-types/<objectTypeID>/fields/<fieldID>",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="Get an object type field",
    description="Reads one field. 404 `not_found` for an unknown type or field. Role: viewer or above.",
)
def get_object_type_field(objectTypeID: ObjectTypeID, fieldID: FieldID) -> Data[models.ObjectField]:
    return Data(data=objects.get_type_field(get_store(), current_auth(app), objectTypeID, fieldID))


@app.patch(
    "/v1/cdp/object-types/<objectTypeID>/fields/<fieldID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    summary="Update an object type field",
    description=(
        "Changes the label, options, `required` or description; the status field of a deal or "
        "task type must keep its completed value. 404 `not_found` for an unknown type or field. "
        "Role: member or above."
    ),
)
def update_object_type_field(
    objectTypeID: ObjectTypeID, fieldID: FieldID, body: Annotated[models.FieldUpdate, Body()]
) -> Data[models.ObjectField]:
    return Data(data=objects.update_field(get_store(), current_auth(app), objectTypeID, fieldID, body))


@app.delete(
    "/v1/cdp/object-types/<objectTypeID>/fields/<fieldID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
    summary="Delete an object type field",
    description=(
        "Removes a field; the status field of a deal or task type cannot be removed (409 "
        "`conflict`). 404 `not_found` for an unknown type or field. Role: member or above."
    ),
)
def delete_object_type_field(objectTypeID: ObjectTypeID, fieldID: FieldID) -> None:
    objects.delete_field(get_store(), current_auth(app), objectTypeID, fieldID)


# Contact objects ------------------------------------------------------------------------------------------------------
@app.get(
    "/v1/cdp/contact-objects",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="List contact objects",
    description=(
        "Records of the organization, filtered by `object_type_id` (id or key) and `contact_id`. "
        "Cursor-paginated: pass `meta.cursor` back as `cursor` while `meta.has_more` is true. "
        "Role: viewer or above."
    ),
)
def list_contact_objects(
    limit: Limit = 20,
    cursor: Cursor = None,
    object_type_id: Annotated[str | None, Query(max_length=64, description="type id or key")] = None,
    contact_id: Annotated[str | None, Query(max_length=64, description="only this contact's")] = None,
) -> ListData[models.ContactObject]:
    items, next_cursor = objects.list_objects(
        get_store(), current_auth(app), limit=limit, cursor=cursor, object_type_id=object_type_id, contact_id=contact_id
    )
    return _page(items, limit, next_cursor)


@app.post(
    "/v1/cdp/contact-objects",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=201,
    summary="Create a contact object",
    description=(
        "Creates a record of an object type linked to a contact; emits `crm.record.created`. 404 "
        "`not_found` for an unknown type or contact; 400 `validation_failed` for properties that "
        "do not fit the type's fields. Role: member or above."
    ),
)
def create_contact_object(body: Annotated[models.ObjectCreate, Body()]) -> Data[models.ContactObject]:
    """A record of an object type linked to a contact; emits `crm.record.created`."""
    return Data(data=objects.create_object(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/contact-objects/<objectID>",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="Get a contact object",
    description=(
        "Reads one record. 404 `not_found` when the record is not in your organization. Role: viewer or above."
    ),
)
def get_contact_object(objectID: ObjectID) -> Data[models.ContactObject]:
    return Data(data=objects.get_object(get_store(), current_auth(app), objectID))


@app.patch(
    "/v1/cdp/contact-objects/<objectID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    summary="Update a contact object",
    description=(
        "Properties merge key by key (`null` removes a key); emits `crm.record.updated` when "
        "something changed. 409 `conflict` when the record changes meanwhile. 404 `not_found` "
        "when the record is not in your organization. Role: member or above."
    ),
)
def update_contact_object(
    objectID: ObjectID, body: Annotated[models.ObjectUpdate, Body()]
) -> Data[models.ContactObject]:
    """Properties merge key by key (null removes); emits `crm.record.updated` when something changed."""
    return Data(data=objects.update_object(get_store(), current_auth(app), objectID, body))


@app.delete(
    "/v1/cdp/contact-objects/<objectID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
    summary="Delete a contact object",
    description=(
        "Deletes the record. 404 `not_found` when the record is not in your organization. Role: member or above."
    ),
)
def delete_contact_object(objectID: ObjectID) -> None:
    crm.delete_object(get_store(), current_auth(app), objectID)


@app.get(
    "/v1/cdp/contact-objects/<objectID>/comments",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="List a record's comments",
    description=(
        "The record's comments, oldest first. Cursor-paginated: pass `meta.cursor` back as "
        "`cursor` while `meta.has_more` is true. 404 `not_found` when the record is not in your "
        "organization. Role: viewer or above."
    ),
)
def list_contact_object_comments(
    objectID: ObjectID, limit: Limit = 20, cursor: Cursor = None
) -> ListData[models.Comment]:
    """Oldest first."""
    items, next_cursor = crm.list_comments(get_store(), current_auth(app), objectID, limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


@app.post(
    "/v1/cdp/contact-objects/<objectID>/comments",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=201,
    summary="Comment on a record",
    description=(
        "Adds a comment by the caller; emits `crm.comment.created`. 404 `not_found` when the "
        "record is not in your organization. Role: member or above."
    ),
)
def add_contact_object_comment(
    objectID: ObjectID, body: Annotated[models.CommentCreate, Body()]
) -> Data[models.Comment]:
    """Emits `crm.comment.created`."""
    return Data(data=crm.add_comment(get_store(), current_auth(app), objectID, body))


@app.delete(
    "/v1/cdp/contact-objects/<objectID>/comments/<commentID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
    summary="Delete a comment",
    description=(
        "Deletes a comment; emits `crm.comment.deleted`. 404 `not_found` for an unknown record or"
        " comment. Role: member or above."
    ),
)
def delete_contact_object_comment(objectID: ObjectID, commentID: CommentID) -> None:
    """Emits `crm.comment.deleted`."""
    crm.delete_comment(get_store(), current_auth(app), objectID, commentID)


@app.get(
    "/v1/cdp/contact-objects/<objectID>/relationships",
    middlewares=requires("viewer"),
    tags=OBJECTS,
    summary="List a record's relationships",
    description=(
        "The records and contacts this record is linked to (a link between two records shows on "
        "both). Cursor-paginated: pass `meta.cursor` back as `cursor` while `meta.has_more` is "
        "true. 404 `not_found` when the record is not in your organization. Role: viewer or "
        "above."
    ),
)
def list_contact_object_relationships(
    objectID: ObjectID, limit: Limit = 20, cursor: Cursor = None
) -> ListData[models.Relationship]:
    """The records this one is linked to (links between two objects show on both)."""
    items, next_cursor = crm.list_links(get_store(), current_auth(app), objectID, limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


@app.put(
    "/v1/cdp/contact-objects/<objectID>/relationships/<relatedID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=201,
    responses={200: {"description": "The records were linked already (the label is updated, no event)"}},
    summary="Link a record",
    description=(
        "Links the record to another contact object (`obj_…`) or a contact (`ct_…`): 201 and "
        "`crm.relationship.linked` the first time, 200 when already linked (the label is "
        "updated). 400 `validation_failed` for a link to itself; 404 `not_found` for an unknown "
        "record. Role: member or above."
    ),
)
def link_contact_object(
    objectID: ObjectID, relatedID: RelatedID, body: Annotated[models.RelationshipSet, Body()]
) -> Response[Data[models.Relationship]]:
    """Links the record to a contact object (`obj_…`) or a contact (`ct_…`); emits `crm.relationship.linked` once."""
    link, created = crm.set_link(get_store(), current_auth(app), objectID, relatedID, body)
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=link).model_dump(mode="json"),
    )


@app.delete(
    "/v1/cdp/contact-objects/<objectID>/relationships/<relatedID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
    summary="Unlink a record",
    description=(
        "Removes a link; emits `crm.relationship.unlinked`. 404 `not_found` when the records are "
        "not linked. Role: member or above."
    ),
)
def unlink_contact_object(objectID: ObjectID, relatedID: RelatedID) -> None:
    """Emits `crm.relationship.unlinked` (404 when the records are not linked)."""
    crm.unlink(get_store(), current_auth(app), objectID, relatedID)


# Contacts imports -----------------------------------------------------------------------------------------------------
@app.post(
    "/v1/cdp/imports",
    middlewares=requires("member"),
    tags=IMPORTS,
    status_code=201,
    summary="Import contacts",
    description=(
        "Imports up to 500 contacts from CSV or JSON lines: every row is validated (rejected rows"
        " are reported with their row number, field and message), valid rows are created or "
        "upserted by identity and committed in all-or-nothing batches of at most 100 items; "
        "`crm.import.committed` when something changed. `dry_run` only validates. 400 "
        "`validation_failed` for a malformed file, an unknown column or too many rows. Role: "
        "member or above."
    ),
)
def create_contacts_import(body: Annotated[models.ImportCreate, Body()]) -> Data[models.ImportReport]:
    """Imports contacts from CSV or JSON lines: every row is validated (rejected rows are reported with their row
    number, field and message), valid rows are created or upserted by identity and committed in all-or-nothing
    batches of at most 100 items; `crm.import.committed` when something changed. `dry_run` only validates."""
    return Data(data=imports.run(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/imports",
    middlewares=requires("viewer"),
    tags=IMPORTS,
    summary="List contact imports",
    description=(
        "Import reports, newest first. Cursor-paginated: pass `meta.cursor` back as `cursor` "
        "while `meta.has_more` is true. Role: viewer or above."
    ),
)
def list_contacts_imports(limit: Limit = 20, cursor: Cursor = None) -> ListData[models.ImportReport]:
    """Newest first."""
    items, next_cursor = imports.list_imports(get_store(), current_auth(app), limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


@app.get(
    "/v1/cdp/imports/<importID>",
    middlewares=requires("viewer"),
    tags=IMPORTS,
    summary="Get a contact import",
    description=(
        "Reads one import's report. 404 `not_found` when the import is not in your organization. Role: viewer or above."
    ),
)
def get_contacts_import(importID: ImportID) -> Data[models.ImportReport]:
    """The import's report."""
    return Data(data=imports.get(get_store(), current_auth(app), importID))


# Segments -------------------------------------------------------------------------------------------------------------
@app.get(
    "/v1/cdp/segments",
    middlewares=requires("viewer"),
    tags=SEGMENTS,
    summary="List segments",
    description=(
        "The organization's segments with their status and member count. Not paginated: the whole"
        " list in one page. Role: viewer or above."
    ),
)
def list_segments() -> ListData[models.Segment]:
    return whole_list(segments.list_segments(get_store(), current_auth(app)))


@app.post(
    "/v1/cdp/segments",
    middlewares=requires("member"),
    tags=SEGMENTS,
    status_code=201,
    summary="Create a segment",
    description=(
        "Creates a segment from a rule tree and answers it `building`; the `segment.build` job "
        "(`job_id`) fills the membership (`crm.list.entry_added` per member) and marks it "
        "`ready`. 400 `validation_failed` for a malformed rule tree or more than 50 conditions. "
        "Role: member or above."
    ),
)
def create_segment(body: Annotated[models.SegmentCreate, Body()]) -> Data[models.Segment]:
    """Answers with the segment `building`; the `segment.build` job (`job_id`) fills the membership
    (`crm.list.entry_added` per member) and marks it `ready`."""
    return Data(data=segments.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/segments/<segmentID>",
    middlewares=requires("viewer"),
    tags=SEGMENTS,
    summary="Get a segment",
    description=(
        "Reads one segment with its build status and progress. 404 `not_found` when the segment "
        "is not in your organization. Role: viewer or above."
    ),
)
def get_segment(segmentID: SegmentID) -> Data[models.Segment]:
    return Data(data=segments.get(get_store(), current_auth(app), segmentID))


@app.patch(
    "/v1/cdp/segments/<segmentID>",
    middlewares=requires("member"),
    tags=SEGMENTS,
    summary="Update a segment",
    description=(
        "A change of `rules` (or an empty body) starts a new build: `building` until its job is "
        "done, with entry events for every change of membership. 409 `conflict` when the segment "
        "changes meanwhile. 404 `not_found` when the segment is not in your organization. Role: "
        "member or above."
    ),
)
def update_segment(segmentID: SegmentID, body: Annotated[models.SegmentUpdate, Body()]) -> Data[models.Segment]:
    """A change of `rules` (or an empty body) starts a new build: `building` until its job is done; entry events for
    every change of membership."""
    return Data(data=segments.update(get_store(), current_auth(app), segmentID, body))


@app.delete(
    "/v1/cdp/segments/<segmentID>",
    middlewares=requires("member"),
    tags=SEGMENTS,
    status_code=204,
    summary="Delete a segment",
    description=(
        "Deletes the segment and its membership. 404 `not_found` when the segment is not in your "
        "organization. Role: member or above."
    ),
)
def delete_segment(segmentID: SegmentID) -> None:
    segments.delete(get_store(), current_auth(app), segmentID)


@app.get(
    "/v1/cdp/segments/<segmentID>/members",
    middlewares=requires("viewer"),
    tags=SEGMENTS,
    summary="List a segment's members",
    description=(
        "The contacts in the segment. Cursor-paginated: pass `meta.cursor` back as `cursor` while"
        " `meta.has_more` is true. 404 `not_found` when the segment is not in your organization. "
        "Role: viewer or above."
    ),
)
def list_segment_members(
    segmentID: SegmentID, limit: Limit = 20, cursor: Cursor = None
) -> ListData[models.SegmentMember]:
    items, next_cursor = segments.members(get_store(), current_auth(app), segmentID, limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


# CDP templates ----------------------------------------------------------------------------------------------------
@app.get(
    "/v1/cdp/templates",
    middlewares=requires("viewer"),
    tags=TEMPLATES,
    summary="List CDP templates",
    description=(
        "Bundles of custom fields, lifecycle stages and segments: built-in templates first, then "
        "the organization's own. Not paginated: the whole list in one page. Role: viewer or "
        "above."
    ),
)
def list_cdp_templates() -> ListData[models.CdpTemplate]:
    """Built-in templates first, then the organization's own."""
    return whole_list(templates.list_templates(get_store(), current_auth(app)))


@app.post(
    "/v1/cdp/templates",
    middlewares=requires("admin"),
    tags=TEMPLATES,
    status_code=201,
    summary="Create a CDP template",
    description="Saves a bundle of custom fields, lifecycle stages and segments. Role: admin or above.",
)
def create_cdp_template(body: Annotated[models.CdpTemplateCreate, Body()]) -> Data[models.CdpTemplate]:
    return Data(data=templates.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/cdp/templates/<templateID>",
    middlewares=requires("viewer"),
    tags=TEMPLATES,
    summary="Get a CDP template",
    description=(
        "Reads one template (built-in or the organization's). 404 `not_found` when the template "
        "is not in your organization. Role: viewer or above."
    ),
)
def get_cdp_template(templateID: TemplateID) -> Data[models.CdpTemplate]:
    return Data(data=templates.get(get_store(), current_auth(app), templateID))


@app.post(
    "/v1/cdp/templates/<templateID>",
    middlewares=requires("admin"),
    tags=TEMPLATES,
    summary="Apply a CDP template",
    description=(
        '`{"action": "apply"}` creates the template\'s custom fields, lifecycle stages and '
        "segments that do not exist yet; those that exist are listed as skipped. 404 `not_found` "
        "when the template is not in your organization. Role: admin or above."
    ),
)
def cdp_template_action(
    templateID: TemplateID, body: Annotated[models.TemplateAction, Body()]
) -> Data[models.ApplyResult]:
    """`{"action": "apply"}`: creates the template's fields, stages and segments that do not exist yet."""
    return Data(data=templates.apply(get_store(), current_auth(app), templateID))


@app.patch(
    "/v1/cdp/templates/<templateID>",
    middlewares=requires("admin"),
    tags=TEMPLATES,
    summary="Update a CDP template",
    description=(
        "Changes the organization's own template; built-in templates are read-only (409 "
        "`conflict`). 404 `not_found` when the template is not in your organization. Role: admin "
        "or above."
    ),
)
def update_cdp_template(
    templateID: TemplateID, body: Annotated[models.CdpTemplateUpdate, Body()]
) -> Data[models.CdpTemplate]:
    return Data(data=templates.update(get_store(), current_auth(app), templateID, body))


@app.delete(
    "/v1/cdp/templates/<templateID>",
    middlewares=requires("admin"),
    tags=TEMPLATES,
    status_code=204,
    summary="Delete a CDP template",
    description=(
        "Deletes the organization's own template; built-in templates cannot be deleted (409 "
        "`conflict`). 404 `not_found` when the template is not in your organization. Role: admin "
        "or above."
    ),
)
def delete_cdp_template(templateID: TemplateID) -> None:
    templates.delete(get_store(), current_auth(app), templateID)


handler = make_handler(app)
