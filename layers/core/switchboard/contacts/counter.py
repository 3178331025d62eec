"""The number of contacts an organization stores, maintained (billing reads it on every usage answer).

One item per organization, `ORG#<org>` / `COUNTER#CONTACTS`: `contacts` is changed with `ADD` inside the very
`TransactWriteItems` that creates or deletes a contact item (create and upsert, contacts import, merge, delete), next
to that item's own condition (`attribute_not_exists(PK)` / `version = :read`), so the count moves if and only if the
contact really appeared or went: exact under concurrent writers and retried or cancelled transactions, and no extra
round trip on the write path (one more operation in a transaction it already makes). Every such change also adds
one to `changes`, which only ever grows.

Organizations that stored contacts before the counter existed (`seeded_at` absent: no item, or one holding only
the changes made since) are counted once, on the first read: a consistent Query of the contact items (base table,
`CONTACT#` prefix, `entity = Contact`, `Select=COUNT`) between a consistent read of the counter and a conditional
write of the result, `SET contacts = <count>, seeded_at` on condition that `changes` is still what was read (and
`seeded_at` absent). A contact created or deleted meanwhile moves `changes`, the write is refused, and the count is
taken again (at most `SEED_ATTEMPTS` times; after that the read answers the fresh count unseeded and a later read
seeds). From then on a read is one consistent GetItem.
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.errors import Conflict
from switchboard.store import Store, TxOp, Update, keys

Item = dict[str, Any]
COUNTER_SK = "COUNTER#CONTACTS"
SEED_ATTEMPTS = 3


def counter_key(org_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), COUNTER_SK)


def count_op(org_id: str, delta: int) -> Update:
    """The transaction operation that records `delta` contacts created (> 0) or deleted (< 0)."""
    return Update(
        key=counter_key(org_id),
        expression="SET #e = :e ADD contacts :d, changes :one",
        names={"#e": "entity"},
        values={":e": "ContactCounter", ":d": delta, ":one": 1},
    )


def merge_count_ops(org_id: str, ops: list[TxOp]) -> list[TxOp]:
    """`ops` of several contact writes joined into one transaction (a contacts import batch), their counter updates
    folded into one: a transaction may touch an item only once."""
    key, delta, kept, found = counter_key(org_id), 0, [], False
    for op in ops:
        if isinstance(op, Update) and op.key == key:
            delta += int((op.values or {})[":d"])
            found = True
        else:
            kept.append(op)
    if found and delta:
        kept.append(count_op(org_id, delta))
    return kept


def _counted(store: Store, org_id: str) -> int:
    """The organization's contact items, counted on the base table (consistent; pages of 1 MiB)."""
    return store.count(
        keys.org_pk(org_id),
        sk_prefix="CONTACT#",
        consistent=True,
        filter_expression="#e = :entity",
        names={"#e": "entity"},
        values={":entity": "Contact"},
    )


def contacts_stored(store: Store, org_id: str) -> int:
    """The organization's contacts: one consistent GetItem once seeded (see the module's note for the first read)."""
    item = store.get(counter_key(org_id), consistent=True)
    count = 0
    for _ in range(SEED_ATTEMPTS):
        if item is not None and item.get("seeded_at"):
            return int(item.get("contacts") or 0)
        values: dict[str, Any] = {":e": "ContactCounter", ":now": clock.now_iso()}
        unchanged = "attribute_not_exists(changes)"
        if item is not None and "changes" in item:
            values[":c"], unchanged = int(item["changes"]), "changes = :c"
        values[":n"] = count = _counted(store, org_id)
        try:
            store.update(
                counter_key(org_id),
                "SET #e = :e, contacts = :n, seeded_at = :now",
                condition=f"attribute_not_exists(seeded_at) AND {unchanged}",
                names={"#e": "entity"},
                values=values,
                return_values="NONE",
            )
            return count
        except Conflict:  # a contact was created or deleted meanwhile, or another read seeded it
            item = store.get(counter_key(org_id), consistent=True)
    return count
