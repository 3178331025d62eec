"""Metered usage: messages sent per channel and day, and the number of stored contacts.

A message is metered by an immutable usage record, `USAGEREC#<message_id>` (`usage_record_put`), written in the
very transaction that moves it from `pending` to `sent`: the condition on the "from" status makes it exactly one
record per sent message (a redelivered queue message or a concurrent sender cannot write a second one, a failed
message none), and its key is the message's own, so concurrent sends never conflict on it. The usage meter
(`functions/usage_meter`, a consumer of the table's stream filtered to these INSERTs) adds each record to a counter
item `USAGE#<YYYY-MM-DD>#CH#<channel_id>#<shard>` in a transaction that also marks the record counted
(`count_record`): a stream record delivered twice is counted once. The counter is split into `USAGE_SHARDS` items
(by the message id's last digit) so that meter invocations on several stream shards rarely touch the same one; a
billing period (a calendar month) is one Query on the `USAGE#<YYYY-MM>-` prefix that sums every shard. Records
expire (TTL) after `RECORD_DAYS`.

Contacts stored are tracked, not counted per read: the organization's contact counter (`COUNTER#CONTACTS`, changed
with `ADD` in the transactions that create and delete contacts) is one consistent GetItem; an organization without
a seeded counter is counted once and seeded (`switchboard.contacts.counter`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.contacts import counter
from switchboard.store import Put, Store, Update, keys
from switchboard.stream_counts import AlreadyCounted, mark_counted

Item = dict[str, Any]
USAGE_SHARDS = 4
RECORD_DAYS = 40  # past the end of any billing period a record can belong to
RECORD_PREFIX = "USAGEREC#"


def usage_key(org: str, day: str, channel_id: str, shard: int) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"USAGE#{day}#CH#{channel_id}#{shard}")


def usage_record_put(org: str, channel: Item, message_id: str, at: datetime | None = None) -> Put:
    """The transaction operation that meters one message sent on `channel` (today, UTC)."""
    moment = at or clock.now()
    return Put(
        item={
            **keys.key(keys.org_pk(org), f"{RECORD_PREFIX}{message_id}"),
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
    org = record["PK"].removeprefix("ORG#")
    shard = int(record["message_id"][-1], 16) % USAGE_SHARDS
    try:
        store.transact(
            [
                mark_counted(record),
                Update(
                    key=usage_key(org, record["day"], record["channel_id"], shard),
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
    busiest first. One Query (continued past 1 MiB: days x channels x shards items)."""
    totals: dict[str, Item] = {}
    for row in store.query_all(keys.org_pk(org), sk_prefix=f"USAGE#{period}-", consistent=True):
        entry = totals.setdefault(row["channel_id"], {"channel_id": row["channel_id"], "platform": "", "count": 0})
        entry["count"] += int(row.get("messages_sent") or 0)
        entry["platform"] = row.get("platform") or entry["platform"]
    return sorted(totals.values(), key=lambda e: (-e["count"], e["channel_id"]))


def contacts_stored(store: Store, org: str) -> int:
    """The organization's maintained contact count (one consistent GetItem)."""
    return counter.contacts_stored(store, org)
