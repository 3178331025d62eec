"""Segments: rule trees over contacts, with materialised membership.

Keys (under `ORG#<org>`): `CDPSEG#<seg_id>` the segment; `SEGMENT#<seg_id>#MEMBER#<ct_id>` one member each, so a
members page is one Query (+ one BatchGet of the contacts). Create, and an update of the rules (or an empty PATCH),
answer at once with the segment `status: building` and a new `build_generation`, and start the `segment.build` job
(switchboard.cdp.segment_build) that evaluates every contact a page at a time and ends with `status: ready`.
Meanwhile, and after, membership follows the contacts incrementally: every `contact.updated` event reaches
`functions/cdp_segments` (rule CdpSegmentEventsRule → CdpSegmentEventsQueue), which evaluates that one contact against
the organization's segments and flips the memberships that changed (conditional member write + event in one
transaction, so a replayed event changes nothing). The segment is read (consistent) just before and just after each
flip: a flip decided under rules replaced meanwhile (another `build_generation`) is not written, or, when the rules
changed between that read and the write, is evaluated again under the new ones at once. `member_count` is counted
from the stream (switchboard.cdp.segment_counts), never in a flip's transaction. Windowed event-count conditions age
with time: the contacts whose membership that can change are re-evaluated on that day (switchboard.cdp.segment_windows).

Rule tree: `{"and": [...]}`, `{"or": [...]}`, `{"not": rule}`, a field condition
`{"field": "email" | "attributes.plan" | "tags" | "lifecycle_stage" | "consent.whatsapp" | …, "op": …, "value": …}`
or an event condition `{"event": "order.placed", "op": "gte", "count": 2, "within_days": 30}`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.cdp import models, segment_counts, segment_delete, segment_windows
from switchboard.cdp.event_counts import event_window
from switchboard.contacts import repository as contact_repo
from switchboard.errors import Conflict, DomainError, NotFound, ValidationFailed
from switchboard.events.outbox import outbox_put, read_detail
from switchboard.ids import new_id
from switchboard.jobs import service as jobs
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import ConditionCheck, Delete, Put, Store, TxOp, Update, keys, versioned

BUILD_JOB = "segment.build"  # the job that fills a segment's membership (switchboard.cdp.segment_build)
Item = dict[str, Any]
MAX_DEPTH = 6
MAX_CONDITIONS = 50
CONTACT_FIELDS = {
    "name",
    "first_name",
    "last_name",
    "email",
    "phone",
    "company",
    "lifecycle_stage",
    "blocked",
    "created_at",
    "updated_at",
    "tags",
}
OPS = {
    "eq",
    "neq",
    "in",
    "not_in",
    "contains",
    "not_contains",
    "starts_with",
    "gt",
    "gte",
    "lt",
    "lte",
    "exists",
    "not_exists",
}
COUNT_OPS = {"eq", "gt", "gte", "lt", "lte"}
BUILDING, READY, FAILED = "building", "ready", "failed"  # a segment's `status`
MEMBER_FIELDS = ("id", "name", "email", "phone", "lifecycle_stage")  # what a members page shows of each contact


def segment_key(org: str, segment_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPSEG#{segment_id}")


def member_prefix(segment_id: str) -> str:
    return f"SEGMENT#{segment_id}#MEMBER#"


def member_key(org: str, segment_id: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"{member_prefix(segment_id)}{contact_id}")


# Rules --------------------------------------------------------------------------------------------------------------
def check_rules(rule: Any, path: str = "body.rules") -> None:
    """Refuses malformed trees with the field path of the first problem."""
    count = _check(rule, path, 1)
    if count > MAX_CONDITIONS:
        raise ValidationFailed.field(path, f"holds more than {MAX_CONDITIONS} conditions")


def _check(rule: Any, path: str, depth: int) -> int:
    bad = ValidationFailed.field
    if depth > MAX_DEPTH:
        raise bad(path, f"nests deeper than {MAX_DEPTH} levels")
    if not isinstance(rule, dict) or not rule:
        raise bad(path, "must be an object: and, or, not, a field condition or an event condition")
    for group in ("and", "or"):
        if group in rule:
            items = rule[group]
            if len(rule) != 1 or not isinstance(items, list) or not items:
                raise bad(f"{path}.{group}", "must be the only key, with a non-empty list of rules")
            return sum(_check(r, f"{path}.{group}[{n}]", depth + 1) for n, r in enumerate(items))
    if "not" in rule:
        if len(rule) != 1:
            raise bad(f"{path}.not", "must be the only key")
        return _check(rule["not"], f"{path}.not", depth + 1)
    if "event" in rule:
        extra = set(rule) - {"event", "op", "count", "within_days"}
        if extra:
            raise bad(f"{path}.{sorted(extra)[0]}", "is not a key of an event condition")
        if not isinstance(rule["event"], str) or not 1 <= len(rule["event"]) <= 100:
            raise bad(f"{path}.event", "must be an event name")
        if rule.get("op", "gte") not in COUNT_OPS:
            raise bad(f"{path}.op", f"must be one of {', '.join(sorted(COUNT_OPS))}")
        count, days = rule.get("count", 1), rule.get("within_days", 30)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise bad(f"{path}.count", "must be a whole number of at least 0")
        if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= 3650:
            raise bad(f"{path}.within_days", "must be a whole number of days between 1 and 3650")
        return 1
    if "field" in rule:
        extra = set(rule) - {"field", "op", "value"}
        if extra:
            raise bad(f"{path}.{sorted(extra)[0]}", "is not a key of a field condition")
        field = rule["field"]
        if not isinstance(field, str) or not (
            field in CONTACT_FIELDS
            or (field.startswith("attributes.") and len(field) > 11)
            or (field.startswith("consent.") and len(field) > 8)
        ):
            raise bad(f"{path}.field", "must be a contact field, attributes.<key>, tags or consent.<channel>")
        op = rule.get("op")
        if op not in OPS:
            raise bad(f"{path}.op", f"must be one of {', '.join(sorted(OPS))}")
        if op not in ("exists", "not_exists") and "value" not in rule:
            raise bad(f"{path}.value", "Field required")
        if op in ("in", "not_in") and not isinstance(rule.get("value"), list):
            raise bad(f"{path}.value", "must be a list")
        return 1
    raise bad(path, "must hold and, or, not, field or event")


class Context:
    """Per-contact reads that only some rules need (event counts; consent of a contact written before consent was
    kept on the contact item), cached for the evaluation."""

    def __init__(self, store: Store, org: str, contact: Item) -> None:
        self.store, self.org, self.contact = store, org, contact
        self._consent: dict[str, str | None] = {}
        # the first day an event counted by a windowed rule has left its window: the evaluation may change then
        # without any new event (switchboard.cdp.segment_windows re-evaluates the contact on that day)
        self.expires: str | None = None

    def consent(self, channel: str) -> str | None:
        """From the contact item's `consent` map (every contact created or backfilled since it exists: no read); a
        contact the `contacts.consent_backfill` job has not reached yet has no map: its consent row is read."""
        kept = self.contact.get("consent")
        if isinstance(kept, dict):
            status = kept.get(channel)
            return str(status) if status is not None else None
        if channel not in self._consent:
            row = self.store.get(contact_repo.child_key(self.org, self.contact["id"], "CONSENT", channel))
            self._consent[channel] = row.get("status") if row else None
        return self._consent[channel]

    def value(self, field: str) -> Any:
        if field.startswith("attributes."):
            return (self.contact.get("attributes") or {}).get(field.removeprefix("attributes."))
        if field.startswith("consent."):
            return self.consent(field.removeprefix("consent."))
        return self.contact.get(field)


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if op == "exists":
        return actual not in (None, "", [])
    if op == "not_exists":
        return actual in (None, "", [])
    if op == "in":
        return actual in expected
    if op == "not_in":
        return actual not in expected
    if op in ("contains", "not_contains"):
        if isinstance(actual, list):
            found = expected in actual
        elif isinstance(actual, str) and isinstance(expected, str):
            found = expected.lower() in actual.lower()
        else:
            found = False
        return found if op == "contains" else not found
    if op == "starts_with":
        return isinstance(actual, str) and isinstance(expected, str) and actual.lower().startswith(expected.lower())
    if op == "eq":
        return bool(actual == expected)
    if op == "neq":
        return bool(actual != expected)
    if actual is None or expected is None:
        return False
    try:
        return {
            "gt": actual > expected,
            "gte": actual >= expected,
            "lt": actual < expected,
            "lte": actual <= expected,
        }[op]
    except TypeError:
        return False


def evaluate(rule: Item, ctx: Context) -> bool:
    if "and" in rule:
        return all(evaluate(r, ctx) for r in rule["and"])
    if "or" in rule:
        return any(evaluate(r, ctx) for r in rule["or"])
    if "not" in rule:
        return not evaluate(rule["not"], ctx)
    if "event" in rule:
        days = int(rule.get("within_days", 30))
        count, first = event_window(ctx.store, ctx.org, ctx.contact["id"], rule["event"], clock.now() - timedelta(days))
        if first is not None:
            out = clock.iso(clock.parse_iso(f"{first}T00:00:00Z") + timedelta(days=days + 1))[:10]
            ctx.expires = min(ctx.expires or out, out)
        return _compare(count, rule.get("op", "gte"), rule.get("count", 1))
    return _compare(ctx.value(rule["field"]), rule["op"], rule.get("value"))


# Membership -----------------------------------------------------------------------------------------------------------
def _entry_event(org: str, segment: Item, contact_id: str, added: bool) -> Put:
    return outbox_put(
        org,
        "crm.list.entry_added" if added else "crm.list.entry_removed",
        {
            "list_id": segment["id"],
            "list_name": segment["name"],
            "record_id": contact_id,
            "contact_id": contact_id,
            "object_kind": "contact",
            "organization_id": org,
        },
    )


class Unchanged(Conflict):
    """The membership already is what the evaluation wants (another evaluation got there first)."""


def ages_in(rule: Any, negated: bool = False) -> bool:
    """Whether fewer events can make the rule hold (`lt`, `lte`, `eq`, or `gt` / `gte` under a `not`): a non-member
    of such a segment may join when its counts age, so it is watched too."""
    if not isinstance(rule, dict):
        return False
    if "event" in rule:
        op = rule.get("op", "gte")
        return op == "eq" or (op in ("lt", "lte")) != negated
    if "not" in rule:
        return ages_in(rule["not"], not negated)
    return any(ages_in(r, negated) for key in ("and", "or") for r in rule.get(key) or [])


def watch_day(segment: Item, ctx: Context, wanted: bool) -> str | None:
    """The day to evaluate the contact again although nothing happens (its windowed counts fall then), when that can
    change its membership: a member's, or a non-member's of a segment whose rules can hold on fewer events."""
    if ctx.expires is None or not (wanted or ages_in(segment["rules"])):
        return None
    return ctx.expires


def flip_ops(org: str, segment: Item, contact_id: str, join: bool, expires: str | None = None) -> list[TxOp]:
    """One membership change: the member item (conditional, so a change happens once) and the event; with `expires`
    (`watch_day`) also the contact's expiry row of that day (switchboard.cdp.segment_windows). Nothing shared:
    `member_count` is counted from the stream (switchboard.cdp.segment_counts)."""
    key = member_key(org, segment["id"], contact_id)
    if join:
        member = {"entity": segment_counts.MEMBER_ENTITY, "segment_id": segment["id"], "contact_id": contact_id}
        change: TxOp = Put(
            item={**key, **member, "added_at": clock.now_iso(), "counted": segment_counts.STREAM},
            condition="attribute_not_exists(PK)",
            error=Unchanged(),
        )
    else:
        change = Delete(key=key, condition="attribute_exists(PK)", error=Unchanged())
    ops = [change, _entry_event(org, segment, contact_id, join)]
    if expires is not None:
        ops.append(segment_windows.expiry_put(org, segment["id"], contact_id, expires))
    return ops


def generation_check(org: str, segment: Item, error: DomainError) -> ConditionCheck:
    """The segment still has the rules it was read with (a build's transactions hold it: one writer per segment)."""
    generation = int(segment.get("build_generation", 0))
    return ConditionCheck(
        key=segment_key(org, segment["id"]),
        condition="attribute_exists(PK) AND "
        + ("attribute_not_exists(build_generation)" if generation == 0 else "build_generation = :g"),
        values={":g": generation} if generation else None,
        error=error,
    )


def _uses_events(rule: Any) -> bool:
    if not isinstance(rule, dict):
        return False
    if "event" in rule:
        return True
    return any(_uses_events(r) for key in ("and", "or") for r in rule.get(key) or []) or _uses_events(rule.get("not"))


def refresh_after_events(store: Store, org: str, contact_ids: set[str]) -> list[tuple[str, bool]]:
    """Ingested events change event counts, not the contact: the segments with event conditions are evaluated for
    the contacts of the batch (one Query of the segments for the batch; nothing when no segment counts events)."""
    rows = store.query_all(keys.org_pk(org), sk_prefix="CDPSEG#", consistent=True)
    segments = [s for s in rows if _uses_events(s["rules"])]
    changes: list[tuple[str, bool]] = []
    for contact_id in sorted(contact_ids) if segments else []:
        changes += refresh_contact(store, org, contact_id, segments)
    return changes


def refresh_contact(
    store: Store, org: str, contact_id: str, segments: list[Item] | None = None, *, renew: bool = False
) -> list[tuple[str, bool]]:
    """Incremental evaluation (a `contact.updated` event): the contact against every segment of its organization
    (or `segments`); each membership that flips is one transaction. `renew`: a member that stays on windowed event
    counts gets its next expiry row (the window schedule's re-evaluation; a watched non-member always does). A
    contact that no longer exists leaves every segment. → [(segment_id, joined?)] for the changes made. Replaying the
    same event changes nothing."""
    if segments is None:
        segments = store.query_all(keys.org_pk(org), sk_prefix="CDPSEG#", consistent=True)
    if not segments:
        return []
    contact = store.get(contact_repo.contact_key(org, contact_id), consistent=True)
    current = {
        r["segment_id"]
        for r in store.batch_get([member_key(org, s["id"], contact_id) for s in segments], consistent=True)
    }
    changes: list[tuple[str, bool]] = []
    for listed in segments:
        segment, member = listed, listed["id"] in current
        for _ in range(3):
            ctx = Context(store, org, contact or {})
            wanted = contact is not None and evaluate(segment["rules"], ctx)
            day = watch_day(segment, ctx, wanted) if contact is not None else None
            if wanted == member:
                # stays, on counts that will age: look again then (a member's row was written with its join; a
                # non-member's is written whenever it is evaluated, one per day)
                if day is not None and (renew or not member):
                    store.put(segment_windows.expiry_put(org, segment["id"], contact_id, day).item)
                break
            # the rules as they are just before the write: a flip decided under replaced rules is not written
            fresh = store.get(segment_key(org, listed["id"]), consistent=True)
            if fresh is None:
                break
            if fresh.get("build_generation") != segment.get("build_generation"):
                segment = fresh
                continue
            try:
                store.transact(flip_ops(org, segment, contact_id, wanted, day))
            except Unchanged:  # another evaluation got there first
                break
            member = wanted
            changes.append((segment["id"], wanted))
            # the rules replaced between that read and the write (a build may have passed this contact already):
            # evaluate again under the current ones; the segment deleted meanwhile: no row of it stays behind
            after = store.get(segment_key(org, listed["id"]), consistent=True)
            if after is None:
                store.delete(member_key(org, listed["id"], contact_id))
                break
            if after.get("build_generation") == segment.get("build_generation"):
                break
            segment = after
    return changes


def handle_record(store: Store, record: Item) -> None:
    """One SQS record of CdpSegmentEventsQueue (an EventBridge `contact.updated` event): the contact re-evaluated.
    Raises when it fails: the consumer's `BatchProcessor` reports the record alone (SQS retries it, then the DLQ)."""
    detail = read_detail(store, json.loads(record["body"])["detail"])
    contact_id = ((detail or {}).get("data") or {}).get("contact_id")
    if detail is not None and contact_id:
        refresh_contact(store, detail["organization_id"], contact_id)


# Segments -----------------------------------------------------------------------------------------------------------
def view(item: Item) -> models.Segment:
    return models.Segment.model_validate(item)


def get_item(store: Store, org: str, segment_id: str, *, consistent: bool = False) -> Item:
    return store.require(segment_key(org, segment_id), "No such segment.", consistent=consistent)


def get(store: Store, auth: AuthContext, segment_id: str) -> models.Segment:
    """The segment with `member_count` summed from its counter shards (one GetItem + one BatchGet)."""
    (item,) = segment_counts.with_counts(store, auth.org_id, [get_item(store, auth.org_id, segment_id)])
    return view(item)


def list_segments(store: Store, auth: AuthContext) -> list[models.Segment]:
    rows = store.query_all(keys.org_pk(auth.org_id), sk_prefix="CDPSEG#")
    counted = segment_counts.with_counts(store, auth.org_id, rows)
    return [view(i) for i in sorted(counted, key=lambda i: i["created_at"])]


def _build_fields(generation: int, job_id: str) -> Item:
    """What a segment shows while its membership is being built by job `job_id` (`switchboard.cdp.segment_build`)."""
    return {"status": BUILDING, "progress": {"contacts_scanned": 0}, "build_generation": generation, "job_id": job_id}


def _start_build(org: str, segment_id: str, generation: int) -> Put:
    checkpoint = {"segment_id": segment_id, "generation": generation, "phase": "scan", "scanned": 0}
    return jobs.start_op(BUILD_JOB, org, checkpoint=checkpoint)


def _enqueue(store: Store, job: Put) -> None:
    jobs.enqueue_committed(store, job.item["id"])


def create(store: Store, auth: AuthContext, body: models.SegmentCreate) -> models.Segment:
    """Answers at once with the segment `building`; the `segment.build` job fills the membership."""
    org, now = auth.org_id, clock.now_iso()
    check_rules(body.rules)
    segment_id = new_id("seg")
    job = _start_build(org, segment_id, 1)
    item: Item = {
        **segment_key(org, segment_id),
        "entity": "Segment",
        "id": segment_id,
        **body.model_dump(mode="json"),
        "member_count": 0,
        **_build_fields(1, job.item["id"]),
        "version": 1,
        "created_at": now,
        "updated_at": now,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            job,
            audit_put(auth, "cdp.segment.created", "segment", segment_id, after={"name": body.name}),
        ]
    )
    _enqueue(store, job)
    return view(item)


