"""Removing a deleted segment's rows (job kind `segment.delete`, switchboard.jobs).

`DELETE /v1/cdp/segments/{id}` deletes the segment item and writes the audit record (`cdp.segment.deleted`, with
the job id) and this job in one transaction: from then on the segment answers 404, a running build stops at its next
chunk (its generation check finds no segment) and the incremental path no longer sees it. Checkpoint
`{"segment_id", "phase": "members" | "expiry"}`; each chunk deletes one consistent page of `PAGE` rows, the member rows
`SEGMENT#<seg>#MEMBER#` (their stream REMOVEs take them off the shard counters), then the expiry rows
`SEGEXP#<seg>#`. Rows done are gone, so each chunk starts from the first row left and a repeated chunk finds nothing.
"""

from __future__ import annotations

from typing import Any

from switchboard.jobs.service import Chunk
from switchboard.store import Store, keys

KIND = "segment.delete"
PAGE = 100  # rows per chunk (four BatchWriteItem calls)
PREFIXES = {"members": "SEGMENT#{}#MEMBER#", "expiry": "SEGEXP#{}#"}
Item = dict[str, Any]


def run_chunk(store: Store, job: Item) -> Chunk:
    org = str(job["organization_id"])
    checkpoint = dict(job.get("checkpoint") or {})
    phase = str(checkpoint.get("phase", "members"))
    prefix = PREFIXES[phase].format(checkpoint["segment_id"])
    page = store.query(keys.org_pk(org), sk_prefix=prefix, limit=PAGE, consistent=True)
    store.batch_delete([keys.key(row["PK"], row["SK"]) for row in page.items])
    progress = {f"{phase}_deleted": len(page.items)}
    if page.items and page.last_key is not None:
        return Chunk(checkpoint, progress)
    if phase == "members":
        return Chunk({**checkpoint, "phase": "expiry"}, progress)
    return Chunk({**checkpoint, "phase": "done"}, progress, done=True)
