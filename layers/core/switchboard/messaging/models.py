"""Messaging resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from switchboard.models import BaseModel, Name, Storable, Strict, Timestamp, check_storable

Platform = Literal["sandbox", "whatsapp_cloud", "whatsapp_web"]
ChannelStatus = Literal["disconnected", "pairing", "connected", "error"]


class Channel(BaseModel):
    """The spec's Channel."""

    id: str
    organization_id: str
    name: str
    phone_number: str | None = None
    platform: str
    mode: str
    status: str
    is_active: bool
    last_connected_at: Timestamp | None = None
    last_error: str | None = None
    linked_channel_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    created_at: Timestamp
    updated_at: Timestamp


class ChannelCreate(Strict):
    name: Name = Field(min_length=1, max_length=100)
    platform: Platform
    phone_number: str | None = Field(default=None, min_length=3, max_length=40)
    config: Annotated[dict[str, Any], Storable] = Field(default_factory=dict, max_length=50)
    linked_channel_id: str | None = Field(default=None, max_length=64)


class ChannelUpdate(Strict):
    # Absent means unchanged; an explicit null is refused (it used to be stored and made the channel unreadable).
    name: Name = Field(default=None, min_length=1, max_length=100)  # type: ignore[assignment]  # absent: unchanged
    phone_number: str | None = Field(default=None, min_length=3, max_length=40)
    config: Annotated[dict[str, Any], Storable] | None = Field(default=None, max_length=50)
    is_active: bool = Field(default=None)  # type: ignore[assignment]  # absent: unchanged
    linked_channel_id: str | None = Field(default=None, max_length=64)


class ChannelStatusView(BaseModel):
    channel_id: str
    status: str
    is_active: bool
    last_connected_at: Timestamp | None = None
    last_error: str | None = None


class Capabilities(BaseModel):
    channel_id: str
    platform: str
    capabilities: list[str]


class ChannelLog(BaseModel):
    id: str
    event: str
    detail: dict[str, Any] = Field(default_factory=dict)
    created_at: Timestamp


class QrCode(BaseModel):
    channel_id: str
    qr: str
    expires_in: int | None = None


class PairingCodeRequest(Strict):
    phone_number: str = Field(min_length=3, max_length=40)


class PairingCode(BaseModel):
    channel_id: str
    code: str


class Document(Strict):
    """A settings document: free-form keys, bounded in size."""

    model_config = Strict.model_config | {"extra": "allow"}

    @model_validator(mode="after")
    def _storable(self) -> Document:
        check_storable(self.model_extra or {})
        return self


class TwoStepEnable(Strict):
    pin: str = Field(pattern=r"^[0-9]{6}$", description="6-digit PIN")
    email: str | None = Field(default=None, max_length=320)


class Proxy(Strict):
    enabled: bool = True
    protocol: Literal["http", "https", "socks5"] = "http"
    host: str = Field(min_length=1, max_length=255)
    port: int = Field(ge=1, le=65535)
    username: str | None = Field(default=None, max_length=255)
    password: str | None = Field(default=None, max_length=255)


class PhoneLookup(Strict):
    phone: str = Field(min_length=3, max_length=40)


class BlockOnChannel(Strict):
    phone: str = Field(min_length=3, max_length=40)
    blocked: bool = True


class BlockedOnChannel(BaseModel):
    phone: str
    blocked_at: Timestamp


class SandboxInbound(Strict):
    from_phone: str = Field(min_length=3, max_length=40)
    text: str = Field(min_length=1, max_length=4096)
    name: Name | None = Field(default=None, max_length=200)


class InboundAccepted(BaseModel):
    message_id: str
    conversation_id: str
    contact_id: str
    duplicate: bool = False


# Messages ----------------------------------------------------------------------------------------------------------
MessageType = Literal[
    "text", "image", "audio", "video", "document", "sticker", "location", "template", "interactive", "contacts"
]


class TextContent(Strict):
    body: str = Field(min_length=1, max_length=4096)
    preview_url: bool = False


class MediaContent(Strict):
    url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://")
    id: str | None = Field(default=None, max_length=256)
    asset_id: str | None = Field(default=None, max_length=64)
    caption: str | None = Field(default=None, max_length=1024)
    filename: str | None = Field(default=None, max_length=255)
    mime_type: str | None = Field(default=None, max_length=100)


class TemplateContent(Strict):
    name: str = Field(min_length=1, max_length=512)
    language: str = Field(default="en_US", min_length=2, max_length=16)
    components: list[dict[str, Any]] = Field(default_factory=list, max_length=20)


class LocationContent(Strict):
    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    name: Name | None = Field(default=None, max_length=200)
    address: str | None = Field(default=None, max_length=500)


