"""Catalog routes: labels, chat and call actions, message templates and their library.

The conversation label and history-sync routes (`/v1/conversations/{convID}/labels…`, `/history-sync`) live in
functions/messaging (the gateway sends `/v1/conversations/*` there); the rules of both are in `switchboard.catalog`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.catalog import chats, labels, models, templates
    from switchboard.messaging import models as messaging_models
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    chats = lazy_module("switchboard.catalog.chats")
    labels = lazy_module("switchboard.catalog.labels")
    messaging_models = lazy_module("switchboard.messaging.models")
    models = lazy_module("switchboard.catalog.models")
    templates = lazy_module("switchboard.catalog.templates")

app = create_resolver()
# Path parameters, described once for every route of the group.
LabelID = Annotated[str, Path(description="the label's id (`lb_…`)")]
TemplateID = Annotated[str, Path(description="the template's id (`tpl_…`)")]
LibraryItemID = Annotated[str, Path(description="the library template's id (`lib_…`)")]
LBL = ["labels"]
CHATS = ["chats and calls"]
TPL = ["templates"]


# Labels ------------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/labels",
    middlewares=requires("member"),
    tags=LBL,
    status_code=201,
    summary="Create a label",
    description=(
        "Adds a label to the organization's catalogue. 409 `conflict` when the name is taken "
        "(case-insensitive). Role: member or above."
    ),
)
def create_label(body: Annotated[models.LabelCreate, Body()]) -> Data[models.Label]:
    """A name is unique per organization (case-insensitive): a taken name is 409 `conflict`."""
    return Data(data=labels.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/labels",
    middlewares=requires("viewer"),
    tags=LBL,
    summary="List labels",
    description=(
        "The organization's labels. Cursor-paginated: pass `meta.cursor` back as `cursor` while "
        "`meta.has_more` is true. Role: viewer or above."
    ),
)
def list_labels(
    limit: Annotated[int, Query(ge=1, le=100, description="page size")] = 20,
    cursor: Annotated[
        str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
    ] = None,
) -> ListData[models.Label]:
    items, nxt = labels.list_labels(get_store(), current_auth(app), limit, cursor)
    return cursor_list(items, limit, nxt)


@app.post(
    "/v1/labels/chats/attach",
    middlewares=requires("member"),
    tags=LBL,
    summary="Label a chat",
    description=(
        "Attaches a label to a conversation, named by `conversation_id` or by `chat_id` (a phone "
        "/ JID; `channel_id` picks the channel when the contact talks on several, else 400 "
        "`validation_failed`). One `conversation.updated` per change; the label is mirrored at "
        "the channel's provider when it supports labels (`provider_sync`). 404 `not_found` for an"
        " unknown label or chat. Role: member or above."
    ),
)
def attach_chat_label(body: Annotated[models.ChatLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    """`{label_id, conversation_id}` or `{label_id, chat_id, channel_id?}`; one `conversation.updated` per change."""
    return Data(data=labels.chat_label(get_store(), current_auth(app), body, attach=True))


@app.post(
    "/v1/labels/chats/detach",
    middlewares=requires("member"),
    tags=LBL,
    summary="Unlabel a chat",
    description=(
        "Detaches a label from a conversation; same body and answers as `POST "
        "/v1/labels/chats/attach`. Role: member or above."
    ),
)
def detach_chat_label(body: Annotated[models.ChatLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    return Data(data=labels.chat_label(get_store(), current_auth(app), body, attach=False))


@app.post(
    "/v1/labels/messages/attach",
    middlewares=requires("member"),
    tags=LBL,
    summary="Label a message",
    description=(
        "Attaches a label to a message. 404 `not_found` for an unknown label or message. Role: member or above."
    ),
)
def attach_message_label(body: Annotated[models.MessageLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    return Data(data=labels.message_label(get_store(), current_auth(app), body, attach=True))


@app.post(
    "/v1/labels/messages/detach",
    middlewares=requires("member"),
    tags=LBL,
    summary="Unlabel a message",
    description=(
        "Detaches a label from a message. 404 `not_found` for an unknown label or message. Role: member or above."
    ),
)
def detach_message_label(body: Annotated[models.MessageLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    return Data(data=labels.message_label(get_store(), current_auth(app), body, attach=False))


@app.get(
    "/v1/labels/<labelID>",
    middlewares=requires("viewer"),
    tags=LBL,
    summary="Get a label",
    description=("Reads one label. 404 `not_found` when the label is not in your organization. Role: viewer or above."),
)
def get_label(labelID: LabelID) -> Data[models.Label]:
    return Data(data=labels.get(get_store(), current_auth(app), labelID))


@app.patch(
    "/v1/labels/<labelID>",
    middlewares=requires("member"),
    tags=LBL,
    summary="Update a label",
    description=(
        "Renames, recolours or re-describes a label. 409 `conflict` when the new name is taken. "
        "404 `not_found` when the label is not in your organization. Role: member or above."
    ),
)
def update_label(labelID: LabelID, body: Annotated[models.LabelUpdate, Body()]) -> Data[models.Label]:
    return Data(data=labels.update(get_store(), current_auth(app), labelID, body))


@app.delete(
    "/v1/labels/<labelID>",
    middlewares=requires("member"),
    tags=LBL,
    status_code=204,
    summary="Delete a label",
    description=(
        "Deletes the label from the catalogue at once; the `label.detach` job detaches it from "
        "every conversation (one `conversation.updated` each) and message. 404 `not_found` when "
        "the label is not in your organization. Role: member or above."
    ),
)
def delete_label(labelID: LabelID) -> None:
    """Deleted from the catalogue at once; the `label.detach` job detaches it from every conversation (one
    `conversation.updated` each) and message."""
    labels.delete(get_store(), current_auth(app), labelID)


# Chats and calls ---------------------------------------------------------------------------------------------------
def _chat(body: models.ChatRequest, action: str) -> Data[messaging_models.Conversation]:
    return Data(data=chats.chat_action(get_store(), current_auth(app), body, action))


@app.post(
    "/v1/chats/archive",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Archive a chat",
    description=(
        "Archives the conversation. `chat_id` is the contact's phone / JID or a conversation id "
        "of `channel_id`; answers the conversation. 404 `not_found` when the channel has no such "
        "conversation. Role: member or above."
    ),
)
def archive_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    """`chat_id`: the contact's phone / JID or a conversation id of `channel_id`. Answers the conversation."""
    return _chat(body, "archive")


