"""Contact resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from switchboard.models import BaseModel, Name, Storable, Strict, Timestamp

ResolveType = Literal[
    "contact_id", "phone", "whatsapp", "wa_id", "email", "external_id", "instagram", "whatsapp_user_id"
]
IdentityTypeIn = Literal["phone", "whatsapp", "wa_id", "email", "external_id", "instagram", "whatsapp_user_id"]
ConsentStatus = Literal["opted_in", "opted_out", "unknown"]
ChannelKind = Field(pattern=r"^[a-z][a-z0-9_]{1,31}$", description="channel kind: whatsapp, sms, email, instagram, …")


class IdentityIn(Strict):
    type: IdentityTypeIn
    value: str = Field(min_length=1, max_length=320)
    source: str | None = Field(default=None, min_length=1, max_length=64)
    channel_id: str | None = Field(default=None, max_length=64)


class Identity(BaseModel):
    type: str
    value: str
    source: str | None = None
    channel_id: str | None = None
    created_at: Timestamp


class Contact(BaseModel):
    id: str
    organization_id: str
    name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    email: str | None = None
    phone: str | None = None
    avatar_url: str | None = None
    company: str | None = None
    lifecycle_stage: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    identities: list[Identity] = Field(default_factory=list)
    blocked: bool = False
    version: int
    created_at: Timestamp
    updated_at: Timestamp


Attributes = Annotated[dict[str, str | int | float | bool | list[str] | None], Storable]


class ContactFields(Strict):
    name: Name | None = Field(default=None, max_length=200)
    first_name: Name | None = Field(default=None, max_length=100)
    last_name: Name | None = Field(default=None, max_length=100)
    phone: str | None = Field(default=None, min_length=3, max_length=40)
    email: str | None = Field(default=None, min_length=3, max_length=320)
    company: Name | None = Field(default=None, max_length=200)
    avatar_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://")
    lifecycle_stage: str | None = Field(default=None, max_length=64)
    attributes: Attributes | None = Field(default=None, max_length=100)


class ContactCreate(ContactFields):
    identities: list[IdentityIn] = Field(default_factory=list, max_length=20)


class ContactUpdate(ContactFields):
    pass


class Identifier(Strict):
    type: ResolveType
    value: str = Field(min_length=1, max_length=320)
    source: str | None = Field(default=None, min_length=1, max_length=64)


class ResolveRequest(Strict):
    identifiers: list[Identifier] = Field(min_length=1, max_length=20)


class NoteIn(Strict):
    body: str = Field(min_length=1, max_length=10_000)


class Note(BaseModel):
    id: str
    contact_id: str
    body: str
    author_id: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class TagCreate(Strict):
    name: Name = Field(min_length=1, max_length=64)
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$")


class TagUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=64)
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$")


class Tag(BaseModel):
    id: str
    name: str
    color: str | None = None
    job_id: str | None = Field(
        default=None, description="the tag.cascade job of the latest rename, which renames the tag on its contacts"
    )
    created_at: Timestamp
    updated_at: Timestamp


class TagAssign(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=64)
    tag_id: str | None = Field(default=None, min_length=1, max_length=64)
    exactly_one_of = (("name", "tag_id"),)  # checked in children.assign_tag


class AssignedTag(BaseModel):
    tag_id: str
    name: str
    color: str | None = None
    assigned_at: Timestamp


class ConsentIn(Strict):
    status: ConsentStatus
    source: str | None = Field(default=None, max_length=100)
    captured_at: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}T")


class Consent(BaseModel):
    channel: str
    status: ConsentStatus
    source: str | None = None
    captured_at: Timestamp
    updated_at: Timestamp
    history: list[dict[str, Any]] = Field(default_factory=list)


class SuppressionIn(Strict):
    channel: str = ChannelKind
    reason: str = Field(min_length=1, max_length=200)
    expires_at: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}T")


class Suppression(BaseModel):
    channel: str
    reason: str
    expires_at: Timestamp | None = None
    active: bool
    created_at: Timestamp
    updated_at: Timestamp


class BlockIdentifier(Strict):
    type: ResolveType
    value: str = Field(min_length=1, max_length=320)
    source: str | None = Field(default=None, min_length=1, max_length=64)


class BlockRequest(Strict):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    contact_id: str | None = Field(default=None, min_length=1, max_length=64)
    identifier: BlockIdentifier | None = None
    exactly_one_of = (("contact_id", "identifier"),)  # checked in children.set_blocked


class MergeRequest(Strict):
    from_contact_id: str = Field(min_length=1, max_length=64)
