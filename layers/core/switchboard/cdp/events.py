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
from datetime import datetime
from typing import Any

from ulid import ULID

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.cdp import logs, models, segments
from switchboard.contacts import service as contacts
from switchboard.contacts.identifiers import Numbers, normalize, numbers_for
from switchboard.errors import Conflict, DomainError, NotFound, ValidationFailed
from switchboard.ids import new_id, ulid_range
from switchboard.paging import cursor_page, query_fingerprint, read_page
from switchboard.store import Put, Store, Update, keys, shards

Item = dict[str, Any]


class _Duplicate(Conflict):
    """The event id was ingested before."""


def event_sentinel(org: str, event_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CDPEVTID#{event_id}")


def ulid_at(moment: datetime) -> str:
    return str(ULID.from_datetime(moment))


def activity_puts(
    org: str, contact_id: str, *, event_id: str, name: str, kind: str, properties: Item, occurred: datetime
) -> list[Put | Update]:
    """The writes of one activity: the contact's timeline (naming the log row's partition), the organization's log
    (in its ULID's write shard) and the contact's day count."""
    ulid = ulid_at(occurred)
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


def day_count_op(org: str, contact_id: str, name: str, occurred: datetime) -> Update:
    """The transaction operation that counts one `name` event of the contact on its day of occurrence."""
    day = clock.iso(occurred)[:10]
    return Update(
        key=keys.key(keys.org_pk(org), f"CONTACT#{contact_id}#EVDAY#{name}#{day}"),
        expression="SET #e = :e ADD events :one",
        names={"#e": "entity"},
        values={":e": "EventDay", ":one": 1},
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


def _occurred(event: models.EventIn, n: int) -> datetime:
    if not event.timestamp:
        return clock.now()
    field = f"body.events[{n}].timestamp"
    moment = clock.parse_iso_input(event.timestamp, field)
    if moment < clock.UNIX_EPOCH:  # an activity's key is a ULID of its time: milliseconds since 1970
        raise ValidationFailed.field(field, "must be 1970-01-01T00:00:00Z or later")
    return moment


def ingest(store: Store, auth: AuthContext, batch: models.EventBatch) -> models.IngestResult:
    """Each event is one transaction (sentinel + timeline + log): a duplicate never blocks the others. Segments
    counting events are then re-evaluated for the batch's contacts (`segments.refresh_after_events`)."""
    org = auth.org_id
    ids = [e.event_id or new_id("cev") for e in batch.events]
    seen = {i["SK"].removeprefix("CDPEVTID#") for i in store.batch_get([event_sentinel(org, i) for i in set(ids)])}
    results: list[models.EventResult] = []
    numbers = numbers_for(store, org)  # one look-up of the default region for the batch, when a number needs it
    for n, (event_id, event) in enumerate(zip(ids, batch.events, strict=True)):
        if event_id in seen:
            results.append(models.EventResult(index=n, event_id=event_id, status="duplicate"))
            continue
        try:
            occurred = _occurred(event, n)
            contact_id = _contact_for(store, auth, event, n, numbers)
            store.transact(
                [
                    Put(
                        item={
                            **event_sentinel(org, event_id),
                            "entity": "EventId",
                            "contact_id": contact_id,
                            "received_at": clock.now_iso(),
                        },
                        condition="attribute_not_exists(PK)",
                        error=_Duplicate(),
                    ),
                    *activity_puts(
                        org,
                        contact_id,
                        event_id=event_id,
                        name=event.name,
                        kind="event",
                        properties=event.properties,
                        occurred=occurred,
                    ),
                ]
            )
        except _Duplicate:
            results.append(models.EventResult(index=n, event_id=event_id, status="duplicate"))
            continue
        except DomainError as err:
            error = {"code": err.code, "message": err.message, "details": err.details}
            results.append(models.EventResult(index=n, event_id=event_id, status="rejected", error=error))
            continue
        seen.add(event_id)
        results.append(models.EventResult(index=n, event_id=event_id, status="accepted", contact_id=contact_id))
    accepted = {r.contact_id for r in results if r.status == "accepted" and r.contact_id}
    if accepted:
        try:
            segments.refresh_after_events(store, org, accepted)
        except DomainError:  # the events are stored: a busy table only delays membership until the next rebuild
            logging.getLogger("switchboard").warning("segment refresh after ingest failed", exc_info=True)
    count = {s: sum(1 for r in results if r.status == s) for s in ("accepted", "duplicate", "rejected")}
    return models.IngestResult(
        accepted=count["accepted"], duplicates=count["duplicate"], rejected=count["rejected"], results=results
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
