"""Counting stream records once: the item a stream record carries is marked `counted` in the very transaction that
adds it to its counters, on condition that it was not marked before, so a record the stream hands over twice (or a
redelivered batch) adds nothing the second time. Used by the usage meter's record kinds (usage records, stage
changes)."""

from __future__ import annotations

from typing import Any

from switchboard.errors import Conflict
from switchboard.store import Update, keys


class AlreadyCounted(Conflict):
    """The item was counted before: the stream handed its record over again."""


def mark_counted(item: dict[str, Any]) -> Update:
    """The transaction operation that marks `item` counted; its transaction is refused with `AlreadyCounted` when it
    was counted already, or when the item is gone (an expired or purged record counts nothing)."""
    return Update(
        key=keys.key(item["PK"], item["SK"]),
        expression="SET counted = :t",
        condition="attribute_exists(PK) AND attribute_not_exists(counted)",
        values={":t": True},
        error=AlreadyCounted(),
    )
