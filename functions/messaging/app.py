"""Messaging routes: channels, messages, conversations, and the providers' inbound callbacks."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from switchboard.api.app import PUBLIC, create_resolver, make_handler
from switchboard.api.auth import public, requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, Meta, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.errors import ValidationFailed
from switchboard.identity.passwords import hash_password
from switchboard.models import MEDIA_ID_MAX, MEDIA_ID_PATTERN
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.catalog import models as catalog_models
    from switchboard.groups import models as group_models
    from switchboard.messaging import callbacks, channels, cloud_webhook, conversations, media, messages, models
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    callbacks = lazy_module("switchboard.messaging.callbacks")
    catalog_models = lazy_module("switchboard.catalog.models")
    channels = lazy_module("switchboard.messaging.channels")
    cloud_webhook = lazy_module("switchboard.messaging.cloud_webhook")
    conversations = lazy_module("switchboard.messaging.conversations")
    group_models = lazy_module("switchboard.groups.models")
    media = lazy_module("switchboard.messaging.media")
    messages = lazy_module("switchboard.messaging.messages")
    models = lazy_module("switchboard.messaging.models")

app = create_resolver()
# The spec: "Path parameter messageID (string, required, UUID)"; message ids are UUIDv7 (CONVENTIONS).
MessageId = Annotated[
    str,
    Path(
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
        description="the message's id (a UUID)",
    ),
]
CH = ["channels"]
MSG = ["messages"]
CONV = ["conversations"]


# Channels ----------------------------------------------------------------------------------------------------------
@app.post("/v1/channels", middlewares=requires("admin"), tags=CH, status_code=201)
def create_channel(body: Annotated[models.ChannelCreate, Body()]) -> Data[models.Channel]:
    """A new channel starts `disconnected`; `connect` it next."""
    return Data(data=channels.create(get_store(), current_auth(app), body))


@app.get("/v1/channels", middlewares=requires("viewer"), tags=CH)
def list_channels(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ListData[models.Channel]:
    items, total = channels.list_channels(get_store(), current_auth(app), limit, offset)
    return ListData(data=items, meta=Meta(has_more=offset + limit < total, limit=limit, offset=offset, total=total))


@app.get("/v1/channels/<channelID>", middlewares=requires("viewer"), tags=CH)
def get_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.view(channels.get_item(get_store(), current_auth(app).org_id, channelID)))


@app.patch("/v1/channels/<channelID>", middlewares=requires("admin"), tags=CH)
def update_channel(channelID: str, body: Annotated[models.ChannelUpdate, Body()]) -> Data[models.Channel]:
    return Data(data=channels.update(get_store(), current_auth(app), channelID, body))


@app.delete("/v1/channels/<channelID>", middlewares=requires("admin"), tags=CH, status_code=204)
def delete_channel(channelID: str) -> None:
    channels.delete(get_store(), current_auth(app), channelID)


@app.post("/v1/channels/<channelID>/connect", middlewares=requires("admin"), tags=CH)
def connect_channel(channelID: str) -> Data[models.Channel]:
    """Sandbox channels connect at once; `whatsapp_web` goes to `pairing` and serves `/qr` and `/pairing-code`."""
    return Data(data=channels.connect(get_store(), current_auth(app), channelID))


@app.post("/v1/channels/<channelID>/disconnect", middlewares=requires("admin"), tags=CH)
def disconnect_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.disconnect(get_store(), current_auth(app), channelID))


@app.post("/v1/channels/<channelID>/reconnect", middlewares=requires("admin"), tags=CH)
def reconnect_channel(channelID: str) -> Data[models.Channel]:
    return Data(data=channels.reconnect(get_store(), current_auth(app), channelID, force=False))


@app.post("/v1/channels/<channelID>/reconnect/force", middlewares=requires("admin"), tags=CH)
def force_reconnect_channel(channelID: str) -> Data[models.Channel]:
    """Drops the provider session and connects again."""
    return Data(data=channels.reconnect(get_store(), current_auth(app), channelID, force=True))


@app.get("/v1/channels/<channelID>/status", middlewares=requires("viewer"), tags=CH)
def channel_status(channelID: str) -> Data[models.ChannelStatusView]:
    return Data(data=channels.status(get_store(), current_auth(app), channelID))


@app.get("/v1/channels/<channelID>/capabilities", middlewares=requires("viewer"), tags=CH)
def channel_capabilities(channelID: str) -> Data[models.Capabilities]:
    """What the channel's provider supports; anything else answers 400 `unsupported_by_provider`."""
    item, adapter = channels.provider(get_store(), current_auth(app), channelID)
    return Data(
        data=models.Capabilities(channel_id=item["id"], platform=item["platform"], capabilities=adapter.capabilities())
    )


