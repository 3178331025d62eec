"""The built-in sandbox provider: no outside service, deterministic behaviour (CONVENTIONS "Channels and messages").

Every message is accepted except to numbers ending `0000`, which are refused (the message ends `failed` with a
`last_error`). Statuses then move `sent` → `delivered` → `read`, one step per SANDBOX_STATUS_DELAY seconds (driven
by the message sender). `POST /v1/channels/{id}/sandbox/inbound` simulates customers.

Labels are accepted as they are (nothing to mirror). Templates are reviewed deterministically: a name starting
`reject_` is rejected, any other approved; a UTILITY template named `promo_…` is approved as MARKETING (a category
change). The decision is due SANDBOX_STATUS_DELAY * LOCAL_TIME_SCALE seconds after submission: `create` answers it
at once when that delay is 0, otherwise `PENDING`, and `list` (what `POST /v1/templates/sync` pulls) reports it
once the delay has passed. The sandbox keeps no state: `list` judges the templates its caller says it submitted
(`known`).

Groups, communities and newsletters are deterministic too (`switchboard.groups` keeps the state and passes what the
sandbox needs): JIDs and invite codes are digests of the channel, the record and the link's revision; participants
ending `0000` are "not on WhatsApp" (refused), invite codes ending `0000` are unknown; an unknown code joins a
made-up group (or newsletter) derived from the code. Every newsletter shows a feed of 200-299 posts, one per hour
back from 2026-01-01T00:00Z (`messages`, newest first, cursor = the index to continue below).
"""

from __future__ import annotations

import hashlib
from typing import Any

from switchboard import clock
from switchboard.config import get_settings
from switchboard.errors import NotFound
from switchboard.ids import new_ulid
from switchboard.providers.base import (
    BufferSink,
    ConnectResult,
    DownloadedMedia,
    MediaSink,
    OutboundMessage,
    Provider,
    ProviderRejected,
    SendResult,
    downloaded,
)

REFUSED_SUFFIX = "0000"
FEED_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: the newest sandbox newsletter post
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
REJECTED_TEMPLATE_PREFIX = "reject_"
RECATEGORIZED_TEMPLATE_PREFIX = "promo_"


def _template_review_delay() -> float:
    settings = get_settings()
    return settings.sandbox_status_delay * settings.local_time_scale


def _template_decision(template: dict[str, Any], *, submitted_at: str | None) -> dict[str, Any]:
    """The sandbox reviewer: PENDING until the review delay has passed, then APPROVED or REJECTED by name."""
    name, category = str(template.get("name") or ""), str(template.get("category") or "UTILITY").upper()
    submitted = clock.parse_stored(submitted_at, "template submitted_at")
    elapsed = (clock.now() - submitted).total_seconds() if submitted else 0.0
    base = {"id": template.get("id"), "name": name, "language": template.get("language"), "category": category}
    if elapsed < _template_review_delay():
        return {**base, "status": "PENDING"}
    if name.startswith(REJECTED_TEMPLATE_PREFIX):
        return {**base, "status": "REJECTED", "rejected_reason": "INVALID_FORMAT"}
    if name.startswith(RECATEGORIZED_TEMPLATE_PREFIX) and category == "UTILITY":
        base["category"] = "MARKETING"
    return {**base, "status": "APPROVED"}


def _digest(seed: str) -> int:
    return int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")


def _jid(seed: str, server: str) -> str:
    return f"120363{_digest(seed) % 10**12:012d}@{server}"


def _invite_code(seed: str) -> str:
    """22 base-62 characters, like WhatsApp's invite codes."""
    n, out = _digest(seed), []
    for _ in range(22):
        n, r = divmod(n, 62)
        out.append(_B62[r])
    return "".join(out)


def _revision_code(payload: dict[str, Any]) -> str:
    return _invite_code(f"{payload['jid']}:{payload.get('revision', 0)}")


def _feed_size(jid: str) -> int:
    return 200 + _digest(f"feed:{jid}") % 100


