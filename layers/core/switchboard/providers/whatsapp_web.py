"""WhatsApp linked-device channels (`whatsapp_web`): what the engine adapters share.

A `whatsapp_web` channel is driven by a real linked-device engine, unchanged (CONVENTIONS "Real channel engines"):
`config.engine` is `waha` (WAHA, "WhatsApp HTTP API", devlikeapro/waha; the default) or `evolution` (Evolution API,
EvolutionAPI/evolution-api); `config.base_url` and `config.api_key` reach it, `config.session` names WAHA's session or
Evolution's instance (default: the channel id). Each engine's adapter speaks that engine's published HTTP API
(`switchboard.providers.waha`, `switchboard.providers.evolution`).

Callbacks: on `connect` the adapter points the engine's webhook at
`<PUBLIC_BASE_URL>/v1/providers/{channel_id}/callback` with a per-channel secret. The secret is never stored: it is
an HMAC of the channel id and the channel's `callback_key_generation` under the server secret (`CURSOR_SECRET`).
A reconnect that reaches the engine (`reconnect` of a channel that is not connected, `reconnect/force`) moves the
channel to a new generation, so the engine is handed a new key and the old one stops working (rotation); rotating
`CURSOR_SECRET` needs a `reconnect/force` of each linked-device channel.

A send whose engine answer is lost after the request left (read timeout, dropped connection) or carries no message id
raises `SendUncertain`: the message is then never handed to the engine again, and the engine's callbacks reconcile it.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from importlib import import_module
from typing import Any

from switchboard import clock
from switchboard.config import get_settings
from switchboard.errors import ValidationFailed
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


def callback_secret(channel_id: str, generation: int = 0) -> str:
    """The channel's webhook secret of a key generation: derived, never stored (HMAC-SHA256 of the channel id and the
    generation under the server secret; generation 0 is the channel's first key)."""
    key = get_settings().cursor_secret.get_secret_value().encode()
    label = f"whatsapp_web.callback:{channel_id}" + (f":{generation}" if generation else "")
    return hmac.new(key, label.encode(), hashlib.sha256).hexdigest()


def key_generation(channel: Channel) -> int:
    return int(channel.get("callback_key_generation") or 0)


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

    def api(self) -> HttpApi:  # pragma: no cover - each engine builds its own
        raise NotImplementedError

    def send_request(self, path: str, body: dict[str, Any]) -> Any:
        """POST a send. Failures before the request left (refused, connect timeout) and 429/5xx answers are
        `ProviderUnavailable` (safe to retry); an answer lost after the request left is `SendUncertain`."""
        reply = self.api().request("POST", path, json_body=body, delivers=True)
        return reply.json() if reply.content.strip() else None
