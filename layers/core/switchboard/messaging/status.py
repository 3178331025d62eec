"""Message status rules (CONVENTIONS "Message status").

`pending < sent < delivered < read (< played)`; a status never moves backwards (a late `delivered` after `read` is
recorded in the history but does not change the record); `failed` is terminal and only replaces `pending` or
`sent`. The allowed "from" states are a condition of the same transaction that writes the new status and its one
`message.status_update` event, so concurrent or out-of-order callbacks can never double-apply.
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.errors import Conflict
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_ulid
from switchboard.store import Put, Store, TxOp, Update, keys, shards

RANK = {"pending": 0, "sent": 1, "delivered": 2, "read": 3, "played": 4}
TERMINAL = {"failed"}


def message_key(org: str, message_id: str) -> dict[str, str]:
    """Where a new message is written: its id's shard. A stored message is changed at its own key (`shards.key_of`):
    it may be in the legacy partition."""
    return keys.key(shards.pk(org, message_id), f"MSG#{message_id}")


def get_message(store: Store, org: str, message_id: str, *, consistent: bool = False) -> dict[str, Any] | None:
    """A message by id, wherever it is (its shard, else an earlier count's or the legacy partition)."""
    return shards.get(store, org, message_id, f"MSG#{message_id}", consistent=consistent)


def allowed_from(new_status: str) -> list[str]:
    if new_status == "failed":
        return ["pending", "sent"]
    rank = RANK[new_status]
    return [s for s, r in RANK.items() if r < rank]


class _NotApplicable(Conflict):
    pass


def history_put(
    org: str, message_id: str, status: str, applied: bool, error: str | None, *, at: str | None = None
) -> Put:
    """A status history row; `at` is the change's time when the caller already read the clock for it."""
    return Put(
        item={
            "PK": shards.pk(org, message_id),
            "SK": f"MSG#{message_id}#STATUS#{new_ulid()}",
            "entity": "MessageStatus",
            "status": status,
            "applied": applied,
            "error": error,
            "at": at or clock.now_iso(),
        }
    )


def apply(
    store: Store,
    org: str,
    message: dict[str, Any],
    new_status: str,
    *,
    error: str | None = None,
    extra: list[TxOp] | None = None,
    extra_set: dict[str, Any] | None = None,
) -> bool:
    """Move the message to `new_status` if the rules allow it; True when the record changed (and one event left)."""
    if new_status not in RANK and new_status not in TERMINAL:
        raise ValueError(f"unknown status {new_status}")
    sources = allowed_from(new_status)
    values: dict[str, Any] = {f":s{n}": s for n, s in enumerate(sources)}
    values |= {":new": new_status, ":now": clock.now_iso()}
    sets = ["#status = :new", "updated_at = :now"]
    if error is not None:
        values[":err"] = error
        sets.append("last_error = :err")
    for n, (field, value) in enumerate((extra_set or {}).items()):
        values[f":x{n}"] = value
        sets.append(f"{field} = :x{n}")
    payload = {
        "message_id": message["id"],
        "status": new_status,
        "conversation_id": message.get("conversation_id"),
        "organization_id": org,
        "channel_id": message.get("channel_id"),
    }
    if error:
        payload["error"] = error
    ops: list[TxOp] = [
        Update(
            key=shards.key_of(message),
            expression="SET " + ", ".join(sets),
            condition=f"#status IN ({', '.join(values_key for values_key in values if values_key.startswith(':s'))})",
            names={"#status": "status"},
            values=values,
            error=_NotApplicable(),
        ),
        history_put(org, message["id"], new_status, True, error),
        outbox_put(org, "message.status_update", payload),
        *(extra or []),
    ]
    if new_status == "sent":
        ops.append(
            outbox_put(
                org,
                "message.sent",
                {
                    "message_id": message["id"],
                    "channel_id": message["channel_id"],
                    "conversation_id": message.get("conversation_id"),
                    "organization_id": org,
                },
            )
        )
    try:
        store.transact(ops)
    except _NotApplicable:
        store.put(history_put(org, message["id"], new_status, False, error).item)
        return False
    return True
