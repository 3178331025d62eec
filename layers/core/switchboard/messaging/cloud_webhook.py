"""Meta's app-level callback for `whatsapp_cloud` channels, and the platform-wide claim of a `phone_number_id`.

One Meta app sends the traffic of all its phone numbers to one callback URL. `POST
/v1/providers/whatsapp_cloud/webhook` routes each change by `value.metadata.phone_number_id` to the channel that
claimed that number and checks `X-Hub-Signature-256` with that channel's `app_secret` before anything is stored (a
body whose signature fails for any of its numbers is refused whole: 401, nothing stored). `messages` changes become
messages and statuses; the number's other updates (groups, templates, account) become channel log entries
(`whatsapp.<field>`), and group updates also follow into the channel's group records (an asynchronous create is
completed by its `group_lifecycle_update`). Changes of numbers no channel claims are ignored. The per-channel URL
(`/v1/providers/{channel_id}/callback`) goes through the same routing, with changes that carry no `metadata` going
to that channel.

Items (global, outside any organization):
- claim `WAPHONE#<phone_number_id>` / `WAPHONE` → `{organization_id, channel_id}`: written with
  `attribute_not_exists(PK)` in the channel's own create/update transaction, so a number belongs to at most one
  channel on the whole platform (a second claim is 409 `conflict`); deleted with the channel or when its config
  names another number.
- verify-token index `WAVERIFY#<sha256 hex of verify_token>` / `CHANNEL#<channel_id>` (or `WABAFLOW#<progress_id>`
  while an onboarding subscribes, TTL 7 days) → `{organization_id}`: the
  app-level `GET` handshake finds a channel holding the given token with one key query, then compares the token
  itself in constant time. Channels of one app usually share one token, hence one item per channel under the same key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from typing import Any

from switchboard import aws, clock, sealed
from switchboard.config import get_settings
from switchboard.errors import Conflict, Forbidden, ServiceUnavailable, Unauthenticated, ValidationFailed
from switchboard.identity import repository as identity_repository
from switchboard.messaging import channels
from switchboard.messaging.claims import PLATFORM, claim_key, config_text, opened_config, token_pk
from switchboard.providers.base import InboundMessage, PaymentStatus, StatusCallback
from switchboard.store import Put, Store, TxOp, keys

Item = dict[str, Any]


def _token_of(store: Store, row: Item) -> str:
    """The verify token an index row stands for, read from its channel (opened config) or onboarding flow."""
    org, sk = row["organization_id"], str(row["SK"])
    if sk.startswith("CHANNEL#"):
        channel = store.get(channels.channel_key(org, sk.removeprefix("CHANNEL#")))
        return config_text(opened_config(channel), "verify_token")
    if sk.startswith("WABAFLOW#"):
        # on first use: keeps switchboard.waba.service off the cold start
        from switchboard.waba import service as waba

        flow = store.get(waba.flow_key(org, sk.removeprefix("WABAFLOW#")))
        value = (flow or {}).get("verify_token_sealed")
        try:
            return sealed.unseal(value, org) if isinstance(value, str) else ""
        except ValueError:
            return ""
    return ""


def channel_for_number(store: Store, phone_number_id: str) -> Item | None:
    claim = store.get(claim_key(phone_number_id))
    if not claim:
        return None
    org = claim["organization_id"]
    found = {
        i["SK"]: i for i in store.batch_get([channels.channel_key(org, claim["channel_id"]), keys.organization(org)])
    }
    channel = found.get(channels.channel_key(org, claim["channel_id"])["SK"])
    organization = found.get("ORG") or {}
    if organization.get("status") == "pending_deletion":  # CONVENTIONS: its channel callbacks stop at once
        return None
    return channel if channel and channel.get("platform") == PLATFORM else None


def subscription(store: Store, params: dict[str, str]) -> str:
    """Meta's `GET` handshake for the app-level URL: `hub.challenge` when `hub.verify_token` is the verify_token of
    a whatsapp_cloud channel, else 403."""
    if params.get("hub.mode") != "subscribe" or "hub.challenge" not in params:
        raise ValidationFailed("Expected hub.mode=subscribe with hub.verify_token and hub.challenge.")
    given = str(params.get("hub.verify_token") or "")
    if given:
        for row in store.query(token_pk(given), limit=5).items:
            token = _token_of(store, row)
            if token and hmac.compare_digest(given.encode(), token.encode()):
                return str(params["hub.challenge"])
    raise Forbidden("The verify token does not match the verify_token of any whatsapp_cloud channel.")


Change = tuple[str, dict[str, Any]]  # (field, value) of one entry of Meta's `changes`
QUEUE_BATCH = 10  # SQS SendMessageBatch
MAX_QUEUED_BYTES = 262_144  # SQS' limit for a message and for a whole batch; a larger change is processed at once
CHANGE_TTL_DAYS = 8  # Meta retries a webhook for up to 7 days; a processed change is remembered longer


def route(
    store: Store, headers: dict[str, str], body: bytes, *, default: Item | None = None
) -> list[tuple[Item, list[Change]]]:
    """Each channel the body speaks for, with its changes; every channel's signature is checked before any is
    returned. `default` receives changes without `metadata.phone_number_id` (the per-channel URL)."""
    # on first use: keeps switchboard.providers.whatsapp_cloud off the cold start
    from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider, changes_by_number, signature_of

    grouped = changes_by_number(body)  # a body that is not Meta's shape is 400 before anything else
    if not signature_of(headers):
        raise Unauthenticated("Missing or malformed X-Hub-Signature-256 header.")
    own = config_text(opened_config(default), "phone_number_id")
    routed: list[tuple[Item, list[Change]]] = []
    for number, changes in grouped.items():
        channel = default if default is not None and number in ("", own) else None
        if channel is None and number:
            channel = channel_for_number(store, number)
        if channel is None:
            continue  # a number no channel claims (yet)
        WhatsAppCloudProvider(channel).verify_callback(headers, body)
        routed.append((channel, changes))
    return routed


def _batches(messages: list[str]) -> list[list[str]]:
    """SendMessageBatch calls: at most 10 messages and 256 KiB together each."""
    batches: list[list[str]] = []
    size = 0
    for message in messages:
        length = len(message.encode())
        if not batches or len(batches[-1]) == QUEUE_BATCH or size + length > MAX_QUEUED_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += length
    return batches


def receive(store: Store, headers: dict[str, str], body: bytes, *, default: Item | None = None) -> dict[str, Any]:
    """Meta's callback, answered fast: the signature is checked here (401, nothing stored or queued, when it fails
    for any channel the body speaks for), then each verified change is queued (`enqueue`)."""
    return enqueue(store, route(store, headers, body, default=default))


def enqueue(store: Store, routed: list[tuple[Item, list[Change]]]) -> dict[str, Any]:
    """Each verified change (`route`) queued (`CloudWebhookQueue`) for the `cloud_webhook` consumer, which processes
    it once (`process`)."""
    # on first use: keeps switchboard.providers.whatsapp_cloud off the cold start
    from switchboard.providers.whatsapp_cloud import WhatsAppCloudProvider

    messages: list[str] = []
    processed: dict[str, int] = {"received": 0, "statuses_applied": 0}
    for channel, changes in routed:
        # the messages are read now (no I/O): one Meta could never accept is 400 here rather than a queued failure
        WhatsAppCloudProvider(channel).events([value for field, value in changes if field == "messages"])
        WhatsAppCloudProvider(channel).echoes([value for field, value in changes if field == "smb_message_echoes"])
        for field, value in changes:
            message = json.dumps(
                {
                    "organization_id": channel["organization_id"],
                    "channel_id": channel["id"],
                    "field": field,
                    "value": value,
                },
                separators=(",", ":"),
                default=str,
            )
            if len(message.encode()) > MAX_QUEUED_BYTES:  # beyond SQS' message size: processed at once
                for key, count in process(store, channel["organization_id"], channel["id"], field, value).items():
                    processed[key] += count
            else:
                messages.append(message)
    for batch in _batches(messages):
        entries = [{"Id": str(n), "MessageBody": m} for n, m in enumerate(batch)]
        answer = aws.client("sqs").send_message_batch(QueueUrl=get_settings().cloud_webhook_queue_url, Entries=entries)
        if answer.get("Failed"):  # Meta retries the whole body; what was queued already is processed once anyway
            raise ServiceUnavailable(f"{len(answer['Failed'])} webhook changes could not be queued; retry.")
    return {"queued": len(messages), **processed}


MAX_LOGGED_UPDATE = 8 * 1024  # characters of an update's JSON kept in the channel log


def _update_log(channel: Item, field: str, value: dict[str, Any]) -> Put:
    """A group, template or account update of the number, as a channel log entry (`GET /v1/channels/{id}/logs`)."""
    detail: dict[str, Any] = {"field": field}
    kept = {k: v for k, v in value.items() if k not in ("messaging_product", "metadata")}
    if len(json.dumps(kept, default=str)) <= MAX_LOGGED_UPDATE:
        detail["value"] = kept
    else:
        detail["keys"] = sorted(kept)
    return channels.log_entry(channel["organization_id"], channel["id"], f"whatsapp.{field}", detail)


def change_key(org: str, channel_id: str, field: str, value: dict[str, Any]) -> dict[str, str]:
    """The marker of a processed change: Meta's retries carry the same change, byte for byte in content."""
    digest = hashlib.sha256(
        json.dumps([channel_id, field, value], sort_keys=True, separators=(",", ":"), default=str).encode()
    ).hexdigest()
    return keys.key(keys.org_pk(org), f"WACHANGE#{digest}")


