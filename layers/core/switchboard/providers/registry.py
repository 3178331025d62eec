"""Platform name → adapter class.

An adapter module is imported when a channel of its platform is first used: a function that serves sandbox channels
never loads the Graph API or linked-device adapters (nor their HTTP client helpers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from switchboard.errors import ValidationFailed
from switchboard.providers.base import Channel, Provider

_ADAPTERS = {
    "sandbox": ("switchboard.providers.sandbox", "SandboxProvider"),
    "whatsapp_cloud": ("switchboard.providers.whatsapp_cloud", "WhatsAppCloudProvider"),
    "whatsapp_web": ("switchboard.providers.waha", "WahaProvider"),  # the default engine; see provider_for
}


class _Platforms(Mapping[str, type[Provider]]):
    """A read-only `dict[str, type[Provider]]` whose classes are imported on first access."""

    def __getitem__(self, name: str) -> type[Provider]:
        module, attr = _ADAPTERS[name]
        cls: type[Provider] = getattr(import_module(module), attr)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(_ADAPTERS)

    def __len__(self) -> int:
        return len(_ADAPTERS)


PLATFORMS: Mapping[str, type[Provider]] = _Platforms()


def provider_for(channel: Channel) -> Provider:
    platform = str(channel.get("platform"))
    if platform not in _ADAPTERS:
        raise ValidationFailed.field("platform", f"unknown platform {channel.get('platform')!r}")
    if platform == "whatsapp_web":  # one platform, several engines (config.engine)
        from switchboard.providers.whatsapp_web import adapter_class

        return adapter_class(channel)(channel)
    return PLATFORMS[platform](channel)