def update(store: Store, auth: AuthContext, segment_id: str, body: models.SegmentUpdate) -> models.Segment:
    """A change of `rules` (or an empty body: "build again") starts a new build generation and its job; chunks of an
    older build stop at their next write. A change of name or description only is saved as it is."""
    org = auth.org_id
    item = get_item(store, org, segment_id, consistent=True)
    patch = body.model_dump(mode="json", exclude_unset=True)
    for required in ("name", "rules"):
        if required in patch and patch[required] is None:
            raise ValidationFailed.field(f"body.{required}", "cannot be null")
    if "rules" in patch:
        check_rules(patch["rules"])
    changes: Item = {**patch, "version": int(item["version"]) + 1, "updated_at": clock.now_iso()}
    job: Put | None = None
    if "rules" in patch or not patch:
        generation = int(item.get("build_generation", 0)) + 1
        job = _start_build(org, segment_id, generation)
        changes |= _build_fields(generation, job.item["id"])
    names = {f"#f{n}": name for n, name in enumerate(changes)}
    values: Item = {f":f{n}": value for n, value in enumerate(changes.values())}
    store.transact(
        [
            # SET, not a Put of the whole item: the build moves `status` and `progress` concurrently
            Update(
                key=segment_key(org, segment_id),
                expression="SET " + ", ".join(f"#f{n} = :f{n}" for n in range(len(changes))),
                **versioned(item["version"], names=names, values=values),
                error=Conflict("The segment changed concurrently; read it again."),
            ),
            *([job] if job is not None else []),
            audit_put(auth, "cdp.segment.updated", "segment", segment_id, after=patch),
        ]
    )
    (new,) = segment_counts.with_counts(store, org, [{**item, **changes}])
    if job is not None:
        _enqueue(store, job)
    return view(new)


