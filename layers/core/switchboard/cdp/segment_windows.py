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

The schedule (`segment_window_job.start_due`, daily, template.yaml `ExpireSegmentWindows`) starts one job of kind
`KIND` per day not yet started (the platform item `SEGEXP#SWEPT` holds the last such day; at most `CATCH_UP_DAYS`
back, after an outage of the schedule), in the transaction that moves that item on. A chunk reads one page of the
day's shard partition from the checkpoint `{"day", "shard", "cursor"}`, re-evaluates each row's contact against its
segment (`segments.refresh_contact` with `renew`: a flip when the membership changes, the next expiry row when it
stays) and deletes the rows it read; the last page of the last shard ends the job. Re-evaluating twice changes
nothing, so a repeated chunk is harmless.
"""

from __future__ import annotations

import zlib
from typing import Any

from switchboard.store import Put, keys

Item = dict[str, Any]
KIND = "segments.window_expiry"
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
