"""Customer data (/v1/cdp): custom fields, lifecycle stages, events and activity, object types and contact objects,
segments, CDP templates. Reads: viewer; CRM operations and definitions: member; CDP templates: admin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
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
Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2048)]
Time = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}T")]
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
@app.get("/v1/cdp/custom-fields", middlewares=requires("viewer"), tags=FIELDS)
def list_custom_fields() -> ListData[models.CustomField]:
    return whole_list(fields.list_fields(get_store(), current_auth(app)))


@app.post("/v1/cdp/custom-fields", middlewares=requires("member"), tags=FIELDS, status_code=201)
def create_custom_field(body: Annotated[models.FieldCreate, Body()]) -> Data[models.CustomField]:
    """Defines a contact attribute: its `key` (stable, unique) names the value in every contact's `attributes`."""
    return Data(data=fields.create(get_store(), current_auth(app), body))


@app.get("/v1/cdp/custom-fields/<fieldID>", middlewares=requires("viewer"), tags=FIELDS)
def get_custom_field(fieldID: str) -> Data[models.CustomField]:
    return Data(data=fields.get(get_store(), current_auth(app), fieldID))


@app.patch("/v1/cdp/custom-fields/<fieldID>", middlewares=requires("member"), tags=FIELDS)
def update_custom_field(fieldID: str, body: Annotated[models.FieldUpdate, Body()]) -> Data[models.CustomField]:
    """Label, options, required, description; the key and the type never change, so the data stays."""
    return Data(data=fields.update(get_store(), current_auth(app), fieldID, body))


@app.delete("/v1/cdp/custom-fields/<fieldID>", middlewares=requires("member"), tags=FIELDS, status_code=204)
def delete_custom_field(fieldID: str) -> None:
    """The values stay in the contacts' attributes, as undefined keys."""
    fields.delete(get_store(), current_auth(app), fieldID)


# Lifecycle stages -----------------------------------------------------------------------------------------------------
@app.get("/v1/cdp/lifecycle-stages", middlewares=requires("viewer"), tags=STAGES)
def list_lifecycle_stages() -> ListData[models.Stage]:
    """In funnel order (`position`)."""
    return whole_list(stages.list_stages(get_store(), current_auth(app)))


@app.post("/v1/cdp/lifecycle-stages", middlewares=requires("member"), tags=STAGES, status_code=201)
def create_lifecycle_stage(body: Annotated[models.StageCreate, Body()]) -> Data[models.Stage]:
    return Data(data=stages.create(get_store(), current_auth(app), body))


@app.get("/v1/cdp/lifecycle-stages/metrics", middlewares=requires("viewer"), tags=STAGES)
def lifecycle_stage_metrics(since: Time = None, until: Time = None) -> Data[models.StageMetrics]:
    """Contacts now in each stage; entries, exits and conversions between stages in [since, until] (30 days)."""
    return Data(data=stages.metrics(get_store(), current_auth(app), since, until))


@app.get("/v1/cdp/lifecycle-stages/<stageID>", middlewares=requires("viewer"), tags=STAGES)
def get_lifecycle_stage(stageID: str) -> Data[models.Stage]:
    return Data(data=stages.get(get_store(), current_auth(app), stageID))


@app.patch("/v1/cdp/lifecycle-stages/<stageID>", middlewares=requires("member"), tags=STAGES)
def update_lifecycle_stage(stageID: str, body: Annotated[models.StageUpdate, Body()]) -> Data[models.Stage]:
    return Data(data=stages.update(get_store(), current_auth(app), stageID, body))


@app.delete("/v1/cdp/lifecycle-stages/<stageID>", middlewares=requires("member"), tags=STAGES, status_code=204)
def delete_lifecycle_stage(stageID: str) -> None:
    """Only an empty stage (409 while contacts are in it)."""
    stages.delete(get_store(), current_auth(app), stageID)


@app.get("/v1/cdp/contacts/<contactID>/lifecycle-stage", middlewares=requires("viewer"), tags=STAGES)
def get_contact_lifecycle_stage(contactID: str) -> Data[models.ContactStage]:
    return Data(data=stages.contact_stage(get_store(), current_auth(app), contactID))


@app.put("/v1/cdp/contacts/<contactID>/lifecycle-stage", middlewares=requires("member"), tags=STAGES)
def set_contact_lifecycle_stage(contactID: str, body: Annotated[models.StageSet, Body()]) -> Data[models.ContactStage]:
    """Moves the contact to a stage (key or id; null clears it), recording the change in its history."""
    return Data(data=stages.set_contact_stage(get_store(), current_auth(app), contactID, body))


