"""Metered usage: messages sent per channel and day, and the number of stored contacts.

One usage item per organization, UTC day and channel (`USAGE#<YYYY-MM-DD>#CH#<channel_id>`) holds an atomic
`messages_sent` counter. The sender adds one in the very transaction that moves a message from `pending` to `sent`
(`usage_op`), whose condition on the "from" status makes the count exact: a redelivered queue message or a
concurrent sender cannot count a message twice, and a failed message is never counted. A billing period
(a calendar month) is then one Query on the `USAGE#<YYYY-MM>-` prefix.

Contacts stored are tracked, not counted per read: the organization's contact counter (`COUNTER#CONTACTS`, changed
with `ADD` in the transactions that create and delete contacts) is one consistent GetItem; an organization without
a seeded counter is counted once and seeded (`switchboard.contacts.counter`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from switchboard import clock
from switchboard.store import Store, Update, keys

Item = dict[str, Any]


def usage_key(org: str, day: str, channel_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"USAGE#{day}#CH#{channel_id}")


def usage_op(org: str, channel: Item, at: datetime | None = None) -> Update:
    """The transaction operation that counts one message sent on `channel` (today, UTC)."""
    day = (at or clock.now()).strftime("%Y-%m-%d")
    return Update(
        key=usage_key(org, day, channel["id"]),
        expression="SET #e = :e, channel_id = :c, platform = :p, #d = :d ADD messages_sent :one",
        names={"#e": "entity", "#d": "day"},
        values={":e": "Usage", ":c": channel["id"], ":p": channel.get("platform") or "", ":d": day, ":one": 1},
    )


def messages_sent(store: Store, org: str, period: str) -> list[Item]:
    """Per channel, messages sent in the calendar month `period` (`YYYY-MM`): `[{channel_id, platform, count}]`,
    busiest first. One Query (continued past 1 MiB: days x channels items)."""
    totals: dict[str, Item] = {}
    for row in store.query_all(keys.org_pk(org), sk_prefix=f"USAGE#{period}-", consistent=True):
        entry = totals.setdefault(row["channel_id"], {"channel_id": row["channel_id"], "platform": "", "count": 0})
        entry["count"] += int(row.get("messages_sent") or 0)
        entry["platform"] = row.get("platform") or entry["platform"]
    return sorted(totals.values(), key=lambda e: (-e["count"], e["channel_id"]))


def contacts_stored(store: Store, org: str) -> int:
    """The organization's maintained contact count (one consistent GetItem)."""
    from switchboard.contacts import counter  # the contacts package: only when counting

    return counter.contacts_stored(store, org)
