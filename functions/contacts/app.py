"""Contacts: the canonical CRM record, identity resolution, notes, tags, consent, suppressions, blocking, merge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth, header
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.errors import ValidationFailed
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.contacts import children, erasure, models, service
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    children = lazy_module("switchboard.contacts.children")
    erasure = lazy_module("switchboard.contacts.erasure")
    models = lazy_module("switchboard.contacts.models")
    service = lazy_module("switchboard.contacts.service")

app = create_resolver()
TAGS = ["contacts"]


def _if_match() -> int | None:
    raw = header(app, "If-Match")
    if raw is None:
        return None
    value = raw.strip().removeprefix("W/").strip('"')
    if not value.isdigit():
        raise ValidationFailed.field("headers.if-match", "must be the contact's version number")
    return int(value)


@app.post(
    "/v1/contacts",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=201,
    responses={200: {"description": "An existing contact owning one of the identities was updated"}},
)
def create_contact(body: Annotated[models.ContactCreate, Body()]) -> Response[Data[models.Contact]]:
    """Creates a contact, or upserts the single contact that already owns one of the identities (200)."""
    contact, created = service.upsert(get_store(), current_auth(app), body)
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=contact).model_dump(mode="json"),
    )


@app.get("/v1/contacts", middlewares=requires("viewer"), tags=TAGS)
def list_contacts(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    tag: Annotated[str | None, Query(max_length=64, description="tag id or name")] = None,
    lifecycle_stage: Annotated[str | None, Query(max_length=64)] = None,
    updated_since: Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}T")] = None,
    q: Annotated[str | None, Query(min_length=1, max_length=100, description="name, e-mail or phone prefix")] = None,
) -> ListData[models.Contact]:
    items, next_cursor = service.list_contacts(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        tag=tag,
        lifecycle_stage=lifecycle_stage,
        updated_since=updated_since,
        q=q,
    )
    return cursor_list(items, limit, next_cursor)


@app.post("/v1/contacts/resolve", middlewares=requires("viewer"), tags=TAGS)
def resolve_contact(body: Annotated[models.ResolveRequest, Body()]) -> Data[models.Contact]:
    """Canonical identity resolution: 200 with the contact, 404 when none matches, 409 `identity_conflict`."""
    return Data(data=service.view(service.resolve(get_store(), current_auth(app), body.identifiers)))


@app.post("/v1/contacts/lookup", middlewares=requires("viewer"), tags=TAGS, deprecated=True)
def lookup_contact(body: Annotated[models.ResolveRequest, Body()]) -> Data[models.Contact]:
    """Compatibility alias of `POST /v1/contacts/resolve`."""
    return resolve_contact(body)


@app.get("/v1/contacts/phone/<phone>", middlewares=requires("viewer"), tags=TAGS)
def contact_by_phone(phone: str) -> Data[models.Contact]:
    """Any common phone form: `+15551234567`, `0015551234567`, `15551234567`."""
    return Data(data=service.by_phone(get_store(), current_auth(app), phone))


@app.post("/v1/contacts/block", middlewares=requires("member"), tags=TAGS)
def block_contact(body: Annotated[models.BlockRequest, Body()]) -> Data[models.Contact]:
    return Data(data=children.set_blocked(get_store(), current_auth(app), body, True))


@app.post("/v1/contacts/unblock", middlewares=requires("member"), tags=TAGS)
def unblock_contact(body: Annotated[models.BlockRequest, Body()]) -> Data[models.Contact]:
    return Data(data=children.set_blocked(get_store(), current_auth(app), body, False))


@app.get("/v1/contacts/<contactID>", middlewares=requires("viewer"), tags=TAGS)
def get_contact(contactID: str) -> Data[models.Contact]:
    return Data(data=service.get(get_store(), current_auth(app), contactID))


@app.patch("/v1/contacts/<contactID>", middlewares=requires("member"), tags=TAGS)
def update_contact(contactID: str, body: Annotated[models.ContactUpdate, Body()]) -> Data[models.Contact]:
    """Optimistic concurrency: send `If-Match: <version>` to update only the version you read."""
    return Data(data=service.update(get_store(), current_auth(app), contactID, body, _if_match()))


@app.delete("/v1/contacts/<contactID>", middlewares=requires("member"), tags=TAGS, status_code=204)
def delete_contact(contactID: str) -> None:
    """Deletes the contact with its identities (free for reuse), notes, tags, consents and suppressions."""
    erasure.delete(get_store(), current_auth(app), contactID)


@app.post("/v1/contacts/<contactID>/merge", middlewares=requires("member"), tags=TAGS)
def merge_contacts(contactID: str, body: Annotated[models.MergeRequest, Body()]) -> Data[models.Contact]:
    """Moves everything of `from_contact_id` into this contact and deletes it."""
    return Data(data=children.merge(get_store(), current_auth(app), contactID, body))


@app.get("/v1/contacts/<contactID>/identities", middlewares=requires("viewer"), tags=TAGS)
def list_identities(contactID: str) -> ListData[models.Identity]:
    return whole_list(service.identities(get_store(), current_auth(app), contactID))


@app.get("/v1/contacts/<contactID>/notes", middlewares=requires("viewer"), tags=TAGS)
def list_notes(
    contactID: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[models.Note]:
    notes, next_cursor = children.list_notes(get_store(), current_auth(app), contactID, limit, cursor)
    return cursor_list(notes, limit, next_cursor)


@app.post("/v1/contacts/<contactID>/notes", middlewares=requires("member"), tags=TAGS, status_code=201)
def create_note(contactID: str, body: Annotated[models.NoteIn, Body()]) -> Data[models.Note]:
    return Data(data=children.create_note(get_store(), current_auth(app), contactID, body))


@app.get("/v1/contacts/<contactID>/notes/<noteID>", middlewares=requires("viewer"), tags=TAGS)
def get_note(contactID: str, noteID: str) -> Data[models.Note]:
    return Data(data=children.get_note(get_store(), current_auth(app), contactID, noteID))


@app.patch("/v1/contacts/<contactID>/notes/<noteID>", middlewares=requires("member"), tags=TAGS)
def update_note(contactID: str, noteID: str, body: Annotated[models.NoteIn, Body()]) -> Data[models.Note]:
    return Data(data=children.update_note(get_store(), current_auth(app), contactID, noteID, body))


@app.delete("/v1/contacts/<contactID>/notes/<noteID>", middlewares=requires("member"), tags=TAGS, status_code=204)
def delete_note(contactID: str, noteID: str) -> None:
    children.delete_note(get_store(), current_auth(app), contactID, noteID)


@app.get("/v1/contacts/<contactID>/tags", middlewares=requires("viewer"), tags=TAGS)
def list_contact_tags(contactID: str) -> ListData[models.AssignedTag]:
    return whole_list(children.list_contact_tags(get_store(), current_auth(app), contactID))


@app.post("/v1/contacts/<contactID>/tags", middlewares=requires("member"), tags=TAGS, status_code=201)
def assign_tag(contactID: str, body: Annotated[models.TagAssign, Body()]) -> Data[models.AssignedTag]:
    """`{"name"}` (a new name joins the catalogue) or `{"tag_id"}`."""
    return Data(data=children.assign_tag(get_store(), current_auth(app), contactID, body))


@app.delete("/v1/contacts/<contactID>/tags/<tagID>", middlewares=requires("member"), tags=TAGS, status_code=204)
def unassign_tag(contactID: str, tagID: str) -> None:
    children.unassign_tag(get_store(), current_auth(app), contactID, tagID)


@app.put("/v1/contacts/<contactID>/consent/<channel>", middlewares=requires("member"), tags=TAGS)
def put_consent(contactID: str, channel: str, body: Annotated[models.ConsentIn, Body()]) -> Data[models.Consent]:
    """Upserts the consent state for a channel kind (`whatsapp`, `sms`, `email`, …); history is kept."""
    if not (2 <= len(channel) <= 32 and channel.replace("_", "").isalnum() and channel[0].isalpha()):
        raise ValidationFailed.field("path.channel", "must be a channel kind such as whatsapp, sms or email")
    return Data(data=children.put_consent(get_store(), current_auth(app), contactID, channel.lower(), body))


@app.get("/v1/contacts/<contactID>/consents", middlewares=requires("viewer"), tags=TAGS)
def list_consents(contactID: str) -> ListData[models.Consent]:
    return whole_list(children.list_consents(get_store(), current_auth(app), contactID))


@app.get("/v1/contacts/<contactID>/suppressions", middlewares=requires("viewer"), tags=TAGS)
def list_suppressions(contactID: str) -> ListData[models.Suppression]:
    return whole_list(children.list_suppressions(get_store(), current_auth(app), contactID))


@app.post(
    "/v1/contacts/<contactID>/suppressions",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=201,
    responses={200: {"description": "The suppression for that channel was updated"}},
)
def put_suppression(
    contactID: str, body: Annotated[models.SuppressionIn, Body()]
) -> Response[Data[models.Suppression]]:
    item, created = children.put_suppression(get_store(), current_auth(app), contactID, body)
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=item).model_dump(mode="json"),
    )


TAG_TAGS = ["contact-tags"]


@app.get("/v1/contact-tags", middlewares=requires("viewer"), tags=TAG_TAGS)
def list_tags() -> ListData[models.Tag]:
    return whole_list(children.list_tags(get_store(), current_auth(app)))


@app.post("/v1/contact-tags", middlewares=requires("member"), tags=TAG_TAGS, status_code=201)
def create_tag(body: Annotated[models.TagCreate, Body()]) -> Data[models.Tag]:
    return Data(data=children.create_tag(get_store(), current_auth(app), body))


@app.get("/v1/contact-tags/<tagID>", middlewares=requires("viewer"), tags=TAG_TAGS)
def get_tag(tagID: str) -> Data[models.Tag]:
    return Data(data=children.get_tag(get_store(), current_auth(app), tagID))


@app.patch("/v1/contact-tags/<tagID>", middlewares=requires("member"), tags=TAG_TAGS)
def update_tag(tagID: str, body: Annotated[models.TagUpdate, Body()]) -> Data[models.Tag]:
    """Renaming keeps every assignment; the `tag.cascade` job (`job_id`) gives the tagged contacts the new name."""
    return Data(data=children.update_tag(get_store(), current_auth(app), tagID, body))


@app.delete("/v1/contact-tags/<tagID>", middlewares=requires("member"), tags=TAG_TAGS, status_code=204)
def delete_tag(tagID: str) -> None:
    """Removes the tag from the catalogue at once; the `tag.cascade` job removes it from every contact."""
    children.delete_tag(get_store(), current_auth(app), tagID)


handler = make_handler(app)
