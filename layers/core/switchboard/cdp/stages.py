"""Lifecycle stages: an ordered catalogue, a contact's current stage with its history, and funnel metrics.

Keys (under `ORG#<org>`): `CDPSTAGE#<stg_id>` the stage, `CDPSTAGEKEY#<key>` its unique key; a contact's stage is
the stage key in the contact's `lifecycle_stage` (written through `contacts.service.write_contact`, so GSI2 and
`contact.updated` follow); every change writes `CONTACT#<ct>#STAGELOG#<ulid>` (the contact's history) and
`CDPSTAGELOG#<ulid>` (metrics) in the write shard of its ULID (`ORG#<org>#<n>`, named by the history row's `log_pk`:
switchboard.cdp.logs).

Metrics read counters only, never the contacts:
- contacts now in each stage: the per-stage counters of `contacts.counter` (one Query of its shards);
- entries, exits and conversions: per-day counters `STAGEDAY#<YYYY-MM-DD>#<shard>` (`DAY_SHARDS` items a day,
  shard = from the log's ULID's last character) with `in:<to>`, `out:<from>` and `pair:<from>><to>` (`""` for no
  stage), kept by the stream consumer from each `CDPSTAGELOG#` INSERT (`count_stage_change`: the log is marked
  `counted` in the transaction that adds it, so a record delivered twice is added once; the day is the ULID's).
A window is exact to the millisecond: its whole UTC days are read from the day counters (one Query, days x
`DAY_SHARDS` items) and its two partial edge days from their stage logs (one Query of each write shard and the
legacy partition per edge day, bounded by the changes of one day, never by the number of contacts).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.cdp import logs, models
from switchboard.cdp.events import activity_puts
from switchboard.contacts import counter as contact_counter
from switchboard.contacts import repository as contact_repo
from switchboard.contacts import service as contacts
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.ids import new_id, new_ulid, ulid_bound, ulid_time
from switchboard.store import Delete, Put, Store, TxOp, Update, keys, shards
from switchboard.stream_counts import AlreadyCounted, mark_counted

Item = dict[str, Any]
MAX_STAGES = 50
STAGE_LOG_PREFIX = "CDPSTAGELOG#"
DAY_PREFIX = "STAGEDAY#"
DAY_SHARDS = 2


def stage_key(org: str, stage_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPSTAGE#{stage_id}")


def stage_key_sentinel(org: str, key: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPSTAGEKEY#{key}")


def view(item: Item) -> models.Stage:
    return models.Stage.model_validate(item)


def _all(store: Store, org: str) -> list[Item]:
    rows = store.query_all(keys.org_pk(org), sk_prefix="CDPSTAGE#")
    return sorted(rows, key=lambda i: (i["position"], i["created_at"]))


def list_stages(store: Store, auth: AuthContext) -> list[models.Stage]:
    return [view(i) for i in _all(store, auth.org_id)]


def get_item(store: Store, org: str, stage_id: str) -> Item:
    return store.require(stage_key(org, stage_id), "No such lifecycle stage.")


def find(store: Store, org: str, ref: str) -> Item:
    """A stage by id (`stg_…`) or key."""
    if ref.startswith("stg_"):
        return get_item(store, org, ref)
    pointer = store.require(stage_key_sentinel(org, ref), "No such lifecycle stage.")
    return get_item(store, org, pointer["stage_id"])


def get(store: Store, auth: AuthContext, stage_id: str) -> models.Stage:
    return view(get_item(store, auth.org_id, stage_id))


def create(store: Store, auth: AuthContext, body: models.StageCreate) -> models.Stage:
    org, now = auth.org_id, clock.now_iso()
    existing = _all(store, org)
    if len(existing) >= MAX_STAGES:
        raise Conflict(f"An organization holds at most {MAX_STAGES} lifecycle stages.")
    stage_id = new_id("stg")
    position = body.position if body.position is not None else max((i["position"] for i in existing), default=-1) + 1
    item: Item = {
        **stage_key(org, stage_id),
        "entity": "LifecycleStage",
        "id": stage_id,
        **body.model_dump(mode="json"),
        "position": position,
        "created_at": now,
        "updated_at": now,
    }
    taken = Conflict(f"A lifecycle stage with the key {body.key!r} exists.", details=[{"field": "body.key"}])
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(
                item={**stage_key_sentinel(org, body.key), "entity": "LifecycleStageKey", "stage_id": stage_id},
                condition="attribute_not_exists(PK)",
                error=taken,
            ),
            audit_put(auth, "cdp.lifecycle_stage.created", "lifecycle_stage", stage_id, after={"key": body.key}),
        ]
    )
    return view(item)


def update(store: Store, auth: AuthContext, stage_id: str, body: models.StageUpdate) -> models.Stage:
    org = auth.org_id
    item = get_item(store, org, stage_id)
    patch = body.model_dump(mode="json", exclude_unset=True)
    for required in ("name", "position"):
        if required in patch and patch[required] is None:
            raise ValidationFailed.field(f"body.{required}", "cannot be null")
    new = {**item, **patch, "updated_at": clock.now_iso()}
    store.transact(
        [
            Put(item=new, condition="attribute_exists(PK)", error=NotFound("No such lifecycle stage.")),
            audit_put(auth, "cdp.lifecycle_stage.updated", "lifecycle_stage", stage_id, after=patch),
        ]
    )
    return view(new)


def delete(store: Store, auth: AuthContext, stage_id: str) -> None:
    """Only an empty stage can go (its key is what contacts hold)."""
    org = auth.org_id
    item = get_item(store, org, stage_id)
    if contact_repo.stage_in_use(store, org, item["key"]):
        raise Conflict("Contacts are in this stage; move them to another stage first.")
    store.transact(
        [
            Delete(key=stage_key(org, stage_id), condition="attribute_exists(PK)", error=NotFound("No such stage.")),
            Delete(key=stage_key_sentinel(org, item["key"])),
            audit_put(auth, "cdp.lifecycle_stage.deleted", "lifecycle_stage", stage_id, before={"key": item["key"]}),
        ]
    )


# A contact's stage --------------------------------------------------------------------------------------------------
def _history(store: Store, org: str, contact_id: str, limit: int = 50) -> list[models.StageChange]:
    page = store.query(keys.org_pk(org), sk_prefix=f"CONTACT#{contact_id}#STAGELOG#", forward=False, limit=limit)
    return [models.StageChange.model_validate(i) for i in page.items]


def contact_stage(store: Store, auth: AuthContext, contact_id: str) -> models.ContactStage:
    org = auth.org_id
    contact = contacts.get_item(store, org, contact_id)
    stage = None
    if contact.get("lifecycle_stage"):
        try:
            stage = view(find(store, org, contact["lifecycle_stage"]))
        except NotFound:
            stage = None  # a free-form value written through /v1/contacts
    return models.ContactStage(contact_id=contact_id, stage=stage, history=_history(store, org, contact_id))


def set_contact_stage(store: Store, auth: AuthContext, contact_id: str, body: models.StageSet) -> models.ContactStage:
    org = auth.org_id
    for _ in range(3):
        contact = contacts.get_item(store, org, contact_id, consistent=True)
        stage = find(store, org, body.stage) if body.stage else None
        old_key, new_key = contact.get("lifecycle_stage"), stage["key"] if stage else None
        if old_key == new_key:
            return contact_stage(store, auth, contact_id)
        now = clock.now()
        change = {
            "entity": "StageChange",
            "contact_id": contact_id,
            "from_stage": old_key,
            "to_stage": new_key,
            "reason": body.reason,
            "changed_by": auth.principal_id,
            "changed_at": clock.iso(now),
        }
        ulid = new_ulid()
        log_pk = logs.log_pk(org, ulid)
        extra: list[TxOp] = [
            Put(
                item={**keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#STAGELOG#{ulid}"), **change, "log_pk": log_pk}
            ),
            Put(item={**keys.key(log_pk, f"{STAGE_LOG_PREFIX}{ulid}"), **change}),
            *activity_puts(
                org,
                contact_id,
                event_id=f"stage_{ulid.lower()}",
                name="lifecycle_stage_changed",
                kind="lifecycle_stage",
                properties={"from_stage": old_key, "to_stage": new_key, "reason": body.reason},
                occurred=now,
            ),
        ]
        try:
            contacts.write_contact(
                store, auth, contact, {**contact, "lifecycle_stage": new_key}, extra, ["lifecycle_stage"], "updated"
            )
        except Conflict as err:
            if err.code != "conflict":
                raise
            continue
        return contact_stage(store, auth, contact_id)
    raise Conflict("The contact changed concurrently; retry.")


# Metrics ------------------------------------------------------------------------------------------------------------
def day_key(org: str, day: str, shard: int) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"{DAY_PREFIX}{day}#{shard}")


def count_stage_change(store: Store, log: Item) -> bool:
    """Add one stage-change log to its day's counters, once: False when it was counted already (a redelivery)."""
    ulid = str(log["SK"]).removeprefix(STAGE_LOG_PREFIX)
    org = shards.org_of(str(log["PK"]))  # `ORG#<org>#<shard>`, or `ORG#<org>` for a log written before sharding
    day = ulid_time(ulid).strftime("%Y-%m-%d")
    src, dst = str(log.get("from_stage") or ""), str(log.get("to_stage") or "")
    added = {f"pair:{src}>{dst}": 1}
    if src:
        added[f"out:{src}"] = 1
    if dst:
        added[f"in:{dst}"] = 1
    names = {f"#a{n}": name for n, name in enumerate(added)}
    try:
        store.transact(
            [
                mark_counted(log),
                Update(
                    key=day_key(org, day, ord(ulid[-1]) % DAY_SHARDS),
                    expression="SET #e = :e, #d = :d ADD " + ", ".join(f"{name} :one" for name in names),
                    names={"#e": "entity", "#d": "day", **names},
                    values={":e": "StageDay", ":d": day, ":one": 1},
                ),
            ]
        )
    except AlreadyCounted:
        return False
    return True


