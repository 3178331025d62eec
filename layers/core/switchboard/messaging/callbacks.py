"""Inbound traffic: the sandbox simulator and the providers' signed callbacks."""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.api.auth import AuthContext
from switchboard.contacts.identifiers import normalize_phone
from switchboard.errors import UnsupportedByProvider, ValidationFailed
from switchboard.ids import new_ulid
from switchboard.messaging import channels, cloud_webhook, messages, models
from switchboard.providers import provider_for
from switchboard.providers.base import InboundMessage, StatusCallback
from switchboard.store import Store


def sandbox_inbound(
    store: Store, auth: AuthContext, channel_id: str, body: models.SandboxInbound
) -> models.InboundAccepted:
    channel = channels.get_item(store, auth.org_id, channel_id)
    if channel["platform"] != "sandbox":
        raise UnsupportedByProvider("Simulated inbound messages exist on sandbox channels only.")
    inbound = InboundMessage(
        provider_message_id=f"sbx_in_{new_ulid().lower()}",
        from_phone=normalize_phone(body.from_phone, "body.from_phone"),
        type="text",
        text=body.text,
        contact_name=body.name,
        timestamp=clock.now_iso(),
    )
    return messages.receive(store, auth.org_id, channel, inbound)


def _channel(store: Store, channel_id: str) -> dict[str, Any]:
    pointer = store.require(channels.pointer_key(channel_id), "No such channel.")
    return channels.get_item(store, pointer["organization_id"], channel_id)


def subscription(store: Store, channel_id: str, params: dict[str, str]) -> str:
    channel = _channel(store, channel_id)
    adapter = provider_for(channel)
    verify = getattr(adapter, "verify_subscription", None)
    if verify is None:
        raise UnsupportedByProvider("This channel's provider has no subscription handshake.")
    return str(verify(params, str(getattr(adapter, "config", channel.get("config") or {}).get("verify_token") or "")))


def provider_callback(store: Store, channel_id: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """Verify the provider's signature, then store each inbound message once and apply each status."""
    channel = _channel(store, channel_id)
    if channel.get("platform") == cloud_webhook.PLATFORM:
        return cloud_webhook.receive(store, headers, body, default=channel)
    adapter = provider_for(channel)
    adapter.verify_callback(headers, body)
    received, statuses = 0, 0
    for event in adapter.parse_callback(body):
        if isinstance(event, InboundMessage):
            messages.receive(store, channel["organization_id"], channel, event)
            received += 1
        elif isinstance(event, StatusCallback):
            statuses += int(messages.status_callback(store, channel["organization_id"], channel, event))
        else:  # pragma: no cover - adapters only yield the two kinds
            raise ValidationFailed.field("body", "unknown callback event")
    return {"received": received, "statuses_applied": statuses}
