"""Messaging resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from switchboard.commerce.models import SandboxOrder
from switchboard.models import BaseModel, DateTimeIn, Name, Storable, Strict, Timestamp, check_storable

Platform = Literal["sandbox", "whatsapp_cloud", "whatsapp_web"]
ChannelStatus = Literal["disconnected", "pairing", "connected", "error"]


class Channel(BaseModel):
    """The spec's Channel: a business number on one platform, through which messages are sent and received."""

    id: str = Field(description="The channel's id (`ch_…`)")
    organization_id: str = Field(description="The organization that owns the channel")
    name: str = Field(description="Display name")
    phone_number: str | None = Field(default=None, description="The number, digits with country code, no plus sign")
    platform: Platform = Field(description="The provider family the channel speaks to")
    mode: Literal["sandbox", "live"] = Field(description="`sandbox` for the sandbox platform, else `live`")
    status: ChannelStatus = Field(
        description="Connection state: `disconnected` (new or stopped), `pairing` (a linked device waits for the QR "
        "or pairing code), `connected` (sends are accepted), `error` (see `last_error`)"
    )
    is_active: bool = Field(
        description="False when an admin deactivated the channel; an inactive channel refuses sends"
    )
    last_connected_at: Timestamp | None = Field(default=None, description="When the channel last became `connected`")
    last_error: str | None = Field(default=None, description="The last connection error, when `status` is `error`")
    linked_channel_id: str | None = Field(default=None, description="Another channel this one is paired with")
    metadata: dict[str, Any] = Field(default_factory=dict, description="What the provider reported at connection")
    config: dict[str, Any] = Field(
        default_factory=dict, description="The platform's settings; secrets (tokens, app secrets, keys) are masked"
    )
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "name": "Support line",
            "phone_number": "14155550123",
            "platform": "sandbox",
            "mode": "sandbox",
            "status": "connected",
            "is_active": True,
            "last_connected_at": "2026-11-21T10:00:05.000Z",
            "last_error": None,
            "linked_channel_id": None,
            "metadata": {"sandbox": True},
            "config": {},
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:05.000Z",
        },
    )


class ChannelCreate(Strict):
    """Body of `POST /v1/channels`."""

    name: Name = Field(min_length=1, max_length=100, description="Display name")
    platform: Platform = Field(description="`sandbox` (test), `whatsapp_cloud` (Meta's Cloud API) or `whatsapp_web`")
    phone_number: str | None = Field(
        default=None, min_length=3, max_length=40, description="The number in any common form; stored as digits"
    )
    config: Annotated[dict[str, Any], Field(max_length=50), Storable] = Field(
        default_factory=dict,
        description="The platform's settings: whatsapp_cloud `{phone_number_id, waba_id, access_token, app_secret, "
        "verify_token?}`, whatsapp_web `{engine: waha|evolution, base_url, api_key, session?}`; at most 50 keys",
    )
    linked_channel_id: str | None = Field(default=None, max_length=64, description="Another channel to pair with")

    openapi_examples = ({"name": "Support line", "platform": "sandbox", "phone_number": "+1 415-555-0123"},)


class ChannelUpdate(Strict):
    """Body of `PATCH /v1/channels/{channelID}`: fields left out stay as they are."""

    # Absent means unchanged; an explicit null is refused (it used to be stored and made the channel unreadable).
    name: Name = Field(default=None, min_length=1, max_length=100, description="Display name")  # type: ignore[assignment]  # absent: unchanged
    phone_number: str | None = Field(
        default=None, min_length=3, max_length=40, description="The number in any common form; stored as digits"
    )
    config: Annotated[dict[str, Any], Field(max_length=50), Storable] | None = Field(
        default=None, description="Replaces the platform's settings (checked like at creation); at most 50 keys"
    )
    is_active: bool = Field(default=None, description="False refuses sends on the channel")  # type: ignore[assignment]
    linked_channel_id: str | None = Field(default=None, max_length=64, description="Another channel to pair with")

    openapi_examples = ({"name": "Support line (EU)", "is_active": True},)


