"""Building a segment's membership in full (job kind `segment.build`, switchboard.jobs).

Started by a segment's create, or by a PATCH that changes its rules (or an empty PATCH), in the transaction that
writes the segment with `status: building` and a new `build_generation`. Checkpoint `{"segment_id", "generation",
"phase", "cursor", "scanned"}`; every chunk first reads the segment (consistent) and stops the job when the segment is
gone or its generation is no longer the job's (the rules changed: a newer build owns the membership).

Phases, each chunk at most one page:
1. `scan`: one page (up to `PAGE` contacts) of the organization's contact list from `cursor`, a walk over its GSI1
   partitions `ORG#<org>#CONTACTS` (legacy) and `ORG#<org>#CONTACTS#<shard>` (`contacts.repository.walk_page`, whose
   checkpoint `cursor` holds; a page may be short where a partition ends), one consistent BatchGet of their
   member rows; every contact whose evaluation differs from its membership is flipped. Flips are written
   `FLIPS_PER_TX` per transaction: per contact the member row (conditional: a change happens once), a check that the
   contact's `updated_at` is still the one evaluated, its `crm.list.entry_added|removed` event and, when windowed
   event counts can change its membership as they age (`segments.watch_day`), its expiry row (contacts that stay as
   they are get theirs too); plus one
   ConditionCheck `build_generation = <the job's>` on the segment, placed first so a rules change cancels the whole
   write (the build is the segment's only writer of such transactions: no flip of the incremental path holds it).
   A contact changed since the page was read is left to the incremental path
   (its `contact.updated` event comes after the change and re-evaluates it against the current rules); a member row
   already flipped by that path is skipped. So running a chunk twice writes nothing the second time.
2. `sweep`: one consistent page of the member rows (`SEGMENT#<seg>#MEMBER#`) and a BatchGet of their contacts; rows of
   contacts that no longer exist are removed the same way (with a check that the contact is still absent).
   The last page sets `status: ready`, `built_at` and drops the progress (condition: same generation).

`member_count` is counted from the stream of the member rows (switchboard.cdp.segment_counts): it equals the member
rows once the stream has been read. The segment's `progress.contacts_scanned` is set from the
checkpoint (an absolute value: a repeated chunk sets the same number). A chunk failing on every try leaves the
segment `status: failed` (`on_failed`); `python -m switchboard.jobs resume <job_id>` continues the build.
"""

from __future__ import annotations

import contextlib
from typing import Any

from switchboard import clock
from switchboard.cdp import segment_windows, segments
from switchboard.contacts import repository as contact_repo
from switchboard.errors import Conflict
from switchboard.jobs.service import Chunk
from switchboard.store import ConditionCheck, Store, TxOp, keys

KIND = segments.BUILD_JOB
PAGE = 100  # contacts (scan) or member rows (sweep) per chunk
FLIPS_PER_TX = 24  # ≤ 4 operations each (+ an expiry row), plus the segment's generation check: ≤ 100
Item = dict[str, Any]
Flip = tuple[str, bool, TxOp, "str | None"]  # contact id, join?, the check of the contact, its expiry day


class _Superseded(Conflict):
    """The segment was deleted or its rules changed: this build's decisions are no longer wanted."""


class _Moved(Conflict):
    """The contact changed (or came back) since it was evaluated: the incremental path decides for it."""


def run_chunk(store: Store, job: Item) -> Chunk:
    org = str(job["organization_id"])
    checkpoint = dict(job.get("checkpoint") or {})
    generation = int(checkpoint["generation"])
    segment = store.get(segments.segment_key(org, checkpoint["segment_id"]), consistent=True)
    if segment is None or int(segment.get("build_generation", 0)) != generation:
        return Chunk({**checkpoint, "phase": "superseded"}, {"superseded": 1}, done=True)
    try:
        if checkpoint.get("phase") == "sweep":
            return _sweep(store, org, segment, checkpoint)
        return _scan(store, org, segment, checkpoint)
    except _Superseded:
        return Chunk({**checkpoint, "phase": "superseded"}, {"superseded": 1}, done=True)


def on_failed(store: Store, job: Item) -> None:
    """The build's chunk failed on every try (jobs.service.mark_failed): the segment shows `status: failed` until
    `resume` runs the chunk again (its next progress write sets `building`) or a new build starts."""
    checkpoint = job.get("checkpoint") or {}
    with contextlib.suppress(_Superseded):  # a newer build owns the segment, or it was deleted
        store.update(
            segments.segment_key(str(job["organization_id"]), checkpoint["segment_id"]),
            "SET #status = :failed",
            condition="build_generation = :g",
            names={"#status": "status"},
            values={":failed": segments.FAILED, ":g": int(checkpoint["generation"])},
            error=_Superseded(),
            return_values="NONE",
        )


