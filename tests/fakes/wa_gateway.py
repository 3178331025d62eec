"""A fake linked-device WhatsApp gateway speaking the protocol documented in
`switchboard.providers.whatsapp_web` (version 1).

Sessions move `STOPPED` → (`start`) `SCAN_QR` → (`link()`, i.e. the phone scanned the QR) `WORKING`; `logout` stops
them. Every route checks `X-Api-Key` (401), the session (404), its state (409) and the body (400) the way the
documented gateway does; errors are `{"error": {"code", "message"}}`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.fakes import FakeServer, HttpError, Request, Response

CHAT_ID = re.compile(r"[0-9]{7,15}@s\.whatsapp\.net")
PHONE = re.compile(r"[0-9]{7,15}")
SEND_TYPES = {"text", "image", "video", "audio", "document", "sticker", "location"}
MEDIA_TYPES = {"image", "video", "audio", "document", "sticker"}
PRESENCE = {"typing", "recording", "paused", "available", "unavailable"}
PRIVACY = {
    "last_seen": {"all", "contacts", "contact_blacklist", "none"},
    "online": {"all", "match_last_seen"},
    "profile_picture": {"all", "contacts", "contact_blacklist", "none"},
    "status": {"all", "contacts", "contact_blacklist", "none"},
    "read_receipts": {"all", "none"},
    "groups_add": {"all", "contacts", "contact_blacklist"},
}
PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTVWXYZ123456789"


def error(status: int, code: str, message: str) -> HttpError:
    return HttpError(Response(status, {"error": {"code": code, "message": message}}))


@dataclass
class Session:
    name: str
    status: str = "STOPPED"
    me: dict[str, Any] | None = None
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    reactions: dict[str, str] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)
    presence: list[dict[str, Any]] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)
    profile: dict[str, Any] = field(default_factory=lambda: {"name": "Acme", "about": "Available", "picture_url": None})
    privacy: dict[str, Any] = field(
        default_factory=lambda: {
            "last_seen": "contacts",
            "online": "all",
            "profile_picture": "all",
            "status": "contacts",
            "read_receipts": "all",
            "groups_add": "contacts",
        }
    )


class FakeWaGateway(FakeServer):
    name = "wa-gateway"

    def __init__(self, api_key: str = "k", *, auto_link: bool = False, fail_start: bool = False) -> None:
        super().__init__()
        self.api_key = api_key
        self.auto_link = auto_link  # `start` goes straight to WORKING (a device linked earlier)
        self.fail_start = fail_start  # `start` ends FAILED
        self.sessions: dict[str, Session] = {}
        self.directory: dict[str, str] = {"15550001111": "Ada Lovelace"}  # numbers on WhatsApp → their names
        self.media: dict[str, tuple[bytes, str, str | None]] = {}

    # Test helpers -----------------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self.root

    def link(self, session: str, phone: str = "15550100999", push_name: str = "Acme") -> Session:
        """The phone scanned the QR (or entered the pairing code): the session is WORKING."""
        state = self.sessions.setdefault(session, Session(session))
        state.status = "WORKING"
        state.me = {"id": f"{phone}@s.whatsapp.net", "push_name": push_name}
        return state

    def receive(self, session: str, from_phone: str, text: str) -> str:
        """A customer's message arrives in the session (so it can be read, reacted to, quoted)."""
        message_id = "3A" + secrets.token_hex(9).upper()
        self.sessions[session].messages[message_id] = {
            "id": message_id,
            "chat_id": f"{from_phone}@s.whatsapp.net",
            "from_me": False,
            "type": "text",
            "text": text,
        }
        return message_id

    def add_media(self, data: bytes, mime_type: str, filename: str | None = None) -> str:
        media_id = f"media-{len(self.media) + 1}"
        self.media[media_id] = (data, mime_type, filename)
        return media_id

    def signature(self, body: bytes, key: str | None = None) -> str:
        return "sha256=" + hmac.new((key or self.api_key).encode(), body, hashlib.sha256).hexdigest()

    def callback(self, event: str, payload: dict[str, Any], session: str | None = None) -> tuple[dict[str, str], bytes]:
        """A signed callback as the gateway would POST it: (headers, body)."""
        doc: dict[str, Any] = {"event": event, "payload": payload}
        if session is not None:
            doc["session"] = session
        body = json.dumps(doc).encode()
        return {"Content-Type": "application/json", "X-Gateway-Signature": self.signature(body)}, body

    # Routing ----------------------------------------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        if request.headers.get("x-api-key") != self.api_key:
            raise error(401, "unauthorized", "Missing or invalid X-Api-Key.")
        # Route on the encoded path, then decode each segment (a %2F inside a name is not a separator).
        segments = [unquote(p) for p in urlsplit(request.raw_path).path.split("/")[1:]]
        if len(segments) < 2 or segments[0] != "sessions" or not all(segments[1:]):
            raise error(404, "route_not_found", f"No route for {request.path}.")
        name, rest = segments[1], segments[2:]
        method = request.method
        if not rest:
            self._allow(method, "GET")
            return Response(200, self._view(self._session(name)))
        head = rest[0]
        if rest == ["start"]:
            self._allow(method, "POST")
            return self._start(name)
        if rest == ["logout"]:
            self._allow(method, "POST")
            session = self._session(name)
            session.status, session.me = "STOPPED", None
            return Response(200, {"status": "STOPPED"})
        session = self._session(name)
        if rest == ["qr"]:
            self._allow(method, "GET")
            self._state(session, "SCAN_QR")
            return Response(200, {"qr": f"2@{secrets.token_urlsafe(32)},{secrets.token_urlsafe(16)}", "expires_in": 20})
        if rest == ["pairing-code"]:
            self._allow(method, "POST")
            self._state(session, "SCAN_QR")
            phone = self._json(request).get("phone")
            if not isinstance(phone, str) or not PHONE.fullmatch(phone):
                raise error(400, "invalid_phone", "phone must be 7 to 15 digits with the country code.")
            code = "".join(secrets.choice(PAIRING_ALPHABET) for _ in range(8))
            return Response(200, {"code": f"{code[:4]}-{code[4:]}"})
        self._state(session, "WORKING")
        if head == "messages":
            return self._messages(session, method, rest[1:], request)
        if rest == ["presence"]:
            self._allow(method, "POST")
            body = self._json(request)
            self._chat(body.get("chat_id"))
            if body.get("state") not in PRESENCE:
                raise error(400, "invalid_state", f"state must be one of {', '.join(sorted(PRESENCE))}.")
            session.presence.append(body)
            return Response(200, {})
        if head == "media" and len(rest) == 2:
            self._allow(method, "GET")
            media = self.media.get(rest[1])
            if media is None:
                raise error(404, "media_not_found", "No such media (it may have expired).")
            headers = {"Content-Disposition": f'attachment; filename="{media[2]}"'} if media[2] else {}
            return Response(200, media[0], headers=headers, content_type=media[1])
        if rest == ["profile"]:
            return self._document(session.profile, method, request, {"name": 25, "about": 139, "picture_url": 2048})
        if rest == ["privacy"]:
            return self._privacy(session, method, request)
        if head == "contacts" and len(rest) in (2, 3):
            return self._contacts(session, method, rest[1:], request)
        raise error(404, "route_not_found", f"No route for {request.path}.")

    # Pieces -----------------------------------------------------------------------------------------------------------
    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise error(405, "method_not_allowed", f"Use {' or '.join(allowed)}.")

    def _session(self, name: str) -> Session:
        session = self.sessions.get(name)
        if session is None:
            raise error(404, "session_not_found", f"No session {name!r}; start it first.")
        return session

    @staticmethod
    def _state(session: Session, wanted: str) -> None:
        if session.status != wanted:
            code = "session_not_working" if wanted == "WORKING" else "session_not_pairing"
            raise error(409, code, f"The session is {session.status}, not {wanted}.")

    @staticmethod
    def _json(request: Request) -> dict[str, Any]:
        if not request.headers.get("content-type", "").startswith("application/json"):
            raise error(400, "invalid_body", "The body must be JSON (Content-Type: application/json).")
        try:
            body = json.loads(request.body)
        except ValueError:
            raise error(400, "invalid_body", "The body is not valid JSON.") from None
        if not isinstance(body, dict):
            raise error(400, "invalid_body", "The body must be a JSON object.")
        return body

    @staticmethod
    def _chat(value: Any) -> str:
        if not isinstance(value, str) or not CHAT_ID.fullmatch(value):
            raise error(400, "invalid_chat_id", "chat_id must look like <digits>@s.whatsapp.net.")
        return value

    @staticmethod
    def _view(session: Session) -> dict[str, Any]:
        view: dict[str, Any] = {"name": session.name, "status": session.status}
        if session.me:
            view["me"] = session.me
        return view

    def _start(self, name: str) -> Response:
        session = self.sessions.setdefault(name, Session(name))
        if self.fail_start:
            session.status = "FAILED"
            return Response(200, {**self._view(session), "error": "The device was unlinked from the phone."})
        if session.status != "WORKING":
            if self.auto_link:
                self.link(name)
            else:
                session.status = "SCAN_QR"
        return Response(200, self._view(session))

    def _messages(self, session: Session, method: str, rest: list[str], request: Request) -> Response:
        if not rest:
            self._allow(method, "POST")
            return self._send(session, self._json(request))
        message = session.messages.get(rest[0])
        if message is None:
            raise error(404, "message_not_found", f"No message {rest[0]!r} in this session.")
        if len(rest) == 1:
            self._allow(method, "PUT", "DELETE")
            if not message["from_me"]:
                raise error(400, "not_own_message", "Only your own messages can be edited or deleted.")
            if method == "DELETE":
                message["deleted"] = True
                return Response(204)
            text = self._json(request).get("text")
            if message["type"] != "text":
                raise error(400, "not_editable", "Only text messages can be edited.")
            if not isinstance(text, str) or not text:
                raise error(400, "invalid_text", "text is required.")
            message["text"] = text
            return Response(200, {"id": message["id"]})
        if rest[1:] == ["reaction"]:
            self._allow(method, "POST")
            emoji = self._json(request).get("emoji")
            if not isinstance(emoji, str) or len(emoji) > 16:
                raise error(400, "invalid_emoji", "emoji must be a string ('' removes the reaction).")
            session.reactions[message["id"]] = emoji
            return Response(200, {})
        if rest[1:] == ["read"]:
            self._allow(method, "POST")
            session.read.append(message["id"])
            return Response(200, {})
        raise error(404, "route_not_found", "No such message action.")

    def _send(self, session: Session, body: dict[str, Any]) -> Response:
        self._chat(body.get("chat_id"))
        kind = body.get("type")
        if kind not in SEND_TYPES:
            raise error(400, "invalid_type", f"type must be one of {', '.join(sorted(SEND_TYPES))}.")
        part = "text" if kind == "text" else "location" if kind == "location" else "media"
        extra = set(body) - {"chat_id", "type", "reply_to", part}
        if extra:
            raise error(400, "invalid_body", f"Unknown field {sorted(extra)[0]!r} for type {kind}.")
        if kind == "text" and (not isinstance(body.get("text"), str) or not body["text"]):
            raise error(400, "invalid_text", "text is required for text messages.")
        if part == "media":
            media = body.get("media")
            if not isinstance(media, dict) or ("url" in media) == ("id" in media):
                raise error(400, "invalid_media", "media needs exactly one of url or id.")
            if set(media) - {"url", "id", "mime_type", "filename", "caption"}:
                raise error(400, "invalid_media", "Unknown media field.")
            if "url" in media and not re.match(r"https?://", str(media["url"])):
                raise error(400, "invalid_media", "media.url must be an http(s) URL.")
            if "id" in media and media["id"] not in self.media:
                raise error(400, "invalid_media", "media.id is not a known media id.")
        if part == "location":
            where = body.get("location")
            if not isinstance(where, dict) or not all(
                isinstance(where.get(k), int | float) for k in ("latitude", "longitude")
            ):
                raise error(400, "invalid_location", "location needs numeric latitude and longitude.")
        if body.get("reply_to") is not None and body["reply_to"] not in session.messages:
            raise error(404, "message_not_found", "reply_to names no message in this session.")
        message_id = "3EB0" + secrets.token_hex(8).upper()
        session.messages[message_id] = {**body, "id": message_id, "from_me": True}
        return Response(201, {"id": message_id})

    def _document(self, doc: dict[str, Any], method: str, request: Request, limits: dict[str, int]) -> Response:
        self._allow(method, "GET", "PUT")
        if method == "PUT":
            body = self._json(request)
            for key, value in body.items():
                if key not in limits:
                    raise error(400, "invalid_field", f"Unknown profile field {key!r}.")
                if not isinstance(value, str) or len(value) > limits[key]:
                    raise error(400, "invalid_field", f"{key} must be a string of at most {limits[key]} characters.")
            doc.update(body)
        return Response(200, dict(doc))

    def _privacy(self, session: Session, method: str, request: Request) -> Response:
        self._allow(method, "GET", "PUT")
        if method == "PUT":
            body = self._json(request)
            for key, value in body.items():
                if key not in PRIVACY:
                    raise error(400, "invalid_field", f"Unknown privacy setting {key!r}.")
                if value not in PRIVACY[key]:
                    raise error(400, "invalid_value", f"{key} must be one of {', '.join(sorted(PRIVACY[key]))}.")
            session.privacy.update(body)
        return Response(200, dict(session.privacy))

    def _contacts(self, session: Session, method: str, rest: list[str], request: Request) -> Response:
        phone = rest[0]
        if not PHONE.fullmatch(phone):
            raise error(400, "invalid_phone", "The phone must be 7 to 15 digits with the country code.")
        if len(rest) == 1:
            self._allow(method, "GET")
            if phone not in self.directory:
                return Response(200, {"exists": False})
            return Response(200, {"exists": True, "name": self.directory[phone], "wa_id": f"{phone}@s.whatsapp.net"})
        if rest[1] != "block":
            raise error(404, "route_not_found", "No such contact action.")
        self._allow(method, "POST")
        blocked = self._json(request).get("blocked")
        if not isinstance(blocked, bool):
            raise error(400, "invalid_blocked", "blocked must be true or false.")
        (session.blocked.add if blocked else session.blocked.discard)(phone)
        return Response(200, {})
