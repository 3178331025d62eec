"""The provider protocol every channel adapter implements.

An adapter overrides the operations its platform supports; every other operation raises the stable
`400 unsupported_by_provider`. `capabilities()` is derived from what the adapter overrides, so
`GET /v1/channels/{id}/capabilities` can never disagree with what the adapter actually does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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


class SendUncertain(Exception):
    """The provider may have accepted the message, but its answer was lost (timeout after the request left) or
    carried no message id. The message must never be handed to the provider again: it is marked `sent` with
    `uncertain: true` and reconciled from the provider's callbacks."""


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
    to_group: str | None = None  # a group's chat instead of `to_phone` (a WhatsApp JID, or Meta's Cloud group id)
    poll: dict[str, Any] | None = None  # {name, options, selectable_count} (0: any number of answers)


def contact_cards(message: OutboundMessage) -> list[tuple[str, str, str]]:
    """A contacts message's cards as (full name, phone digits, company), for engines that take a name and a number
    rather than Meta's contact object (the API's card: `name.formatted_name`, `phones[].wa_id | phone`, `org`)."""
    cards = message.contacts or (message.media or {}).get("contacts") or []
    out = []
    for card in cards:
        name = card["name"] if isinstance(card.get("name"), dict) else {}
        phones = [p for p in card.get("phones") or [] if isinstance(p, dict)]
        first = phones[0] if phones else {}
        number = "".join(ch for ch in str(first.get("wa_id") or first.get("phone") or "") if ch.isdigit())
        company = (card.get("org") or {}).get("company") if isinstance(card.get("org"), dict) else None
        out.append((str(name.get("formatted_name") or ""), number, str(company or "")))
    return out


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
    group_jid: str | None = None  # posted in this group (`…@g.us`); `from_phone` is then the participant
    # An echo: typed on the linked phone or another linked device (engines' `fromMe`, Meta's `smb_message_echoes`).
    # `from_phone` is then the chat's other party ("" in a group); stored as an outbound message `sent_by: device`.
    from_me: bool = False


@dataclass(frozen=True)
class StatusCallback:
    """A delivery status of one of our messages, as the provider reported it."""

    provider_message_id: str
    status: str  # sent | delivered | read | failed | played
    timestamp: str | None = None
    error: str | None = None
    to_phone: str | None = None  # the recipient, when the provider says (reconciles an uncertain send)


@dataclass(frozen=True)
class PaymentStatus:
    """The payment of one of our bills changed at the provider (Meta's `statuses[]` of `type: "payment"`): `status`
    is the order's payment status it means (`pending`, `captured`, `failed` or `refunded`), `reference_id` the
    `reference_id` of the bill's `order_details` message."""

    reference_id: str
    status: str
    provider_message_id: str | None = None
    transaction_id: str | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class SessionStatus:
    """The linked-device session changed state at the engine: `status` is the channel status it maps onto."""

    status: str  # disconnected | pairing | connected | error
    engine_status: str
    metadata: dict[str, Any] = field(default_factory=dict)
    event_at: int | None = None  # the engine's own time of the event, ms since the epoch (orders its callbacks)


@dataclass(frozen=True)
class GroupEvent:
    """A group changed at the provider: participants joined, left or changed role, its info changed, or the channel
    itself left it. Phones are digits; `kind` is `participants` (with `action` join | leave | promote | demote),
    `update` (name / description), `left`, or for providers that create groups asynchronously `created` /
    `create_failed` (with the `request_id` the create answered)."""

    jid: str
    kind: str
    action: str | None = None
    participants: tuple[str, ...] = ()
    name: str | None = None
    description: str | None = None
    request_id: str | None = None
    event_at: int | None = None  # the engine's own time of the event, ms since the epoch (orders its callbacks)


@dataclass(frozen=True)
class LabelEvent:
    """A chat gained or lost a label at the provider (labels are matched by name; the chat is a phone, digits)."""

    name: str
    chat_phone: str
    attach: bool
    event_at: int | None = None  # the engine's own time of the event, ms since the epoch (orders its callbacks)


