"""Messages: sending (queued through the outbox), the sender's provider call, sandbox status timers, inbound
messages and provider status callbacks."""

from __future__ import annotations

import contextlib
import json
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from switchboard import aws, clock, ratelimit
from switchboard import media as s3_media
from switchboard.access import AuthContext
from switchboard.billing.usage import usage_record_put
from switchboard.commerce import orders
from switchboard.config import get_settings
from switchboard.contacts import children
from switchboard.contacts import service as contacts
from switchboard.contacts.identifiers import TRUSTED, Identifier, normalize_phone, numbers_for
from switchboard.errors import (
    Conflict,
    DomainError,
    NotFound,
    ServiceUnavailable,
    UnsupportedByProvider,
    ValidationFailed,
)
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_message_id
from switchboard.messaging import channels, conversations, models, status
from switchboard.providers import OutboundMessage, ProviderRejected, provider_for
from switchboard.providers.base import InboundMessage, MessageChange, SendUncertain, StatusCallback
from switchboard.store import Delete, Put, Store, TxOp, Update, keys, shards

if TYPE_CHECKING:
    from switchboard.contacts import models as contact_models
else:  # loaded by the first send to a number (contact upsert), not at the messaging function's init
    from switchboard.lazy import lazy_module

    contact_models = lazy_module("switchboard.contacts.models")

Item = dict[str, Any]
CHANNEL_KIND = "whatsapp"  # every platform here is a WhatsApp flavour: consent and suppressions use this kind
WINDOW = timedelta(hours=24)
SENDS_PER_MINUTE = 600


def system_auth(org: str) -> AuthContext:
    return AuthContext("system", "system", None, org, "owner", "system")


def provider_key(org: str, channel_id: str, provider_message_id: str) -> dict[str, str]:
    """Where a new pointer is written: the shard of `<channel>#<provider id>`."""
    return keys.key(shards.pk(org, f"{channel_id}#{provider_message_id}"), f"PMSG#{channel_id}#{provider_message_id}")


def get_pointer(store: Store, org: str, channel_id: str, provider_message_id: str) -> Item | None:
    """The provider-id pointer wherever it is (its shard, an earlier count's or the legacy partition): one
    BatchGetItem, as an inbound message's lookup usually finds none."""
    pid = f"{channel_id}#{provider_message_id}"
    return shards.get(store, org, pid, f"PMSG#{pid}", consistent=True, often_absent=True)


def provider_sentinel(
    org: str, channel_id: str, provider_message_id: str, message_id: str, *, unique: Conflict | None = None
) -> Put:
    """The provider's message id → ours (dedupes inbound callbacks, routes status callbacks); with `unique`, written
    only if absent (`unique` is the error when it exists)."""
    return Put(
        item={
            **provider_key(org, channel_id, provider_message_id),
            "entity": "ProviderMessage",
            "message_id": message_id,
        },
        condition="attribute_not_exists(PK)" if unique else None,
        error=unique,
    )


def get_item(store: Store, org: str, message_id: str, *, consistent: bool = False) -> Item:
    item = status.get_message(store, org, message_id, consistent=consistent)
    if item is None:
        raise NotFound("No such message.")
    return item


def view(item: Item) -> models.Message:
    return models.Message.model_validate(item)


def _content(body: models.SendMessage) -> tuple[str | None, dict[str, Any] | None, str]:
    """(text, media/template/location payload, preview) — and the type's required part is present."""
    if body.type == "text":
        if not body.text:
            raise ValidationFailed.field("body.text", "is required for text messages")
        return body.text.body, ({"preview_url": True} if body.text.preview_url else None), body.text.body
    if body.type == "interactive":
        if not body.interactive or not isinstance(body.interactive.get("type"), str):
            raise ValidationFailed.field("body.interactive", "is required for interactive messages, with its type")
        text = (
            (body.interactive.get("body") or {}).get("text") if isinstance(body.interactive.get("body"), dict) else None
        )
        return text, {"interactive": body.interactive}, text or f"[interactive {body.interactive['type']}]"
    if body.type == "poll":
        if not body.poll:
            raise ValidationFailed.field("body.poll", "is required for poll messages")
        return body.poll.name, {"poll": body.poll.model_dump()}, f"[poll] {body.poll.name}"
    if body.type == "contacts":
        if not body.contacts:
            raise ValidationFailed.field("body.contacts", "is required for contacts messages")
        return None, {"contacts": body.contacts}, "[contacts]"
    if body.type == "template":
        if not body.template:
            raise ValidationFailed.field("body.template", "is required for template messages")
        return None, {"template": body.template.model_dump()}, f"[template {body.template.name}]"
    if body.type == "location":
        if not body.location:
            raise ValidationFailed.field("body.location", "is required for location messages")
        return None, {"location": body.location.model_dump()}, "[location]"
    if not body.media or not (body.media.url or body.media.id or body.media.asset_id):
        raise ValidationFailed.field("body.media", f"a url, id or asset_id is required for {body.type} messages")
    if body.media.url and not get_settings().is_local:
        # on first use: keeps switchboard.netguard (ssl, certifi) off the cold start
        from switchboard import netguard

        # the engine or Meta fetches it: a webhook URL's rule (https, public addresses only), outside the local stack
        netguard.require_safe_url(body.media.url, "body.media.url", allow_local=False)
    return body.media.caption, {"media": body.media.model_dump(exclude_none=True)}, f"[{body.type}]"


