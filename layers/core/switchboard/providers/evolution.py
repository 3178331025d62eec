"""Evolution API (EvolutionAPI/evolution-api, Baileys integration) as the engine of a `whatsapp_web` channel.

Routes and bodies are Evolution's own (src/api/routes/*.router.ts, src/api/dto/*.dto.ts): every request carries
`apikey: <config.api_key>`; `{instance}` is `config.session` (default: the channel id); numbers are digits; errors are
`{status, error, response: {message}}`.

- Instance: `GET /instance/connectionState/{instance}` (404 when unknown) → `{instance: {instanceName, state}}`;
  `POST /instance/create` `{instanceName, integration: "WHATSAPP-BAILEYS", qrcode: false, webhook}` (the instance
  waits, `close`, until a QR code or a pairing code is asked for), or for an
  existing instance `POST /webhook/set/{instance}` `{webhook}` then `GET /instance/connect/{instance}`;
  `DELETE /instance/delete/{instance}` on disconnect. States `open`, `connecting`, `close` → channel `connected`,
  `pairing`, `disconnected`.
- Webhook: our callback URL, `events` (`MESSAGES_UPSERT`, `MESSAGES_UPDATE`, `CONNECTION_UPDATE`) and
  `headers: {jwt_key: <channel secret>}`: Evolution then sends `Authorization: Bearer <JWT>` signed HS256 with that
  key, `{iat, exp: iat + 600, app: "evolution", action: "webhook"}` (src/api/integrations/event/webhook/
  webhook.controller.ts `generateJwtToken`), which we verify; the body names the instance.
- Pairing: `GET /instance/connect/{instance}` → `{code, pairingCode, base64, count}`; a pairing code needs the
  connection to start with the number: `?number=` on a `close` instance, else the instance is deleted and created
  again with `{number, qrcode: true}` (its answer's `qrcode.pairingCode`).
- Sends: `POST /message/sendText|sendMedia|sendWhatsAppAudio|sendSticker|sendLocation|sendContact/{instance}`; the
  answer is Baileys' message `{key: {remoteJid, fromMe, id}, ...}`. Our provider message id is
  `<fromMe>_<remoteJid>_<id>` (the key in one string), so later actions can name the key again.
- Actions: `POST /chat/updateMessage`, `DELETE /chat/deleteMessageForEveryone`, `POST /message/sendReaction`,
  `POST /chat/markMessageAsRead`, `POST /chat/sendPresence`, `POST /chat/whatsappNumbers`,
  `POST /chat/updateBlockStatus`, `POST /chat/getBase64FromMediaMessage`, `POST /chat/fetchProfile`,
  `POST /chat/updateProfileName|updateProfileStatus`, `GET /chat/fetchPrivacySettings`,
  `POST /chat/updatePrivacySettings` (each `/{instance}`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any

from switchboard import jsonbody
from switchboard.errors import Unauthenticated, ValidationFailed
from switchboard.providers.base import (
    AcceptOnce,
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
from switchboard.providers.http import HttpApi, ProviderError, Reply, segment
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

PROVIDER = "Evolution API"
EVENTS = ["MESSAGES_UPSERT", "MESSAGES_UPDATE", "CONNECTION_UPDATE", "GROUP_PARTICIPANTS_UPDATE", "LABELS_ASSOCIATION",
          "LABELS_EDIT", "MESSAGES_EDITED", "MESSAGES_DELETE"]  # fmt: skip
# Baileys proto.Message.ProtocolMessage.Type: REVOKE = 0, MESSAGE_EDIT = 14 (numbers in JSON, names in some dumps)
REVOKE, MESSAGE_EDIT = (0, "REVOKE"), (14, "MESSAGE_EDIT")
GROUP_ACTIONS = {"add": "join", "remove": "leave", "promote": "promote", "demote": "demote"}
STATES = {"open": "connected", "connecting": "pairing", "close": "disconnected"}
ACKS = {"SERVER_ACK": "sent", "DELIVERY_ACK": "delivered", "READ": "read", "PLAYED": "played", "ERROR": "failed"}
PRESENCE = {"typing": "composing", "recording": "recording", "paused": "paused", "available": "available",
            "unavailable": "unavailable"}  # fmt: skip
SEND_ROUTES = {
    "text": "sendText",
    "image": "sendMedia",
    "video": "sendMedia",
    "document": "sendMedia",
    "audio": "sendWhatsAppAudio",
    "sticker": "sendSticker",
    "location": "sendLocation",
    "contacts": "sendContact",
    "poll": "sendPoll",  # src/api/routes/sendMessage.router.ts, src/validate/message.schema.ts pollMessageSchema
    "interactive": "",  # list → sendList (listMessageSchema), button → sendButtons (buttonsMessageSchema)
}
INTERACTIVE_ROUTES = {"list": "sendList", "button": "sendButtons"}
_KEY = re.compile(r"^(true|false)_([^_]+)_(.+)$")
NOT_MESSAGES = {
    "reactionMessage",
    "protocolMessage",
    "editedMessage",
    "pollUpdateMessage",
    "senderKeyDistributionMessage",
}
_KINDS = {
    "imageMessage": "image",
    "videoMessage": "video",
    "audioMessage": "audio",
    "documentMessage": "document",
    "documentWithCaptionMessage": "document",
    "stickerMessage": "sticker",
    "locationMessage": "location",
    "contactMessage": "contacts",
    "contactsArrayMessage": "contacts",
}


def evolution_error(reply: Reply) -> ProviderError:
    body = reply.json()
    if isinstance(body, dict):
        message = obj(body.get("response")).get("message", body.get("message"))
        if isinstance(message, list):
            message = "; ".join(str(m) if not isinstance(m, (dict, list)) else json.dumps(m) for m in message)
        if isinstance(message, str) and message:
            return ProviderError(message)
        if isinstance(body.get("error"), str) and body["error"]:
            return ProviderError(body["error"])
    return ProviderError(reply.text() or f"HTTP {reply.status}")


def serialize_key(key: Any) -> str | None:
    data = obj(key)
    if not data.get("id") or not data.get("remoteJid"):
        return None
    return f"{str(bool(data.get('fromMe'))).lower()}_{data['remoteJid']}_{data['id']}"


def parse_key(message_id: str) -> dict[str, Any]:
    match = _KEY.match(message_id)
    if not match:
        raise ProviderRejected(f"{message_id!r} is not an Evolution API message key.")
    return {"remoteJid": match.group(2), "fromMe": match.group(1) == "true", "id": match.group(3)}


def _b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


TOKEN_LIFETIME = 600  # seconds: Evolution signs `exp = iat + 600` (webhook.controller.ts `generateJwtToken`)
CLOCK_SKEW = 60  # seconds an engine's clock may run ahead of ours


def verify_jwt(token: str, key: str, *, now: float | None = None) -> dict[str, Any]:
    """An HS256 JWT as Evolution signs its webhooks: `Unauthenticated` unless well signed, Evolution's, issued
    recently (`iat` required, at most `TOKEN_LIFETIME` ago and not ahead of our clock by more than `CLOCK_SKEW`),
    unexpired, and living no longer than Evolution's own tokens (`exp - iat` ≤ `TOKEN_LIFETIME`): a captured token
    works for at most its ten minutes, whatever `exp` it claims."""
    try:
        head_b64, claims_b64, signature_b64 = token.split(".")
        head = jsonbody.parse(_b64url(head_b64))
        claims = jsonbody.parse(_b64url(claims_b64))
        signature = _b64url(signature_b64)
    except (ValueError, binascii.Error):
        raise Unauthenticated("The webhook's bearer token is not a JWT.") from None
    if not isinstance(head, dict) or head.get("alg") != "HS256" or not isinstance(claims, dict):
        raise Unauthenticated("The webhook's bearer token is not an HS256 JWT.")
    expected = hmac.new(key.encode(), f"{head_b64}.{claims_b64}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(signature, expected):
        raise Unauthenticated("The webhook's bearer token is not signed with this channel's key.")
    if claims.get("app") != "evolution" or claims.get("action") != "webhook":
        raise Unauthenticated("The webhook's bearer token is not an Evolution API webhook token.")
    moment = time.time() if now is None else now
    issued, expires = _number(claims.get("iat")), _number(claims.get("exp"))
    if issued is None or expires is None:
        raise Unauthenticated("The webhook's bearer token needs numeric iat and exp claims.")
    if expires <= moment:
        raise Unauthenticated("The webhook's bearer token has expired.")
    if not moment - TOKEN_LIFETIME <= issued <= moment + CLOCK_SKEW:
        raise Unauthenticated("The webhook's bearer token was not issued recently.")
    if not 0 < expires - issued <= TOKEN_LIFETIME:
        raise Unauthenticated(f"The webhook's bearer token lives longer than {TOKEN_LIFETIME} s.")
    return claims


class EvolutionProvider(LinkedDeviceProvider):
    engine = "evolution"
    provider_name = PROVIDER
    message_types = frozenset(SEND_ROUTES)
    interactive_types = frozenset(INTERACTIVE_ROUTES)

    def api(self) -> HttpApi:
        return HttpApi(
            PROVIDER,
            self.setting("base_url"),
            {"apikey": self.setting("api_key")},
            timeout=self.timeout,
            read_error=evolution_error,
        )

    def _path(self, group: str, action: str) -> str:
        return f"/{group}/{action}/{segment(self.session)}"

    def _call(
        self, method: str, group: str, action: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        reply = self.api().request(method, self._path(group, action), json_body=body, params=params)
        return reply.json() if reply.content.strip() else {}

    @staticmethod
    def _not_found(err: ProviderRejected) -> bool:
        return any(d.get("http_status") == 404 for d in err.details)

    # Connection -------------------------------------------------------------------------------------------------------
    def _webhook(self) -> dict[str, Any]:
        return {
            "enabled": True,
            "url": callback_url(str(self.channel.get("id"))),
            "byEvents": False,
            "base64": False,
            "headers": {"jwt_key": self.secret},
            "events": list(EVENTS),
        }

    def _state(self) -> str | None:
        try:
            data = obj(self._call("GET", "instance", "connectionState"))
        except ProviderRejected as err:
            if self._not_found(err):
                return None
            raise
        return str(obj(data.get("instance")).get("state") or "")

    def _create(self, number: str | None = None) -> dict[str, Any]:
        """`POST /instance/create` (src/validate/instance.schema.ts `instanceSchema`): without a number the instance
        stays `close` (`qrcode: false`: nothing is started until a QR code or a pairing code is asked for); with one,
        `qrcode: true` starts it with that number, so the answer's `qrcode.pairingCode` is the code
        (instance.controller.ts `createInstance` → `connectToWhatsapp(instanceData.number)`)."""
        body: dict[str, Any] = {"instanceName": self.session, "integration": "WHATSAPP-BAILEYS",
                                "qrcode": number is not None, "webhook": self._webhook()}  # fmt: skip
        if number is not None:
            body["number"] = number
        return obj(self.api().call("POST", "/instance/create", json_body=body))

    def connect(self) -> ConnectResult:
        found = self._state()
        fresh = found is None
        if found is None:
            data = self._create()
            state = str(obj(data.get("instance")).get("status") or "close")
        else:
            state = found
            self._call("POST", "webhook", "set", {"webhook": self._webhook()})
            if state == "close":  # a paired instance reconnects; an unpaired one starts showing QR codes
                self._call("GET", "instance", "connect")
                state = self._state() or "close"
        status = STATES.get(state)
        if status is None:
            raise ProviderUnavailable(f"{PROVIDER} answered an unknown connection state {state!r}.")
        metadata: dict[str, Any] = {"session": self.session, "engine": self.engine, "engine_status": state}
        if status == "disconnected":
            if fresh:  # created and waiting for a QR code or a pairing code to be asked for
                return ConnectResult("pairing", metadata)
            status = "error"
            metadata["error"] = f"The {PROVIDER} instance stayed closed; reconnect, or scan the QR code again."
        return ConnectResult(status, metadata)

    def status(self) -> str:
        state = self._state()
        return "disconnected" if state is None else STATES.get(state, "error")

    def disconnect(self) -> None:
        try:
            self._call("DELETE", "instance", "delete")
        except ProviderRejected as err:
            if not self._not_found(err):
                raise

    def qr(self) -> dict[str, Any]:
        data = obj(self._call("GET", "instance", "connect"))
        if not data.get("code"):
            state = obj(data.get("instance")).get("state")
            raise ProviderRejected(
                f"{PROVIDER} has no QR code for this instance (state {state or 'unknown'}).",
                details=[{"provider": PROVIDER, "engine_status": state}],
            )
        return {"qr": str(data["code"]), "expires_in": None}

    def pairing_code(self, phone: str) -> dict[str, Any]:
        """Evolution computes a pairing code only when the connection starts with the number
        (instance.controller.ts `connectToWhatsapp`: a `close` instance is started with `number`; a `connecting` one
        answers the QR code it already has, `pairingCode: null`). A closed instance is connected with `?number=`; one
        already showing QR codes is deleted and created again with the number."""
        number = digits(phone)
        if not number:
            raise ProviderRejected("A pairing code needs the phone number of the WhatsApp account.")
        state = self._state()
        if state == "open":
            raise ProviderRejected(f"The {PROVIDER} instance is already paired.")
        if state == "close":
            data = obj(self._call("GET", "instance", "connect", params={"number": number}))
        else:
            if state is not None:
                self._call("DELETE", "instance", "delete")
            data = obj(self._create(number).get("qrcode"))
        if not data.get("pairingCode"):
            raise ProviderRejected(f"{PROVIDER} answered without a pairing code; is the instance waiting to pair?")
        return {"code": str(data["pairingCode"])}

    # Messages ---------------------------------------------------------------------------------------------------------
    def send(self, message: OutboundMessage) -> SendResult:
        kind = message.type
        route = SEND_ROUTES.get(kind)
        if route is None:
            raise ProviderRejected(f"{PROVIDER} cannot send messages of type {kind!r}.")
        number = message.to_group or digits(message.to_phone)  # a group's chat: its JID (`…@g.us`) as the number
        if not number:
            raise ProviderRejected("The recipient has no phone number.")
        body: dict[str, Any] = {"number": number}
        media = message.media or {}
        if kind == "text":
            if not message.text:
                raise ProviderRejected("A text message needs a body.")
            body["text"] = message.text
        elif kind == "location":
            if "latitude" not in media or "longitude" not in media:
                raise ProviderRejected("A location message needs latitude and longitude.")
            # message.schema.ts `locationMessageSchema` requires all four (name and address may be empty)
            body |= {"latitude": media["latitude"], "longitude": media["longitude"],
                     "name": str(media.get("name") or ""), "address": str(media.get("address") or "")}  # fmt: skip
        elif kind == "interactive":
            shape = str((message.interactive or {}).get("type"))
            if shape not in INTERACTIVE_ROUTES:
                raise ProviderRejected(f"{PROVIDER} cannot send interactive {shape} messages.")
            route = INTERACTIVE_ROUTES[shape]
            body |= _interactive(message.interactive or {})
        elif kind == "poll":
            poll = message.poll or {}
            options = list(poll.get("options") or [])
            if len(options) > 10:  # pollMessageSchema: `values` 2 to 10, `selectableCount` 0 to 10
                raise ProviderRejected(f"{PROVIDER} polls have at most 10 options.")
            count = int(poll.get("selectable_count", 1))
            body |= {"name": poll.get("name"), "selectableCount": count, "values": options}
        elif kind == "contacts":
            cards = contact_cards(message)
            if not cards or not all(number for _, number, _ in cards):
                raise ProviderRejected("A contacts message needs contact cards with a phone number each.")
            body["contact"] = [
                {
                    "fullName": name,
                    "wuid": number,
                    "phoneNumber": "+" + number,
                    **({"organization": company} if company else {}),
                }
                for name, number, company in cards
            ]
        else:
            url = media.get("url") or media.get("link")
            if not url:
                raise ProviderRejected(f"A {kind} message needs media.url (or an uploaded asset) for {PROVIDER}.")
            if kind == "audio":
                body["audio"] = str(url)
            elif kind == "sticker":
                body["sticker"] = str(url)
            else:
                body |= {"mediatype": kind, "media": str(url)}
                if media.get("mime_type"):
                    body["mimetype"] = str(media["mime_type"])
                if media.get("filename"):
                    body["fileName"] = str(media["filename"])
                caption = media.get("caption") or message.text
                if caption:
                    body["caption"] = str(caption)
        if message.reply_to:
            body["quoted"] = {"key": parse_key(message.reply_to)}
        answer = self.send_request(self._path("message", route), body)
        ident = serialize_key(obj(answer).get("key"))
        if ident is None:
            raise SendUncertain(f"{PROVIDER} accepted the message but answered without its key.")
        return SendResult(ident)

    def edit(self, provider_message_id: str, text: str) -> None:
        key = parse_key(provider_message_id)
        number = phone_of(key["remoteJid"]) or key["remoteJid"]
        self._call("POST", "chat", "updateMessage", {"number": number, "key": key, "text": text})

    def delete(self, provider_message_id: str) -> None:
        self._call("DELETE", "chat", "deleteMessageForEveryone", parse_key(provider_message_id))

    def react(self, provider_message_id: str, emoji: str) -> None:
        self._call("POST", "message", "sendReaction", {"key": parse_key(provider_message_id), "reaction": emoji})

    def read(self, provider_message_id: str) -> None:
        self._call("POST", "chat", "markMessageAsRead", {"readMessages": [parse_key(provider_message_id)]})

    def presence(self, to_phone: str, state: str) -> None:
        body = {"number": digits(to_phone), "presence": PRESENCE[state], "delay": 1200}
        self._call("POST", "chat", "sendPresence", body)

    def download_media(
        self,
        media_id: str,
        message_id: str,
        payload: str,
        sink: MediaSink | None = None,
        deadline: float | None = None,
    ) -> DownloadedMedia:
        """`chat/getBase64FromMediaMessage`: Evolution answers the file base64-encoded inside JSON, so it is read
        whole (within the API answer cap, `http.MAX_BODY`) and handed to `sink` in one piece."""
        key = parse_key(message_id) if _KEY.match(message_id) else {"id": message_id}
        body = {"message": {"key": key}}
        reply = self.api().request(
            "POST", self._path("chat", "getBase64FromMediaMessage"), json_body=body, deadline=deadline
        )
        data = obj(reply.json() if reply.content.strip() else {})
        try:
            content = base64.b64decode(str(data.get("base64") or ""), validate=True)
        except (ValueError, binascii.Error):
            raise ProviderUnavailable(f"{PROVIDER} answered media that is not base64.") from None
        if not content:
            raise ProviderRejected(f"{PROVIDER} has no media for this message.")
        mime = str(data.get("mimetype") or "application/octet-stream").split(";", 1)[0].strip()
        name = "".join(c for c in str(data.get("fileName") or key["id"]) if c.isalnum() or c in "-_.") or "media"
        out = sink if sink is not None else BufferSink()
        out.write(content)
        return downloaded(out, sink, mime, name[:255], self._path("chat", "getBase64FromMediaMessage"))

    # Account ----------------------------------------------------------------------------------------------------------
    def profile(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        updates = dict(changes or {})
        me = digits(obj(self.channel.get("metadata")).get("wa_id") or self.channel.get("phone_number"))
        if updates.pop("business", None):  # read-only at Evolution: POST /chat/fetchBusinessProfile
            if updates:
                raise self._unsupported("changing a business profile")
            return obj(self._call("POST", "chat", "fetchBusinessProfile", {"number": me}))
        if "name" in updates:
            self._call("POST", "chat", "updateProfileName", {"name": str(updates["name"])})
        if "about" in updates:
            self._call("POST", "chat", "updateProfileStatus", {"status": str(updates["about"])})
        return obj(self._call("POST", "chat", "fetchProfile", {"number": me}))

    def privacy(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        if changes:
            self._call("POST", "chat", "updatePrivacySettings", changes)
        return obj(self._call("GET", "chat", "fetchPrivacySettings"))

    def lookup_contact(self, phone: str) -> dict[str, Any]:
        answer = self._call("POST", "chat", "whatsappNumbers", {"numbers": [digits(phone)]})
        found = obj(answer[0]) if isinstance(answer, list) and answer else {}
        exists = bool(found.get("exists"))
        return {
            "phone": phone,
            "exists": exists,
            "name": found.get("name") if exists else None,
            "wa_id": phone_of(found.get("jid")) if exists else None,
        }

    def block(self, phone: str, blocked: bool) -> None:
        body = {"number": digits(phone), "status": "block" if blocked else "unblock"}
        self._call("POST", "chat", "updateBlockStatus", body)

    # Groups (src/api/routes/group.router.ts, src/api/dto/group.dto.ts; the group is `?groupJid=`) ---------------------
    def _group(self, method: str, action: str, jid: str | None, body: Any = None, **query: str) -> Any:
        params = {**({"groupJid": jid} if jid else {}), **query}
        return self._call(method, "group", action, body, params=params or None)

    def groups(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action == "create":
            wanted = [digits(p) for p in payload.get("participants") or []]
            body: dict[str, Any] = {"subject": payload["name"], "participants": wanted}
            if payload.get("description"):
                body["description"] = payload["description"]
            made = obj(self._call("POST", "group", "create", body))
            jid = str(made.get("id") or "")
            if not jid.endswith("@g.us"):
                raise ProviderUnavailable(f"{PROVIDER} created the group but answered without its id.")
            present = {phone_of(obj(p).get("id")) for p in made.get("participants") or []}
            ok = [p for p in wanted if p in present]
            code = obj(self._group("GET", "inviteCode", jid)).get("inviteCode")
            return {
                "jid": jid,
                "participants": [{"phone": p, "role": "member"} for p in ok],
                "failed": [{"phone": p, "reason": "not_on_whatsapp"} for p in wanted if p not in ok],
                "invite_code": str(code) if code else None,
            }
        if action == "join":
            joined = obj(self._group("GET", "acceptInviteCode", None, inviteCode=str(payload["invite_code"])))
            jid = str(joined.get("groupJid") or "")
            if not jid.endswith("@g.us"):
                raise ProviderRejected(f"{PROVIDER} could not join with this invite code.")
            info = obj(self._group("GET", "findGroupInfos", jid))
            out: dict[str, Any] = {"jid": jid, "role": "member"}
            if info.get("subject"):
                out["name"] = str(info["subject"])
            if info.get("desc"):
                out["description"] = str(info["desc"])
            if isinstance(info.get("participants"), list):
                phones = sorted({p for p in (phone_of(obj(x).get("id")) for x in info["participants"]) if p})
                out["participants"] = [{"phone": p, "role": "member"} for p in phones]
            return out
        if action == "leave":
            self._group("DELETE", "leaveGroup", payload["jid"])
            return {"jid": payload["jid"], "left": True}
        if action == "set_name":
            self._group("POST", "updateGroupSubject", payload["jid"], {"subject": payload["name"]})
            return {"jid": payload["jid"], "ok": True}
        if action == "set_description":
            self._group("POST", "updateGroupDescription", payload["jid"], {"description": payload["description"]})
            return {"jid": payload["jid"], "ok": True}
        if action == "set_photo":
            if payload.get("remove"):
                raise self._unsupported("removing a group picture")
            url = payload.get("image_url") or payload.get("asset_url")
            if not url:
                raise ProviderRejected(f"{PROVIDER} takes a group picture from a URL: give image_url or asset_id.")
            self._group("POST", "updateGroupPicture", payload["jid"], {"image": url})
            return {"jid": payload["jid"], "photo_id": None}
        if action == "participants":
            phones = [digits(p) for p in payload.get("participants") or []]
            body = {"action": payload["action"], "participants": phones}
            answer = obj(self._group("POST", "updateParticipant", payload["jid"], body))
            reported = {
                phone_of(obj(r).get("jid")): str(obj(r).get("status")) for r in answer.get("updateParticipants") or []
            }
            results = []
            for phone in phones:
                code = reported.get(phone, "200")
                done = code == "200"
                results.append(
                    {
                        "phone": phone,
                        "status": "ok" if done else "failed",
                        **({} if done else {"reason": f"engine status {code}"}),
                    }
                )
            return {"jid": payload["jid"], "results": results}
        if action == "invite_code":
            if int(payload.get("revision") or 0) > 0:
                code = obj(self._group("POST", "revokeInviteCode", payload["jid"])).get("inviteCode")
            else:
                code = obj(self._group("GET", "inviteCode", payload["jid"])).get("inviteCode")
            if not code:
                raise ProviderUnavailable(f"{PROVIDER} answered without an invite code.")
            return {"jid": payload["jid"], "invite_code": str(code)}
        if action == "list":
            rows = self._group("GET", "fetchAllGroups", None, getParticipants="false")
            return {"groups": [{"jid": str(obj(r).get("id"))} for r in rows or [] if obj(r).get("id")]}
        raise self._unsupported(f"group action {action!r}")

    # Labels (src/api/routes/label.router.ts: list and attach/detach to a chat; no label creation) ---------------------
    def labels(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action not in ("attach_chat", "detach_chat"):
            raise self._unsupported(f"label action {action!r}")
        if not payload.get("chat_id"):
            raise ProviderRejected("The conversation's contact has no phone number.")
        name = str(payload["name"]).strip().casefold()
        listed = self._call("GET", "label", "findLabels")
        label = next((obj(x) for x in listed or [] if str(obj(x).get("name", "")).strip().casefold() == name), None)
        if label is None:
            if action == "detach_chat":
                return {"action": action, "ok": True}
            raise self._unsupported("creating labels (create it on the phone with the same name)")
        body = {"number": digits(payload["chat_id"]), "labelId": str(label.get("id")),
                "action": "add" if action == "attach_chat" else "remove"}  # fmt: skip
        self._call("POST", "label", "handleLabel", body)
        return {"action": action, "ok": True, "label_id": payload.get("label_id"), "engine_label_id": body["labelId"]}

    # Chats (src/api/routes/chat.router.ts: archiveChat; Evolution has no pin or mute) ---------------------------------
    def chats(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action not in ("archive", "unarchive"):
            raise self._unsupported(f"chat action {action!r}")
        if not payload.get("chat_id"):
            raise ProviderRejected("The conversation's contact has no phone number.")
        body = {"chat": f"{digits(payload['chat_id'])}@s.whatsapp.net", "archive": action == "archive"}
        self._call("POST", "chat", "archiveChat", body)
        return {"chat_id": payload["chat_id"], "action": action}

    # Callbacks --------------------------------------------------------------------------------------------------------
    def verify_callback(self, headers: dict[str, str], body: bytes) -> AcceptOnce:
        """Evolution's JWT does not cover the body, so a verified callback is accepted once per (`iat`, body): the
        same token and body again within the token's life are a replay (refused by the caller)."""
        value = (header(headers, "authorization") or "").strip()
        if not value.lower().startswith("bearer "):
            raise Unauthenticated("Missing Authorization: Bearer header.")
        token = value[7:].strip()
        claims = self.verified(lambda secret: verify_jwt(token, secret))
        digest = hashlib.sha256(f"{claims['iat']}:{hashlib.sha256(body).hexdigest()}".encode()).hexdigest()
        return AcceptOnce(key=digest, until=int(claims["exp"]) + CLOCK_SKEW)

    def parse_callback(self, body: bytes) -> list[CallbackEvent]:
        try:
            doc = jsonbody.parse_callback(body)  # the API's rules: no key twice, no NUL, the depth limit
        except jsonbody.BodyRefused as err:
            raise ValidationFailed.field(err.field, str(err)) from None
        except ValueError:
            raise ValidationFailed.field("body", "is not valid JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("event"), str):
            raise ValidationFailed.field("body.event", "is required")
        if doc.get("instance") != self.session:
            return []
        event, data = doc["event"], doc.get("data")
        at = event_ms(doc.get("date_time"))  # webhook.controller.ts: the body's `date_time`, when Evolution emitted it
        items = data if isinstance(data, list) else [data]
        out: list[CallbackEvent] = []
        for item in items:
            if not isinstance(item, dict):
                raise ValidationFailed.field("body.data", "must be an object")
            if event == "connection.update":
                state = str(item.get("state") or "")
                if state not in STATES:
                    raise ValidationFailed.field("body.data.state", "is not an Evolution API connection state")
                metadata: dict[str, Any] = {"engine_status": state}
                if item.get("wuid"):
                    metadata["wa_id"] = phone_of(item["wuid"]) or str(item["wuid"])
                if item.get("profileName"):
                    metadata["push_name"] = str(item["profileName"])
                out.append(SessionStatus(STATES[state], state, metadata, event_at=at))
            elif event == "messages.upsert":
                upsert = _change_in_upsert(item) or _inbound(item)
                if upsert is not None:
                    out.append(upsert)
            elif event == "messages.edited":  # whatsapp.baileys.service.ts: the protocolMessage (edit or revoke)
                change = _protocol_change(item, None, iso(item.get("timestampMs")))
                if change is not None:
                    out.append(change)
            elif event == "messages.delete":  # whatsapp.baileys.service.ts messages.update: the deleted message's key
                if not item.get("id"):
                    raise ValidationFailed.field("body.data.id", "is required")
                if not item.get("fromMe"):
                    out.append(MessageChange(_key_targets(item, None), "revoke"))
            elif event == "labels.edit":  # whatsapp.baileys.service.ts labelHandle: Baileys' Label + instance
                if item.get("id") is None:
                    raise ValidationFailed.field("body.data.id", "is required")
                if item.get("deleted"):
                    out.append(LabelCatalogEvent(str(item["id"]), deleted=True, event_at=at))
                    continue
                name = item.get("name")
                if not isinstance(name, str) or not name.strip():
                    raise ValidationFailed.field("body.data.name", "is required")
                try:
                    index = int(item.get("color"))  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    index = -1
                color = LABEL_COLORS[index] if 0 <= index < len(LABEL_COLORS) else None
                out.append(LabelCatalogEvent(str(item["id"]), name=name.strip(), color=color, event_at=at))
            elif event == "messages.update":
                ack = _ack(item)
                if ack is not None:
                    out.append(ack)
                if isinstance(item.get("pollUpdates"), list) and item.get("fromMe"):
                    out.append(_poll_state(item, at))
            elif event == "labels.association":  # {type: add | remove, chatId, labelId}; the name from findLabels
                chat = phone_of(item.get("chatId"))
                listed = self._call("GET", "label", "findLabels") if chat else []
                found = next((obj(x) for x in listed or [] if str(obj(x).get("id")) == str(item.get("labelId"))), {})
                if chat and found.get("name") and item.get("type") in ("add", "remove"):
                    out.append(LabelEvent(str(found["name"]), chat, attach=item["type"] == "add", event_at=at))
            elif event == "group-participants.update":
                jid, action = str(item.get("id") or ""), GROUP_ACTIONS.get(str(item.get("action")))
                if not jid.endswith("@g.us"):
                    raise ValidationFailed.field("body.data.id", "is not a group id")
                if action is None:
                    continue
                # participantsData (newer Evolution) names the phone behind a lid participant
                data_rows = [obj(d) for d in item.get("participantsData") or []]
                known = {
                    str(d.get("jid")): phone_of(d.get("phoneNumber")) or digits(d.get("phoneNumber")) for d in data_rows
                }
                phones = [phone_of(p) or known.get(str(p)) for p in item.get("participants") or []]
                found_phones = tuple(p for p in phones if p)
                out.append(GroupEvent(jid, "participants", action=action, participants=found_phones, event_at=at))
        return out


def _text_of(part: Any) -> str:
    return str(obj(part).get("text") or "")


def _interactive(interactive: dict[str, Any]) -> dict[str, Any]:
    """Meta's interactive `list` / `button` object as Evolution's sendList (message.schema.ts `listMessageSchema`:
    `title`, `footerText`, `buttonText`, `sections[{title, rows[{title, description?, rowId}]}]` required, the
    optional strings not empty when given) / sendButtons (`buttonsMessageSchema`: `buttons[{type: reply,
    displayText, id}]`)."""
    header, body, footer = _text_of(interactive.get("header")), _text_of(interactive.get("body")), _text_of(
        interactive.get("footer"))  # fmt: skip
    action = obj(interactive.get("action"))
    if interactive.get("type") == "list":
        sections = []
        for section in action.get("sections") or []:
            rows = []
            for row in obj(section).get("rows") or []:
                item = {"title": str(obj(row).get("title") or ""), "rowId": str(obj(row).get("id") or "")}
                if not item["title"] or not item["rowId"]:
                    raise ProviderRejected("Each list row needs an id and a title.")
                if obj(row).get("description"):
                    item["description"] = str(row["description"])
                rows.append(item)
            title = str(obj(section).get("title") or action.get("button") or header or "Options")
            sections.append({"title": title, "rows": rows})
        if not sections or not action.get("button"):
            raise ProviderRejected("A list message needs action.button and action.sections.")
        out: dict[str, Any] = {"title": header or body, "footerText": footer, "buttonText": str(action["button"]),
                               "sections": sections}  # fmt: skip
        if body:
            out["description"] = body
        return out
    buttons = []
    for button in action.get("buttons") or []:
        reply = obj(obj(button).get("reply"))
        if not reply.get("id") or not reply.get("title"):
            raise ProviderRejected("Each reply button needs reply.id and reply.title.")
        buttons.append({"type": "reply", "displayText": str(reply["title"]), "id": str(reply["id"])})
    if not buttons:
        raise ProviderRejected("A button message needs action.buttons.")
    out = {"title": header, "description": body, "buttons": buttons}
    if footer:
        out["footer"] = footer
    return out


def _key_targets(key: dict[str, Any], chat: Any) -> tuple[str, ...]:
    """The provider ids (`<fromMe>_<remoteJid>_<id>`) a message named by a Baileys key may be stored under: the key's
    own side first, then the other (a key's `fromMe` is the sender's view), in its chat and the phone form of it."""
    ident = str(key.get("id") or "")
    chats = [str(c) for c in (key.get("remoteJid") or chat, key.get("remoteJidAlt"), key.get("senderPn")) if c]
    sides = ["true", "false"] if key.get("fromMe") else ["false", "true"]
    found = [f"{side}_{c}_{ident}" for side in sides for c in dict.fromkeys(chats)]
    return tuple(found) or (ident,)


def _protocol_change(proto: dict[str, Any], chat: Any, timestamp: str | None) -> MessageChange | None:
    """An edit (`editedMessage`, type MESSAGE_EDIT) or revoke (type REVOKE) of the message `proto.key` names."""
    key = obj(proto.get("key"))
    if not key.get("id"):
        raise ValidationFailed.field("body.data.key.id", "is required")
    edited = obj(proto.get("editedMessage"))
    if edited or proto.get("type") in MESSAGE_EDIT:
        text = edited.get("conversation") or obj(edited.get("extendedTextMessage")).get("text")
        text = text or next((obj(v).get("caption") for v in edited.values() if obj(v).get("caption")), None)
        return MessageChange(_key_targets(key, chat), "edit", text=str(text or ""), timestamp=timestamp)
    if proto.get("type") in REVOKE:
        return MessageChange(_key_targets(key, chat), "revoke", timestamp=timestamp)
    return None


def _change_in_upsert(item: dict[str, Any]) -> MessageChange | None:
    """A customer's reaction (`reactionMessage {key, text}`), edit or revoke (`protocolMessage`) delivered as an
    upsert; None for anything else."""
    key, message = obj(item.get("key")), obj(item.get("message"))
    if key.get("fromMe"):
        return None
    when = iso(item.get("messageTimestamp"))
    reaction = obj(message.get("reactionMessage"))
    if reaction:
        target = obj(reaction.get("key"))
        if not target.get("id"):
            raise ValidationFailed.field("body.data.message.reactionMessage.key.id", "is required")
        # the reaction's key is the reactor's view: our message is `fromMe: false` to them, so both sides are tried
        targets = _key_targets({**target, "fromMe": not target.get("fromMe")}, key.get("remoteJid"))
        return MessageChange(targets, "reaction", text=str(reaction.get("text") or ""), timestamp=when)
    proto = obj(message.get("protocolMessage")) or obj(obj(obj(message.get("editedMessage")).get("message")).get(
        "protocolMessage"))  # fmt: skip
    if proto:
        return _protocol_change(proto, key.get("remoteJid"), when)
    return None


def _inbound(item: dict[str, Any]) -> InboundMessage | None:
    key = obj(item.get("key"))
    if not key.get("id") or not key.get("remoteJid"):
        raise ValidationFailed.field("body.data.key", "a message needs key.id and key.remoteJid")
    mine = bool(key.get("fromMe"))  # an echo of a message typed on the phone: `remoteJid` is still the chat
    jid, group = str(key["remoteJid"]), None
    sender: str | None
    if jid.endswith("@g.us") and mine:
        group, sender = jid, ""
    elif jid.endswith("@g.us"):  # a group's message: `key.participant` sent it (`participantAlt`: its phone for a lid)
        group, jid = jid, str(key.get("participant") or "")
        sender = phone_of(jid) or phone_of(key.get("participantAlt"))
    else:
        sender = phone_of(jid)
        if sender is None and jid.endswith("@lid"):  # Evolution names the phone behind a lid in the same key
            sender = phone_of(key.get("remoteJidAlt") or key.get("senderPn"))
    if sender is None:
        return None
    message = obj(item.get("message"))
    kind_name = str(item.get("messageType") or next(iter(message), "conversation"))
    if kind_name in NOT_MESSAGES:  # reactions, edits, revokes, poll votes: events about messages, not new ones
        return None
    kind = _KINDS.get(kind_name, "text")
    part = obj(message.get(kind_name))
    text = message.get("conversation") or obj(message.get("extendedTextMessage")).get("text") or part.get("caption")
    media: dict[str, Any] | None = None
    if kind == "location":
        media = {"latitude": part.get("degreesLatitude"), "longitude": part.get("degreesLongitude")}
    elif kind == "contacts":
        media = {"vcards": [str(part.get("vcard") or "")]}
    elif kind != "text":
        media = {k: v for k, v in {"id": serialize_key(key), "mime_type": part.get("mimetype"),
                                   "filename": part.get("fileName")}.items() if v}  # fmt: skip
    quoted = obj(item.get("contextInfo")) or obj(part.get("contextInfo"))
    if quoted.get("stanzaId"):
        media = {**(media or {}), "context": {"message_id": str(quoted["stanzaId"])}}
    name = item.get("pushName")
    return InboundMessage(
        provider_message_id=serialize_key(key) or str(key["id"]),
        from_phone=sender,
        type=kind,
        text=str(text) if text else None,
        media=media,
        contact_name=str(name) if name and not mine else None,
        timestamp=iso(item.get("messageTimestamp")),
        group_jid=group,
        from_me=mine,
    )


def _poll_state(item: dict[str, Any], at: int | None) -> MessageChange:
    """The votes on one of our polls: whatsapp.baileys.service.ts `messages.update` sends Baileys'
    `getAggregateVotesInPollMessage` as `pollUpdates` (`[{name: answer, voters: [jid]}]`), the poll's whole state."""
    chosen: dict[str, list[str]] = {}
    for row in item["pollUpdates"]:
        answer = obj(row).get("name")
        for jid in obj(row).get("voters") or []:
            voter = phone_of(jid)
            if voter and isinstance(answer, str):
                chosen.setdefault(voter, []).append(answer)
    key = {"id": item.get("keyId"), "remoteJid": item.get("remoteJid"), "fromMe": True}
    ballots = tuple((voter, tuple(answers)) for voter, answers in sorted(chosen.items()))
    return MessageChange(_key_targets(key, None), "poll_state", ballots=ballots, event_at=at)


def _ack(item: dict[str, Any]) -> StatusCallback | None:
    if not item.get("keyId") or not item.get("remoteJid"):
        raise ValidationFailed.field("body.data", "a message update needs keyId and remoteJid")
    if not item.get("fromMe"):
        return None
    status = ACKS.get(str(item.get("status") or ""))
    if status is None:
        return None
    key = {"id": item["keyId"], "remoteJid": item["remoteJid"], "fromMe": True}
    return StatusCallback(
        provider_message_id=serialize_key(key) or str(item["keyId"]),
        status=status,
        error=f"{PROVIDER} reported the message as failed." if status == "failed" else None,
        to_phone=phone_of(item["remoteJid"]),
    )
