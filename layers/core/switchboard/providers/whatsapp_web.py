"""WhatsApp linked-device channels (`whatsapp_web`): what the engine adapters share.

A `whatsapp_web` channel is driven by a real linked-device engine, unchanged (CONVENTIONS "Real channel engines"):
`config.engine` is `waha` (WAHA, "WhatsApp HTTP API", devlikeapro/waha; the default) or `evolution` (Evolution API,
EvolutionAPI/evolution-api); `config.base_url` and `config.api_key` reach it, `config.session` names WAHA's session or
Evolution's instance (default: the channel id). Each engine's adapter speaks that engine's published HTTP API
(`switchboard.providers.waha`, `switchboard.providers.evolution`).

Callbacks: on `connect` the adapter points the engine's webhook at
`<PUBLIC_BASE_URL>/v1/providers/{channel_id}/callback` with a per-channel secret. The secret is never stored: it is
an HMAC of the channel id and the channel's `callback_key_generation` under the platform secret
(`switchboard.platform_secret`). A reconnect that reaches the engine (`reconnect` of a channel that is not connected,
`reconnect/force`) moves the channel to a new generation, so the engine is handed a new key and the old one stops
working (rotation). A callback signed with the secret derived from the platform secret's previous version still
verifies after a rotation of that secret; a `reconnect/force` gives the engine the new one, and must be done before
the next rotation.

A send whose engine answer is lost after the request left (read timeout, dropped connection) or carries no message id
raises `SendUncertain`: the message is then never handed to the engine again, and the engine's callbacks reconcile it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import import_module
from typing import Any

from switchboard import clock, platform_secret
from switchboard.config import get_settings
from switchboard.errors import Unauthenticated, ValidationFailed
from switchboard.providers.base import Channel, Provider, ProviderRejected
from switchboard.providers.http import DEFAULT_TIMEOUT, HttpApi, segment

ENGINES = {
    "waha": ("switchboard.providers.waha", "WahaProvider"),
    "evolution": ("switchboard.providers.evolution", "EvolutionProvider"),
}
DEFAULT_ENGINE = "waha"
USER_SUFFIXES = ("@s.whatsapp.net", "@c.us")
# WhatsApp's label palette by index: WAHA's src/structures/labels.dto.ts `Colors`; Baileys' Label `color` is the index
LABEL_COLORS = ["#ff9485", "#64c4ff", "#ffd429", "#dfaef0", "#99b6c1", "#55ccb3", "#ff9dff", "#d3a91d", "#6d7cce",
                "#d7e752", "#00d0e2", "#ffc5c7", "#93ceac", "#f74848", "#00a0f2", "#83e422", "#ffaf04", "#b5ebff",
                "#9ba6ff", "#9368cf"]  # fmt: skip


def engine_of(channel: Channel) -> str:
    """The channel's engine name; an unknown one is 400 `validation_failed` on `body.config.engine`."""
    value = (channel.get("config") or {}).get("engine") or DEFAULT_ENGINE
    if value not in ENGINES:
        raise ValidationFailed.field("body.config.engine", f"must be one of {', '.join(sorted(ENGINES))}")
    return str(value)


def adapter_class(channel: Channel) -> type[Provider]:
    module, attr = ENGINES[engine_of(channel)]
    cls: type[Provider] = getattr(import_module(module), attr)
    return cls


def digits(value: Any) -> str:
    return "".join(ch for ch in str(value or "") if ch.isdigit())


def phone_of(jid: Any) -> str | None:
    """Digits of a person's chat id (`<phone>[:device]@c.us` or `@s.whatsapp.net`); None for groups, broadcasts,
    newsletters and anonymised `@lid` ids."""
    value = str(jid or "")
    for suffix in USER_SUFFIXES:
        if value.endswith(suffix):
            user = value.removesuffix(suffix).split(":", 1)[0]
            return user if user.isdigit() else None
    return value if value.isdigit() else None