def _contact_card(card: dict[str, Any]) -> dict[str, Any]:
    """A contact card is Meta's contact object (`name.formatted_name` required; `phones`, `emails`, `org`, `urls`,
    `addresses`, `birthday` as Meta defines them): the Cloud API takes it as it is, the linked-device engines read
    its name, first phone and company."""
    name = card.get("name")
    if not isinstance(name, dict) or not isinstance(name.get("formatted_name"), str) or not name["formatted_name"]:
        raise ValueError("each contact card needs name.formatted_name")
    phones = card.get("phones", [])
    if not isinstance(phones, list) or not all(isinstance(p, dict) for p in phones):
        raise ValueError("a contact card's phones is a list of {phone, wa_id?, type?}")
    return card


ContactCard = Annotated[dict[str, Any], AfterValidator(_contact_card)]


class SendMessage(Strict):
    channel_id: str = Field(min_length=1, max_length=64)
    to: str | None = Field(default=None, min_length=3, max_length=64, description="phone in any common form")
    contact_id: str | None = Field(default=None, min_length=1, max_length=64)
    exactly_one_of = (("to", "contact_id"),)  # checked in messages._recipient
    type: MessageType = "text"
    text: TextContent | None = None
    media: MediaContent | None = None
    template: TemplateContent | None = None
    location: LocationContent | None = None
    interactive: dict[str, Any] | None = Field(
        default=None, description="Meta's interactive object (button, list, cta_url, flow, product…)"
    )
    contacts: list[ContactCard] | None = Field(
        default=None, min_length=1, max_length=5, description="Meta's contact cards (name, phones, emails, …)"
    )
    reply_to: str | None = Field(default=None, max_length=64, description="id of a message in the conversation")


class Message(BaseModel):
    """The spec's Message record (plus `last_error`, set when the status is `failed`)."""

    id: str
    channel_id: str
    to_phone: str | None = None
    type: str
    status: str
    provider_message_id: str | None = None
    created_at: Timestamp
    updated_at: Timestamp
    last_error: str | None = None
    uncertain: bool = Field(
        default=False,
        description="the engine may have accepted the send but its answer was lost; callbacks reconcile it",
    )


class ConversationMessage(BaseModel):
    id: str
    conversation_id: str
    channel_id: str
    contact_id: str | None = None
    direction: str
    from_phone: str | None = None
    from_user_id: str | None = Field(default=None, description="the sender's WhatsApp business-scoped user id")
    to_phone: str | None = None
    type: str
    text: str | None = None
    media: dict[str, Any] | None = None
    status: str
    provider_message_id: str | None = None
    last_error: str | None = None
    reaction: str | None = Field(default=None, description="our reaction to the message (`POST /v1/messages/react`)")
    customer_reaction: str | None = Field(default=None, description="the customer's reaction to the message")
    edited_at: Timestamp | None = Field(
        default=None, description="when the text was last edited (by us or the customer)"
    )
    deleted: bool = Field(default=False, description="deleted for everyone (its text is gone when the customer did)")
    created_at: Timestamp
    updated_at: Timestamp


class MessageStatus(BaseModel):
    message_id: str
    status: str
    last_error: str | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)


# Conversations -----------------------------------------------------------------------------------------------------
class Assignee(BaseModel):
    type: Literal["user", "team"]
    id: str


class Conversation(BaseModel):
    id: str
    organization_id: str
    channel_id: str
    contact_id: str | None = Field(default=None, description="the contact; null for a group's conversation")
    group_jid: str | None = Field(default=None, description="a group's conversation: the group's WhatsApp id")
    group_id: str | None = Field(default=None, description="a group's conversation: our group record, when known")
    status: Literal["open", "closed"]
    archived: bool = False
    muted_until: str | None = None
    muted: bool = False
    pinned: bool = False
    unread_count: int = 0
    assignee: Assignee | None = None
    labels: list[str] = Field(default_factory=list)
    last_message_at: Timestamp | None = None
    last_message_preview: str | None = None
    last_inbound_at: Timestamp | None = None
    created_at: Timestamp
    updated_at: Timestamp


class AssignRequest(Strict):
    user_id: str | None = Field(default=None, max_length=64)
    team_id: str | None = Field(default=None, max_length=64)


class MuteRequest(Strict):
    until: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}T")


class LockRequest(Strict):
    lock_owner_name: str = Field(min_length=1, max_length=200, description="display name of the owner")
    draft_id: str | None = Field(default=None, max_length=128)


class ConversationLock(BaseModel):
    """The spec's Conversation lock."""

    conversation_id: str
    organization_id: str
    lock_owner_id: str
    lock_owner_name: str
    draft_id: str | None = None
    expires_at: Timestamp
    updated_at: Timestamp


class CloudWebhook(BaseModel):
    """Meta's webhook body as the app-level callback reads it (unknown fields kept for the adapter, never refused)."""

    object: Literal["whatsapp_business_account"]
    entry: list[dict[str, Any]] = Field(max_length=1000)
