"""WAHA ("WhatsApp HTTP API", devlikeapro/waha) as the engine of a `whatsapp_web` channel.

Routes and bodies are WAHA's own (src/api/*.controller.ts, src/structures/*.dto.ts): every request carries
`X-Api-Key: <config.api_key>`; chat ids are `<digits>@c.us`; message ids are WAHA's serialized form
`<fromMe>_<chat id>_<id>`.

- Session: `GET /api/sessions/{session}` (404 when unknown), `POST /api/sessions` `{name, config, start: true}`,
  `PUT /api/sessions/{session}` `{config}` (only when our webhook is not configured yet), then
  `POST /api/sessions/{session}/start` (idempotent); `DELETE /api/sessions/{session}` on disconnect (stop and logout,
  idempotent). States `STOPPED`, `STARTING`, `SCAN_QR_CODE`, `WORKING`, `FAILED` → channel `disconnected`, `pairing`,
  `pairing`, `connected`, `error`.
- Webhook (`config.webhooks[]`): our callback URL, the events we consume and `hmac.key` = the channel's secret; WAHA
  then signs each body with `X-Webhook-Hmac: hex(HMAC-SHA512(key, raw body))` (`X-Webhook-Hmac-Algorithm: sha512`).
- Pairing: `GET /api/{session}/auth/qr?format=raw` → `{value}`; `POST /api/{session}/auth/request-code`
  `{phoneNumber}` → `{code}`.
- Sends: `POST /api/sendText|sendImage|sendFile|sendVoice|sendVideo|sendLocation|sendContactVcard`; the answer is the
  engine's message (WEBJS: `id` as a string or `{_serialized}`; NOWEB: Baileys' `{key: {remoteJid, fromMe, id}}`,
  and nothing at all for a contact card).
- Actions: `PUT /api/{session}/chats/{chatId}/messages/{messageId}` `{text}` (edit), `DELETE` the same (delete),
  `PUT /api/reaction` `{messageId, reaction}`, `POST /api/sendSeen` `{chatId, messageId}`,
  `POST /api/{session}/presence` `{chatId, presence}`, `GET /api/contacts/check-exists?phone=`,
  `POST /api/contacts/block|unblock` `{contactId}`, `GET /api/{session}/lids/{lid}` → `{lid, pn}`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any
from urllib.parse import urlsplit

from switchboard import jsonbody
from switchboard.errors import Unauthenticated, ValidationFailed
from switchboard.providers.base import (
    BufferSink,
    CallbackEvent,
    ConnectResult,
    DownloadedMedia,
    GroupEvent,
    InboundMessage,
    LabelCatalogEvent,
    LabelEvent,
    MediaSink,
    MessageChange,
    OutboundMessage,
    ProviderRejected,
    ProviderUnavailable,
    SendResult,
    SendUncertain,
    SessionStatus,
    StatusCallback,
    contact_cards,
    downloaded,
)
from switchboard.providers.http import MAX_MEDIA, MEDIA_DEADLINE, HttpApi, ProviderError, Reply, segment
from switchboard.providers.whatsapp_web import (
    LABEL_COLORS,
    LinkedDeviceProvider,
    callback_url,
    digits,
    event_ms,
    header,
    iso,
    obj,
    phone_of,
)

PROVIDER = "WAHA"
SIGNATURE_HEADER = "x-webhook-hmac"
# what parse_callback consumes (group.v2.* and the lids API are WAHA's since 2025; see docs/providers.md)
EVENTS = ["message", "message.any", "message.ack", "session.status", "group.v2.participants", "group.v2.update",
          "group.v2.leave", "label.chat.added", "label.chat.deleted", "label.upsert", "label.deleted",
          "message.reaction", "message.revoked", "message.edited", "poll.vote"]  # fmt: skip
SESSION_STATUS = {
    "STOPPED": "disconnected",
    "STARTING": "pairing",
    "SCAN_QR_CODE": "pairing",
    "WORKING": "connected",
    "FAILED": "error",
}
ACKS = {1: "sent", 2: "delivered", 3: "read", 4: "played", -1: "failed"}
PRESENCE = {"typing": "typing", "recording": "recording", "paused": "paused", "available": "online",
            "unavailable": "offline"}  # fmt: skip
SEND_ROUTES = {
    "text": "/api/sendText",
    "image": "/api/sendImage",
    "document": "/api/sendFile",
    "audio": "/api/sendVoice",
    "video": "/api/sendVideo",
    "location": "/api/sendLocation",
    "contacts": "/api/sendContactVcard",
    "poll": "/api/sendPoll",  # src/api/chatting.controller.ts sendPoll, src/structures/chatting.dto.ts MessagePoll
}
_SERIALIZED = re.compile(r"^(true|false)_([^_]+)_(.+)$")


def waha_error(reply: Reply) -> ProviderError:
    """WAHA's errors are NestJS bodies: `{statusCode, message, error}` or, for a session in the wrong state,
    `{error, session, status, expected}`."""
    body = reply.json()
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, list):
            message = "; ".join(str(m) for m in message)
        text = message if isinstance(message, str) and message else body.get("error")
        if isinstance(text, str) and text:
            details = {k: body[k] for k in ("status", "expected") if k in body}
            return ProviderError(text, details={"engine_" + k: v for k, v in details.items()})
    return ProviderError(reply.text() or f"HTTP {reply.status}")


def chat_id(phone: str) -> str:
    number = digits(phone)
    if not number:
        raise ProviderRejected("The recipient has no phone number.")
    return f"{number}@c.us"


def chat_of(message_id: str) -> str:
    """The chat of a serialized WAHA message id (`true_14155550111@c.us_3EB0…`)."""
    match = _SERIALIZED.match(message_id)
    if not match:
        raise ProviderRejected(f"{message_id!r} is not a WAHA message id.")
    return match.group(2)


def message_id_of(answer: Any) -> str | None:
    """The serialized message id from every shape a WAHA send answers with; None when there is none."""
    data = obj(answer)
    ident = data.get("id")
    if isinstance(ident, str) and ident:
        return ident
    if isinstance(ident, dict):
        if ident.get("_serialized"):
            return str(ident["_serialized"])
        if ident.get("id") and ident.get("remote"):
            return f"{str(bool(ident.get('fromMe'))).lower()}_{_cus(ident['remote'])}_{ident['id']}"
    key = obj(data.get("key"))
    if key.get("id") and key.get("remoteJid"):
        return f"{str(bool(key.get('fromMe'))).lower()}_{_cus(key['remoteJid'])}_{key['id']}"
    raw = obj(obj(data.get("_data")).get("id"))
    if raw.get("_serialized"):
        return str(raw["_serialized"])
    return None


def _cus(jid: Any) -> str:
    """Chat ids in WAHA's `@c.us` form (NOWEB reports `@s.whatsapp.net`)."""
    value = str(jid)
    return value.replace("@s.whatsapp.net", "@c.us")


