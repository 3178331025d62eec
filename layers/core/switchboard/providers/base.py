"""The provider protocol every channel adapter implements.

An adapter overrides the operations its platform supports; every other operation raises the stable
`400 unsupported_by_provider`. `capabilities()` is derived from what the adapter overrides, so
`GET /v1/channels/{id}/capabilities` can never disagree with what the adapter actually does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switchboard.errors import DomainError, UnsupportedByProvider

Channel = dict[str, Any]

# capability name → the method that provides it
CAPABILITIES: dict[str, str] = {
    "connect": "connect",
    "qr": "qr",
    "pairing_code": "pairing_code",
    "send": "send",
    "edit": "edit",
    "delete": "delete",
    "react": "react",
    "read": "read",
    "presence": "presence",
    "media_download": "download_media",
    "profile": "profile",
    "privacy": "privacy",
    "contact_lookup": "lookup_contact",
    "block": "block",
    "groups": "groups",
    "newsletters": "newsletters",
    "labels": "labels",
    "templates": "templates",
}


class ProviderRejected(DomainError):
    """The provider refused this message for good (e.g. an invalid recipient): the message ends `failed`."""

    status = 422
    code = "provider_rejected"


class ProviderUnavailable(Exception):
    """The provider could not be reached or answered 5xx: retry later."""


@dataclass(frozen=True)
class ConnectResult:
    status: str  # connected | pairing | error
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OutboundMessage:
    message_id: str
    to_phone: str
    type: str
    text: str | None = None
    media: dict[str, Any] | None = None
    template: dict[str, Any] | None = None
    reply_to: str | None = None
    preview_url: bool = False  # text: render a link preview
    interactive: dict[str, Any] | None = None  # Meta's interactive object
    contacts: list[dict[str, Any]] | None = None  # Meta's contact cards


@dataclass(frozen=True)
class SendResult:
    provider_message_id: str


@dataclass(frozen=True)
class InboundMessage:
    """A customer's message as the provider reported it, normalised."""

    provider_message_id: str
    from_phone: str  # digits with country code ("" when the provider gave only `from_user_id`)
    type: str  # text, image, audio, video, document, location, …
    text: str | None = None
    media: dict[str, Any] | None = None
    contact_name: str | None = None
    timestamp: str | None = None  # ISO 8601
    from_user_id: str | None = None  # WhatsApp's business-scoped user id (identity type `whatsapp_user_id`)


@dataclass(frozen=True)
class StatusCallback:
    """A delivery status of one of our messages, as the provider reported it."""

    provider_message_id: str
    status: str  # sent | delivered | read | failed | played
    timestamp: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class DownloadedMedia:
    data: bytes
    mime_type: str
    file_name: str
    source_url: str


class Provider:
    platform: str = ""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    # Inbound callbacks (provider → us) -------------------------------------------------------------------------------
    def verify_callback(self, headers: dict[str, str], body: bytes) -> None:
        """Raise `Unauthenticated` unless the callback is really from the provider (signature check)."""
        raise self._unsupported("inbound callbacks")

    def parse_callback(self, body: bytes) -> list[InboundMessage | StatusCallback]:
        raise self._unsupported("inbound callbacks")

    @classmethod
    def capabilities(cls) -> list[str]:
        return sorted(
            name for name, method in CAPABILITIES.items() if getattr(cls, method) is not getattr(Provider, method)
        )

    def _unsupported(self, what: str) -> UnsupportedByProvider:
        return UnsupportedByProvider(
            f"The {self.platform} provider does not support {what}.",
            details=[{"platform": self.platform, "operation": what}],
        )

    # Connection ------------------------------------------------------------------------------------------------------
    def connect(self) -> ConnectResult:
        raise self._unsupported("connect")

    def disconnect(self) -> None:
        """Every platform can be disconnected locally; adapters add the remote logout where there is one."""

    def status(self) -> str:
        return str(self.channel.get("status", "disconnected"))

    def qr(self) -> dict[str, Any]:
        raise self._unsupported("QR codes")

    def pairing_code(self, phone: str) -> dict[str, Any]:
        raise self._unsupported("pairing codes")

    # Messages --------------------------------------------------------------------------------------------------------
    def send(self, message: OutboundMessage) -> SendResult:
        raise self._unsupported("sending messages")

    def edit(self, provider_message_id: str, text: str) -> None:
        raise self._unsupported("editing messages")

    def delete(self, provider_message_id: str) -> None:
        raise self._unsupported("deleting messages")

    def react(self, provider_message_id: str, emoji: str) -> None:
        raise self._unsupported("reactions")

    def read(self, provider_message_id: str) -> None:
        raise self._unsupported("read receipts")

    def presence(self, to_phone: str, state: str) -> None:
        raise self._unsupported("presence")

    def download_media(self, media_id: str, message_id: str, payload: str) -> DownloadedMedia:
        raise self._unsupported("media download")

    # Account ---------------------------------------------------------------------------------------------------------
    def profile(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        raise self._unsupported("profiles")

    def privacy(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        raise self._unsupported("privacy settings")

    def lookup_contact(self, phone: str) -> dict[str, Any]:
        raise self._unsupported("contact lookups")

    def block(self, phone: str, blocked: bool) -> None:
        raise self._unsupported("blocking contacts")

    # Groups, newsletters, labels, templates ------------------------------------------------------------------------
    def groups(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise self._unsupported("groups")

    def newsletters(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise self._unsupported("newsletters")

    def labels(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise self._unsupported("labels")

    def templates(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise self._unsupported("templates")
