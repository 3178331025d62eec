"""Webhook items and keys.

In the single table, under `ORG#<org_id>`:
WHEP#<whe_id>                     endpoint: url, filter, enabled, sealed secret (+ previous one for 24 h), failures
WHSET#alerting                    alerting settings (e-mails, failure threshold)
WHPORTAL#<sha256(token)> / WHPORTAL   a portal magic-link token (global partition: the token is all a visitor has)
WHPSESS#<sha256(session)> / WHPSESS   a portal session (organization, CSRF token, 30 min), made by using a link once
WHPACE#<org_id> / WHPACE          the organization's delivery pacing (`pace.py`)

In DeliveriesTable (`deliveries_store()`), everything with a TTL, `s` = `shard_of(id)` in 0 … shards-1:
ORG#<org>#DLV#<msg_id> / DLV      delivery: one event for one endpoint; the id is deterministic (event, endpoint)
                                  GSI1 `ORG#<org>#WHDLV#<s>` / `<created_at>#<msg_id>`              deliveries
                                  GSI2 `ORG#<org>#WHEP#<whe_id>#DLV#<s>` / `<created_at>#<msg_id>`  one endpoint's
                                  GSI3 `ORG#<org>#WHDLV#<status>#<s>` / `<created_at>#<msg_id>`     by status
                                  (`status_index`: set in the same write as every status change)
ORG#<org>#DLV#<msg_id> / ATT#<ulid>   one attempt (status code, duration, error, response excerpt)
ORG#<org>#WHEVT#<event_id> / EVT  the event's payload, once for all its deliveries
                                  GSI1 `ORG#<org>#WHEVT#<s>` / `<created_at>#<event_id>`  (purge, erasure)
Every list is a merge of its shards, newest first (`merged_page`).

Deliveries written before DeliveriesTable live in the single table (`ORG#<org>` / `DLV#<msg_id>`, GSI1
`ORG#<org>#WHDLV`): `service.move_legacy_deliveries_chunk` moves them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from switchboard.config import get_settings
from switchboard.store import Store, keys
from switchboard.store.shards import read_round

Item = dict[str, Any]
DELIVERY_RETENTION = timedelta(days=30)
# An event's payload outlives every delivery that refers to it (deliveries are retryable by API until they expire).
PAYLOAD_RETENTION = DELIVERY_RETENTION + timedelta(days=1)


@functools.lru_cache(maxsize=4)
def _store_of(table_name: str) -> Store:
    return Store(table_name)


def deliveries_store() -> Store:
    """The store of DeliveriesTable: deliveries, attempts, event payloads."""
    return _store_of(get_settings().deliveries_table_name)


def shards() -> int:
    return get_settings().webhook_delivery_shards


def shard_of(ident: str) -> int:
    """Which of the list partitions an item (delivery, event payload) is written to: a hash of its id."""
    return int.from_bytes(hashlib.sha256(ident.encode()).digest()[:4], "big") % shards()


# Keys -------------------------------------------------------------------------------------------------------------
def endpoint_key(org_id: str, endpoint_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"WHEP#{endpoint_id}")


ENDPOINT_PREFIX = "WHEP#"
DELIVERY_SK = "DLV"
ATTEMPT_PREFIX = "ATT#"
EVENT_SK = "EVT"


def delivery_pk(org_id: str, delivery_id: str) -> str:
    return f"{keys.org_pk(org_id)}#DLV#{delivery_id}"


def delivery_key(org_id: str, delivery_id: str) -> dict[str, str]:
    return keys.key(delivery_pk(org_id, delivery_id), DELIVERY_SK)


def attempt_key(org_id: str, delivery_id: str, ulid: str) -> dict[str, str]:
    return keys.key(delivery_pk(org_id, delivery_id), ATTEMPT_PREFIX + ulid)


def event_key(org_id: str, event_id: str) -> dict[str, str]:
    return keys.key(f"{keys.org_pk(org_id)}#WHEVT#{event_id}", EVENT_SK)


def events_pk(org_id: str, shard: int) -> str:
    """GSI1 partition of the event payloads (one of `shards()`)."""
    return f"{keys.org_pk(org_id)}#WHEVT#{shard}"


def alerting_key(org_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), "WHSET#alerting")


def portal_key(token_hash: str) -> dict[str, str]:
    return keys.key(f"WHPORTAL#{token_hash}", "WHPORTAL")


def portal_session_key(session_hash: str) -> dict[str, str]:
    return keys.key(f"WHPSESS#{session_hash}", "WHPSESS")


def deliveries_pk(org_id: str, shard: int) -> str:
    """GSI1 partition: one shard of the organization's deliveries, sorted by creation."""
    return f"{keys.org_pk(org_id)}#WHDLV#{shard}"