class ChannelStatusView(BaseModel):
    """A channel's connection state."""

    channel_id: str
    status: ChannelStatus = Field(description="`disconnected`, `pairing`, `connected` or `error`")
    is_active: bool = Field(description="False when an admin deactivated the channel")
    last_connected_at: Timestamp | None = Field(default=None, description="When the channel last became `connected`")
    last_error: str | None = Field(default=None, description="The last connection error")

    openapi_examples = (
        {
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "status": "connected",
            "is_active": True,
            "last_connected_at": "2026-11-21T10:00:05.000Z",
            "last_error": None,
        },
    )


class Capabilities(BaseModel):
    """What a channel's provider can do; other features answer 400 `unsupported_by_provider`."""

    channel_id: str
    platform: str = Field(description="The channel's platform")
    capabilities: list[str] = Field(description="Feature names (message types, groups, newsletters, profile, …)")

    openapi_examples = (
        {
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "platform": "sandbox",
            "capabilities": ["text", "image", "document", "template", "groups", "newsletters"],
        },
    )


class ChannelLog(BaseModel):
    """One connection event of a channel."""

    id: str
    event: str = Field(description="What happened: `connected`, `disconnected`, `error`, `reconnected`, …")
    detail: dict[str, Any] = Field(default_factory=dict, description="The event's details (an error's message…)")
    created_at: Timestamp

    openapi_examples = (
        {
            "id": "chl_01jd86a1b2c3d4e5f6g7h8j9km",
            "event": "connected",
            "detail": {},
            "created_at": "2026-11-21T10:00:00.000Z",
        },
    )


class QrCode(BaseModel):
    """The QR code that links a `whatsapp_web` channel."""

    channel_id: str
    qr: str = Field(description="The engine's raw QR value (render it as a QR code)")
    expires_in: int | None = Field(default=None, description="Seconds before the engine shows a new one, when known")

    openapi_examples = (
        {"channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab", "qr": "2@Xa1b2C3d4E5f6G7h8,abc…,def…,ghi…", "expires_in": 20},
    )


class PairingCodeRequest(Strict):
    """Body of `POST /v1/channels/{channelID}/pairing-code`."""

    phone_number: str = Field(min_length=3, max_length=40, description="The phone to link, in any common form")

    openapi_examples = ({"phone_number": "+1 415-555-0123"},)


class PairingCode(BaseModel):
    """A code to type on the phone (Linked devices → Link with phone number)."""

    channel_id: str
    code: str = Field(description="Type it on the phone: Linked devices, Link with phone number")

    openapi_examples = ({"channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab", "code": "ABCD-EFGH"},)


class Document(Strict):
    """A settings document: free-form keys, bounded in size."""

    model_config = Strict.model_config | {"extra": "allow"}

    @model_validator(mode="after")
    def _storable(self) -> Document:
        check_storable(self.model_extra or {})
        return self


class TwoStepEnable(Strict):
    """Body of `POST /v1/channels/{channelID}/settings/phone/two-step/enable`."""

    pin: str = Field(pattern=r"^[0-9]{6}$", description="6-digit PIN (stored only as a hash)")
    email: str | None = Field(default=None, max_length=320, description="Recovery e-mail")

    openapi_examples = ({"pin": "482915", "email": "it@example.com"},)


class Proxy(Strict):
    """A proxy the channel's engine connects through."""

    enabled: bool = Field(default=True, description="Use the proxy")
    protocol: Literal["http", "https", "socks5"] = Field(default="http", description="`http`, `https` or `socks5`")
    host: str = Field(min_length=1, max_length=255, description="The proxy's host name or address")
    port: int = Field(ge=1, le=65535, description="The proxy's port")
    username: str | None = Field(default=None, max_length=255, description="The proxy's user name")
    password: str | None = Field(default=None, max_length=255, description="Write-only")

    openapi_examples = ({"enabled": True, "protocol": "socks5", "host": "proxy.example.com", "port": 1080},)


