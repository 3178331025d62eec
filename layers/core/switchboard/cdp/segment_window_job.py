"""The daily schedule and the job of windowed event rules (job kind `segments.window_expiry`): the rows and the
rule are in switchboard.cdp.segment_windows; this module re-evaluates the contacts of a due day's rows."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.cdp import segments
from switchboard.cdp.segment_windows import CATCH_UP_DAYS, KIND, PLATFORM, SHARDS, SWEPT, due_pk
from switchboard.errors import Conflict
from switchboard.jobs import service as jobs
from switchboard.jobs.service import Chunk
from switchboard.store import Store, Update, keys

Item = dict[str, Any]
PAGE = 25  # expiry rows per chunk


# The schedule ------------------------------------------------------------------------------------------------------
class _Moved(Conflict):
    pass


def start_due(store: Store, now: datetime | None = None) -> list[str]:
    """Start the job of every day up to today not started yet; → the job ids. Two schedulers at once: the swept
    day's condition lets one of them start each day."""
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
        jobs.enqueue_committed(store, job.item["id"])
        started.append(str(job.item["id"]))
        last, day = day, _next_day(day)
    return started


def _next_day(day: str) -> str:
    return clock.iso(clock.parse_iso(f"{day}T00:00:00Z") + timedelta(days=1))[:10]


# The job -----------------------------------------------------------------------------------------------------------
def run_chunk(store: Store, job: Item) -> Chunk:
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
