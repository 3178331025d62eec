"""Labels, chats and calls, and message templates as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from switchboard.models import BaseModel, Name, Storable, Strict, Timestamp

ID = Field(min_length=1, max_length=64)
COLOR = r"^#[0-9a-fA-F]{6}$"


# Labels ------------------------------------------------------------------------------------------------------------
class Label(BaseModel):
    id: str
    organization_id: str
    name: str
    color: str
    description: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class LabelCreate(Strict):
    name: Name = Field(min_length=1, max_length=100, description="unique per organization (case-insensitive)")
    color: str = Field(default="#9e9e9e", pattern=COLOR, description="`#rrggbb`")
    description: str | None = Field(default=None, max_length=500)


class LabelUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    color: str | None = Field(default=None, pattern=COLOR)
    description: str | None = Field(default=None, max_length=500)


class ChatLabelRequest(Strict):
    """`{label_id, conversation_id}` or `{label_id, chat_id}` (a phone/JID or conversation id; `channel_id` picks
    the channel when the contact talks on several)."""

    label_id: str = ID
    conversation_id: str | None = Field(default=None, min_length=1, max_length=64)
    chat_id: str | None = Field(default=None, min_length=1, max_length=128)
    channel_id: str | None = Field(default=None, min_length=1, max_length=64)
    exactly_one_of = (("conversation_id", "chat_id"),)  # checked in labels.chat_label


class MessageLabelRequest(Strict):
    label_id: str = ID
    message_id: str = ID


class ConversationLabelAdd(Strict):
    """`{label_id}`, or `{name}` (a new name joins the `/v1/labels` catalogue)."""

    label_id: str | None = Field(default=None, min_length=1, max_length=64)
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    color: str | None = Field(default=None, pattern=COLOR)
    exactly_one_of = (("label_id", "name"),)  # checked in labels.add_to_conversation


class LabelAttachment(BaseModel):
    label_id: str
    conversation_id: str | None = None
    message_id: str | None = None
    attached: bool
    changed: bool
    labels: list[str] = Field(default_factory=list, description="the target's label ids after the change")
    provider_sync: Literal["synced", "unsupported", "failed"] | None = Field(
        default=None, description="the mirror at the channel's provider (best effort), when something changed"
    )


# Chats and calls ---------------------------------------------------------------------------------------------------
class ChatRequest(Strict):
    channel_id: str = ID
    chat_id: str = Field(min_length=1, max_length=128, description="the contact's phone / JID, or a conversation id")


class ChatMuteRequest(ChatRequest):
    until: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}T")


class CallReject(Strict):
    channel_id: str = ID
    call_id: str = Field(min_length=1, max_length=256)
    from_: str | None = Field(default=None, alias="from", min_length=3, max_length=128, description="caller phone/JID")


class CallRejected(BaseModel):
    channel_id: str
    call_id: str
    status: Literal["rejected"] = "rejected"
    provider: dict[str, Any] = Field(default_factory=dict)


class HistorySync(BaseModel):
    id: str
    conversation_id: str
    channel_id: str
    status: Literal["requested", "completed"]
    messages_synced: int | None = None
    requested_at: Timestamp
    completed_at: Timestamp | None = None


# Templates ---------------------------------------------------------------------------------------------------------
Category = Literal["MARKETING", "UTILITY", "AUTHENTICATION"]
TemplateStatus = Literal["draft", "pending", "approved", "rejected", "paused", "disabled"]
NAME = r"^[a-z0-9_]{1,512}$"
LANGUAGE = r"^[a-z]{2,3}(_[A-Z]{2})?$"


class TemplateButton(Strict):
    type: Literal["QUICK_REPLY", "URL", "PHONE_NUMBER", "COPY_CODE", "OTP"]
    text: str = Field(min_length=1, max_length=25)
    url: str | None = Field(default=None, max_length=2000, pattern=r"^https://")
    phone_number: str | None = Field(default=None, max_length=20)
    example: list[str] | None = Field(default=None, max_length=5)


class TemplateComponent(Strict):
    type: Literal["HEADER", "BODY", "FOOTER", "BUTTONS"]
    format: Literal["TEXT", "IMAGE", "VIDEO", "DOCUMENT", "LOCATION"] | None = None
    text: str | None = Field(default=None, min_length=1, max_length=1024, description="`{{1}}`, `{{2}}`… parameters")
    buttons: list[TemplateButton] | None = Field(default=None, min_length=1, max_length=10)
    example: Annotated[dict[str, Any], Storable] | None = None


class TemplateCreate(Strict):
    channel_id: str = ID
    name: str = Field(pattern=NAME, description="lower case letters, digits and `_`")
    category: Category
    language: str = Field(default="en_US", pattern=LANGUAGE)
    components: list[TemplateComponent] = Field(min_length=1, max_length=10)


class TemplateUpdate(Strict):
    """Only `draft` and `rejected` templates can be edited (a rejected one goes back to `draft`)."""

    name: str | None = Field(default=None, pattern=NAME)
    category: Category | None = None
    language: str | None = Field(default=None, pattern=LANGUAGE)
    components: list[TemplateComponent] | None = Field(default=None, min_length=1, max_length=10)


class Template(BaseModel):
    id: str
    organization_id: str
    channel_id: str
    name: str
    category: str
    language: str
    components: list[dict[str, Any]]
    status: TemplateStatus
    parameters: dict[str, int] = Field(default_factory=dict, description="parameter count per component type")
    rejection_reason: str | None = None
    provider_template_id: str | None = None
    library_item_id: str | None = None
    submitted_at: Timestamp | None = None
    status_updated_at: Timestamp | None = None
    created_at: Timestamp
    updated_at: Timestamp


class TemplateDuplicate(Strict):
    name: str | None = Field(default=None, pattern=NAME, description="default: `<name>_copy`")
    channel_id: str | None = Field(default=None, min_length=1, max_length=64)
    language: str | None = Field(default=None, pattern=LANGUAGE)


class TemplateSyncRequest(Strict):
    channel_id: str | None = Field(default=None, min_length=1, max_length=64, description="default: every channel")


class TemplateChange(BaseModel):
    template_id: str
    previous_status: str
    status: str
    category: str | None = None


class TemplateSyncResult(BaseModel):
    channels: list[str]
    checked: int
    changed: list[TemplateChange]
    unsupported_channels: list[str] = Field(default_factory=list)


class LibraryItem(BaseModel):
    id: str
    name: str
    description: str
    category: str
    language: str
    components: list[dict[str, Any]]


class LibraryImport(Strict):
    channel_id: str = ID
    name: str | None = Field(default=None, pattern=NAME, description="default: the library item's name")
    language: str | None = Field(default=None, pattern=LANGUAGE)