@app.get("/v1/channels/<channelID>/logs", middlewares=requires("viewer"), tags=CH)
def channel_logs(
    channelID: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[models.ChannelLog]:
    items, nxt = channels.logs(get_store(), current_auth(app), channelID, limit, cursor)
    return cursor_list(items, limit, nxt)


@app.get("/v1/channels/<channelID>/qr", middlewares=requires("admin"), tags=CH)
def channel_qr(channelID: str) -> Data[models.QrCode]:
    item, adapter = channels.provider(get_store(), current_auth(app), channelID)
    qr = adapter.qr()
    return Data(data=models.QrCode(channel_id=item["id"], qr=qr["qr"], expires_in=qr.get("expires_in")))


@app.post("/v1/channels/<channelID>/pairing-code", middlewares=requires("admin"), tags=CH)
def channel_pairing_code(
    channelID: str, body: Annotated[models.PairingCodeRequest, Body()]
) -> Data[models.PairingCode]:
    # on first use: keeps switchboard.contacts.identifiers off the cold start
    from switchboard.contacts.identifiers import normalize_phone

    item, adapter = channels.provider(get_store(), current_auth(app), channelID)
    code = adapter.pairing_code(normalize_phone(body.phone_number, "body.phone_number"))
    return Data(data=models.PairingCode(channel_id=item["id"], code=code["code"]))


def _document(channel_id: str, name: str) -> Data[dict[str, Any]]:
    return Data(data=channels.get_document(get_store(), current_auth(app), channel_id, name))


def _put_document(channel_id: str, name: str, body: dict[str, Any]) -> Data[dict[str, Any]]:
    return Data(data=channels.put_document(get_store(), current_auth(app), channel_id, name, body))


@app.get("/v1/channels/<channelID>/settings/advanced", middlewares=requires("viewer"), tags=CH)
def get_advanced(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "advanced")


@app.put("/v1/channels/<channelID>/settings/advanced", middlewares=requires("admin"), tags=CH)
def put_advanced(channelID: str, body: Annotated[models.Document, Body()]) -> Data[dict[str, Any]]:
    return _put_document(channelID, "advanced", body.model_dump())


@app.get("/v1/channels/<channelID>/settings/phone", middlewares=requires("viewer"), tags=CH)
def get_phone_settings(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "phone")


@app.put("/v1/channels/<channelID>/settings/phone", middlewares=requires("admin"), tags=CH)
def put_phone_settings(channelID: str, body: Annotated[models.Document, Body()]) -> Data[dict[str, Any]]:
    return _put_document(channelID, "phone", body.model_dump())


@app.get("/v1/channels/<channelID>/settings/phone/two-step", middlewares=requires("admin"), tags=CH)
def get_two_step(channelID: str) -> Data[dict[str, Any]]:
    doc = channels.get_document(get_store(), current_auth(app), channelID, "two_step")
    return Data(data={"enabled": bool(doc.get("enabled")), "email": doc.get("email")})


@app.put("/v1/channels/<channelID>/settings/phone/two-step", middlewares=requires("admin"), tags=CH)
def put_two_step(channelID: str, body: Annotated[models.Document, Body()]) -> Data[dict[str, Any]]:
    doc = body.model_dump()
    if "pin" in doc:
        raise ValidationFailed.field("body.pin", "set the PIN with POST .../two-step/enable")
    return _put_document(channelID, "two_step", doc)


@app.post("/v1/channels/<channelID>/settings/phone/two-step/enable", middlewares=requires("admin"), tags=CH)
def enable_two_step(channelID: str, body: Annotated[models.TwoStepEnable, Body()]) -> Data[dict[str, Any]]:
    """Stores only a hash of the PIN; it is never shown again."""
    doc = {"enabled": True, "email": body.email, "pin_hash": hash_password(body.pin)}
    channels.put_document(get_store(), current_auth(app), channelID, "two_step", doc)
    return Data(data={"enabled": True, "email": body.email})


@app.get("/v1/channels/<channelID>/profile", middlewares=requires("viewer"), tags=CH)
def get_profile(channelID: str) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "profile", None))


