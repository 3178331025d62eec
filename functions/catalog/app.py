"""Catalog routes: labels, chat and call actions, message templates and their library.

The conversation label and history-sync routes (`/v1/conversations/{convID}/labels…`, `/history-sync`) live in
functions/messaging (the gateway sends `/v1/conversations/*` there); the rules of both are in `switchboard.catalog`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query

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
LBL = ["labels"]
CHATS = ["chats and calls"]
TPL = ["templates"]


# Labels ------------------------------------------------------------------------------------------------------------
@app.post("/v1/labels", middlewares=requires("member"), tags=LBL, status_code=201)
def create_label(body: Annotated[models.LabelCreate, Body()]) -> Data[models.Label]:
    """A name is unique per organization (case-insensitive): a taken name is 409 `conflict`."""
    return Data(data=labels.create(get_store(), current_auth(app), body))


@app.get("/v1/labels", middlewares=requires("viewer"), tags=LBL)
def list_labels(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[models.Label]:
    items, nxt = labels.list_labels(get_store(), current_auth(app), limit, cursor)
    return cursor_list(items, limit, nxt)


@app.post("/v1/labels/chats/attach", middlewares=requires("member"), tags=LBL)
def attach_chat_label(body: Annotated[models.ChatLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    """`{label_id, conversation_id}` or `{label_id, chat_id, channel_id?}`; one `conversation.updated` per change."""
    return Data(data=labels.chat_label(get_store(), current_auth(app), body, attach=True))


@app.post("/v1/labels/chats/detach", middlewares=requires("member"), tags=LBL)
def detach_chat_label(body: Annotated[models.ChatLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    return Data(data=labels.chat_label(get_store(), current_auth(app), body, attach=False))


@app.post("/v1/labels/messages/attach", middlewares=requires("member"), tags=LBL)
def attach_message_label(body: Annotated[models.MessageLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    return Data(data=labels.message_label(get_store(), current_auth(app), body, attach=True))


@app.post("/v1/labels/messages/detach", middlewares=requires("member"), tags=LBL)
def detach_message_label(body: Annotated[models.MessageLabelRequest, Body()]) -> Data[models.LabelAttachment]:
    return Data(data=labels.message_label(get_store(), current_auth(app), body, attach=False))


@app.get("/v1/labels/<labelID>", middlewares=requires("viewer"), tags=LBL)
def get_label(labelID: str) -> Data[models.Label]:
    return Data(data=labels.get(get_store(), current_auth(app), labelID))


@app.patch("/v1/labels/<labelID>", middlewares=requires("member"), tags=LBL)
def update_label(labelID: str, body: Annotated[models.LabelUpdate, Body()]) -> Data[models.Label]:
    return Data(data=labels.update(get_store(), current_auth(app), labelID, body))


@app.delete("/v1/labels/<labelID>", middlewares=requires("member"), tags=LBL, status_code=204)
def delete_label(labelID: str) -> None:
    """Deleted from the catalogue at once; the `label.detach` job detaches it from every conversation (one
    `conversation.updated` each) and message."""
    labels.delete(get_store(), current_auth(app), labelID)


# Chats and calls ---------------------------------------------------------------------------------------------------
def _chat(body: models.ChatRequest, action: str) -> Data[messaging_models.Conversation]:
    return Data(data=chats.chat_action(get_store(), current_auth(app), body, action))


@app.post("/v1/chats/archive", middlewares=requires("member"), tags=CHATS)
def archive_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    """`chat_id`: the contact's phone / JID or a conversation id of `channel_id`. Answers the conversation."""
    return _chat(body, "archive")


@app.post("/v1/chats/unarchive", middlewares=requires("member"), tags=CHATS)
def unarchive_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "unarchive")


@app.post("/v1/chats/mute", middlewares=requires("member"), tags=CHATS)
def mute_chat(body: Annotated[models.ChatMuteRequest, Body()]) -> Data[messaging_models.Conversation]:
    """`until` (ISO 8601, future) or muted until unmuted."""
    return _chat(body, "mute")


@app.post("/v1/chats/unmute", middlewares=requires("member"), tags=CHATS)
def unmute_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "unmute")


@app.post("/v1/chats/pin", middlewares=requires("member"), tags=CHATS)
def pin_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "pin")


@app.post("/v1/chats/unpin", middlewares=requires("member"), tags=CHATS)
def unpin_chat(body: Annotated[models.ChatRequest, Body()]) -> Data[messaging_models.Conversation]:
    return _chat(body, "unpin")


@app.post("/v1/chats/history-sync", middlewares=requires("member"), tags=CHATS)
def chat_history_sync(body: Annotated[models.ChatRequest, Body()]) -> Data[models.HistorySync]:
    """Records a history sync of the chat; the sandbox completes it at once."""
    return Data(data=chats.chat_history_sync(get_store(), current_auth(app), body))