def _midnight(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _changes(store: Store, org: str, start: datetime, end: datetime) -> Counter[str]:
    """Entries, exits and pairs of the stage logs in [start, end] (a partial day: read from its logs, in every write
    shard and the legacy partition; counted, so in no particular order)."""
    rows = shards.query_all(
        store,
        shards.all_pks(org),
        sk_between=(
            f"{STAGE_LOG_PREFIX}{ulid_bound(start, high=False)}",
            f"{STAGE_LOG_PREFIX}{ulid_bound(end, high=True)}",
        ),
    )
    found: Counter[str] = Counter()
    for log in rows:
        src, dst = log.get("from_stage") or "", log.get("to_stage") or ""
        found[f"pair:{src}>{dst}"] += 1
        found[f"out:{src}"] += 1 if src else 0
        found[f"in:{dst}"] += 1 if dst else 0
    return found


def _window(store: Store, org: str, start: datetime, end: datetime) -> Counter[str]:
    """Entries, exits and pairs in [start, end]: whole days from the day counters, the edge days from their logs."""
    first = _midnight(start) if _midnight(start) == start else _midnight(start) + timedelta(days=1)
    last = _midnight(end)  # the whole days are [first, last)
    if first >= last:
        return _changes(store, org, start, end)
    found = Counter[str]()
    if start < first:
        found += _changes(store, org, start, first - timedelta(milliseconds=1))
    days = store.query_all(
        keys.org_pk(org),
        sk_between=(
            f"{DAY_PREFIX}{first.strftime('%Y-%m-%d')}#",
            f"{DAY_PREFIX}{(last - timedelta(days=1)).strftime('%Y-%m-%d')}#~",
        ),
    )
    for row in days:
        for name, value in row.items():
            if name.startswith(("in:", "out:", "pair:")):
                found[name] += int(value)
    found += _changes(store, org, last, end)
    return found


# Stage changes are logged under ULIDs (from 1970 on): a window's given ends are kept within [1970, 9999-12-30], so
# its whole-day and 30-day arithmetic stays within Python's dates.
_FIRST, _LAST = clock.UNIX_EPOCH, datetime(9999, 12, 30, tzinfo=UTC)


def _in_window(moment: datetime) -> datetime:
    return min(max(moment, _FIRST), _LAST)


def metrics(store: Store, auth: AuthContext, since: str | None, until: str | None) -> models.StageMetrics:
    """Contacts now in each stage; entries, exits and stage-to-stage conversions in [since, until]: counters only
    (see the module's note)."""
    org = auth.org_id
    end = _in_window(clock.parse_iso_input(until, "query.until")) if until else clock.now()
    start = _in_window(clock.parse_iso_input(since, "query.since")) if since else end - timedelta(days=30)
    if since and until and clock.parse_iso_input(since, "query.since") > clock.parse_iso_input(until, "query.until"):
        raise ValidationFailed.field("query.since", "must not be after until")
    found = _window(store, org, start, end)
    now_in = contact_counter.counts(store, org).stages
    stages = [
        models.StageCount(
            stage=s["key"],
            name=s["name"],
            contacts=now_in.get(s["key"], 0),
            entered=found.get(f"in:{s['key']}", 0),
            exited=found.get(f"out:{s['key']}", 0),
        )
        for s in _all(store, org)
    ]
    pairs = {
        tuple(name.removeprefix("pair:").split(">", 1)): n for name, n in found.items() if name.startswith("pair:")
    }
    conversions = [
        models.Conversion(from_stage=a or None, to_stage=b or None, count=n)
        for (a, b), n in sorted(pairs.items(), key=lambda kv: (-kv[1], str(kv[0])))
        if n
    ]
    return models.StageMetrics(since=clock.iso(start), until=clock.iso(end), stages=stages, conversions=conversions)
