"""Media (download through the provider, uploads and assets in S3), message actions, channel-level blocks."""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import Field

from switchboard import aws, clock, media
from switchboard.access import AuthContext
from switchboard.config import get_settings
from switchboard.contacts import repository as contacts_repo
from switchboard.contacts import service as contacts
from switchboard.contacts.identifiers import Identifier, normalize_phone, numbers_for
from switchboard.errors import Conflict, NotFound, UnsupportedByProvider, ValidationFailed
from switchboard.ids import new_id
from switchboard.messaging import channels, conversations, messages
from switchboard.messaging.models import BlockedOnChannel
from switchboard.models import MEDIA_ID_MAX, MEDIA_ID_PATTERN, BaseModel, FileName, Strict, Timestamp
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import Put, Store, keys, shards

Item = dict[str, Any]
UPLOAD_TYPES = {
    "image/png",
    "image/jpeg",
    "image/webp",
    "video/mp4",
    "audio/ogg",
    "audio/mpeg",
    "application/pdf",
    "text/plain",
}
MAX_UPLOAD = 16 * 1024 * 1024


class MediaDownloadRequest(Strict):
    """Body of `POST /v1/messages/media/download`: the media of a received message, fetched through its channel."""

    channel_id: str = Field(min_length=1, description="channel id")
    media_id: str = Field(min_length=1, max_length=MEDIA_ID_MAX, pattern=MEDIA_ID_PATTERN, description="media id")
    message_id: str = Field(min_length=1, description="provider message id")
    message_payload: str = Field(min_length=2, description="raw message payload that the provider download needs")

    openapi_examples = (
        {
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "media_id": "1013859600285441",
            "message_id": "wamid.HBgLMTU1NTAxMDAxODgVAgASGBQzQTdCNUI0QjQ2RTZBNUE3RDhGNwA=",
            "message_payload": "{}",
        },
    )


class DownloadedMediaView(BaseModel):
    """The spec's Downloaded media: the bytes inline (`data`, base64) up to 4 MiB; a larger file as a presigned URL of
    its copy (`source_url`, until `expires_at`) with `data` empty (CONVENTIONS "Media and responses that outgrow a
    Lambda")."""

    media_id: str = Field(description="The provider's media id")
    data: str = Field(
        description=f"The file's bytes, base64-encoded, when it is at most {media.INLINE_MAX} bytes (4 MiB); "
        '`""` for a larger file (fetch it from `source_url`)'
    )
    file_name: str = Field(description="The file's name")
    mime_type: str = Field(description="The file's MIME type")
    size: int = Field(ge=0, description="The file's size in bytes")
    source_url: str = Field(
        description="Inline media: where the provider served the file from. A larger file: a presigned HTTPS URL of "
        "its copy in the media bucket (GET it, no credentials) until `expires_at`"
    )
    expires_at: Timestamp | None = Field(
        default=None, description="When `source_url` stops working (a larger file's); null for inline media"
    )

    openapi_examples = (
        {
            "media_id": "1013859600285441",
            "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
            "file_name": "receipt.png",
            "mime_type": "image/png",
            "size": 70,
            "source_url": "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1013859600285441",
            "expires_at": None,
        },
        {
            "media_id": "1013859600285442",
            "data": "",
            "file_name": "catalogue-2026.pdf",
            "mime_type": "application/pdf",
            "size": 18874368,
            "source_url": "https://switchboard-media.s3.amazonaws.com/media/org_01jd7zp1a2b3c4d5e6f7g8h9jk/"
            "ch_01jd7zq4v6m3x8k2r5t9w1y0ab/1013859600285442?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900",
            "expires_at": "2026-11-21T10:15:00.000Z",
        },
    )


# What a download keeps for itself after the fetch: its copy's last part, a presigned URL and the answer.
DOWNLOAD_RESERVE_SECONDS = 3.0


