"""WhatsApp Business Platform, Cloud API (Meta Graph API) adapter.

Channel config: `base_url` (Meta's Graph root with the stack's pinned version, `GRAPH_API_VERSION`; another URL only
on the local stage, e.g. the tests' fake), `access_token` (a system-user token, sent as `Authorization: Bearer`),
`phone_number_id`, `waba_id` (templates), `app_secret` (callback signatures) and
`verify_token` (Meta's subscription handshake).

Wire format (Graph API):
- connect: `GET /{phone_number_id}?fields=display_phone_number,verified_name,quality_rating`.
- send, react, read: `POST /{phone_number_id}/messages` with `messaging_product: "whatsapp"`; the answer's
  `messages[0].id` (a `wamid.…`) is the provider message id.
- media: `GET /{media_id}` → `{url, mime_type, sha256, file_size}`, then `GET url` with the same bearer token.
- business profile: `GET/POST /{phone_number_id}/whatsapp_business_profile`.
- templates: `GET/POST/DELETE /{waba_id}/message_templates`.
- errors: `{"error": {"message", "type", "code", "error_subcode"?, "error_data": {"details"}?, "fbtrace_id"}}`.
  Graph reports its throttling (codes 4, 80007, 130429, …) as HTTP 400, so those codes, and any error flagged
  `is_transient`, are treated as "retry later" rather than a refusal.
- callbacks: `POST` signed with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app_secret, raw body)>`; the body is
  `{"object": "whatsapp_business_account", "entry": [{"id", "changes": [{"field": "messages", "value": {...}}]}]}`.
  A `messages` value carries messages (a customer's cart is `type: "order"`), message statuses, and the Payments
  API's payment statuses (`statuses[]` of `type: "payment"`, naming the bill by `payment.reference_id`).
- order messages: `interactive` `order_details` (a bill, `review_and_pay`) and `order_status` (`review_order`) go
  out as any interactive object (`switchboard.commerce` checks them first).
  A channel's adapter reads the changes of its own number; `switchboard.messaging.cloud_webhook` routes an
  app-level callback's changes by `value.metadata.phone_number_id`.

- typing indicator: `POST /{phone_number_id}/messages` `{status: "read", message_id, typing_indicator: {type: "text"}}`.
- media upload: `POST /{phone_number_id}/media` (multipart `file`, `type`, `messaging_product`).
- block users: `POST|DELETE /{phone_number_id}/block_users` `{messaging_product, block_users: [{user}]}`.
- calls: `POST /{phone_number_id}/calls` `{messaging_product, to, call_id, action: "reject"}`.
- group photo: `POST /{group_id}` (multipart `file`, JPEG or PNG up to 5 MB, `messaging_product`); Meta has no
  way to remove one.

The Cloud API has no edit, delete, presence states other than typing, QR, pairing code, privacy or contact lookup,
so those stay unsupported (`400 unsupported_by_provider`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import mimetypes
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from switchboard import clock, jsonbody
from switchboard.config import get_settings
from switchboard.errors import Forbidden, Unauthenticated, ValidationFailed
from switchboard.providers.base import (
    BufferSink,
    Channel,
    ConnectResult,
    DownloadedMedia,
    GroupEvent,
    InboundMessage,
    MediaSink,
    OutboundMessage,
    PaymentStatus,
    Provider,
    ProviderRejected,
    ProviderUnavailable,
    SendResult,
    StatusCallback,
    downloaded,
)
from switchboard.providers.http import (
    DEFAULT_TIMEOUT,
    MAX_MEDIA,
    MEDIA_DEADLINE,
    HttpApi,
    ProviderError,
    Reply,
    media_until,
    segment,
    time_left,
)

PROVIDER = "WhatsApp Cloud API"
GRAPH_HOST = "graph.facebook.com"
_GRAPH_PATH = re.compile(r"(/v\d+\.\d+)?/?")
SIGNATURE_HEADER = "x-hub-signature-256"

# Graph error codes that mean "slow down / try again", even when the HTTP status is 400.
TRANSIENT_CODES = frozenset({1, 2, 4, 17, 32, 613, 80007, 130429, 131016, 131048, 131056, 133004})

MEDIA_TYPES = ("image", "video", "audio", "document", "sticker")
CAPTIONED = ("image", "video", "document")
GROUP_PARTICIPANTS_PER_CALL = 8  # Meta's maxItems for a participants change
GROUP_PHOTO_MAX = 5 * 1024 * 1024  # Meta's largest group photo
GROUP_LIST_PAGES = 10  # pages of 1024 groups read for `GET /v1/channels/{id}/groups`
PROFILE_FIELDS = ("about", "address", "description", "email", "profile_picture_url", "websites", "vertical")
PROFILE_WRITABLE = frozenset(
    {"about", "address", "description", "email", "websites", "vertical", "profile_picture_handle"}
)
TEMPLATE_LIST_PARAMS = ("limit", "after", "before", "name", "status", "category", "language", "fields")
TEMPLATE_CREATE_KEYS = ("name", "language", "category", "components", "allow_category_change", "parameter_format")
STATUSES = frozenset({"sent", "delivered", "read", "failed"})


def base_url_refusal(value: Any, *, local: bool) -> str | None:
    """Why `config.base_url` may not be used, or None. Outside the local stack it can only be Meta's Graph root
    (optionally with a version): any other host would receive the channel's access token."""
    if value is None or local:
        return None
    parts = urlsplit(str(value))
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme != "https"
        or parts.hostname != GRAPH_HOST
        or port not in (None, 443)
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or not _GRAPH_PATH.fullmatch(parts.path)
    ):
        return f"must be Meta's Graph API root, https://{GRAPH_HOST}[/vNN.N] (other hosts only on the local stage)"
    return None


