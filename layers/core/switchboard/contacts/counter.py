"""The organization's contacts, in total and per lifecycle stage, counted from the table stream.

No customer-facing transaction touches a counter: a contact is created, changed, merged, erased or deleted with
its own items only, and the stream consumer (`functions/usage_meter`, `count_contact_record`) keeps the counts.

Items (all in `ORG#<org>`):
- `COUNTER#CONTACTS#<shard>` (`SHARDS` items, shard = a hash of the contact id): `contacts` (the total) and one
  attribute per lifecycle stage, `stage:<key>`. A read is one Query on the `COUNTER#CONTACTS#` prefix summing the
  shards (the same Query returns the seed state below).
- `COUNTER#CONTACTS#SEED`: `status` `seeding` (with `job_id`) or `seeded`: whether the shards hold every contact.
- `TALLY#CONTACT#<contact_id>`: that the contact is in the counters and under which `stage` (`""`: none), with
  `seq`, the stream sequence number of the last record applied (0 when the seed job wrote it). Once the contact is
  gone the tally stays as a tombstone (`gone`, TTL `GONE_TTL`, longer than the stream's 24 h retention).

The counters equal the sum of the live tallies: every tally change is one transaction with its `ADD`s on the
contact's shard, conditioned on the tally being as read. So each contact is counted at most once whatever delivers
it, and a stream record handed over twice changes nothing the second time:
- INSERT or MODIFY (new image): no tally → create it (+1 total, +1 stage); tally gone → nothing (ids are never
  reused); tally with `seq` ≥ the record's → nothing (already applied); otherwise a stage change moves one count
  from the tally's stage to the new one. A MODIFY that leaves the stage as it was costs no read and no write.
- REMOVE: live tally → -1 total, -1 its stage, tally becomes a tombstone; no tally → a tombstone alone (the contact
  was never counted: the seed job, which only creates missing tallies, can no longer count it).

Seeding (organizations whose contacts predate stream counting; `KIND`): the job pages over the contact items
(`SEED_PAGE` items of the `CONTACT#` range per chunk, consistent; checkpoint: the page's LastEvaluatedKey), reads
the page's tallies with one BatchGet and, in one transaction, creates the missing ones (`attribute_not_exists`)
with their `ADD`s. A contact created while the seed runs is counted by whichever of the stream and the seed comes
first, the other finds its tally; one deleted before the seed's transaction has a tombstone that makes the
transaction fail (the chunk then runs again and skips it); one deleted after is taken off by its REMOVE. So no
cut-off time is needed and nothing is counted twice. The last chunk sets the seed state `seeded`.

Which organizations need it: an organization created with stream counting carries `contact_counts = "stream"` on
its item (`identity.repository.organization_item`); its first read marks it `seeded`. Any other organization's
first read starts the seed job and, until it completes, reads answer the count the organization's former counter
(`COUNTER#CONTACTS`, kept in its write transactions until stream counting) holds, or the shards' partial sum when
it has none.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.errors import Conflict
from switchboard.identity.lifecycle import PURGING
from switchboard.jobs import service
from switchboard.jobs.service import Chunk
from switchboard.store import ConditionCheck, Put, Store, Update, keys

Item = dict[str, Any]
SHARDS = 8
SHARD_PREFIX = "COUNTER#CONTACTS#"
LEGACY_SK = "COUNTER#CONTACTS"
SEED_SK = f"{SHARD_PREFIX}SEED"
TALLY_PREFIX = "TALLY#CONTACT#"
GONE_TTL = timedelta(days=2)
STAGE_ATTR = "stage:"
SEEDING, SEEDED = "seeding", "seeded"
KIND = "contacts.count_seed"
SEED_PAGE = 80  # contact-range items per chunk: ≤ 80 tallies + ≤ SHARDS shard updates in one transaction
STREAM_COUNTED = "stream"  # organization item `contact_counts`: counted from the stream since its creation


class _TallyMoved(Conflict):
    pass


@dataclass
class Counts:
    contacts: int = 0
    stages: dict[str, int] = field(default_factory=dict)
    seeded: bool = False


def shard_key(org_id: str, shard: int) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"{SHARD_PREFIX}{shard}")


def tally_key(org_id: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"{TALLY_PREFIX}{contact_id}")


def seed_key(org_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), SEED_SK)


def _shard_of(contact_id: str) -> int:
    return zlib.crc32(contact_id.encode()) % SHARDS


def _stage(image: Item) -> str:
    return str(image.get("lifecycle_stage") or "")


def _deltas(total: int, moves: dict[str, int]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """An `ADD` clause (and its names and values) adding `total` contacts and `moves[stage]` per stage."""
    names: dict[str, str] = {"#e": "entity"}
    values: dict[str, Any] = {":e": "ContactCounter"}
    parts: list[str] = []
    if total:
        values[":t"] = total
        parts.append("contacts :t")
    for n, (stage, delta) in enumerate(sorted(moves.items())):
        if stage and delta:
            names[f"#s{n}"], values[f":s{n}"] = f"{STAGE_ATTR}{stage}", delta
            parts.append(f"#s{n} :s{n}")
    return ("SET #e = :e ADD " + ", ".join(parts)) if parts else "SET #e = :e", names, values


def _shard_update(org_id: str, shard: int, total: int, moves: dict[str, int]) -> Update:
    expression, names, values = _deltas(total, moves)
    return Update(key=shard_key(org_id, shard), expression=expression, names=names, values=values)


# The stream consumer ---------------------------------------------------------------------------------------------
def is_contact(image: Item | None) -> bool:
    if not image:
        return False
    return image.get("entity") == "Contact" and str(image.get("SK", "")).startswith("CONTACT#")


class _OrganizationPurged(Conflict):
    """The organization is being purged (or is gone): its contacts' removals are the purge's, nothing to count."""


def counting_check(org_id: str, error: Conflict | None = None) -> ConditionCheck:
    """In every counting transaction: the organization exists and is not being purged, so that the purge's own
    deletions, read from the stream after it passed, never write counters back into an erased partition."""
    return ConditionCheck(
        key=keys.organization(org_id),
        condition="attribute_exists(PK) AND (attribute_not_exists(#status) OR #status <> :purging)",
        names={"#status": "status"},
        values={":purging": PURGING},
        error=error or _OrganizationPurged(),
    )


def count_contact_record(store: Store, event: str, old: Item | None, new: Item | None, seq: str) -> bool:
    """Apply one stream record of a contact item to the counters; False when it changed nothing."""
    image = new if event != "REMOVE" else old
    if image is None:
        return False
    if event == "MODIFY" and old is not None and _stage(old) == _stage(image):
        return False  # no stage change: the counts stay
    org_id, contact_id = str(image["PK"]).removeprefix("ORG#"), str(image["id"])
    for _ in range(3):
        try:
            return _apply(store, org_id, contact_id, event, image, int(seq))
        except _TallyMoved:  # the seed job wrote the tally meanwhile: read it again
            continue
        except _OrganizationPurged:
            return False
    raise Conflict("The contact's tally keeps moving; the stream retries the record.")


def _apply(store: Store, org_id: str, contact_id: str, event: str, image: Item, seq: int) -> bool:
    key, shard = tally_key(org_id, contact_id), _shard_of(contact_id)
    tally = store.get(key, consistent=True)
    if tally is not None and (tally.get("gone") or int(tally.get("seq") or 0) >= seq):
        return False
    if tally is not None:
        unchanged = "seq = :was AND attribute_not_exists(gone)"
        was: dict[str, Any] = {":was": tally.get("seq") or 0}
    else:
        unchanged, was = "attribute_not_exists(PK)", {}
    if event == "REMOVE":
        if tally is None:
            ops: list[Any] = []
        else:
            ops = [_shard_update(org_id, shard, -1, {str(tally.get("stage") or ""): -1})]
        expiry = clock.epoch(clock.now() + GONE_TTL)
        store.transact(
            [
                Put(
                    item={**key, "entity": "ContactTally", "gone": True, "seq": seq, "ttl": expiry},
                    condition=unchanged,
                    values=was or None,
                    error=_TallyMoved(),
                ),
                *ops,
                counting_check(org_id),
            ]
        )
        return bool(ops)
    stage = _stage(image)
    if tally is None:
        moves, total = {stage: 1}, 1
    else:
        before = str(tally.get("stage") or "")
        if before == stage:
            return False
        moves, total = {before: -1, stage: 1}, 0
    store.transact(
        [
            Put(
                item={**key, "entity": "ContactTally", "stage": stage, "seq": seq},
                condition=unchanged,
                values=was or None,
                error=_TallyMoved(),
            ),
            _shard_update(org_id, shard, total, moves),
            counting_check(org_id),
        ]
    )
    return True


# Reads -------------------------------------------------------------------------------------------------------------
def _summed(rows: list[Item]) -> Counts:
    counts = Counts()
    for row in rows:
        if row["SK"] == SEED_SK:
            counts.seeded = row.get("status") == SEEDED
            continue
        counts.contacts += int(row.get("contacts") or 0)
        for name, value in row.items():
            if name.startswith(STAGE_ATTR):
                stage = name.removeprefix(STAGE_ATTR)
                counts.stages[stage] = counts.stages.get(stage, 0) + int(value)
    return counts


def counts(store: Store, org_id: str) -> Counts:
    """The organization's contacts in total and per stage: one consistent Query of the shards and the seed state.
    An organization not yet seeded starts (or waits for) its seed job; see the module's note."""
    rows = store.query_all(keys.org_pk(org_id), sk_prefix=SHARD_PREFIX, consistent=True)
    found = _summed(rows)
    if found.seeded:
        return found
    if not any(row["SK"] == SEED_SK for row in rows):
        organization = store.get(keys.organization(org_id), consistent=True) or {}
        if organization.get("contact_counts") == STREAM_COUNTED:
            _mark_seeded(store, org_id)
            found.seeded = True
            return found
        start_seed(store, org_id)
    legacy = store.get(keys.key(keys.org_pk(org_id), LEGACY_SK), consistent=True)
    if legacy is not None and legacy.get("seeded_at"):
        found.contacts = int(legacy.get("contacts") or 0)
    return found


