"""Platform name → adapter class.

An adapter module is imported when a channel of its platform is first used: a function that serves sandbox channels
never loads the Graph API or linked-device adapters (nor their HTTP client helpers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module

from switchboard import sealed
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


def adapter_class(channel: Channel) -> type[Provider]:
    """The adapter class of the channel's platform (and, for `whatsapp_web`, of its `config.engine`): 400
    `validation_failed` for an unknown platform or engine."""
    platform = str(channel.get("platform"))
    if platform not in _ADAPTERS:
        raise ValidationFailed.field("platform", f"unknown platform {channel.get('platform')!r}")
    if platform == "whatsapp_web":  # one platform, several engines (config.engine)
        # on first use: keeps switchboard.providers.whatsapp_web off the cold start
        from switchboard.providers import whatsapp_web

        return whatsapp_web.adapter_class(channel)
    return PLATFORMS[platform]


def provider_for(channel: Channel) -> Provider:
    """The channel's adapter, given the channel with its config's sealed credentials opened (`switchboard.sealed`):
    the stored item keeps them sealed, the adapter uses them to call, sign and verify."""
    cls = adapter_class(channel)
    config = channel.get("config")
    if isinstance(config, dict) and sealed.has_sealed(config):
        channel = {**channel, "config": sealed.open_fields(config, str(channel.get("organization_id") or ""))}
    return cls(channel)