def _scan(store: Store, org: str, segment: Item, checkpoint: Item) -> Chunk:
    contacts, following = contact_repo.walk_page(store, org, checkpoint.get("cursor"), limit=PAGE)
    current = {
        r["contact_id"]
        for r in store.batch_get([segments.member_key(org, segment["id"], c["id"]) for c in contacts], consistent=True)
    }
    flips: list[Flip] = []
    kept: list[TxOp] = []  # contacts that stay as they are on windowed event counts: their next expiry row
    for contact in contacts:
        ctx = segments.Context(store, org, contact)
        wanted = segments.evaluate(segment["rules"], ctx)
        day = segments.watch_day(segment, ctx, wanted)
        if wanted != (contact["id"] in current):
            seen = ConditionCheck(
                key=contact_repo.contact_key(org, contact["id"]),
                condition="updated_at = :seen",
                values={":seen": contact["updated_at"]},
                error=_Moved(),
            )
            flips.append((contact["id"], wanted, seen, day))
        elif day is not None:
            kept.append(segment_windows.expiry_put(org, segment["id"], contact["id"], day))
    for start in range(0, len(kept), 100):
        store.transact(kept[start : start + 100])  # idempotent Puts
    added, removed = _write(store, org, segment, flips)
    scanned = int(checkpoint.get("scanned", 0)) + len(contacts)
    _progress(store, org, segment, scanned)
    progress = {"contacts_scanned": len(contacts), "added": added, "removed": removed}
    if following is not None:
        return Chunk({**checkpoint, "cursor": following, "scanned": scanned}, progress)
    return Chunk({**checkpoint, "phase": "sweep", "cursor": None, "scanned": scanned}, progress)


def _sweep(store: Store, org: str, segment: Item, checkpoint: Item) -> Chunk:
    page = store.query(
        keys.org_pk(org),
        sk_prefix=segments.member_prefix(segment["id"]),
        limit=PAGE,
        start_key=checkpoint.get("cursor"),
        consistent=True,
    )
    present = {
        c["id"]
        for c in store.batch_get(
            [contact_repo.contact_key(org, r["contact_id"]) for r in page.items], consistent=True, projection=("id",)
        )
    }
    flips: list[Flip] = [
        (
            r["contact_id"],
            False,
            ConditionCheck(
                key=contact_repo.contact_key(org, r["contact_id"]),
                condition="attribute_not_exists(PK)",
                error=_Moved(),
            ),
            None,
        )
        for r in page.items
        if r["contact_id"] not in present
    ]
    _, removed = _write(store, org, segment, flips)
    if page.last_key:
        return Chunk({**checkpoint, "cursor": page.last_key}, {"removed": removed})
    store.update(
        segments.segment_key(org, segment["id"]),
        "SET #status = :ready, built_at = :now REMOVE progress",
        condition="build_generation = :g",
        names={"#status": "status"},
        values={":ready": segments.READY, ":now": clock.now_iso(), ":g": segment["build_generation"]},
        error=_Superseded(),
        return_values="NONE",
    )
    return Chunk({**checkpoint, "phase": "done", "cursor": None}, {"removed": removed}, done=True)


def _progress(store: Store, org: str, segment: Item, scanned: int) -> None:
    """The resource shows how far the build is (and `building` again after a failed build was resumed)."""
    store.update(
        segments.segment_key(org, segment["id"]),
        "SET #status = :building, progress = :p",
        condition="build_generation = :g",
        names={"#status": "status"},
        values={":building": segments.BUILDING, ":p": {"contacts_scanned": scanned}, ":g": segment["build_generation"]},
        error=_Superseded(),
        return_values="NONE",
    )


def _write(store: Store, org: str, segment: Item, flips: list[Flip]) -> tuple[int, int]:
    """Writes the flips in batches; a batch cancelled by one contact (changed meanwhile, or flipped by the incremental
    path) is written one flip at a time, so each of the others still happens once. → (added, removed)."""
    done: list[bool] = []
    for start in range(0, len(flips), FLIPS_PER_TX):
        part = flips[start : start + FLIPS_PER_TX]
        try:
            store.transact(_ops(org, segment, part))
            done += [flip[1] for flip in part]
        except (segments.Unchanged, _Moved):
            for flip in part:
                try:
                    store.transact(_ops(org, segment, [flip]))
                except (segments.Unchanged, _Moved):
                    continue
                done.append(flip[1])
    return sum(done), len(done) - sum(done)


def _ops(org: str, segment: Item, part: list[Flip]) -> list[TxOp]:
    ops: list[TxOp] = [segments.generation_check(org, segment, _Superseded())]
    for contact_id, join, check, expires in part:
        ops += [*segments.flip_ops(org, segment, contact_id, join, expires), check]
    return ops
