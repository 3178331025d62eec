"""Labels, chats and calls, and message templates as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from switchboard.models import BaseModel, DateTimeIn, Name, Storable, Strict, Timestamp

ID = Field(min_length=1, max_length=64)
COLOR = r"^#[0-9a-fA-F]{6}$"


# Labels ------------------------------------------------------------------------------------------------------------
class Label(BaseModel):
    """A label of the organization's catalogue, attached to conversations and messages."""

    openapi_examples = (
        {
            "id": "lb_01jd8x8a9b0c1d2e3f4g5h6j7k",
            "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
            "name": "Urgent",
            "color": "#f44336",
            "description": "Answer within the hour",
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the label's id")
    organization_id: str = Field(description="the organization that owns it (`org_…`)")
    name: str = Field(description="the label's name")
    color: str = Field(description="`#rrggbb`")
    description: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class LabelCreate(Strict):
    """A new label."""

    openapi_examples = ({"name": "Urgent", "color": "#f44336", "description": "Answer within the hour"},)
    name: Name = Field(min_length=1, max_length=100, description="unique per organization (case-insensitive)")
    color: str = Field(default="#9e9e9e", pattern=COLOR, description="`#rrggbb`")
    description: str | None = Field(default=None, max_length=500, description="free text about the label")


class LabelUpdate(Strict):
    """The label's fields to change."""

    openapi_examples = ({"color": "#ff9800"},)
    name: Name | None = Field(default=None, min_length=1, max_length=100, description="the label's name")
    color: str | None = Field(default=None, pattern=COLOR, description="`#rrggbb`")
    description: str | None = Field(default=None, max_length=500, description="free text about the label")


class ChatLabelRequest(Strict):
    """`{label_id, conversation_id}` or `{label_id, chat_id}` (a phone/JID or conversation id; `channel_id` picks
    the channel when the contact talks on several)."""

    openapi_examples = (
        {"label_id": "lb_01jd8x8a9b0c1d2e3f4g5h6j7k", "conversation_id": "cv_01jd8w9a0b1c2d3e4f5g6h7j8k"},
        {
            "label_id": "lb_01jd8x8a9b0c1d2e3f4g5h6j7k",
            "chat_id": "+14155552671",
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
        },
    )
    label_id: str = ID
    conversation_id: str | None = Field(
        default=None, min_length=1, max_length=64, description="the conversation (`cv_…`)"
    )
    chat_id: str | None = Field(
        default=None, min_length=1, max_length=128, description="the contact's phone / JID, or a conversation id"
    )
    channel_id: str | None = Field(
        default=None, min_length=1, max_length=64, description="picks the channel when the contact talks on several"
    )
    exactly_one_of = (("conversation_id", "chat_id"),)  # checked in labels.chat_label


class MessageLabelRequest(Strict):
    """The label and the message to attach it to or detach it from."""

    openapi_examples = (
        {"label_id": "lb_01jd8x8a9b0c1d2e3f4g5h6j7k", "message_id": "01937a4e-5b6c-7d8e-9f01-23456789abcd"},
    )
    label_id: str = ID
    message_id: str = ID


class ConversationLabelAdd(Strict):
    """`{label_id}`, or `{name}` (a new name joins the `/v1/labels` catalogue)."""

    openapi_examples = ({"label_id": "lb_01jd8x8a9b0c1d2e3f4g5h6j7k"}, {"name": "Follow up", "color": "#2196f3"})
    label_id: str | None = Field(default=None, min_length=1, max_length=64, description="the label (`lb_…`)")
    name: Name | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="a label name; a new name joins the `/v1/labels` catalogue",
    )
    color: str | None = Field(default=None, pattern=COLOR, description="`#rrggbb`, for a new label")
    exactly_one_of = (("label_id", "name"),)  # checked in labels.add_to_conversation


class LabelAttachment(BaseModel):
    """The outcome of attaching or detaching a label."""

    openapi_examples = (
        {
            "label_id": "lb_01jd8x8a9b0c1d2e3f4g5h6j7k",
            "conversation_id": "cv_01jd8w9a0b1c2d3e4f5g6h7j8k",
            "message_id": None,
            "attached": True,
            "changed": True,
            "labels": ["lb_01jd8x8a9b0c1d2e3f4g5h6j7k"],
            "provider_sync": "unsupported",
        },
    )
    label_id: str = Field(description="the label (`lb_…`)")
    conversation_id: str | None = Field(default=None, description="the conversation, for chat labels")
    message_id: str | None = Field(default=None, description="the message, for message labels")
    attached: bool = Field(description="whether the label is on the target after the call")
    changed: bool = Field(description="whether this request changed anything")
    labels: list[str] = Field(default_factory=list, description="the target's label ids after the change")
    provider_sync: Literal["synced", "unsupported", "failed"] | None = Field(
        default=None, description="the mirror at the channel's provider (best effort), when something changed"
    )


# Chats and calls ---------------------------------------------------------------------------------------------------
class ChatRequest(Strict):
    """A chat of a channel: the contact's phone / JID or a conversation id."""

    openapi_examples = ({"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "chat_id": "14155552671"},)
    channel_id: str = ID
    chat_id: str = Field(min_length=1, max_length=128, description="the contact's phone / JID, or a conversation id")


class ChatMuteRequest(ChatRequest):
    """A chat to mute, until a time or until unmuted."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "chat_id": "14155552671", "until": "2036-01-01T08:00:00Z"},
    )
    until: DateTimeIn | None = Field(default=None, description="a time in the future; absent: until unmuted")


class CallReject(Strict):
    """An incoming call to reject."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "call_id": "CALL-5F2A9C", "from": "14155552671"},
    )
    channel_id: str = ID
    call_id: str = Field(min_length=1, max_length=256, description="the provider's id of the call")
    from_: str | None = Field(default=None, alias="from", min_length=3, max_length=128, description="caller phone/JID")


class CallRejected(BaseModel):
    """A rejected call, with what the provider answered."""

    openapi_examples = (
        {"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k", "call_id": "CALL-5F2A9C", "status": "rejected", "provider": {}},
    )
    channel_id: str = Field(description="the channel (`ch_…`)")
    call_id: str = Field(description="the provider's id of the call")
    status: Literal["rejected"] = Field(default="rejected", description="always `rejected`")
    provider: dict[str, Any] = Field(default_factory=dict, description="what the channel's provider answered")


class HistorySync(BaseModel):
    """A request for a conversation's earlier messages."""

    openapi_examples = (
        {
            "id": "hs_01jd8x9a0b1c2d3e4f5g6h7j8k",
            "conversation_id": "cv_01jd8w9a0b1c2d3e4f5g6h7j8k",
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "status": "completed",
            "messages_synced": 0,
            "requested_at": "2026-11-21T10:00:00.000Z",
            "completed_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the history sync's id")
    conversation_id: str = Field(description="the conversation (`cv_…`)")
    channel_id: str = Field(description="the channel (`ch_…`)")
    status: Literal["requested", "completed"] = Field(
        description="`requested` while the provider sends the messages (they arrive as inbound messages)"
    )
    messages_synced: int | None = None
    requested_at: Timestamp
    completed_at: Timestamp | None = None


# Templates ---------------------------------------------------------------------------------------------------------
Category = Literal["MARKETING", "UTILITY", "AUTHENTICATION"]
TemplateStatus = Literal["draft", "pending", "approved", "rejected", "paused", "disabled"]
NAME = r"^[a-z0-9_]{1,512}$"
LANGUAGE = r"^[a-z]{2,3}(_[A-Z]{2})?$"


class TemplateButton(Strict):
    """A button of a BUTTONS component."""

    # The examples leave out `example`: spectral's oas3-valid-schema-example reads that key as the keyword.
    openapi_examples = (
        {
            "type": "URL",
            "text": "Track parcel",
            "url": "https://example.com/track/{{1}}",
        },
    )
    type: Literal["QUICK_REPLY", "URL", "PHONE_NUMBER", "COPY_CODE", "OTP"] = Field(description="the button's kind")
    text: str = Field(min_length=1, max_length=25, description="the button's label (at most 25 characters)")
    url: str | None = Field(
        default=None,
        max_length=2000,
        pattern=r"^https://",
        description="URL buttons: an https URL (may end with a `{{1}}` parameter)",
    )
    phone_number: str | None = Field(default=None, max_length=20, description="the number a PHONE_NUMBER button calls")
    example: list[str] | None = Field(
        default=None, max_length=5, description="sample values for the parameters (the provider's review needs them)"
    )


class TemplateComponent(Strict):
    """A part of a template: HEADER, BODY (required), FOOTER or BUTTONS."""

    # No `example` key in the examples (see TemplateButton).
    openapi_examples = (
        {
            "type": "BODY",
            "text": "Hi {{1}}, your order {{2}} has shipped.",
        },
    )
    type: Literal["HEADER", "BODY", "FOOTER", "BUTTONS"] = Field(
        description="HEADER, BODY (required, once), FOOTER or BUTTONS"
    )
    format: Literal["TEXT", "IMAGE", "VIDEO", "DOCUMENT", "LOCATION"] | None = Field(
        default=None, description="HEADER only: what the header shows"
    )
    text: str | None = Field(default=None, min_length=1, max_length=1024, description="`{{1}}`, `{{2}}`… parameters")
    buttons: list[TemplateButton] | None = Field(
        default=None, min_length=1, max_length=10, description="1 to 10 buttons"
    )
    example: Annotated[dict[str, Any], Storable] | None = Field(
        default=None, description="sample values for the parameters (the provider's review needs them)"
    )


class TemplateCreate(Strict):
    """A new message template (a `draft` until submitted)."""

    openapi_examples = (
        {
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "name": "order_shipped",
            "category": "UTILITY",
            "language": "en_US",
            "components": [
                {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."},
                {"type": "FOOTER", "text": "Reply STOP to opt out"},
            ],
        },
    )
    channel_id: str = ID
    name: str = Field(pattern=NAME, description="lower case letters, digits and `_`")
    category: Category = Field(description="what the template is for (the provider may recategorise it)")
    language: str = Field(default="en_US", pattern=LANGUAGE, description="language code, e.g. `en_US`")
    components: list[TemplateComponent] = Field(
        min_length=1,
        max_length=10,
        description="1 to 10 parts: one BODY with text, at most one HEADER, FOOTER and BUTTONS",
    )


class TemplateUpdate(Strict):
    """Only `draft` and `rejected` templates can be edited (a rejected one goes back to `draft`)."""

    openapi_examples = ({"components": [{"type": "BODY", "text": "Hi {{1}}, order {{2}} is on its way."}]},)
    name: str | None = Field(default=None, pattern=NAME, description="the new name")
    category: Category | None = Field(default=None, description="the new category")
    language: str | None = Field(default=None, pattern=LANGUAGE, description="the new language code")
    components: list[TemplateComponent] | None = Field(
        default=None, min_length=1, max_length=10, description="the new parts (replace the old ones)"
    )


class Template(BaseModel):
    """A message template of a channel, with its approval status."""

    openapi_examples = (
        {
            "id": "tpl_01jd8xa1b2c3d4e5f6g7h8j9k0",
            "organization_id": "org_01jd8w0a1b2c3d4e5f6g7h8j9k",
            "channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k",
            "name": "order_shipped",
            "category": "UTILITY",
            "language": "en_US",
            "components": [
                {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped."},
                {"type": "FOOTER", "text": "Reply STOP to opt out"},
            ],
            "status": "approved",
            "parameters": {"BODY": 2},
            "rejection_reason": None,
            "provider_template_id": "1234567890",
            "library_item_id": None,
            "submitted_at": "2026-11-21T10:00:00.000Z",
            "status_updated_at": "2026-11-21T10:00:00.000Z",
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )
    id: str = Field(description="the template's id")
    organization_id: str = Field(description="the organization that owns it (`org_…`)")
    channel_id: str = Field(description="the channel whose provider holds the template")
    name: str = Field(description="lower case letters, digits and `_`; unique per channel with the language")
    category: Category = Field(description="what the template is for; a provider may recategorise it")
    language: str = Field(description="language code, e.g. `en_US`")
    components: list[dict[str, Any]] = Field(
        description="the template's HEADER, BODY, FOOTER and BUTTONS parts as stored"
    )
    status: TemplateStatus = Field(
        description="`draft` → `pending` (submitted) → `approved` or `rejected`; the provider may pause or disable it"
    )
    parameters: dict[str, int] = Field(default_factory=dict, description="parameter count per component type")
    rejection_reason: str | None = Field(default=None, description="why the provider rejected it")
    provider_template_id: str | None = Field(
        default=None, description="the template's id at the provider, once submitted"
    )
    library_item_id: str | None = None
    submitted_at: Timestamp | None = None
    status_updated_at: Timestamp | None = None
    created_at: Timestamp
    updated_at: Timestamp


class TemplateDuplicate(Strict):
    """Where the copy goes; every field is optional."""

    openapi_examples = ({"name": "order_shipped_es", "language": "es"},)
    name: str | None = Field(default=None, pattern=NAME, description="default: `<name>_copy`")
    channel_id: str | None = Field(
        default=None, min_length=1, max_length=64, description="the channel of the copy (default: the template's)"
    )
    language: str | None = Field(
        default=None, pattern=LANGUAGE, description="the copy's language (default: the template's)"
    )


class TemplateSyncRequest(Strict):
    """The channel to sync; absent means every channel."""

    openapi_examples = ({"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k"},)
    channel_id: str | None = Field(default=None, min_length=1, max_length=64, description="default: every channel")


class TemplateChange(BaseModel):
    """A template whose status changed at the provider."""

    openapi_examples = (
        {
            "template_id": "tpl_01jd8xa1b2c3d4e5f6g7h8j9k0",
            "previous_status": "pending",
            "status": "approved",
            "category": "UTILITY",
        },
    )
    template_id: str = Field(description="the template")
    previous_status: TemplateStatus = Field(description="the status before the sync")
    status: TemplateStatus = Field(description="the status at the provider now")
    category: Category | None = Field(default=None, description="the category the provider gave it, when it changed")


class TemplateSyncResult(BaseModel):
    """What a sync checked and changed."""

    openapi_examples = (
        {
            "channels": ["ch_01jd8w5a6b7c8d9e0f1g2h3j4k"],
            "checked": 3,
            "changed": [
                {
                    "template_id": "tpl_01jd8xa1b2c3d4e5f6g7h8j9k0",
                    "previous_status": "pending",
                    "status": "approved",
                    "category": "UTILITY",
                }
            ],
            "unsupported_channels": [],
        },
    )
    channels: list[str] = Field(description="the channels checked")
    checked: int = Field(description="templates checked")
    changed: list[TemplateChange] = Field(description="whether this request changed anything")
    unsupported_channels: list[str] = Field(
        default_factory=list, description="channels whose provider has no templates"
    )


class LibraryItem(BaseModel):
    """A ready-made template of the library."""

    openapi_examples = (
        {
            "id": "lib_order_confirmation",
            "name": "order_confirmation",
            "description": "Confirms an order with its number and expected delivery date.",
            "category": "UTILITY",
            "language": "en_US",
            "components": [
                {"type": "BODY", "text": "Hi {{1}}, your order {{2}} is confirmed and should arrive by {{3}}."}
            ],
        },
    )
    id: str = Field(description="the library template's id")
    name: str = Field(description="the library template's name")
    description: str = Field(description="free text about the library template")
    category: Category
    language: str = Field(description="language code, e.g. `en_US`")
    components: list[dict[str, Any]] = Field(description="the template's parts")


class LibraryImport(Strict):
    """The channel (and optionally the name and language) of the imported template."""

    openapi_examples = ({"channel_id": "ch_01jd8w5a6b7c8d9e0f1g2h3j4k"},)
    channel_id: str = ID
    name: str | None = Field(default=None, pattern=NAME, description="default: the library item's name")
    language: str | None = Field(default=None, pattern=LANGUAGE, description="default: the library item's language")
