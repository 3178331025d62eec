"""A fake WAHA ("WhatsApp HTTP API", devlikeapro/waha) server: the routes, bodies, states, errors and webhooks of the
real engine, each route citing the WAHA source file it mirrors (WAHA at commit 55fc6a4 of the `core` branch, plus
`src/api/lids.controller.ts` of later versions).

- Auth: every route needs `X-Api-Key` (WAHA's `WHATSAPP_API_KEY`), else 401 `{"message": "Unauthorized",
  "statusCode": 401}` (NestJS UnauthorizedException).
- Errors are NestJS bodies: `{"message", "error", "statusCode"}`; a session in the wrong state is 422
  `{"error": "Session status is not as expected. ...", "session", "status", "expected"}`
  (src/core/abc/manager.abc.ts `waitUntilStatus`, used by src/nestjs/pipes/SessionPipe.ts).
- `@Post` routes answer 201 (NestJS' default), as WAHA does.
- Sessions move `STOPPED` → (`start`) `SCAN_QR_CODE` → (`link()`: the phone scanned the QR) `WORKING`; `fail()` makes
  them `FAILED` (src/structures/enums.dto.ts `WAHASessionStatus`).
- `engine = "WEBJS"` answers sends with WAHA's message (`id` a string); `engine = "NOWEB"` answers with Baileys'
  message (`{key: {remoteJid, fromMe, id}, ...}`) and with nothing for a contact card
  (src/core/engines/noweb/session.noweb.core.ts `sendText`, `sendContactVCard`, `buildMessageId`).
- Webhooks: `webhook(session, event, payload)` builds the body WAHA posts (src/core/webhooks.core.ts `callWebhook`)
  and its headers, `X-Webhook-Hmac` = hex HMAC-SHA512 of the raw body under the webhook's `hmac.key` and
  `X-Webhook-Hmac-Algorithm: sha512` (WAHA docs, how-to/webhooks "HMAC authentication"); `deliver(...)` posts it to
  every configured webhook subscribed to the event, as WAHA does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import FakeServer, HttpError, Request, Response

CHAT = re.compile(r"^[0-9]{7,15}@c\.us$")
STATUSES = ("STOPPED", "STARTING", "SCAN_QR_CODE", "WORKING", "FAILED")  # src/structures/enums.dto.ts
EVENTS = {  # src/structures/enums.dto.ts WAHAEvents
    "session.status", "message", "message.reaction", "message.any", "message.ack", "message.waiting",
    "message.revoked", "state.change", "group.join", "group.leave", "presence.update", "poll.vote",
    "poll.vote.failed", "chat.archive", "call.received", "call.accepted", "call.rejected", "label.upsert",
    "label.deleted", "label.chat.added", "label.chat.deleted",
    # later versions (waha-docs how-to/groups, "Events"): the group.v2 family; message.edited
    # (src/core/engines/gows/session.gows.core.ts `WAHAEvents.MESSAGE_EDITED`)
    "group.v2.join", "group.v2.leave", "group.v2.participants", "group.v2.update", "message.edited",
}  # fmt: skip
PRESENCES = {"offline", "online", "typing", "recording", "paused"}  # src/structures/enums.dto.ts WAHAPresenceStatus
COLORS = ["#ff9485", "#64c4ff", "#ffd429", "#dfaef0", "#99b6c1", "#55ccb3", "#ff9dff", "#d3a91d", "#6d7cce",
          "#d7e752", "#00d0e2", "#ffc5c7", "#93ceac", "#f74848", "#00a0f2", "#83e422", "#ffaf04", "#b5ebff",
          "#9ba6ff", "#9368cf"]  # fmt: skip  # src/structures/labels.dto.ts
ACK_NAMES = {-1: "ERROR", 0: "PENDING", 1: "SERVER", 2: "DEVICE", 3: "READ", 4: "PLAYED"}  # WAMessageAck


def nest_error(status: int, message: str) -> HttpError:
    names = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 422: "Unprocessable Entity"}
    body: dict[str, Any] = {"message": message, "statusCode": status}
    if status != 401:
        body["error"] = names.get(status, "Error")
    return HttpError(Response(status, body))


@dataclass
class Session:
    name: str
    status: str = "STOPPED"
    config: dict[str, Any] = field(default_factory=dict)
    me: dict[str, Any] | None = None
    authorized: bool = False  # a linked device stays linked across stop/start, not across logout
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    reactions: dict[str, str] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)
    presence: list[dict[str, Any]] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)
    lids: dict[str, str | None] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # jid → {subject, description, participants…}
    invites: dict[str, str] = field(default_factory=dict)  # invite code → group jid (groups the phone may join)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # id → Label
    chat_labels: dict[str, list[str]] = field(default_factory=dict)  # chat id → label ids
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)  # newsletter jid → Channel
    following: set[str] = field(default_factory=set)
    archived: set[str] = field(default_factory=set)
    rejected_calls: list[dict[str, Any]] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        """src/structures/sessions.dto.ts SessionInfo."""
        out: dict[str, Any] = {"name": self.name, "status": self.status, "config": self.config}
        if self.me and self.status == "WORKING":
            out["me"] = self.me
        return out


class FakeWaha(FakeServer):
    name = "waha"

    def __init__(self, api_key: str = "waha-key", engine: str = "WEBJS", phone: str = "15550100999") -> None:
        super().__init__()
        self.api_key = api_key
        self.engine = engine
        self.phone = phone
        self.sessions: dict[str, Session] = {}
        self.numbers_on_whatsapp: set[str] | None = None  # None: every number exists
        self.media: dict[str, tuple[bytes, str]] = {}
        self._hang_after_send = 0.0
        self.delivered: list[tuple[str, int]] = []  # (url, status) of webhook posts

    @property
    def url(self) -> str:
        return self.root

    # Test controls ----------------------------------------------------------------------------------------------------
    def accept_then_hang(self, seconds: float) -> None:
        """The next send is accepted (the message exists and will be acked) but its answer is held back."""
        self._hang_after_send = seconds

    def link(self, name: str) -> None:
        """The phone scanned the QR code: the session is WORKING."""
        with self._lock:
            session = self.sessions[name]
            session.status, session.authorized = "WORKING", True
            session.me = {"id": f"{self.phone}@c.us", "pushName": "Acme"}

    def session_status(self, name: str) -> dict[str, Any]:
        """The `session.status` payload of the session's current state (src/structures/webhooks.dto.ts)."""
        return {"name": name, "status": self.sessions[name].status}

    def add_post(self, name: str, jid: str, text: str) -> str:
        """A post in a newsletter's feed."""
        ident = f"false_{jid}_{secrets.token_hex(8).upper()}"
        with self._lock:
            self.sessions[name].messages[ident] = {"chatId": jid, "fromMe": False, "text": text,
                                                   "timestamp": int(time.time())}  # fmt: skip
        return ident

    def inbound(self, name: str, from_phone: str, text: str, **extra: Any) -> dict[str, Any]:
        """A customer's message as the `message` event's payload (src/structures/responses.dto.ts WAMessage)."""
        chat = from_phone if "@" in from_phone else f"{from_phone}@c.us"
        ident = f"false_{chat}_{secrets.token_hex(10).upper()}"
        payload = {
            "id": ident,
            "timestamp": int(time.time()),
            "from": chat,
            "fromMe": False,
            "to": f"{self.phone}@c.us",
            "body": text,
            "hasMedia": False,
            "ack": 1,
            "ackName": "SERVER",
            "vCards": [],
            "_data": {"notifyName": "Ada"},
            **extra,
        }
        with self._lock:
            self.sessions[name].messages[ident] = {"chatId": chat, "text": text, "fromMe": False}
        return payload

    def ack(self, name: str, message_id: str, ack: int) -> dict[str, Any]:
        """The `message.ack` payload of one of our messages (src/structures/webhooks.dto.ts WAMessageAckBody)."""
        chat = self.sessions[name].messages[message_id]["chatId"]
        return {
            "id": message_id,
            "from": f"{self.phone}@c.us",
            "to": chat,
            "participant": None,
            "fromMe": True,
            "ack": ack,
            "ackName": ACK_NAMES[ack],
        }

    def reaction(self, name: str, message_id: str, from_phone: str, emoji: str) -> dict[str, Any]:
        """The customer's `message.reaction` payload (src/structures/responses.dto.ts WAMessageReaction, built as
        src/core/engines/webjs/session.webjs.core.ts processMessageReaction: `reaction.messageId` serialized)."""
        chat = f"{from_phone}@c.us"
        return {"id": f"false_{chat}_{secrets.token_hex(10).upper()}", "timestamp": int(time.time()), "from": chat,
                "fromMe": False, "participant": chat, "to": f"{self.phone}@c.us",
                "reaction": {"text": emoji, "messageId": message_id}}  # fmt: skip

    def edited(self, name: str, message_id: str, text: str) -> dict[str, Any]:
        """The customer's `message.edited` payload (src/core/engines/gows/session.gows.core.ts messagesEdited$: the
        edit as a WAMessage with the new `body` and the bare `editedMessageId`)."""
        original = self.sessions[name].messages[message_id]
        original["text"] = text
        chat, bare = original["chatId"], message_id.rsplit("_", 1)[-1]
        edit = self.inbound(name, chat, text)
        return {**edit, "editedMessageId": bare}

    def revoked(self, name: str, message_id: str) -> dict[str, Any]:
        """The customer's `message.revoked` payload (src/structures/webhooks.dto.ts WAMessageRevokedBody, as
        src/core/engines/gows/session.gows.core.ts messagesRevoked$: `after` is the revoke, `before` null and the
        bare `revokedMessageId`)."""
        original = self.sessions[name].messages.pop(message_id)
        after = self.inbound(name, original["chatId"], "")
        return {"after": after, "before": None, "revokedMessageId": message_id.rsplit("_", 1)[-1]}

    def phone_label(self, name: str, label_name: str, color: int = 0, ident: str | None = None) -> dict[str, Any]:
        """A label created (or, with `ident`, changed) on the phone: the `label.upsert` payload (Label)."""
        with self._lock:
            labels = self.sessions[name].labels
            ident = ident or str(max((int(i) for i in labels), default=0) + 1)
            labels[ident] = {"id": ident, "name": label_name, "color": color, "colorHex": COLORS[color]}
            return dict(labels[ident])

    def phone_label_deleted(self, name: str, ident: str) -> dict[str, Any]:
        """A label deleted on the phone: the `label.deleted` payload (Label)."""
        with self._lock:
            session = self.sessions[name]
            label = session.labels.pop(ident)
            for chat, ids in session.chat_labels.items():
                session.chat_labels[chat] = [i for i in ids if i != ident]
            return label

    def group_participants(self, jid: str, kind: str, phones: list[str], role: str = "participant") -> dict[str, Any]:
        """The `group.v2.participants` payload (waha-docs how-to/groups/events-group.v2.participants)."""
        people = [{"id": p if "@" in p else f"{p}@c.us", "role": role} for p in phones]
        return {"type": kind, "timestamp": int(time.time()), "group": {"id": jid}, "participants": people, "_data": {}}

    def poll_vote(self, name: str, poll_id: str, from_phone: str, options: list[str], at_ms: int) -> dict[str, Any]:
        """The `poll.vote` payload (src/structures/webhooks.dto.ts PollVotePayload: `vote` a PollVote with
        `selectedOptions` and `timestamp`, `poll` the poll message's MessageDestination)."""
        chat = f"{from_phone}@c.us"
        vote = {"id": f"false_{chat}_{secrets.token_hex(10).upper()}", "to": f"{self.phone}@c.us", "from": chat,
                "fromMe": False, "selectedOptions": options, "timestamp": at_ms}  # fmt: skip
        return {"vote": vote, "poll": {"id": poll_id, "to": chat, "from": f"{self.phone}@c.us", "fromMe": True}}

    def last_sent(self, name: str) -> tuple[str, dict[str, Any]]:
        with self._lock:
            mine = [(k, v) for k, v in self.sessions[name].messages.items() if v["fromMe"]]
        return mine[-1]

    def sent(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [v for v in self.sessions[name].messages.values() if v["fromMe"]]

    def webhook(
        self, name: str, event: str, payload: dict[str, Any], key: str | None = None, *, at: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers WAHA posts for an event (src/core/webhooks.core.ts `callWebhook`; the envelope's `id`
        and `timestamp`, ms when WAHA saw the event, are src/structures/webhooks.dto.ts WAHAWebhook's of later
        versions); `at` sets that timestamp (an event that happened then, delivered now)."""
        session = self.sessions[name]
        body = json.dumps(
            {
                "id": f"evt_{secrets.token_hex(13)}",
                "timestamp": int(time.time() * 1000) if at is None else at,
                "event": event,
                "session": name,
                "metadata": session.config.get("metadata"),
                "me": session.me,
                "payload": payload,
                "engine": self.engine,
                "environment": {"version": "2024.10.8", "engine": self.engine, "tier": "PLUS"},
            }
        ).encode()
        headers = {"Content-Type": "application/json", "X-Webhook-Request-Id": secrets.token_hex(8)}
        hooks = session.config.get("webhooks") or [{}]
        secret = key if key is not None else (hooks[0].get("hmac") or {}).get("key")
        if secret:
            headers["X-Webhook-Hmac"] = hmac.new(secret.encode(), body, hashlib.sha512).hexdigest()
            headers["X-Webhook-Hmac-Algorithm"] = "sha512"
        return body, headers

    def deliver(self, name: str, event: str, payload: dict[str, Any]) -> list[int]:
        """Post the event to every webhook of the session subscribed to it, as WAHA does; the answers' statuses."""
        import httpx

        statuses = []
        for hook in self.sessions[name].config.get("webhooks") or []:
            if event not in hook.get("events", []) and "*" not in hook.get("events", []):
                continue
            body, headers = self.webhook(name, event, payload, key=(hook.get("hmac") or {}).get("key") or "")
            answer = httpx.post(hook["url"], content=body, headers=headers, timeout=30)
            statuses.append(answer.status_code)
            self.delivered.append((hook["url"], answer.status_code))
        return statuses

    # Routing ----------------------------------------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        if request.headers.get("x-api-key") != self.api_key:
            raise nest_error(401, "Unauthorized")
        method, path = request.method, request.path
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "sessions"]:
            return self._sessions(request, parts[2:])
        routes = {
            ("POST", "/api/sendText"): self._send_text,
            ("POST", "/api/sendImage"): self._send_file,
            ("POST", "/api/sendFile"): self._send_file,
            ("POST", "/api/sendVoice"): self._send_file,
            ("POST", "/api/sendVideo"): self._send_file,
            ("POST", "/api/sendLocation"): self._send_location,
            ("POST", "/api/sendContactVcard"): self._send_vcard,
            ("POST", "/api/sendPoll"): self._send_poll,
            ("PUT", "/api/reaction"): self._reaction,
            ("POST", "/api/sendSeen"): self._seen,
            ("POST", "/api/contacts/block"): self._block,
            ("POST", "/api/contacts/unblock"): self._block,
        }
        if (method, path) in routes:
            return routes[(method, path)](request)
        if (method, path) == ("GET", "/api/contacts/check-exists"):
            return self._check_exists(request)
        if len(parts) >= 3 and parts[0] == "api" and parts[1] == "files":
            return self._file(parts[2:])
        if len(parts) >= 3 and parts[0] == "api":
            return self._session_scoped(request, parts[1], parts[2:])
        raise nest_error(404, f"Cannot {method} {path}")

    # src/api/sessions.controller.ts -----------------------------------------------------------------------------------
    def _sessions(self, request: Request, rest: list[str]) -> Response:
        method = request.method
        if not rest and method == "POST":  # create (and start)
            body = _json(request)
            name = body.get("name") or f"session_{secrets.token_hex(4)}"
            if name in self.sessions:
                raise nest_error(422, f"Session '{name}' already exists. Use PUT to update it.")
            self._check_config(body.get("config") or {})
            session = self.sessions[name] = Session(name, config=body.get("config") or {})
            if body.get("start"):
                self._start(session)
            return Response(201, session.info())
        if not rest:
            raise nest_error(404, f"Cannot {method} /api/sessions")
        name = rest[0]
        session = self.sessions.get(name)
        if method == "DELETE" and len(rest) == 1:  # stop, logout and delete; idempotent
            self.sessions.pop(name, None)
            return Response(200, None)
        if session is None:
            raise nest_error(404, "Session not found")
        if method == "GET" and len(rest) == 1:
            return Response(200, session.info())
        if method == "PUT" and len(rest) == 1:
            config = _json(request).get("config") or {}
            self._check_config(config)
            running = session.status != "STOPPED"
            session.config = config
            session.status = "STOPPED"
            if running:
                self._start(session)
            return Response(200, session.info())
        action = rest[1] if len(rest) == 2 else None
        if method == "POST" and action == "start":
            self._start(session)
        elif method == "POST" and action == "stop":
            session.status = "STOPPED"
        elif method == "POST" and action == "logout":
            running = session.status != "STOPPED"
            session.authorized, session.me, session.status = False, None, "STOPPED"
            if running:
                self._start(session)
        elif method == "POST" and action == "restart":
            session.status = "STOPPED"
            self._start(session)
        else:
            raise nest_error(404, f"Cannot {method} {request.path}")
        return Response(201, session.info())  # the controller answers getSessionInfo

    @staticmethod
    def _start(session: Session) -> None:
        if session.status in ("STOPPED", "FAILED"):
            session.status = "WORKING" if session.authorized else "SCAN_QR_CODE"

    @staticmethod
    def _check_config(config: dict[str, Any]) -> None:
        """src/structures/webhooks.config.dto.ts WebhookConfig: url (with protocol) and known events."""
        for hook in config.get("webhooks") or []:
            if not re.match(r"^https?://", str(hook.get("url") or "")):
                raise nest_error(400, "config.webhooks.0.url must be a URL address")
            if not isinstance(hook.get("events"), list) or any(e not in EVENTS and e != "*" for e in hook["events"]):
                raise nest_error(400, "each value in config.webhooks.0.events must be a valid enum value")

    def _session(self, name: str, *expected: str) -> Session:
        """src/core/manager.core.ts getSession + src/core/abc/manager.abc.ts waitUntilStatus."""
        session = self.sessions.get(name)
        if session is None or session.status == "STOPPED":
            raise nest_error(
                404,
                f"We didn't find a session with name '{name}'.\n"
                f"Please start it first by using POST /api/sessions/{name}/start request",
            )
        if expected and session.status not in expected:
            raise HttpError(
                Response(
                    422,
                    {
                        "error": "Session status is not as expected. Try again later or restart the session",
                        "session": name,
                        "status": session.status,
                        "expected": list(expected),
                    },
                )
            )
        return session

    # src/api/auth.controller.ts, src/api/chats.controller.ts, src/api/presence.controller.ts, lids.controller.ts ------
    def _session_scoped(self, request: Request, name: str, rest: list[str]) -> Response:
        method = request.method
        if rest == ["auth", "qr"] and method == "GET":
            self._session(name, "SCAN_QR_CODE")
            if request.query.get("format") == "raw":
                return Response(200, {"value": f"2@{secrets.token_urlsafe(24)},{secrets.token_urlsafe(16)}"})
            return Response(200, b"\x89PNG fake", content_type="image/png")
        if rest == ["auth", "request-code"] and method == "POST":
            self._session(name)
            phone = str(_json(request).get("phoneNumber") or "")
            if not phone.isdigit():
                raise nest_error(400, "phoneNumber must be a string of digits")
            code = "".join(secrets.choice("ABCDEFGHJKLMNPQRSTVWXYZ123456789") for _ in range(8))
            return Response(201, {"code": f"{code[:4]}-{code[4:]}"})
        if rest and rest[0] == "groups":
            return self._groups(request, self._session(name, "WORKING"), rest[1:])
        if rest and rest[0] == "labels":
            return self._labels(request, self._session(name, "WORKING"), rest[1:])
        if rest and rest[0] == "channels":
            return self._channels(request, self._session(name, "WORKING"), rest[1:])
        if len(rest) == 3 and rest[0] == "chats" and rest[2] in ("archive", "unarchive") and method == "POST":
            session = self._session(name, "WORKING")
            (session.archived.add if rest[2] == "archive" else session.archived.discard)(rest[1])
            return Response(201, {})
        if len(rest) == 3 and rest[0] == "chats" and rest[2] == "messages" and method == "GET":
            session = self._session(name, "WORKING")
            posts = [
                {"id": k, "timestamp": m.get("timestamp", 0), "body": m.get("text", ""), "hasMedia": False}
                for k, m in reversed(session.messages.items())
                if m["chatId"] == rest[1]
            ]  # newest first, as WAHA's GetChatMessagesQuery pages
            offset, limit = int(request.query.get("offset") or 0), int(request.query.get("limit") or 100)
            return Response(200, posts[offset : offset + limit])
        if rest == ["calls", "reject"] and method == "POST":  # src/api/calls.controller.ts (later versions)
            session = self._session(name, "WORKING")
            body = _json(request)
            if not body.get("from") or not body.get("id"):
                raise nest_error(400, "from and id are required")
            session.rejected_calls.append(body)
            return Response(201, None)
        if rest and rest[0] == "profile":  # src/api/profile.controller.ts (later versions)
            session = self._session(name, "WORKING")
            assert session.me is not None
            if rest == ["profile"] and method == "GET":
                return Response(200, {"id": session.me["id"], "name": session.me["pushName"],
                                      "picture": session.me.get("picture")})  # fmt: skip
            body = _json(request) if method == "PUT" else {}
            if rest == ["profile", "name"] and method == "PUT" and isinstance(body.get("name"), str):
                session.me["pushName"] = body["name"]
            elif rest == ["profile", "status"] and method == "PUT" and isinstance(body.get("status"), str):
                session.me["about"] = body["status"]
            elif rest == ["profile", "picture"] and method in ("PUT", "DELETE"):
                session.me["picture"] = obj_url(body) if method == "PUT" else None
            else:
                raise nest_error(400, f"Cannot {method} {request.path} with this body")
            return Response(200, {"success": True})
        if rest == ["presence"] and method == "POST":
            session = self._session(name, "WORKING")
            body = _json(request)
            if body.get("presence") not in PRESENCES or not CHAT.match(str(body.get("chatId") or "")):
                raise nest_error(400, "presence must be one of the following values: " + ", ".join(sorted(PRESENCES)))
            session.presence.append(body)
            return Response(201, None)
        if len(rest) == 2 and rest[0] == "lids" and method == "GET":
            session = self._session(name, "WORKING")
            lid = rest[1] if "@" in rest[1] else rest[1] + "@lid"
            if not lid.endswith("@lid"):
                raise nest_error(422, "Invalid LID - it must end with @lid")
            return Response(200, {"lid": lid, "pn": session.lids.get(lid)})
        if len(rest) == 4 and rest[0] == "chats" and rest[2] == "messages" and method in ("PUT", "DELETE"):
            session = self._session(name, "WORKING")
            message = session.messages.get(rest[3])
            if message is None or message["chatId"] != rest[1]:
                raise nest_error(404, f"Message '{rest[3]}' not found")
            if not message["fromMe"]:
                raise nest_error(400, "You can only edit or delete your own messages")
            if method == "PUT":
                message["text"] = str(_json(request).get("text") or "")
                return Response(200, None)
            message["deleted"] = True
            return Response(200, None)
        raise nest_error(404, f"Cannot {method} {request.path}")

    # src/api/groups.controller.ts; waha-docs how-to/groups (join, picture) --------------------------------------------
    def add_invite(self, name: str, subject: str, participants: list[str]) -> str:
        """A group someone else runs, joinable with the returned invite code."""
        jid = f"1203630{secrets.randbelow(10**11):011d}@g.us"
        code = secrets.token_urlsafe(16)
        with self._lock:
            session = self.sessions[name]
            session.groups[jid] = {"subject": subject, "desc": "", "participants": [
                {"id": f"{p}@c.us", "admin": None} for p in participants], "member": False,
                "invite": secrets.token_urlsafe(16)}  # fmt: skip
            session.invites[code] = jid
        return code

    def _groups(self, request: Request, session: Session, rest: list[str]) -> Response:
        method = request.method
        if not rest and method == "POST":
            body = _json(request)
            people = body.get("participants")
            if not body.get("name") or not isinstance(people, list):
                raise nest_error(400, "name and participants are required")
            jid = f"1203630{secrets.randbelow(10**11):011d}@g.us"
            added = [p for p in people if CHAT.match(str(p.get("id"))) and self._on_whatsapp(str(p["id"]))]
            session.groups[jid] = {"subject": body["name"], "desc": "", "member": True, "admin": True,
                                   "participants": [{"id": p["id"], "admin": None} for p in added],
                                   "invite": secrets.token_urlsafe(16)}  # fmt: skip
            # NOWEB answers Baileys' GroupMetadata (id, subject, participants)
            return Response(201, {"id": jid, "subject": body["name"], "participants": [
                {"id": p["id"].replace("@c.us", "@s.whatsapp.net"), "admin": None} for p in added]})  # fmt: skip
        if not rest and method == "GET":
            return Response(200, [{"id": j, "subject": g["subject"]} for j, g in session.groups.items() if g["member"]])
        if rest == ["join"] and method == "POST":
            code = str(_json(request).get("code") or "").rstrip("/").rsplit("/", 1)[-1]
            jid = session.invites.get(code) or next((j for j, g in session.groups.items() if g["invite"] == code), None)
            if jid is None:
                raise nest_error(400, "Invalid invite code")
            session.groups[jid]["member"] = True
            return Response(201, {"id": jid})
        group = session.groups.get(rest[0])
        if group is None or not group["member"]:
            raise nest_error(404, f"Group '{rest[0]}' not found")
        tail = rest[1:]
        if not tail and method == "GET":
            return Response(200, {"id": rest[0], "subject": group["subject"], "desc": group["desc"],
                                  "participants": group["participants"]})  # fmt: skip
        if tail == ["leave"] and method == "POST":
            group["member"] = False
            return Response(201, None)
        if tail in (["subject"], ["description"]) and method == "PUT":
            body = _json(request)
            field_name = "subject" if tail == ["subject"] else "description"
            if not isinstance(body.get(field_name), str):
                raise nest_error(400, f"{field_name} must be a string")
            group["subject" if field_name == "subject" else "desc"] = body[field_name]
            return Response(200, True)
        if tail == ["picture"] and method in ("PUT", "DELETE"):
            if method == "PUT" and not obj_url(_json(request)):
                raise nest_error(400, "file.url or file.data is required")
            group["picture"] = None if method == "DELETE" else obj_url(_json(request))
            return Response(200, {"success": True})
        if tail == ["invite-code"] and method == "GET":
            return Response(200, group["invite"], content_type="text/html; charset=utf-8")
        if tail == ["invite-code", "revoke"] and method == "POST":
            group["invite"] = secrets.token_urlsafe(16)
            return Response(201, group["invite"], content_type="text/html; charset=utf-8")
        routes = {("participants", "add"), ("participants", "remove"), ("admin", "promote"), ("admin", "demote")}
        if len(tail) == 2 and tuple(tail) in routes and method == "POST":
            people = _json(request).get("participants")
            if not isinstance(people, list) or not people:
                raise nest_error(400, "participants must be a non-empty array")
            current = {p["id"]: p for p in group["participants"]}
            results = []
            for person in people:
                pid = str(person.get("id"))
                ok = self._on_whatsapp(pid)
                if ok and tail == ["participants", "add"]:
                    current[pid] = {"id": pid, "admin": None}
                elif ok and tail == ["participants", "remove"]:
                    current.pop(pid, None)
                elif ok and pid in current:
                    current[pid]["admin"] = "admin" if tail[1] == "promote" else None
                results.append({"status": "200" if ok else "403", "jid": pid.replace("@c.us", "@s.whatsapp.net")})
            group["participants"] = list(current.values())
            return Response(201, results)  # NOWEB: Baileys' groupParticipantsUpdate answer
        raise nest_error(404, f"Cannot {method} {request.path}")

    def _on_whatsapp(self, chat: str) -> bool:
        return self.numbers_on_whatsapp is None or chat.split("@", 1)[0] in self.numbers_on_whatsapp

    # src/api/labels.controller.ts (+ label create of later versions) --------------------------------------------------
    def _labels(self, request: Request, session: Session, rest: list[str]) -> Response:
        method = request.method
        if not rest and method == "GET":
            return Response(200, list(session.labels.values()))
        if not rest and method == "POST":
            body = _json(request)
            if not body.get("name"):
                raise nest_error(400, "name is required")
            color = body.get("color", 0)
            if not isinstance(color, int) or not 0 <= color < len(COLORS):  # src/structures/labels.dto.ts Colors
                raise nest_error(400, "color must be a number from 0 to 19")
            ident = str(max((int(i) for i in session.labels), default=0) + 1)
            session.labels[ident] = {"id": ident, "name": body["name"], "color": color, "colorHex": COLORS[color]}
            return Response(201, session.labels[ident])
        if len(rest) == 2 and rest[0] == "chats" and method == "GET":
            return Response(200, [session.labels[i] for i in session.chat_labels.get(rest[1], [])])
        if len(rest) == 2 and rest[0] == "chats" and method == "PUT":
            ids = [str(x.get("id")) for x in _json(request).get("labels") or []]
            if any(i not in session.labels for i in ids):
                raise nest_error(400, "Unknown label id")
            session.chat_labels[rest[1]] = ids
            return Response(200, None)
        if len(rest) == 2 and rest[1] == "chats" and method == "GET":
            return Response(200, [{"id": c} for c, ids in session.chat_labels.items() if rest[0] in ids])
        raise nest_error(404, f"Cannot {method} {request.path}")

    # src/api/channels.controller.ts (newsletters) ---------------------------------------------------------------------
    def _channels(self, request: Request, session: Session, rest: list[str]) -> Response:
        method = request.method
        if not rest and method == "POST":
            body = _json(request)
            if not body.get("name"):
                raise nest_error(400, "name is required")
            jid = f"1203633{secrets.randbelow(10**11):011d}@newsletter"
            session.channels[jid] = {"id": jid, "name": body["name"], "description": body.get("description"),
                                     "invite": f"https://www.whatsapp.com/channel/{secrets.token_urlsafe(12)}",
                                     "verified": False, "role": "OWNER"}  # fmt: skip
            return Response(201, session.channels[jid])
        if len(rest) == 1 and method == "GET":
            ref = rest[0]
            found = session.channels.get(ref) or next(
                (c for c in session.channels.values() if c["invite"].rsplit("/", 1)[-1] == ref.rsplit("/", 1)[-1]),
                None,
            )
            if found is None:
                raise nest_error(404, "Channel not found")
            return Response(200, found)
        if len(rest) == 2 and rest[1] in ("follow", "unfollow") and method == "POST":
            if rest[0] not in session.channels:
                raise nest_error(404, "Channel not found")
            (session.following.add if rest[1] == "follow" else session.following.discard)(rest[0])
            return Response(201, None)
        raise nest_error(404, f"Cannot {method} {request.path}")

    # src/api/chatting.controller.ts + src/structures/chatting.dto.ts --------------------------------------------------
    def _sending(self, body: dict[str, Any]) -> tuple[Session, str]:
        session = self._session(str(body.get("session") or "default"), "WORKING")
        chat = str(body.get("chatId") or "")
        if chat.endswith("@g.us"):  # a group's chat: the session must be one of its members
            if not session.groups.get(chat, {}).get("member", False):
                raise nest_error(404, f"Chat {chat} not found")
            return session, chat
        if not CHAT.match(chat):
            raise nest_error(400, "chatId must be a chat id like 11111111111@c.us")
        return session, chat

    def _answer(self, session: Session, chat: str, record: dict[str, Any], *, empty: bool = False) -> Response:
        short = "3EB0" + secrets.token_hex(8).upper()
        ident = f"true_{chat}_{short}"
        session.messages[ident] = {"chatId": chat, "fromMe": True, **record}
        if self._hang_after_send:
            seconds, self._hang_after_send = self._hang_after_send, 0.0
            self._release.wait(seconds)
        if empty:
            return Response(201, None)
        if self.engine == "NOWEB":  # Baileys' WAMessage
            jid = chat.replace("@c.us", "@s.whatsapp.net")
            return Response(
                201,
                {"key": {"remoteJid": jid, "fromMe": True, "id": short}, "messageTimestamp": str(int(time.time())),
                 "status": "PENDING"},
            )  # fmt: skip
        return Response(
            201,
            {"id": ident, "timestamp": int(time.time()), "from": f"{self.phone}@c.us", "fromMe": True, "to": chat,
             "body": record.get("text", ""), "hasMedia": "file" in record, "ack": 0, "ackName": "PENDING"},
        )  # fmt: skip

    def _reply_to(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        reply = body.get("reply_to")
        if reply is not None and reply not in session.messages:
            raise nest_error(400, f"reply_to message '{reply}' not found")
        return {"reply_to": reply} if reply else {}

    def _send_text(self, request: Request) -> Response:
        body = _json(request)
        session, chat = self._sending(body)
        if not isinstance(body.get("text"), str) or not body["text"]:
            raise nest_error(400, "text must be a string")
        return self._answer(session, chat, {"kind": "text", "text": body["text"], **self._reply_to(session, body)})

    def _send_poll(self, request: Request) -> Response:
        """src/api/chatting.controller.ts `sendPoll` (MessagePollRequest: `poll` a MessagePoll `{name, options[],
        multipleAnswers}`, src/structures/chatting.dto.ts); it has no count of answers beyond one or many."""
        body = _json(request)
        session, chat = self._sending(body)
        poll = body.get("poll")
        if not isinstance(poll, dict) or not isinstance(poll.get("name"), str) or not poll["name"]:
            raise nest_error(400, "poll.name must be a string")
        options = poll.get("options")
        if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o for o in options):
            raise nest_error(400, "poll.options must be an array of strings")
        if not isinstance(poll.get("multipleAnswers", False), bool):
            raise nest_error(400, "poll.multipleAnswers must be a boolean value")
        record = {"kind": "poll", "poll": dict(poll), **self._reply_to(session, body)}
        return self._answer(session, chat, record)

    def _send_file(self, request: Request) -> Response:
        body = _json(request)
        session, chat = self._sending(body)
        file = body.get("file")
        if not isinstance(file, dict) or not file.get("mimetype") or not (file.get("url") or file.get("data")):
            raise nest_error(400, "file must have mimetype and url or data")
        kind = request.path.removeprefix("/api/send").lower()
        record = {"kind": kind, "file": file, **self._reply_to(session, body)}
        if body.get("caption"):
            record["caption"] = body["caption"]
        return self._answer(session, chat, record)

    def _send_location(self, request: Request) -> Response:
        body = _json(request)
        session, chat = self._sending(body)
        if not all(isinstance(body.get(k), (int, float)) for k in ("latitude", "longitude")):
            raise nest_error(400, "latitude and longitude must be numbers")
        record = {"kind": "location", "latitude": body["latitude"], "longitude": body["longitude"],
                  "title": body.get("title"), **self._reply_to(session, body)}  # fmt: skip
        return self._answer(session, chat, record)

    def _send_vcard(self, request: Request) -> Response:
        body = _json(request)
        session, chat = self._sending(body)
        contacts = body.get("contacts")
        if not isinstance(contacts, list) or not contacts:
            raise nest_error(400, "contacts must be a non-empty array")
        for card in contacts:
            if not (card.get("vcard") or (card.get("fullName") and card.get("phoneNumber"))):
                raise nest_error(400, "each contact needs vcard or fullName and phoneNumber")
        # WEBJS answers the message; NOWEB's sendContactVCard awaits the send and returns nothing.
        return self._answer(session, chat, {"kind": "vcard", "contacts": contacts}, empty=self.engine == "NOWEB")

    def _reaction(self, request: Request) -> Response:
        body = _json(request)
        session = self._session(str(body.get("session") or "default"), "WORKING")
        if body.get("messageId") not in session.messages:
            raise nest_error(404, f"Message '{body.get('messageId')}' not found")
        if not isinstance(body.get("reaction"), str):
            raise nest_error(400, "reaction must be a string")
        session.reactions[body["messageId"]] = body["reaction"]
        return Response(200, None)

    def _seen(self, request: Request) -> Response:
        body = _json(request)
        session = self._session(str(body.get("session") or "default"), "WORKING")
        if not CHAT.match(str(body.get("chatId") or "")):
            raise nest_error(400, "chatId must be a chat id like 11111111111@c.us")
        session.seen.append(body)
        return Response(201, None)

    # src/api/contacts.controller.ts -----------------------------------------------------------------------------------
    def _check_exists(self, request: Request) -> Response:
        self._session(request.query.get("session") or "default", "WORKING")
        phone = request.query.get("phone") or ""
        exists = self.numbers_on_whatsapp is None or phone in self.numbers_on_whatsapp
        return Response(200, {"numberExists": exists, **({"chatId": f"{phone}@c.us"} if exists else {})})

    def _block(self, request: Request) -> Response:
        body = _json(request)
        session = self._session(str(body.get("session") or "default"), "WORKING")
        contact = str(body.get("contactId") or "")
        if not CHAT.match(contact):
            raise nest_error(400, "contactId must be a chat id like 11111111111@c.us")
        if request.path.endswith("/block"):
            session.blocked.add(contact)
        else:
            session.blocked.discard(contact)
        return Response(201, None)

    # Media files (src/api/... files served under /api/files/{session}/{file}) -----------------------------------------
    def add_media(self, name: str, data: bytes, mime: str) -> str:
        file = f"{secrets.token_hex(6)}.{mime.rsplit('/', 1)[-1]}"
        self.media[f"{name}/{file}"] = (data, mime)
        return f"{self.url}/api/files/{name}/{file}"

    def _file(self, rest: list[str]) -> Response:
        found = self.media.get("/".join(rest))
        if found is None:
            raise nest_error(404, "File not found")
        return Response(200, found[0], content_type=found[1])


def obj_url(body: dict[str, Any]) -> str | None:
    file = body.get("file")
    return (file.get("url") or file.get("data")) if isinstance(file, dict) else None


def _json(request: Request) -> dict[str, Any]:
    try:
        data = request.json
    except ValueError:
        raise nest_error(400, "Unexpected token in JSON") from None
    if not isinstance(data, dict):
        raise nest_error(400, "The body must be a JSON object")
    return data