def _recipient(store: Store, auth: AuthContext, body: models.SendMessage, contact_id: str | None) -> tuple[Item, str]:
    """The contact (`contact_id`, or created on first contact from `to`) and the number to send to."""
    if contact_id:
        contact = contacts.get_item(store, auth.org_id, contact_id)
        phone = contact.get("phone") or next(
            (i["value"] for i in contact.get("identities", []) if Identifier(i["type"], i["value"]).space == "phone"),
            None,
        )
        if not phone:
            raise ValidationFailed.field("body.contact_id", "the contact has no phone or WhatsApp identity")
        return contact, phone
    phone = normalize_phone(body.to or "", "body.to", numbers_for(store, auth.org_id))
    contact, _ = contacts.upsert_identity(store, auth, Identifier("phone", phone))
    return contact, phone


def _target(store: Store, org: str, channel_id: str, body: models.SendMessage) -> tuple[Item | None, str | None]:
    """The group conversation a send names (`group_id`, or a `conversation_id` of a group; created for a group we
    hold and have not heard from yet), else the contact id of a 1:1 send (`contact_id`, or a `conversation_id`'s
    contact). Exactly one recipient field (400 otherwise); the conversation or group must be the channel's."""
    given = [n for n in ("to", "contact_id", "conversation_id", "group_id") if getattr(body, n) is not None]
    if len(given) != 1:
        raise ValidationFailed.field("body", "give exactly one of to, contact_id, conversation_id or group_id")
    if body.conversation_id:
        conv = conversations.get_item(store, org, body.conversation_id, consistent=True)
        if conv["channel_id"] != channel_id:
            raise ValidationFailed.field("body.conversation_id", "the conversation is not on this channel")
        return (None, conv["contact_id"]) if not conv.get("group_jid") else (conv, None)
    if body.group_id:
        # on first use: keeps switchboard.groups off the cold start of a plain send
        from switchboard.groups.common import resolve

        group = resolve(store, org, body.group_id, channel_id)
        if not group.get("jid"):
            raise Conflict("The group is not created on WhatsApp yet.", code="group_pending")
        return conversations.get_or_create(store, org, channel_id, "", group_jid=group["jid"]), None
    return None, body.contact_id


def _recipient_state(store: Store, org: str, channel_id: str, contact_id: str) -> dict[str, Item]:
    """Conversation key, suppression and consent of the recipient in one BatchGetItem."""
    wanted = {
        "conversation": conversations.pair_key(org, channel_id, contact_id),
        "suppression": keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#SUPP#{CHANNEL_KIND}"),
        "consent": keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#CONSENT#{CHANNEL_KIND}"),
    }
    by_sk = {i["SK"]: i for i in store.batch_get(list(wanted.values()), consistent=True)}
    return {name: by_sk[key["SK"]] for name, key in wanted.items() if key["SK"] in by_sk}


def _check_recipient(contact: Item, state: dict[str, Item], conv: Item | None, reply: bool) -> None:
    if contact.get("blocked"):
        raise Conflict("The recipient is blocked.", code="recipient_blocked")
    last_inbound = clock.parse_stored(conv.get("last_inbound_at"), "last_inbound_at") if reply and conv else None
    in_window = bool(last_inbound and clock.now() - last_inbound < WINDOW)
    supp = state.get("suppression")
    if supp and children.suppression_active(supp) and not in_window:
        raise Conflict(f"The recipient is suppressed on {CHANNEL_KIND}: {supp['reason']}.", code="recipient_suppressed")
    consent = state.get("consent")
    if consent and consent.get("status") == "opted_out" and not in_window:
        raise Conflict(f"The recipient opted out of {CHANNEL_KIND} messages.", code="recipient_opted_out")


ENGINE_ONLY_TYPES = frozenset({"poll"})  # only adapters that list them in `message_types` can send these


