"""Windowed event rules age without any new event: members re-evaluated on the day their counts can fall.

A rule `{"event": "order.placed", "op": "gte", "count": 2, "within_days": 30}` holds for a contact while enough of its
events are younger than the window; once the oldest counted event's day has left the window the count falls, and
the member may have to leave although nothing happened (or, for `lt` / `lte` / `eq` rules and events under `not`, a
non-member may have to join). Nothing else would notice, so every evaluation whose outcome such counts can change
(`segments.watch_day`; `segments.Context.expires`: the first day an event counted by a windowed rule is out of its
window) leaves an expiry row, in the flip's own transaction when the membership changes (all in `ORG#<org>`):

    SK `SEGEXP#<seg>#<ct>#<day>`, GSI1 `SEGEXP#<day>#<shard>` / `<org>#<seg>#<ct>` (shard = a hash of the contact)

so the contacts whose membership can change on a day are found by one GSI1 partition per shard, platform-wide,
without reading any other contact. A member that stays on such counts (a build pass, or the re-evaluation itself)
gets the row of its next such day; a watched non-member gets one each time it is evaluated (at most one per day).
Rows are only ever added for a day after the day they are written (the first counted day is inside the window), so
once a day's job has started no row of that day appears any more.

The schedule (`start_due`, daily, template.yaml `ExpireSegmentWindows`) starts one job of kind `KIND` per day not yet
started (the platform item `SEGEXP#SWEPT` holds the last such day; at most `CATCH_UP_DAYS` back, after an outage of
the schedule), in the transaction
that moves that item on. A chunk reads one page (`PAGE` rows) of the day's shard partition from the checkpoint
`{"day", "shard", "cursor"}`, re-evaluates each row's contact against its segment (`segments.refresh_contact` with
`renew`: a flip when the membership changes, the next expiry row when it stays) and deletes the rows it read; the
last page of the last shard ends the job. Re-evaluating twice changes nothing, so a repeated chunk is harmless.
"""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.errors import Conflict
from switchboard.store import Put, Store, Update, keys

Item = dict[str, Any]
KIND = "segments.window_expiry"
PAGE = 25  # expiry rows per chunk
SHARDS = 8
CATCH_UP_DAYS = 60
PLATFORM = "platform"  # the jobs' organization_id: a day's rows span organizations
SWEPT = keys.key("SEGEXP#SWEPT", "SEGEXP#SWEPT")


def _shard(contact_id: str) -> int:
    return zlib.crc32(contact_id.encode()) % SHARDS


def due_pk(day: str, shard: int) -> str:
    return f"SEGEXP#{day}#{shard}"


def expiry_put(org: str, segment_id: str, contact_id: str, day: str) -> Put:
    """The expiry row of a member whose windowed counts can fall on `day` (idempotent)."""
    return Put(
        item={
            **keys.key(keys.org_pk(org), f"SEGEXP#{segment_id}#{contact_id}#{day}"),
            "entity": "SegmentExpiry",
            "organization_id": org,
            "segment_id": segment_id,
            "contact_id": contact_id,
            "day": day,
            "GSI1PK": due_pk(day, _shard(contact_id)),
            "GSI1SK": f"{org}#{segment_id}#{contact_id}",
        }
    )


# The schedule ------------------------------------------------------------------------------------------------------
class _Moved(Conflict):
    pass


def start_due(store: Store, now: datetime | None = None) -> list[str]:
    """Start the job of every day up to today not started yet; → the job ids. Two schedulers at once: the swept
    day's condition lets one of them start each day."""
    from switchboard.jobs import service as jobs

    today = clock.iso(now or clock.now())[:10]
    floor = clock.iso(clock.parse_iso(f"{today}T00:00:00Z") - timedelta(days=CATCH_UP_DAYS))[:10]
    swept = store.get(SWEPT, consistent=True)
    last = str(swept["day"]) if swept else None
    # no row is ever written for a day before the first run: the first run starts today's job only
    day = _next_day(max(last, floor)) if last is not None else today
    started: list[str] = []
    while day <= today:
        job = jobs.start_op(KIND, PLATFORM, checkpoint={"day": day, "shard": 0, "cursor": None})
        move = Update(
            key=SWEPT,
            expression="SET #d = :day",
            condition="attribute_not_exists(PK)" if last is None else "#d = :last",
            names={"#d": "day"},
            values={":day": day, **({":last": last} if last is not None else {})},
            error=_Moved(),
        )
        try:
            store.transact([move, job])
        except _Moved:  # another run started it
            break
        jobs.enqueue(job.item["id"], 0)
        started.append(str(job.item["id"]))
        last, day = day, _next_day(day)
    return started


def _next_day(day: str) -> str:
    return clock.iso(clock.parse_iso(f"{day}T00:00:00Z") + timedelta(days=1))[:10]


# The job -----------------------------------------------------------------------------------------------------------
def run_chunk(store: Store, job: Item) -> Any:
    from switchboard.cdp import segments
    from switchboard.jobs.service import Chunk

    checkpoint = dict(job.get("checkpoint") or {})
    day, shard = str(checkpoint["day"]), int(checkpoint.get("shard") or 0)
    page = store.query(due_pk(day, shard), index="GSI1", limit=PAGE, start_key=checkpoint.get("cursor"))
    left = joined = 0
    for row in page.items:
        org, segment_id = str(row["organization_id"]), str(row["segment_id"])
        segment = store.get(segments.segment_key(org, segment_id), consistent=True)
        if segment is not None:
            changes = segments.refresh_contact(store, org, str(row["contact_id"]), [segment], renew=True)
            left += sum(1 for _, added in changes if not added)
            joined += sum(1 for _, added in changes if added)
    store.batch_delete([keys.key(r["PK"], r["SK"]) for r in page.items])
    progress = {"rows": len(page.items), "left": left, "joined": joined}
    if page.last_key:
        return Chunk({**checkpoint, "cursor": page.last_key}, progress)
    if shard + 1 < SHARDS:
        return Chunk({**checkpoint, "shard": shard + 1, "cursor": None}, progress)
    return Chunk({**checkpoint, "cursor": None}, progress, done=True)
