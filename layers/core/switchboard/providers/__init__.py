"""Channel providers: one protocol, three adapters (sandbox, whatsapp_cloud, whatsapp_web)."""

from switchboard.providers.base import (
    CAPABILITIES,
    ConnectResult,
    OutboundMessage,
    Provider,
    ProviderRejected,
    ProviderUnavailable,
    SendResult,
)
from switchboard.providers.registry import PLATFORMS, provider_for

__all__ = [
    "CAPABILITIES",
    "PLATFORMS",
    "ConnectResult",
    "OutboundMessage",
    "Provider",
    "ProviderRejected",
    "ProviderUnavailable",
    "SendResult",
    "provider_for",
]