@app.put("/v1/channels/<channelID>/profile", middlewares=requires("admin"), tags=CH)
def put_profile(channelID: str, body: Annotated[models.Document, Body()]) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "profile", body.model_dump()))


@app.get("/v1/channels/<channelID>/profile/business", middlewares=requires("viewer"), tags=CH)
def get_business_profile(channelID: str) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "business_profile", None))


@app.put("/v1/channels/<channelID>/profile/business", middlewares=requires("admin"), tags=CH)
def put_business_profile(channelID: str, body: Annotated[models.Document, Body()]) -> Data[dict[str, Any]]:
    return Data(
        data=channels.account_document(get_store(), current_auth(app), channelID, "business_profile", body.model_dump())
    )


@app.get("/v1/channels/<channelID>/privacy", middlewares=requires("viewer"), tags=CH)
def get_channel_privacy(channelID: str) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "privacy", None))


@app.put("/v1/channels/<channelID>/privacy", middlewares=requires("admin"), tags=CH)
def put_channel_privacy(channelID: str, body: Annotated[models.Document, Body()]) -> Data[dict[str, Any]]:
    return Data(data=channels.account_document(get_store(), current_auth(app), channelID, "privacy", body.model_dump()))


@app.get("/v1/channels/<channelID>/proxy", middlewares=requires("admin"), tags=CH)
def get_proxy(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "proxy")


@app.put("/v1/channels/<channelID>/proxy", middlewares=requires("admin"), tags=CH)
def put_proxy(channelID: str, body: Annotated[models.Proxy, Body()]) -> Data[dict[str, Any]]:
    return _put_document(channelID, "proxy", body.model_dump())


@app.get("/v1/channels/<channelID>/network/proxy", middlewares=requires("admin"), tags=CH)
def get_network_proxy(channelID: str) -> Data[dict[str, Any]]:
    return _document(channelID, "network_proxy")


@app.put("/v1/channels/<channelID>/network/proxy", middlewares=requires("admin"), tags=CH)
def put_network_proxy(channelID: str, body: Annotated[models.Proxy, Body()]) -> Data[dict[str, Any]]:
    return _put_document(channelID, "network_proxy", body.model_dump())


@app.get("/v1/channels/<channelID>/blocked-contacts", middlewares=requires("viewer"), tags=CH)
def list_blocked_on_channel(channelID: str) -> ListData[models.BlockedOnChannel]:
    return whole_list(media.blocked_on_channel(get_store(), current_auth(app), channelID))


@app.post("/v1/channels/<channelID>/blocked-contacts", middlewares=requires("member"), tags=CH)
def block_on_channel(channelID: str, body: Annotated[models.BlockOnChannel, Body()]) -> Data[dict[str, Any]]:
    """Blocks (or unblocks) a number at the provider, for providers that support it."""
    return Data(data=media.block_on_channel(get_store(), current_auth(app), channelID, body))


