"""Merging one contact into another, whatever the source holds: the pointer first, then chunked moves (job kind
`contacts.merge`, switchboard.jobs).

`POST /v1/contacts/{id}/merge` (`merge`) reads both contacts and writes, in one transaction of at most 100
operations: the target with the merged fields (identities, tags, attributes, consent: the source's own items say
what it holds, so no child is read), the source's Delete (version condition) with its search rows, the merge pointer
`MERGED#CONTACT#<source>` (→ `target_id`), as many of the source's identity sentinels re-pointed to the target as the
transaction has room for, the audit entry, `contact.updated` and the job. From then on the source reads as 404 and
every identity of it resolves to the target: a sentinel still naming the source is followed through the pointer
(`service.live_owner`), so nothing can claim it meanwhile.

The job moves the rest, one bounded chunk at a time (each safe to run twice), from the checkpoint
`{"source_id", "target_id", "phase", "pending": [sentinel SKs], "cursor"}`:

  identities  `IDENTITIES_PER_CHUNK` sentinels re-pointed (UpdateItem, condition `contact_id = <source>`)
  children    Query `CONTACT#<source>#` (`CHILDREN_PER_CHUNK`, consistent, from the start: moved rows are gone) + one
              BatchGet of the same suffixes under the target and of the log rows the activities and stage changes
              mirror (`CDPACT#`, `CDPSTAGELOG#` in the partition their `log_pk` names: switchboard.cdp.logs); one
              transaction: each child Put under the target (unless the target has its own: the target's wins) and
              Deleted, a tag's reverse row moved along, a log row's `contact_id` set to the target
  orders      the source's orders (GSI3 `ORG#<org>#CONTACTORDERS#<source>`, 25 a chunk) given to the target
              (`commerce.orders.move_contact_page`; made anonymous instead when the target is gone)
  segments    Query `CDPSEG#` (25 from `cursor`): the source leaves them (`segments.refresh_contact`)
  done        the pointer `status: merged` (it stays: ids only, for identities resolved later)

Each identities / children chunk first reads the target (consistent): once it is deleted, what is left of the source
is deleted instead of moved (sentinels on condition they still name the source), so nothing of the person outlives
the target's erasure (a log row, and an activity's event-id sentinel, go with their contact row). A target deleted
while a chunk runs can still receive that chunk's moves (not handled).

The request runs up to `INLINE_CHUNKS` chunks itself (a merge of an ordinary contact completes before it answers);
the rest runs on the JobsQueue.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.cdp import logs, segments
from switchboard.cdp.events import event_sentinel
from switchboard.contacts import models, search
from switchboard.contacts import repository as repo
from switchboard.contacts.identifiers import Identifier
from switchboard.contacts.service import get_item, view, write_ops
from switchboard.errors import Conflict, ValidationFailed
from switchboard.jobs import service as jobs
from switchboard.store import Delete, Put, Store, TxOp, Update

logger = Logger(child=True)

Item = dict[str, Any]
KIND = "contacts.merge"
IDENTITIES_PER_CHUNK = 25
CHILDREN_PER_CHUNK = 20  # ≤ 4 operations each (Put, Delete, a tag's two reverse rows or a log row): ≤ 80 in all
SEGMENTS_PER_CHUNK = 25
INLINE_CHUNKS = 4
TX_LIMIT = 100


class _Repointed(Conflict):
    """The sentinel no longer names the source (released or re-pointed already)."""


def _consent_of(store: Store, org: str, contact: Item) -> dict[str, str]:
    kept = contact.get("consent")
    if isinstance(kept, dict):
        return {str(k): str(v) for k, v in kept.items()}
    rows = store.query_all(f"ORG#{org}", sk_prefix=repo.child_prefix(contact["id"], "CONSENT#"), consistent=True)
    return {r["channel"]: r["status"] for r in rows}


def merge(store: Store, auth: AuthContext, target_id: str, body: models.MergeRequest) -> models.Contact:
    org = auth.org_id
    if body.from_contact_id == target_id:
        raise ValidationFailed.field("body.from_contact_id", "must differ from the target contact")
    target = get_item(store, org, target_id, consistent=True)
    source = get_item(store, org, body.from_contact_id, consistent=True)
    merged = dict(target)
    for field in ("name", "first_name", "last_name", "email", "phone", "company", "avatar_url", "lifecycle_stage"):
        merged[field] = target.get(field) or source.get(field)
    merged["attributes"] = {**(source.get("attributes") or {}), **(target.get("attributes") or {})}
    merged["tags"] = list(dict.fromkeys([*target.get("tags", []), *source.get("tags", [])]))
    merged["identities"] = [*target.get("identities", []), *source.get("identities", [])]
    merged["blocked"] = bool(target.get("blocked") or source.get("blocked"))
    merged["consent"] = {**_consent_of(store, org, source), **_consent_of(store, org, target)}
    sentinels = [Identifier(i["type"], i["value"], i.get("source")).sentinel_sk for i in source.get("identities", [])]
    checkpoint: Item = {"source_id": source["id"], "target_id": target_id, "phase": "identities", "cursor": None}
    job = jobs.start_op(KIND, org, checkpoint=checkpoint)
    fixed: list[TxOp] = [
        Delete(
            key=repo.contact_key(org, source["id"]),
            condition="#v = :v",
            names={"#v": "version"},
            values={":v": source["version"]},
            error=Conflict("The merged contact changed; retry."),
        ),
        *search.index_ops(org, source, None),
        Put(
            item={
                **repo.merged_key(org, source["id"]),
                "entity": "ContactMerge",
                "source_id": source["id"],
                "target_id": target_id,
                "status": "merging",
                "job_id": job.item["id"],
                "merged_at": clock.now_iso(),
            },
            condition="attribute_not_exists(PK)",
        ),
        audit_put(
            auth,
            "contact.merged",
            "contact",
            target_id,
            before={"from_contact_id": source["id"], "from_name": source.get("name")},
            after={"identities": len(merged["identities"])},
        ),
    ]
    new, target_ops = write_ops(auth, target, merged, fixed, ["merged", "identities"], "merged")
    room = TX_LIMIT - len(target_ops) - 1  # the job's Put
    now, later = sentinels[:room], sentinels[room:]
    job.item["checkpoint"] = {**checkpoint, "pending": later}
    store.transact([*target_ops, *(_repoint(org, sk, source["id"], target_id) for sk in now), job])
    _run_inline(store, str(job.item["id"]))
    return view(new)


def _run_inline(store: Store, job_id: str) -> None:
    """The first chunks of the committed merge, in the request; the job (its queue message) does the rest. A chunk
    that fails here (a busy table) is left to the job too: the merge is committed, the request answers."""
    for seq in range(INLINE_CHUNKS):
        try:
            outcome = jobs.run_chunk(store, job_id, seq, send_next=False)
        except Exception as err:  # noqa: BLE001 - the chunk runs again from the job's queue message
            logger.warning("merge chunk left to the job", extra={"job_id": job_id, "error_type": type(err).__name__})
            jobs.enqueue_committed(store, job_id, seq)
            return
        if outcome != "chunk":
            return  # completed (or another consumer moved the job on)
    jobs.enqueue_committed(store, job_id, INLINE_CHUNKS)


def _repoint(org: str, sentinel_sk: str, source_id: str, target_id: str) -> Update:
    return Update(
        key=repo.sentinel_key(org, sentinel_sk),
        expression="SET contact_id = :to",
        condition="contact_id = :from",
        values={":to": target_id, ":from": source_id},
        error=_Repointed(),
    )


# The job ---------------------------------------------------------------------------------------------------------
def run_chunk(store: Store, job: Item) -> Any:
    from switchboard.jobs.service import Chunk

    org = str(job["organization_id"])
    checkpoint = dict(job.get("checkpoint") or {})
    source_id, target_id = str(checkpoint["source_id"]), str(checkpoint["target_id"])
    phase = checkpoint.get("phase", "identities")
    # the target deleted meanwhile (its erasure may have passed already): what is left of the source is deleted,
    # not moved under a contact that no longer exists
    alive = phase in ("identities", "children", "orders") and store.get(
        repo.contact_key(org, target_id), consistent=True
    )
    if phase == "identities":
        pending = list(checkpoint.get("pending") or [])
        for sentinel_sk in pending[:IDENTITIES_PER_CHUNK]:
            try:
                if alive:
                    store.transact([_repoint(org, sentinel_sk, source_id, target_id)])
                else:
                    store.delete(
                        repo.sentinel_key(org, sentinel_sk),
                        condition="contact_id = :from",
                        values={":from": source_id},
                        error=_Repointed(),
                    )
            except _Repointed:
                continue
        rest = pending[IDENTITIES_PER_CHUNK:]
        moved = len(pending) - len(rest)
        if rest:
            return Chunk({**checkpoint, "pending": rest}, {"identities": moved})
        return Chunk({**checkpoint, "pending": [], "phase": "children"}, {"identities": moved})
    if phase == "children":
        count = _move_children(store, org, source_id, target_id, move=bool(alive))
        if count:
            return Chunk(checkpoint, {"children": count})
        return Chunk({**checkpoint, "phase": "orders", "cursor": None})
    if phase == "orders":
        # job phase: switchboard.commerce.orders loads when a merge's chunk runs, not for the contacts routes
        from switchboard.commerce import orders

        cursor = orders.move_contact_page(store, org, source_id, target_id if alive else None, checkpoint.get("cursor"))
        if cursor:
            return Chunk({**checkpoint, "cursor": cursor})
        return Chunk({**checkpoint, "phase": "segments", "cursor": None})
    if phase == "segments":
        page = store.query(
            f"ORG#{org}", sk_prefix="CDPSEG#", limit=SEGMENTS_PER_CHUNK, start_key=checkpoint.get("cursor")
        )
        if page.items:  # the source is gone: it leaves each of these segments
            segments.refresh_contact(store, org, source_id, segments=page.items)
        if page.last_key:
            return Chunk({**checkpoint, "cursor": page.last_key})
    store.update(
        repo.merged_key(org, source_id),
        "SET #status = :merged, finished_at = :now",
        names={"#status": "status"},
        values={":merged": "merged", ":now": clock.now_iso()},
        return_values="NONE",
    )
    return Chunk({**checkpoint, "phase": "done", "cursor": None}, done=True)


def _move_children(store: Store, org: str, source_id: str, target_id: str, *, move: bool = True) -> int:
    """One page of the source's children moved under the target (see the module's note), or only deleted when the
    target is gone (`move=False`); → how many were read."""
    page = store.query(f"ORG#{org}", sk_prefix=repo.child_prefix(source_id), limit=CHILDREN_PER_CHUNK, consistent=True)
    if not page.items:
        return 0
    suffixes = {c["SK"]: c["SK"].split("#", 2)[2] for c in page.items}  # e.g. NOTE#note_…, TAG#tag_…
    mirrors = {c["SK"]: m for c in page.items if (m := logs.mirror_key(org, c)) is not None}
    wanted = [repo.child_key(org, target_id, *s.split("#", 1)) for s in suffixes.values()] if move else []
    found = store.batch_get([*wanted, *mirrors.values()] if move else [], consistent=True)
    taken = {t["SK"].split("#", 2)[2] for t in found if t["SK"].startswith("CONTACT#")}
    logged = {(t["PK"], t["SK"]) for t in found}
    ops: list[TxOp] = []
    for child in page.items:
        suffix = suffixes[child["SK"]]
        ops.append(Delete(key={"PK": child["PK"], "SK": child["SK"]}))
        if child.get("entity") == "ContactTag":
            ops.append(Delete(key=repo.tag_reverse_key(org, child["tag_id"], source_id)))
        log = mirrors.get(child["SK"])
        if not move:  # the target is gone: the source's rows go, with the log rows and sentinels they own
            if log is not None:
                ops.append(Delete(key=log))
            if child.get("entity") == "Activity" and child.get("event_id"):
                ops.append(Delete(key=event_sentinel(org, child["event_id"])))
            continue
        if log is not None and (log["PK"], log["SK"]) in logged:  # the organization's log names the target now
            ops.append(
                Update(
                    key=log,
                    expression="SET contact_id = :to",
                    condition="attribute_exists(PK)",
                    values={":to": target_id},
                )
            )
        if suffix in taken:
            continue  # the target's own tag, consent or suppression for the same thing wins
        moved = {**child, "SK": f"CONTACT#{target_id}#{suffix}"}  # `log_pk` moves along: the log row stays put
        if "contact_id" in moved:
            moved["contact_id"] = target_id
        ops.append(Put(item=moved))
        if child.get("entity") == "ContactTag":
            reverse = repo.tag_reverse_key(org, child["tag_id"], target_id)
            ops.append(Put(item={**reverse, "entity": "TagMember", "contact_id": target_id}))
    store.transact(ops)
    return len(page.items)