def iso(epoch: Any) -> str | None:
    try:
        seconds = float(epoch)
        if seconds > 1e11:  # milliseconds
            seconds /= 1000
        return clock.iso(datetime.fromtimestamp(seconds, UTC))
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def event_ms(value: Any) -> int | None:
    """An engine's event time as ms since the epoch: WAHA's `timestamp` (ms; seconds accepted) or Evolution's
    `date_time` (ISO 8601, the engine's local time written as if UTC: comparable between one engine's events, which
    is all it orders). None when absent or unreadable (such an event is applied in arrival order)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return int(number if number > 1e11 else number * 1000) if number > 0 else None
    if isinstance(value, str) and value.strip():
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    return None


def obj(value: Any) -> dict[str, Any]:
    """The value when it is a JSON object, else an empty one (engine payloads are not trusted to be well formed)."""
    return value if isinstance(value, dict) else {}


def header(headers: dict[str, str], name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return value
    return None


def _callback_secret(key: bytes, channel_id: str, generation: int = 0) -> str:
    label = f"whatsapp_web.callback:{channel_id}" + (f":{generation}" if generation else "")
    return hmac.new(key, label.encode(), hashlib.sha256).hexdigest()


def key_generation(channel: Channel) -> int:
    return int(channel.get("callback_key_generation") or 0)


def callback_secret(channel_id: str, generation: int = 0) -> str:
    """The channel's webhook secret of a key generation: derived, never stored (HMAC-SHA256 of the channel id and the
    generation under the platform secret's current version; generation 0 is the channel's first key)."""
    return _callback_secret(platform_secret.current(), channel_id, generation)


def callback_secrets(channel_id: str, generation: int = 0) -> Iterator[str]:
    """The secrets a callback may be signed with: the current one, then those of the platform secret's previous
    version (`platform_secret.candidates`), each derived only when the one before did not fit."""
    for key in platform_secret.candidates():
        yield _callback_secret(key, channel_id, generation)


def verified_with_any[T](secrets: Iterator[str], check: Callable[[str], T]) -> T:
    """`check(secret)` for the first secret it accepts (it raises `Unauthenticated` otherwise); none: the first
    secret's error."""
    first: Unauthenticated | None = None
    for secret in secrets:
        try:
            return check(secret)
        except Unauthenticated as err:
            first = first or err
    raise first or Unauthenticated("The callback is not signed with this channel's secret.")


def callback_url(channel_id: str) -> str:
    base = (get_settings().public_base_url or "").rstrip("/")
    if not base:
        raise ProviderRejected(
            "The stack has no public base URL (PUBLIC_BASE_URL), so the engine's webhook cannot be configured."
        )
    return f"{base}/v1/providers/{segment(channel_id)}/callback"


class LinkedDeviceProvider(Provider):
    """The parts both engines share: config, session name, callback secret, the never-twice send request."""

    platform = "whatsapp_web"
    engine = ""
    provider_name = "linked-device engine"

    def __init__(self, channel: Channel) -> None:
        super().__init__(channel)
        self.config: dict[str, Any] = dict(channel.get("config") or {})
        self.timeout = DEFAULT_TIMEOUT

    def setting(self, key: str) -> str:
        value = self.config.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ProviderRejected(f"config.{key} is required for a whatsapp_web channel.")
        return value.strip()

    @property
    def session(self) -> str:
        return str(self.config.get("session") or self.channel.get("id") or "default")

    @property
    def secret(self) -> str:
        return callback_secret(str(self.channel.get("id")), key_generation(self.channel))

    def verified[T](self, check: Callable[[str], T]) -> T:
        """`check` under the channel's webhook secret, or the previous platform secret's during a rotation."""
        return verified_with_any(callback_secrets(str(self.channel.get("id")), key_generation(self.channel)), check)

    def api(self) -> HttpApi:  # pragma: no cover - each engine builds its own
        raise NotImplementedError

    def send_request(self, path: str, body: dict[str, Any]) -> Any:
        """POST a send. Failures before the request left (refused, connect timeout) and 429/5xx answers are
        `ProviderUnavailable` (safe to retry); an answer lost after the request left is `SendUncertain`."""
        reply = self.api().request("POST", path, json_body=body, delivers=True)
        return reply.json() if reply.content.strip() else None