class PhoneLookup(Strict):
    """Body of `POST /v1/channels/{channelID}/contacts/lookup`."""

    phone: str = Field(min_length=3, max_length=40, description="The number to look up, in any common form")

    openapi_examples = ({"phone": "+1 415-555-0188"},)


class BlockOnChannel(Strict):
    """Body of `POST /v1/channels/{channelID}/blocked-contacts`."""

    phone: str = Field(min_length=3, max_length=40, description="The number, in any common form")
    blocked: bool = Field(default=True, description="False unblocks")

    openapi_examples = ({"phone": "+1 415-555-0188", "blocked": True},)


class BlockedOnChannel(BaseModel):
    """A number blocked at the provider through a channel."""

    phone: str = Field(description="The blocked number (digits with country code)")
    blocked_at: Timestamp = Field(description="When it was blocked")

    openapi_examples = ({"phone": "14155550188", "blocked_at": "2026-11-21T10:00:00.000Z"},)


class SandboxInbound(Strict):
    """Body of `POST /v1/channels/{channelID}/sandbox/inbound`: what the simulated customer writes, a `text` or an
    `order` (a cart sent from the catalogue, Meta's inbound `order` object), exactly one of them."""

    from_phone: str = Field(min_length=3, max_length=40, description="The customer's number, in any common form")
    text: str | None = Field(default=None, min_length=1, max_length=4096, description="A text message")
    order: SandboxOrder | None = Field(
        default=None, description="A cart (Meta's `order` object): it makes a `pending` order, as on whatsapp_cloud"
    )
    name: Name | None = Field(default=None, max_length=200, description="The customer's profile name")
    exactly_one_of = (("text", "order"),)  # checked in callbacks.sandbox_inbound

    openapi_examples = (
        {"from_phone": "+1 415-555-0188", "text": "Hi, is my order on its way?", "name": "Ada"},
        {
            "from_phone": "+1 415-555-0188",
            "order": {
                "catalog_id": "194836987003835",
                "text": "Gift wrap, please",
                "product_items": [
                    {"product_retailer_id": "di9ozbzfi4", "quantity": 2, "item_price": 30, "currency": "USD"}
                ],
            },
        },
    )


class InboundAccepted(BaseModel):
    """The simulated inbound message as stored."""

    message_id: str = Field(description="The stored message's id")
    conversation_id: str = Field(description="The conversation it joined")
    contact_id: str | None = Field(
        description="The contact it resolved to (created if new); null for our own echo into a group"
    )
    duplicate: bool = Field(default=False, description="True when the same provider message was already stored")
    order_id: str | None = Field(default=None, description="The order a cart (`order`) made")

    openapi_examples = (
        {
            "message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d",
            "conversation_id": "cv_01jd80a1b2c3d4e5f6g7h8j9km",
            "contact_id": "ct_01jd80a0z9y8x7w6v5t4s3r2qp",
            "duplicate": False,
        },
    )


# Messages ----------------------------------------------------------------------------------------------------------
MessageType = Literal[
    "text", "image", "audio", "video", "document", "sticker", "location", "template", "interactive", "contacts", "poll"
]


class TextContent(Strict):
    """`text` of a `type: text` message."""

    body: str = Field(min_length=1, max_length=4096, description="The message text")
    preview_url: bool = Field(default=False, description="Show a preview of the first URL in `body`")


class MediaContent(Strict):
    """`media` of an image, audio, video, document or sticker message: exactly one source (`url`, `id`, `asset_id`)."""

    url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://", description="A public URL")
    id: str | None = Field(default=None, max_length=256, description="The provider's media id")
    asset_id: str | None = Field(default=None, max_length=64, description="An uploaded asset (`/v1/media/uploads`)")
    caption: str | None = Field(default=None, max_length=1024)
    filename: str | None = Field(default=None, max_length=255, description="A document's file name")
    mime_type: str | None = Field(default=None, max_length=100)


class TemplateContent(Strict):
    """`template` of a `type: template` message (an approved template when it is in `/v1/templates`)."""

    name: str = Field(min_length=1, max_length=512, description="The template's name")
    language: str = Field(default="en_US", min_length=2, max_length=16, description="The language code")
    components: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=20,
        description="Meta's template components (header, body and button parameters)",
    )


