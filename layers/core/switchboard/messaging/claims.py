"""The platform-wide claim of a `whatsapp_cloud` phone number and the verify-token index (the items are described
in `switchboard.messaging.cloud_webhook`): the writes a channel's own create, update and delete transactions carry,
and the onboarding flow's token row."""

from __future__ import annotations

import hashlib
from typing import Any

from switchboard import clock
from switchboard.errors import Conflict
from switchboard.store import Delete, Put, TxOp, keys

Item = dict[str, Any]
PLATFORM = "whatsapp_cloud"


def claim_key(phone_number_id: str) -> dict[str, str]:
    return keys.key(f"WAPHONE#{phone_number_id}", "WAPHONE")


def token_pk(token: str) -> str:
    return f"WAVERIFY#{hashlib.sha256(token.encode()).hexdigest()}"


def verify_key(token: str, channel_id: str) -> dict[str, str]:
    return keys.key(token_pk(token), f"CHANNEL#{channel_id}")


def opened_config(channel: Item | None) -> dict[str, Any]:
    """The channel's config with sealed values opened, read through the adapter (the one accessor of its secrets)."""
    if not channel or channel.get("platform") != PLATFORM:
        return {}
    # on first use: keeps switchboard.providers.whatsapp_cloud off the cold start
    from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider

    return WhatsAppCloudProvider(channel).config


def config_text(config: dict[str, Any], key: str) -> str:
    value = config.get(key)
    return value.strip() if isinstance(value, str) else ""


def claim_ops(old: Item | None, new: Item | None) -> list[TxOp]:
    """The claim and index writes that move a channel from `old` to `new` (None: created / deleted), to be put in
    the channel's own transaction."""
    before, after = opened_config(old), opened_config(new)
    channel = new or old or {}
    channel_id, org = str(channel.get("id") or ""), str(channel.get("organization_id") or "")
    ops: list[TxOp] = []
    old_number, new_number = config_text(before, "phone_number_id"), config_text(after, "phone_number_id")
    if old_number != new_number:
        if old_number:
            ops.append(
                Delete(
                    key=claim_key(old_number),
                    condition="attribute_not_exists(PK) OR channel_id = :c",
                    values={":c": channel_id},
                )
            )
        if new_number:
            ops.append(
                Put(
                    item={
                        **claim_key(new_number),
                        "entity": "WhatsAppNumberClaim",
                        "organization_id": org,
                        "channel_id": channel_id,
                    },
                    condition="attribute_not_exists(PK)",
                    error=Conflict(
                        "This phone_number_id already belongs to a channel.",
                        details=[{"field": "body.config.phone_number_id", "phone_number_id": new_number}],
                    ),
                )
            )
    old_token, new_token = config_text(before, "verify_token"), config_text(after, "verify_token")
    if old_token != new_token:
        if old_token:
            ops.append(Delete(key=verify_key(old_token, channel_id)))
        if new_token:
            ops.append(
                Put(item={**verify_key(new_token, channel_id), "entity": "WhatsAppVerifyToken", "organization_id": org})
            )
    return ops


def flow_token_put(org: str, progress_id: str, token: str) -> Put:
    """The index row of an onboarding flow's verify token (Meta checks the callback while the flow subscribes,
    before the channel exists); it expires with the flow."""
    return Put(
        item={
            **keys.key(token_pk(token), f"WABAFLOW#{progress_id}"),
            "entity": "WhatsAppVerifyToken",
            "organization_id": org,
            "ttl": clock.epoch(clock.now()) + 7 * 86400,
        }
    )