def _check_type(channel: Item, kind: str, interactive: dict[str, Any] | None = None) -> None:
    adapter = provider_for(channel)
    types = adapter.message_types
    if kind == "interactive" and interactive and adapter.interactive_types is not None:
        shape = str(interactive.get("type"))
        if shape not in adapter.interactive_types:
            raise UnsupportedByProvider(
                f"The channel's engine cannot send interactive {shape} messages.",
                details=[{"platform": channel["platform"], "operation": f"send interactive {shape}"}],
            )
    if (types is None and kind in ENGINE_ONLY_TYPES) or (types is not None and kind not in types):
        raise UnsupportedByProvider(
            f"The channel's engine cannot send {kind} messages.",
            details=[{"platform": channel["platform"], "operation": f"send {kind}"}],
        )


def send(store: Store, auth: AuthContext, body: models.SendMessage) -> models.Message:
    """Accept a message for sending: stored `pending`, queued through the outbox (→ message_sender), 202."""
    org = auth.org_id
    text, payload, preview = _content(body)
    # Meta's order_details / order_status objects are checked (400) and make or move their order with the message
    order_message = orders.parse_interactive(body.interactive) if body.type == "interactive" else None
    if order_message is not None:
        payload = {"interactive": order_message.interactive}
    channel = channels.get_item(store, org, body.channel_id)
    if body.type == "template" and body.template:  # an approved template of this channel, with its parameters
        # on first use: keeps switchboard.catalog.templates off the cold start
        from switchboard.catalog.templates import validate_template_message

        validate_template_message(store, org, channel["id"], body.template)
    if channel["platform"] == "whatsapp_web" or body.type in ENGINE_ONLY_TYPES:  # refused before it is queued
        _check_type(channel, body.type, body.interactive)
    if channel["status"] != "connected" or not channel.get("is_active", True):
        raise Conflict("The channel is not connected.", details=[{"channel_status": channel["status"]}])
    ratelimit.hit_spread(store, f"send:{org}", limit=SENDS_PER_MINUTE, window_seconds=60, shards=shards.count())
    group_conv, contact_id = _target(store, org, channel["id"], body)
    contact: Item | None = None
    phone: str | None = None
    if group_conv is not None:  # the group's chat: no contact, no 1:1 consent or suppression
        conv = group_conv
    else:
        contact, phone = _recipient(store, auth, body, contact_id)
        state = _recipient_state(store, org, channel["id"], contact["id"])
        if contact.get("blocked"):
            _check_recipient(contact, state, None, reply=False)
        conv = conversations.get_or_create(store, org, channel["id"], contact["id"], state.get("conversation", {}))
        _check_recipient(contact, state, conv, reply=bool(body.reply_to))
    moment, message_id = clock.now(), new_message_id()
    now = clock.iso(moment)  # the message, its first status and its event share one time
    item: Item = {
        **status.message_key(org, message_id),
        "entity": "Message",
        "id": message_id,
        "organization_id": org,
        "channel_id": channel["id"],
        "conversation_id": conv["id"],
        "contact_id": contact["id"] if contact else None,
        "direction": "outbound",
        "to_phone": phone,
        "from_phone": channel.get("phone_number"),
        "type": body.type,
        "text": text,
        "media": payload,
        "reply_to": body.reply_to,
        "status": "pending",
        "provider_message_id": None,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
        "sent_by": auth.principal_id,
        "GSI2PK": conversations.messages_pk(org, conv["id"]),
        "GSI2SK": message_id,
    }
    if group_conv is not None:
        item["group_jid"] = group_conv["group_jid"]
    if order_message is not None and contact is None:
        raise ValidationFailed.field("body.interactive", "an order message goes to a contact, not a group")
    order_ops = (
        orders.outbound_ops(store, org, channel["id"], contact["id"], conv["id"], message_id, order_message, moment)
        if order_message is not None and contact is not None
        else []
    )
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            *conversations.touch_ops(org, conv, at=now, preview=preview, inbound=False, occurred=moment),
            status.history_put(org, message_id, "pending", True, None, at=now),
            outbox_put(
                org,
                "message.queued",
                {"message_id": message_id, "organization_id": org, "channel_id": channel["id"]},
                occurred=moment,
            ),
            *order_ops,
        ]
    )
    return view(item)


def get(store: Store, auth: AuthContext, message_id: str) -> models.Message:
    return view(get_item(store, auth.org_id, message_id))