class LocationContent(Strict):
    """`location` of a `type: location` message."""

    latitude: float = Field(ge=-90, le=90, description="Degrees, -90 to 90")
    longitude: float = Field(ge=-180, le=180, description="Degrees, -180 to 180")
    name: Name | None = Field(default=None, max_length=200, description="The place's name")
    address: str | None = Field(default=None, max_length=500, description="The place's address")


class PollContent(Strict):
    """`poll` of a `type: poll` message (linked-device engines: WAHA `sendPoll`, Evolution `sendPoll`; other
    platforms answer 400 `unsupported_by_provider`). Votes come back as changes of the message (`poll_votes`,
    `poll_tally`)."""

    name: str = Field(min_length=1, max_length=255, description="The question")
    options: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        min_length=2, max_length=12, description="The answers, distinct"
    )
    selectable_count: int = Field(
        default=1, ge=0, le=12, description="How many answers one person may choose (0: any number)"
    )

    @model_validator(mode="after")
    def _distinct(self) -> PollContent:
        if len(set(self.options)) != len(self.options):
            raise ValueError("options must be distinct")
        if self.selectable_count > len(self.options):
            raise ValueError("selectable_count cannot exceed the number of options")
        return self


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
    """Body of `POST /v1/messages`: the recipient (exactly one of `to`, `contact_id`, `conversation_id` or
    `group_id`), the `type`, and the object it names."""

    channel_id: str = Field(min_length=1, max_length=64, description="The channel to send on (must be `connected`)")
    to: str | None = Field(default=None, min_length=3, max_length=64, description="phone in any common form")
    contact_id: str | None = Field(default=None, min_length=1, max_length=64, description="A stored contact")
    conversation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="A conversation of the channel: its contact, or its group's chat for a group conversation",
    )
    group_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="A group of the channel (`grp_…` or its WhatsApp JID / Cloud group id): the group's chat",
    )
    exactly_one_of = (("to", "contact_id", "conversation_id", "group_id"),)  # checked in messages._target
    type: MessageType = Field(default="text", description="Which of the content objects the message carries")
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
    poll: PollContent | None = Field(default=None, description="A poll (linked-device engines only)")
    reply_to: str | None = Field(default=None, max_length=64, description="id of a message in the conversation")

    openapi_examples = (
        {
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "to": "+1 415-555-0188",
            "text": {"body": "Your order shipped."},
        },
        {
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "contact_id": "ct_01jd80a0z9y8x7w6v5t4s3r2qp",
            "type": "image",
            "media": {"url": "https://cdn.example.com/receipt.png", "caption": "Your receipt"},
        },
    )


MESSAGE_STATUS_NOTE = (
    "`pending` (accepted, not yet handed to the provider), `sent`, `delivered`, `read` or `failed` (see "
    "`last_error`); inbound messages are `received`. The list may grow (e.g. `played`): accept unknown values."
)


class Message(BaseModel):
    """The spec's Message record (plus `last_error`, set when the status is `failed`)."""

    id: str = Field(description="The message's id (a UUIDv7)")
    channel_id: str
    to_phone: str | None = Field(default=None, description="The recipient's number (digits with country code)")
    type: str = Field(description="The message type (`text`, `image`, `template`, …)")
    status: str = Field(description=MESSAGE_STATUS_NOTE, examples=["pending", "sent", "delivered", "read", "failed"])
    provider_message_id: str | None = Field(default=None, description="The provider's id, once it took the message")
    created_at: Timestamp
    updated_at: Timestamp
    last_error: str | None = Field(default=None, description="Why it failed, when `status` is `failed`")
    uncertain: bool = Field(
        default=False,
        description="the engine may have accepted the send but its answer was lost; callbacks reconcile it",
    )

    openapi_examples = (
        {
            "id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d",
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "to_phone": "14155550188",
            "type": "text",
            "status": "pending",
            "provider_message_id": None,
            "created_at": "2026-11-21T10:01:00.000Z",
            "updated_at": "2026-11-21T10:01:00.000Z",
            "last_error": None,
            "uncertain": False,
        },
    )


