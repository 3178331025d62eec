"""Customer events: batch ingest (idempotent by event id), the per-contact timeline and the organization's log.

Keys (under `ORG#<org>` unless said): `CDPEVTID#<event_id>` the sentinel that makes an event id count once (keyed
by the client's id: spread over the key range, not time-ordered); `CONTACT#<ct>#ACT#<ulid>` the contact's timeline
(deleted with the contact); `CDPACT#<ulid>` the organization's log, in the write shard of its ULID (`ORG#<org>#<n>`,
named by the timeline row's `log_pk`: switchboard.cdp.logs); `CONTACT#<ct>#EVDAY#<name>#<YYYY-MM-DD>` how many
`name` events the contact had that day (UTC, by occurrence), added in the event's own transaction, so a segment's
event rule reads one row per day of its window instead of the contact's whole timeline. The ULID is built from the
event's own timestamp, so both lists are newest-first by occurrence. (Event names cannot hold `#`, so a name's day
rows form their own key range.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ulid import ULID

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.cdp import logs, models, segments
from switchboard.contacts import repository as repo
from switchboard.contacts import service as contacts
from switchboard.contacts.identifiers import Identifier, Numbers, normalize, numbers_for
from switchboard.errors import Conflict, DomainError, NotFound, ValidationFailed
from switchboard.ids import new_id, ulid_range
from switchboard.paging import cursor_page, query_fingerprint, read_page
from switchboard.store import Put, Store, TxOp, Update, keys, shards

Item = dict[str, Any]


class _Duplicate(Conflict):
    """The event id was ingested before."""


def event_sentinel(org: str, event_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPEVTID#{event_id}")


def ulid_at(moment: datetime) -> str:
    return str(ULID.from_datetime(moment))


def activity_puts(
    org: str,
    contact_id: str,
    *,
    event_id: str,
    name: str,
    kind: str,
    properties: Item,
    occurred: datetime,
    ulid: str | None = None,
) -> list[Put | Update]:
    """The writes of one activity: the contact's timeline (naming the log row's partition), the organization's log
    (in its ULID's write shard) and the contact's day count. `ulid`: the activity's id when the caller orders
    activities of one instant itself (else a ULID of `occurred`)."""
    ulid = ulid or ulid_at(occurred)
    log_pk = logs.log_pk(org, ulid)
    body = {
        "entity": "Activity",
        "id": f"act_{ulid.lower()}",
        "event_id": event_id,
        "name": name,
        "kind": kind,
        "contact_id": contact_id,
        "properties": properties,
        "occurred_at": clock.iso(occurred),
        "received_at": clock.now_iso(),
    }
    return [
        Put(item={**keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#ACT#{ulid}"), **body, "log_pk": log_pk}),
        Put(item={**keys.key(log_pk, f"CDPACT#{ulid}"), **body}),
        day_count_op(org, contact_id, name, occurred),
    ]


def day_count_op(org: str, contact_id: str, name: str, occurred: datetime, count: int = 1) -> Update:
    """The transaction operation that counts `count` `name` events of the contact on their day of occurrence."""
    day = clock.iso(occurred)[:10]
    return Update(
        key=keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#EVDAY#{name}#{day}"),
        expression="SET #e = :e ADD events :one",
        names={"#e": "entity"},
        values={":e": "EventDay", ":one": count},
    )


def _contact_for(store: Store, auth: AuthContext, event: models.EventIn, n: int, numbers: Numbers) -> str:
    if event.contact_id:
        return str(contacts.get_item(store, auth.org_id, event.contact_id)["id"])
    assert event.contact is not None
    field = f"body.events[{n}].contact"
    try:
        return str(contacts.resolve(store, auth, [event.contact], field=field, numbers=numbers)["id"])
    except NotFound:
        pass
    ident = normalize(event.contact.type, event.contact.value, event.contact.source, field, numbers)
    contact, _ = contacts.upsert_identity(store, auth, ident)
    return str(contact["id"])


def _occurred(event: models.EventIn, n: int, received: datetime | None = None) -> datetime:
    if not event.timestamp:
        return received or clock.now()
    field = f"body.events[{n}].timestamp"
    moment = clock.parse_iso_input(event.timestamp, field)
    if moment < clock.UNIX_EPOCH:  # an activity's key is a ULID of its time: milliseconds since 1970
        raise ValidationFailed.field(field, "must be 1970-01-01T00:00:00Z or later")
    return moment


MAX_TRANSACTION_ITEMS = 100  # DynamoDB's limit per TransactWriteItems


@dataclass
class _Planned:
    """One event of the batch ready to be written: its contact (`contact_id`) and, for the first event of a contact
    the batch creates, that contact's creation (`creation`)."""

    index: int
    event_id: str
    event: models.EventIn
    occurred: datetime
    contact_id: str
    creation: list[TxOp] = field(default_factory=list)
    ulid: str | None = None  # events without a timestamp: one instant, ordered as in the batch

    def ops(self, org: str) -> list[TxOp]:
        """The event's sentinel, timeline and log rows (its day count is added per transaction, `_Transactions`)."""
        sentinel = Put(
            item={
                **event_sentinel(org, self.event_id),
                "entity": "EventId",
                "contact_id": self.contact_id,
                "received_at": clock.now_iso(),
            },
            condition="attribute_not_exists(PK)",
            error=_Duplicate(),
        )
        timeline = activity_puts(
            org,
            self.contact_id,
            event_id=self.event_id,
            name=self.event.name,
            kind="event",
            properties=self.event.properties,
            occurred=self.occurred,
            ulid=self.ulid,
        )
        return [*self.creation, sentinel, *timeline[:2]]

    def day(self) -> tuple[str, str, str]:
        return (self.contact_id, self.event.name, clock.iso(self.occurred)[:10])


class _Transactions:
    """Planned events packed into TransactWriteItems of at most 100 operations, in batch order: each event's rows,
    the contacts the batch creates, and one day-count update per (contact, name, day) of the transaction (two
    operations of one transaction may not touch one item)."""

    def __init__(self, org: str) -> None:
        self.org = org
        self.groups: list[tuple[list[_Planned], list[TxOp]]] = []

    def add(self, planned: _Planned) -> None:
        ops = planned.ops(self.org)
        if self.groups:
            events, current = self.groups[-1]
            days = {p.day() for p in events} | {planned.day()}
            if len(current) + len(ops) + len(days) <= MAX_TRANSACTION_ITEMS:
                events.append(planned)
                current.extend(ops)
                return
        self.groups.append(([planned], ops))

    def operations(self, events: list[_Planned], ops: list[TxOp]) -> list[TxOp]:
        days: dict[tuple[str, str, str], list[_Planned]] = {}
        for planned in events:
            days.setdefault(planned.day(), []).append(planned)
        counts = [
            day_count_op(self.org, contact, name, same[0].occurred, len(same))
            for (contact, name, _), same in days.items()
        ]
        return [*ops, *counts]


def _plan(
    store: Store, auth: AuthContext, batch: models.EventBatch, ids: list[str], numbers: Numbers
) -> tuple[list[_Planned], list[int], dict[int, models.EventResult]]:
    """Each event's contact from at most three BatchGetItem rounds for the whole batch (event-id sentinels, identity
    sentinels and named contacts together; then the contacts the sentinels name), and the creation of the contacts
    whose identity nobody owns. → (planned events, the indexes left to the one-by-one path, the results known
    already: duplicates and refusals)."""
    org = auth.org_id
    done: dict[int, models.EventResult] = {}
    targets: dict[int, tuple[datetime, str | Identifier]] = {}
    first: dict[str, int] = {}
    received = clock.now()
    instant = int(ULID.from_datetime(received))  # + n: the batch's untimed events, in batch order
    for n, (event_id, event) in enumerate(zip(ids, batch.events, strict=True)):
        if event_id in first:
            done[n] = models.EventResult(index=n, event_id=event_id, status="duplicate")
            continue
        first[event_id] = n
        try:
            occurred = _occurred(event, n, received)
            if event.contact_id:
                targets[n] = (occurred, event.contact_id)
            else:
                assert event.contact is not None
                c = event.contact
                targets[n] = (occurred, normalize(c.type, c.value, c.source, f"body.events[{n}].contact", numbers))
        except DomainError as err:
            error = {"code": err.code, "message": err.message, "details": err.details}
            done[n] = models.EventResult(index=n, event_id=event_id, status="rejected", error=error)
    wanted = [event_sentinel(org, ids[n]) for n in targets]
    wanted += [
        repo.contact_key(org, t) if isinstance(t, str) else repo.sentinel_key(org, t.sentinel_sk)
        for _, t in targets.values()
    ]
    found = {(i["PK"], i["SK"]): i for i in store.batch_get(wanted)}
    owners = {
        str(t.sentinel_sk): str(item["contact_id"])
        for _, t in targets.values()
        if isinstance(t, Identifier) and (item := found.get(_pair(repo.sentinel_key(org, t.sentinel_sk))))
    }
    missing = [repo.contact_key(org, c) for c in set(owners.values())]
    missing = [k for k in missing if _pair(k) not in found]
    found |= {(i["PK"], i["SK"]): i for i in store.batch_get(missing)} if missing else {}

    def untimed(n: int) -> str | None:
        return None if batch.events[n].timestamp else str(ULID.from_int(instant + n))

    planned: list[_Planned] = []
    slow: list[int] = []
    created: dict[str, str] = {}  # identity sentinel → the contact the batch creates for it
    for n, (occurred, target) in targets.items():
        event_id, event = ids[n], batch.events[n]
        if _pair(event_sentinel(org, event_id)) in found:
            done[n] = models.EventResult(index=n, event_id=event_id, status="duplicate")
            continue
        if isinstance(target, str):
            if _pair(repo.contact_key(org, target)) not in found:
                slow.append(n)  # answered by the one-by-one path: not found, or a merged contact
                continue
            planned.append(_Planned(n, event_id, event, occurred, target, ulid=untimed(n)))
            continue
        owner = owners.get(target.sentinel_sk)
        if owner is not None:
            if _pair(repo.contact_key(org, owner)) not in found:
                slow.append(n)  # merged or deleted meanwhile: the one-by-one path follows or frees it
                continue
            planned.append(_Planned(n, event_id, event, occurred, owner, ulid=untimed(n)))
        elif target.sentinel_sk in created:
            planned.append(_Planned(n, event_id, event, occurred, created[target.sentinel_sk], ulid=untimed(n)))
        else:
            item, creation = contacts.creation_ops(auth, {}, [(target, None)])
            created[target.sentinel_sk] = str(item["id"])
            planned.append(_Planned(n, event_id, event, occurred, str(item["id"]), creation, untimed(n)))
    return planned, slow, done


def _pair(key: dict[str, str]) -> tuple[str, str]:
    return key["PK"], key["SK"]


def _one(
    store: Store, auth: AuthContext, n: int, event_id: str, event: models.EventIn, numbers: Numbers
) -> models.EventResult:
    """One event on its own (a transaction per event): the path of events the batch could not plan, and of a
    transaction that was cancelled (a concurrent duplicate or claim)."""
    org = auth.org_id
    try:
        occurred = _occurred(event, n)
        contact_id = _contact_for(store, auth, event, n, numbers)
        rows = _Planned(n, event_id, event, occurred, contact_id).ops(org)
        store.transact([*rows, day_count_op(org, contact_id, event.name, occurred)])
    except _Duplicate:
        return models.EventResult(index=n, event_id=event_id, status="duplicate")
    except DomainError as err:
        error = {"code": err.code, "message": err.message, "details": err.details}
        return models.EventResult(index=n, event_id=event_id, status="rejected", error=error)
    return models.EventResult(index=n, event_id=event_id, status="accepted", contact_id=contact_id)


def ingest(store: Store, auth: AuthContext, batch: models.EventBatch) -> models.IngestResult:
    """A batch's work is bounded by the batch, not by its events one at a time: its contacts are found with a few
    BatchGetItem rounds (`_plan`), and its events, with the contacts it creates for identities nobody owns, are
    written in TransactWriteItems of up to 100 operations (`_Transactions`): a batch of 100 events naming 100 new
    phones is about a dozen calls. A cancelled transaction (a concurrent duplicate or claim) wrote nothing; its
    events and every later one then take the one-by-one path, where a duplicate never blocks the others. Segments
    counting events are then re-evaluated for the batch's contacts (`segments.refresh_after_events`)."""
    org = auth.org_id
    ids = [e.event_id or new_id("cev") for e in batch.events]
    numbers = numbers_for(store, org)  # one look-up of the default region for the batch, when a number needs it
    planned, slow, results = _plan(store, auth, batch, ids, numbers)
    transactions = _Transactions(org)
    for event in planned:
        transactions.add(event)
    for position, (events, ops) in enumerate(transactions.groups):
        try:
            store.transact(transactions.operations(events, ops))
        except DomainError:
            slow += [p.index for group, _ in transactions.groups[position:] for p in group]
            break
        for p in events:
            results[p.index] = models.EventResult(
                index=p.index, event_id=p.event_id, status="accepted", contact_id=p.contact_id
            )
    seen = {r.event_id for r in results.values() if r.status == "accepted"}
    for n in sorted(slow):
        if ids[n] in seen:  # the same id earlier in the batch (planned once, not again)
            results[n] = models.EventResult(index=n, event_id=ids[n], status="duplicate")
            continue
        results[n] = _one(store, auth, n, ids[n], batch.events[n], numbers)
        seen.add(ids[n])
    ordered = [results[n] for n in range(len(ids))]
    accepted = {r.contact_id for r in ordered if r.status == "accepted" and r.contact_id}
    if accepted:
        try:
            segments.refresh_after_events(store, org, accepted)
        except DomainError:  # the events are stored: a busy table only delays membership until the next rebuild
            logging.getLogger("switchboard").warning("segment refresh after ingest failed", exc_info=True)
    count = {s: sum(1 for r in ordered if r.status == s) for s in ("accepted", "duplicate", "rejected")}
    return models.IngestResult(
        accepted=count["accepted"], duplicates=count["duplicate"], rejected=count["rejected"], results=ordered
    )


# Reads --------------------------------------------------------------------------------------------------------------


def contact_activity(
    store: Store, auth: AuthContext, contact_id: str, *, limit: int, cursor: str | None, name: str | None
) -> tuple[list[models.Activity], str | None]:
    org = auth.org_id
    contacts.get_item(store, org, contact_id)
    fingerprint = query_fingerprint("cdp.contact_activity", {"contact": contact_id, "name": name})
    items, nxt = cursor_page(
        store,
        org,
        fingerprint,
        cursor,
        limit=limit,
        sk_prefix=f"CONTACT#{contact_id}#ACT#",
        forward=False,
        filters={"name": name},
    )
    return [models.Activity.model_validate(i) for i in items], nxt


def activity_log(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    name: str | None,
    contact_id: str | None,
    since: str | None,
    until: str | None,
) -> tuple[list[models.Activity], str | None]:
    """Newest first, merged over the log's write shards and the legacy partition (`shards.merged_state_page`): the
    time window is the key range of every partition, the name and contact filters are applied while merging."""
    org = auth.org_id
    params = {"name": name, "contact_id": contact_id, "since": since, "until": until}
    fingerprint = query_fingerprint("cdp.activity_log", params)
    within = ulid_range("CDPACT#", since, until)

    def keep(i: Item) -> bool:
        return (not name or i.get("name") == name) and (not contact_id or i.get("contact_id") == contact_id)

    items, nxt = read_page(
        org,
        fingerprint,
        cursor,
        lambda state: shards.merged_state_page(
            store,
            state,
            pks=shards.all_pks(org),
            index=None,
            within=within,
            forward=False,
            limit=limit,
            keep=keep if name or contact_id else None,
        ),
    )
    return [models.Activity.model_validate(i) for i in items], nxt