def status_of(store: Store, auth: AuthContext, message_id: str) -> models.MessageStatus:
    item = get_item(store, auth.org_id, message_id)
    # the rows are in the message's partition; a legacy message's later rows are in its shard
    pks = dict.fromkeys([item["PK"], shards.pk(auth.org_id, message_id)])
    rows = sorted(shards.query_all(store, list(pks), sk_prefix=f"MSG#{message_id}#STATUS#"), key=lambda r: r["SK"])
    history = [{k: r.get(k) for k in ("status", "applied", "error", "at")} for r in rows]
    return models.MessageStatus(
        message_id=message_id, status=item["status"], last_error=item.get("last_error"), history=history
    )


# The sender (message_sender function) ---------------------------------------------------------------------------------
class SendInProgress(Exception):
    """Another consumer holds the send claim of this message (SQS handed it out twice): retry the record later."""


SEND_LEASE = timedelta(seconds=60)  # longer than message_sender's timeout, shorter than the queue's visibility
SENT_WRITE_ATTEMPTS = 4


def _claim_send(store: Store, org: str, message_id: str, at: dict[str, str] | None = None) -> Item | None:
    """Claim a pending message for one provider hand-off (the read and the claim in one conditional update).
    None when it is no longer pending; SendInProgress while another consumer's claim is live. `at`: the message's
    key when it is not where a new one is written (a legacy partition)."""
    now_ms = int(clock.now().timestamp() * 1000)
    try:
        return store.update(
            at or status.message_key(org, message_id),
            "SET send_lease_until = :lease",
            condition="#status = :pending AND (attribute_not_exists(send_lease_until) OR send_lease_until < :now)",
            names={"#status": "status"},
            values={":pending": "pending", ":now": now_ms, ":lease": now_ms + int(SEND_LEASE.total_seconds() * 1000)},
        )
    except Conflict:
        current = get_item(store, org, message_id, consistent=True)  # NotFound when it does not exist
        if current["status"] != "pending":
            return None
        if at is None and current["PK"] != status.message_key(org, message_id)["PK"]:
            return _claim_send(store, org, message_id, shards.key_of(current))
        raise SendInProgress(message_id) from None


def _release_send(store: Store, org: str, message: Item) -> None:
    with contextlib.suppress(DomainError):  # taken over or throttled: the lease runs out by itself
        store.update(
            shards.key_of(message),
            "REMOVE send_lease_until",
            condition="send_lease_until = :mine",
            values={":mine": message["send_lease_until"]},
            return_values="NONE",
        )


def deliver(store: Store, org: str, message_id: str) -> str:
    """Hand a pending message to its provider. Idempotent: a redelivered queue message for a message that is no
    longer pending does nothing, and two consumers given the same message at once never both send it (a send claim
    with a lease; the loser's record is retried and then finds the message sent). Provider outages raise
    ProviderUnavailable (the queue retries, after the claim's lease has run out). Once the provider has accepted the
    message it is never handed over again: a redelivery only finishes recording it (`_record_sent`)."""
    message = _claim_send(store, org, message_id)
    if message is None:
        return "skipped"
    try:
        channel = channels.get_item(store, org, message["channel_id"])
        if message.get(HANDED_OFF_UNCERTAIN):
            raise SendUncertain(message[HANDED_OFF_UNCERTAIN])
        provider_message_id = message.get(HANDED_OFF) or _hand_off(store, org, message, channel)
    except ProviderRejected as err:
        status.apply(store, org, message, "failed", error=err.message)
        return "failed"
    except SendUncertain as err:
        _record_uncertain(store, org, message, channel, str(err))
        return "uncertain"
    except Exception:
        _release_send(store, org, message)  # nothing was sent: the retry need not wait for the lease
        raise
    _record_sent(store, org, message, channel, provider_message_id)
    if channel["platform"] == "sandbox":
        schedule_sandbox_status(org, message_id, "delivered")
    return "sent"


# Kept on a pending message whose `sent` write could not be made after the provider had it: the provider's id, or
# why the send is uncertain. The queue's redelivery then finishes the write instead of handing the message over again.
HANDED_OFF = "handed_off_id"
HANDED_OFF_UNCERTAIN = "handed_off_uncertain"


def _hand_off(store: Store, org: str, message: Item, channel: Item) -> str:
    """Give the message to the channel's provider; its id for the message."""
    content = message.get("media") or {}
    outbound = OutboundMessage(
        message_id=message["id"],
        to_phone=message.get("to_phone") or "",
        to_group=message.get("group_jid"),
        type=message["type"],
        text=message.get("text"),
        media=_provider_media(store, org, content),
        template=content.get("template"),
        reply_to=_provider_reply_to(store, org, message.get("reply_to")),
        preview_url=bool(content.get("preview_url")),
        interactive=content.get("interactive"),
        contacts=content.get("contacts"),
        poll=content.get("poll"),
    )
    return provider_for(channel).send(outbound).provider_message_id