class ConversationMessage(BaseModel):
    """A message as a conversation lists it: inbound or outbound, with its text and media."""

    id: str
    conversation_id: str
    channel_id: str
    contact_id: str | None = None
    direction: Literal["inbound", "outbound"] = Field(
        description="`inbound` (from the customer) or `outbound` (sent by us)"
    )
    from_phone: str | None = Field(default=None, description="The sender's number (digits with country code)")
    from_user_id: str | None = Field(default=None, description="the sender's WhatsApp business-scoped user id")
    to_phone: str | None = Field(default=None, description="The recipient's number")
    type: str = Field(description="The message type (`text`, `image`, `template`, …)")
    text: str | None = Field(default=None, description="The message's text, when it has one")
    media: dict[str, Any] | None = Field(default=None, description="The media's provider id, type, caption, …")
    status: str = Field(description=MESSAGE_STATUS_NOTE)
    provider_message_id: str | None = Field(default=None, description="The provider's id of the message")
    last_error: str | None = Field(default=None, description="Why it failed, when `status` is `failed`")
    reaction: str | None = Field(default=None, description="our reaction to the message (`POST /v1/messages/react`)")
    customer_reaction: str | None = Field(default=None, description="the customer's reaction to the message")
    poll_tally: dict[str, int] | None = Field(
        default=None, description="a poll's votes per answer (each voter's latest vote counts)"
    )
    edited_at: Timestamp | None = Field(
        default=None, description="when the text was last edited (by us or the customer)"
    )
    deleted: bool = Field(default=False, description="deleted for everyone (its text is gone when the customer did)")
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "0193a1f3-1a2b-7c3d-8e4f-5a6b7c8d9e0f",
            "conversation_id": "cv_01jd80a1b2c3d4e5f6g7h8j9km",
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "contact_id": "ct_01jd80a0z9y8x7w6v5t4s3r2qp",
            "direction": "inbound",
            "from_phone": "14155550188",
            "to_phone": "14155550123",
            "type": "text",
            "text": "Hi, is my order on its way?",
            "status": "received",
            "created_at": "2026-11-21T10:02:00.000Z",
            "updated_at": "2026-11-21T10:02:00.000Z",
        },
    )


class MessageStatus(BaseModel):
    """A message's current status and every status change recorded for it."""

    message_id: str
    status: str = Field(description=MESSAGE_STATUS_NOTE)
    last_error: str | None = Field(default=None, description="Why it failed, when `status` is `failed`")
    history: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Status changes: `{status, applied, error, at}`; `applied` is false for a late one that did "
        "not change the record",
    )

    openapi_examples = (
        {
            "message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d",
            "status": "delivered",
            "last_error": None,
            "history": [
                {"status": "pending", "applied": True, "error": None, "at": "2026-11-21T10:01:00.000Z"},
                {"status": "sent", "applied": True, "error": None, "at": "2026-11-21T10:01:01.000Z"},
                {"status": "delivered", "applied": True, "error": None, "at": "2026-11-21T10:01:02.000Z"},
            ],
        },
    )


# Conversations -----------------------------------------------------------------------------------------------------
class Assignee(BaseModel):
    """Who a conversation is assigned to."""

    type: Literal["user", "team"] = Field(description="`user` or `team`")
    id: str = Field(description="The user's or team's id")


