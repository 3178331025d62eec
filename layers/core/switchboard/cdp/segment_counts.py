"""A segment's `member_count`, counted from the table stream (never inside a membership flip's transaction).

A flip writes or deletes its member row `SEGMENT#<seg>#MEMBER#<ct>` (with its event) and nothing shared; the stream
consumer (`functions/usage_meter`, `count_member_record`) moves the count. Items (all in `ORG#<org>`):
- `SEGCOUNT#<seg>#<shard>` (`SHARDS` items, shard = a hash of the contact id): `members`, only `ADD`ed here. A
  read sums them (one BatchGet for one segment; one BatchGet per ⌈100 / SHARDS⌉ segments for a list) and adds the
  segment item's `member_count`, which holds the members counted before stream counting and no longer moves.
- `TALLY#SEGMEMBER#<seg>#<ct>`: whether the contact is counted as a member (`member`) and `seq`, the stream sequence
  number of the last record applied. Once the contact is counted out the tally keeps `member: false` with a TTL
  (`GONE_TTL`, longer than the stream's 24 h retention), so a replayed record of an older join changes nothing.

Every tally change is one transaction with its shard's `ADD` (conditioned on the tally being as read, and on the
organization not being purged), so each record is applied at most once whatever hands it over: a record whose `seq`
is not above the tally's is skipped. Member rows written since stream counting carry `counted: "stream"`; a row
without it joined under the former in-transaction count, so its INSERT is not counted again (it is in the segment's
`member_count`) and its REMOVE (no tally) takes one off.

A deleted segment's shard rows stay (at 0 once its member rows' REMOVEs are counted) until the organization's purge.
Counting from the stream is eventually consistent: a read just after a flip may not show it yet.
"""

from __future__ import annotations

import zlib
from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.contacts.counter import counting_check
from switchboard.errors import Conflict
from switchboard.store import Put, Store, Update, keys

Item = dict[str, Any]
SHARDS = 8
SHARD_PREFIX = "SEGCOUNT#"
TALLY_PREFIX = "TALLY#SEGMEMBER#"
MEMBER_ENTITY = "SegmentMember"
STREAM = "stream"  # a member row's `counted`: its INSERT and REMOVE are counted from the stream
GONE_TTL = timedelta(days=2)


class _TallyMoved(Conflict):
    pass


class _Purged(Conflict):
    pass


def shard_key(org_id: str, segment_id: str, shard: int) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"{SHARD_PREFIX}{segment_id}#{shard}")


def tally_key(org_id: str, segment_id: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"{TALLY_PREFIX}{segment_id}#{contact_id}")


def shard_of(contact_id: str) -> int:
    return zlib.crc32(contact_id.encode()) % SHARDS


def is_member_row(image: Item | None) -> bool:
    return bool(image) and (image or {}).get("entity") == MEMBER_ENTITY


# The stream consumer ---------------------------------------------------------------------------------------------
def count_member_record(store: Store, event: str, old: Item | None, new: Item | None, seq: str) -> bool:
    """Apply one stream record of a member row (INSERT or REMOVE) to its segment's count; False when it changed
    nothing (a replayed record, or a row that joined before stream counting)."""
    image = new if event == "INSERT" else old if event == "REMOVE" else None
    if image is None:
        return False
    if event == "INSERT" and image.get("counted") != STREAM:
        return False  # joined under the former count: it is in the segment's `member_count`
    org_id = str(image["PK"]).removeprefix("ORG#")
    for _ in range(3):
        try:
            return _apply(store, org_id, image, event == "INSERT", int(seq))
        except _TallyMoved:
            continue
        except _Purged:
            return False
    raise Conflict("The member's tally keeps moving; the stream retries the record.")


def _apply(store: Store, org_id: str, row: Item, joined: bool, seq: int) -> bool:
    segment_id, contact_id = str(row["segment_id"]), str(row["contact_id"])
    key = tally_key(org_id, segment_id, contact_id)
    tally = store.get(key, consistent=True)
    if tally is not None and int(tally.get("seq") or 0) >= seq:
        return False  # applied already
    was_member = bool(tally.get("member")) if tally is not None else row.get("counted") != STREAM
    delta = (1 if joined else -1) if joined != was_member else 0
    item: Item = {**key, "entity": "SegmentMemberTally", "member": joined, "seq": seq}
    if not joined:
        item["ttl"] = clock.epoch(clock.now() + GONE_TTL)
    ops: list[Any] = [
        Put(
            item=item,
            condition="seq = :was" if tally is not None else "attribute_not_exists(PK)",
            values={":was": tally.get("seq") or 0} if tally is not None else None,
            error=_TallyMoved(),
        ),
        counting_check(org_id, _Purged()),
    ]
    if delta:
        ops.append(
            Update(
                key=shard_key(org_id, segment_id, shard_of(contact_id)),
                expression="SET entity = :e ADD members :d",
                values={":e": "SegmentMemberCounter", ":d": delta},
            )
        )
    store.transact(ops)
    return bool(delta)


# Reads -------------------------------------------------------------------------------------------------------------
def with_counts(store: Store, org_id: str, segments: list[Item]) -> list[Item]:
    """The segments with `member_count` = the former count on the item + their shards' sum (one BatchGet of the
    segments' shard rows, ≤ 100 keys per request)."""
    if not segments:
        return []
    wanted = [shard_key(org_id, s["id"], n) for s in segments for n in range(SHARDS)]
    sums: dict[str, int] = {}
    for row in store.batch_get(wanted, projection=("SK", "members")):
        segment_id = str(row["SK"]).removeprefix(SHARD_PREFIX).rpartition("#")[0]
        sums[segment_id] = sums.get(segment_id, 0) + int(row.get("members") or 0)
    return [{**s, "member_count": int(s.get("member_count") or 0) + sums.get(s["id"], 0)} for s in segments]
