"""Contact resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from switchboard.models import BaseModel, DateTimeIn, Name, Storable, Strict, Timestamp

ResolveType = Literal[
    "contact_id", "phone", "whatsapp", "wa_id", "email", "external_id", "instagram", "whatsapp_user_id"
]
IdentityTypeIn = Literal["phone", "whatsapp", "wa_id", "email", "external_id", "instagram", "whatsapp_user_id"]
ConsentStatus = Literal["opted_in", "opted_out", "unknown"]
ChannelKind = Field(pattern=r"^[a-z][a-z0-9_]{1,31}$", description="channel kind: whatsapp, sms, email, instagram, …")
CONTACT_ID = "ct_01jd8x1k2m3n4p5q6r7s8t9v0w"
CONTACT_EXAMPLE: dict[str, Any] = {
    "id": CONTACT_ID,
    "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
    "name": "Ada Lovelace",
    "first_name": None,
    "last_name": None,
    "email": "ada@example.com",
    "phone": "14155552671",
    "avatar_url": None,
    "company": "Analytical Engines Ltd",
    "lifecycle_stage": "lead",
    "attributes": {"plan": "pro"},
    "tags": ["vip"],
    "identities": [
        {
            "type": "phone",
            "value": "14155552671",
            "source": None,
            "channel_id": None,
            "created_at": "2026-11-21T10:00:00.000Z",
        },
        {
            "type": "email",
            "value": "ada@example.com",
            "source": None,
            "channel_id": None,
            "created_at": "2026-11-21T10:00:00.000Z",
        },
    ],
    "blocked": False,
    "version": 1,
    "created_at": "2026-11-21T10:00:00.000Z",
    "updated_at": "2026-11-21T10:00:00.000Z",
}


class IdentityIn(Strict):
    """An identity to attach to the contact: a phone, a WhatsApp chat id, an e-mail, an external id, …"""

    openapi_examples = ({"type": "external_id", "value": "cus_8812", "source": "shopify"},)
    type: IdentityTypeIn = Field(description="`phone`, `whatsapp` and `wa_id` normalise to the same number")
    value: str = Field(min_length=1, max_length=320, description="any common form; stored normalised")
    source: str | None = Field(
        default=None, min_length=1, max_length=64, description="the system the id comes from (`external_id`)"
    )
    channel_id: str | None = Field(default=None, max_length=64, description="the channel this identity was seen on")


class Identity(BaseModel):
    """An identity a contact owns: at most one contact of the organization owns a given identity."""

    openapi_examples = (
        {
            "type": "phone",
            "value": "14155552671",
            "source": None,
            "channel_id": None,
            "created_at": "2026-11-21T10:00:00.000Z",
        },
    )
    type: IdentityTypeIn = Field(description="`phone`, `whatsapp` and `wa_id` hold the same normalised number")
    value: str = Field(description="normalised: phone digits with country code, lower-cased e-mail and handles")
    source: str | None = Field(default=None, description="the system of an `external_id`")
    channel_id: str | None = None
    created_at: Timestamp


class Contact(BaseModel):
    """The canonical CRM record of a person or business the organization talks to, with its identities. `version`
    grows on every change: send it back in `If-Match` to update only the version you read."""

    openapi_examples = (CONTACT_EXAMPLE,)
    id: str = Field(description="`ct_…`")
    organization_id: str = Field(description="the organization that owns the contact (`org_…`)")
    name: str | None = Field(default=None, description="display name")
    first_name: str | None = Field(default=None, description="given name")
    last_name: str | None = Field(default=None, description="family name")
    email: str | None = Field(default=None, description="the primary e-mail identity, lower-cased")
    phone: str | None = Field(default=None, description="the primary phone: digits with country code, no `+`")
    avatar_url: str | None = Field(default=None, description="a picture of the contact (http or https URL)")
    company: str | None = Field(default=None, description="the company the contact works for")
    lifecycle_stage: str | None = Field(
        default=None,
        description="the key of one of the organization's lifecycle stages (`/v1/cdp/lifecycle-stages`); open-ended",
    )
    attributes: dict[str, Any] = Field(default_factory=dict, description="custom field values by field key")
    tags: list[str] = Field(default_factory=list, description="names of the assigned tags")
    identities: list[Identity] = Field(default_factory=list, description="every identity the contact owns")
    blocked: bool = Field(default=False, description="a blocked contact gets no messages (409 `recipient_blocked`)")
    version: int
    created_at: Timestamp
    updated_at: Timestamp


# At most 100 keys (`maxProperties`): the bound sits on the object itself, not on the optional around it.
Attributes = Annotated[dict[str, str | int | float | bool | list[str] | None], Field(max_length=100), Storable]


class ContactFields(Strict):
    """The profile fields a create or an update may set (strings are trimmed)."""

    name: Name | None = Field(default=None, max_length=200, description="display name")
    first_name: Name | None = Field(default=None, max_length=100, description="given name")
    last_name: Name | None = Field(default=None, max_length=100, description="family name")
    phone: str | None = Field(
        default=None, min_length=3, max_length=40, description="any common form; becomes a `phone` identity too"
    )
    email: str | None = Field(default=None, min_length=3, max_length=320, description="becomes an `email` identity too")
    company: Name | None = Field(default=None, max_length=200, description="the company the contact works for")
    avatar_url: str | None = Field(
        default=None, max_length=2048, pattern=r"^https?://", description="a picture of the contact (http or https URL)"
    )
    lifecycle_stage: str | None = Field(default=None, max_length=64, description="a lifecycle stage key")
    attributes: Attributes | None = Field(
        default=None, description="custom field values by key (at most 100); checked against `/v1/cdp/custom-fields`"
    )


class ContactCreate(ContactFields):
    """A new contact, or the identities of an existing one to upsert."""

    openapi_examples = (
        {
            "name": "Ada Lovelace",
            "phone": "+1 415-555-2671",
            "email": "ada@example.com",
            "company": "Analytical Engines Ltd",
            "attributes": {"plan": "pro"},
            "identities": [{"type": "external_id", "value": "cus_8812", "source": "shopify"}],
        },
    )
    identities: list[IdentityIn] = Field(
        default_factory=list,
        max_length=20,
        description="identities to attach (at most 20); `phone` / `email` above become identities too",
    )


class ContactUpdate(ContactFields):
    """The fields to change; absent fields stay as they are."""

    openapi_examples = ({"company": "Analytical Engines plc", "lifecycle_stage": "customer"},)


class Identifier(Strict):
    """One identity to look a contact up by."""

    openapi_examples = ({"type": "external_id", "value": "cus_8812", "source": "shopify"},)

    type: ResolveType = Field(description="`contact_id` looks up by id; the other types by identity")
    value: str = Field(min_length=1, max_length=320, description="any common form (normalised before the look-up)")
    source: str | None = Field(default=None, min_length=1, max_length=64, description="required for `external_id`")


class ResolveRequest(Strict):
    """Identities that should all point at one contact."""

    openapi_examples = (
        {"identifiers": [{"type": "phone", "value": "+1 415 555 2671"}]},
        {"identifiers": [{"type": "email", "value": "ada@example.com"}, {"type": "whatsapp", "value": "14155552671"}]},
    )
    identifiers: list[Identifier] = Field(
        min_length=1, max_length=20, description="at most 20 identities, all of which must point at one contact"
    )


class NoteIn(Strict):
    """A note's text."""

    openapi_examples = ({"body": "Asked for a call back on Monday."},)
    body: str = Field(min_length=1, max_length=10_000, description="the note's text")