class Conversation(BaseModel):
    """A thread with one contact (or one group) on one channel."""

    id: str = Field(description="The conversation's id (`cv_…`)")
    organization_id: str
    channel_id: str
    contact_id: str | None = Field(default=None, description="the contact; null for a group's conversation")
    group_jid: str | None = Field(default=None, description="a group's conversation: the group's WhatsApp id")
    group_id: str | None = Field(default=None, description="a group's conversation: our group record, when known")
    status: Literal["open", "closed"] = Field(description="`open` or `closed`")
    archived: bool = Field(default=False, description="Hidden from the default inbox")
    muted_until: Timestamp | None = Field(default=None, description="Muted until then; null with `muted`: for good")
    muted: bool = Field(default=False, description="Notifications are off")
    pinned: bool = Field(default=False, description="Kept at the top of the inbox")
    unread_count: int = Field(default=0, description="Inbound messages since it was last marked read")
    assignee: Assignee | None = Field(
        default=None, description="The member or team it is assigned to; null when unassigned"
    )
    labels: list[str] = Field(default_factory=list, description="Label ids")
    last_message_at: Timestamp | None = Field(default=None, description="The last message in either direction")
    last_message_preview: str | None = Field(default=None, description="The start of the last message's text")
    last_inbound_at: Timestamp | None = Field(
        default=None, description="The customer's last message (opens the window)"
    )
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "cv_01jd80a1b2c3d4e5f6g7h8j9km",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "contact_id": "ct_01jd80a0z9y8x7w6v5t4s3r2qp",
            "status": "open",
            "archived": False,
            "muted": False,
            "pinned": False,
            "unread_count": 1,
            "assignee": {"type": "user", "id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc"},
            "labels": [],
            "last_message_at": "2026-11-21T10:02:00.000Z",
            "last_message_preview": "Hi, is my order on its way?",
            "last_inbound_at": "2026-11-21T10:02:00.000Z",
            "created_at": "2026-11-21T10:02:00.000Z",
            "updated_at": "2026-11-21T10:02:00.000Z",
        },
    )


class AssignRequest(Strict):
    """Body of `POST /v1/conversations/{convID}/assign`: a member, a team, or neither to unassign."""

    user_id: str | None = Field(default=None, max_length=64, description="A member's user id")
    team_id: str | None = Field(default=None, max_length=64, description="A team's id")

    openapi_examples = ({"user_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc"}, {})


class MuteRequest(Strict):
    """Body of `POST /v1/conversations/{convID}/mute` (optional)."""

    until: DateTimeIn | None = Field(default=None, description="a time in the future; absent: for good")

    openapi_examples = ({"until": "2026-11-22T08:00:00Z"},)


class LockRequest(Strict):
    """Body of `POST /v1/conversations/{convID}/lock`."""

    lock_owner_name: str = Field(min_length=1, max_length=200, description="display name of the owner")
    draft_id: str | None = Field(default=None, max_length=128, description="The draft the owner is writing")

    openapi_examples = ({"lock_owner_name": "Ada Lovelace", "draft_id": "draft-7f3a"},)


class ConversationLock(BaseModel):
    """The spec's Conversation lock: who is answering the conversation, for 120 s from the last refresh."""

    conversation_id: str
    organization_id: str
    lock_owner_id: str = Field(description="The user (or API key) holding the lock")
    lock_owner_name: str = Field(description="The owner's display name")
    draft_id: str | None = Field(default=None, description="The draft the owner is writing")
    expires_at: Timestamp = Field(description="When the lock lapses unless refreshed")
    updated_at: Timestamp = Field(description="The last claim or refresh")

    openapi_examples = (
        {
            "conversation_id": "cv_01jd80a1b2c3d4e5f6g7h8j9km",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "lock_owner_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "lock_owner_name": "Ada Lovelace",
            "draft_id": "draft-7f3a",
            "expires_at": "2026-11-21T10:05:00.000Z",
            "updated_at": "2026-11-21T10:03:00.000Z",
        },
    )


class CloudWebhook(BaseModel):
    """Meta's webhook body as the app-level callback reads it (unknown fields kept for the adapter, never refused)."""

    object: Literal["whatsapp_business_account"]
    entry: list[dict[str, Any]] = Field(max_length=1000, description="Meta's entries, each with its `changes`")

    openapi_examples = (
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102290129340398",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": "14155550199",
                                    "phone_number_id": "106540352242922",
                                },
                                "statuses": [
                                    {
                                        "id": "wamid.HBgLMTU1NTAxMDAxODgVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA",
                                        "status": "delivered",
                                        "timestamp": "1795597260",
                                        "recipient_id": "14155550188",
                                    }
                                ],
                            },
                        }
                    ],
                }
            ],
        },
    )