@app.post(
    "/v1/chats/unarchive",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Unarchive a chat",
    description=(
        "Moves the conversation out of the archive. `chat_id` is the contact's phone / JID or a "
        "conversation id of `channel_id`; answers the conversation. 404 `not_found` when the "
        "channel has no such conversation. Role: member or above."
    ),
)
def unarchive_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "unarchive")


@app.post(
    "/v1/chats/mute",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Mute a chat",
    description=(
        "Mutes the conversation until `until` (ISO 8601, in the future) or until unmuted. "
        "`chat_id` is the contact's phone / JID or a conversation id of `channel_id`; answers the"
        " conversation. 404 `not_found` when the channel has no such conversation. Role: member "
        "or above."
    ),
)
def mute_chat(body: Annotated[models.ChatMuteRequest, Body()]) -> Data[messaging_models.Conversation]:
    """`until` (ISO 8601, future) or muted until unmuted."""
    return _chat(body, "mute")


@app.post(
    "/v1/chats/unmute",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Unmute a chat",
    description=(
        "Unmutes the conversation. `chat_id` is the contact's phone / JID or a conversation id of"
        " `channel_id`; answers the conversation. 404 `not_found` when the channel has no such "
        "conversation. Role: member or above."
    ),
)
def unmute_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "unmute")


@app.post(
    "/v1/chats/pin",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Pin a chat",
    description=(
        "Pins the conversation. `chat_id` is the contact's phone / JID or a conversation id of "
        "`channel_id`; answers the conversation. 404 `not_found` when the channel has no such "
        "conversation. Role: member or above."
    ),
)
def pin_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "pin")


@app.post(
    "/v1/chats/unpin",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Unpin a chat",
    description=(
        "Unpins the conversation. `chat_id` is the contact's phone / JID or a conversation id of "
        "`channel_id`; answers the conversation. 404 `not_found` when the channel has no such "
        "conversation. Role: member or above."
    ),
)
def unpin_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "unpin")


