"""WhatsApp linked-device ("WhatsApp Web") adapter, through an HTTP gateway that holds the device session.

Channel config: `base_url` (the gateway), `api_key` (sent as `X-Api-Key`, and the HMAC key of the gateway's
callbacks) and `session` (the gateway's session name; default: the channel id).

Gateway protocol, version 1 (JSON over HTTP; `{session}`, `{id}` and `{phone}` are percent-encoded path segments)
=============================================================================================================

Every request carries `X-Api-Key: <api_key>`; a missing or wrong key is `401`. Errors are
`{"error": {"code": "<snake_case>", "message": "<sentence>"}}` with a 4xx (the request is wrong for good: unknown
session or message, session not in the right state, invalid field) or a 5xx/429 (retry later).

Session states: `STOPPED`, `STARTING`, `SCAN_QR` (waiting to be linked), `WORKING` (linked), `FAILED`.
We map them onto channel statuses: `disconnected`, `pairing`, `pairing`, `connected`, `error`.

Routes (answers are 2xx JSON unless said otherwise):
- `POST /sessions/{session}/start` → `{"name", "status", "me"?: {"id", "push_name"}, "error"?}` (creates the
  session if needed; `FAILED` carries `error`).
- `GET /sessions/{session}` → `{"name", "status", "me"?}`; 404 when the session is unknown.
- `POST /sessions/{session}/logout` → `{"status": "STOPPED"}`; 404 when unknown (we treat that as done).
- `GET /sessions/{session}/qr` → `{"qr": "<string to render as a QR code>", "expires_in": <seconds>}`;
  409 unless `SCAN_QR`.
- `POST /sessions/{session}/pairing-code` `{"phone": "<digits>"}` → `{"code": "ABCD-EFGH"}`; 409 unless `SCAN_QR`.
- All routes below answer 409 unless the session is `WORKING`.
- `POST /sessions/{session}/messages` (a message, below) → 201 `{"id": "<message id>"}`.
- `PUT /sessions/{session}/messages/{id}` `{"text"}` → `{"id"}` (edit one of our text messages).
- `DELETE /sessions/{session}/messages/{id}` → 204 (delete for everyone).
- `POST /sessions/{session}/messages/{id}/reaction` `{"emoji"}` (`""` removes it) → `{}`.
- `POST /sessions/{session}/messages/{id}/read` → `{}`.
- `POST /sessions/{session}/presence` `{"chat_id", "state"}` → `{}`; state `typing`, `recording`, `paused`,
  `available` or `unavailable`.
- `GET /sessions/{session}/media/{media_id}` → the bytes with their `Content-Type` and optionally
  `Content-Disposition: attachment; filename="…"`; 404 once expired.
- `GET /sessions/{session}/profile`, `PUT` `{"name"?, "about"?, "picture_url"?}` → the profile.
- `GET /sessions/{session}/privacy`, `PUT` `{"last_seen"?, "online"?, "profile_picture"?, "status"?,
  "read_receipts"?, "groups_add"?}` → the settings.
- `GET /sessions/{session}/contacts/{phone}` → `{"exists", "name"?, "wa_id"?: "<digits>@s.whatsapp.net"}`.
- `POST /sessions/{session}/contacts/{phone}/block` `{"blocked": <bool>}` → `{}`.

A message: `{"chat_id": "<digits>@s.whatsapp.net", "type": "text"|"image"|"video"|"audio"|"document"|"sticker"|
"location", "text"?: "<body>", "media"?: {"url"|"id", "mime_type"?, "filename"?, "caption"?}, "location"?:
{"latitude", "longitude", "name"?, "address"?}, "reply_to"?: "<message id>"}` (an unknown `reply_to` is 404).
Templates are a Business Platform feature and are refused before any request.

Callbacks (gateway → `POST /v1/providers/{channel_id}/callback`): header
`X-Gateway-Signature: sha256=<hex HMAC-SHA256(api_key, raw body)>`, body one event or a list of events:
- `{"event": "message", "session"?, "payload": {"id", "from": "<digits>@s.whatsapp.net", "from_me"?: bool,
  "type", "body"?, "media"?: {"id", "mime_type", "filename"?, "caption"?}, "push_name"?, "timestamp": <epoch s>,
  "reply_to"?}}`
- `{"event": "ack", "session"?, "payload": {"id", "ack": 1|2|3|4|-1, "timestamp"?, "error"?}}`: 1 sent,
  2 delivered, 3 read, 4 played, -1 failed (0, "pending on the phone", is ignored).
Our own messages echoed back (`from_me`), chats that are not a person (`@g.us`, `@broadcast`, `@newsletter`,
`@lid`), other sessions' events and other event kinds are ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime
from typing import Any

from switchboard import clock
from switchboard.errors import Unauthenticated, ValidationFailed
from switchboard.providers.base import (
    Channel,
    ConnectResult,
    DownloadedMedia,
    InboundMessage,
    OutboundMessage,
    Provider,
    ProviderRejected,
    ProviderUnavailable,
    SendResult,
    StatusCallback,
)
from switchboard.providers.http import (
    DEFAULT_TIMEOUT,
    MAX_MEDIA,
    MEDIA_DEADLINE,
    HttpApi,
    ProviderError,
    Reply,
    segment,
)

PROVIDER = "WhatsApp Web gateway"
SIGNATURE_HEADER = "x-gateway-signature"
USER_SUFFIXES = ("@s.whatsapp.net", "@c.us")
SESSION_STATUS = {
    "STOPPED": "disconnected",
    "STARTING": "pairing",
    "SCAN_QR": "pairing",
    "WORKING": "connected",
    "FAILED": "error",
}
ACKS = {1: "sent", 2: "delivered", 3: "read", 4: "played", -1: "failed"}
MEDIA_TYPES = ("image", "video", "audio", "document", "sticker")
_FILENAME = re.compile(r"""filename\*?=(?:UTF-8'')?"?([^";]+)"?""", re.IGNORECASE)


