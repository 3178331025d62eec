"""Purging an organization whose deletion window has ended (job kind `organization.purge`).

Started by `start_due_purges` (the daily schedule of JobsFunction): GSI1 `ORGPURGE` lists the organizations pending
deletion by `purge_at`, so the due ones are one query, never a scan. For each, one transaction moves the organization
from `pending_deletion` to `purging` (condition: still pending and due, so a restore that won the race keeps it) and
puts its job; then the job's first message is sent.

Chunks, in this order, each at most one page, each safe to run twice:
1. `objects`: S3 objects of the media bucket under the organization's prefixes (`MEDIA_PREFIXES`), one
   ListObjectsV2 page (≤ 1000 keys) and one DeleteObjects per chunk; checkpoint `{"phase", "prefix"}` (listing
   starts again from the prefix each time: what was deleted is no longer listed).
2. `deliveries`: the organization's items in DeliveriesTable (`webhooks.service.purge_deliveries_chunk`: one page
   of one list shard per chunk, deliveries with their attempts, then event payloads, then the pacing item);
   checkpoint `{"phase", "list", "shard", "cursor"}`.
3. `items`: one Query page (`PAGE` items, consistent) of one of the organization's partitions — each write shard
   `ORG#<org>#<n>` (switchboard.store.shards), then `ORG#<org>` — from the checkpoint's `partition` (its place in
   that list) and `cursor` (the page's LastEvaluatedKey), and BatchWriteItem deletes of those items and of the
   platform-wide items that point at them (`POINTERS`: API key credentials, users' membership mirrors, invitation and
   channel pointers). The organization item (in `ORG#<org>`, the last partition) is kept until the last chunk, which
   deletes it and completes the job.
Items that live outside the partition and are not derivable from an item in it expire by TTL well within the 30-day
window (portal links and sessions ≤ 60 min, rate windows, idempotency records 24 h).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from switchboard import aws, clock
from switchboard.config import get_settings
from switchboard.errors import Conflict
from switchboard.identity.lifecycle import PENDING, PURGING, purge_due_sk
from switchboard.jobs import service
from switchboard.jobs.service import Chunk
from switchboard.messaging import claims
from switchboard.store import Delete, Store, Update, keys, shards

KIND = "organization.purge"
PAGE = 100  # items per chunk (4 BatchWriteItem requests, plus their pointers)
OBJECTS_PAGE = 1000  # S3 keys per chunk (one DeleteObjects request)
Item = dict[str, Any]


def media_prefixes(org_id: str) -> tuple[str, ...]:
    """Every S3 prefix the organization's objects live under (messaging.media: uploads and downloaded media)."""
    return (f"assets/{org_id}/", f"media/{org_id}/")


def _channel_pointer(org_id: str, item: Item) -> dict[str, str] | None:
    if item.get("entity") != "Channel":
        return None  # CHANNEL#<id>#LOG#…, #BLOCK#… rows have no pointer
    return keys.key(f"CHANNEL#{item['id']}", "CHANNEL")


# SK prefix of an item in the organization's partition → the platform-wide item that points at it (None: none).
# A new platform-wide item that names an organization must be added here (or expire by TTL within the window).
def _cloud_claims(org_id: str, item: Item) -> list[dict[str, str]]:
    """A Cloud API channel's platform-wide `phone_number_id` claim and verify-token index row."""
    if item.get("entity") != "Channel" or item.get("platform") != "whatsapp_cloud":
        return []
    return [op.key for op in claims.claim_ops(item, None) if isinstance(op, Delete)]


POINTERS: tuple[tuple[str, Callable[[str, Item], dict[str, str] | list[dict[str, str]] | None]], ...] = (
    ("APIKEY#", lambda org, i: keys.credential(i["token_hash"]) if i.get("token_hash") else None),
    ("MEMBER#", lambda org, i: keys.key(keys.user_pk(i["user_id"]), f"MEMBERSHIP#{org}")),
    ("INVITE#", lambda org, i: keys.key(f"INVITE#{i['id']}", "INVITE") if i.get("id") else None),
    ("CHANNEL#", _channel_pointer),
    ("CHANNEL#", _cloud_claims),
)


def pointers_of(org_id: str, item: Item) -> list[dict[str, str]]:
    sk = str(item["SK"])
    found: list[dict[str, str]] = []
    for prefix, build in POINTERS:
        if sk.startswith(prefix):
            built = build(org_id, item)
            found += built if isinstance(built, list) else [built] if built is not None else []
    return found