@dataclass(frozen=True)
class LabelCatalogEvent:
    """A label was created, changed or deleted on the phone: `engine_label_id` is the engine's id for it on this
    channel; `color` is `#rrggbb` when the engine gave one."""

    engine_label_id: str
    name: str | None = None
    color: str | None = None
    deleted: bool = False
    event_at: int | None = None  # the engine's own time of the event, ms since the epoch (orders its callbacks)


@dataclass(frozen=True)
class MessageChange:
    """The customer reacted to, edited or revoked a message we already store. Engines name the target by a bare id
    or a serialized one, so `targets` lists the provider message ids it may be stored under (the first stored one is
    changed). `kind` is `reaction` (`text`: the emoji, empty removes it), `edit` (`text`: the new text), `revoke`, or
    `poll_vote` (`voter`: the voter's phone, `options`: the answers now chosen, none = vote withdrawn; `event_at`
    the engine's time of the vote, which orders one voter's votes), or `poll_state` (`ballots`: every voter's
    answers, the poll's whole state, ordered by `event_at` against earlier states)."""

    targets: tuple[str, ...]
    kind: str
    text: str | None = None
    timestamp: str | None = None
    voter: str | None = None
    options: tuple[str, ...] = ()
    event_at: int | None = None
    ballots: tuple[tuple[str, tuple[str, ...]], ...] = ()  # `poll_state`: every voter's answers (the whole state)


@dataclass(frozen=True)
class AcceptOnce:
    """A verified callback that must be accepted once: its id (a digest, unique per channel) and until when (epoch
    seconds) a second delivery of it is refused."""

    key: str
    until: int


CallbackEvent = (
    InboundMessage
    | StatusCallback
    | PaymentStatus
    | SessionStatus
    | GroupEvent
    | LabelEvent
    | LabelCatalogEvent
    | MessageChange
)


@dataclass(frozen=True)
class DownloadedMedia:
    """A downloaded file: its bytes in `data`, or `b""` when they went to the caller's sink."""

    data: bytes
    mime_type: str
    file_name: str
    source_url: str


class MediaSink(Protocol):
    """Where `download_media` writes a file's bytes as they arrive (the media service's S3 copy), so a large file is
    never held whole in memory."""

    def write(self, chunk: bytes) -> None: ...


class BufferSink:
    """A sink that keeps the bytes in memory: what `download_media` uses when its caller gives none."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        self._chunks.append(chunk)

    def getvalue(self) -> bytes:
        return b"".join(self._chunks)


def downloaded(
    sink: MediaSink, given: MediaSink | None, mime_type: str, file_name: str, source_url: str
) -> DownloadedMedia:
    """The result of a download written to `sink`: its bytes when the adapter made the sink itself (`given` None)."""
    data = sink.getvalue() if given is None and isinstance(sink, BufferSink) else b""
    return DownloadedMedia(data=data, mime_type=mime_type, file_name=file_name, source_url=source_url)


class Provider:
    platform: str = ""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    @classmethod
    def check_config(cls, config: dict[str, Any], *, local: bool) -> None:
        """Raise `ValidationFailed` (field `body.config.<key>`) when a channel may not store this config; `local` is
        the local stack's leniency (its fakes). Called at channel create and update."""

    # Inbound callbacks (provider → us) -------------------------------------------------------------------------------
    def verify_callback(self, headers: dict[str, str], body: bytes) -> AcceptOnce | None:
        """Raise `Unauthenticated` unless the callback is really from the provider (signature check). A provider
        whose signature does not cover the body (Evolution's JWT) answers the `AcceptOnce` the callback is
        remembered under, so the same token and body are not accepted twice."""
        raise self._unsupported("inbound callbacks")

    def parse_callback(self, body: bytes) -> Sequence[CallbackEvent]:
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
    message_types: frozenset[str] | None = None  # the message types the provider can send; None: not restricted
    interactive_types: frozenset[str] | None = None  # of `interactive` messages, the `type`s it can send; None: any

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

    def download_media(
        self,
        media_id: str,
        message_id: str,
        payload: str,
        sink: MediaSink | None = None,
        deadline: float | None = None,
    ) -> DownloadedMedia:
        """The media's bytes written to `sink` as they arrive (without one, kept in memory and answered in `data`),
        the whole download within `deadline` seconds."""
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