@app.post(
    "/v1/chats/history-sync",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Request a chat history sync",
    description=(
        "Asks the channel for the conversation's earlier messages; the answer tracks the sync "
        "(`requested`, then `completed`; the sandbox completes it at once). 404 `not_found` when "
        "the channel has no such conversation; 400 `unsupported_by_provider` when its provider "
        "cannot sync history. Role: member or above."
    ),
)
def chat_history_sync(body: Annotated[models.ChatRequest, Body()]) -> Data[models.HistorySync]:
    """Records a history sync of the chat; the sandbox completes it at once."""
    return Data(data=chats.chat_history_sync(get_store(), current_auth(app), body))


@app.post(
    "/v1/calls/reject",
    middlewares=requires("member"),
    tags=CHATS,
    summary="Reject an incoming call",
    description=(
        "Rejects a ringing call on the channel. 400 `unsupported_by_provider` when the channel's "
        "provider cannot reject calls (the sandbox cannot); 404 `not_found` for an unknown "
        "channel. Role: member or above."
    ),
)
def reject_call(body: Annotated[models.CallReject, Body()]) -> Data[models.CallRejected]:
    """400 `unsupported_by_provider` when the channel's provider cannot reject calls (the sandbox cannot)."""
    return Data(data=chats.reject_call(get_store(), current_auth(app), body))


# Templates ---------------------------------------------------------------------------------------------------------
@app.post(
    "/v1/templates",
    middlewares=requires("admin"),
    tags=TPL,
    status_code=201,
    summary="Create a message template",
    description=(
        "Creates a `draft` template for a channel; `submit` it for approval. Name + language are "
        "unique per channel (409 `conflict`); 400 `validation_failed` for components that break "
        "the template rules (one BODY with text, parameters numbered `{{1}}`, `{{2}}`…). Role: "
        "admin or above."
    ),
)
def create_template(body: Annotated[models.TemplateCreate, Body()]) -> Data[models.Template]:
    """A `draft`; `submit` it for approval. Name + language are unique per channel."""
    return Data(data=templates.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/templates",
    middlewares=requires("viewer"),
    tags=TPL,
    summary="List message templates",
    description=(
        "Templates filtered by `status`, `channel_id`, `category` and `name`. Cursor-paginated: "
        "pass `meta.cursor` back as `cursor` while `meta.has_more` is true. Role: viewer or "
        "above."
    ),
)
def list_templates(
    limit: Annotated[int, Query(ge=1, le=100, description="page size")] = 20,
    cursor: Annotated[
        str | None, Query(max_length=2048, description="`meta.cursor` of the previous page; absent for the first page")
    ] = None,
    status: Annotated[models.TemplateStatus | None, Query(description="only templates in this status")] = None,
    channel_id: Annotated[str | None, Query(max_length=64, description="only this channel's")] = None,
    category: Annotated[models.Category | None, Query(description="only this category")] = None,
    name: Annotated[str | None, Query(max_length=512, description="only templates of this name")] = None,
) -> ListData[models.Template]:
    items, nxt = templates.list_templates(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        status=status,
        channel_id=channel_id,
        category=category,
        name=name,
    )
    return cursor_list(items, limit, nxt)


@app.post(
    "/v1/templates/sync",
    middlewares=requires("admin"),
    tags=TPL,
    summary="Sync template statuses",
    description=(
        "Pulls the statuses of submitted templates from each channel's provider (one "
        "`template.status_update` per change); channels whose provider has no templates are "
        "listed in `unsupported_channels`. Role: admin or above."
    ),
)
def sync_templates(
    body: Annotated[models.TemplateSyncRequest | None, Body()] = None,
) -> Data[models.TemplateSyncResult]:
    """Pulls the statuses of submitted templates from each channel's provider (`template.status_update` per change)."""
    return Data(data=templates.sync(get_store(), current_auth(app), body or models.TemplateSyncRequest()))


@app.get(
    "/v1/templates/library",
    middlewares=requires("viewer"),
    tags=TPL,
    summary="Browse the template library",
    description=(
        "Ready-made templates shipped with Switchboard, filtered by `category` and `language`; "
        "`POST /v1/templates/library/{libraryItemID}` imports one. Not paginated. Role: viewer or"
        " above."
    ),
)
def template_library(
    category: Annotated[models.Category | None, Query(description="only this category")] = None,
    language: Annotated[str | None, Query(max_length=16, description="only this language, e.g. `en_US`")] = None,
) -> ListData[models.LibraryItem]:
    """Ready-made templates shipped with Switchboard; `POST /v1/templates/library/{libraryItemID}` imports one."""
    items = templates.library(category, language)
    return whole_list(items)


