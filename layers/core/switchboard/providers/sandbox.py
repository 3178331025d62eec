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
"""

from __future__ import annotations

import hashlib
from typing import Any

from switchboard.ids import new_ulid
from switchboard.providers.base import (
    ConnectResult,
    DownloadedMedia,
    OutboundMessage,
    Provider,
    ProviderRejected,
    SendResult,
)

REFUSED_SUFFIX = "0000"
REJECTED_TEMPLATE_PREFIX = "reject_"
RECATEGORIZED_TEMPLATE_PREFIX = "promo_"


def _template_review_delay() -> float:
    from switchboard.config import get_settings

    settings = get_settings()
    return settings.sandbox_status_delay * settings.local_time_scale


def _template_decision(template: dict[str, Any], *, submitted_at: str | None) -> dict[str, Any]:
    """The sandbox reviewer: PENDING until the review delay has passed, then APPROVED or REJECTED by name."""
    from switchboard import clock

    name, category = str(template.get("name") or ""), str(template.get("category") or "UTILITY").upper()
    elapsed = (clock.now() - clock.parse_iso(submitted_at)).total_seconds() if submitted_at else 0.0
    base = {"id": template.get("id"), "name": name, "language": template.get("language"), "category": category}
    if elapsed < _template_review_delay():
        return {**base, "status": "PENDING"}
    if name.startswith(REJECTED_TEMPLATE_PREFIX):
        return {**base, "status": "REJECTED", "rejected_reason": "INVALID_FORMAT"}
    if name.startswith(RECATEGORIZED_TEMPLATE_PREFIX) and category == "UTILITY":
        base["category"] = "MARKETING"
    return {**base, "status": "APPROVED"}


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

    def download_media(self, media_id: str, message_id: str, payload: str) -> DownloadedMedia:
        digest = hashlib.sha256(f"{media_id}:{message_id}".encode()).hexdigest()
        return DownloadedMedia(
            data=f"sandbox media {media_id} {digest}".encode(),
            mime_type="text/plain",
            file_name=f"{media_id}.txt",
            source_url=f"sandbox://media/{media_id}",
        )

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