def _media_type(payload: dict[str, Any]) -> str:
    if payload.get("location"):
        return "location"
    if payload.get("vCards"):
        return "contacts"
    if not payload.get("hasMedia"):
        return "text"
    mime = str(obj(payload.get("media")).get("mimetype") or "")
    for kind in ("image", "video", "audio"):
        if mime.startswith(kind + "/"):
            return kind
    return "document"


class WahaProvider(LinkedDeviceProvider):
    engine = "waha"
    provider_name = PROVIDER
    message_types = frozenset(SEND_ROUTES)

    def api(self) -> HttpApi:
        return HttpApi(
            PROVIDER,
            self.setting("base_url"),
            {"X-Api-Key": self.setting("api_key")},
            timeout=self.timeout,
            read_error=waha_error,
        )

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> dict[str, Any]:
        return self.api().call(method, path, json_body=body, params=params)

    def _session_path(self, *parts: str) -> str:
        return "/api/" + "/".join(segment(p) for p in (self.session, *parts))

    # Connection -------------------------------------------------------------------------------------------------------
    def _webhook(self) -> dict[str, Any]:
        return {
            "url": callback_url(str(self.channel.get("id"))),
            "events": list(EVENTS),
            "hmac": {"key": self.secret},
            "retries": {"policy": "exponential", "delaySeconds": 2, "attempts": 10},
        }

    def _info(self) -> dict[str, Any] | None:
        try:
            return self._call("GET", f"/api/sessions/{segment(self.session)}")
        except ProviderRejected as err:
            if any(d.get("http_status") == 404 for d in err.details):
                return None
            raise

    def connect(self) -> ConnectResult:
        ours = self._webhook()
        info = self._info()
        if info is None:
            data = self._call(
                "POST", "/api/sessions", {"name": self.session, "config": {"webhooks": [ours]}, "start": True}
            )
        else:
            config = obj(info.get("config"))
            hooks = [h for h in config.get("webhooks") or [] if isinstance(h, dict)]
            if ours not in hooks:  # keep the operator's other webhooks and settings; replace only ours
                others = [h for h in hooks if h.get("url") != ours["url"]]
                self._call(
                    "PUT", f"/api/sessions/{segment(self.session)}", {"config": {**config, "webhooks": [*others, ours]}}
                )
            data = self._call("POST", f"/api/sessions/{segment(self.session)}/start")
        return self._result(data)

    def _result(self, data: dict[str, Any]) -> ConnectResult:
        state = str(data.get("status") or "")
        status = SESSION_STATUS.get(state)
        if status is None:
            raise ProviderUnavailable(f"{PROVIDER} answered an unknown session status {state!r}.")
        metadata: dict[str, Any] = {"session": self.session, "engine": self.engine, "engine_status": state}
        me = obj(data.get("me"))
        if me.get("id"):
            metadata["wa_id"] = phone_of(me["id"]) or str(me["id"])
        if me.get("pushName"):
            metadata["push_name"] = str(me["pushName"])
        if status == "disconnected":  # a start that left the session stopped is a failure to start
            status = "error"
        if status == "error":
            metadata["error"] = f"The {PROVIDER} session is {state}; reconnect, or scan the QR code again."
        return ConnectResult(status, metadata)

    def status(self) -> str:
        info = self._info()
        return "disconnected" if info is None else SESSION_STATUS.get(str(info.get("status")), "error")

    def disconnect(self) -> None:
        try:
            self.api().request("DELETE", f"/api/sessions/{segment(self.session)}")
        except ProviderRejected as err:
            if not any(d.get("http_status") == 404 for d in err.details):
                raise

    def qr(self) -> dict[str, Any]:
        data = self._call("GET", self._session_path("auth", "qr"), params={"format": "raw"})
        if not data.get("value"):
            raise ProviderUnavailable(f"{PROVIDER} answered without a QR code.")
        return {"qr": str(data["value"]), "expires_in": None}

    def pairing_code(self, phone: str) -> dict[str, Any]:
        data = self._call("POST", self._session_path("auth", "request-code"), {"phoneNumber": digits(phone)})
        if not data.get("code"):
            raise ProviderUnavailable(f"{PROVIDER} answered without a pairing code.")
        return {"code": str(data["code"])}

    # Messages ---------------------------------------------------------------------------------------------------------
    def _file(self, message: OutboundMessage) -> dict[str, Any]:
        media = message.media or {}
        url = media.get("url") or media.get("link")
        if not url:
            raise ProviderRejected(f"A {message.type} message needs media.url (or an uploaded asset) for {PROVIDER}.")
        mime = media.get("mime_type") or {"audio": "audio/ogg; codecs=opus", "video": "video/mp4"}.get(
            message.type, "application/octet-stream"
        )
        file: dict[str, Any] = {"url": str(url), "mimetype": str(mime)}
        if media.get("filename"):
            file["filename"] = str(media["filename"])
        return file

    def send(self, message: OutboundMessage) -> SendResult:
        kind = message.type
        route = SEND_ROUTES.get(kind)
        if route is None:
            raise ProviderRejected(f"{PROVIDER} cannot send messages of type {kind!r}.")
        chat = message.to_group or chat_id(message.to_phone)  # a group's chat is its JID (`…@g.us`)
        body: dict[str, Any] = {"session": self.session, "chatId": chat}
        media = message.media or {}
        if kind == "text":
            if not message.text:
                raise ProviderRejected("A text message needs a body.")
            body["text"] = message.text
        elif kind == "location":
            if "latitude" not in media or "longitude" not in media:
                raise ProviderRejected("A location message needs latitude and longitude.")
            body |= {"latitude": media["latitude"], "longitude": media["longitude"]}
            body["title"] = str(media.get("name") or media.get("address") or "")
        elif kind == "poll":
            poll = message.poll or {}
            count = int(poll.get("selectable_count", 1))
            if count not in (0, 1, len(poll.get("options") or [])):  # MessagePoll has only `multipleAnswers`
                raise ProviderRejected(f"{PROVIDER} polls allow one answer or any number (selectable_count 1 or 0).")
            body["poll"] = {"name": poll.get("name"), "options": list(poll.get("options") or []),
                            "multipleAnswers": count != 1}  # fmt: skip
        elif kind == "contacts":
            cards = contact_cards(message)
            if not cards or not all(number for _, number, _ in cards):
                raise ProviderRejected("A contacts message needs contact cards with a phone number each.")
            body["contacts"] = [
                {"fullName": name, "organization": company, "phoneNumber": "+" + number, "whatsappId": number}
                for name, number, company in cards
            ]
        else:
            body["file"] = self._file(message)
            caption = media.get("caption") or message.text
            if caption and kind in ("image", "video", "document"):
                body["caption"] = str(caption)
        if message.reply_to and kind != "contacts":
            body["reply_to"] = message.reply_to
        answer = self.send_request(route, body)
        ident = message_id_of(answer)
        if ident is None:
            raise SendUncertain(f"{PROVIDER} accepted the message but answered without its id.")
        return SendResult(ident)

    def edit(self, provider_message_id: str, text: str) -> None:
        path = self._session_path("chats", chat_of(provider_message_id), "messages", provider_message_id)
        self._call("PUT", path, {"text": text})

    def delete(self, provider_message_id: str) -> None:
        path = self._session_path("chats", chat_of(provider_message_id), "messages", provider_message_id)
        self.api().request("DELETE", path)

    def react(self, provider_message_id: str, emoji: str) -> None:
        self._call(
            "PUT", "/api/reaction", {"session": self.session, "messageId": provider_message_id, "reaction": emoji}
        )

    def read(self, provider_message_id: str) -> None:
        body = {"session": self.session, "chatId": chat_of(provider_message_id), "messageId": provider_message_id}
        self._call("POST", "/api/sendSeen", body)

    def presence(self, to_phone: str, state: str) -> None:
        self._call("POST", self._session_path("presence"), {"chatId": chat_id(to_phone), "presence": PRESENCE[state]})

    def download_media(
        self,
        media_id: str,
        message_id: str,
        payload: str,
        sink: MediaSink | None = None,
        deadline: float | None = None,
    ) -> DownloadedMedia:
        """WAHA hands out media as a link on its own server (`payload.media.url`); only links there are fetched, the
        body streamed to `sink`."""
        try:
            raw = json.loads(payload)
        except ValueError:
            raw = {}
        url = str(
            obj(obj(raw).get("media")).get("url")
            or obj(obj(raw).get("payload")).get("media", {}).get("url")
            or media_id
        )
        api = self.api()
        path = urlsplit(url).path
        if path.startswith("/api/files/") and ".." not in path.split("/"):
            url = f"{api.base_url}{path}"  # WAHA may name itself by an internal host: its files are under base_url
        if not url.startswith(api.base_url + "/"):
            raise ProviderRejected(f"The media link is not on this channel's {PROVIDER} server.")
        out = sink if sink is not None else BufferSink()
        wait = MEDIA_DEADLINE if deadline is None else deadline
        reply = api.request("GET", url, max_bytes=MAX_MEDIA, deadline=wait, sink=out.write)
        mime = (reply.headers.get("content-type") or "application/octet-stream").split(";", 1)[0].strip()
        name = url.rsplit("/", 1)[-1].split("?", 1)[0] or "media"
        name = "".join(c for c in name if c.isalnum() or c in "-_.@") or "media"
        return downloaded(out, sink, mime, name[:255], url)

    # Account ----------------------------------------------------------------------------------------------------------
    def profile(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """`/api/{session}/profile` (src/api/profile.controller.ts): name, about (WAHA's status) and picture. WAHA has
        no business profile."""
        wanted = dict(changes or {})
        if wanted.pop("business", None):
            raise self._unsupported("business profiles")
        unknown = set(wanted) - {"name", "about", "picture_url"}
        if unknown:
            raise ProviderRejected(
                f"{PROVIDER} profiles have name, about and picture_url, not {', '.join(sorted(unknown))}."
            )
        if "name" in wanted:
            self._call("PUT", self._session_path("profile", "name"), {"name": str(wanted["name"])})
        if "about" in wanted:
            self._call("PUT", self._session_path("profile", "status"), {"status": str(wanted["about"])})
        if wanted.get("picture_url"):
            self._call("PUT", self._session_path("profile", "picture"), {"file": {"url": str(wanted["picture_url"])}})
        elif "picture_url" in wanted:
            self._call("DELETE", self._session_path("profile", "picture"))
        data = self._call("GET", self._session_path("profile"))
        out = {"name": data.get("name"), "picture_url": data.get("picture"), "wa_id": phone_of(data.get("id"))}
        if "about" in wanted:
            out["about"] = wanted["about"]
        return out

    def lookup_contact(self, phone: str) -> dict[str, Any]:
        data = self._call("GET", "/api/contacts/check-exists", params={"phone": digits(phone), "session": self.session})
        exists = bool(data.get("numberExists"))
        return {
            "phone": phone,
            "exists": exists,
            "name": None,
            "wa_id": (phone_of(data.get("chatId")) or data.get("chatId")) if exists else None,
        }

    def block(self, phone: str, blocked: bool) -> None:
        route = "/api/contacts/block" if blocked else "/api/contacts/unblock"
        self._call("POST", route, {"session": self.session, "contactId": chat_id(phone)})

    def resolve_lid(self, lid: str) -> str | None:
        """The phone behind an anonymised `@lid` sender, from the engine's lid map; None when it does not know."""
        try:
            data = self._call("GET", self._session_path("lids", lid))
        except ProviderRejected:  # an engine without the lids API, or a lid it refuses: not resolvable
            return None
        return phone_of(data.get("pn"))

    # Groups (src/api/groups.controller.ts; waha-docs how-to/groups) -------------------------------------------------
    def _group(self, jid: str, *parts: str) -> str:
        return self._session_path("groups", jid, *parts)

    def _text(self, method: str, path: str) -> str:
        """Routes that answer a bare string (invite codes): JSON-quoted or plain text, maybe a whole link."""
        reply = self.api().request(method, path)
        data = reply.json()
        value = data if isinstance(data, str) else reply.content.decode("utf-8", "replace").strip().strip('"')
        return value.rstrip("/").rsplit("/", 1)[-1]

    def groups(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action == "create":
            wanted = [str(p) for p in payload.get("participants") or []]
            body = {"name": payload["name"], "participants": [{"id": chat_id(p)} for p in wanted]}
            made = obj(self.api().call("POST", self._session_path("groups"), json_body=body))
            jid = _group_jid(made)
            if jid is None:
                raise ProviderUnavailable(f"{PROVIDER} created the group but answered without its id.")
            present = _participant_phones(made.get("participants"))
            missing = {phone_of(p) for p in made.get("missingParticipants") or [] if phone_of(p)}
            ok = [p for p in wanted if (present is None or p in present) and p not in missing]
            failed = [{"phone": p, "reason": "not_added"} for p in wanted if p not in ok]
            if payload.get("description"):
                body = {"description": payload["description"]}
                self.api().request("PUT", self._group(jid, "description"), json_body=body)
            code = self._text("GET", self._group(jid, "invite-code"))
            return {
                "jid": jid,
                "participants": [{"phone": p, "role": "member"} for p in ok],
                "failed": failed,
                "invite_code": code or None,
            }
        if action == "join":
            joined = self._call("POST", self._session_path("groups", "join"), {"code": payload["invite_code"]})
            jid = _group_jid(joined)
            if jid is None:
                raise ProviderUnavailable(f"{PROVIDER} joined the group but answered without its id.")
            info = obj(self.api().call("GET", self._group(jid)))
            out: dict[str, Any] = {"jid": jid, "role": "member"}
            name = info.get("subject") or info.get("name")
            if name:
                out["name"] = str(name)
            if info.get("desc") or info.get("description"):
                out["description"] = str(info.get("desc") or info.get("description"))
            people = _participant_phones(info.get("participants"))
            if people is not None:
                out["participants"] = [{"phone": p, "role": "member"} for p in sorted(people)]
            return out
        if action == "leave":
            self.api().request("POST", self._group(payload["jid"], "leave"))
            return {"jid": payload["jid"], "left": True}
        if action == "set_name":
            self.api().request("PUT", self._group(payload["jid"], "subject"), json_body={"subject": payload["name"]})
            return {"jid": payload["jid"], "ok": True}
        if action == "set_description":
            body = {"description": payload["description"]}
            self.api().request("PUT", self._group(payload["jid"], "description"), json_body=body)
            return {"jid": payload["jid"], "ok": True}
        if action == "set_photo":
            path = self._group(payload["jid"], "picture")
            if payload.get("remove"):
                self.api().request("DELETE", path)
                return {"jid": payload["jid"], "photo_id": None}
            url = payload.get("image_url") or payload.get("asset_url")
            if not url:
                raise ProviderRejected(f"{PROVIDER} takes a group picture from a URL: give image_url or asset_id.")
            self.api().request("PUT", path, json_body={"file": {"url": url}})
            return {"jid": payload["jid"], "photo_id": None}
        if action == "participants":
            route = {"add": ("participants", "add"), "remove": ("participants", "remove"),
                     "promote": ("admin", "promote"), "demote": ("admin", "demote")}[payload["action"]]  # fmt: skip
            phones = [str(p) for p in payload.get("participants") or []]
            body = {"participants": [{"id": chat_id(p)} for p in phones]}
            reply = self.api().request("POST", self._group(payload["jid"], *route), json_body=body)
            return {"jid": payload["jid"], "results": _participant_results(reply.json(), phones)}
        if action == "invite_code":
            revoke = int(payload.get("revision") or 0) > 0
            path = self._group(payload["jid"], "invite-code", *(["revoke"] if revoke else []))
            return {"jid": payload["jid"], "invite_code": self._text("POST" if revoke else "GET", path)}
        if action == "list":
            reply = self.api().request("GET", self._session_path("groups"))
            data = reply.json()
            rows = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
            return {"groups": [{"jid": j} for j in (_group_jid(obj(r)) for r in rows) if j]}
        raise self._unsupported(f"group action {action!r}")

    # Newsletters: WAHA's "channels" (src/api/channels.controller.ts) --------------------------------------------------
    def newsletters(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action == "create":
            body = {"name": payload["name"], "description": payload.get("description") or ""}
            return _newsletter(self._call("POST", self._session_path("channels"), body))
        if action in ("info", "resolve_invite"):
            ref = payload["jid"] if action == "info" else payload["invite_code"]
            return _newsletter(self._call("GET", self._session_path("channels", ref)))
        if action in ("subscribe", "unsubscribe"):
            verb = "follow" if action == "subscribe" else "unfollow"
            self.api().request("POST", self._session_path("channels", payload["jid"], verb))
            return {"jid": payload["jid"], "subscribed": action == "subscribe"}
        if action == "invite_code":
            if int(payload.get("revision") or 0) > 0:
                raise self._unsupported("resetting a newsletter's invite link")
            return {
                "jid": payload["jid"],
                **_newsletter(self._call("GET", self._session_path("channels", payload["jid"]))),
            }
        if action == "messages":
            offset = int(payload.get("cursor") or 0)
            limit = int(payload.get("limit") or 20)
            params = {"limit": str(limit), "offset": str(offset), "downloadMedia": "false"}
            reply = self.api().request("GET", self._session_path("chats", payload["jid"], "messages"), params=params)
            rows = [obj(r) for r in (reply.json() or []) if isinstance(r, dict)]
            posts = [
                {
                    "message_id": str(r.get("id")),
                    "newsletter_id": payload["jid"],
                    "timestamp": r.get("timestamp"),
                    "body": r.get("body") or "",
                    "type": "text" if not r.get("hasMedia") else _media_type(r),
                }
                for r in rows
            ]
            return {"messages": posts, "next_cursor": offset + len(rows) if len(rows) == limit else None}
        raise self._unsupported(f"newsletter action {action!r}")

    # Labels (src/api/labels.controller.ts; waha-docs how-to/labels) ---------------------------------------------------
    def labels(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action not in ("attach_chat", "detach_chat"):
            raise self._unsupported(f"label action {action!r}")  # WAHA labels chats, not messages
        if not payload.get("chat_id"):
            raise ProviderRejected("The conversation's contact has no phone number.")
        chat = chat_id(str(payload["chat_id"]))
        listed = self.api().request("GET", self._session_path("labels")).json()
        name = str(payload["name"]).strip().casefold()
        label = next((obj(x) for x in listed or [] if str(obj(x).get("name", "")).strip().casefold() == name), None)
        if label is None:
            if action == "detach_chat":
                return {"action": action, "ok": True}
            body: dict[str, Any] = {"name": payload["name"]}
            color = str(payload.get("color") or "").lower()
            if color in LABEL_COLORS:  # WAHA's colours are a fixed palette of 20, by index; others take its default
                body["color"] = LABEL_COLORS.index(color)
            label = obj(self.api().call("POST", self._session_path("labels"), json_body=body))
        current = self.api().request("GET", self._session_path("labels", "chats", chat)).json() or []
        ids = [str(obj(x).get("id")) for x in current if obj(x).get("id")]
        wanted = str(label.get("id"))
        if action == "attach_chat" and wanted not in ids:
            ids.append(wanted)
        elif action == "detach_chat":
            ids = [i for i in ids if i != wanted]
        body = {"labels": [{"id": i} for i in ids]}
        self.api().request("PUT", self._session_path("labels", "chats", chat), json_body=body)
        return {"action": action, "ok": True, "label_id": payload.get("label_id"), "engine_label_id": wanted}

    # Chats and calls (src/api/chats.controller.ts, src/api/calls.controller.ts) --------------------------------------
    def chats(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Archive and unarchive are WAHA's chat actions; it has no pin or mute."""
        if action not in ("archive", "unarchive"):
            raise self._unsupported(f"chat action {action!r}")
        if not payload.get("chat_id"):
            raise ProviderRejected("The conversation's contact has no phone number.")
        self.api().request("POST", self._session_path("chats", chat_id(str(payload["chat_id"])), action))
        return {"chat_id": payload["chat_id"], "action": action}

    def reject_call(self, call_id: str, from_phone: str | None) -> dict[str, Any]:
        if not from_phone:
            raise ProviderRejected(f"{PROVIDER} needs the caller (from) to reject a call.")
        self._call("POST", self._session_path("calls", "reject"), {"from": chat_id(from_phone), "id": call_id})
        return {"call_id": call_id, "rejected": True}

    # Callbacks --------------------------------------------------------------------------------------------------------
    def verify_callback(self, headers: dict[str, str], body: bytes) -> None:
        given = (header(headers, SIGNATURE_HEADER) or "").strip().lower()
        if not given:
            raise Unauthenticated("Missing X-Webhook-Hmac header.")

        def check(secret: str) -> None:
            expected = hmac.new(secret.encode(), body, hashlib.sha512).hexdigest()
            if not hmac.compare_digest(given.encode(), expected.encode()):
                raise Unauthenticated("The X-Webhook-Hmac signature does not match the body.")

        self.verified(check)

    def parse_callback(self, body: bytes) -> list[CallbackEvent]:
        try:
            doc = jsonbody.parse_callback(body)  # the API's rules: no key twice, no NUL, the depth limit
        except jsonbody.BodyRefused as err:
            raise ValidationFailed.field(err.field, str(err)) from None
        except ValueError:
            raise ValidationFailed.field("body", "is not valid JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("event"), str):
            raise ValidationFailed.field("body.event", "is required")
        payload = doc.get("payload")
        if not isinstance(payload, dict):
            raise ValidationFailed.field("body.payload", "must be an object")
        if doc.get("session") != self.session:  # signed with this channel's key, but about another session
            return []
        event = doc["event"]
        at = event_ms(doc.get("timestamp"))  # the webhook's `timestamp` (ms): when WAHA saw the event
        if event == "session.status":
            state = str(payload.get("status") or "")
            if state not in SESSION_STATUS:
                raise ValidationFailed.field("body.payload.status", "is not a WAHA session status")
            metadata: dict[str, Any] = {"engine_status": state}
            me = obj(doc.get("me"))
            if me.get("id"):
                metadata["wa_id"] = phone_of(me["id"]) or str(me["id"])
            return [SessionStatus(SESSION_STATUS[state], state, metadata, event_at=at)]
        if event in ("message", "message.any"):  # `message`: the customer's; `message.any`: ours too (echoes)
            if event == "message.any" and not payload.get("fromMe"):
                return []  # the customer's message arrives as `message` as well
            inbound = self._inbound(payload)
            return [inbound] if inbound else []
        if event == "message.ack":
            ack = _ack(payload)
            return [ack] if ack else []
        if event in ("label.chat.added", "label.chat.deleted"):  # src/structures/labels.dto.ts LabelChatAssociation
            chat = phone_of(payload.get("chatId"))
            name = obj(payload.get("label")).get("name")
            if name is None and payload.get("labelId") is not None:  # the engine did not include the label
                listed = self.api().request("GET", self._session_path("labels")).json() or []
                known = next((obj(x) for x in listed if str(obj(x).get("id")) == str(payload["labelId"])), {})
                name = known.get("name")
            if chat is None or not name:
                return []
            return [LabelEvent(str(name), chat, attach=event == "label.chat.added", event_at=at)]
        if event in ("label.upsert", "label.deleted"):  # src/structures/labels.dto.ts Label {id, name, color, colorHex}
            if payload.get("id") is None:
                raise ValidationFailed.field("body.payload.id", "is required")
            if event == "label.deleted":
                return [LabelCatalogEvent(str(payload["id"]), deleted=True, event_at=at)]
            name, hex_color = payload.get("name"), str(payload.get("colorHex") or "").lower()
            if not isinstance(name, str) or not name.strip():
                raise ValidationFailed.field("body.payload.name", "is required")
            color = payload.get("color")
            if not hex_color and isinstance(color, int) and 0 <= color < len(LABEL_COLORS):
                hex_color = LABEL_COLORS[color]
            return [LabelCatalogEvent(str(payload["id"]), name=name.strip(), color=hex_color or None, event_at=at)]
        if event == "poll.vote":  # src/structures/webhooks.dto.ts PollVotePayload {vote: PollVote, poll}
            vote, poll = obj(payload.get("vote")), obj(payload.get("poll"))
            if not poll.get("id"):
                raise ValidationFailed.field("body.payload.poll.id", "is required")
            chosen = vote.get("selectedOptions")
            if not isinstance(chosen, list):
                raise ValidationFailed.field("body.payload.vote.selectedOptions", "must be an array")
            if vote.get("fromMe"):
                return []
            voter = self._participant(vote.get("participant") or vote.get("from"))
            if voter is None:
                return []
            targets = _targets(str(poll["id"]), poll.get("to") or vote.get("from"))
            stamp = event_ms(vote.get("timestamp")) or at
            return [MessageChange(targets, "poll_vote", voter=voter, options=tuple(str(o) for o in chosen),
                                  event_at=stamp)]  # fmt: skip
        if event in ("message.reaction", "message.edited", "message.revoked"):
            change = self._change(event, payload)
            return [change] if change else []
        if event.startswith("group.v2."):
            group = obj(payload.get("group"))
            jid = str(group.get("id") or "")
            if not jid.endswith("@g.us"):
                raise ValidationFailed.field("body.payload.group.id", "is not a group id")
            if event == "group.v2.leave":
                return [GroupEvent(jid, "left", event_at=at)]
            if event == "group.v2.update":
                name, about = group.get("subject"), group.get("description")
                return [GroupEvent(jid, "update", name=str(name) if name is not None else None,
                                   description=str(about) if about is not None else None, event_at=at)]  # fmt: skip
            if event == "group.v2.participants" and payload.get("type") in ("join", "leave", "promote", "demote"):
                phones = [self._participant(obj(p).get("id")) for p in payload.get("participants") or []]
                found = tuple(p for p in phones if p)
                return [GroupEvent(jid, "participants", action=str(payload["type"]), participants=found, event_at=at)]
        return []

    def _change(self, event: str, payload: dict[str, Any]) -> MessageChange | None:
        """The customer's reaction (src/structures/responses.dto.ts WAMessageReaction: `reaction: {text, messageId}`),
        edit (WAMessageEditedBody: the edit as a WAMessage, `body` and the bare `editedMessageId`) or revoke
        (WAMessageRevokedBody: `{after, before, revokedMessageId}`) of a message; our own are already recorded."""
        if event == "message.reaction":
            reaction = obj(payload.get("reaction"))
            if not reaction.get("messageId"):
                raise ValidationFailed.field("body.payload.reaction.messageId", "is required")
            if payload.get("fromMe"):
                return None
            targets = _targets(str(reaction["messageId"]), payload.get("from"))
            text = reaction.get("text")
            return MessageChange(targets, "reaction", text=str(text or ""), timestamp=iso(payload.get("timestamp")))
        if event == "message.edited":
            if not payload.get("editedMessageId"):
                raise ValidationFailed.field("body.payload.editedMessageId", "is required")
            if payload.get("fromMe"):
                return None
            targets = _targets(str(payload["editedMessageId"]), payload.get("from"))
            body = payload.get("body")
            return MessageChange(targets, "edit", text=str(body or ""), timestamp=iso(payload.get("timestamp")))
        after, before = obj(payload.get("after")), obj(payload.get("before"))
        if after.get("fromMe") or before.get("fromMe"):
            return None
        chat = after.get("from") or before.get("from")
        found = [payload.get("revokedMessageId"), before.get("id"), after.get("id")]
        targets = tuple(t for ident in found if ident for t in _targets(str(ident), chat))
        if not targets:
            raise ValidationFailed.field("body.payload.revokedMessageId", "is required")
        return MessageChange(tuple(dict.fromkeys(targets)), "revoke", timestamp=iso(after.get("timestamp")))

    def _participant(self, jid: Any) -> str | None:
        value = str(jid or "")
        return self.resolve_lid(value) if value.endswith("@lid") else phone_of(value)

    def _inbound(self, payload: dict[str, Any]) -> InboundMessage | None:
        if not payload.get("id") or not payload.get("from"):
            raise ValidationFailed.field("body.payload", "a message needs id and from")
        mine = bool(payload.get("fromMe"))
        sender_jid, group = str(payload["from"]), None
        if mine:  # an echo of a message typed on the phone: the chat is the serialized id's (`true_<chat>_<id>`)
            serialized = _SERIALIZED.match(str(payload["id"]))
            sender_jid = serialized.group(2) if serialized else str(payload.get("to") or sender_jid)
        if sender_jid.endswith("@g.us"):  # a group's message: the participant (WAMessageBase) or author sent it
            group, sender_jid = (
                sender_jid,
                "" if mine else str(payload.get("participant") or payload.get("author") or ""),
            )
        sender = phone_of(sender_jid) if sender_jid else ""
        if sender is None and sender_jid.endswith("@lid"):
            sender = self.resolve_lid(sender_jid)
        if sender is None or (sender == "" and not (mine and group)):  # broadcasts, newsletters; an unmapped lid
            return None
        kind = _media_type(payload)
        media: dict[str, Any] | None = None
        if kind == "location":
            where = obj(payload.get("location"))
            media = {k: where.get(k) for k in ("latitude", "longitude", "description") if where.get(k) is not None}
        elif kind == "contacts":
            media = {"vcards": [str(v) for v in payload.get("vCards") or []]}
        elif kind != "text":
            file = obj(payload.get("media"))
            media = {
                "id": str(file.get("url") or ""),
                "mime_type": file.get("mimetype"),
                "filename": file.get("filename"),
            }
            media = {k: v for k, v in media.items() if v}
        reply = obj(payload.get("replyTo"))
        if reply.get("id"):
            media = {**(media or {}), "context": {"message_id": str(reply["id"])}}
        data = obj(payload.get("_data"))
        name = data.get("notifyName") or data.get("pushName")
        text = payload.get("body")
        return InboundMessage(
            provider_message_id=str(payload["id"]),
            from_phone=sender,
            type=kind,
            text=str(text) if text else None,
            media=media,
            contact_name=str(name) if name and not mine else None,
            timestamp=iso(payload.get("timestamp")),
            group_jid=group,
            from_me=mine,
        )


def _targets(ident: str, chat: Any) -> tuple[str, ...]:
    """The serialized ids a message named by `ident` may be stored under: `ident` itself when serialized; for a bare
    id, the customer's (`false_…`) then our own (`true_…`) form in the chat, as given and in its `@c.us` form."""
    if _SERIALIZED.match(ident):
        return (ident,)
    chats = list(dict.fromkeys(c for c in (str(chat or ""), _cus(chat or "")) if c))
    return tuple(f"{side}_{c}_{ident}" for side in ("false", "true") for c in chats) or (ident,)


def _group_jid(data: dict[str, Any]) -> str | None:
    """A group id from the shapes engines answer with (NOWEB `id`, WEBJS `gid._serialized` or `id._serialized`)."""
    for value in (data.get("id"), data.get("gid"), data.get("JID")):
        if isinstance(value, str) and value.endswith("@g.us"):
            return value
        if isinstance(value, dict) and str(value.get("_serialized", "")).endswith("@g.us"):
            return str(value["_serialized"])
    return None


def _participant_phones(rows: Any) -> set[str] | None:
    if not isinstance(rows, list):
        return None
    phones = set()
    for row in rows:
        jid = obj(row).get("id") if isinstance(row, dict) else row
        if isinstance(jid, dict):
            jid = jid.get("_serialized")
        phone = phone_of(jid)
        if phone:
            phones.add(phone)
    return phones


def _participant_results(answer: Any, phones: list[str]) -> list[dict[str, Any]]:
    """Per-number outcomes when the engine reports them (`[{jid|id, status}]`); otherwise every number succeeded."""
    reported: dict[str, Any] = {}
    for row in answer if isinstance(answer, list) else []:
        phone = phone_of(obj(row).get("jid") or obj(row).get("id"))
        if phone:
            reported[phone] = obj(row).get("status", obj(row).get("code", 200))
    out = []
    for phone in phones:
        code = str(reported.get(phone, 200))
        if code == "200":
            out.append({"phone": phone, "status": "ok"})
        else:
            out.append({"phone": phone, "status": "failed", "reason": f"engine status {code}"})
    return out


def _newsletter(data: Any) -> dict[str, Any]:
    """Our newsletter fields from WAHA's Channel (`id`, `name`, `description`, `invite` link)."""
    info = obj(data)
    if not str(info.get("id", "")).endswith("@newsletter"):
        raise ProviderUnavailable(f"{PROVIDER} answered a channel without its id.")
    invite = str(info.get("invite") or "").rstrip("/").rsplit("/", 1)[-1] or None
    return {"jid": str(info["id"]), "name": str(info.get("name") or ""),
            "description": str(info.get("description") or ""), "invite_code": invite}  # fmt: skip


def _ack(payload: dict[str, Any]) -> StatusCallback | None:
    if not payload.get("id"):
        raise ValidationFailed.field("body.payload.id", "is required")
    if not payload.get("fromMe"):  # receipts of the customer's messages are not ours to apply
        return None
    try:
        level = int(payload.get("ack"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValidationFailed.field("body.payload.ack", "must be an integer") from None
    status = ACKS.get(level)
    if status is None:
        return None
    error = f"{PROVIDER} reported the message as failed." if status == "failed" else None
    return StatusCallback(
        provider_message_id=str(payload["id"]),
        status=status,
        timestamp=iso(payload.get("timestamp")),
        error=error,
        to_phone=phone_of(payload.get("to")) or phone_of(_SERIALIZED.sub(r"\2", str(payload["id"]))),
    )