def endpoint_deliveries_pk(org_id: str, endpoint_id: str, shard: int) -> str:
    """GSI2 partition: one shard of one endpoint's deliveries, sorted by creation."""
    return f"{keys.org_pk(org_id)}#WHEP#{endpoint_id}#DLV#{shard}"


def status_deliveries_pk(org_id: str, status: str, shard: int) -> str:
    """GSI3 partition: one shard of the organization's deliveries in one status, sorted by creation."""
    return f"{keys.org_pk(org_id)}#WHDLV#{status}#{shard}"


def delivery_id(event_id: str, endpoint_id: str) -> str:
    """Deterministic: a redelivered event maps to the same delivery, so fan-out finds it instead of adding one."""
    return "msg_" + hashlib.sha256(f"{event_id}:{endpoint_id}".encode()).hexdigest()[:32]


def delivery_index(org_id: str, endpoint_id: str, created_at: str, msg_id: str) -> Item:
    sort, shard = f"{created_at}#{msg_id}", shard_of(msg_id)
    return {
        "GSI1PK": deliveries_pk(org_id, shard),
        "GSI1SK": sort,
        "GSI2PK": endpoint_deliveries_pk(org_id, endpoint_id, shard),
        "GSI2SK": sort,
    }


def status_index(delivery: Item, status: str) -> Item:
    """The GSI3 keys of `delivery` (an item with organization_id, created_at, id) once in `status`: every write that
    sets a delivery's status sets these attributes in the same request."""
    org, msg_id = str(delivery["organization_id"]), str(delivery["id"])
    return {
        "GSI3PK": status_deliveries_pk(org, status, shard_of(msg_id)),
        "GSI3SK": f"{delivery['created_at']}#{msg_id}",
    }


STATUS_INDEX_ATTRIBUTES = ("GSI3PK", "GSI3SK")