@app.post("/v1/calls/reject", middlewares=requires("member"), tags=CHATS)
def reject_call(body: Annotated[models.CallReject, Body()]) -> Data[models.CallRejected]:
    """400 `unsupported_by_provider` when the channel's provider cannot reject calls (the sandbox cannot)."""
    return Data(data=chats.reject_call(get_store(), current_auth(app), body))


# Templates ---------------------------------------------------------------------------------------------------------
@app.post("/v1/templates", middlewares=requires("admin"), tags=TPL, status_code=201)
def create_template(body: Annotated[models.TemplateCreate, Body()]) -> Data[models.Template]:
    """A `draft`; `submit` it for approval. Name + language are unique per channel."""
    return Data(data=templates.create(get_store(), current_auth(app), body))


@app.get("/v1/templates", middlewares=requires("viewer"), tags=TPL)
def list_templates(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    status: Annotated[str | None, Query(pattern="^(draft|pending|approved|rejected|paused|disabled)$")] = None,
    channel_id: Annotated[str | None, Query(max_length=64)] = None,
    category: Annotated[str | None, Query(pattern="^(MARKETING|UTILITY|AUTHENTICATION)$")] = None,
    name: Annotated[str | None, Query(max_length=512)] = None,
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


@app.post("/v1/templates/sync", middlewares=requires("admin"), tags=TPL)
def sync_templates(
    body: Annotated[models.TemplateSyncRequest | None, Body()] = None,
) -> Data[models.TemplateSyncResult]:
    """Pulls the statuses of submitted templates from each channel's provider (`template.status_update` per change)."""
    return Data(data=templates.sync(get_store(), current_auth(app), body or models.TemplateSyncRequest()))


@app.get("/v1/templates/library", middlewares=requires("viewer"), tags=TPL)
def template_library(
    category: Annotated[str | None, Query(pattern="^(MARKETING|UTILITY|AUTHENTICATION)$")] = None,
    language: Annotated[str | None, Query(max_length=16)] = None,
) -> ListData[models.LibraryItem]:
    """Ready-made templates shipped with Switchboard; `POST /v1/templates/library/{libraryItemID}` imports one."""
    items = templates.library(category, language)
    return whole_list(items)


@app.get("/v1/templates/library/<libraryItemID>", middlewares=requires("viewer"), tags=TPL)
def template_library_item(libraryItemID: str) -> Data[models.LibraryItem]:
    return Data(data=templates.library_item(libraryItemID))


@app.post("/v1/templates/library/<libraryItemID>", middlewares=requires("admin"), tags=TPL, status_code=201)
def import_library_template(libraryItemID: str, body: Annotated[models.LibraryImport, Body()]) -> Data[models.Template]:
    """Imports the library template as a `draft` of `channel_id`."""
    return Data(data=templates.import_library_item(get_store(), current_auth(app), libraryItemID, body))


@app.get("/v1/templates/<templateID>", middlewares=requires("viewer"), tags=TPL)
def get_template(templateID: str) -> Data[models.Template]:
    return Data(data=templates.get(get_store(), current_auth(app), templateID))


@app.patch("/v1/templates/<templateID>", middlewares=requires("admin"), tags=TPL)
def update_template(templateID: str, body: Annotated[models.TemplateUpdate, Body()]) -> Data[models.Template]:
    """Only `draft` and `rejected` templates (a rejected one becomes a `draft`); others are 409 `conflict`."""
    return Data(data=templates.update(get_store(), current_auth(app), templateID, body))


@app.delete("/v1/templates/<templateID>", middlewares=requires("admin"), tags=TPL, status_code=204)
def delete_template(templateID: str) -> None:
    templates.delete(get_store(), current_auth(app), templateID)


@app.post("/v1/templates/<templateID>/duplicate", middlewares=requires("admin"), tags=TPL, status_code=201)
def duplicate_template(
    templateID: str, body: Annotated[models.TemplateDuplicate | None, Body()] = None
) -> Data[models.Template]:
    """A new `draft` copy (default name `<name>_copy`)."""
    return Data(
        data=templates.duplicate(get_store(), current_auth(app), templateID, body or models.TemplateDuplicate())
    )


@app.post("/v1/templates/<templateID>/submit", middlewares=requires("admin"), tags=TPL)
def submit_template(templateID: str) -> Data[models.Template]:
    """`draft` / `rejected` → `pending` at the channel's provider; other states are 409 `conflict`."""
    return Data(data=templates.submit(get_store(), current_auth(app), templateID))


handler = make_handler(app)