class SandboxProvider(Provider):
    platform = "sandbox"

    def connect(self) -> ConnectResult:
        return ConnectResult("connected", {"sandbox": True})

    def send(self, message: OutboundMessage) -> SendResult:
        if message.to_phone.endswith(REFUSED_SUFFIX):
            raise ProviderRejected(f"The sandbox refuses recipients ending in {REFUSED_SUFFIX}.")
        return SendResult(f"sbx_{new_ulid().lower()}")

    def edit(self, provider_message_id: str, text: str) -> None:
        return None

    def delete(self, provider_message_id: str) -> None:
        return None

    def react(self, provider_message_id: str, emoji: str) -> None:
        return None

    def read(self, provider_message_id: str) -> None:
        return None

    def presence(self, to_phone: str, state: str) -> None:
        return None

    def download_media(
        self,
        media_id: str,
        message_id: str,
        payload: str,
        sink: MediaSink | None = None,
        deadline: float | None = None,
    ) -> DownloadedMedia:
        digest = hashlib.sha256(f"{media_id}:{message_id}".encode()).hexdigest()
        out = sink if sink is not None else BufferSink()
        out.write(f"sandbox media {media_id} {digest}".encode())
        return downloaded(out, sink, "text/plain", f"{media_id}.txt", f"sandbox://media/{media_id}")

    def profile(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        current = dict((self.channel.get("metadata") or {}).get("profile") or {"name": self.channel.get("name")})
        return {**current, **(changes or {})}

    def privacy(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        current = dict((self.channel.get("metadata") or {}).get("privacy") or {})
        return {**current, **(changes or {})}

    def lookup_contact(self, phone: str) -> dict[str, Any]:
        exists = not phone.endswith(REFUSED_SUFFIX)
        return {
            "phone": phone,
            "exists": exists,
            "name": f"Sandbox {phone[-4:]}" if exists else None,
            "wa_id": phone if exists else None,
        }

    def block(self, phone: str, blocked: bool) -> None:
        return None

    def labels(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"action": action, "ok": True, **{k: v for k, v in payload.items() if k in ("label_id", "chat_id")}}

    def templates(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        if action == "create":
            digest = hashlib.sha256(
                f"{self.channel.get('id')}:{payload.get('name')}:{payload.get('language')}".encode()
            ).hexdigest()
            submitted = {**payload, "id": f"sbxtpl_{digest[:20]}"}
            decision = _template_decision(submitted, submitted_at=None) if _template_review_delay() <= 0 else None
            return decision or {"id": submitted["id"], "status": "PENDING", "category": payload.get("category")}
        if action == "list":
            known = payload.get("known") or []
            return {
                "templates": [_template_decision(t, submitted_at=t.get("submitted_at")) for t in known],
                "next_cursor": None,
            }
        if action == "delete":
            return {"deleted": True, "name": payload.get("name")}
        raise self._unsupported(f"template action {action!r}")

    # Groups and communities ----------------------------------------------------------------------------------------
    def _channel_seed(self) -> str:
        return str(self.channel.get("id") or "")

    def _unknown_code(self, code: str) -> None:
        if code.endswith(REFUSED_SUFFIX):
            raise NotFound("The invite link is not valid, or it was reset.")

    def _people(self, phones: list[str], role: str = "member") -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        ok = [{"phone": p, "role": role} for p in phones if not p.endswith(REFUSED_SUFFIX)]
        failed = [{"phone": p, "reason": "not_on_whatsapp"} for p in phones if p.endswith(REFUSED_SUFFIX)]
        return ok, failed

    def groups(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        seed = self._channel_seed()
        if action == "create":
            jid = _jid(f"group:{seed}:{payload['group_id']}", "g.us")
            ok, failed = self._people(list(payload.get("participants") or []))
            return {"jid": jid, "participants": ok, "failed": failed, "invite_code": _invite_code(f"{jid}:0")}
        if action == "create_community":
            jid = _jid(f"community:{seed}:{payload['community_id']}", "g.us")
            return {"jid": jid, "announcement_group_jid": _jid(f"announce:{jid}", "g.us")}
        if action in ("link", "unlink"):
            return {"community_jid": payload["community_jid"], action + "ed": list(payload.get("group_jids") or [])}
        if action == "join":
            code = str(payload["invite_code"])
            self._unknown_code(code)
            if payload.get("known_jid"):
                return {"jid": payload["known_jid"], "role": "member"}
            jid = _jid(f"invite:{code}", "g.us")
            base = _digest(f"people:{jid}")
            people = [f"1415555{(base >> (14 * i)) % 9000 + 1000:04d}" for i in range(3)]
            participants = [{"phone": p, "role": "superadmin" if i == 0 else "member"} for i, p in enumerate(people)]
            return {
                "jid": jid,
                "role": "member",
                "name": f"Sandbox group {code[:6]}",
                "description": "A group the sandbox made up for this invite code.",
                "participants": participants,
            }
        if action == "leave":
            return {"jid": payload["jid"], "left": True}
        if action in ("set_name", "set_description"):
            return {"jid": payload["jid"], "ok": True}
        if action == "set_photo":
            if payload.get("remove"):
                return {"jid": payload["jid"], "photo_id": None}
            source = payload.get("image_url") or payload.get("asset_id")
            return {
                "jid": payload["jid"],
                "photo_id": f"sbxphoto_{_digest(str(payload['jid']) + str(source)) % 10**10}",
            }
        if action == "participants":
            ok, failed = self._people(list(payload.get("participants") or []))
            results = [{"phone": p["phone"], "status": "ok"} for p in ok]
            if payload.get("action") == "add":
                results += [{"phone": f["phone"], "status": "failed", "reason": f["reason"]} for f in failed]
            else:  # a number that is not on WhatsApp is not in the group either: the caller reports it
                results += [{"phone": f["phone"], "status": "ok"} for f in failed]
            return {"jid": payload["jid"], "results": results}
        if action == "invite_code":
            return {
                "jid": payload["jid"],
                "invite_code": _invite_code(f"{payload['jid']}:{payload.get('revision', 0)}"),
            }
        if action == "list":
            return {"groups": list(payload.get("known") or [])}
        raise self._unsupported(f"group action {action!r}")

    # Newsletters -----------------------------------------------------------------------------------------------------
    def newsletters(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        seed = self._channel_seed()
        if action == "create":
            jid = _jid(f"newsletter:{seed}:{payload['key']}", "newsletter")
            return {"jid": jid, "invite_code": _invite_code(f"{jid}:0")}
        if action == "resolve_invite":
            code = str(payload["invite_code"])
            self._unknown_code(code)
            jid = _jid(f"nlinvite:{code}", "newsletter")
            return {"jid": jid, "name": f"Sandbox newsletter {code[:6]}", "description": "", "invite_code": code}
        if action == "info":
            jid = str(payload["jid"])
            return {
                "jid": jid,
                "name": f"Sandbox newsletter {jid.split('@', 1)[0][-4:]}",
                "description": "",
                "invite_code": _invite_code(f"{jid}:0"),
            }
        if action in ("subscribe", "unsubscribe"):
            return {"jid": payload["jid"], "subscribed": action == "subscribe"}
        if action == "invite_code":
            return {
                "jid": payload["jid"],
                "invite_code": _invite_code(f"{payload['jid']}:{payload.get('revision', 0)}"),
            }
        if action == "messages":
            jid, limit = str(payload["jid"]), int(payload.get("limit") or 20)
            top = _feed_size(jid) - 1 if payload.get("cursor") is None else int(payload["cursor"])
            indexes = list(range(top, max(top - limit, -1), -1))
            digits = jid.split("@", 1)[0]
            messages = [
                {
                    "message_id": f"sbxnl_{digits[-6:]}_{i:04d}",
                    "newsletter_id": jid,
                    "timestamp": FEED_EPOCH - (_feed_size(jid) - 1 - i) * 3600,
                    "body": f"Sandbox newsletter post #{i + 1}",
                    "type": "text",
                }
                for i in indexes
            ]
            nxt = indexes[-1] - 1 if indexes and indexes[-1] > 0 else None
            return {"messages": messages, "next_cursor": nxt}
        raise self._unsupported(f"newsletter action {action!r}")