def delete(store: Store, auth: AuthContext, segment_id: str) -> None:
    """The segment, its audit record and the `segment.delete` job that removes its rows, in one transaction (the
    request does no work that grows with the segment: switchboard.cdp.segment_delete)."""
    org = auth.org_id
    get_item(store, org, segment_id)
    job = jobs.start_op(segment_delete.KIND, org, checkpoint={"segment_id": segment_id, "phase": "members"})
    store.transact(
        [
            Delete(
                key=segment_key(org, segment_id), condition="attribute_exists(PK)", error=NotFound("No such segment.")
            ),
            audit_put(auth, "cdp.segment.deleted", "segment", segment_id, after={"job_id": job.item["id"]}),
            job,
        ]
    )
    jobs.enqueue_committed(store, str(job.item["id"]))


def members(
    store: Store, auth: AuthContext, segment_id: str, *, limit: int, cursor: str | None
) -> tuple[list[models.SegmentMember], str | None]:
    org = auth.org_id
    get_item(store, org, segment_id)
    fingerprint = query_fingerprint("cdp.segment_members", {"segment": segment_id})
    rows, next_cursor = cursor_page(store, org, fingerprint, cursor, sk_prefix=member_prefix(segment_id), limit=limit)
    found = {
        c["id"]: c
        for c in store.batch_get(
            [contact_repo.contact_key(org, r["contact_id"]) for r in rows], projection=MEMBER_FIELDS
        )
    }
    out = []
    for row in rows:
        contact = found.get(row["contact_id"])
        if contact is None:
            continue  # deleted since the last evaluation: the next build drops the row
        # built from stored, already validated values: the response model checks them once, on the way out
        out.append(
            models.SegmentMember.model_construct(
                contact_id=row["contact_id"],
                name=contact.get("name"),
                email=contact.get("email"),
                phone=contact.get("phone"),
                lifecycle_stage=contact.get("lifecycle_stage"),
                added_at=row["added_at"],
            )
        )
    return out, next_cursor