# Events and activity --------------------------------------------------------------------------------------------------
@app.post("/v1/cdp/events", middlewares=requires("member"), tags=EVENTS)
def ingest_events(body: Annotated[models.EventBatch, Body()]) -> Data[models.IngestResult]:
    """Up to 100 events; each counts once per `event_id` (a repeat is `duplicate`). An identity nobody owns yet
    creates the contact; an unknown `contact_id` or an identity conflict rejects that event only."""
    return Data(data=events.ingest(get_store(), current_auth(app), body))


@app.get("/v1/cdp/contacts/<contactID>/activity", middlewares=requires("viewer"), tags=EVENTS)
def contact_activity(
    contactID: str, limit: Limit = 20, cursor: Cursor = None, name: Annotated[str | None, Query(max_length=100)] = None
) -> ListData[models.Activity]:
    """Newest first."""
    items, next_cursor = events.contact_activity(
        get_store(), current_auth(app), contactID, limit=limit, cursor=cursor, name=name
    )
    return _page(items, limit, next_cursor)


@app.get("/v1/cdp/activity-log", middlewares=requires("viewer"), tags=EVENTS)
def activity_log(
    limit: Limit = 20,
    cursor: Cursor = None,
    name: Annotated[str | None, Query(max_length=100)] = None,
    contact_id: Annotated[str | None, Query(max_length=64)] = None,
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
@app.get("/v1/cdp/object-types", middlewares=requires("viewer"), tags=OBJECTS)
def list_object_types() -> ListData[models.ObjectType]:
    return whole_list(objects.list_types(get_store(), current_auth(app)))


@app.post("/v1/cdp/object-types", middlewares=requires("member"), tags=OBJECTS, status_code=201)
def create_object_type(body: Annotated[models.ObjectTypeCreate, Body()]) -> Data[models.ObjectType]:
    return Data(data=objects.create_type(get_store(), current_auth(app), body))


@app.get("/v1/cdp/object-types/<objectTypeID>", middlewares=requires("viewer"), tags=OBJECTS)
def get_object_type(objectTypeID: str) -> Data[models.ObjectType]:
    return Data(data=objects.get_type(get_store(), current_auth(app), objectTypeID))


@app.patch("/v1/cdp/object-types/<objectTypeID>", middlewares=requires("member"), tags=OBJECTS)
def update_object_type(objectTypeID: str, body: Annotated[models.ObjectTypeUpdate, Body()]) -> Data[models.ObjectType]:
    return Data(data=objects.update_type(get_store(), current_auth(app), objectTypeID, body))


@app.delete("/v1/cdp/object-types/<objectTypeID>", middlewares=requires("member"), tags=OBJECTS, status_code=204)
def delete_object_type(objectTypeID: str) -> None:
    """Only a type without records (409 otherwise)."""
    objects.delete_type(get_store(), current_auth(app), objectTypeID)


@app.get("/v1/cdp/object-types/<objectTypeID>/fields", middlewares=requires("viewer"), tags=OBJECTS)
def list_object_type_fields(objectTypeID: str) -> ListData[models.ObjectField]:
    return whole_list(objects.list_type_fields(get_store(), current_auth(app), objectTypeID))


@app.post("/v1/cdp/object-types/<objectTypeID>/fields", middlewares=requires("member"), tags=OBJECTS, status_code=201)
def add_object_type_field(objectTypeID: str, body: Annotated[models.FieldCreate, Body()]) -> Data[models.ObjectField]:
    return Data(data=objects.add_field(get_store(), current_auth(app), objectTypeID, body))


@app.post("/v1/cdp/object-types/<objectTypeID>/fields/reorder", middlewares=requires("member"), tags=OBJECTS)
def reorder_object_type_fields(
    objectTypeID: str, body: Annotated[models.FieldReorder, Body()]
) -> ListData[models.ObjectField]:
    """`field_ids`: every field id of the type, in the new order."""
    return whole_list(objects.reorder_fields(get_store(), current_auth(app), objectTypeID, body))


@app.get("/v1/cdp/object-types/<objectTypeID>/fields/<fieldID>", middlewares=requires("viewer"), tags=OBJECTS)
def get_object_type_field(objectTypeID: str, fieldID: str) -> Data[models.ObjectField]:
    return Data(data=objects.get_type_field(get_store(), current_auth(app), objectTypeID, fieldID))


@app.patch("/v1/cdp/object-types/<objectTypeID>/fields/<fieldID>", middlewares=requires("member"), tags=OBJECTS)
def update_object_type_field(
    objectTypeID: str, fieldID: str, body: Annotated[models.FieldUpdate, Body()]
) -> Data[models.ObjectField]:
    return Data(data=objects.update_field(get_store(), current_auth(app), objectTypeID, fieldID, body))


@app.delete(
    "/v1/cdp/object-types/<objectTypeID>/fields/<fieldID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
)
def delete_object_type_field(objectTypeID: str, fieldID: str) -> None:
    objects.delete_field(get_store(), current_auth(app), objectTypeID, fieldID)


# Contact objects ------------------------------------------------------------------------------------------------------
@app.get("/v1/cdp/contact-objects", middlewares=requires("viewer"), tags=OBJECTS)
def list_contact_objects(
    limit: Limit = 20,
    cursor: Cursor = None,
    object_type_id: Annotated[str | None, Query(max_length=64, description="type id or key")] = None,
    contact_id: Annotated[str | None, Query(max_length=64)] = None,
) -> ListData[models.ContactObject]:
    items, next_cursor = objects.list_objects(
        get_store(), current_auth(app), limit=limit, cursor=cursor, object_type_id=object_type_id, contact_id=contact_id
    )
    return _page(items, limit, next_cursor)


@app.post("/v1/cdp/contact-objects", middlewares=requires("member"), tags=OBJECTS, status_code=201)
def create_contact_object(body: Annotated[models.ObjectCreate, Body()]) -> Data[models.ContactObject]:
    """A record of an object type linked to a contact; emits `crm.record.created`."""
    return Data(data=objects.create_object(get_store(), current_auth(app), body))


@app.get("/v1/cdp/contact-objects/<objectID>", middlewares=requires("viewer"), tags=OBJECTS)
def get_contact_object(objectID: str) -> Data[models.ContactObject]:
    return Data(data=objects.get_object(get_store(), current_auth(app), objectID))


@app.patch("/v1/cdp/contact-objects/<objectID>", middlewares=requires("member"), tags=OBJECTS)
def update_contact_object(objectID: str, body: Annotated[models.ObjectUpdate, Body()]) -> Data[models.ContactObject]:
    """Properties merge key by key (null removes); emits `crm.record.updated` when something changed."""
    return Data(data=objects.update_object(get_store(), current_auth(app), objectID, body))


@app.delete("/v1/cdp/contact-objects/<objectID>", middlewares=requires("member"), tags=OBJECTS, status_code=204)
def delete_contact_object(objectID: str) -> None:
    crm.delete_object(get_store(), current_auth(app), objectID)


@app.get("/v1/cdp/contact-objects/<objectID>/comments", middlewares=requires("viewer"), tags=OBJECTS)
def list_contact_object_comments(objectID: str, limit: Limit = 20, cursor: Cursor = None) -> ListData[models.Comment]:
    """Oldest first."""
    items, next_cursor = crm.list_comments(get_store(), current_auth(app), objectID, limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


@app.post("/v1/cdp/contact-objects/<objectID>/comments", middlewares=requires("member"), tags=OBJECTS, status_code=201)
def add_contact_object_comment(objectID: str, body: Annotated[models.CommentCreate, Body()]) -> Data[models.Comment]:
    """Emits `crm.comment.created`."""
    return Data(data=crm.add_comment(get_store(), current_auth(app), objectID, body))


@app.delete(
    "/v1/cdp/contact-objects/<objectID>/comments/<commentID>",
    middlewares=requires("member"),
    tags=OBJECTS,
    status_code=204,
)
def delete_contact_object_comment(objectID: str, commentID: str) -> None:
    """Emits `crm.comment.deleted`."""
    crm.delete_comment(get_store(), current_auth(app), objectID, commentID)


@app.get("/v1/cdp/contact-objects/<objectID>/relationships", middlewares=requires("viewer"), tags=OBJECTS)
def list_contact_object_relationships(
    objectID: str, limit: Limit = 20, cursor: Cursor = None
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
)
def link_contact_object(
    objectID: str, relatedID: str, body: Annotated[models.RelationshipSet, Body()]
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
)
def unlink_contact_object(objectID: str, relatedID: str) -> None:
    """Emits `crm.relationship.unlinked` (404 when the records are not linked)."""
    crm.unlink(get_store(), current_auth(app), objectID, relatedID)


# Contacts imports -----------------------------------------------------------------------------------------------------
@app.post("/v1/cdp/imports", middlewares=requires("member"), tags=IMPORTS, status_code=201)
def create_contacts_import(body: Annotated[models.ImportCreate, Body()]) -> Data[models.ImportReport]:
    """Imports contacts from CSV or JSON lines: every row is validated (rejected rows are reported with their row
    number, field and message), valid rows are created or upserted by identity and committed in all-or-nothing
    batches of at most 100 items; `crm.import.committed` when something changed. `dry_run` only validates."""
    return Data(data=imports.run(get_store(), current_auth(app), body))


@app.get("/v1/cdp/imports", middlewares=requires("viewer"), tags=IMPORTS)
def list_contacts_imports(limit: Limit = 20, cursor: Cursor = None) -> ListData[models.ImportReport]:
    """Newest first."""
    items, next_cursor = imports.list_imports(get_store(), current_auth(app), limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


@app.get("/v1/cdp/imports/<importID>", middlewares=requires("viewer"), tags=IMPORTS)
def get_contacts_import(importID: str) -> Data[models.ImportReport]:
    """The import's report."""
    return Data(data=imports.get(get_store(), current_auth(app), importID))


# Segments -------------------------------------------------------------------------------------------------------------
@app.get("/v1/cdp/segments", middlewares=requires("viewer"), tags=SEGMENTS)
def list_segments() -> ListData[models.Segment]:
    return whole_list(segments.list_segments(get_store(), current_auth(app)))


@app.post("/v1/cdp/segments", middlewares=requires("member"), tags=SEGMENTS, status_code=201)
def create_segment(body: Annotated[models.SegmentCreate, Body()]) -> Data[models.Segment]:
    """Answers with the segment `building`; the `segment.build` job (`job_id`) fills the membership
    (`crm.list.entry_added` per member) and marks it `ready`."""
    return Data(data=segments.create(get_store(), current_auth(app), body))


@app.get("/v1/cdp/segments/<segmentID>", middlewares=requires("viewer"), tags=SEGMENTS)
def get_segment(segmentID: str) -> Data[models.Segment]:
    return Data(data=segments.get(get_store(), current_auth(app), segmentID))


@app.patch("/v1/cdp/segments/<segmentID>", middlewares=requires("member"), tags=SEGMENTS)
def update_segment(segmentID: str, body: Annotated[models.SegmentUpdate, Body()]) -> Data[models.Segment]:
    """A change of `rules` (or an empty body) starts a new build: `building` until its job is done; entry events for
    every change of membership."""
    return Data(data=segments.update(get_store(), current_auth(app), segmentID, body))


@app.delete("/v1/cdp/segments/<segmentID>", middlewares=requires("member"), tags=SEGMENTS, status_code=204)
def delete_segment(segmentID: str) -> None:
    segments.delete(get_store(), current_auth(app), segmentID)


@app.get("/v1/cdp/segments/<segmentID>/members", middlewares=requires("viewer"), tags=SEGMENTS)
def list_segment_members(segmentID: str, limit: Limit = 20, cursor: Cursor = None) -> ListData[models.SegmentMember]:
    items, next_cursor = segments.members(get_store(), current_auth(app), segmentID, limit=limit, cursor=cursor)
    return _page(items, limit, next_cursor)


# CDP templates ----------------------------------------------------------------------------------------------------
@app.get("/v1/cdp/templates", middlewares=requires("viewer"), tags=TEMPLATES)
def list_cdp_templates() -> ListData[models.Template]:
    """Built-in templates first, then the organization's own."""
    return whole_list(templates.list_templates(get_store(), current_auth(app)))


@app.post("/v1/cdp/templates", middlewares=requires("admin"), tags=TEMPLATES, status_code=201)
def create_cdp_template(body: Annotated[models.TemplateCreate, Body()]) -> Data[models.Template]:
    return Data(data=templates.create(get_store(), current_auth(app), body))


@app.get("/v1/cdp/templates/<templateID>", middlewares=requires("viewer"), tags=TEMPLATES)
def get_cdp_template(templateID: str) -> Data[models.Template]:
    return Data(data=templates.get(get_store(), current_auth(app), templateID))


@app.post("/v1/cdp/templates/<templateID>", middlewares=requires("admin"), tags=TEMPLATES)
def cdp_template_action(templateID: str, body: Annotated[models.TemplateAction, Body()]) -> Data[models.ApplyResult]:
    """`{"action": "apply"}`: creates the template's fields, stages and segments that do not exist yet."""
    return Data(data=templates.apply(get_store(), current_auth(app), templateID))


@app.patch("/v1/cdp/templates/<templateID>", middlewares=requires("admin"), tags=TEMPLATES)
def update_cdp_template(templateID: str, body: Annotated[models.TemplateUpdate, Body()]) -> Data[models.Template]:
    return Data(data=templates.update(get_store(), current_auth(app), templateID, body))


@app.delete("/v1/cdp/templates/<templateID>", middlewares=requires("admin"), tags=TEMPLATES, status_code=204)
def delete_cdp_template(templateID: str) -> None:
    templates.delete(get_store(), current_auth(app), templateID)


handler = make_handler(app)
