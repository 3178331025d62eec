"""A fake Evolution API (EvolutionAPI/evolution-api, Baileys integration): routes, bodies, states, errors and webhooks
of the real engine (commit 3454bec of its main branch), each route citing the Evolution source file it mirrors.

- Auth: header `apikey` (the global key, src/api/guards/auth.guard.ts), else 401.
- Errors: `{"status", "error", "response": {"message"}}` (src/main.ts error middleware); an unknown instance is 404
  `The "<name>" instance does not exist` (src/api/guards/instance.guard.ts), a taken name 403
  `This name "<name>" is already in use.`.
- Connection states `open`, `connecting`, `close` (src/api/integrations/channel/whatsapp/whatsapp.baileys.service.ts
  `stateConnection`); `create` with `qrcode: true` starts connecting; `link()` is the phone scanning the QR code.
- Sends answer 201 with Baileys' message `{key: {remoteJid, fromMe, id}, ...}` (src/api/routes/sendMessage.router.ts,
  `HttpStatus.CREATED`); a number not on WhatsApp is 400 with `[{exists: false, jid, number}]`.
- Bodies are checked as Evolution's JSON schemas check them (src/validate/instance.schema.ts, message.schema.ts,
  src/api/integrations/event/webhook/webhook.schema.ts; src/api/abstract/abstract.router.ts `groupValidate`: group
  routes take `groupJid` in the query string), each route citing its schema; what they refuse is a 400 listing the
  problems, and `webhook/set` enabled without its `events` list fails as webhook.controller.ts `set` does (500).
- Webhooks: `webhook(event, data)` builds Evolution's body `{event, instance, data, destination, date_time, sender,
  server_url, apikey}` and, when the instance's webhook headers carry `jwt_key`, `Authorization: Bearer <JWT>` signed
  HS256 with `{iat, exp: iat + 600, app: "evolution", action: "webhook"}`
  (src/api/integrations/event/webhook/webhook.controller.ts `emit`, `generateJwtToken`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.fakes import FakeServer, HttpError, Request, Response

EVENTS = {  # src/api/integrations/event/event.controller.ts `events`
    "APPLICATION_STARTUP", "QRCODE_UPDATED", "MESSAGES_SET", "MESSAGES_UPSERT", "MESSAGES_EDITED", "MESSAGES_UPDATE",
    "MESSAGES_DELETE", "SEND_MESSAGE", "SEND_MESSAGE_UPDATE", "CONTACTS_SET", "CONTACTS_UPSERT", "CONTACTS_UPDATE",
    "PRESENCE_UPDATE", "CHATS_SET", "CHATS_UPSERT", "CHATS_UPDATE", "CHATS_DELETE", "GROUPS_UPSERT", "GROUP_UPDATE",
    "GROUP_PARTICIPANTS_UPDATE", "CONNECTION_UPDATE", "LABELS_EDIT", "LABELS_ASSOCIATION", "CALL", "REMOVE_INSTANCE",
    "LOGOUT_INSTANCE", "INSTANCE_CREATE", "INSTANCE_DELETE", "STATUS_INSTANCE",
}  # fmt: skip
PRESENCES = {"unavailable", "available", "composing", "recording", "paused"}  # Baileys WAPresence
SEND_ROUTES = {"sendText", "sendMedia", "sendWhatsAppAudio", "sendSticker", "sendLocation", "sendContact",
               "sendPoll", "sendList", "sendButtons"}  # fmt: skip


def evo_error(status: int, message: Any) -> HttpError:
    names = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
    return HttpError(
        Response(status, {"status": status, "error": names.get(status, "Error"), "response": {"message": message}})
    )


def jwt_hs256(claims: dict[str, Any], key: str) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


@dataclass
class Instance:
    name: str
    state: str = "close"
    webhook: dict[str, Any] = field(default_factory=dict)
    authorized: bool = False
    qr: str | None = None
    pairing_code: str | None = None
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)  # key id → record
    reactions: dict[str, str] = field(default_factory=dict)
    read: list[dict[str, Any]] = field(default_factory=list)
    presence: list[dict[str, Any]] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # jid → {subject, desc, participants, …}
    invites: dict[str, str] = field(default_factory=dict)  # code → jid
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # made on the phone: id → {id, name, color}
    chat_labels: dict[str, set[str]] = field(default_factory=dict)  # jid → label ids
    archived: set[str] = field(default_factory=set)
    profile: dict[str, Any] = field(default_factory=lambda: {"name": "Acme", "status": "Available"})
    privacy: dict[str, Any] = field(
        default_factory=lambda: {"readreceipts": "all", "profile": "all", "status": "contacts", "online": "all",
                                 "last": "contacts", "groupadd": "contacts"}
    )  # fmt: skip


class _GroupRoutes:
    """src/api/routes/group.router.ts + whatsapp.baileys.service.ts (createGroup, acceptInviteCode, …): the group is
    named by `?groupJid=` (src/api/abstract/abstract.router.ts `groupValidate`)."""

    numbers_on_whatsapp: set[str] | None

    def _exists(self, number: str) -> bool:
        return self.numbers_on_whatsapp is None or number in self.numbers_on_whatsapp

    def _the_group(self, request: Request, instance: Instance) -> tuple[str, dict[str, Any]]:
        """src/api/abstract/abstract.router.ts `groupValidate`: `groupJid` in the query string (Evolution reads a
        body's first; the adapter sends none), else 400; `@g.us` is appended when missing."""
        jid = request.query.get("groupJid") or ""
        if not jid:
            raise evo_error(400, ["The group id needs to be informed in the query"])
        jid = jid if jid.endswith("@g.us") else jid + "@g.us"
        group = instance.groups.get(jid)
        if group is None or not group["member"]:
            raise evo_error(400, ["group not found"])
        return jid, group

    def _group_create(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        if not body.get("subject") or not isinstance(body.get("participants"), list):
            raise evo_error(400, ["subject and participants are required"])
        jid = f"1203630{secrets.randbelow(10**11):011d}@g.us"
        people = [f"{n}@s.whatsapp.net" for n in body["participants"] if self._exists(str(n))]
        instance.groups[jid] = {"subject": body["subject"], "desc": body.get("description") or "", "member": True,
                                "participants": [{"id": p, "admin": None} for p in people],
                                "code": secrets.token_urlsafe(16)}  # fmt: skip
        return Response(201, {"id": jid, "subject": body["subject"], "desc": instance.groups[jid]["desc"],
                              "participants": instance.groups[jid]["participants"]})  # fmt: skip

    def _group_findGroupInfos(self, request: Request, instance: Instance) -> Response:
        jid, group = self._the_group(request, instance)
        return Response(200, {"id": jid, "subject": group["subject"], "desc": group["desc"],
                              "participants": group["participants"]})  # fmt: skip

    def _group_fetchAllGroups(self, request: Request, instance: Instance) -> Response:
        return Response(200, [{"id": j, "subject": g["subject"]} for j, g in instance.groups.items() if g["member"]])

    def _group_updateGroupSubject(self, request: Request, instance: Instance) -> Response:
        _, group = self._the_group(request, instance)
        group["subject"] = str(_json(request).get("subject") or "")
        return Response(201, {"update": "success"})

    def _group_updateGroupDescription(self, request: Request, instance: Instance) -> Response:
        _, group = self._the_group(request, instance)
        group["desc"] = str(_json(request).get("description") or "")
        return Response(201, {"update": "success"})

    def _group_updateGroupPicture(self, request: Request, instance: Instance) -> Response:
        _, group = self._the_group(request, instance)
        image = _json(request).get("image")
        if not image:
            raise evo_error(400, ["image is required"])
        group["picture"] = image
        return Response(201, {"update": "success"})

    def _group_inviteCode(self, request: Request, instance: Instance) -> Response:
        _, group = self._the_group(request, instance)
        return Response(200, {"inviteUrl": f"https://chat.whatsapp.com/{group['code']}", "inviteCode": group["code"]})

    def _group_revokeInviteCode(self, request: Request, instance: Instance) -> Response:
        _, group = self._the_group(request, instance)
        group["code"] = secrets.token_urlsafe(16)
        return Response(201, {"revoked": True, "inviteCode": group["code"]})

    def _group_acceptInviteCode(self, request: Request, instance: Instance) -> Response:
        code = request.query.get("inviteCode") or ""
        jid = instance.invites.get(code) or next((j for j, g in instance.groups.items() if g["code"] == code), None)
        if jid is None:
            raise evo_error(400, ["Error: bad-request"])
        instance.groups[jid]["member"] = True
        return Response(200, {"accepted": True, "groupJid": jid})

    def _group_updateParticipant(self, request: Request, instance: Instance) -> Response:
        _, group = self._the_group(request, instance)
        body = _json(request)
        if body.get("action") not in ("add", "remove", "promote", "demote"):
            raise evo_error(400, ["action must be add, remove, promote or demote"])
        current = {p["id"]: p for p in group["participants"]}
        results = []
        for number in body.get("participants") or []:
            pid, ok = f"{number}@s.whatsapp.net", self._exists(str(number))
            if ok and body["action"] == "add":
                current[pid] = {"id": pid, "admin": None}
            elif ok and body["action"] == "remove":
                current.pop(pid, None)
            elif ok and pid in current:
                current[pid]["admin"] = "admin" if body["action"] == "promote" else None
            results.append({"status": "200" if ok else "403", "jid": pid})
        group["participants"] = list(current.values())
        return Response(201, {"updateParticipants": results})

    def _group_leaveGroup(self, request: Request, instance: Instance) -> Response:
        jid, group = self._the_group(request, instance)
        group["member"] = False
        return Response(200, {"groupJid": jid, "leave": True})

    # src/api/routes/label.router.ts (findLabels, handleLabel) ---------------------------------------------------------
    def _label_findLabels(self, request: Request, instance: Instance) -> Response:
        return Response(200, list(instance.labels.values()))

    def _label_handleLabel(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        if body.get("labelId") not in instance.labels or body.get("action") not in ("add", "remove"):
            raise evo_error(400, ["labelId and action are required"])
        if not self._exists(str(body.get("number"))):
            raise evo_error(404, ["Number is not on WhatsApp"])
        jid = f"{body['number']}@s.whatsapp.net"
        ids = instance.chat_labels.setdefault(jid, set())
        (ids.add if body["action"] == "add" else ids.discard)(body["labelId"])
        return Response(201, {"numberJid": jid, "labelId": body["labelId"], body["action"]: True})

    # src/api/routes/chat.router.ts archiveChat ------------------------------------------------------------------------
    def _chat_archiveChat(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        if not body.get("chat") or not isinstance(body.get("archive"), bool):
            raise evo_error(400, ["chat and archive are required"])
        (instance.archived.add if body["archive"] else instance.archived.discard)(body["chat"])
        return Response(201, {"chatId": body["chat"], "archived": body["archive"]})


class FakeEvolution(_GroupRoutes, FakeServer):
    name = "evolution"

    def __init__(self, api_key: str = "evo-key", phone: str = "15550100999") -> None:
        super().__init__()
        self.api_key = api_key
        self.phone = phone
        self.instances: dict[str, Instance] = {}
        self.numbers_on_whatsapp: set[str] | None = None  # None: every number exists
        self.media: dict[str, tuple[bytes, str, str]] = {}  # key id → (data, mimetype, file name)
        self._hang_after_send = 0.0

    @property
    def url(self) -> str:
        return self.root

    # Test controls ----------------------------------------------------------------------------------------------------
    def accept_then_hang(self, seconds: float) -> None:
        self._hang_after_send = seconds

    def link(self, name: str) -> None:
        with self._lock:
            instance = self.instances[name]
            instance.state, instance.authorized, instance.qr = "open", True, None

    def add_invite(self, name: str, subject: str, participants: list[str]) -> str:
        jid, code = f"1203630{secrets.randbelow(10**11):011d}@g.us", secrets.token_urlsafe(16)
        with self._lock:
            instance = self.instances[name]
            people = [{"id": f"{p}@s.whatsapp.net", "admin": None} for p in participants]
            instance.groups[jid] = {"subject": subject, "desc": "", "member": False, "code": code,
                                    "participants": people}  # fmt: skip
            instance.invites[code] = jid
        return code

    def connection_update(self, name: str) -> dict[str, Any]:
        """`connection.update` data (whatsapp.baileys.service.ts `connectionUpdate`)."""
        instance = self.instances[name]
        data: dict[str, Any] = {"instance": name, "state": instance.state, "statusReason": 200}
        if instance.state == "open":
            data |= {"wuid": f"{self.phone}@s.whatsapp.net", "profileName": "Acme", "profilePictureUrl": None}
        return data

    def inbound(self, name: str, from_phone: str, text: str, **key_extra: Any) -> dict[str, Any]:
        """`messages.upsert` data: Baileys' message as Evolution forwards it (`messageRaw`)."""
        jid = from_phone if "@" in from_phone else f"{from_phone}@s.whatsapp.net"
        ident = "3A" + secrets.token_hex(9).upper()
        with self._lock:
            self.instances[name].messages[ident] = {"remoteJid": jid, "fromMe": False, "text": text}
        return {
            "key": {"remoteJid": jid, "fromMe": False, "id": ident, **key_extra},
            "pushName": "Ada",
            "status": "DELIVERY_ACK",
            "message": {"conversation": text},
            "messageType": "conversation",
            "messageTimestamp": int(time.time()),
            "instanceId": f"inst-{name}",
            "source": "android",
        }

    def reaction(self, name: str, key_id: str, from_phone: str, emoji: str) -> dict[str, Any]:
        """The customer's reaction as `messages.upsert` data (whatsapp.baileys.service.ts `messages.upsert` forwards
        Baileys' message; `reactionMessage.key` names the message as the reactor sees it)."""
        record = self.instances[name].messages[key_id]
        data = self.inbound(name, from_phone, "")
        target = {"remoteJid": record["remoteJid"], "fromMe": not record["fromMe"], "id": key_id}
        sent_ms = int(time.time() * 1000)
        data["message"] = {"reactionMessage": {"key": target, "text": emoji, "senderTimestampMs": sent_ms}}
        data["messageType"] = "reactionMessage"
        return data

    def edited(self, name: str, key_id: str, text: str) -> dict[str, Any]:
        """The customer's edit as `messages.edited` data (whatsapp.baileys.service.ts `messages.upsert`: the
        `protocolMessage`, type MESSAGE_EDIT = 14, with the `editedMessage`)."""
        record = self.instances[name].messages[key_id]
        record["text"] = text
        return {"key": {"remoteJid": record["remoteJid"], "fromMe": record["fromMe"], "id": key_id}, "type": 14,
                "editedMessage": {"conversation": text}, "timestampMs": int(time.time() * 1000)}  # fmt: skip

    def revoked(self, name: str, key_id: str) -> dict[str, Any]:
        """The customer's revoke as `messages.delete` data (whatsapp.baileys.service.ts `messages.update`: a message
        whose `update.message` is null is sent as MESSAGES_DELETE with its key)."""
        record = self.instances[name].messages.pop(key_id)
        return {"remoteJid": record["remoteJid"], "fromMe": record["fromMe"], "id": key_id}

    def phone_label(self, name: str, label_name: str, color: int = 0, ident: str | None = None) -> dict[str, Any]:
        """A label created (or, with `ident`, changed) on the phone: `labels.edit` data (whatsapp.baileys.service.ts
        `labelHandle[LABELS_EDIT]`: Baileys' Label and the instance name)."""
        with self._lock:
            labels = self.instances[name].labels
            ident = ident or str(max((int(i) for i in labels), default=0) + 1)
            labels[ident] = {"id": ident, "name": label_name, "color": color, "predefinedId": None}
            return {**labels[ident], "deleted": False, "instance": name}

    def phone_label_deleted(self, name: str, ident: str) -> dict[str, Any]:
        """A label deleted on the phone: `labels.edit` data with `deleted: true`."""
        with self._lock:
            instance = self.instances[name]
            label = instance.labels.pop(ident)
            for ids in instance.chat_labels.values():
                ids.discard(ident)
            return {**label, "deleted": True, "instance": name}

    def update(self, name: str, key_id: str, status: str) -> dict[str, Any]:
        """`messages.update` data for one of our messages (whatsapp.baileys.service.ts `messages.update`)."""
        record = self.instances[name].messages[key_id]
        return {"keyId": key_id, "remoteJid": record["remoteJid"], "fromMe": True, "participant": None,
                "status": status, "instanceId": f"inst-{name}"}  # fmt: skip

    def poll_update(self, name: str, key_id: str, voters: dict[str, list[str]]) -> dict[str, Any]:
        """`messages.update` data for votes on one of our polls (whatsapp.baileys.service.ts `messages.update`:
        `pollUpdates` is Baileys' `getAggregateVotesInPollMessage`, `[{name, voters}]` per answer; `status` is
        `DELETED` as no status came with the update)."""
        record = self.instances[name].messages[key_id]
        rows = [{"name": answer, "voters": [f"{p}@s.whatsapp.net" for p in phones]}
                for answer, phones in voters.items()]  # fmt: skip
        return {"keyId": key_id, "remoteJid": record["remoteJid"], "fromMe": True, "participant": None,
                "status": "DELETED", "pollUpdates": rows, "instanceId": f"inst-{name}"}  # fmt: skip

    @staticmethod
    def group_participants(jid: str, action: str, phones: list[str]) -> dict[str, Any]:
        """`group-participants.update` data (whatsapp.baileys.service.ts `groupHandler`), with `participantsData`."""
        jids = [p if "@" in p else f"{p}@s.whatsapp.net" for p in phones]
        return {"id": jid, "action": action, "participants": jids,
                "participantsData": [{"jid": j, "phoneNumber": j.split("@", 1)[0]} for j in jids]}  # fmt: skip

    def last_sent(self, name: str) -> tuple[str, dict[str, Any]]:
        with self._lock:
            return [(k, v) for k, v in self.instances[name].messages.items() if v["fromMe"]][-1]

    def sent(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [v for v in self.instances[name].messages.values() if v["fromMe"]]

    def webhook(
        self, name: str, event: str, data: Any, *, key: str | None = None, exp_in: int = 600, at: str | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """`date_time` is when Evolution emitted the event (src/api/services/channel.service.ts `sendDataWebhook`: the
        server's local time as an ISO string); `at` sets it (an event emitted then, delivered now)."""
        instance = self.instances[name]
        body = json.dumps(
            {
                "event": event,
                "instance": name,
                "data": data,
                "destination": instance.webhook.get("url"),
                "date_time": at or datetime.now(UTC).isoformat(),
                "sender": f"{self.phone}@s.whatsapp.net",
                "server_url": self.url,
                "apikey": f"instance-token-{name}",
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        jwt_key = key if key is not None else (instance.webhook.get("headers") or {}).get("jwt_key")
        if jwt_key:
            now = int(time.time())
            claims = {"iat": now, "exp": now + exp_in, "app": "evolution", "action": "webhook"}
            headers["Authorization"] = f"Bearer {jwt_hs256(claims, jwt_key)}"
        return body, headers

    def deliver(self, name: str, event: str, data: Any) -> int | None:
        """Post the event to the instance's webhook when it is enabled and subscribed, as Evolution does."""
        import httpx

        hook = self.instances[name].webhook
        if not hook.get("enabled") or event.replace(".", "_").upper() not in hook.get("events", []):
            return None
        body, headers = self.webhook(name, event, data)
        return httpx.post(hook["url"], content=body, headers=headers, timeout=30).status_code

    # Routing ----------------------------------------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        if request.headers.get("apikey") != self.api_key:
            raise evo_error(401, "Unauthorized")
        parts = request.path.strip("/").split("/")
        if parts == ["instance", "create"] and request.method == "POST":
            return self._create(_json(request))
        if len(parts) != 3:
            raise evo_error(404, f"Cannot {request.method} {request.path}")
        group, action, name = parts
        instance = self.instances.get(name)
        if instance is None:
            raise evo_error(404, [f'The "{name}" instance does not exist'])
        handler = getattr(self, f"_{group}_{action}", None)
        if handler is None:
            raise evo_error(404, f"Cannot {request.method} {request.path}")
        return handler(request, instance)  # type: ignore[no-any-return]

    # src/api/routes/instance.router.ts + src/api/controllers/instance.controller.ts -----------------------------------
    def _create(self, body: dict[str, Any]) -> Response:
        """src/validate/instance.schema.ts `instanceSchema` (jsonschema: `number` a string matching `^\\d+[\\.@\\w-]+`,
        `qrcode` a boolean, strings where strings), then instance.controller.ts `createInstance`: `qrcode: true`
        starts the connection with `number` (a pairing code only then) and answers its `qrcode`; otherwise the
        instance stays `close`."""
        problems = [f"instance.{k} is not of a type(s) string" for k in ("instanceName", "token", "number")
                    if k in body and not isinstance(body[k], str)]  # fmt: skip
        if "qrcode" in body and not isinstance(body["qrcode"], bool):
            problems.append("instance.qrcode is not of a type(s) boolean")
        if isinstance(body.get("number"), str) and not re.match(r"^\d+[\.@\w-]+", body["number"]):
            problems.append('instance.number does not match pattern "^\\d+[\\.@\\w-]+"')
        if problems:
            raise evo_error(400, problems)
        name = str(body.get("instanceName") or "")
        if not name:
            raise evo_error(400, '"instanceName" not provided.')
        if name in self.instances:
            raise evo_error(403, [f'This name "{name}" is already in use.'])
        if body.get("integration") not in ("WHATSAPP-BAILEYS", "WHATSAPP-BUSINESS", "EVOLUTION"):
            raise evo_error(400, "Invalid integration")
        hook = self._check_webhook(body["webhook"]) if body.get("webhook") else {}
        instance = self.instances[name] = Instance(name, webhook=hook)
        qrcode = None
        if body.get("qrcode"):
            self._connect(instance, body.get("number"))
            qrcode = self._qrcode(instance)
        return Response(
            201,
            {
                "instance": {"instanceName": name, "instanceId": f"inst-{name}", "integration": body["integration"],
                             "webhookWaBusiness": None, "accessTokenWaBusiness": "", "status": instance.state},
                "hash": secrets.token_hex(16).upper(),
                "webhook": {"webhookUrl": hook.get("url"), "webhookHeaders": hook.get("headers"),
                            "webhookByEvents": hook.get("byEvents"), "webhookBase64": hook.get("base64")},
                "settings": {"rejectCall": False, "groupsIgnore": False, "alwaysOnline": False},
                "qrcode": qrcode,
            },
        )  # fmt: skip

    def _connect(self, instance: Instance, number: str | None) -> None:
        """instance.controller.ts `connectToWhatsapp`: only a `close` instance (re)starts, with `number`
        (whatsapp.baileys.service.ts `connectToWhatsapp` keeps it as `phoneNumber`; the QR event requests a pairing
        code only when there is one); a `connecting` one keeps the QR code, and pairing code, it started with."""
        if instance.state != "close":
            return
        instance.state = "open" if instance.authorized else "connecting"
        if instance.state == "connecting":
            instance.qr = f"2@{secrets.token_urlsafe(24)},{secrets.token_urlsafe(16)}"
            instance.pairing_code = None
            if number:
                code = "".join(secrets.choice("ABCDEFGHJKLMNPQRSTVWXYZ123456789") for _ in range(8))
                instance.pairing_code = code

    @staticmethod
    def _qrcode(instance: Instance) -> dict[str, Any]:
        """whatsapp.baileys.service.ts `qrCode`: `{pairingCode, code, base64, count}`."""
        return {"pairingCode": instance.pairing_code, "code": instance.qr, "base64": "data:image/png;base64,iVBOR",
                "count": 1}  # fmt: skip

    def _instance_connectionState(self, request: Request, instance: Instance) -> Response:
        return Response(200, {"instance": {"instanceName": instance.name, "state": instance.state}})

    def _instance_connect(self, request: Request, instance: Instance) -> Response:
        """instance.controller.ts `connectToWhatsapp`: `open` answers the connection state; `connecting` the QR code
        it has (whatever `number` says now); `close` starts with `number`."""
        self._connect(instance, request.query.get("number"))
        if instance.state == "open":
            return Response(200, {"instance": {"instanceName": instance.name, "state": "open"}})
        return Response(200, self._qrcode(instance))

    def _instance_logout(self, request: Request, instance: Instance) -> Response:
        if instance.state == "close":
            raise evo_error(400, [f'The "{instance.name}" instance is not connected'])
        instance.state, instance.authorized = "close", False
        return Response(200, {"status": "SUCCESS", "error": False, "response": {"message": "Instance logged out"}})

    def _instance_delete(self, request: Request, instance: Instance) -> Response:
        del self.instances[instance.name]
        return Response(200, {"status": "SUCCESS", "error": False, "response": {"message": "Instance deleted"}})

    # src/api/integrations/event/webhook/webhook.router.ts + webhook.controller.ts `set` -------------------------------
    @staticmethod
    def _check_webhook(hook: Any) -> dict[str, Any]:
        """src/api/integrations/event/webhook/webhook.schema.ts `webhookSchema` (`enabled` and `url` required and not
        empty, `events` an array of event.controller.ts `events`), then webhook.controller.ts `set`: disabled keeps
        no events; enabled reads `events.length`, a TypeError (500) when the list is missing, and an empty list means
        every event."""
        if not isinstance(hook, dict):
            raise evo_error(400, ["instance.webhook is not of a type(s) object"])
        problems = [f'instance.webhook requires property "{k}"' for k in ("enabled", "url") if k not in hook]
        if "enabled" in hook and not isinstance(hook["enabled"], bool):
            problems.append("instance.webhook.enabled is not of a type(s) boolean")
        if "url" in hook and (not isinstance(hook["url"], str) or not hook["url"]):
            problems.append('The "url" cannot be empty')
        events = hook.get("events")
        if events is not None and (not isinstance(events, list) or any(e not in EVENTS for e in events)):
            problems.append("instance.webhook.events is not one of enum values")
        if problems:
            raise evo_error(400, problems)
        if not hook["enabled"]:
            return {**hook, "events": []}
        if events is None:
            raise evo_error(500, "Cannot read properties of undefined (reading 'length')")
        return {**hook, "events": list(events) or sorted(EVENTS)}

    def _webhook_set(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        if "webhook" not in body:
            raise evo_error(400, ['instance requires property "webhook"'])
        instance.webhook = self._check_webhook(body["webhook"])
        return Response(201, {"id": f"wh-{instance.name}", **instance.webhook})

    # src/api/routes/sendMessage.router.ts + src/api/dto/sendMessage.dto.ts --------------------------------------------
    def _sending(self, request: Request, instance: Instance) -> tuple[dict[str, Any], str]:
        if instance.state != "open":
            raise evo_error(400, ["Error: Connection Closed"])
        body = _json(request)
        number = str(body.get("number") or "")
        if number.endswith("@g.us"):  # createJid keeps a group JID; the instance must be in the group
            if not instance.groups.get(number, {}).get("member", False):
                raise evo_error(404, [f"Group {number} not found"])
            return body, number
        if not number.isdigit():
            raise evo_error(400, ["number must be digits"])
        if self.numbers_on_whatsapp is not None and number not in self.numbers_on_whatsapp:
            raise evo_error(400, [{"exists": False, "jid": f"{number}@s.whatsapp.net", "number": number}])
        quoted = body.get("quoted")  # message.schema.ts `quotedOptionsSchema`: `key.id` required, not empty
        if quoted is not None and not (isinstance(obj_get(quoted, "key", "id"), str) and obj_get(quoted, "key", "id")):
            raise evo_error(400, ['The "id" cannot be empty'])
        if quoted is not None and obj_get(quoted, "key", "id") not in instance.messages:
            raise evo_error(400, ["quoted message not found"])
        return body, f"{number}@s.whatsapp.net"

    def _sent(self, instance: Instance, jid: str, record: dict[str, Any], message_type: str) -> Response:
        ident = "3EB0" + secrets.token_hex(8).upper()
        instance.messages[ident] = {"remoteJid": jid, "fromMe": True, **record}
        if self._hang_after_send:
            seconds, self._hang_after_send = self._hang_after_send, 0.0
            self._release.wait(seconds)
        return Response(
            201,
            {"key": {"remoteJid": jid, "fromMe": True, "id": ident}, "pushName": "", "status": "PENDING",
             "message": record, "messageType": message_type, "messageTimestamp": int(time.time()),
             "instanceId": f"inst-{instance.name}", "source": "unknown"},
        )  # fmt: skip

    def _message_sendText(self, request: Request, instance: Instance) -> Response:
        body, jid = self._sending(request, instance)
        if not isinstance(body.get("text"), str) or not body["text"]:
            raise evo_error(400, ["text is required"])
        return self._sent(instance, jid, {"kind": "text", "text": body["text"], "quoted": body.get("quoted")},
                          "conversation")  # fmt: skip

    def _message_sendMedia(self, request: Request, instance: Instance) -> Response:
        body, jid = self._sending(request, instance)
        if body.get("mediatype") not in ("image", "document", "video", "audio", "ptv") or not body.get("media"):
            raise evo_error(400, ["mediatype and media are required"])
        record = {
            "kind": body["mediatype"],
            **{k: body[k] for k in ("media", "mimetype", "caption", "fileName") if k in body},
        }
        return self._sent(instance, jid, record, f"{body['mediatype']}Message")

    def _message_sendWhatsAppAudio(self, request: Request, instance: Instance) -> Response:
        body, jid = self._sending(request, instance)
        if not body.get("audio"):
            raise evo_error(400, ["audio is required"])
        return self._sent(instance, jid, {"kind": "audio", "audio": body["audio"]}, "audioMessage")

    def _message_sendSticker(self, request: Request, instance: Instance) -> Response:
        body, jid = self._sending(request, instance)
        if not body.get("sticker"):
            raise evo_error(400, ["sticker is required"])
        return self._sent(instance, jid, {"kind": "sticker", "sticker": body["sticker"]}, "stickerMessage")

    def _message_sendLocation(self, request: Request, instance: Instance) -> Response:
        """src/validate/message.schema.ts `locationMessageSchema`: `latitude`, `longitude` numbers and `name`,
        `address` strings, all four required."""
        body, jid = self._sending(request, instance)
        problems = [f'instance requires property "{k}"' for k in ("latitude", "longitude", "name", "address")
                    if k not in body]  # fmt: skip
        problems += [f"instance.{k} is not of a type(s) number" for k in ("latitude", "longitude")
                     if k in body and not _is_number(body[k])]  # fmt: skip
        problems += [f"instance.{k} is not of a type(s) string" for k in ("name", "address")
                     if k in body and not isinstance(body[k], str)]  # fmt: skip
        if problems:
            raise evo_error(400, problems)
        record = {"kind": "location", **{k: body.get(k) for k in ("latitude", "longitude", "name", "address")}}
        return self._sent(instance, jid, record, "locationMessage")

    def _message_sendPoll(self, request: Request, instance: Instance) -> Response:
        """src/validate/message.schema.ts `pollMessageSchema`: `name` a string, `selectableCount` an integer 0 to 10,
        `values` 2 to 10 distinct strings, all required (src/api/routes/sendMessage.router.ts `sendPoll`)."""
        body, jid = self._sending(request, instance)
        problems = [f'instance requires property "{k}"' for k in ("name", "selectableCount", "values") if k not in body]
        count, values = body.get("selectableCount"), body.get("values")
        if "name" in body and not isinstance(body["name"], str):
            problems.append("instance.name is not of a type(s) string")
        whole = isinstance(count, int) and not isinstance(count, bool)
        if "selectableCount" in body and not (whole and 0 <= count <= 10):
            problems.append("instance.selectableCount must be an integer from 0 to 10")
        if "values" in body and (
            not isinstance(values, list) or not 2 <= len(values) <= 10 or len(set(map(str, values))) != len(values)
            or not all(isinstance(v, str) for v in values)
        ):  # fmt: skip
            problems.append("instance.values must be 2 to 10 distinct strings")
        if problems:
            raise evo_error(400, problems)
        record = {"kind": "poll", "name": body["name"], "selectableCount": count, "values": values}
        return self._sent(instance, jid, record, "pollCreationMessage")

    def _message_sendList(self, request: Request, instance: Instance) -> Response:
        """src/validate/message.schema.ts `listMessageSchema`: `title`, `footerText`, `buttonText` strings and
        `sections` required; each section a `title` (not empty) and `rows`; each row `title` and `rowId` (not
        empty), `description` not empty when given (src/api/routes/sendMessage.router.ts `sendList`)."""
        body, jid = self._sending(request, instance)
        problems = [f'instance requires property "{k}"' for k in ("title", "footerText", "buttonText", "sections")
                    if k not in body]  # fmt: skip
        problems += [f"instance.{k} is not of a type(s) string" for k in ("title", "description", "footerText",
                     "buttonText") if k in body and not isinstance(body[k], str)]  # fmt: skip
        sections = body.get("sections")
        if "sections" in body and not isinstance(sections, list):
            problems.append("instance.sections is not of a type(s) array")
        for i, section in enumerate(sections if isinstance(sections, list) else []):
            if not isinstance(section, dict) or not section.get("title") or not isinstance(section.get("rows"), list):
                problems.append(f"instance.sections[{i}] requires a non-empty title and rows")
                continue
            for j, row in enumerate(section["rows"]):
                if not isinstance(row, dict) or not row.get("title") or not row.get("rowId"):
                    problems.append(f"instance.sections[{i}].rows[{j}] requires a non-empty title and rowId")
                elif "description" in row and not row["description"]:
                    problems.append('The "description" cannot be empty')
        if problems:
            raise evo_error(400, problems)
        record = {"kind": "list", **{k: body[k] for k in ("title", "description", "footerText", "buttonText",
                                                          "sections") if k in body}}  # fmt: skip
        return self._sent(instance, jid, record, "listMessage")

    def _message_sendButtons(self, request: Request, instance: Instance) -> Response:
        """src/validate/message.schema.ts `buttonsMessageSchema`: `buttons[]` objects with `type` one of reply, copy,
        url, call, pix, and `id` / `url` / `phoneNumber` not empty when given (src/api/routes/sendMessage.router.ts
        `sendButtons`)."""
        body, jid = self._sending(request, instance)
        buttons = body.get("buttons")
        problems = []
        if buttons is not None and not isinstance(buttons, list):
            problems.append("instance.buttons is not of a type(s) array")
        for i, button in enumerate(buttons if isinstance(buttons, list) else []):
            if not isinstance(button, dict) or button.get("type") not in ("reply", "copy", "url", "call", "pix"):
                problems.append(f"instance.buttons[{i}].type is not one of enum values")
            elif any(k in button and not button[k] for k in ("id", "url", "phoneNumber")):
                problems.append(f"instance.buttons[{i}]: id, url and phoneNumber cannot be empty")
        problems += [f"instance.{k} is not of a type(s) string" for k in ("title", "description", "footer")
                     if k in body and not isinstance(body[k], str)]  # fmt: skip
        if problems:
            raise evo_error(400, problems)
        record = {"kind": "buttons", **{k: body[k] for k in ("title", "description", "footer", "buttons")
                                        if k in body}}  # fmt: skip
        return self._sent(instance, jid, record, "buttonsMessage")

    def _message_sendContact(self, request: Request, instance: Instance) -> Response:
        """src/validate/message.schema.ts `contactMessageSchema`: `contact` a non-empty array of objects with
        `fullName` (not empty) and `phoneNumber` (a string of at least 10 characters); `wuid`, when given, a numeric
        string of at least 10."""
        body, jid = self._sending(request, instance)
        contacts = body.get("contact")
        if not isinstance(contacts, list) or not contacts or not all(isinstance(c, dict) for c in contacts):
            raise evo_error(400, ["instance.contact is not of a type(s) array"])
        for index, card in enumerate(contacts):
            if not isinstance(card.get("fullName"), str) or not card["fullName"]:
                raise evo_error(400, [f'The "fullName" cannot be empty (contact[{index}])'])
            if not isinstance(card.get("phoneNumber"), str) or len(card["phoneNumber"]) < 10:
                raise evo_error(400, [f"instance.contact[{index}].phoneNumber does not meet minimum length of 10"])
            wuid = card.get("wuid")
            if wuid is not None and (not isinstance(wuid, str) or len(wuid) < 10 or not re.search(r"\d+", wuid)):
                raise evo_error(400, ['"wuid" must be a numeric string'])
        return self._sent(instance, jid, {"kind": "contact", "contact": contacts}, "contactMessage")

    def _message_sendReaction(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        key = body.get("key") or {}
        if key.get("id") not in instance.messages or not isinstance(body.get("reaction"), str):
            raise evo_error(400, ["key and reaction are required"])
        instance.reactions[key["id"]] = body["reaction"]
        return self._sent(instance, key["remoteJid"], {"kind": "reaction", "reaction": body["reaction"]},
                          "reactionMessage")  # fmt: skip

    # src/api/routes/chat.router.ts + src/api/dto/chat.dto.ts ----------------------------------------------------------
    def _message_of(self, instance: Instance, key: Any) -> dict[str, Any]:
        record = instance.messages.get(obj_get(key, "id"))
        if record is None or record["remoteJid"] != obj_get(key, "remoteJid"):
            raise evo_error(400, ["Message not found"])
        return record

    def _chat_updateMessage(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        record = self._message_of(instance, body.get("key"))
        if not record["fromMe"]:
            raise evo_error(400, ["You cannot edit others messages"])
        record["text"] = str(body.get("text") or "")
        return Response(201, {"key": body["key"], "status": "PENDING"})

    def _chat_deleteMessageForEveryone(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        record = self._message_of(instance, body)
        record["deleted"] = True
        return Response(201, {"key": {k: body[k] for k in ("remoteJid", "fromMe", "id")}})

    def _chat_markMessageAsRead(self, request: Request, instance: Instance) -> Response:
        keys = _json(request).get("readMessages")
        if not isinstance(keys, list) or not keys:
            raise evo_error(400, ["readMessages is required"])
        for key in keys:
            self._message_of(instance, key)
        instance.read.extend(keys)
        return Response(201, {"message": "Read messages", "read": "success"})

    def _chat_sendPresence(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        if body.get("presence") not in PRESENCES or not str(body.get("number") or "").isdigit():
            raise evo_error(400, ["presence must be one of " + ", ".join(sorted(PRESENCES))])
        instance.presence.append(body)
        return Response(201, {"presence": body["presence"]})

    def _chat_whatsappNumbers(self, request: Request, instance: Instance) -> Response:
        numbers = _json(request).get("numbers") or []
        out = []
        for number in numbers:
            exists = self.numbers_on_whatsapp is None or number in self.numbers_on_whatsapp
            out.append({"exists": exists, "jid": f"{number}@s.whatsapp.net", "number": number,
                        **({"name": "Ada"} if exists else {})})  # fmt: skip
        return Response(201, out)

    def _chat_updateBlockStatus(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        if body.get("status") not in ("block", "unblock"):
            raise evo_error(400, ["status must be block or unblock"])
        (instance.blocked.add if body["status"] == "block" else instance.blocked.discard)(str(body.get("number")))
        return Response(201, {"block": "success"})

    def _chat_getBase64FromMediaMessage(self, request: Request, instance: Instance) -> Response:
        key_id = obj_get(_json(request).get("message"), "key", "id")
        found = self.media.get(key_id)
        if found is None:
            raise evo_error(400, ["Message not found"])
        data, mime, name = found
        return Response(201, {"mediaType": mime.split("/", 1)[0], "fileName": name, "size": {"fileLength": len(data)},
                              "mimetype": mime, "base64": base64.b64encode(data).decode(), "buffer": None})  # fmt: skip

    def _chat_fetchProfile(self, request: Request, instance: Instance) -> Response:
        number = str(_json(request).get("number") or "")
        return Response(201, {"wuid": f"{number}@s.whatsapp.net", **instance.profile, "isBusiness": False})

    def _chat_fetchBusinessProfile(self, request: Request, instance: Instance) -> Response:
        number = str(_json(request).get("number") or "")
        return Response(201, {"wid": f"{number}@s.whatsapp.net", "isBusiness": True, "description": "Shop",
                              "email": "shop@example.com", "website": [], "address": "Main St 1"})  # fmt: skip

    def _chat_updateProfileName(self, request: Request, instance: Instance) -> Response:
        instance.profile["name"] = str(_json(request).get("name") or "")
        return Response(201, {"update": "success"})

    def _chat_updateProfileStatus(self, request: Request, instance: Instance) -> Response:
        instance.profile["status"] = str(_json(request).get("status") or "")
        return Response(201, {"update": "success"})

    def _chat_fetchPrivacySettings(self, request: Request, instance: Instance) -> Response:
        return Response(200, instance.privacy)

    def _chat_updatePrivacySettings(self, request: Request, instance: Instance) -> Response:
        body = _json(request)
        unknown = set(body) - set(instance.privacy)
        if unknown:
            raise evo_error(400, [f"unknown privacy settings: {', '.join(sorted(unknown))}"])
        instance.privacy.update(body)
        return Response(201, {"update": "success", "data": instance.privacy})


def obj_get(value: Any, *path: str) -> Any:
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _json(request: Request) -> dict[str, Any]:
    try:
        data = request.json
    except ValueError:
        raise evo_error(400, "Unexpected token in JSON") from None
    if not isinstance(data, dict):
        raise evo_error(400, "The body must be a JSON object")
    return data


def _is_number(value: Any) -> bool:
    """JSON Schema's `number` (jsonschema, which Evolution validates with): not a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)