def _record_sent(store: Store, org: str, message: Item, channel: Item, provider_message_id: str) -> None:
    """Move a message the provider has accepted to `sent`, with its provider-id sentinel and its usage record."""
    sentinel = provider_sentinel(org, channel["id"], provider_message_id, message["id"])
    _write_sent(
        store,
        org,
        message,
        extra=[sentinel, usage_record_put(org, channel, message["id"])],
        extra_set={"provider_message_id": provider_message_id},
        handed_off=(HANDED_OFF, provider_message_id),
    )


def _write_sent(
    store: Store,
    org: str,
    message: Item,
    *,
    extra: list[TxOp],
    extra_set: dict[str, Any],
    handed_off: tuple[str, str],
) -> None:
    """The `pending → sent` write of a message the provider may have. The status condition makes every retry safe, so
    a throttled or conflicted write is tried again here (the store already retried each a few times). If it still
    cannot be written, `handed_off` (an attribute and its value) is kept on the message before the error goes up: the
    queue's redelivery then finishes this write instead of sending again."""
    for attempt in range(SENT_WRITE_ATTEMPTS):
        try:
            status.apply(store, org, message, "sent", extra=extra, extra_set=extra_set)
            return
        except (ServiceUnavailable, Conflict):  # status.apply answers False, not Conflict, when the rules refuse
            if attempt + 1 < SENT_WRITE_ATTEMPTS:
                time.sleep(0.2 * 2**attempt)
                continue
            with contextlib.suppress(DomainError):  # the redelivery may still send again only if this fails too
                store.update(
                    shards.key_of(message),
                    f"SET {handed_off[0]} = :h",
                    condition="#status = :pending",
                    names={"#status": "status"},
                    values={":h": handed_off[1], ":pending": "pending"},
                    return_values="NONE",
                )
            raise


def uncertain_key(org: str, channel_id: str, phone: str, message_id: str) -> dict[str, str]:
    """An uncertain send waiting for the engine's callbacks, found by channel and recipient (oldest first)."""
    return keys.key(keys.org_pk(org), f"UNCERTAIN#{channel_id}#{phone}#{message_id}")


def _record_uncertain(store: Store, org: str, message: Item, channel: Item, reason: str) -> None:
    """The engine may have the message: it leaves `pending` (so no retry ever sends it again) as `sent` with
    `uncertain: true` and no provider id, and waits for a callback naming it (CONVENTIONS "Real channel engines")."""
    pointer = Put(
        item={
            **uncertain_key(org, channel["id"], message.get("to_phone") or message["group_jid"], message["id"]),
            "entity": "UncertainSend",
            "message_id": message["id"],
            "created_at": clock.now_iso(),
        }
    )
    _write_sent(
        store,
        org,
        message,
        extra=[pointer, usage_record_put(org, channel, message["id"])],
        extra_set={"uncertain": True, "last_error": reason},
        handed_off=(HANDED_OFF_UNCERTAIN, reason),
    )


def _reconcile(store: Store, org: str, channel: Item, callback: StatusCallback) -> Item | None:
    """A callback about a message id we do not know, to a recipient with an uncertain send: that send is it.
    The provider id, its sentinel and the end of the uncertainty are one transaction."""
    if not callback.to_phone:
        return None
    page = store.query(
        keys.org_pk(org), sk_prefix=f"UNCERTAIN#{channel['id']}#{callback.to_phone}#", limit=1, consistent=True
    )
    if not page.items:
        return None
    pointer = page.items[0]
    message_id = pointer["message_id"]
    message = status.get_message(store, org, message_id, consistent=True)
    if message is None:
        return None
    try:
        store.transact(
            [
                Update(
                    key=shards.key_of(message),
                    expression="SET provider_message_id = :pmid, uncertain = :no, last_error = :none",
                    condition="uncertain = :yes",
                    values={":pmid": callback.provider_message_id, ":no": False, ":yes": True, ":none": None},
                    error=Conflict("already reconciled"),
                ),
                provider_sentinel(
                    org, channel["id"], callback.provider_message_id, message_id, unique=Conflict("already reconciled")
                ),
                Delete(key={"PK": pointer["PK"], "SK": pointer["SK"]}),
            ]
        )
    except Conflict:
        return None
    return get_item(store, org, message_id, consistent=True)


def _provider_reply_to(store: Store, org: str, reply_to: str | None) -> str | None:
    """Clients reply with our message id; providers need theirs."""
    if not reply_to:
        return None
    original = status.get_message(store, org, reply_to)
    return (original or {}).get("provider_message_id") or None


