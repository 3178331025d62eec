"""Metered usage: messages sent per channel and day, and the number of stored contacts.

A message is metered by an immutable usage record, `USAGEREC#<message_id>` (`usage_record_put`), written in the
very transaction that moves it from `pending` to `sent`: the condition on the "from" status makes it exactly one
record per sent message (a redelivered queue message or a concurrent sender cannot write a second one, a failed
message none), and its key is the message's own, so concurrent sends never conflict on it. The usage meter
(`functions/usage_meter`, a consumer of the table's stream filtered to these INSERTs) adds each record to a counter
item `USAGE#<YYYY-MM-DD>#CH#<channel_id>#<shard>` in a transaction that also marks the record counted
(`count_record`): a stream record delivered twice is counted once. Records and counters are write-sharded by the
message id (`switchboard.store.shards`: the record and its counter live in the message's partition
`ORG#<org>#<shard>`), so neither a burst of sends nor concurrent meter invocations put an organization's writes on
one partition-key value; a billing period (a calendar month) is one Query on the `USAGE#<YYYY-MM>-` prefix per shard
(and the legacy partition `ORG#<org>`, whose counters carry a `#<0-3>` suffix), all summed. Records expire (TTL)
after `RECORD_DAYS`.

Contacts stored are tracked, not counted per read: the organization's contact counter (`COUNTER#CONTACTS`, changed
with `ADD` in the transactions that create and delete contacts) is one consistent GetItem; an organization without
a seeded counter is counted once and seeded (`switchboard.contacts.counter`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.contacts import counter
from switchboard.store import Put, Store, Update, keys, shards
from switchboard.stream_counts import AlreadyCounted, mark_counted

Item = dict[str, Any]
RECORD_DAYS = 40  # past the end of any billing period a record can belong to
RECORD_PREFIX = "USAGEREC#"


def usage_key(org: str, day: str, channel_id: str, message_id: str) -> dict[str, str]:
    """The day's counter of a channel in the message's shard (the shard's number ends the sort key)."""
    partition = shards.pk(org, message_id)
    return keys.key(partition, f"USAGE#{day}#CH#{channel_id}#{partition.rsplit('#', 1)[1]}")


def usage_record_put(org: str, channel: Item, message_id: str, at: datetime | None = None) -> Put:
    """The transaction operation that meters one message sent on `channel` (today, UTC)."""
    moment = at or clock.now()
    return Put(
        item={
            **keys.key(shards.pk(org, message_id), f"{RECORD_PREFIX}{message_id}"),
            "entity": "UsageRecord",
            "message_id": message_id,
            "channel_id": channel["id"],
            "platform": channel.get("platform") or "",
            "day": moment.strftime("%Y-%m-%d"),
            "ttl": int((moment + timedelta(days=RECORD_DAYS)).timestamp()),
        }
    )


def count_record(store: Store, record: Item) -> bool:
    """Add one usage record to its day's counter, once: False when it was counted already (a redelivery)."""
    org = shards.org_of(record["PK"])
    try:
        store.transact(
            [
                mark_counted(record),
                Update(
                    key=usage_key(org, record["day"], record["channel_id"], record["message_id"]),
                    expression="SET #e = :e, channel_id = :c, platform = :p, #d = :d ADD messages_sent :one",
                    names={"#e": "entity", "#d": "day"},
                    values={
                        ":e": "Usage",
                        ":c": record["channel_id"],
                        ":p": record["platform"],
                        ":d": record["day"],
                        ":one": 1,
                    },
                ),
            ]
        )
    except AlreadyCounted:
        return False
    return True


def messages_sent(store: Store, org: str, period: str) -> list[Item]:
    """Per channel, messages sent in the calendar month `period` (`YYYY-MM`): `[{channel_id, platform, count}]`,
    busiest first. One Query per shard and the legacy partition (days x channels items each)."""
    totals: dict[str, Item] = {}
    for row in shards.query_all(store, shards.all_pks(org), sk_prefix=f"USAGE#{period}-", consistent=True):
        entry = totals.setdefault(row["channel_id"], {"channel_id": row["channel_id"], "platform": "", "count": 0})
        entry["count"] += int(row.get("messages_sent") or 0)
        entry["platform"] = row.get("platform") or entry["platform"]
    return sorted(totals.values(), key=lambda e: (-e["count"], e["channel_id"]))


def contacts_stored(store: Store, org: str) -> int:
    """The organization's maintained contact count (one consistent GetItem)."""
    return counter.contacts_stored(store, org)
