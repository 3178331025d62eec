"""How many events of a name a contact had in a window (the segment rule `event`), and the first day holding one,
from the contact's timeline (`CONTACT#<ct>#ACT#<ulid>`) and its day rows (`CONTACT#<ct>#EVDAY#<name>#<day>`) that
`switchboard.cdp.events` writes."""

from __future__ import annotations

from datetime import datetime, timedelta

from switchboard import clock
from switchboard.ids import ulid_bound
from switchboard.store import Store, keys


def count_events(store: Store, org: str, contact_id: str, name: str, since: datetime) -> int:
    """How many `name` events the contact had since `since` (the segment rule `event`): the day rows after `since`'s
    day, and that day's own events read from the timeline (only the part of the day inside the window counts).
    Reads one row per day of the window plus one day of the contact's activity, whatever its history."""
    return event_window(store, org, contact_id, name, since)[0]


def event_window(store: Store, org: str, contact_id: str, name: str, since: datetime) -> tuple[int, str | None]:
    """`count_events`, and the first day (`YYYY-MM-DD`) of the window holding one of the events counted (None when
    none is): the count can only fall once that day has left the window. Same reads."""
    pk = keys.org_pk(org)
    day = clock.iso(since)[:10]
    next_day = clock.iso(clock.parse_iso(f"{day}T00:00:00Z") + timedelta(days=1))[:10]
    first_day = store.query_all(
        pk,
        sk_between=(
            f"CONTACT#{contact_id}#ACT#{ulid_bound(since, high=False)}",
            f"CONTACT#{contact_id}#ACT#{ulid_bound(clock.parse_iso(f'{next_day}T00:00:00Z'), high=False)}",
        ),
        filter_expression="#n = :n",
        names={"#n": "name"},
        values={":n": name},
    )
    later = store.query_all(
        pk, sk_between=(f"CONTACT#{contact_id}#EVDAY#{name}#{next_day}", f"CONTACT#{contact_id}#EVDAY#{name}#~")
    )
    counted_days = [str(row["SK"]).rsplit("#", 1)[1] for row in later if int(row.get("events") or 0)]
    first = day if first_day else (counted_days[0] if counted_days else None)
    return len(first_day) + sum(int(row.get("events") or 0) for row in later), first