def _provider_media(store: Store, org: str, content: dict[str, Any]) -> dict[str, Any] | None:
    """Media as the provider takes it: an uploaded asset becomes a short-lived download link; a location is
    passed as its coordinates."""
    if "location" in content:
        return dict(content["location"])
    if "contacts" in content:
        return {"contacts": list(content["contacts"])}
    media_part = content.get("media")
    if not media_part or not media_part.get("asset_id"):
        return media_part
    asset = store.get(keys.key(keys.org_pk(org), f"ASSET#{media_part['asset_id']}"))
    if asset is None:
        raise ProviderRejected("The media asset no longer exists.")

    url, _ = s3_media.presign_download(asset["object_key"])
    return {
        **{k: v for k, v in media_part.items() if k != "asset_id"},
        "link": url,
        "url": url,
        "mime_type": media_part.get("mime_type") or asset["content_type"],
    }


def schedule_sandbox_status(org: str, message_id: str, next_status: str) -> None:
    settings = get_settings()
    delay = settings.sandbox_status_delay * settings.local_time_scale
    aws.client("sqs").send_message(
        QueueUrl=settings.outbound_messages_queue_url,
        MessageBody=json.dumps(
            {"kind": "sandbox_status", "organization_id": org, "message_id": message_id, "status": next_status}
        ),
        DelaySeconds=min(900, round(delay)),
    )


def advance_sandbox(store: Store, org: str, message_id: str, next_status: str) -> None:
    message = get_item(store, org, message_id, consistent=True)
    if status.apply(store, org, message, next_status) and next_status == "delivered":
        schedule_sandbox_status(org, message_id, "read")


# Inbound -------------------------------------------------------------------------------------------------------------
def _sender(store: Store, auth: AuthContext, channel: Item, inbound: InboundMessage) -> tuple[Any, bool]:
    """The sender's contact (created if new) from the phone and/or WhatsApp user id the provider gave. When both
    arrive and each already belongs to a different contact, the user-id contact is merged into the phone one: Meta
    vouches that they are one person."""
    idents = []
    if inbound.from_phone:
        idents.append(contact_models.IdentityIn(type="whatsapp", value=inbound.from_phone, channel_id=channel["id"]))
    if inbound.from_user_id:
        idents.append(
            contact_models.IdentityIn(type="whatsapp_user_id", value=inbound.from_user_id, channel_id=channel["id"])
        )
    if not idents:
        raise ValidationFailed.field("body", "the sender has neither a phone number nor a WhatsApp user id")
    body = contact_models.ContactCreate(identities=idents)
    try:
        return contacts.upsert(store, auth, body, TRUSTED)
    except contacts.IdentityConflict:
        if len(idents) < 2:
            raise

    phone_owner = contacts.resolve(store, auth, [idents[0]], numbers=TRUSTED)
    user_owner = contacts.resolve(store, auth, [idents[1]], numbers=TRUSTED)
    children.merge(store, auth, phone_owner["id"], contact_models.MergeRequest(from_contact_id=user_owner["id"]))
    return contacts.upsert(store, auth, body, TRUSTED)


def group_messages_pk(org: str, contact_id: str) -> str:
    """A contact's messages in group conversations (GSI1), newest last: what their erasure walks."""
    return f"ORG#{org}#CONTACTGROUPMSG#{contact_id}"


ECHO_LOOKBACK = 5  # the conversation's newest messages an echo is compared with


def _send_in_flight(store: Store, org: str, conv_id: str, echo: InboundMessage) -> Item | None:
    """Our own send whose echo arrived before its `sent` write recorded the engine's id: a message of the
    conversation still `pending`, claimed by the sender (`send_lease_until`), with the echo's type and text. Its
    `sent` write then records the id, so the echo is not a second message. One Query, for echoes only."""
    newest = store.query(conversations.messages_pk(org, conv_id), index="GSI2", limit=ECHO_LOOKBACK, forward=False)
    return next(
        (
            m
            for m in newest.items
            if m.get("direction") == "outbound"
            and m.get("status") == "pending"
            and m.get("send_lease_until")
            and m.get("type") == echo.type
            and (m.get("text") or None) == (echo.text or None)
        ),
        None,
    )


