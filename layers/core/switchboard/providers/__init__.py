"""Channel providers: one protocol, three adapters (sandbox, whatsapp_cloud, whatsapp_web).

The adapters (`PLATFORMS`, `provider_for`) are imported on first use: every API function imports this package for
`ProviderUnavailable` (the resolver answers it with 503), and most of them never talk to a provider.
"""

from typing import TYPE_CHECKING, Any

from switchboard.providers.base import (
    CAPABILITIES,
    ConnectResult,
    OutboundMessage,
    Provider,
    ProviderRejected,
    ProviderUnavailable,
    SendResult,
)

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name in ("PLATFORMS", "provider_for"):
        from switchboard.providers import registry  # on first use: the adapters stay off the cold start (see above)

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
