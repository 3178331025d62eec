"""The built-in sandbox provider: no outside service, deterministic behaviour (CONVENTIONS "Channels and messages").

Every message is accepted except to numbers ending `0000`, which are refused (the message ends `failed` with a
`last_error`). Statuses then move `sent` → `delivered` → `read`, one step per SANDBOX_STATUS_DELAY seconds (driven
by the message sender). `POST /v1/channels/{id}/sandbox/inbound` simulates customers.
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