def receive(store: Store, org: str, channel: Item, inbound: InboundMessage) -> models.InboundAccepted:
    """A customer's message: stored once (duplicate callbacks are no-ops), resolved or created as a contact,
    threaded into the conversation, announced as `message.new`."""
    existing = get_pointer(store, org, channel["id"], inbound.provider_message_id)
    if existing:
        message = get_item(store, org, existing["message_id"])
        return models.InboundAccepted(
            message_id=message["id"],
            conversation_id=message["conversation_id"],
            contact_id=message.get("contact_id"),
            duplicate=True,
        )
    auth = system_auth(org)
    echo = inbound.from_me
    contact_id: str | None = None
    if not (echo and inbound.group_jid):  # our own echo into a group names no contact
        contact, created = _sender(store, auth, channel, inbound)
        contact_id = contact.id
        if created and inbound.contact_name:
            contacts.update(store, auth, contact.id, contact_models.ContactUpdate(name=inbound.contact_name), None)
    conv = conversations.get_or_create(store, org, channel["id"], contact_id or "", group_jid=inbound.group_jid)
    if echo and (ours := _send_in_flight(store, org, conv["id"], inbound)) is not None:
        return models.InboundAccepted(
            message_id=ours["id"], conversation_id=conv["id"], contact_id=contact_id, duplicate=True
        )
    moment, message_id = clock.now(), new_message_id()
    now = clock.iso(moment)  # the message and its event share one time
    item: Item = {
        **status.message_key(org, message_id),
        "entity": "Message",
        "id": message_id,
        "organization_id": org,
        "channel_id": channel["id"],
        "conversation_id": conv["id"],
        "contact_id": contact_id,
        "direction": "inbound",
        "from_phone": inbound.from_phone or None,
        "from_user_id": inbound.from_user_id,
        "to_phone": channel.get("phone_number"),
        "type": inbound.type,
        "text": inbound.text,
        "media": inbound.media,
        "status": "received",
        "provider_message_id": inbound.provider_message_id,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
        "received_at": inbound.timestamp or now,
        "GSI2PK": conversations.messages_pk(org, conv["id"]),
        "GSI2SK": message_id,
    }
    if echo:  # typed on the linked phone: an outbound message of the conversation, already sent by the device
        item |= {
            "direction": "outbound",
            "from_phone": channel.get("phone_number"),
            "from_user_id": None,
            "to_phone": inbound.from_phone or None,
            "status": "sent",
            "sent_by": "device",
        }
        del item["received_at"]
    if inbound.group_jid:  # a participant's message in a group: listed by sender too (GSI1), for their erasure
        item["group_jid"] = inbound.group_jid
        if contact_id and not echo:
            item |= {"GSI1PK": group_messages_pk(org, contact_id), "GSI1SK": message_id}
    order_id: str | None = None
    order_ops: list[TxOp] = []
    if inbound.type == "order" and not inbound.group_jid and not echo and contact_id:
        # a cart from the catalogue: its order, with the message
        order_id, order_ops = orders.inbound_ops(
            store, org, channel["id"], contact_id, conv["id"], message_id, inbound.media or {}, moment
        )
    ops: list[TxOp] = [
        provider_sentinel(org, channel["id"], inbound.provider_message_id, message_id, unique=Conflict("duplicate")),
        Put(item=item, condition="attribute_not_exists(PK)"),
        *conversations.touch_ops(
            org, conv, at=now, preview=inbound.text or f"[{inbound.type}]", inbound=not echo, occurred=moment
        ),
        outbox_put(
            org,
            "message.new",
            {
                "message_id": message_id,
                "conversation_id": conv["id"],
                "contact_id": contact_id,
                "channel_id": channel["id"],
                "direction": item["direction"],
                **({"sent_by": "device"} if echo else {}),
                "from_phone": item["from_phone"],
                "msg_type": inbound.type,
                "text": inbound.text,
                "organization_id": org,
                **({"group_jid": inbound.group_jid} if inbound.group_jid else {}),
            },
            occurred=moment,
        ),
        *order_ops,
    ]
    try:
        store.transact(ops)
    except Conflict:
        again = get_pointer(store, org, channel["id"], inbound.provider_message_id)
        if again is None:
            raise
        return models.InboundAccepted(
            message_id=again["message_id"], conversation_id=conv["id"], contact_id=contact_id, duplicate=True
        )
    return models.InboundAccepted(
        message_id=message_id, conversation_id=conv["id"], contact_id=contact_id, order_id=order_id
    )


def status_callback(store: Store, org: str, channel: Item, callback: StatusCallback) -> bool:
    """A provider's status for one of our messages; unknown ids are ignored, order never moves a status back."""
    pointer = get_pointer(store, org, channel["id"], callback.provider_message_id)
    if pointer is None:
        reconciled = _reconcile(store, org, channel, callback)
        if reconciled is None:
            return False
        message = reconciled
    else:
        message = get_item(store, org, pointer["message_id"], consistent=True)
    if callback.status not in status.RANK and callback.status not in status.TERMINAL:
        return False
    return status.apply(store, org, message, callback.status, error=callback.error)