@app.get("/v1/channels/<channelID>/contacts", middlewares=requires("viewer"), tags=CH)
def channel_contacts(
    channelID: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[dict[str, Any]]:
    """The stored contacts that have a conversation on this channel, a page at a time (by contact id)."""
    items, nxt = media.channel_contacts(get_store(), current_auth(app), channelID, limit, cursor)
    return cursor_list(items, limit, nxt)


@app.post("/v1/channels/<channelID>/contacts/lookup", middlewares=requires("member"), tags=CH)
def channel_contact_lookup(channelID: str, body: Annotated[models.PhoneLookup, Body()]) -> Data[dict[str, Any]]:
    """The provider's profile lookup for a number (not the stored contacts)."""
    # on first use: keeps switchboard.contacts.identifiers off the cold start
    from switchboard.contacts.identifiers import normalize_phone

    _, adapter = channels.provider(get_store(), current_auth(app), channelID)
    return Data(data=adapter.lookup_contact(normalize_phone(body.phone, "body.phone")))


@app.get("/v1/channels/<channelID>/groups", middlewares=requires("viewer"), tags=CH)
def channel_groups(channelID: str) -> ListData[group_models.Group]:
    """The channel's active groups (`/v1/groups` records); 400 `unsupported_by_provider` without groups."""
    # on first use: keeps switchboard.groups.service off the cold start
    from switchboard.groups import service as groups

    return whole_list(groups.channel_groups(get_store(), current_auth(app), channelID))


@app.get("/v1/channels/<channelID>/media/<mediaID>", middlewares=requires("member"), tags=CH)
def channel_media(
    channelID: str,
    mediaID: Annotated[str, Path(min_length=1, max_length=MEDIA_ID_MAX, pattern=MEDIA_ID_PATTERN)],
    message_id: Annotated[str, Query(min_length=1, max_length=256)] = "-",
) -> Data[media.DownloadedMediaView]:
    return Data(data=media.download(get_store(), current_auth(app), channelID, mediaID, message_id, "{}"))


@app.post("/v1/channels/<channelID>/sandbox/inbound", middlewares=requires("member"), tags=CH, status_code=202)
def sandbox_inbound(channelID: str, body: Annotated[models.SandboxInbound, Body()]) -> Data[models.InboundAccepted]:
    """Simulates a customer writing to a sandbox channel: stored, resolved to a contact, threaded, `message.new`."""
    return Data(data=callbacks.sandbox_inbound(get_store(), current_auth(app), channelID, body))


# Messages ----------------------------------------------------------------------------------------------------------
@app.post("/v1/messages", middlewares=requires("member"), tags=MSG, status_code=202)
def send_message(body: Annotated[models.SendMessage, Body()]) -> Data[models.Message]:
    """Accepted as `pending` and queued; statuses follow as `message.status_update` events."""
    return Data(data=messages.send(get_store(), current_auth(app), body))


@app.get("/v1/messages/<messageID>", middlewares=requires("viewer"), tags=MSG)
def get_message(messageID: MessageId) -> Data[models.Message]:
    return Data(data=messages.get(get_store(), current_auth(app), messageID))


@app.get("/v1/messages/<messageID>/status", middlewares=requires("viewer"), tags=MSG)
def get_message_status(messageID: MessageId) -> Data[models.MessageStatus]:
    return Data(data=messages.status_of(get_store(), current_auth(app), messageID))


@app.post("/v1/messages/media/download", middlewares=requires("member"), tags=MSG)
def download_media(body: Annotated[media.MediaDownloadRequest, Body()]) -> Data[media.DownloadedMediaView]:
    """Fetches the media through the channel's provider, keeps a copy in S3, returns it base64-encoded. Member and
    above: the download makes the provider work (a viewer reads what is stored)."""
    return Data(
        data=media.download(
            get_store(), current_auth(app), body.channel_id, body.media_id, body.message_id, body.message_payload
        )
    )


@app.post("/v1/messages/edit", middlewares=requires("member"), tags=MSG)
def edit_message(body: Annotated[media.EditRequest, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "edit", body))


@app.post("/v1/messages/delete", middlewares=requires("member"), tags=MSG)
def delete_message(body: Annotated[media.MessageRef, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "delete", body))


@app.post("/v1/messages/react", middlewares=requires("member"), tags=MSG)
def react_message(body: Annotated[media.ReactRequest, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "react", body))


@app.post("/v1/messages/read", middlewares=requires("member"), tags=MSG)
def read_message(body: Annotated[media.MessageRef, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.message_action(get_store(), current_auth(app), "read", body))


@app.post("/v1/messages/presence", middlewares=requires("member"), tags=MSG)
def presence(body: Annotated[media.PresenceRequest, Body()]) -> Data[dict[str, Any]]:
    return Data(data=media.presence(get_store(), current_auth(app), body))


@app.post("/v1/messages/uploads/image", middlewares=requires("member"), tags=MSG, status_code=201)
def upload_image(body: Annotated[media.ImageUploadRequest, Body()]) -> Data[media.UploadTicket]:
    """A presigned S3 upload for an image to send (PNG, JPEG or WebP, up to 5 MiB)."""
    if not body.content_type.startswith("image/"):
        raise ValidationFailed.field("body.content_type", "must be an image type")
    return Data(data=media.create_upload(get_store(), current_auth(app), body))


@app.post("/v1/media/uploads", middlewares=requires("member"), tags=["media"], status_code=201)
def create_upload(body: Annotated[media.UploadRequest, Body()]) -> Data[media.UploadTicket]:
    """A presigned S3 upload; the asset is usable in messages (`media.asset_id`) once uploaded."""
    return Data(data=media.create_upload(get_store(), current_auth(app), body))


@app.get("/v1/media/assets", middlewares=requires("viewer"), tags=["media"])
def list_assets(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[media.Asset]:
    items, nxt = media.list_assets(get_store(), current_auth(app), limit, cursor)
    return cursor_list(items, limit, nxt)


@app.get("/v1/media/assets/<assetID>", middlewares=requires("viewer"), tags=["media"])
def get_asset(assetID: str) -> Data[media.Asset]:
    return Data(data=media.get_asset(get_store(), current_auth(app), assetID))


@app.delete("/v1/media/assets/<assetID>", middlewares=requires("member"), tags=["media"], status_code=204)
def delete_asset(assetID: str) -> None:
    media.delete_asset(get_store(), current_auth(app), assetID)


# Conversations -----------------------------------------------------------------------------------------------------
@app.get("/v1/conversations", middlewares=requires("viewer"), tags=CONV)
def list_conversations(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    status: Annotated[str | None, Query(pattern="^(open|closed)$")] = None,
    assignee: Annotated[str | None, Query(max_length=64, description="user or team id, or `none`")] = None,
    label: Annotated[str | None, Query(max_length=64)] = None,
    channel_id: Annotated[str | None, Query(max_length=64)] = None,
    unread: Annotated[bool | None, Query()] = None,
) -> ListData[models.Conversation]:
    items, nxt = conversations.list_conversations(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        status=status,
        assignee=assignee,
        label=label,
        channel_id=channel_id,
        unread=unread,
    )
    return cursor_list(items, limit, nxt)


@app.get("/v1/conversations/<convID>", middlewares=requires("viewer"), tags=CONV)
def get_conversation(convID: str) -> Data[models.Conversation]:
    return Data(data=conversations.get(get_store(), current_auth(app), convID))


@app.get("/v1/conversations/<convID>/messages", middlewares=requires("viewer"), tags=CONV)
def conversation_messages(
    convID: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[models.ConversationMessage]:
    items, nxt = conversations.messages(get_store(), current_auth(app), convID, limit, cursor)
    return cursor_list(items, limit, nxt)


def _action(conv_id: str, action: str) -> Data[models.Conversation]:
    return Data(data=conversations.act(get_store(), current_auth(app), conv_id, action))


@app.post("/v1/conversations/<convID>/archive", middlewares=requires("member"), tags=CONV)
def archive(convID: str) -> Data[models.Conversation]:
    return _action(convID, "archive")


@app.post("/v1/conversations/<convID>/unarchive", middlewares=requires("member"), tags=CONV)
def unarchive(convID: str) -> Data[models.Conversation]:
    return _action(convID, "unarchive")


@app.post("/v1/conversations/<convID>/close", middlewares=requires("member"), tags=CONV)
def close(convID: str) -> Data[models.Conversation]:
    return _action(convID, "close")


@app.post("/v1/conversations/<convID>/reopen", middlewares=requires("member"), tags=CONV)
def reopen(convID: str) -> Data[models.Conversation]:
    return _action(convID, "reopen")


@app.post("/v1/conversations/<convID>/pin", middlewares=requires("member"), tags=CONV)
def pin(convID: str) -> Data[models.Conversation]:
    return _action(convID, "pin")


@app.post("/v1/conversations/<convID>/unpin", middlewares=requires("member"), tags=CONV)
def unpin(convID: str) -> Data[models.Conversation]:
    return _action(convID, "unpin")


@app.post("/v1/conversations/<convID>/unmute", middlewares=requires("member"), tags=CONV)
def unmute(convID: str) -> Data[models.Conversation]:
    return _action(convID, "unmute")


@app.post("/v1/conversations/<convID>/mute", middlewares=requires("member"), tags=CONV)
def mute(convID: str, body: Annotated[models.MuteRequest | None, Body()] = None) -> Data[models.Conversation]:
    return Data(data=conversations.mute(get_store(), current_auth(app), convID, body or models.MuteRequest()))


@app.post("/v1/conversations/<convID>/read", middlewares=requires("member"), tags=CONV)
def mark_read(convID: str) -> Data[models.Conversation]:
    return _action(convID, "read")


@app.post("/v1/conversations/<convID>/assign", middlewares=requires("member"), tags=CONV)
def assign(convID: str, body: Annotated[models.AssignRequest, Body()]) -> Data[models.Conversation]:
    """`{"user_id"}`, `{"team_id"}`, or `{}` to unassign."""
    return Data(data=conversations.assign(get_store(), current_auth(app), convID, body))


@app.post("/v1/conversations/<convID>/lock", middlewares=requires("member"), tags=CONV)
def claim_lock(convID: str, body: Annotated[models.LockRequest, Body()]) -> Data[models.ConversationLock]:
    """Claims or refreshes the lock (120 s); another owner's unexpired lock is 409 `lock_held`."""
    return Data(data=conversations.claim_lock(get_store(), current_auth(app), convID, body))


@app.delete("/v1/conversations/<convID>/lock", middlewares=requires("member"), tags=CONV, status_code=204)
def release_lock(convID: str) -> None:
    conversations.release_lock(get_store(), current_auth(app), convID)


# Conversation labels and history sync (rules in switchboard.catalog) -----------------------------------------------
@app.get("/v1/conversations/<convID>/labels", middlewares=requires("viewer"), tags=CONV)
def conversation_labels(convID: str) -> ListData[catalog_models.Label]:
    # on first use: keeps switchboard.catalog.labels off the cold start
    from switchboard.catalog import labels

    return whole_list(labels.conversation_labels(get_store(), current_auth(app), convID))


@app.post("/v1/conversations/<convID>/labels", middlewares=requires("member"), tags=CONV)
def add_conversation_label(
    convID: str, body: Annotated[catalog_models.ConversationLabelAdd, Body()]
) -> ListData[catalog_models.Label]:
    """`{label_id}` or `{name}` (a new name joins `/v1/labels`); answers the conversation's labels."""
    # on first use: keeps switchboard.catalog.labels off the cold start
    from switchboard.catalog import labels

    return whole_list(labels.add_to_conversation(get_store(), current_auth(app), convID, body))


@app.delete("/v1/conversations/<convID>/labels/<labelID>", middlewares=requires("member"), tags=CONV, status_code=204)
def remove_conversation_label(convID: str, labelID: str) -> None:
    # on first use: keeps switchboard.catalog.labels off the cold start
    from switchboard.catalog import labels

    labels.attach_conversation(get_store(), current_auth(app), labelID, convID, attach=False)


@app.post("/v1/conversations/<convID>/history-sync", middlewares=requires("member"), tags=CONV)
def conversation_history_sync(convID: str) -> Data[catalog_models.HistorySync]:
    """Records a history sync request; the sandbox completes it at once with the messages already stored."""
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog import chats

    return Data(data=chats.history_sync(get_store(), current_auth(app), convID))


@app.get("/v1/conversations/<convID>/history-sync", middlewares=requires("viewer"), tags=CONV)
def last_conversation_history_sync(convID: str) -> Data[catalog_models.HistorySync]:
    """The latest history sync request of the conversation."""
    # on first use: keeps switchboard.catalog.chats off the cold start
    from switchboard.catalog import chats

    return Data(data=chats.last_history_sync(get_store(), current_auth(app), convID))


# Provider callbacks (public: authenticated by the provider's signature) --------------------------------------------
@app.get("/v1/providers/<channelID>/callback", security=PUBLIC, middlewares=public(), tags=["providers"])
def provider_subscription(channelID: str) -> Response[str]:
    """The provider's subscription handshake (Meta's `hub.challenge`)."""
    params = app.current_event.query_string_parameters or {}
    return Response(
        status_code=200, content_type="text/plain", body=callbacks.subscription(get_store(), channelID, params)
    )


@app.post("/v1/providers/<channelID>/callback", security=PUBLIC, middlewares=public(), tags=["providers"])
def provider_callback(channelID: str) -> Data[dict[str, Any]]:
    """Inbound messages and delivery statuses from the channel's provider, signature-checked. A whatsapp_cloud
    channel's changes are verified and queued, then processed once by the cloud webhook consumer (`queued`)."""
    event = app.current_event
    raw = event.body or ""
    body = base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
    return Data(data=callbacks.provider_callback(get_store(), channelID, dict(event.headers or {}), body))


ERROR_BODY = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}


@app.get(
    "/v1/providers/whatsapp_cloud/webhook",
    security=PUBLIC,
    middlewares=public(),
    tags=["providers"],
    responses={
        200: {"description": "`hub.challenge`, echoed as text"},
        403: {"description": "No whatsapp_cloud channel has this verify token", **ERROR_BODY},
    },
)
def whatsapp_cloud_subscription(
    mode: Annotated[Literal["subscribe"], Query(alias="hub.mode")],
    verify_token: Annotated[str, Query(alias="hub.verify_token", max_length=512)],
    challenge: Annotated[str, Query(alias="hub.challenge", max_length=512)],
) -> Response[str]:
    """Meta's subscription handshake for the app-level callback of whatsapp_cloud channels."""
    params = {"hub.mode": mode, "hub.verify_token": verify_token, "hub.challenge": challenge}
    return Response(status_code=200, content_type="text/plain", body=cloud_webhook.subscription(get_store(), params))


@app.post(
    "/v1/providers/whatsapp_cloud/webhook",
    security=PUBLIC,
    middlewares=public(),
    tags=["providers"],
    responses={
        200: {"description": "`queued`: the verified changes queued, each processed once after the answer"},
        401: {"description": "Unsigned, or not signed with the app secret of a channel it speaks for", **ERROR_BODY},
    },
)
def whatsapp_cloud_webhook(body: Annotated[models.CloudWebhook, Body()]) -> Data[dict[str, Any]]:
    """The app-level callback of Meta's WhatsApp Cloud API: each change goes to the channel that claimed its
    `phone_number_id`, checked with that channel's app secret, and is queued; the answer comes before any is
    processed (Meta wants it fast), and a change Meta retries is processed once."""
    event = app.current_event  # the signature covers the raw bytes: `body` only documents and pre-checks the shape
    raw = event.body or ""
    payload = base64.b64decode(raw) if event.is_base64_encoded else raw.encode()
    return Data(data=cloud_webhook.receive(get_store(), dict(event.headers or {}), payload))


handler = make_handler(app)