@app.get(
    "/v1/templates/library/<libraryItemID>",
    middlewares=requires("viewer"),
    tags=TPL,
    summary="Get a library template",
    description="Reads one library template. 404 `not_found` for an unknown item. Role: viewer or above.",
)
def template_library_item(libraryItemID: LibraryItemID) -> Data[models.LibraryItem]:
    return Data(data=templates.library_item(libraryItemID))


@app.post(
    "/v1/templates/library/<libraryItemID>",
    middlewares=requires("admin"),
    tags=TPL,
    status_code=201,
    summary="Import a library template",
    description=(
        "Creates a `draft` template of `channel_id` from a library item. 404 `not_found` for an "
        "unknown item or channel; 409 `conflict` when the name and language are taken on the "
        "channel. Role: admin or above."
    ),
)
def import_library_template(
    libraryItemID: LibraryItemID, body: Annotated[models.LibraryImport, Body()]
) -> Data[models.Template]:
    """Imports the library template as a `draft` of `channel_id`."""
    return Data(data=templates.import_library_item(get_store(), current_auth(app), libraryItemID, body))


@app.get(
    "/v1/templates/<templateID>",
    middlewares=requires("viewer"),
    tags=TPL,
    summary="Get a message template",
    description=(
        "Reads one template with its status and parameter counts. 404 `not_found` when the "
        "template is not in your organization. Role: viewer or above."
    ),
)
def get_template(templateID: TemplateID) -> Data[models.Template]:
    return Data(data=templates.get(get_store(), current_auth(app), templateID))


@app.patch(
    "/v1/templates/<templateID>",
    middlewares=requires("admin"),
    tags=TPL,
    summary="Update a message template",
    description=(
        "Edits a `draft` or `rejected` template (a rejected one becomes a `draft`); other states "
        "are 409 `conflict`. 404 `not_found` when the template is not in your organization. Role:"
        " admin or above."
    ),
)
def update_template(templateID: TemplateID, body: Annotated[models.TemplateUpdate, Body()]) -> Data[models.Template]:
    """Only `draft` and `rejected` templates (a rejected one becomes a `draft`); others are 409 `conflict`."""
    return Data(data=templates.update(get_store(), current_auth(app), templateID, body))


@app.delete(
    "/v1/templates/<templateID>",
    middlewares=requires("admin"),
    tags=TPL,
    status_code=204,
    summary="Delete a message template",
    description=(
        "Deletes the template (and, best effort, at the channel's provider). 404 `not_found` when"
        " the template is not in your organization. Role: admin or above."
    ),
)
def delete_template(templateID: TemplateID) -> None:
    templates.delete(get_store(), current_auth(app), templateID)


@app.post(
    "/v1/templates/<templateID>/duplicate",
    middlewares=requires("admin"),
    tags=TPL,
    status_code=201,
    summary="Duplicate a message template",
    description=(
        "Creates a new `draft` copy (default name `<name>_copy`), optionally for another channel "
        "or language. 409 `conflict` when the name and language are taken. 404 `not_found` when "
        "the template is not in your organization. Role: admin or above."
    ),
)
def duplicate_template(
    templateID: TemplateID, body: Annotated[models.TemplateDuplicate | None, Body()] = None
) -> Data[models.Template]:
    """A new `draft` copy (default name `<name>_copy`)."""
    return Data(
        data=templates.duplicate(get_store(), current_auth(app), templateID, body or models.TemplateDuplicate())
    )


@app.post(
    "/v1/templates/<templateID>/submit",
    middlewares=requires("admin"),
    tags=TPL,
    summary="Submit a template for approval",
    description=(
        "`draft` / `rejected` → `pending` at the channel's provider (a provider that decides at "
        "once moves it on); other states are 409 `conflict`; 400 `unsupported_by_provider` when "
        "the provider has no templates. 404 `not_found` when the template is not in your "
        "organization. Role: admin or above."
    ),
)
def submit_template(templateID: TemplateID) -> Data[models.Template]:
    """`draft` / `rejected` → `pending` at the channel's provider; other states are 409 `conflict`."""
    return Data(data=templates.submit(get_store(), current_auth(app), templateID))


handler = make_handler(app)
