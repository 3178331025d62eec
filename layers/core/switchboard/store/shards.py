"""Write sharding of an organization's hot items: the one rule that says which partition an item lives in.

DynamoDB serves about 1,000 write units a second per partition-key value, so items a tenant writes at its send rate
(messages and their status rows, outbox events, usage records, provider-id pointers, conversations) do not all live
under `ORG#<org>`. Each one has an id; its partition is

    `ORG#<org>#<shard>`, shard = blake2b-64(id) mod N

with N the stack parameter `TenantShards` (`TENANT_SHARDS`, a power of two, default 16). Time-ordered tenant lists
on an index get the same suffix on their index partition key (`ORG#<org>#CONVS#<shard>`), and are read with an
ordered merge over the shards (`merged_page`), whose cursor carries every shard's position.

Older items and a changed count. Items written before sharding live under the legacy partition `ORG#<org>` (and
the legacy index partitions); N may only grow, by powers of two, so an item written under an earlier count M < N is
at `blake2b(id) mod M`, which is `(blake2b(id) mod N) mod M`: a shard number below M, and so among the partitions a
list reads at N. A read by id tries the current shard first and, only when the item is not there, the shards of the
smaller counts and the legacy partition in one BatchGetItem (`get`). An item keeps the partition it was written in:
every change after a read by id is addressed to the item's own `PK` (`key_of`), never to a recomputed key. No
migration is needed; the organization purge walks every shard partition.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from switchboard.store.keys import key, org_pk
from switchboard.store.table import Store

Item = dict[str, Any]


def count() -> int:
    from switchboard.config import get_settings

    return get_settings().tenant_shards


def shard_of(item_id: str, shards: int | None = None) -> int:
    """The shard of an id: a stable hash (blake2b, 64 bits) modulo the shard count."""
    digest = hashlib.blake2b(item_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (shards or count())


def pk(org: str, item_id: str) -> str:
    """The partition of the item with this id: `ORG#<org>#<shard>`."""
    return f"{org_pk(org)}#{shard_of(item_id)}"


def pk_at(org: str, shard: int) -> str:
    return f"{org_pk(org)}#{shard}"


def all_pks(org: str, *, legacy: bool = True) -> list[str]:
    """Every partition of the organization's sharded items at the current count, then (with `legacy`) `ORG#<org>`."""
    out = [pk_at(org, s) for s in range(count())]
    return [*out, org_pk(org)] if legacy else out


def candidate_pks(org: str, item_id: str) -> list[str]:
    """Where an item with this id can be, most likely first: its shard at the current count, at each smaller power
    of two, then the legacy partition."""
    out: list[str] = []
    n = count()
    while n >= 1:
        p = pk_at(org, shard_of(item_id, n))
        if p not in out:
            out.append(p)
        n //= 2
    return [*out, org_pk(org)]


def org_of(partition: str) -> str:
    """The organization of a tenant partition key (`ORG#<org>` or `ORG#<org>#<shard>`)."""
    return partition.split("#", 2)[1]


def key_of(item: Item) -> dict[str, str]:
    """The key of an item read from the table: what every change after a read by id addresses."""
    return {"PK": item["PK"], "SK": item["SK"]}


def index_pk(base: str, item_id: str) -> str:
    """A sharded index partition: `<base>#<shard>` (e.g. `ORG#<org>#CONVS#3`)."""
    return f"{base}#{shard_of(item_id)}"


def index_pks(base: str) -> list[str]:
    """Every shard of a sharded index partition, then the legacy unsharded one (`base` itself)."""
    return [*(f"{base}#{s}" for s in range(count())), base]


def get(store: Store, org: str, item_id: str, sk: str, *, consistent: bool = False) -> Item | None:
    """The item `sk` of the id's shard: one GetItem; when absent there, one BatchGetItem of the other candidates
    (a smaller earlier count, the legacy partition)."""
    pks = candidate_pks(org, item_id)
    item = store.get(key(pks[0], sk), consistent=consistent)
    if item is not None:
        return item
    found = {i["PK"]: i for i in store.batch_get([key(p, sk) for p in pks[1:]], consistent=consistent)}
    return next((found[p] for p in pks[1:] if p in found), None)


def query_all(store: Store, pks: Sequence[str], **query: Any) -> list[Item]:
    """Every item of the key condition over several partitions (a small, bounded collection per partition)."""
    return [i for p in pks for i in store.query_all(p, **query)]


# Ordered merge over shards -------------------------------------------------------------------------------------
DONE = 0  # a shard's position once it has nothing left
LOW, HIGH = " ", "~"  # below and above every index sort key these lists use (times, ids)


class _Shard:
    def __init__(self, pk: str, start: str | None) -> None:
        self.pk = pk
        self.start = start  # the index sort key this page continues after (None: the partition's start)
        self.after = start  # ... and after the last item read
        self.buffer: list[Item] = []
        self.exhausted = False
        self.emitted: str | None = None
        self.fetches = 0