def gateway_error(reply: Reply) -> ProviderError:
    body = reply.json()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        code = error.get("code")
        return ProviderError(str(error["message"]), details={"provider_code": code} if code else {})
    if isinstance(error, str) and error:
        return ProviderError(error)
    return ProviderError(f"HTTP {reply.status}")


def chat_id(phone: str) -> str:
    digits = "".join(ch for ch in str(phone) if ch.isdigit())
    if not digits:
        raise ProviderRejected("The recipient has no phone number.")
    return f"{digits}@s.whatsapp.net"


def _phone_of(jid: Any) -> str | None:
    """Digits of a person's chat id; None for groups, broadcasts, newsletters and anonymised (`@lid`) ids."""
    value = str(jid or "")
    for suffix in USER_SUFFIXES:
        if value.endswith(suffix):
            user = value.removesuffix(suffix).split(":", 1)[0]  # "<phone>:<device>@s.whatsapp.net"
            return user if user.isdigit() else None
    return value if value.isdigit() else None


def _iso(epoch: Any) -> str | None:
    try:
        seconds = float(epoch)
        if seconds > 1e11:  # milliseconds
            seconds /= 1000
        return clock.iso(datetime.fromtimestamp(seconds, UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _obj(value: Any) -> dict[str, Any]:
    """The value when it is a JSON object, else an empty one (provider payloads are not trusted to be well formed)."""
    return value if isinstance(value, dict) else {}


def _header(headers: dict[str, str], name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return value
    return None


class WhatsAppWebProvider(Provider):
    platform = "whatsapp_web"

    def __init__(self, channel: Channel) -> None:
        super().__init__(channel)
        self.config: dict[str, Any] = dict(channel.get("config") or {})
        self.timeout = DEFAULT_TIMEOUT

    # Plumbing ---------------------------------------------------------------------------------------------------------
    def _setting(self, key: str) -> str:
        value = self.config.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ProviderRejected(f"config.{key} is required for a whatsapp_web channel.")
        return value.strip()

    @property
    def session(self) -> str:
        return str(self.config.get("session") or self.channel.get("id") or "default")

    def _api(self) -> HttpApi:
        return HttpApi(
            PROVIDER,
            self._setting("base_url"),
            {"X-Api-Key": self._setting("api_key")},
            timeout=self.timeout,
            read_error=gateway_error,
        )

    def _path(self, *parts: str) -> str:
        return "/sessions/" + "/".join(segment(p) for p in (self.session, *parts))

    def _call(self, method: str, *parts: str, body: Any = None) -> dict[str, Any]:
        return self._api().call(method, self._path(*parts), json_body=body)

    # Connection -------------------------------------------------------------------------------------------------------
    def connect(self) -> ConnectResult:
        data = self._call("POST", "start")
        state = str(data.get("status") or "")
        status = SESSION_STATUS.get(state)
        if status is None:
            raise ProviderUnavailable(f"{PROVIDER} answered an unknown session status {state!r}.")
        metadata: dict[str, Any] = {"session": self.session, "gateway_status": state}
        me = _obj(data.get("me"))
        if me.get("id"):
            metadata["wa_id"] = _phone_of(me["id"]) or str(me["id"])
        if me.get("push_name"):
            metadata["push_name"] = me["push_name"]
        if status == "disconnected":  # a start that left the session stopped is a failure to start
            status = "error"
        if status == "error" and data.get("error"):
            metadata["gateway_error"] = str(data["error"])
        return ConnectResult(status, metadata)

    def status(self) -> str:
        try:
            data = self._call("GET")
        except ProviderRejected as err:
            if any(d.get("http_status") == 404 for d in err.details):
                return "disconnected"
            raise
        return SESSION_STATUS.get(str(data.get("status")), "error")

    def disconnect(self) -> None:
        try:
            self._call("POST", "logout")
        except ProviderRejected as err:
            if not any(d.get("http_status") == 404 for d in err.details):
                raise

    def qr(self) -> dict[str, Any]:
        data = self._call("GET", "qr")
        if not data.get("qr"):
            raise ProviderUnavailable(f"{PROVIDER} answered without a QR code.")
        return {"qr": str(data["qr"]), "expires_in": data.get("expires_in")}

    def pairing_code(self, phone: str) -> dict[str, Any]:
        data = self._call("POST", "pairing-code", body={"phone": "".join(c for c in phone if c.isdigit())})
        if not data.get("code"):
            raise ProviderUnavailable(f"{PROVIDER} answered without a pairing code.")
        return {"code": str(data["code"])}

    # Messages ---------------------------------------------------------------------------------------------------------
    def send(self, message: OutboundMessage) -> SendResult:
        body: dict[str, Any] = {"chat_id": chat_id(message.to_phone), "type": message.type}
        kind = message.type
        if kind == "text":
            if not message.text:
                raise ProviderRejected("A text message needs a body.")
            body["text"] = message.text
        elif kind in MEDIA_TYPES:
            media = message.media or {}
            out: dict[str, Any] = {}
            if media.get("url"):
                out["url"] = str(media["url"])
            elif media.get("id"):
                out["id"] = str(media["id"])
            else:
                raise ProviderRejected(f"A {kind} message needs media.url or media.id for the {PROVIDER}.")
            for key in ("mime_type", "filename"):
                if media.get(key):
                    out[key] = str(media[key])
            caption = media.get("caption") or message.text
            if caption and kind != "sticker":
                out["caption"] = str(caption)
            body["media"] = out
        elif kind == "location":
            where = message.media or {}
            if "latitude" not in where or "longitude" not in where:
                raise ProviderRejected("A location message needs latitude and longitude.")
            body["location"] = {k: where[k] for k in ("latitude", "longitude", "name", "address") if where.get(k)}
        else:
            raise ProviderRejected(f"The {PROVIDER} cannot send messages of type {kind!r}.")
        if message.reply_to:
            body["reply_to"] = message.reply_to
        data = self._call("POST", "messages", body=body)
        if not data.get("id"):
            raise ProviderUnavailable(f"{PROVIDER} accepted the message but answered without its id.")
        return SendResult(str(data["id"]))

    def edit(self, provider_message_id: str, text: str) -> None:
        self._call("PUT", "messages", provider_message_id, body={"text": text})

    def delete(self, provider_message_id: str) -> None:
        self._call("DELETE", "messages", provider_message_id)

    def react(self, provider_message_id: str, emoji: str) -> None:
        self._call("POST", "messages", provider_message_id, "reaction", body={"emoji": emoji})

    def read(self, provider_message_id: str) -> None:
        self._call("POST", "messages", provider_message_id, "read")

    def presence(self, to_phone: str, state: str) -> None:
        self._call("POST", "presence", body={"chat_id": chat_id(to_phone), "state": state})

    def download_media(self, media_id: str, message_id: str, payload: str) -> DownloadedMedia:
        api = self._api()
        url = f"{api.base_url}{self._path('media', media_id)}"
        reply = api.request("GET", url, max_bytes=MAX_MEDIA, deadline=MEDIA_DEADLINE)
        mime = (reply.headers.get("content-type") or "application/octet-stream").split(";", 1)[0].strip()
        match = _FILENAME.search(reply.headers.get("content-disposition") or "")
        name = match.group(1).replace("\\", "/").rsplit("/", 1)[-1].strip() if match else ""
        if not name or name in (".", ".."):
            safe_id = "".join(c for c in media_id if c.isalnum() or c in "-_") or "media"
            name = f"{safe_id}{_extension(mime) or ''}"
        return DownloadedMedia(data=reply.content, mime_type=mime, file_name=name[:255], source_url=url)

    # Account ----------------------------------------------------------------------------------------------------------
    def profile(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The account's profile. A `business` marker key (the business-profile route) is ignored."""
        updates = {k: v for k, v in (changes or {}).items() if k != "business"}
        return self._call("PUT", "profile", body=updates) if updates else self._call("GET", "profile")

    def privacy(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._call("PUT", "privacy", body=changes) if changes else self._call("GET", "privacy")

    def lookup_contact(self, phone: str) -> dict[str, Any]:
        data = self._call("GET", "contacts", phone)
        exists = bool(data.get("exists"))
        return {
            "phone": phone,
            "exists": exists,
            "name": data.get("name") if exists else None,
            "wa_id": (_phone_of(data.get("wa_id")) or data.get("wa_id")) if exists else None,
        }

    def block(self, phone: str, blocked: bool) -> None:
        self._call("POST", "contacts", phone, "block", body={"blocked": bool(blocked)})

    # Callbacks --------------------------------------------------------------------------------------------------------
    def verify_callback(self, headers: dict[str, str], body: bytes) -> None:
        key = self.config.get("api_key")
        if not isinstance(key, str) or not key:
            raise Unauthenticated("This channel has no api_key, so its callbacks cannot be verified.")
        given = (_header(headers, SIGNATURE_HEADER) or "").strip()
        if not given.lower().startswith("sha256="):
            raise Unauthenticated("Missing or malformed X-Gateway-Signature header.")
        expected = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given[len("sha256=") :].lower().encode(), expected.encode()):
            raise Unauthenticated("The X-Gateway-Signature signature does not match the body.")

    def parse_callback(self, body: bytes) -> list[InboundMessage | StatusCallback]:
        try:
            doc = json.loads(body)
        except ValueError:
            raise ValidationFailed.field("body", "is not valid JSON") from None
        items = doc if isinstance(doc, list) else [doc]
        events: list[InboundMessage | StatusCallback] = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("event"), str):
                raise ValidationFailed.field("body.event", "is required")
            payload = item.get("payload")
            if not isinstance(payload, dict):
                raise ValidationFailed.field("body.payload", "must be an object")
            if item.get("session") not in (None, self.session):
                continue
            if item["event"] == "message":
                inbound = _inbound(payload)
                if inbound is not None:
                    events.append(inbound)
            elif item["event"] == "ack":
                ack = _ack(payload)
                if ack is not None:
                    events.append(ack)
        return events


def _inbound(payload: dict[str, Any]) -> InboundMessage | None:
    if not payload.get("id") or not payload.get("from"):
        raise ValidationFailed.field("body.payload", "a message needs id and from")
    sender = _phone_of(payload["from"])
    if payload.get("from_me") or sender is None:
        return None
    kind = str(payload.get("type") or "text")
    media = payload.get("media") if isinstance(payload.get("media"), dict) else None
    text = payload.get("body")
    if text is None and media and media.get("caption"):
        text = media["caption"]
    if payload.get("reply_to"):
        media = {**(media or {}), "context": {"message_id": str(payload["reply_to"])}}
    return InboundMessage(
        provider_message_id=str(payload["id"]),
        from_phone=sender,
        type=kind,
        text=str(text) if text is not None else None,
        media=media,
        contact_name=str(payload["push_name"]) if payload.get("push_name") else None,
        timestamp=_iso(payload.get("timestamp")),
    )


def _ack(payload: dict[str, Any]) -> StatusCallback | None:
    if not payload.get("id"):
        raise ValidationFailed.field("body.payload.id", "is required")
    try:
        level = int(payload.get("ack"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationFailed.field("body.payload.ack", "must be an integer") from None
    status = ACKS.get(level)
    if status is None:
        return None
    error = None
    if status == "failed":
        error = str(payload.get("error") or "The WhatsApp Web gateway reported the message as failed.")
    return StatusCallback(
        provider_message_id=str(payload["id"]), status=status, timestamp=_iso(payload.get("timestamp")), error=error
    )


def _extension(mime: str) -> str | None:
    import mimetypes

    return mimetypes.guess_extension(mime)