class Note(BaseModel):
    """A free-text note on a contact, by `author_id` (the user or API key that wrote it)."""

    openapi_examples = (
        {
            "id": "cn_01jd8x2v3n4p5q6r7s8t9v0w1x",
            "contact_id": CONTACT_ID,
            "body": "Asked for a call back on Monday.",
            "author_id": "usr_01jd8x0a1b2c3d4e5f6g7h8j9k",
            "created_at": "2026-11-21T10:05:00.000Z",
            "updated_at": "2026-11-21T10:05:00.000Z",
        },
    )
    id: str = Field(description="the note's id")
    contact_id: str = Field(description="the contact (`ct_…`)")
    body: str = Field(description="the note's text")
    author_id: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class TagCreate(Strict):
    """A new tag of the organization's catalogue."""

    openapi_examples = ({"name": "vip", "color": "#ff9800"},)
    name: Name = Field(min_length=1, max_length=64, description="unique per organization (case-insensitive)")
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$", description="`#rrggbb`")


class TagUpdate(Strict):
    """A rename or a new colour."""

    openapi_examples = ({"name": "key-account"},)
    name: Name | None = Field(default=None, min_length=1, max_length=64, description="the tag's name")
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$", description="`#rrggbb`")


class Tag(BaseModel):
    """A tag of the organization's contact-tag catalogue."""

    openapi_examples = (
        {
            "id": "tag_01jd8x2v3n4p5q6r7s8t9v0w1x",
            "name": "vip",
            "color": "#ff9800",
            "job_id": None,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the tag's id")
    name: str = Field(description="the tag's name, unique per organization (case-insensitive)")
    color: str | None = Field(default=None, description="`#rrggbb`")
    job_id: str | None = Field(
        default=None, description="the tag.cascade job of the latest rename, which renames the tag on its contacts"
    )
    created_at: Timestamp
    updated_at: Timestamp


class TagAssign(Strict):
    """`{"name"}` (a new name joins the catalogue) or `{"tag_id"}`."""

    openapi_examples = ({"name": "vip"}, {"tag_id": "tag_01jd8x2v3n4p5q6r7s8t9v0w1x"})
    name: Name | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="a tag name; a new name joins the `/v1/contact-tags` catalogue",
    )
    tag_id: str | None = Field(default=None, min_length=1, max_length=64, description="the tag (`tag_…`)")
    exactly_one_of = (("name", "tag_id"),)  # checked in children.assign_tag


class AssignedTag(BaseModel):
    """A tag on a contact."""

    openapi_examples = (
        {
            "tag_id": "tag_01jd8x2v3n4p5q6r7s8t9v0w1x",
            "name": "vip",
            "color": "#ff9800",
            "assigned_at": "2026-11-21T10:06:00.000Z",
        },
    )
    tag_id: str = Field(description="the tag (`tag_…`)")
    name: str = Field(description="the tag's name")
    color: str | None = None
    assigned_at: Timestamp


class ConsentIn(Strict):
    """The contact's consent for one channel kind."""

    openapi_examples = ({"status": "opted_in", "source": "checkout form", "captured_at": "2026-11-21T09:58:00Z"},)
    status: ConsentStatus = Field(description="`opted_out` refuses sends on that channel (409 `recipient_opted_out`)")
    source: str | None = Field(default=None, max_length=100, description="where the consent was given")
    captured_at: DateTimeIn | None = Field(default=None, description="when it was given; default: now")


class Consent(BaseModel):
    """The current consent of a contact for one channel kind, with its history (newest first)."""

    openapi_examples = (
        {
            "channel": "whatsapp",
            "status": "opted_in",
            "source": "checkout form",
            "captured_at": "2026-11-21T09:58:00.000Z",
            "updated_at": "2026-11-21T10:07:00.000Z",
            "history": [
                {
                    "status": "opted_in",
                    "source": "checkout form",
                    "captured_at": "2026-11-21T09:58:00.000Z",
                    "recorded_at": "2026-11-21T10:07:00.000Z",
                    "actor_id": "usr_01jd8x0a1b2c3d4e5f6g7h8j9k",
                }
            ],
        },
    )
    channel: str = Field(description="channel kind: `whatsapp`, `sms`, `email`, …")
    status: ConsentStatus = Field(description="the contact's consent on this channel kind")
    source: str | None = None
    captured_at: Timestamp
    updated_at: Timestamp
    history: list[dict[str, Any]] = Field(default_factory=list)


class SuppressionIn(Strict):
    """Stop sending to the contact on one channel kind, for good or until `expires_at`."""

    openapi_examples = ({"channel": "sms", "reason": "hard bounce", "expires_at": "2027-01-01T00:00:00Z"},)
    channel: str = ChannelKind
    reason: str = Field(min_length=1, max_length=200)
    expires_at: DateTimeIn | None = Field(default=None, description="when it ends; absent: for good")


class Suppression(BaseModel):
    """A suppression of a contact on one channel kind: sends are refused (409 `recipient_suppressed`) while active."""

    openapi_examples = (
        {
            "channel": "sms",
            "reason": "hard bounce",
            "expires_at": "2027-01-01T00:00:00.000Z",
            "active": True,
            "created_at": "2026-11-21T10:08:00.000Z",
            "updated_at": "2026-11-21T10:08:00.000Z",
        },
    )
    channel: str = Field(description="channel kind: `whatsapp`, `sms`, `email`, …")
    reason: str
    expires_at: Timestamp | None = None
    active: bool
    created_at: Timestamp
    updated_at: Timestamp


class BlockIdentifier(Strict):
    """The identity of the contact to block or unblock."""

    openapi_examples = ({"type": "whatsapp", "value": "14155552671@s.whatsapp.net"},)

    type: ResolveType = Field(description="the identity's type")
    value: str = Field(min_length=1, max_length=320, description="the identity's value, any common form")
    source: str | None = Field(default=None, min_length=1, max_length=64, description="required for `external_id`")


class BlockRequest(Strict):
    """`{"contact_id"}` or `{"identifier": {"type", "value"}}`."""

    openapi_examples = (
        {"contact_id": "ct_01jd8x1k2m3n4p5q6r7s8t9v0w"},
        {"identifier": {"type": "phone", "value": "+1 415 555 2671"}},
    )
    model_config = ConfigDict(extra="forbid", defer_build=True)
    contact_id: str | None = Field(default=None, min_length=1, max_length=64, description="the contact (`ct_…`)")
    identifier: BlockIdentifier | None = Field(default=None, description="an identity of the contact")
    exactly_one_of = (("contact_id", "identifier"),)  # checked in children.set_blocked


class MergeRequest(Strict):
    """The contact to fold into the one in the path (it is deleted)."""

    openapi_examples = ({"from_contact_id": "ct_01jd8x9z8y7x6w5v4t3s2r1q0p"},)
    from_contact_id: str = Field(
        min_length=1, max_length=64, description="the contact to merge into this one and delete"
    )


class PhoneCheck(BaseModel):
    """A pass over every phone identity of the organization's contacts that lists the stored numbers today's rules
    would refuse (not valid for their country: stored before numbers were validated, or reported by a provider).
    Nothing is changed: fix a contact with `PATCH /v1/contacts/{contactID}` or a new identity."""

    openapi_examples = (
        {
            "id": "job_01jd8x1k2m3n4p5q6r7s8t9v0w",
            "status": "completed",
            "contacts_checked": 1200,
            "numbers_checked": 1180,
            "invalid_numbers": 3,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:04.000Z",
            "finished_at": "2026-11-21T10:00:04.000Z",
        },
    )
    id: str = Field(description="the check's id: its background job (`job_…`)")
    status: Literal["running", "completed", "failed"] = Field(
        description="`running` until every contact was read; `failed` when a step kept failing (it is retried)"
    )
    contacts_checked: int = Field(description="contacts read so far")
    numbers_checked: int = Field(description="phone, WhatsApp and wa_id identities read so far")
    invalid_numbers: int = Field(description="numbers found invalid so far (`GET …/{checkID}/numbers` lists them)")
    created_at: Timestamp
    updated_at: Timestamp
    finished_at: Timestamp | None = Field(default=None, description="when the last contact was read")


class InvalidNumber(BaseModel):
    """A stored number the phone rules would refuse today."""

    openapi_examples = (
        {
            "contact_id": CONTACT_ID,
            "type": "phone",
            "value": "5551239999",
            "problem": "not a valid phone number for its country",
        },
    )
    contact_id: str = Field(description="the contact that owns it (`ct_…`)")
    type: Literal["phone", "whatsapp", "wa_id"] = Field(description="the identity's type")
    value: str = Field(description="the number as stored: digits, read with their country code")
    problem: str = Field(description="why it would be refused")