def merged_page(
    store: Store,
    pks: Sequence[str],
    positions: Sequence[Any] | None,
    *,
    index: str,
    limit: int,
    forward: bool = True,
    keep: Callable[[Item], bool] | None = None,
    max_reads: int | None = None,
) -> tuple[list[Item], list[Any] | None]:
    """Up to `limit` items of the index partitions `pks` in the order of the index sort key (unique per item: these
    lists end it with the item's id), and each partition's position to continue from (None when every partition is
    done).

    A position is None (from the start), DONE (0), or the index sort key of the last item answered from (or read in)
    that partition: the next read is the key condition `sort key BETWEEN` that key and the end of the range, without
    the item at the bound itself (so a cursor holds one short string per partition, no table keys). Each partition is
    read lazily in pages of `limit / len(pks) + 2` items (with `keep`, four times larger at each further read of that
    partition), so a page reads about `limit` items plus one short page per partition; an item is answered only
    once every partition not done has an item buffered to compare with it. `keep` filters while reading; after
    `max_reads` queries (default: three per partition + 10) the page ends short, with its cursor."""
    sk_attr = f"{index}SK"
    starts = list(positions) if positions is not None else [None] * len(pks)
    shards = [_Shard(p, s if isinstance(s, str) else None) for p, s in zip(pks, starts, strict=True)]
    for shard, s in zip(shards, starts, strict=True):
        shard.exhausted = s == DONE
    budget = max_reads if max_reads is not None else 3 * len(pks) + 10
    reads = 0
    base = -(-limit // max(1, len(pks))) + 2
    out: list[Item] = []
    short = False
    while len(out) < limit and not short:
        for shard in shards:
            while not shard.buffer and not shard.exhausted:
                if reads >= budget:
                    short = True
                    break
                # a filter thins the reads: each further one is larger; unfiltered, a shard is rarely read twice
                size = base if keep is None else min(200, base * 4**shard.fetches)
                rows, more = _read_after(store, shard.pk, index, shard.after, size, forward)
                reads += 1
                shard.fetches += 1
                if rows:
                    shard.after = str(rows[-1][sk_attr])
                shard.buffer = [i for i in rows if keep is None or keep(i)]
                shard.exhausted = not more
        heads = [s for s in shards if s.buffer]
        if short or not heads:
            break
        shard = (min if forward else max)(heads, key=lambda s: str(s.buffer[0][sk_attr]))
        item = shard.buffer.pop(0)
        shard.emitted = str(item[sk_attr])
        out.append(item)
    cursor: list[Any] = []
    for shard in shards:
        if shard.buffer:  # read ahead: continue after the last item answered
            cursor.append(shard.emitted or shard.start)
        elif shard.exhausted:
            cursor.append(DONE)
        else:
            cursor.append(shard.after)
    if all(c == DONE for c in cursor):
        return out, None
    return out, cursor


def _read_after(
    store: Store, pk: str, index: str, after: str | None, size: int, forward: bool
) -> tuple[list[Item], bool]:
    """Up to `size` items of one index partition after the sort key `after` in the list's direction; and whether
    the partition may hold more."""
    bounds = None
    if after is not None:
        bounds = (after, HIGH) if forward else (LOW, after)
    page = store.query(pk, index=index, limit=size + (after is not None), sk_between=bounds, forward=forward)
    rows = [i for i in page.items if str(i[f"{index}SK"]) != after]
    return rows[:size], page.last_key is not None


def merged_cursor_page(
    store: Store,
    org: str,
    fingerprint: str,
    cursor: str | None,
    *,
    pks: Sequence[str],
    index: str,
    limit: int,
    forward: bool = True,
    keep: Callable[[Item], bool] | None = None,
) -> tuple[list[Item], str | None]:
    """`merged_page` from an opaque cursor (switchboard.api.pagination: sealed, bound to the organization and the
    query; the positions deflated inside it), answering the items and the next cursor."""
    from switchboard.api.pagination import decode_cursor, encode_cursor
    from switchboard.errors import ValidationFailed

    state = decode_cursor(cursor, org, fingerprint)
    positions = None
    if state is not None:
        try:
            positions = json.loads(zlib.decompress(base64.urlsafe_b64decode(str(state.get("z", "")))))
        except (ValueError, zlib.error):
            positions = None
        if not isinstance(positions, list) or len(positions) != len(pks):
            raise ValidationFailed.field("query.cursor", "is not a valid cursor for this list")
    items, nxt = merged_page(store, pks, positions, index=index, limit=limit, forward=forward, keep=keep)
    if nxt is None:
        return items, None
    packed = base64.urlsafe_b64encode(zlib.compress(json.dumps(nxt, separators=(",", ":")).encode(), 9)).decode()
    return items, encode_cursor(org, fingerprint, {"z": packed})
