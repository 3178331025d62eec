"""Inbound traffic: the sandbox simulator and the providers' signed callbacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchboard import clock, ratelimit
from switchboard.access import AuthContext
from switchboard.config import get_settings
from switchboard.contacts.identifiers import normalize_phone, numbers_for
from switchboard.errors import Forbidden, NotFound, Unauthenticated, UnsupportedByProvider, ValidationFailed
from switchboard.identity import repository as identity_repository
from switchboard.ids import new_ulid
from switchboard.messaging import channels, cloud_webhook, messages, models
from switchboard.providers import Provider, provider_for
from switchboard.providers.base import (
    AcceptOnce,
    GroupEvent,
    InboundMessage,
    LabelCatalogEvent,
    LabelEvent,
    MessageChange,
    SessionStatus,
    StatusCallback,
)
from switchboard.store import Store, shards

Item = dict[str, Any]


def sandbox_inbound(
    store: Store, auth: AuthContext, channel_id: str, body: models.SandboxInbound
) -> models.InboundAccepted:
    if (body.text is None) == (body.order is None):
        raise ValidationFailed.field("body", "give exactly one of text or order")
    channel = channels.get_item(store, auth.org_id, channel_id)
    if channel["platform"] != "sandbox":
        raise UnsupportedByProvider("Simulated inbound messages exist on sandbox channels only.")
    if body.order is not None:
        if len({p.currency for p in body.order.product_items}) > 1:
            raise ValidationFailed.field("body.order.product_items", "the items of one order share one currency")
        kind, text = "order", body.order.text
        media = {
            "catalog_id": body.order.catalog_id,
            "product_items": [p.model_dump() for p in body.order.product_items],
        }
    else:
        kind, text, media = "text", body.text, None
    inbound = InboundMessage(
        provider_message_id=f"sbx_in_{new_ulid().lower()}",
        from_phone=normalize_phone(body.from_phone, "body.from_phone", numbers_for(store, auth.org_id)),
        type=kind,
        text=text,
        media=media,
        contact_name=body.name,
        timestamp=clock.now_iso(),
    )
    return messages.receive(store, auth.org_id, channel, inbound)


def _channel(store: Store, channel_id: str) -> dict[str, Any]:
    """The channel a provider calls about; an organization pending deletion has none (its callbacks store nothing)."""
    pointer = store.require(channels.pointer_key(channel_id), "No such channel.")
    if not identity_repository.organization_active(store, pointer["organization_id"]):
        raise NotFound("No such channel.")
    return channels.get_item(store, pointer["organization_id"], channel_id)


def _budget(store: Store, channel_id: str, *, verified: bool) -> None:
    """A channel's callbacks have two budgets per minute, counted apart: verified ones
    (`callbacks_per_channel_per_minute`) and refused ones (`callback_failures_per_channel_per_minute`), so a flood
    of unsigned or wrongly signed requests never spends what the channel's real engine needs. 429 once spent."""
    settings = get_settings()
    if verified:
        ratelimit.hit(
            store, f"callback:{channel_id}", limit=settings.callbacks_per_channel_per_minute, window_seconds=60
        )
    else:
        limit = settings.callback_failures_per_channel_per_minute
        ratelimit.hit(store, f"callback-refused:{channel_id}", limit=limit, window_seconds=60)


def _verified[T](store: Store, channel_id: str, check: Callable[[], T]) -> T:
    """`check()` (the provider's signature or token check), counted against the channel's budget of verified
    callbacks when it passes, of refused ones when it raises (then 429 if that budget is spent, else its error)."""
    try:
        result = check()
    except (Unauthenticated, Forbidden, ValidationFailed):
        _budget(store, channel_id, verified=False)
        raise
    _budget(store, channel_id, verified=True)
    return result


def subscription(store: Store, channel_id: str, params: dict[str, str]) -> str:
    channel = _channel(store, channel_id)
    adapter = provider_for(channel)
    verify = getattr(adapter, "verify_subscription", None)
    if verify is None:
        raise UnsupportedByProvider("This channel's provider has no subscription handshake.")
    token = (adapter.channel.get("config") or {}).get("verify_token", "")
    return str(_verified(store, channel_id, lambda: verify(params, token)))


def _accept_once(store: Store, channel: Item, once: AcceptOnce) -> dict[str, str]:
    """Remember a callback the provider's signature does not bind to its body (`AcceptOnce`): the same one again is
    a replay, 401 and nothing stored. The marker lives in the channel's organization (a write shard of it) until
    the token's end."""
    org = str(channel["organization_id"])
    marker = {"PK": shards.pk(org, once.key), "SK": f"CBONCE#{channel['id']}#{once.key}"}
    store.put(
        {**marker, "entity": "CallbackOnce", "ttl": once.until},
        condition="attribute_not_exists(PK)",
        error=Unauthenticated("This callback was already received (a replayed token and body)."),
    )
    return marker


def provider_callback(store: Store, channel_id: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """Verify the provider's signature, then store each inbound message once, apply each status, and follow the
    engine's session, group and chat-label events."""
    channel = _channel(store, channel_id)
    if channel.get("platform") == cloud_webhook.PLATFORM:
        routed = _verified(store, channel_id, lambda: cloud_webhook.route(store, headers, body, default=channel))
        return cloud_webhook.enqueue(store, routed)
    adapter = provider_for(channel)
    once = _verified(store, channel_id, lambda: adapter.verify_callback(headers, body))
    marker = _accept_once(store, channel, once) if once is not None else None
    try:
        return _apply(store, channel, adapter, body)
    except Exception:
        if marker is not None:  # not processed: the provider's retry of it must be accepted
            store.delete(marker)
        raise


def _apply(store: Store, channel: Item, adapter: Provider, body: bytes) -> dict[str, Any]:
    received, statuses = 0, 0
    for event in adapter.parse_callback(body):
        if isinstance(event, InboundMessage):
            messages.receive(store, channel["organization_id"], channel, event)
            received += 1
        elif isinstance(event, StatusCallback):
            statuses += int(messages.status_callback(store, channel["organization_id"], channel, event))
        elif isinstance(event, SessionStatus):  # the linked-device session moved: the channel follows
            channel = channels.record_session_status(store, channel, event)
        elif isinstance(event, GroupEvent):  # a group changed at the provider: its record follows
            # on first use: keeps switchboard.groups.service off the cold start
            from switchboard.groups import service as groups

            groups.apply_event(store, channel, event)
        elif isinstance(event, LabelEvent):  # a chat label set on the phone: the conversation's labels follow
            # on first use: keeps switchboard.catalog.labels off the cold start
            from switchboard.catalog import labels

            labels.apply_engine_chat_label(
                store, channel, event.name, event.chat_phone, attach=event.attach, event_at=event.event_at
            )
        elif isinstance(event, LabelCatalogEvent):  # a label made, changed or deleted on the phone
            # on first use: keeps switchboard.catalog.labels off the cold start
            from switchboard.catalog import labels

            labels.apply_engine_label(
                store,
                channel,
                event.engine_label_id,
                event.name,
                event.color,
                deleted=event.deleted,
                event_at=event.event_at,
            )
        elif isinstance(event, MessageChange):  # the customer reacted to, edited or revoked a stored message
            messages.apply_change(store, channel["organization_id"], channel, event)
        else:  # pragma: no cover - adapters yield only the kinds above
            raise ValidationFailed.field("body", "unknown callback event")
    return {"received": received, "statuses_applied": statuses}