def download(
    store: Store,
    auth: AuthContext,
    channel_id: str,
    media_id: str,
    message_id: str,
    payload: str,
    *,
    seconds_left: float | None = None,
) -> DownloadedMediaView:
    """The media through the channel's provider, streamed into its copy `media/<org>/<channel>/<media>` in the media
    bucket as it arrives (`media.MediaCopy`): at most 4 MiB answered inline, a larger file as a presigned URL of the
    copy, valid 15 minutes. The provider fetch gets what the request has left (`seconds_left`, the invocation's
    remaining time) but `DOWNLOAD_RESERVE_SECONDS`; a provider too slow for it is 503 (retry)."""
    _, adapter = channels.provider(store, auth, channel_id)
    key = f"media/{auth.org_id}/{channel_id}/{media_id}"
    deadline = None if seconds_left is None else max(seconds_left - DOWNLOAD_RESERVE_SECONDS, 0.5)
    with media.MediaCopy(key) as copy:
        got = adapter.download_media(media_id, message_id, payload, sink=copy, deadline=deadline)
        stored = copy.finish(got.mime_type)
    if stored.inline is not None:
        return DownloadedMediaView(
            media_id=media_id,
            data=base64.b64encode(stored.inline).decode(),
            file_name=got.file_name,
            mime_type=got.mime_type,
            size=stored.size,
            source_url=got.source_url,
        )
    url, expires_at = media.presign_download(
        key, media.LARGE_MEDIA_URL_TTL, content_type=got.mime_type, file_name=got.file_name
    )
    return DownloadedMediaView(
        media_id=media_id,
        data="",
        file_name=got.file_name,
        mime_type=got.mime_type,
        size=stored.size,
        source_url=url,
        expires_at=expires_at,
    )


class MessageRef(Strict):
    """Body of the message actions (`delete`, `read`): the message to act on."""

    message_id: str = Field(min_length=1, max_length=64, description="our message id (UUID)")

    openapi_examples = ({"message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d"},)


class EditRequest(MessageRef):
    """Body of `POST /v1/messages/edit`."""

    text: str = Field(min_length=1, max_length=4096, description="The new text")

    openapi_examples = ({"message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d", "text": "Your order shipped today."},)


