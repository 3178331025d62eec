"""Contacts: the canonical CRM record, identity resolution, notes, tags, consent, suppressions, blocking, merge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth, header
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.errors import ValidationFailed
from switchboard.models import DateTimeIn
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.contacts import children, erasure, models, phone_check, service
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    children = lazy_module("switchboard.contacts.children")
    erasure = lazy_module("switchboard.contacts.erasure")
    models = lazy_module("switchboard.contacts.models")
    phone_check = lazy_module("switchboard.contacts.phone_check")
    service = lazy_module("switchboard.contacts.service")

app = create_resolver()
# Path parameters, described once for every route of the group.
ContactID = Annotated[str, Path(description="the contact's id (`ct_…`)")]
NoteID = Annotated[str, Path(description="the note's id")]
TagID = Annotated[str, Path(description="the tag's id (`tag_…`)")]
CheckID = Annotated[str, Path(description="the phone check's id (`job_…`)")]
ChannelKindPath = Annotated[str, Path(description="a channel kind: `whatsapp`, `sms`, `email`, `instagram`, …")]
PhonePath = Annotated[
    str, Path(description="a phone number in any common form (`+14155552671`, `0014155552671`, `14155552671`)")
]
TAGS = ["contacts"]


def _error(description: str, code: str, message: str, details: list[dict[str, object]]) -> dict[str, object]:
    """A documented error answer with its example (the route's own; the document adds the other statuses)."""
    example = {"error": {"code": code, "message": message, "details": details, "request_id": "req_01jd8x7q2w3e4r"}}
    return {
        "description": description,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/ErrorEnvelope"},
                "examples": {code: {"value": example}},
            }
        },
    }


IDENTITY_CONFLICT = _error(
    "The identities belong to different contacts",
    "identity_conflict",
    "The identifiers belong to different contacts.",
    [{"contact_ids": ["ct_01jd8x1k2m3n4p5q6r7s8t9v0w", "ct_01jd8x9z8y7x6w5v4t3s2r1q0p"]}],
)


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
    responses={
        200: {"description": "An existing contact owning one of the identities was updated"},
        409: IDENTITY_CONFLICT,
    },
    summary="Create or upsert a contact",
    description=(
        "Creates a contact (201) or, when exactly one existing contact already owns one of the "
        "given identities (top-level `phone` / `email` count as identities), updates that contact"
        " and answers 200. Identities owned by two different contacts give 409 "
        "`identity_conflict` with the contact ids in `details`; an `attributes` value that "
        "does not fit its custom field gives 400 `validation_failed` (keys no field defines are "
        "kept as given). Role: member or above."
    ),
)
def create_contact(body: Annotated[models.ContactCreate, Body()]) -> Response[Data[models.Contact]]:
    """Creates a contact, or upserts the single contact that already owns one of the identities (200)."""
    contact, created = service.upsert(get_store(), current_auth(app), body)
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=contact).model_dump(mode="json"),
    )


