"""Platform name → adapter class."""

from __future__ import annotations

from switchboard.errors import ValidationFailed
from switchboard.providers.base import Channel, Provider
from switchboard.providers.sandbox import SandboxProvider
from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider
from switchboard.providers.whatsapp_web import WhatsAppWebProvider

PLATFORMS: dict[str, type[Provider]] = {
    "sandbox": SandboxProvider,
    "whatsapp_cloud": WhatsAppCloudProvider,
    "whatsapp_web": WhatsAppWebProvider,
}


def provider_for(channel: Channel) -> Provider:
    cls = PLATFORMS.get(str(channel.get("platform")))
    if cls is None:
        raise ValidationFailed.field("platform", f"unknown platform {channel.get('platform')!r}")
    return cls(channel)