def _apply_vote(store: Store, org: str, message: Item, change: MessageChange) -> bool:
    """A customer's vote on one of our polls: `poll_votes` (voter phone → the answers chosen and the engine's time
    of the vote) keeps each voter's latest vote (an older one arriving late changes nothing), and `poll_tally`
    (answer → votes) is recounted from it. Answers the poll does not have are ignored. Conditional on the votes read
    (`poll_rev`), re-read on a concurrent vote."""
    whole = change.kind == "poll_state"  # every voter's answers at once (Evolution's aggregate)
    if message.get("type") != "poll" or not (change.voter or whole):
        return False
    offered = list(((message.get("media") or {}).get("poll") or {}).get("options") or [])
    at = change.event_at
    for _ in range(5):
        votes = dict(message.get("poll_votes") or {})
        if whole:
            stored_at = message.get("poll_state_at")
            if at is not None and stored_at is not None and at < int(stored_at):
                return False
            votes = {voter: {"options": [o for o in dict.fromkeys(chosen) if o in offered], "at": at}
                     for voter, chosen in change.ballots}  # fmt: skip
            if votes == (message.get("poll_votes") or {}):
                return False
        else:
            assert change.voter is not None
            chosen = [o for o in dict.fromkeys(change.options) if o in offered]
            prior = votes.get(change.voter) or {}
            if at is not None and prior.get("at") is not None and at < int(prior["at"]):
                return False
            if prior.get("options") == chosen and (at is None or prior.get("at") == at):
                return False
            votes[change.voter] = {"options": chosen, "at": at}
        tally = {o: sum(o in v.get("options", []) for v in votes.values()) for o in offered}
        rev = int(message.get("poll_rev") or 0)
        values = {":votes": votes, ":tally": tally, ":next": rev + 1, ":rev": rev, ":now": clock.now_iso(),
                  ":at": at if whole else message.get("poll_state_at")}  # fmt: skip
        try:
            store.update(
                shards.key_of(message),
                "SET poll_votes = :votes, poll_tally = :tally, poll_rev = :next, poll_state_at = :at, "
                "updated_at = :now",
                condition="attribute_exists(PK) AND (attribute_not_exists(poll_rev) OR poll_rev = :rev)",
                values=values,
                return_values="NONE",
            )
        except Conflict:
            fresh = status.get_message(store, org, message["id"], consistent=True)
            if fresh is None:
                return False
            message = fresh
            continue
        return True
    raise Conflict("The poll changed meanwhile; retry.")


def apply_change(store: Store, org: str, channel: Item, change: MessageChange) -> bool:
    """The customer's reaction, edit or revoke applied to the stored message it names (never a new message): a
    reaction sets `customer_reaction` (an empty emoji clears it), an edit sets `text` and `edited_at`, a revoke sets
    `deleted`, `deleted_at` and clears `text`. Edits and revokes change only the customer's own (inbound) messages.
    A repeat changes nothing. True when the message changed."""
    message: Item | None = None
    for target in change.targets:
        pointer = get_pointer(store, org, channel["id"], target)
        if pointer:
            message = status.get_message(store, org, pointer["message_id"], consistent=True)
            break
    if message is None or message.get("deleted"):
        return False
    if change.kind in ("poll_vote", "poll_state"):
        return _apply_vote(store, org, message, change)
    when = change.timestamp or clock.now_iso()
    if change.kind == "reaction":
        changes: Item = {"customer_reaction": change.text or None}
    elif message.get("direction") != "inbound":
        return False
    elif change.kind == "edit":
        changes = {"text": change.text, "edited_at": when}
    elif change.kind == "revoke":
        changes = {"text": None, "deleted": True, "deleted_at": when}
    else:
        return False
    if all(message.get(k) == v for k, v in changes.items() if not k.endswith("_at")):
        return False
    sets = ", ".join(f"#{k} = :{k}" for k in changes) + ", updated_at = :now"
    try:  # conditional: a revoke is final, whatever arrives after it
        store.update(
            shards.key_of(message),
            f"SET {sets}",
            condition="attribute_exists(PK) AND (attribute_not_exists(#gone) OR #gone = :no)",
            names={**{f"#{k}": k for k in changes}, "#gone": "deleted"},
            values={**{f":{k}": v for k, v in changes.items()}, ":now": clock.now_iso(), ":no": False},
            return_values="NONE",
        )
    except Conflict:  # deleted meanwhile
        return False
    return True
