"""Chat and call actions: `/v1/chats/*` act on the conversation of a (channel, chat) — the stored state through
`messaging.conversations`, and the provider where it has the notion — and `/v1/calls/reject` asks the provider.

The provider protocol (`providers/base.py`) has no chat or call operations; adapters that can do them expose
`chats(action, payload)`, `reject_call(call_id, from_phone)` (or `calls("reject", payload)`) and
`history_sync(payload)`, found here by a capability check. Without them: chat actions change only the stored state,
a call reject is 400 `unsupported_by_provider`, a history sync is 400 too (the sandbox completes at once).
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.catalog import models
from switchboard.contacts.identifiers import Identifier, normalize_phone, numbers_for
from switchboard.errors import NotFound
from switchboard.ids import new_ulid
from switchboard.messaging import channels, conversations
from switchboard.messaging import models as messaging_models
from switchboard.store import Store, keys

Item = dict[str, Any]
CHAT_ACTIONS = ("archive", "unarchive", "mute", "unmute", "pin", "unpin")


def contact_for_chat(store: Store, org: str, chat_id: str) -> str:
    """The contact owning a phone / WhatsApp JID (`14155552671@s.whatsapp.net` or digits)."""
    # a chat the provider listed: its number need only be possible (the provider's word), in any form
    phone = normalize_phone(chat_id, "body.chat_id", numbers_for(store, org, possible_only=True))
    sentinel = store.require(
        keys.key(keys.org_pk(org), Identifier("phone", phone).sentinel_sk), "No stored contact has this chat id."
    )
    return str(sentinel["contact_id"])


def conversation_for_chat(store: Store, auth: AuthContext, channel_id: str, chat_id: str) -> Item:
    """The conversation of a chat on a channel: `chat_id` is a conversation id or the contact's phone / JID."""
    org = auth.org_id
    channels.get_item(store, org, channel_id)
    if chat_id.startswith("cv_"):
        conv = conversations.get_item(store, org, chat_id)
        if conv["channel_id"] != channel_id:
            raise NotFound("No such conversation on this channel.")
        return conv
    contact_id = contact_for_chat(store, org, chat_id)
    pointer = store.require(
        conversations.pair_key(org, channel_id, contact_id),
        "No conversation with this chat on this channel.",
        consistent=True,
    )
    return conversations.get_item(store, org, pointer["conversation_id"], consistent=True)


def _chat_jid(store: Store, org: str, conv: Item) -> str | None:
    contact = store.get(keys.key(keys.org_pk(org), f"CONTACT#{conv['contact_id']}"))
    return (contact or {}).get("phone")


def chat_action(
    store: Store, auth: AuthContext, body: models.ChatRequest, action: str
) -> messaging_models.Conversation:
    """Provider first (an outage is a 503 and changes nothing), then the stored state (one `conversation.updated`
    per real change)."""
    org = auth.org_id
    conv = conversation_for_chat(store, auth, body.channel_id, body.chat_id)
    _, adapter = channels.provider(store, auth, body.channel_id)
    remote = getattr(adapter, "chats", None)
    if callable(remote):
        payload: Item = {"chat_id": _chat_jid(store, org, conv), "conversation_id": conv["id"]}
        if isinstance(body, models.ChatMuteRequest) and body.until:
            payload["until"] = body.until
        remote(action, payload)
    if action == "mute":
        until = body.until if isinstance(body, models.ChatMuteRequest) else None
        return conversations.mute(store, auth, conv["id"], messaging_models.MuteRequest(until=until))
    return conversations.act(store, auth, conv["id"], action)


def reject_call(store: Store, auth: AuthContext, body: models.CallReject) -> models.CallRejected:
    _, adapter = channels.provider(store, auth, body.channel_id)
    caller = normalize_phone(body.from_, "body.from", numbers_for(store, auth.org_id)) if body.from_ else None
    direct = getattr(adapter, "reject_call", None)
    calls = getattr(adapter, "calls", None)
    if callable(direct):
        result = direct(body.call_id, caller)
    elif callable(calls):
        result = calls("reject", {"call_id": body.call_id, "from": caller})
    else:
        raise adapter._unsupported("rejecting calls")
    return models.CallRejected(
        channel_id=body.channel_id, call_id=body.call_id, provider=result if isinstance(result, dict) else {}
    )


# History sync ------------------------------------------------------------------------------------------------------
def _sync_key(org: str, conv_id: str, ulid: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"HSYNC#{conv_id}#{ulid}")


def _count_messages(store: Store, org: str, conv_id: str) -> int:
    return len(store.query_all(conversations.messages_pk(org, conv_id), index="GSI2"))


def history_sync(store: Store, auth: AuthContext, conv_id: str) -> models.HistorySync:
    """Records a sync request. The sandbox completes it at once (with the messages already stored); a provider
    exposing `history_sync(payload)` leaves it `requested` (its messages then arrive as inbound callbacks)."""
    org = auth.org_id
    conv = conversations.get_item(store, org, conv_id)
    channel, adapter = channels.provider(store, auth, conv["channel_id"])
    now, ulid = clock.now_iso(), new_ulid()
    record: Item = {
        **_sync_key(org, conv_id, ulid),
        "entity": "HistorySync",
        "id": f"hs_{ulid.lower()}",
        "conversation_id": conv_id,
        "channel_id": channel["id"],
        "requested_at": now,
        "requested_by": auth.principal_id,
        "ttl": clock.epoch(clock.now()) + 30 * 86400,
    }
    remote = getattr(adapter, "history_sync", None)
    if callable(remote):
        remote({"chat_id": _chat_jid(store, org, conv), "conversation_id": conv_id})
        record |= {"status": "requested", "messages_synced": None, "completed_at": None}
    elif adapter.platform == "sandbox":
        record |= {"status": "completed", "messages_synced": _count_messages(store, org, conv_id), "completed_at": now}
    else:
        raise adapter._unsupported("history sync")
    store.put(record)
    return models.HistorySync.model_validate(record)


def last_history_sync(store: Store, auth: AuthContext, conv_id: str) -> models.HistorySync:
    org = auth.org_id
    conversations.get_item(store, org, conv_id)
    page = store.query(keys.org_pk(org), sk_prefix=f"HSYNC#{conv_id}#", forward=False, limit=1)
    if not page.items:
        raise NotFound("No history sync was requested for this conversation.")
    return models.HistorySync.model_validate(page.items[0])


def chat_history_sync(store: Store, auth: AuthContext, body: models.ChatRequest) -> models.HistorySync:
    conv = conversation_for_chat(store, auth, body.channel_id, body.chat_id)
    return history_sync(store, auth, conv["id"])