@app.get(
    "/v1/contacts",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List contacts",
    description=(
        "Lists the organization's contacts (newest change first unless `q` searches), filtered by `tag` (id or"
        " name), `lifecycle_stage` (a stage key), `updated_since` (ISO 8601) or `q` (a name, "
        "e-mail or phone prefix). Cursor-paginated: pass `meta.cursor` back as `cursor` while "
        "`meta.has_more` is true. A cursor used with another query or organization gives 400 "
        "`validation_failed`. Role: viewer or above."
    ),
)
def list_contacts(
    limit: Annotated[int, Query(ge=1, le=100, description="page size")] = 20,
    cursor: Annotated[
        str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
    ] = None,
    tag: Annotated[str | None, Query(max_length=64, description="tag id or name")] = None,
    lifecycle_stage: Annotated[str | None, Query(max_length=64, description="a lifecycle stage key")] = None,
    updated_since: Annotated[
        DateTimeIn | None, Query(description="only contacts changed at or after this time (RFC 3339)")
    ] = None,
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


@app.post(
    "/v1/contacts/resolve",
    middlewares=requires("viewer"),
    tags=TAGS,
    responses={
        200: {"description": "The contact that owns the identities"},
        404: _error(
            "No contact owns these identities", "not_found", "No stored contact matches these identifiers.", []
        ),
        409: IDENTITY_CONFLICT,
    },
    summary="Resolve a contact by its identities",
    description=(
        "Canonical identity resolution: finds the single contact owning the given identifiers "
        "(phones in any common form, `whatsapp` chat ids and `wa_id` normalise to the same "
        "number). 200 with the contact; 404 `not_found` when none matches; 409 "
        '`identity_conflict` with `details: [{"contact_ids": [...]}]` when they point at '
        "different contacts; 400 `validation_failed` for an unknown type. Role: viewer or above."
    ),
)
def resolve_contact(body: Annotated[models.ResolveRequest, Body()]) -> Data[models.Contact]:
    """Canonical identity resolution: 200 with the contact, 404 when none matches, 409 `identity_conflict`."""
    return Data(data=service.view(service.resolve(get_store(), current_auth(app), body.identifiers)))


@app.post(
    "/v1/contacts/lookup",
    middlewares=requires("viewer"),
    tags=TAGS,
    deprecated=True,
    summary="Resolve a contact (alias)",
    description=(
        "Deprecated alias of `POST /v1/contacts/resolve`, with the same body, answers and errors."
        " Role: viewer or above."
    ),
)
def lookup_contact(body: Annotated[models.ResolveRequest, Body()]) -> Data[models.Contact]:
    """Compatibility alias of `POST /v1/contacts/resolve`."""
    return resolve_contact(body)


@app.get(
    "/v1/contacts/phone/<phone>",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="Find a contact by phone",
    description=(
        "Finds the contact owning a phone number given in any common form (`+14155552671`, "
        "`0014155552671`, `14155552671`; a national form with the organization's `default_phone_region`). 400 "
        "`validation_failed` when it is not a valid number; 404 `not_found` when no contact owns it. Role: viewer "
        "or above."
    ),
)
def contact_by_phone(phone: PhonePath) -> Data[models.Contact]:
    """Any common phone form: `+14155552671`, `0014155552671`, `14155552671`."""
    return Data(data=service.by_phone(get_store(), current_auth(app), phone))


@app.post(
    "/v1/contacts/block",
    middlewares=requires("member"),
    tags=TAGS,
    summary="Block a contact",
    description=(
        "Blocks a contact named by `contact_id` or by an `identifier`: sends to it are refused "
        "with 409 `recipient_blocked`. Idempotent; answers the contact. 404 `not_found` when the "
        "contact is not in your organization. Role: member or above."
    ),
)
def block_contact(body: Annotated[models.BlockRequest, Body()]) -> Data[models.Contact]:
    return Data(data=children.set_blocked(get_store(), current_auth(app), body, True))


@app.post(
    "/v1/contacts/unblock",
    middlewares=requires("member"),
    tags=TAGS,
    summary="Unblock a contact",
    description=(
        "Lifts a block set with `POST /v1/contacts/block`. Idempotent; answers the contact. 404 "
        "`not_found` when the contact is not in your organization. Role: member or above."
    ),
)
def unblock_contact(body: Annotated[models.BlockRequest, Body()]) -> Data[models.Contact]:
    return Data(data=children.set_blocked(get_store(), current_auth(app), body, False))


@app.post(
    "/v1/contacts/phone-checks",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=202,
    summary="Check the stored phone numbers",
    description=(
        "Starts a background check of every phone, WhatsApp and wa_id identity of the organization's contacts "
        "against today's phone rules (a valid number for its country, libphonenumber): numbers stored before "
        "those rules, or reported by a provider, may not pass. Nothing is changed; the refused numbers are listed "
        "by `GET /v1/contacts/phone-checks/{checkID}/numbers`. Answers 202 with the check (`status: running`). "
        "Role: member or above."
    ),
)
def start_phone_check() -> Data[models.PhoneCheck]:
    return Data(data=phone_check.start(get_store(), current_auth(app)))


@app.get(
    "/v1/contacts/phone-checks/<checkID>",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="Get a phone check",
    description=(
        "The check's status and counts so far. 404 `not_found` when it is not a check of your organization. "
        "Role: viewer or above."
    ),
)
def get_phone_check(checkID: CheckID) -> Data[models.PhoneCheck]:
    return Data(data=phone_check.get(get_store(), current_auth(app), checkID))


@app.get(
    "/v1/contacts/phone-checks/<checkID>/numbers",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List the numbers a phone check refused",
    description=(
        "Each stored number the check found invalid, with its contact and why. The list grows while the check "
        "runs. Cursor-paginated: pass `meta.cursor` back as `cursor` while `meta.has_more` is true. 404 "
        "`not_found` when it is not a check of your organization. Role: viewer or above."
    ),
)
def list_phone_check_numbers(
    checkID: CheckID,
    limit: Annotated[int, Query(ge=1, le=100, description="page size")] = 50,
    cursor: Annotated[
        str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
    ] = None,
) -> ListData[models.InvalidNumber]:
    found, next_cursor = phone_check.list_invalid(get_store(), current_auth(app), checkID, limit=limit, cursor=cursor)
    return cursor_list(found, limit, next_cursor)


@app.get(
    "/v1/contacts/<contactID>",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="Get a contact",
    description=(
        "Reads one contact with its identities, tags and custom attributes. 404 `not_found` when "
        "the contact is not in your organization. Role: viewer or above."
    ),
)
def get_contact(contactID: ContactID) -> Data[models.Contact]:
    return Data(data=service.get(get_store(), current_auth(app), contactID))


@app.patch(
    "/v1/contacts/<contactID>",
    middlewares=requires("member"),
    tags=TAGS,
    summary="Update a contact",
    description=(
        "Changes the given profile fields; absent fields stay. A new `phone` / `email` becomes an"
        " identity (409 `identity_conflict` when another contact owns it). Optimistic "
        "concurrency: send `If-Match: <version>` to update only the version you read (409 "
        "`conflict` with `current_version` otherwise). 404 `not_found` when the contact is not in"
        " your organization. Role: member or above."
    ),
)
def update_contact(contactID: ContactID, body: Annotated[models.ContactUpdate, Body()]) -> Data[models.Contact]:
    """Optimistic concurrency: send `If-Match: <version>` to update only the version you read."""
    return Data(data=service.update(get_store(), current_auth(app), contactID, body, _if_match()))


@app.delete(
    "/v1/contacts/<contactID>",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=204,
    summary="Delete a contact",
    description=(
        "Deletes the contact with its identities (free for reuse at once), notes, tags, consents "
        "and suppressions; the rest of its data (activity, segment memberships, objects) is "
        "erased by a background job. 404 `not_found` when the contact is not in your "
        "organization. Role: member or above."
    ),
)
def delete_contact(contactID: ContactID) -> None:
    """Deletes the contact with its identities (free for reuse), notes, tags, consents and suppressions."""
    erasure.delete(get_store(), current_auth(app), contactID)


@app.post(
    "/v1/contacts/<contactID>/merge",
    middlewares=requires("member"),
    tags=TAGS,
    summary="Merge two contacts",
    description=(
        "Moves identities, notes, tags, consents and suppressions of "
        "`from_contact_id` into the contact in the path, then deletes it. 400 `validation_failed`"
        " when both ids are the same; 409 `conflict` when the merged contact changes meanwhile "
        "(retry). 404 `not_found` when the contact is not in your organization. Role: member or "
        "above."
    ),
)
def merge_contacts(contactID: ContactID, body: Annotated[models.MergeRequest, Body()]) -> Data[models.Contact]:
    """Moves everything of `from_contact_id` into this contact and deletes it."""
    return Data(data=children.merge(get_store(), current_auth(app), contactID, body))


@app.get(
    "/v1/contacts/<contactID>/identities",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List a contact's identities",
    description=(
        "All identities the contact owns (not paginated). 404 `not_found` when the contact is not"
        " in your organization. Role: viewer or above."
    ),
)
def list_identities(contactID: ContactID) -> ListData[models.Identity]:
    return whole_list(service.identities(get_store(), current_auth(app), contactID))


@app.get(
    "/v1/contacts/<contactID>/notes",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List a contact's notes",
    description=(
        "The contact's notes, newest first. Cursor-paginated: pass `meta.cursor` back as `cursor`"
        " while `meta.has_more` is true. 404 `not_found` when the contact is not in your "
        "organization. Role: viewer or above."
    ),
)
def list_notes(
    contactID: ContactID,
    limit: Annotated[int, Query(ge=1, le=100, description="page size")] = 20,
    cursor: Annotated[
        str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
    ] = None,
) -> ListData[models.Note]:
    notes, next_cursor = children.list_notes(get_store(), current_auth(app), contactID, limit, cursor)
    return cursor_list(notes, limit, next_cursor)


@app.post(
    "/v1/contacts/<contactID>/notes",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=201,
    summary="Add a note to a contact",
    description=(
        "Adds a free-text note; its author is the caller. 404 `not_found` when the contact is not"
        " in your organization. Role: member or above."
    ),
)
def create_note(contactID: ContactID, body: Annotated[models.NoteIn, Body()]) -> Data[models.Note]:
    return Data(data=children.create_note(get_store(), current_auth(app), contactID, body))


@app.get(
    "/v1/contacts/<contactID>/notes/<noteID>",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="Get a note",
    description=(
        "Reads one note of the contact. 404 `not_found` for an unknown contact or note. Role: viewer or above."
    ),
)
def get_note(contactID: ContactID, noteID: NoteID) -> Data[models.Note]:
    return Data(data=children.get_note(get_store(), current_auth(app), contactID, noteID))


@app.patch(
    "/v1/contacts/<contactID>/notes/<noteID>",
    middlewares=requires("member"),
    tags=TAGS,
    summary="Edit a note",
    description=("Replaces the note's text. 404 `not_found` for an unknown contact or note. Role: member or above."),
)
def update_note(contactID: ContactID, noteID: NoteID, body: Annotated[models.NoteIn, Body()]) -> Data[models.Note]:
    return Data(data=children.update_note(get_store(), current_auth(app), contactID, noteID, body))


@app.delete(
    "/v1/contacts/<contactID>/notes/<noteID>",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=204,
    summary="Delete a note",
    description="Deletes one note. 404 `not_found` for an unknown contact or note. Role: member or above.",
)
def delete_note(contactID: ContactID, noteID: NoteID) -> None:
    children.delete_note(get_store(), current_auth(app), contactID, noteID)


@app.get(
    "/v1/contacts/<contactID>/tags",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List a contact's tags",
    description=(
        "The tags assigned to the contact (not paginated). 404 `not_found` when the contact is "
        "not in your organization. Role: viewer or above."
    ),
)
def list_contact_tags(contactID: ContactID) -> ListData[models.AssignedTag]:
    return whole_list(children.list_contact_tags(get_store(), current_auth(app), contactID))


@app.post(
    "/v1/contacts/<contactID>/tags",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=201,
    summary="Tag a contact",
    description=(
        "Assigns a tag by `tag_id`, or by `name` (a new name joins the `/v1/contact-tags` "
        "catalogue). 409 `conflict` when the contact already has the tag; 404 `not_found` for an "
        "unknown contact or tag id. Role: member or above."
    ),
)
def assign_tag(contactID: ContactID, body: Annotated[models.TagAssign, Body()]) -> Data[models.AssignedTag]:
    """`{"name"}` (a new name joins the catalogue) or `{"tag_id"}`."""
    return Data(data=children.assign_tag(get_store(), current_auth(app), contactID, body))


@app.delete(
    "/v1/contacts/<contactID>/tags/<tagID>",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=204,
    summary="Untag a contact",
    description=(
        "Removes a tag from the contact. 404 `not_found` when the contact does not have it. Role: member or above."
    ),
)
def unassign_tag(contactID: ContactID, tagID: TagID) -> None:
    children.unassign_tag(get_store(), current_auth(app), contactID, tagID)


@app.put(
    "/v1/contacts/<contactID>/consent/<channel>",
    middlewares=requires("member"),
    tags=TAGS,
    summary="Set a contact's consent for a channel",
    description=(
        "Upserts the consent state (`opted_in`, `opted_out`, `unknown`) for a channel kind "
        "(`whatsapp`, `sms`, `email`, …); every change is kept in `history`. Sends on a channel "
        "the contact opted out of are refused with 409 `recipient_opted_out`. 400 "
        "`validation_failed` for a malformed channel kind. 404 `not_found` when the contact is "
        "not in your organization. Role: member or above."
    ),
)
def put_consent(
    contactID: ContactID, channel: ChannelKindPath, body: Annotated[models.ConsentIn, Body()]
) -> Data[models.Consent]:
    """Upserts the consent state for a channel kind (`whatsapp`, `sms`, `email`, …); history is kept."""
    if not (2 <= len(channel) <= 32 and channel.replace("_", "").isalnum() and channel[0].isalpha()):
        raise ValidationFailed.field("path.channel", "must be a channel kind such as whatsapp, sms or email")
    return Data(data=children.put_consent(get_store(), current_auth(app), contactID, channel.lower(), body))


@app.get(
    "/v1/contacts/<contactID>/consents",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List a contact's consents",
    description=(
        "One entry per channel kind with its history (not paginated). 404 `not_found` when the "
        "contact is not in your organization. Role: viewer or above."
    ),
)
def list_consents(contactID: ContactID) -> ListData[models.Consent]:
    return whole_list(children.list_consents(get_store(), current_auth(app), contactID))


@app.get(
    "/v1/contacts/<contactID>/suppressions",
    middlewares=requires("viewer"),
    tags=TAGS,
    summary="List a contact's suppressions",
    description=(
        "Suppressions per channel kind, with `active` false once `expires_at` has passed (not "
        "paginated). 404 `not_found` when the contact is not in your organization. Role: viewer "
        "or above."
    ),
)
def list_suppressions(contactID: ContactID) -> ListData[models.Suppression]:
    return whole_list(children.list_suppressions(get_store(), current_auth(app), contactID))


@app.post(
    "/v1/contacts/<contactID>/suppressions",
    middlewares=requires("member"),
    tags=TAGS,
    status_code=201,
    responses={200: {"description": "The suppression for that channel was updated"}},
    summary="Suppress a contact on a channel",
    description=(
        "Creates (201) or replaces (200) the suppression of the contact for a channel kind; while"
        " active, sends on that channel are refused with 409 `recipient_suppressed`. 404 "
        "`not_found` when the contact is not in your organization. Role: member or above."
    ),
)
def put_suppression(
    contactID: ContactID, body: Annotated[models.SuppressionIn, Body()]
) -> Response[Data[models.Suppression]]:
    item, created = children.put_suppression(get_store(), current_auth(app), contactID, body)
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=item).model_dump(mode="json"),
    )