def process(store: Store, org: str, channel_id: str, field: str, value: dict[str, Any]) -> dict[str, int]:
    """One verified change of a channel, once: `messages` changes store their inbound messages (once per message
    id) and apply their statuses (a payment status to the order of its bill); group updates follow into the
    channel's group records; every other update is a channel log entry. A change already processed (Meta retried
    it) changes nothing; a channel gone, of another platform, or of an organization pending deletion receives
    nothing."""
    # on first use: keeps switchboard.messaging.channels, switchboard.messaging.messages off the cold start
    from switchboard.messaging import channels, messages

    # on first use: keeps switchboard.providers.whatsapp_cloud off the cold start
    from switchboard.providers.whatsapp_cloud import ECHO_FIELD, GROUP_FIELDS, WhatsAppCloudProvider, group_events

    counts = {"received": 0, "statuses_applied": 0}
    marker = change_key(org, channel_id, field, value)
    if store.get(marker, consistent=True) is not None:
        return counts
    channel = store.get(channels.channel_key(org, channel_id), consistent=True)
    if not channel or channel.get("platform") != PLATFORM or not identity_repository.organization_active(store, org):
        return counts
    if field == "messages":
        for event in WhatsAppCloudProvider(channel).events([value]):
            if isinstance(event, InboundMessage):
                messages.receive(store, org, channel, event)
                counts["received"] += 1
            elif isinstance(event, StatusCallback):
                counts["statuses_applied"] += int(messages.status_callback(store, org, channel, event))
            elif isinstance(event, PaymentStatus):  # a bill's payment moved: its order's payment_status follows
                # on first use: keeps switchboard.commerce.orders off the cold start
                from switchboard.commerce import orders

                counts["statuses_applied"] += int(orders.apply_payment(store, org, channel_id, event))
    elif field == ECHO_FIELD:  # sent from the WhatsApp Business app on a coexistence number: outbound echoes
        for echo in WhatsAppCloudProvider(channel).echoes([value]):
            messages.receive(store, org, channel, echo)
            counts["received"] += 1
    elif field in GROUP_FIELDS:
        # on first use: keeps switchboard.groups.service off the cold start
        from switchboard.groups import service as groups

        for group_event in group_events(field, value):
            groups.apply_event(store, channel, group_event)
    ops: list[TxOp] = [
        Put(
            item={
                **marker,
                "entity": "WhatsAppChange",
                "field": field,
                "ttl": clock.epoch(clock.now()) + CHANGE_TTL_DAYS * 86400,
            },
            condition="attribute_not_exists(PK)",
        )
    ]
    if field not in ("messages", ECHO_FIELD):  # message contents stay out of the channel's log
        ops.append(_update_log(channel, field, value))
    with contextlib.suppress(Conflict):  # a concurrent delivery of the same change recorded it (and its log entry)
        store.transact(ops)
    return counts