def graph_error(reply: Reply) -> ProviderError:
    body = reply.json()
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ProviderError(f"HTTP {reply.status}")
    message = str(error.get("message") or f"HTTP {reply.status}")
    data = error.get("error_data")
    extra = data.get("details") if isinstance(data, dict) else None
    if extra and str(extra) not in message:
        message = f"{message} ({extra})"
    code = error.get("code")
    details = {k: error[k] for k in ("code", "error_subcode", "type", "fbtrace_id") if error.get(k) is not None}
    transient = bool(error.get("is_transient")) or code in TRANSIENT_CODES
    return ProviderError(message, transient=transient, details={f"provider_{k}": v for k, v in details.items()})


def _iso(epoch: Any) -> str | None:
    try:
        return clock.iso(datetime.fromtimestamp(int(epoch), UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _digits(value: Any) -> str:
    return "".join(ch for ch in str(value or "") if ch.isdigit())


def _obj(value: Any) -> dict[str, Any]:
    """The value when it is a JSON object, else an empty one (provider payloads are not trusted to be well formed)."""
    return value if isinstance(value, dict) else {}


def _header(headers: dict[str, str], name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return value
    return None


def _open_secrets(channel: Channel) -> dict[str, Any]:
    """The config with sealed values (`switchboard.sealed`, e.g. a token from business onboarding) opened; a value
    that does not open stays as it is, and Graph then refuses it like any wrong token."""
    config = dict(channel.get("config") or {})
    sealed_keys = [k for k, v in config.items() if isinstance(v, str) and v.startswith("sealed:")]
    if sealed_keys:
        # on first use: keeps switchboard.sealed off the cold start
        from switchboard import sealed

        org = str(channel.get("organization_id") or "")
        for key in sealed_keys:
            with contextlib.suppress(ValueError):
                config[key] = sealed.unseal(config[key], org)
    return config


class WhatsAppCloudProvider(Provider):
    platform = "whatsapp_cloud"

    def __init__(self, channel: Channel) -> None:
        super().__init__(channel)
        self.config: dict[str, Any] = _open_secrets(channel)
        self.timeout = DEFAULT_TIMEOUT

    # Plumbing ---------------------------------------------------------------------------------------------------------
    def _setting(self, key: str) -> str:
        value = self.config.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ProviderRejected(f"config.{key} is required for a whatsapp_cloud channel.")
        return value.strip()

    @classmethod
    def check_config(cls, config: dict[str, Any], *, local: bool) -> None:
        reason = base_url_refusal(config.get("base_url"), local=local)
        if reason is not None:
            raise ValidationFailed.field("body.config.base_url", reason)

    def _base_url(self) -> str:
        """Meta's Graph root with the stack's pinned version (a channel naming Meta's root, with any version, gets
        that); a channel's own `base_url` elsewhere counts only on the local stage, checked again before each call
        (a stored item cannot send the access token elsewhere)."""
        settings = get_settings()
        given = str(self.config.get("base_url") or "").strip()
        if not given or base_url_refusal(given, local=False) is None:
            return settings.graph_root
        reason = base_url_refusal(given, local=settings.is_local)
        if reason is not None:
            raise ProviderRejected(f"{PROVIDER}: config.base_url {reason}.")
        return given

    def _api(self, *, json_content: bool = True) -> HttpApi:
        headers = {"Authorization": f"Bearer {self._setting('access_token')}"}
        if json_content:  # Meta's document requires it on most operations, GETs included
            headers["Content-Type"] = "application/json"
        return HttpApi(PROVIDER, self._base_url(), headers, timeout=self.timeout, read_error=graph_error)

    def _phone_path(self, suffix: str = "") -> str:
        return f"/{segment(self._setting('phone_number_id'))}{suffix}"

    def _post_message(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._api().call(
            "POST", self._phone_path("/messages"), json_body={"messaging_product": "whatsapp", **body}
        )

    # Connection -------------------------------------------------------------------------------------------------------
    def connect(self) -> ConnectResult:
        data = self._api().call(
            "GET", self._phone_path(), params={"fields": "display_phone_number,verified_name,quality_rating"}
        )
        metadata: dict[str, Any] = {
            k: data[k] for k in ("display_phone_number", "verified_name", "quality_rating") if k in data
        }
        metadata["phone_number_id"] = str(data.get("id") or self._setting("phone_number_id"))
        return ConnectResult("connected", metadata)

    # Messages ---------------------------------------------------------------------------------------------------------
    def send(self, message: OutboundMessage) -> SendResult:
        to = message.to_group or _digits(message.to_phone)  # a group: Meta's group id, `recipient_type: group`
        if not to:
            raise ProviderRejected("The recipient has no phone number.")
        kind = "group" if message.to_group else "individual"
        body: dict[str, Any] = {"recipient_type": kind, "to": to, "type": message.type}
        body.update(self._content(message))
        if message.reply_to:
            body["context"] = {"message_id": message.reply_to}
        data = self._post_message(body)
        messages = data.get("messages")
        if (
            not isinstance(messages, list)
            or not messages
            or not isinstance(messages[0], dict)
            or not messages[0].get("id")
        ):
            raise ProviderUnavailable(f"{PROVIDER} accepted the message but answered without its id.")
        return SendResult(str(messages[0]["id"]))

    def _content(self, message: OutboundMessage) -> dict[str, Any]:
        """The type's part of Meta's message body (`Message` in Meta's OpenAPI document)."""
        kind = message.type
        if kind == "text":
            if not message.text:
                raise ProviderRejected("A text message needs a body.")
            return {"text": {"preview_url": bool(message.preview_url), "body": message.text}}
        if kind in MEDIA_TYPES:
            return {kind: _media_object(kind, message)}
        if kind == "template":
            return {"template": _template_object(message.template or {})}
        if kind == "location":
            where = message.media or {}
            if where.get("latitude") is None or where.get("longitude") is None:
                raise ProviderRejected("A location message needs latitude and longitude.")
            # Meta's document types the coordinates as strings; 0 is a coordinate like any other.
            out = {k: _coordinate(where[k]) for k in ("latitude", "longitude")}
            out.update({k: str(where[k]) for k in ("name", "address") if where.get(k)})
            return {"location": out}
        if kind == "interactive":
            if not isinstance(message.interactive, dict) or not message.interactive.get("type"):
                raise ProviderRejected("An interactive message needs Meta's interactive object with its type.")
            return {"interactive": message.interactive}
        if kind == "contacts":
            if not message.contacts:
                raise ProviderRejected("A contacts message needs at least one contact card.")
            return {"contacts": list(message.contacts)}
        raise ProviderRejected(f"The {PROVIDER} cannot send messages of type {kind!r}.")

    def react(self, provider_message_id: str, emoji: str) -> None:
        """The Cloud API addresses a reaction to the chat's other party: `react_in_chat` with the stored one."""
        raise ProviderRejected(f"{PROVIDER}: a reaction needs the chat's other party (react_in_chat).")

    def react_in_chat(self, provider_message_id: str, emoji: str, to_phone: str) -> None:
        """React to a message of the chat with `to_phone` (the stored counterpart of the message); an empty emoji
        removes the reaction."""
        to = _digits(to_phone)
        if not to:
            raise ProviderRejected("The message's chat has no phone number to address the reaction to.")
        self._post_message(
            {
                "recipient_type": "individual",
                "to": to,
                "type": "reaction",
                "reaction": {"message_id": provider_message_id, "emoji": emoji},
            }
        )

    def read(self, provider_message_id: str) -> None:
        self._post_message({"status": "read", "message_id": provider_message_id})

    def typing_indicator(self, message_id: str) -> None:
        """Meta's typing indicator: shown for up to 25 s (or until our reply), tied to the customer's last message,
        which it also marks read."""
        self._post_message({"status": "read", "message_id": message_id, "typing_indicator": {"type": "text"}})

    def upload_media(self, data: bytes, mime_type: str, file_name: str) -> str:
        """`POST /{phone_number_id}/media` (multipart): the media id a message can then send by `id`."""
        answer = self._api(json_content=False).call(
            "POST",
            self._phone_path("/media"),
            form={"messaging_product": "whatsapp", "type": mime_type},
            files={"file": (file_name, data, mime_type)},
        )
        if not answer.get("id"):
            raise ProviderUnavailable(f"{PROVIDER} accepted the upload but answered without its id.")
        return str(answer["id"])

    def block(self, phone: str, blocked: bool) -> None:
        """`POST` (block) or `DELETE` (unblock) `/{phone_number_id}/block_users`: only users who wrote to the
        business in the last 24 hours can be blocked."""
        body = {"messaging_product": "whatsapp", "block_users": [{"user": _digits(phone)}]}
        self._api().call("POST" if blocked else "DELETE", self._phone_path("/block_users"), json_body=body)

    def reject_call(self, call_id: str, from_phone: str | None = None) -> dict[str, Any]:
        """`POST /{phone_number_id}/calls` with `action: "reject"` for an incoming call; Meta's document asks for the
        other party (`to`) on every call action but `terminate`, so the caller's number is required."""
        if not from_phone:
            raise ValidationFailed.field("body.from", "is required to reject a call on a whatsapp_cloud channel")
        body = {"messaging_product": "whatsapp", "to": _digits(from_phone), "call_id": call_id, "action": "reject"}
        answer = self._api().call("POST", self._phone_path("/calls"), json_body=body)
        return {"success": bool(answer.get("success", True))}

    # Groups -------------------------------------------------------------------------------------------------------
    def groups(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Cloud API groups. Meta creates a group asynchronously: `create` answers `{"request_id", "pending"}` and
        the group's id arrives in a `group_lifecycle_update` webhook carrying that `request_id`. Group ids are
        Meta's own, case-sensitive. Members join by invite link (Meta adds nobody at create), so the numbers given
        at create come back in `failed`; the business can remove members but not add, promote or demote them, it
        can set the group's photo but not remove it, and it cannot leave or join a group: those are 400
        `unsupported_by_provider`."""
        api = self._api()
        wa: dict[str, Any] = {"messaging_product": "whatsapp"}
        if action == "create":
            body = {**wa, "subject": str(payload["name"])}
            if payload.get("description"):
                body["description"] = str(payload["description"])
            answer = api.call("POST", self._phone_path("/groups"), json_body=body)
            if not answer.get("request_id"):
                raise ProviderUnavailable(f"{PROVIDER} accepted the group but answered without its request_id.")
            reason = "the Cloud API adds members by invite link: share the group's invite link"
            return {
                "request_id": str(answer["request_id"]),
                "pending": True,
                "failed": [{"phone": p, "reason": reason} for p in payload.get("participants") or []],
            }
        if action == "list":
            found: list[dict[str, Any]] = []
            params = {"limit": "1024"}
            for _ in range(GROUP_LIST_PAGES):
                data = api.call("GET", self._phone_path("/groups"), params=params)
                rows = _obj(data.get("data")).get("groups")
                found.extend({"jid": str(g["id"])} for g in rows or [] if isinstance(g, dict) and g.get("id"))
                paging = _obj(data.get("paging"))
                after = _obj(paging.get("cursors")).get("after")
                if not paging.get("next") or not after:
                    break
                params = {"limit": "1024", "after": str(after)}
            return {"groups": found}
        group = f"/{segment(str(payload.get('jid') or ''))}"
        if action in ("set_name", "set_description"):
            key, field = ("subject", "name") if action == "set_name" else ("description", "description")
            api.call("POST", group, json_body={**wa, key: str(payload[field])})
            return {}
        if action == "participants" and payload.get("action") == "remove":
            results: list[dict[str, Any]] = []
            phones = [str(p) for p in payload.get("participants") or []]
            for start in range(0, len(phones), GROUP_PARTICIPANTS_PER_CALL):
                chunk = phones[start : start + GROUP_PARTICIPANTS_PER_CALL]
                removal = {**wa, "participants": [{"user": _digits(p)} for p in chunk]}
                api.call("DELETE", f"{group}/participants", json_body=removal)
                results.extend({"phone": p, "status": "ok"} for p in chunk)
            return {"results": results}
        if action == "invite_code":
            answer = api.call("POST", f"{group}/invite_link", json_body=wa)
            code = str(answer.get("invite_link") or "").rstrip("/").rsplit("/", 1)[-1]
            if not code:
                raise ProviderUnavailable(f"{PROVIDER} answered without the group's invite link.")
            return {"invite_code": code}
        if action == "set_photo" and not payload.get("remove"):
            name, image, mime = self._group_photo(payload)
            self._api(json_content=False).call(
                "POST", group, form={"messaging_product": "whatsapp"}, files={"file": (name, image, mime)}
            )
            return {}
        what = {
            "participants": f"group participants {payload.get('action')}",
            "set_photo": "removing a group photo",
            "join": "joining groups",
            "leave": "leaving groups",
        }.get(action, f"group action {action}")
        raise self._unsupported(what)

    def _group_photo(self, payload: dict[str, Any]) -> tuple[str, bytes, str]:
        """(file name, bytes, MIME type) of a group photo: an uploaded asset's bytes (`image_bytes`, read by the
        service), or `image_url` fetched without the channel's token through the address checks of every provider
        request. JPEG or PNG, recognised by its first bytes, of at most `GROUP_PHOTO_MAX` bytes."""
        data = payload.get("image_bytes")
        field = "body.asset_id"
        if not isinstance(data, bytes):
            url = str(payload.get("image_url") or "")
            field = "body.image_url"
            if not url.startswith(("https://", "http://")):
                raise ValidationFailed("A group photo on a whatsapp_cloud channel needs image_url or asset_id.")
            fetcher = HttpApi("The group photo URL", url, {}, timeout=self.timeout)
            data = fetcher.request("GET", url, max_bytes=GROUP_PHOTO_MAX, deadline=MEDIA_DEADLINE).content
        if len(data) > GROUP_PHOTO_MAX:
            raise ValidationFailed.field(field, f"is larger than {GROUP_PHOTO_MAX // (1024 * 1024)} MB")
        if data.startswith(b"\xff\xd8\xff"):
            return "group.jpg", data, "image/jpeg"
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            return "group.png", data, "image/png"
        raise ValidationFailed.field(field, "is not a JPEG or PNG image")

    def download_media(
        self,
        media_id: str,
        message_id: str,
        payload: str,
        sink: MediaSink | None = None,
        deadline: float | None = None,
    ) -> DownloadedMedia:
        """`GET /{media_id}` (the URL, MIME type and SHA-256), then the URL with the token, its body streamed to
        `sink` and hashed on the way; both requests within `deadline`."""
        until = media_until(deadline)
        api = self._api()
        info = api.call("GET", f"/{segment(media_id)}", deadline=time_left(until, PROVIDER))
        url = info.get("url")
        if not isinstance(url, str) or not url:
            raise ProviderUnavailable(f"{PROVIDER} answered without a media URL.")
        out = sink if sink is not None else BufferSink()
        digest = hashlib.sha256()

        def write(chunk: bytes) -> None:
            digest.update(chunk)
            out.write(chunk)

        reply = api.request("GET", url, max_bytes=MAX_MEDIA, deadline=time_left(until, PROVIDER), sink=write)
        _check_digest(digest.digest(), info.get("sha256"))
        mime = str(info.get("mime_type") or reply.headers.get("content-type") or "application/octet-stream")
        mime = mime.split(";", 1)[0].strip()
        return downloaded(out, sink, mime, _file_name(payload, media_id, mime), url)

    # Account ----------------------------------------------------------------------------------------------------------
    def profile(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The business profile (the Cloud API's only profile). A `business` marker key is ignored."""
        updates = {k: v for k, v in (changes or {}).items() if k != "business"}
        unknown = sorted(set(updates) - PROFILE_WRITABLE)
        if unknown:
            raise ValidationFailed(
                f"Not WhatsApp business profile fields: {', '.join(unknown)}.",
                details=[{"field": f"body.{k}", "message": "not a WhatsApp business profile field"} for k in unknown],
            )
        api = self._api()
        path = self._phone_path("/whatsapp_business_profile")
        if updates:
            api.call("POST", path, json_body={"messaging_product": "whatsapp", **updates})
        data = api.call("GET", path, params={"fields": ",".join(PROFILE_FIELDS)})
        rows = data.get("data")
        current = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
        return {k: v for k, v in current.items() if k != "messaging_product"}

    def templates(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        api = self._api()
        path = f"/{segment(self._setting('waba_id'))}/message_templates"
        if action == "list":
            params = {k: str(payload[k]) for k in TEMPLATE_LIST_PARAMS if payload.get(k) is not None}
            data = api.call("GET", path, params=params)
            paging = _obj(data.get("paging"))
            cursors = _obj(paging.get("cursors"))
            return {
                "templates": list(data.get("data") or []),
                "next_cursor": cursors.get("after") if paging.get("next") else None,
            }
        if action == "create":
            body = {k: payload[k] for k in TEMPLATE_CREATE_KEYS if k in payload}
            missing = [k for k in ("name", "language", "category", "components") if k not in body]
            if missing:
                raise ValidationFailed(
                    f"A template needs {', '.join(missing)}.",
                    details=[{"field": f"body.{k}", "message": "is required"} for k in missing],
                )
            return api.call("POST", path, json_body=body)
        if action == "delete":
            name = payload.get("name")
            if not name:
                raise ValidationFailed.field("body.name", "is required to delete a template")
            params = {"name": str(name)}
            if payload.get("id") or payload.get("hsm_id"):
                params["hsm_id"] = str(payload.get("hsm_id") or payload.get("id"))
            data = api.call("DELETE", path, params=params)
            return {"deleted": bool(data.get("success", True)), "name": str(name)}
        raise ValidationFailed.field("action", f"unknown template action {action!r} (list, create, delete)")

    # Callbacks --------------------------------------------------------------------------------------------------------
    @staticmethod
    def verify_subscription(params: dict[str, str], verify_token: str) -> str:
        """Meta's `GET` handshake: echo `hub.challenge` when the mode is `subscribe` and the token matches."""
        if params.get("hub.mode") != "subscribe" or "hub.challenge" not in params:
            raise ValidationFailed("Expected hub.mode=subscribe with hub.verify_token and hub.challenge.")
        given = str(params.get("hub.verify_token") or "")
        if not verify_token or not hmac.compare_digest(given.encode(), str(verify_token).encode()):
            raise Forbidden("The verify token does not match this channel's verify_token.")
        return str(params["hub.challenge"])

    def verify_callback(self, headers: dict[str, str], body: bytes) -> None:
        secret = self.config.get("app_secret")
        if not isinstance(secret, str) or not secret:
            raise Unauthenticated("This channel has no app_secret, so its callbacks cannot be verified.")
        given = signature_of(headers)
        if not given:
            raise Unauthenticated("Missing or malformed X-Hub-Signature-256 header.")
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise Unauthenticated("The X-Hub-Signature-256 signature does not match the body.")

    def parse_callback(self, body: bytes) -> list[InboundMessage | StatusCallback | PaymentStatus]:
        """The events of this channel's number (and of changes without metadata); other numbers' changes are the
        app-level router's (`switchboard.messaging.cloud_webhook`)."""
        own_number = str(self.config.get("phone_number_id") or "")
        events: list[InboundMessage | StatusCallback | PaymentStatus] = []
        for number, changes in changes_by_number(body).items():
            if not own_number or number in ("", own_number):
                events.extend(self.events([value for field, value in changes if field == "messages"]))
        return events

    def events(self, values: list[dict[str, Any]]) -> list[InboundMessage | StatusCallback | PaymentStatus]:
        """Inbound messages, message statuses and payment statuses of `messages` change values of this channel's
        number."""
        events: list[InboundMessage | StatusCallback | PaymentStatus] = []
        for value in values:
            senders = _senders(value.get("contacts"))
            events.extend(_inbound(m, senders) for m in _list(value, "messages"))
            for row in _list(value, "statuses"):
                event = _payment(row) if row.get("type") == "payment" else _status(row)
                if event is not None:
                    events.append(event)
        return events

    def echoes(self, values: list[dict[str, Any]]) -> list[InboundMessage]:
        """Messages the business sent from the WhatsApp Business app on a coexistence number: `smb_message_echoes`
        change values (`message_echoes[]`, each a message whose `from` is the business and `to` the customer), as
        echoes (`from_me`, `from_phone` = the customer)."""
        out: list[InboundMessage] = []
        for value in values:
            for echo in _list(value, "message_echoes"):
                message = _inbound({**echo, "from": echo.get("to"), "from_user_id": echo.get("to_user_id")}, [])
                out.append(replace(message, from_me=True, contact_name=None))
        return out


ECHO_FIELD = "smb_message_echoes"

GROUP_FIELDS = frozenset(
    {
        "group_lifecycle_update",
        "group_participants_update",
        "group_participant_update",  # the spelling of the document's `Change.field` enum
        "group_settings_update",
        "group_status_update",
    }
)


def group_events(field: str, value: dict[str, Any]) -> list[GroupEvent]:
    """The group events of one group change value (`value.groups[]`, Meta's `Groups` objects)."""
    out: list[GroupEvent] = []
    for row in _list(value, "groups"):
        jid = str(row.get("group_id") or "").strip()
        request_id = str(row.get("request_id") or "") or None
        kind = str(row.get("type") or "")
        added = tuple(
            p
            for p in (
                _digits(_obj(x).get("wa_id") or _obj(x).get("input")) for x in row.get("added_participants") or []
            )
            if p
        )
        removed = tuple(
            p
            for p in (
                _digits(_obj(x).get("wa_id") or _obj(x).get("input")) for x in row.get("removed_participants") or []
            )
            if p
        )
        subject = row.get("subject") if isinstance(row.get("subject"), str) else None
        description = row.get("description") if isinstance(row.get("description"), str) else None
        if field == "group_lifecycle_update" and kind == "group_create":
            if row.get("errors") or not jid:
                out.append(GroupEvent(jid, "create_failed", request_id=request_id))
            else:
                out.append(
                    GroupEvent(
                        jid, "created", participants=added, name=subject, description=description, request_id=request_id
                    )
                )
            continue
        if not jid:
            continue
        if field == "group_lifecycle_update" and kind == "group_delete":
            out.append(GroupEvent(jid, "left", request_id=request_id))
            continue
        if removed:
            out.append(GroupEvent(jid, "participants", action="leave", participants=removed))
        if added:
            out.append(GroupEvent(jid, "participants", action="join", participants=added))
        if subject is not None or description is not None:
            out.append(GroupEvent(jid, "update", name=subject, description=description))
    return out


def signature_of(headers: dict[str, str]) -> str:
    """The lower-case hex digest of `X-Hub-Signature-256: sha256=<hex>`, or "" when absent or malformed."""
    given = (_header(headers, SIGNATURE_HEADER) or "").strip()
    if not given.lower().startswith("sha256="):
        return ""
    return given[len("sha256=") :].lower()


def changes_by_number(body: bytes) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """A callback body's changes as `(field, value)`, grouped by `value.metadata.phone_number_id` ("" when a change
    names no number). `messages` changes carry messages and statuses; the other fields (group, template, account
    and quality updates) are events about the number."""
    try:
        doc = jsonbody.parse(body)
    except ValueError:
        raise ValidationFailed.field("body", "is not valid JSON") from None
    if not isinstance(doc, dict) or doc.get("object") != "whatsapp_business_account":
        raise ValidationFailed.field("body.object", "must be whatsapp_business_account")
    entries = doc.get("entry")
    if not isinstance(entries, list):
        raise ValidationFailed.field("body.entry", "must be a list")
    grouped: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for entry in entries:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        if not isinstance(changes, list):
            raise ValidationFailed.field("body.entry.changes", "must be a list")
        for change in changes:
            value = change.get("value") if isinstance(change, dict) else None
            if not isinstance(value, dict):
                continue
            number = str(_obj(value.get("metadata")).get("phone_number_id") or "")
            grouped.setdefault(number, []).append((str(change.get("field") or "messages"), value))
    return grouped


def _media_object(kind: str, message: OutboundMessage) -> dict[str, Any]:
    media = message.media or {}
    obj: dict[str, Any] = {}
    if media.get("id"):
        obj["id"] = str(media["id"])
    elif media.get("link") or media.get("url"):
        obj["link"] = str(media.get("link") or media["url"])
    else:
        raise ProviderRejected(f"A {kind} message needs media.url or media.id for the {PROVIDER}.")
    caption = media.get("caption") or message.text
    if kind in CAPTIONED and caption:
        obj["caption"] = str(caption)
    if kind == "document" and media.get("filename"):
        obj["filename"] = str(media["filename"])
    return obj


def _template_object(template: dict[str, Any]) -> dict[str, Any]:
    """CONVENTIONS: the API takes `language: "<code>"`; Meta wants `{policy: "deterministic", code}`."""
    if not template.get("name"):
        raise ProviderRejected("A template message needs template.name.")
    language = template.get("language") or "en_US"
    code = language.get("code") if isinstance(language, dict) else language
    out: dict[str, Any] = {"name": str(template["name"]), "language": {"policy": "deterministic", "code": str(code)}}
    if template.get("components"):
        out["components"] = template["components"]
    return out


def _coordinate(value: Any) -> str:
    try:
        return repr(float(value))
    except (TypeError, ValueError):
        raise ProviderRejected("Location coordinates must be numbers.") from None


# Callback parsing helpers ---------------------------------------------------------------------------------------------
def _list(value: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = value.get(key)
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ValidationFailed.field(f"body.entry.changes.value.{key}", "must be a list of objects")
    return items


@dataclass(frozen=True)
class _Sender:
    phone: str
    user_id: str | None
    name: str | None


def _senders(contacts: Any) -> list[_Sender]:
    """`value.contacts`: each sender's phone (`wa_id`, absent for a user with a username), business-scoped user id
    (`user_id`) and profile name."""
    found: list[_Sender] = []
    for contact in contacts if isinstance(contacts, list) else []:
        if not isinstance(contact, dict):
            continue
        profile = _obj(contact.get("profile"))
        user_id = contact.get("user_id")
        found.append(
            _Sender(
                phone=_digits(contact.get("wa_id")),
                user_id=str(user_id) if isinstance(user_id, str) and user_id else None,
                name=str(profile["name"]) if profile.get("name") else None,
            )
        )
    return found


def _sender_of(message: dict[str, Any], senders: list[_Sender]) -> _Sender:
    phone = _digits(message.get("from"))
    user_id = message.get("from_user_id")
    user_id = str(user_id) if isinstance(user_id, str) and user_id else None
    match = next(
        (s for s in senders if (phone and s.phone == phone) or (user_id and s.user_id == user_id)),
        senders[0] if len(senders) == 1 and not phone and not user_id else None,
    )
    if match:
        return _Sender(phone or match.phone, user_id or match.user_id, match.name)
    return _Sender(phone, user_id, None)


# The part of each inbound type that becomes the message's text.
_TEXT_OF = {"text": "body", "system": "body", "button": "text", "reaction": "emoji", "order": "text"}


def _inbound(message: dict[str, Any], senders: list[_Sender]) -> InboundMessage:
    sender, message_id = _sender_of(message, senders), message.get("id")
    if not (sender.phone or sender.user_id) or not message_id:
        raise ValidationFailed.field(
            "body.entry.changes.value.messages", "every message needs an id and from or from_user_id"
        )
    kind = str(message.get("type") or "unknown")
    part = _obj(message.get(kind))
    text: str | None = part.get(_TEXT_OF[kind]) if kind in _TEXT_OF else None
    media: dict[str, Any] | None = None
    if kind in MEDIA_TYPES:
        media = {k: part[k] for k in ("id", "mime_type", "sha256", "filename", "voice", "animated") if k in part}
        text = part.get("caption")
        if text:
            media["caption"] = text
    elif kind == "location":
        media = {k: part[k] for k in ("latitude", "longitude", "name", "address", "url") if k in part}
    elif kind == "button":
        media = {"payload": part.get("payload")}
    elif kind == "interactive":
        reply_type = str(part.get("type") or "")
        reply = _obj(part.get(reply_type))
        if reply_type == "nfm_reply":  # a WhatsApp Flow's answer: `response_json` is the flow's own JSON text
            text = reply.get("body")
            media = {"reply_type": reply_type, "name": reply.get("name"), "response_json": reply.get("response_json")}
        else:
            text = reply.get("title")
            media = {"reply_type": reply_type, "reply_id": reply.get("id"), "description": reply.get("description")}
    elif kind == "reaction":
        media = {"reaction_to": part.get("message_id")}
    elif kind == "contacts":
        media = {"contacts": message.get("contacts") or []}
    elif kind == "order":
        media = {"catalog_id": part.get("catalog_id"), "product_items": _cart(part.get("product_items"))}
    elif kind == "system":
        media = {k: part[k] for k in ("type", "wa_id", "customer", "identity") if k in part} or None
    if message.get("errors"):  # `unsupported` messages (and others Meta could not process) say why
        media = {**(media or {}), "errors": message["errors"]}
    if kind == "unsupported" and isinstance(message.get("unsupported"), dict):
        media = {**(media or {}), "unsupported": message["unsupported"]}
    if isinstance(message.get("referral"), dict):  # click-to-WhatsApp ads
        media = {**(media or {}), "referral": message["referral"]}
    context = message.get("context")
    if isinstance(context, dict) and context.get("id"):
        media = {**(media or {}), "context": {"message_id": context["id"], "from": context.get("from")}}
    if media is not None:
        media = {k: v for k, v in media.items() if v is not None}
    return InboundMessage(
        provider_message_id=str(message_id),
        from_phone=sender.phone,
        type=kind,
        text=str(text) if text is not None else None,
        media=media,
        contact_name=sender.name,
        timestamp=_iso(message.get("timestamp")),
        from_user_id=sender.user_id,
    )


def _cart(rows: Any) -> list[dict[str, Any]]:
    """An `order` message's `product_items` (Meta's `OrderMessage`: `product_retailer_id`, `quantity`, `item_price`,
    `currency`, all required), checked: a cart Meta could never send is refused (400) like any malformed message."""
    where = "body.entry.changes.value.messages.order.product_items"
    if not isinstance(rows, list) or not rows:
        raise ValidationFailed.field(where, "an order message needs at least one product item")
    items: list[dict[str, Any]] = []
    for row in rows:
        row = _obj(row)
        retailer, quantity, price, currency = (
            row.get("product_retailer_id"),
            row.get("quantity"),
            row.get("item_price"),
            row.get("currency"),
        )
        if (
            not isinstance(retailer, str)
            or not retailer
            or not isinstance(quantity, int)
            or isinstance(quantity, bool)
            or quantity < 1
            or not isinstance(price, int | float)
            or isinstance(price, bool)
            or price < 0
            or not isinstance(currency, str)
            or not re.fullmatch(r"[A-Z]{3}", currency)
        ):
            raise ValidationFailed.field(
                where, "each needs product_retailer_id, a whole quantity of at least 1, item_price and currency"
            )
        items.append({"product_retailer_id": retailer, "quantity": quantity, "item_price": price, "currency": currency})
    if len({i["currency"] for i in items}) > 1:
        raise ValidationFailed.field(where, "the items of one order share one currency")
    return items


# Meta's refund statuses that mean the money went back (`payment.refunds[]` or `payment.transaction.refunds[]`).
REFUNDED = frozenset({"completed", "success", "refunded"})
PAYMENT_STATUSES = frozenset({"pending", "captured", "failed"})


def _money(amount: Any) -> float | None:
    """Meta's `{value, offset}` amount as a number (None when it is not one)."""
    amount = _obj(amount)
    value, offset = amount.get("value"), amount.get("offset")
    if not isinstance(value, int | float) or not isinstance(offset, int | float) or not offset:
        return None
    return float(value) / float(offset)


def _refunded(payment: dict[str, Any]) -> bool:
    """Whether the payment's completed refunds give its whole amount back (any completed refund, when the amounts
    are not all given)."""
    transaction = _obj(payment.get("transaction"))
    refunds = [_obj(r) for r in (payment.get("refunds") or transaction.get("refunds") or []) if isinstance(r, dict)]
    done = [r for r in refunds if str(r.get("status") or "").lower() in REFUNDED]
    if not done:
        return False
    paid = _money(payment.get("amount")) or _money(transaction.get("amount"))
    amounts = [_money(r.get("amount")) for r in done]
    if paid is None or any(a is None for a in amounts):
        return True
    return sum(a for a in amounts if a is not None) >= paid


def _payment(row: dict[str, Any]) -> PaymentStatus | None:
    """A `statuses[]` entry of `type: "payment"` (Meta's payment status webhook of the Payments API): `status`
    `pending`, `captured` or `failed`, `payment.reference_id` the bill's; a captured payment whose refunds give the
    money back is `refunded`. Anything else is nothing our orders track."""
    payment = _obj(row.get("payment"))
    reference = payment.get("reference_id")
    value = str(row.get("status") or "")
    if not isinstance(reference, str) or not reference or value not in PAYMENT_STATUSES:
        return None
    transaction = _obj(payment.get("transaction"))
    ours = "refunded" if value == "captured" and _refunded(payment) else value
    return PaymentStatus(
        reference_id=reference,
        status=ours,
        provider_message_id=str(row["id"]) if row.get("id") else None,
        transaction_id=str(transaction["id"]) if transaction.get("id") else None,
        timestamp=_iso(row.get("timestamp")),
    )


def _status(status: dict[str, Any]) -> StatusCallback | None:
    value = status.get("status")
    if value not in STATUSES or not status.get("id"):
        return None  # e.g. "deleted" or "warning": nothing our status model tracks
    error: str | None = None
    errors = status.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0]
        title = str(first.get("title") or first.get("message") or "error")
        message = first.get("message")
        data = _obj(first.get("error_data"))
        error = f"({first['code']}) {title}" if first.get("code") is not None else title
        for extra in (message, data.get("details")):
            if extra and str(extra) not in error:
                error = f"{error}: {extra}"
    elif value == "failed":
        error = "The WhatsApp Cloud API reported the message as failed."
    return StatusCallback(
        provider_message_id=str(status["id"]), status=str(value), timestamp=_iso(status.get("timestamp")), error=error
    )


# Media helpers --------------------------------------------------------------------------------------------------------
def _check_digest(digest: bytes, announced: Any) -> None:
    """Graph announces the file's SHA-256 (hex; base64 seen in some payloads): a mismatch with the `digest` of what
    arrived means a corrupt transfer."""
    if not isinstance(announced, str) or not announced:
        return
    if len(announced) == 64 and all(c in "0123456789abcdefABCDEF" for c in announced):
        ok = hmac.compare_digest(announced.lower(), digest.hex())
    elif len(announced) == 44 and announced.endswith("="):
        ok = hmac.compare_digest(announced, base64.b64encode(digest).decode())
    else:
        return
    if not ok:
        raise ProviderUnavailable(f"{PROVIDER}: the downloaded media does not match its SHA-256; retry.")


def _file_name(payload: str, media_id: str, mime: str) -> str:
    """The document's own file name when the raw message payload carries one, else `<media_id><extension>`."""
    try:
        message = json.loads(payload) if payload else None
    except ValueError:
        message = None
    if isinstance(message, dict):
        for kind in MEDIA_TYPES:
            part = message.get(kind)
            name = part.get("filename") if isinstance(part, dict) else None
            if isinstance(name, str) and name.strip():
                cleaned = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
                if cleaned and cleaned not in (".", ".."):
                    return cleaned[:255]
    extension = _extension(mime) or ""
    safe_id = "".join(c for c in media_id if c.isalnum() or c in "-_") or "media"
    return f"{safe_id}{extension}"


def _extension(mime: str) -> str | None:
    return mimetypes.guess_extension(mime)