TAG_TAGS = ["contact-tags"]


@app.get(
    "/v1/contact-tags",
    middlewares=requires("viewer"),
    tags=TAG_TAGS,
    summary="List contact tags",
    description="The organization's contact-tag catalogue (not paginated). Role: viewer or above.",
)
def list_tags() -> ListData[models.Tag]:
    return whole_list(children.list_tags(get_store(), current_auth(app)))


@app.post(
    "/v1/contact-tags",
    middlewares=requires("member"),
    tags=TAG_TAGS,
    status_code=201,
    summary="Create a contact tag",
    description=(
        "Adds a tag to the catalogue. 409 `conflict` when the name is taken (case-insensitive). Role: member or above."
    ),
)
def create_tag(body: Annotated[models.TagCreate, Body()]) -> Data[models.Tag]:
    return Data(data=children.create_tag(get_store(), current_auth(app), body))


@app.get(
    "/v1/contact-tags/<tagID>",
    middlewares=requires("viewer"),
    tags=TAG_TAGS,
    summary="Get a contact tag",
    description=("Reads one tag. 404 `not_found` when it is not in your organization. Role: viewer or above."),
)
def get_tag(tagID: TagID) -> Data[models.Tag]:
    return Data(data=children.get_tag(get_store(), current_auth(app), tagID))