def contacts_stored(store: Store, org_id: str) -> int:
    return counts(store, org_id).contacts


def _mark_seeded(store: Store, org_id: str) -> None:
    store.put(
        {**seed_key(org_id), "entity": "ContactCountSeed", "status": SEEDED, "seeded_at": clock.now_iso()},
        condition=None,
    )


# The seed job ------------------------------------------------------------------------------------------------------
def start_seed(store: Store, org_id: str) -> str | None:
    """Start the organization's seed job (once: the seed state is put on condition it is absent); its job id, or
    None when a seed was started already."""
    job = service.start_op(KIND, org_id, checkpoint={})
    state = Put(
        item={**seed_key(org_id), "entity": "ContactCountSeed", "status": SEEDING, "job_id": job.item["id"]},
        condition="attribute_not_exists(PK)",
        error=Conflict("The seed was started already."),
    )
    try:
        store.transact([state, job])
    except Conflict:
        return None
    service.enqueue_committed(store, job.item["id"])
    return str(job.item["id"])


def seed_chunk(store: Store, job: Item) -> Any:
    """One chunk of the seed job: count the contacts of one page that have no tally yet (see the module's note)."""
    org_id = str(job["organization_id"])
    cursor = (job.get("checkpoint") or {}).get("cursor")
    page = store.query(keys.org_pk(org_id), sk_prefix="CONTACT#", limit=SEED_PAGE, start_key=cursor, consistent=True)
    contacts = [item for item in page.items if is_contact(item)]
    tallied = {
        str(t["SK"]).removeprefix(TALLY_PREFIX)
        for t in store.batch_get([tally_key(org_id, c["id"]) for c in contacts], consistent=True, projection=["SK"])
    }
    fresh = [c for c in contacts if c["id"] not in tallied]
    per_shard: dict[int, dict[str, int]] = {}
    ops: list[Any] = []
    for contact in fresh:
        moves = per_shard.setdefault(_shard_of(contact["id"]), {})
        moves[_stage(contact)] = moves.get(_stage(contact), 0) + 1
        ops.append(
            Put(
                item={
                    **tally_key(org_id, contact["id"]),
                    "entity": "ContactTally",
                    "stage": _stage(contact),
                    "seq": 0,
                },
                condition="attribute_not_exists(PK)",
                error=_TallyMoved("A contact of the page was counted or deleted meanwhile; the chunk runs again."),
            )
        )
    for shard, moves in per_shard.items():
        ops.append(_shard_update(org_id, shard, sum(moves.values()), moves))
    store.transact(ops)  # a tally that appeared meanwhile fails it: the chunk raises and runs again
    progress = {"contacts_counted": len(fresh)}
    if page.last_key:
        return Chunk({"cursor": page.last_key}, progress)
    _mark_seeded(store, org_id)
    return Chunk({}, progress, done=True)
