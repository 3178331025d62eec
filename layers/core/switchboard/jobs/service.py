"""The one background-job mechanism: chunked, checkpointed, resumable work on SQS, idempotent per chunk.

A job is one item, `JOB#<job_id>` / `JOB`: `kind`, `organization_id`, `status` (`running`, `completed`, `failed`),
`progress` (counters the kind reports), `checkpoint` (where the next chunk starts: the kind's own map, e.g. a
DynamoDB LastEvaluatedKey) and `seq`, the number of the next chunk. While it runs it is also in the sparse GSI1
partition `JOBS#active` (GSI1SK `<updated_at>#<job_id>`), which is how stalled jobs are found without a scan.

Each JobsQueue message `{"job_id", "seq"}` runs one chunk:
1. read the job (consistent); a finished job or a message whose `seq` is not the job's is dropped (a redelivered or
   duplicate message: harmless);
2. run the kind's chunk function from the checkpoint: it does a bounded amount of work (one page) that is safe to
   repeat (deletes, conditional puts);
3. save the new checkpoint, progress and `seq + 1` with the condition `seq = :seq AND status = running`, so of two
   consumers running the same chunk exactly one moves the job on (the other's work was the same and is dropped);
4. send the message for `seq + 1` (none once the kind says it is done).

A crash before 3 leaves the message on the queue: SQS redelivers it and the chunk runs again from the same
checkpoint. A crash between 3 and 4 loses the next message: `resume_stalled` (a schedule every 5 minutes) re-sends the
current `seq` of every running job untouched for `STALLED_AFTER`; `resume` does it for one job (operators, tests).

A job is started by the transaction of the change that needs it (`start_op` in the caller's `Store.transact`); its
first message is sent after the commit with `enqueue_committed`, which never raises: when SQS refuses, the job is
marked due and the next sweep sends it, so a request never fails after its write committed (the same for the next
chunk's message after a checkpoint). A chunk that
keeps failing is retried by SQS, marked `failed` (with the error) on its last receive and then lands in JobsDLQ,
whose alarm pages the operator; `resume` restarts a failed job from its checkpoint.

New kinds register a chunk function in `KINDS` (`"module:function"`, imported on first use).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from switchboard import aws, clock, metrics
from switchboard.config import get_settings
from switchboard.errors import Conflict
from switchboard.ids import new_id
from switchboard.store import Put, Store, keys

logger = Logger(child=True)

Item = dict[str, Any]
RUNNING, COMPLETED, FAILED = "running", "completed", "failed"
JOB_RETENTION = timedelta(days=90)  # a finished job's record stays this long (TTL)
STALLED_AFTER = timedelta(minutes=15)
DUE = "0"  # GSI1SK prefix of a job whose message could not be sent: before every timestamp, so the next sweep takes it
MAX_RECEIVES = 5  # JobsQueue's maxReceiveCount (template.yaml): the last try marks the job failed

KINDS: dict[str, str] = {
    "organization.purge": "switchboard.jobs.purge:run_chunk",
    "segment.build": "switchboard.cdp.segment_build:run_chunk",
    "segment.delete": "switchboard.cdp.segment_delete:run_chunk",
    "tag.cascade": "switchboard.contacts.tag_jobs:run_chunk",
    "label.detach": "switchboard.catalog.label_jobs:run_chunk",
    "contacts.count_seed": "switchboard.contacts.counter:seed_chunk",
    "contacts.merge": "switchboard.contacts.merge:run_chunk",
    "contacts.phone_check": "switchboard.contacts.phone_check:run_chunk",
    "webhooks.recover": "switchboard.webhooks.service:recover_chunk",
    "webhooks.move_legacy": "switchboard.webhooks.service:move_legacy_chunk",
    "segments.window_expiry": "switchboard.cdp.segment_window_job:run_chunk",
    # backfills (switchboard.jobs.backfills), started by an operator per organization
    "contacts.consent_backfill": "switchboard.jobs.backfills:run_chunk",
    "contacts.search_reindex": "switchboard.jobs.backfills:run_chunk",
    "conversations.assignee_reindex": "switchboard.jobs.backfills:run_chunk",
    "channels.legacy_rows": "switchboard.jobs.backfills:run_chunk",
}


@dataclass(frozen=True)
class Chunk:
    """What one chunk did: where the next starts, the counters to add, and whether the job is finished."""

    checkpoint: dict[str, Any]
    progress: dict[str, int] = field(default_factory=dict)
    done: bool = False


ChunkFunction = Callable[[Store, Item], Chunk]


def _chunk_function(kind: str) -> ChunkFunction:
    module, _, name = KINDS[kind].partition(":")
    fn: ChunkFunction = getattr(importlib.import_module(module), name)
    return fn


def _active_sk(updated_at: str, job_id: str) -> str:
    return f"{updated_at}#{job_id}"


def start_op(kind: str, org_id: str, *, job_id: str | None = None, checkpoint: dict[str, Any] | None = None) -> Put:
    """The job's Put (`attribute_not_exists`), for the caller's transaction; `enqueue_committed` after the commit."""
    if kind not in KINDS:
        raise ValueError(f"unknown job kind {kind!r}")
    job_id = job_id or new_id("job")
    now = clock.now_iso()
    item: Item = {
        **keys.job(job_id),
        "entity": "Job",
        "id": job_id,
        "kind": kind,
        "organization_id": org_id,
        "status": RUNNING,
        "progress": {"chunks": 0},
        "checkpoint": checkpoint or {},
        "seq": 0,
        "created_at": now,
        "updated_at": now,
        "GSI1PK": keys.JOBS_ACTIVE,
        "GSI1SK": _active_sk(now, job_id),
    }
    return Put(item=item, condition="attribute_not_exists(PK)", error=Conflict("The job exists already."))


def enqueue(job_id: str, seq: int) -> None:
    aws.client("sqs").send_message(
        QueueUrl=get_settings().jobs_queue_url,
        MessageBody=json.dumps({"job_id": job_id, "seq": seq}, separators=(",", ":")),
    )


def enqueue_committed(store: Store, job_id: str, seq: int = 0) -> bool:
    """Send the message of chunk `seq` of a job whose item is committed already (the request's transaction, a
    checkpoint). Never raises: a failed send is logged, counted (`JobEnqueueFailures`) and the job marked due
    (`DUE`: GSI1SK sorted before every timestamp), so the next sweep (`resume_stalled`, every 5 minutes) sends it —
    the request that committed the job answers its 2xx whatever SQS does. → whether the message went out."""
    try:
        enqueue(job_id, seq)
        return True
    except Exception as err:  # noqa: BLE001 - the job is committed: the sweep sends what SQS refused now
        logger.warning(
            "job message not sent; the sweep sends it",
            extra={"job_id": job_id, "seq": seq, "error_type": type(err).__name__},
        )
        metrics.count("JobEnqueueFailures")
    try:  # without this mark the sweep still finds the job, once untouched for STALLED_AFTER
        store.update(
            keys.job(job_id),
            "SET GSI1SK = :due",
            condition="seq = :seq AND #status = :running",
            names={"#status": "status"},
            values={":due": f"{DUE}#{job_id}", ":seq": seq, ":running": RUNNING},
            return_values="NONE",
        )
    except Exception as err:  # noqa: BLE001 - the job moved on meanwhile, or the table refused too
        logger.warning("job not marked due", extra={"job_id": job_id, "error_type": type(err).__name__})
    return False


def start(store: Store, kind: str, org_id: str, checkpoint: dict[str, Any] | None = None) -> str:
    """Start a job on its own (operators: backfills); → its id."""
    job = start_op(kind, org_id, checkpoint=checkpoint)
    store.transact([job])
    enqueue_committed(store, job.item["id"])
    return str(job.item["id"])


def get_job(store: Store, job_id: str) -> Item | None:
    return store.get(keys.job(job_id), consistent=True)


def run_chunk(store: Store, job_id: str, seq: int, *, send_next: bool = True) -> str:
    """Run chunk `seq` of the job; returns what happened (`chunk`, `completed`, `stale`, `raced`, `finished`).
    `send_next=False`: the caller runs the next chunks itself (a request finishing a small job inline) and sends the
    message of the first it leaves (`enqueue`); a crash meanwhile leaves the job to `resume_stalled`."""
    job = get_job(store, job_id)
    if job is None or job.get("status") != RUNNING:
        return "finished"
    if int(job["seq"]) != seq:
        return "stale"  # a redelivered or duplicate message: its chunk was checkpointed already
    chunk = _chunk_function(job["kind"])(store, job)
    progress = dict(job.get("progress") or {})
    for name, value in {**chunk.progress, "chunks": 1}.items():
        progress[name] = int(progress.get(name, 0)) + int(value)
    now = clock.now()
    values: dict[str, Any] = {
        ":seq": seq,
        ":next": seq + 1,
        ":cp": chunk.checkpoint,
        ":pg": progress,
        ":now": clock.iso(now),
        ":running": RUNNING,
    }
    if chunk.done:
        expression = (
            "SET seq = :next, checkpoint = :cp, progress = :pg, updated_at = :now, #status = :done,"
            " finished_at = :now, #ttl = :ttl REMOVE GSI1PK, GSI1SK"
        )
        values |= {":done": COMPLETED, ":ttl": clock.epoch(now + JOB_RETENTION)}
        names = {"#status": "status", "#ttl": "ttl"}
    else:
        expression = "SET seq = :next, checkpoint = :cp, progress = :pg, updated_at = :now, GSI1SK = :active"
        values[":active"] = _active_sk(clock.iso(now), job_id)
        names = {"#status": "status"}
    try:
        store.update(
            keys.job(job_id),
            expression,
            condition="seq = :seq AND #status = :running",
            names=names,
            values=values,
            error=_Raced(),
            return_values="NONE",
        )
    except _Raced:
        return "raced"  # another consumer checkpointed this chunk first (same work, nothing lost)
    if chunk.done:
        logger.info("job completed", extra={"job_id": job_id, "kind": job["kind"], "progress": progress})
        return COMPLETED
    if send_next:
        enqueue_committed(store, job_id, seq + 1)  # the checkpoint is written: raising would only drop this chunk
    return "chunk"


class _Raced(Conflict):
    pass


def mark_failed(store: Store, job_id: str, seq: int, error: str) -> None:
    """The chunk `seq` failed for the last time (its message goes to the DLQ next): the job shows it, and so does the
    resource when the kind's module has an `on_failed(store, job)` (e.g. a segment's `status: failed`)."""
    try:
        store.update(
            keys.job(job_id),
            "SET #status = :failed, #error = :error, updated_at = :now REMOVE GSI1PK, GSI1SK",
            condition="seq = :seq AND #status = :running",
            names={"#status": "status", "#error": "error"},
            values={
                ":failed": FAILED,
                ":error": error[:500],
                ":now": clock.now_iso(),
                ":seq": seq,
                ":running": RUNNING,
            },
            error=_Raced(),
            return_values="NONE",
        )
    except _Raced:
        return  # the job moved on or ended meanwhile
    job = get_job(store, job_id)
    module = importlib.import_module(KINDS[job["kind"]].partition(":")[0]) if job else None
    on_failed = getattr(module, "on_failed", None)
    if job and on_failed is not None:
        on_failed(store, job)


def resume(store: Store, job_id: str) -> bool:
    """Send the job's current chunk again (a lost message, or a failed job restarted from its checkpoint); False when
    the job is finished or unknown. A duplicate message this creates is dropped by the `seq` check."""
    job = get_job(store, job_id)
    if job is None or job.get("status") == COMPLETED:
        return False
    if job.get("status") == FAILED:
        now = clock.now_iso()
        store.update(
            keys.job(job_id),
            "SET #status = :running, updated_at = :now, GSI1PK = :pk, GSI1SK = :sk REMOVE #error",
            condition="#status = :failed",
            names={"#status": "status", "#error": "error"},
            values={
                ":running": RUNNING,
                ":failed": FAILED,
                ":now": now,
                ":pk": keys.JOBS_ACTIVE,
                ":sk": _active_sk(now, job_id),
            },
            return_values="NONE",
        )
    enqueue(job_id, int(job["seq"]))
    return True


def resume_stalled(store: Store, now: datetime | None = None) -> list[str]:
    """Re-send the current chunk of every running job untouched for `STALLED_AFTER` or marked due because its message
    could not be sent (`enqueue_committed`): GSI1 `JOBS#active`, due ones first, then oldest first, one page of 100
    per run (the JobsFunction schedule runs it every 5 minutes)."""
    cutoff = clock.iso((now or clock.now()) - STALLED_AFTER)
    page = store.query(keys.JOBS_ACTIVE, index="GSI1", sk_between=("0", cutoff), limit=100)
    resumed = []
    for row in page.items:
        if resume(store, row["id"]):
            resumed.append(row["id"])
    return resumed


# The SQS consumer -------------------------------------------------------------------------------------------------
def handle_record(store: Store, record: dict[str, Any]) -> str:
    """One JobsQueue record: its chunk run. Raises when the chunk fails: the consumer's `BatchProcessor` reports the
    record alone (SQS retries it, then the DLQ); on its last allowed receive the job is marked failed first."""
    body: dict[str, Any] = {}
    try:
        body = json.loads(record["body"])
        outcome = run_chunk(store, str(body["job_id"]), int(body["seq"]))
    except Exception as err:  # any failure of a chunk is retried by SQS
        logger.exception("job chunk failed; it will be retried", extra={"message_id": record.get("messageId")})
        receives = int((record.get("attributes") or {}).get("ApproximateReceiveCount", "1"))
        if receives >= MAX_RECEIVES and body.get("job_id") is not None:
            mark_failed(store, str(body["job_id"]), int(body["seq"]), f"{type(err).__name__}: {err}")
        raise
    logger.info("job message", extra={"job_id": body["job_id"], "seq": body["seq"], "outcome": outcome})
    return str(outcome)