class ReactRequest(MessageRef):
    """Body of `POST /v1/messages/react`."""

    emoji: str = Field(min_length=0, max_length=16, description="empty removes the reaction")

    openapi_examples = ({"message_id": "0193a1f3-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "emoji": "👍"},)


class PresenceRequest(Strict):
    """Body of `POST /v1/messages/presence`."""

    channel_id: str = Field(min_length=1, max_length=64)
    to: str = Field(min_length=3, max_length=64, description="The chat: a phone in any common form")
    state: Literal["typing", "recording", "paused", "available", "unavailable"] = Field(
        description="What the chat shows: typing, recording, paused, or the account's availability"
    )

    openapi_examples = ({"channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab", "to": "14155550188", "state": "typing"},)


def message_action(store: Store, auth: AuthContext, action: str, body: MessageRef) -> dict[str, Any]:
    """Edit, delete, react or mark read a message through its channel's provider, and record it."""
    org = auth.org_id
    message = messages.get_item(store, org, body.message_id, consistent=True)
    if not message.get("provider_message_id"):
        raise Conflict("The message has not reached its provider yet.")
    _, adapter = channels.provider(store, auth, message["channel_id"])
    pmid = message["provider_message_id"]
    changes: Item = {}
    if action == "edit":
        assert isinstance(body, EditRequest)
        adapter.edit(pmid, body.text)
        changes = {"text": body.text, "edited_at": clock.now_iso()}
    elif action == "delete":
        adapter.delete(pmid)
        changes = {"deleted": True, "deleted_at": clock.now_iso()}
    elif action == "react":
        assert isinstance(body, ReactRequest)
        in_chat = getattr(adapter, "react_in_chat", None)  # adapters that address a reaction to its chat
        if callable(in_chat):
            inbound = message.get("direction") == "inbound"
            in_chat(pmid, body.emoji, (message.get("from_phone") if inbound else message.get("to_phone")) or "")
        else:
            adapter.react(pmid, body.emoji)
        changes = {"reaction": body.emoji or None}
    else:
        adapter.read(pmid)
        changes = {"read_at": clock.now_iso()}
    # Names go through placeholders: `text` is a DynamoDB reserved word.
    sets = ", ".join(f"#{k} = :{k}" for k in changes) + ", updated_at = :now"
    store.update(
        shards.key_of(message),
        f"SET {sets}",
        condition="attribute_exists(PK)",
        names={f"#{k}": k for k in changes},
        values={**{f":{k}": v for k, v in changes.items()}, ":now": clock.now_iso()},
        return_values="NONE",
    )
    return {"message_id": body.message_id, "action": action, **changes}


def presence(store: Store, auth: AuthContext, body: PresenceRequest) -> dict[str, Any]:
    """A presence state to the chat. Adapters with a typing indicator tied to the customer's last message (the Cloud
    API) get that message's provider id; they have no other state."""
    _, adapter = channels.provider(store, auth, body.channel_id)
    to = normalize_phone(body.to, "body.to", numbers_for(store, auth.org_id))
    typing = getattr(adapter, "typing_indicator", None)
    if callable(typing):
        if body.state != "typing":
            raise UnsupportedByProvider(
                f"The {adapter.platform} provider shows only the typing state.",
                details=[{"platform": adapter.platform, "operation": f"presence {body.state}"}],
            )
        typing(_last_inbound(store, auth.org_id, body.channel_id, to))
    else:
        adapter.presence(to, body.state)
    return {"channel_id": body.channel_id, "to": to, "state": body.state}


def _last_inbound(store: Store, org: str, channel_id: str, phone: str) -> str:
    """The provider id of the chat's latest inbound message: phone sentinel → conversation key → the newest 20
    messages of the conversation (GSI2, descending); 3 round trips."""
    none = Conflict("This chat has no message from the customer to show typing against.")
    owner = store.get(contacts_repo.sentinel_key(org, Identifier("phone", phone).sentinel_sk))
    pointer = store.get(conversations.pair_key(org, channel_id, owner["contact_id"])) if owner else None
    if not pointer:
        raise none
    page = store.query(
        conversations.messages_pk(org, pointer["conversation_id"]), index="GSI2", forward=False, limit=20
    )
    for item in page.items:
        if item.get("direction") == "inbound" and item.get("provider_message_id"):
            return str(item["provider_message_id"])
    raise none


# Uploads and assets ------------------------------------------------------------------------------------------------
class UploadRequest(Strict):
    """Body of `POST /v1/media/uploads`: what will be uploaded."""

    # The accepted types are checked in create_upload (one list, UPLOAD_TYPES); the document lists them too.
    content_type: str = Field(
        min_length=3,
        max_length=100,
        json_schema_extra={"enum": [*sorted(UPLOAD_TYPES)]},
        description="The file's MIME type (one of the listed types)",
    )
    size: int = Field(gt=0, le=MAX_UPLOAD, description="bytes")
    file_name: FileName | None = Field(
        default=None, description="The file's name: no path separator (`/`, `\\`), control or bidi characters"
    )

    openapi_examples = ({"content_type": "application/pdf", "size": 48213, "file_name": "invoice-A-1042.pdf"},)


class ImageUploadRequest(UploadRequest):
    """`POST /v1/messages/uploads/image`: the image types of UPLOAD_TYPES (the route checks `image/`)."""

    content_type: str = Field(
        min_length=3,
        max_length=100,
        json_schema_extra={"enum": [t for t in sorted(UPLOAD_TYPES) if t.startswith("image/")]},
    )

    openapi_examples = ({"content_type": "image/png", "size": 20480, "file_name": "receipt.png"},)


class Asset(BaseModel):
    """An uploaded media file, usable in messages as `media.asset_id`."""

    id: str = Field(description="The asset's id")
    content_type: str = Field(description="The file's MIME type")
    size: int = Field(description="Bytes")
    file_name: str | None = Field(default=None, description="The file's name")
    created_at: Timestamp

    openapi_examples = (
        {
            "id": "asset_01jd81b2c3d4e5f6g7h8j9k0lm",
            "content_type": "image/png",
            "size": 20480,
            "file_name": "receipt.png",
            "created_at": "2026-11-21T10:00:00.000Z",
        },
    )


class UploadTicket(Asset):
    """A presigned S3 upload: send the file with `method` to `upload_url` and the given `headers` before
    `expires_at`."""

    upload_url: str = Field(description="Send the file here before `expires_at`")
    method: str = Field(default="PUT", description="The HTTP method of the upload (`PUT`)")
    headers: dict[str, str] = Field(description="Headers the upload must carry")
    expires_at: Timestamp = Field(description="The upload URL stops working then")

    openapi_examples = (
        {
            "id": "asset_01jd81b2c3d4e5f6g7h8j9k0lm",
            "content_type": "image/png",
            "size": 20480,
            "file_name": "receipt.png",
            "created_at": "2026-11-21T10:00:00.000Z",
            "upload_url": "https://switchboard-media.s3.amazonaws.com/org_01jd7zp1a2b3c4d5e6f7g8h9jk/asset_01JD81B2…",
            "method": "PUT",
            "headers": {"Content-Type": "image/png"},
            "expires_at": "2026-11-21T10:15:00.000Z",
        },
    )


def _asset_key(org: str, asset_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"ASSET#{asset_id}")


def create_upload(store: Store, auth: AuthContext, body: UploadRequest) -> UploadTicket:
    if body.content_type not in UPLOAD_TYPES:
        raise ValidationFailed.field("body.content_type", f"must be one of {', '.join(sorted(UPLOAD_TYPES))}")
    asset_id = new_id("asset")
    object_key = f"assets/{auth.org_id}/{asset_id}"
    url, headers, expires_at = media.presign_upload(object_key, body.content_type, body.size)
    item = {
        **_asset_key(auth.org_id, asset_id),
        "entity": "Asset",
        "id": asset_id,
        "content_type": body.content_type,
        "size": body.size,
        "file_name": body.file_name,
        "object_key": object_key,
        "created_at": clock.now_iso(),
    }
    store.put(Put(item=item).item, condition="attribute_not_exists(PK)")
    return UploadTicket(
        **Asset.model_validate(item).model_dump(), upload_url=url, headers=headers, expires_at=expires_at
    )


def list_assets(store: Store, auth: AuthContext, limit: int, cursor: str | None) -> tuple[list[Asset], str | None]:
    org = auth.org_id
    fingerprint = query_fingerprint("assets", {})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix="ASSET#", forward=False, limit=limit)
    return [Asset.model_validate(i) for i in rows], next_cursor


def get_asset(store: Store, auth: AuthContext, asset_id: str) -> Asset:
    item = store.require(_asset_key(auth.org_id, asset_id), "No such asset.")
    return Asset.model_validate(item)


def delete_asset(store: Store, auth: AuthContext, asset_id: str) -> None:
    item = store.delete(
        _asset_key(auth.org_id, asset_id), condition="attribute_exists(PK)", error=NotFound("No such asset.")
    )
    if item:
        aws.client("s3").delete_object(Bucket=get_settings().media_bucket, Key=item["object_key"])


# Channel-level blocks and contacts -----------------------------------------------------------------------------------
def blocked_on_channel(store: Store, auth: AuthContext, channel_id: str) -> list[Any]:
    channels.get_item(store, auth.org_id, channel_id)
    rows = store.query_all(keys.org_pk(auth.org_id), sk_prefix=channels.block_key(auth.org_id, channel_id, "")["SK"])
    return [BlockedOnChannel.model_validate(r) for r in rows]


def block_on_channel(store: Store, auth: AuthContext, channel_id: str, body: Any) -> dict[str, Any]:
    _, adapter = channels.provider(store, auth, channel_id)
    # a number blocked is checked like any new number; one unblocked may be one the provider listed
    phone = normalize_phone(body.phone, "body.phone", numbers_for(store, auth.org_id, possible_only=not body.blocked))
    adapter.block(phone, body.blocked)
    key = channels.block_key(auth.org_id, channel_id, phone)
    if body.blocked:
        store.put({**key, "entity": "ChannelBlock", "phone": phone, "blocked_at": clock.now_iso()})
    else:
        store.delete(key)
    return {"channel_id": channel_id, "phone": phone, "blocked": body.blocked}


def channel_contacts(
    store: Store, auth: AuthContext, channel_id: str, limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the stored contacts that have a conversation on this channel, by contact id: one Query page of the
    channel's conversation keys (`CONVKEY#<channel>#<contact>`) and one BatchGet of their contacts."""
    org = auth.org_id
    channels.get_item(store, org, channel_id)
    fingerprint = query_fingerprint("channel_contacts", {"channel": channel_id})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix=f"CONVKEY#{channel_id}#", limit=limit)
    ids = [p["SK"].rsplit("#", 1)[1] for p in rows]
    found = store.batch_get([keys.key(keys.org_pk(org), f"CONTACT#{i}") for i in ids])
    contacts_page = [contacts.view(c).model_dump() for c in sorted(found, key=lambda c: c["id"])]
    return contacts_page, next_cursor