@app.patch(
    "/v1/contact-tags/<tagID>",
    middlewares=requires("member"),
    tags=TAG_TAGS,
    summary="Rename or recolour a contact tag",
    description=(
        "Renaming keeps every assignment; the `tag.cascade` job named in `job_id` gives the "
        "tagged contacts the new name. 409 `conflict` when the new name is taken; 404 `not_found`"
        " for an unknown tag. Role: member or above."
    ),
)
def update_tag(tagID: TagID, body: Annotated[models.TagUpdate, Body()]) -> Data[models.Tag]:
    """Renaming keeps every assignment; the `tag.cascade` job (`job_id`) gives the tagged contacts the new name."""
    return Data(data=children.update_tag(get_store(), current_auth(app), tagID, body))


@app.delete(
    "/v1/contact-tags/<tagID>",
    middlewares=requires("member"),
    tags=TAG_TAGS,
    status_code=204,
    summary="Delete a contact tag",
    description=(
        "Removes the tag from the catalogue at once; the `tag.cascade` job removes it from every "
        "contact. 404 `not_found` for an unknown tag. Role: member or above."
    ),
)
def delete_tag(tagID: TagID) -> None:
    """Removes the tag from the catalogue at once; the `tag.cascade` job removes it from every contact."""
    children.delete_tag(get_store(), current_auth(app), tagID)


handler = make_handler(app)