def start_due_purges(store: Store, now: datetime | None = None) -> list[str]:
    """Start the purge of every organization whose `purge_at` has passed (one page of 100 per run); returns the job
    ids started. A job whose first message was lost is picked up by `service.resume_stalled`."""
    now_iso = clock.iso(now or clock.now())
    page = store.query(keys.PURGE_DUE, index="GSI1", sk_between=("0", f"{now_iso}#~"), limit=100)
    started: list[str] = []
    for row in page.items:
        org_id = row["id"]
        job = service.start_op(KIND, org_id, checkpoint={"phase": "objects", "prefix": 0})
        try:
            store.transact(
                [
                    Update(
                        key=keys.organization(org_id),
                        expression="SET #status = :purging, purge_job_id = :job, updated_at = :now"
                        " REMOVE GSI1PK, GSI1SK",
                        condition="#status = :pending AND purge_at <= :now AND GSI1SK = :sk",
                        names={"#status": "status"},
                        values={
                            ":purging": PURGING,
                            ":pending": PENDING,
                            ":job": job.item["id"],
                            ":now": now_iso,
                            ":sk": purge_due_sk(row["purge_at"], org_id),
                        },
                        error=Conflict("The organization is no longer due for purging."),
                    ),
                    job,
                ]
            )
        except Conflict:
            continue  # restored meanwhile, or another sweep started it
        service.enqueue_committed(store, job.item["id"])
        started.append(job.item["id"])
    return started


def run_chunk(store: Store, job: Item) -> Chunk:
    org_id = str(job["organization_id"])
    checkpoint = dict(job.get("checkpoint") or {})
    if checkpoint.get("phase", "objects") == "objects":
        return _objects_chunk(org_id, int(checkpoint.get("prefix", 0)))
    if checkpoint["phase"] == "deliveries":
        # the deliveries phase only: keeps switchboard.webhooks.service off the jobs function's cold start
        from switchboard.webhooks.service import purge_deliveries_chunk

        after, deleted = purge_deliveries_chunk(org_id, checkpoint)
        progress = {"items_deleted": deleted}
        return Chunk({"phase": "deliveries", **after} if after else {"phase": "items"}, progress)
    cursor = checkpoint.get("cursor")
    partitions = shards.all_pks(org_id)
    # a checkpoint from before sharding (a cursor, no partition) continues in the legacy partition
    part = int(checkpoint.get("partition", len(partitions) - 1 if cursor else 0))
    return _items_chunk(store, org_id, partitions, part, cursor)


def _objects_chunk(org_id: str, index: int) -> Chunk:
    prefixes = media_prefixes(org_id)
    if index >= len(prefixes):
        return Chunk({"phase": "deliveries"})
    s3 = aws.client("s3")
    bucket = get_settings().media_bucket
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefixes[index], MaxKeys=OBJECTS_PAGE)
    names = [o["Key"] for o in listed.get("Contents") or []]
    if names:
        result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": n} for n in names], "Quiet": True})
        if result.get("Errors"):
            raise RuntimeError(f"{len(result['Errors'])} media objects could not be deleted")
    more = bool(listed.get("IsTruncated"))
    return Chunk({"phase": "objects", "prefix": index if more else index + 1}, {"objects_deleted": len(names)})


def _items_chunk(store: Store, org_id: str, partitions: list[str], part: int, cursor: dict[str, Any] | None) -> Chunk:
    page = store.query(partitions[part], limit=PAGE, start_key=cursor, consistent=True)
    doomed: list[dict[str, str]] = []
    for item in page.items:
        if item["SK"] == "ORG":
            continue  # the organization item goes last
        doomed.append(keys.key(item["PK"], item["SK"]))
        doomed += pointers_of(org_id, item)
    store.batch_delete(doomed)
    progress = {"items_deleted": len(doomed)}
    if page.last_key:
        return Chunk({"phase": "items", "partition": part, "cursor": page.last_key}, progress)
    if part + 1 < len(partitions):
        return Chunk({"phase": "items", "partition": part + 1}, progress)
    store.batch_delete([keys.organization(org_id)])
    progress["items_deleted"] += 1
    return Chunk({"phase": "done"}, progress, done=True)