def status_index_update(delivery: Item, status: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """`SET` clauses, names and values that move `delivery` into `status`'s lists (appended to an update that
    sets `#status`)."""
    attributes = status_index(delivery, status)
    clauses = ", ".join(f"#{a} = :{a}" for a in attributes)
    return clauses, {f"#{a}": a for a in attributes}, {f":{a}": v for a, v in attributes.items()}


def event_item(org_id: str, detail: dict[str, Any], now: str, ttl: int) -> Item:
    """The event's payload item: the flat event body, serialized once; every attempt of every delivery of the event
    sends (and signs) exactly these bytes."""
    event_id = str(detail["event_id"])
    return {
        **event_key(org_id, event_id),
        "GSI1PK": events_pk(org_id, shard_of(event_id)),
        "GSI1SK": f"{now}#{event_id}",
        "entity": "WebhookEvent",
        "organization_id": org_id,
        "event_id": event_id,
        "event_type": detail["event_type"],
        "occurred_at": detail.get("occurred_at"),
        "body": json.dumps(detail.get("data") or {}, separators=(",", ":"), ensure_ascii=False),
        "created_at": now,
        "ttl": ttl,
    }


def payload_of(body: Any) -> dict[str, Any]:
    return json.loads(body) if isinstance(body, str) and body else {}


# Reads ------------------------------------------------------------------------------------------------------------
def list_endpoints(store: Store, org_id: str, *, consistent: bool = False) -> list[Item]:
    return store.query_all(keys.org_pk(org_id), sk_prefix=ENDPOINT_PREFIX, consistent=consistent)


def get_endpoint(store: Store, org_id: str, endpoint_id: str, *, consistent: bool = False) -> Item | None:
    return store.get(endpoint_key(org_id, endpoint_id), consistent=consistent)


def get_delivery(org_id: str, msg_id: str, *, consistent: bool = False) -> Item | None:
    return deliveries_store().get(delivery_key(org_id, msg_id), consistent=consistent)


def event_bodies(org_id: str, event_ids: Sequence[str]) -> dict[str, str]:
    """The stored bodies of these events (one BatchGetItem per 100), by event id."""
    if not event_ids:
        return {}
    found = deliveries_store().batch_get([event_key(org_id, e) for e in event_ids], projection=("event_id", "body"))
    return {str(i["event_id"]): str(i.get("body") or "{}") for i in found}


def get_alerting(store: Store, org_id: str) -> Item | None:
    return store.get(alerting_key(org_id))


# Lists over shards ------------------------------------------------------------------------------------------------
Positions = dict[str, str | None]  # shard → GSI sort key of the last item handed out ("" = none yet; None = done)


def merged_page(
    store: Store,
    org_id: str,
    pks: Sequence[str],
    index: str,
    *,
    limit: int,
    positions: Positions | None,
    low: str = "0",
    filters: dict[str, Any] | None = None,
) -> tuple[list[Item], Positions | None]:
    """Newest first across the shard partitions `pks` of one delivery list (`pks[n]` is shard n): each shard not
    yet done answers up to `limit` items after its position (`Store.filtered_page`, all shards at once), the newest
    `limit` of them make the page, and each shard's position moves past the items it gave. The next positions are
    None when every shard is done. A page reads at most `len(pks) * limit` items (more only when `filters` thin the
    reads)."""
    positions = dict(positions or {})
    live = [n for n in range(len(pks)) if positions.get(str(n), "") is not None]

    def read(n: int) -> tuple[int, list[Item], bool]:
        position = positions.get(str(n)) or ""
        start = None
        if position:
            start = {
                **delivery_key(org_id, position.rsplit("#", 1)[1]),
                f"{index}PK": pks[n],
                f"{index}SK": position,
            }
        items, last = store.filtered_page(
            pks[n],
            limit=limit,
            start_key=start,
            filters=filters,
            index=index,
            sk_between=(low, "~"),
            forward=False,
        )
        return n, items, last is None

    results = read_round([functools.partial(read, n) for n in live])
    candidates = sorted(
        ((item[f"{index}SK"], n, item) for n, items, _ in results for item in items), key=lambda c: c[0], reverse=True
    )[:limit]
    taken: dict[int, int] = {}
    for sort, n, _ in candidates:
        taken[n] = taken.get(n, 0) + 1
        positions[str(n)] = sort  # newest first: the last one taken from a shard is its oldest
    for n, items, ended in results:
        if ended and taken.get(n, 0) == len(items):
            positions[str(n)] = None
    if all(positions.get(str(n), "") is None for n in range(len(pks))):
        return [c[2] for c in candidates], None
    return [c[2] for c in candidates], positions


def shard_pks(build: Any) -> list[str]:
    """`[build(0), …, build(shards - 1)]`: the partitions of one list."""
    return [build(n) for n in range(shards())]


# Legacy deliveries (single table) ------------------------------------------------------------------------------
def legacy_deliveries_pk(org_id: str) -> str:
    """GSI1 partition of the deliveries still in the single table."""
    return f"{keys.org_pk(org_id)}#WHDLV"


def legacy_delivery_key(org_id: str, msg_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"DLV#{msg_id}")


def legacy_attempt_prefix(msg_id: str) -> str:
    return f"DLV#{msg_id}#ATT#"


def shard_walk(
    store: Store,
    pk_of: Any,
    *,
    index: str,
    position: dict[str, Any] | None,
    budget: int,
    **query: Any,
) -> tuple[list[Item], dict[str, Any] | None]:
    """A bounded read of a sharded list for background work, shard after shard (no merge), from `position`
    (`{"shard", "cursor"}`; None = the start) on: each query's Limit is what is left of `budget`; a query that stops
    at its Limit spends it all, one that ends its shard spends the items it answered, so a chunk evaluates about
    `budget` items whatever a filter keeps, and empty shards cost only their query (at most `shards() + 10`
    queries). `pk_of(n)` is shard n's partition; `query` takes `Store.query`'s key condition and filter. Answers
    the items and the next position, None when every shard has been read."""
    shard = int((position or {}).get("shard") or 0)
    cursor = (position or {}).get("cursor")
    items: list[Item] = []
    left = budget
    for _ in range(shards() + 10):
        page = store.query(pk_of(shard), index=index, start_key=cursor, limit=left, **query)
        items += page.items
        cursor = page.last_key
        left -= left if cursor is not None else len(page.items)
        if cursor is None:
            shard += 1
            if shard >= shards():
                return items, None
        if left <= 0:
            break
    return items, {"shard": shard, "cursor": cursor}
