"""Write sharding of an organization's hot items: the one rule that says which partition an item lives in.

DynamoDB serves about 1,000 write units a second per partition-key value, so items a tenant writes at its send rate
(messages and their status rows, outbox events, usage records, provider-id pointers, conversations) do not all live
under `ORG#<org>`. Each one has an id; its partition is

    `ORG#<org>#<shard>`, shard = blake2b-64(id) mod N

with N the stack parameter `TenantShards` (`TENANT_SHARDS`, a power of two, default 16). Time-ordered tenant lists
on an index get the same suffix on their index partition key (`ORG#<org>#CONVS#<shard>`), and are read with an
ordered merge over the shards (`merged_page`), whose cursor is a position valid in every shard.

Older items and a changed count. Items written before sharding live under the legacy partition `ORG#<org>` (and
the legacy index partitions); N may only grow, by powers of two, so an item written under an earlier count M < N is
at `blake2b(id) mod M`, which is `(blake2b(id) mod N) mod M`: a shard number below M, and so among the partitions a
list reads at N. A read by id tries the current shard first and, only when the item is not there, the shards of the
smaller counts and the legacy partition in one BatchGetItem (`get`). An item keeps the partition it was written in:
every change after a read by id is addressed to the item's own `PK` (`key_of`), never to a recomputed key. No
migration is needed; the organization purge walks every shard partition.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from switchboard.config import get_settings
from switchboard.errors import ValidationFailed
from switchboard.store.keys import key, org_pk
from switchboard.store.table import Store

Item = dict[str, Any]


def count() -> int:
    return get_settings().tenant_shards


def shard_of(item_id: str, shards: int | None = None) -> int:
    """The shard of an id: a stable hash (blake2b, 64 bits) modulo the shard count."""
    digest = hashlib.blake2b(item_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (shards or count())


def pk(org: str, item_id: str, shards: int | None = None) -> str:
    """The partition of the item with this id: `ORG#<org>#<shard>` (at the stage's count, unless `shards` says it:
    a tool writing from outside the functions)."""
    return f"{org_pk(org)}#{shard_of(item_id, shards)}"


def event_key(org: str, ulid: str) -> dict[str, str]:
    """An outbox event, in its id's shard."""
    return key(pk(org, ulid), f"EVENT#{ulid}")


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


def index_pks(base: str, *, legacy: bool = True) -> list[str]:
    """Every shard of a sharded index partition, then (with `legacy`) the unsharded one (`base` itself) of a list
    that existed before sharding."""
    out = [f"{base}#{s}" for s in range(count())]
    return [*out, base] if legacy else out


def get(
    store: Store, org: str, item_id: str, sk: str, *, consistent: bool = False, often_absent: bool = False
) -> Item | None:
    """The item `sk` of the id's shard: one GetItem; when absent there, one BatchGetItem of the other candidates
    (a smaller earlier count, the legacy partition). `often_absent` (a lookup that usually finds nothing, e.g. a
    dedupe pointer): every candidate in one BatchGetItem, one round trip either way."""
    pks = candidate_pks(org, item_id)
    rest = pks
    if not often_absent:
        item = store.get(key(pks[0], sk), consistent=consistent)
        if item is not None:
            return item
        rest = pks[1:]
    found = {i["PK"]: i for i in store.batch_get([key(p, sk) for p in rest], consistent=consistent)}
    return next((found[p] for p in rest if p in found), None)


def query_all(store: Store, pks: Sequence[str], **query: Any) -> list[Item]:
    """Every item of the key condition over several partitions (a small, bounded collection per partition), in the
    order of `pks`; the partitions are read side by side (`read_round`)."""
    pages = read_round([partial(store.query_all, p, **query) for p in pks])
    return [i for page in pages for i in page]


def walk_pks(base: str) -> list[str]:
    """The partitions of a sharded index list in the order a walk over every item reads them: the legacy unsharded
    one (`base`) first, then the shards. An item only ever leaves the legacy partition (its next write puts it in its
    shard) and keeps its shard, so a walk in this order meets every item that exists throughout it."""
    return [base, *(f"{base}#{s}" for s in range(count()))]


def walk_page(
    store: Store, base: str, checkpoint: dict[str, Any] | None, *, index: str, limit: int
) -> tuple[list[Item], dict[str, Any] | None]:
    """One page of a job's walk over every item of the sharded index list `base` (`walk_pks`, the partitions one
    after the other, in no order within the list), and the checkpoint to continue from (`{"part": <index in
    walk_pks>, "cursor": <LastEvaluatedKey>}`): None only when the walk is done. The page goes on into the next
    partitions while it has fewer than `limit` items: it reads at most `limit` items, in at most one Query per
    partition (a page may still be short or empty). A checkpoint without `part` is a LastEvaluatedKey of the
    unsharded list, written before the list was sharded: the walk resumes there and then reads the shards."""
    if checkpoint is not None and "part" not in checkpoint:
        checkpoint = {"part": 0, "cursor": checkpoint}
    pks = walk_pks(base)
    part, cursor = (int(checkpoint["part"]), checkpoint.get("cursor")) if checkpoint else (0, None)
    out: list[Item] = []
    while part < len(pks) and len(out) < limit:
        page = store.query(pks[part], index=index, limit=limit - len(out), start_key=cursor)
        out += page.items
        if page.last_key is not None:
            return out, {"part": part, "cursor": page.last_key}
        part, cursor = part + 1, None
    return out, ({"part": part, "cursor": None} if part < len(pks) else None)


# Ordered merge over shards -------------------------------------------------------------------------------------
LOW, HIGH = " ", "~"  # below and above every index sort key these lists use (times, ids)


@dataclass(frozen=True)
class Position:
    """Where a merged list continues: the items after the sort key `key` in the list's order (`inclusive`: from it).
    One key for every partition: the sort keys are unique (these lists end them with the item's id), so what lies
    before it in the order has been answered or passed over in every partition, and nothing after it has."""

    key: str
    inclusive: bool = False


class _Shard:
    def __init__(self, pk: str) -> None:
        self.pk = pk
        self.last_read: str | None = None
        self.buffer: list[Item] = []
        self.exhausted = False
        self.fetches = 0


_readers: ThreadPoolExecutor | None = None


def read_round(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """The answers of `calls` (reads of several partitions), in order, made side by side: a round of reads costs
    the latency of its slowest partition, not the sum over the partitions (boto3 clients are thread-safe;
    `switchboard.aws` shares one per container). The one thread pool of every list over shards; each read runs in a
    copy of the caller's context (its context variables: logging keys, the local IAM check's attribution)."""
    global _readers
    if len(calls) <= 1:
        return [call() for call in calls]
    if _readers is None:
        # every partition of a round at once: up to 64 shards and the legacy partition (threads start as needed)
        _readers = ThreadPoolExecutor(max_workers=65, thread_name_prefix="shard-read")
    futures = [_readers.submit(contextvars.copy_context().run, call) for call in calls]
    return [future.result() for future in futures]


def merged_page(
    store: Store,
    pks: Sequence[str],
    start: Position | None,
    *,
    index: str | None,
    limit: int,
    forward: bool = True,
    keep: Callable[[Item], bool] | None = None,
    max_reads: int | None = None,
    within: tuple[str, str] = (LOW, HIGH),
) -> tuple[list[Item], Position | None]:
    """Up to `limit` items of the partitions `pks` in the order of the sort key, from `start`, and the position to
    continue from (None when every partition is done). `index` names the index whose partitions `pks` are (None: the
    table's own, ordered by `SK`); `within` bounds the sort keys of the list (a prefix range of a table partition
    that holds other items too).

    The next item is the first head among the partitions' read items; it is answered once no partition could still
    hold an earlier one — each partition not done has read past it or has an item buffered. Partitions are read from
    the position (key condition `sort key BETWEEN`) only when they stand in the way, a round at a time, in pages of
    `limit / len(pks) + 2` items (further reads of a partition: half that; with `keep`, four times larger at each
    further read): a page reads about `limit` items plus one short page per partition. So the next position is
    simply after the last item answered. `keep` filters while reading; after `max_reads` queries (default: three per
    partition + 10) the page ends short — after the last item answered, or, when none was, at the furthest point
    every partition has been read to (always past `start`: the first round reads every partition)."""
    sk_attr = f"{index}SK" if index else "SK"
    shards = [_Shard(p) for p in pks]
    budget = max_reads if max_reads is not None else 3 * len(pks) + 10
    reads = 0
    base = -(-limit // max(1, len(pks))) + 2
    out: list[Item] = []

    def past(shard: _Shard, key: str) -> bool:  # the partition has read beyond `key` in the list's order
        return shard.last_read is not None and (shard.last_read > key if forward else shard.last_read < key)

    while len(out) < limit:
        heads = [s for s in shards if s.buffer]
        first = (min if forward else max)(heads, key=lambda s: str(s.buffer[0][sk_attr])) if heads else None
        key = str(first.buffer[0][sk_attr]) if first else None
        blocking = [s for s in shards if not s.buffer and not s.exhausted and (key is None or not past(s, key))]
        if not blocking:
            if first is None:
                break  # every partition done
            out.append(first.buffer.pop(0))
            continue
        if reads + len(blocking) > budget and reads >= len(pks):
            break  # a short page
        calls = []
        for shard in blocking:
            # a filter thins the reads: each further one is larger; unfiltered, a shard is rarely read twice, and
            # then for the one or two items it is ahead of the others
            if keep is None:
                size = base if shard.fetches == 0 else max(2, base // 2)
            else:
                size = min(200, base * 4**shard.fetches)
            bound = Position(shard.last_read) if shard.last_read is not None else start
            calls.append(_reader(store, shard.pk, index, bound, size, forward, within))
        for shard, (rows, more) in zip(blocking, read_round(calls), strict=True):
            reads += 1
            shard.fetches += 1
            if rows:
                shard.last_read = str(rows[-1][sk_attr])
            shard.buffer = [i for i in rows if keep is None or keep(i)]
            shard.exhausted = not more
    if all(s.exhausted and not s.buffer for s in shards):
        return out, None
    if out:
        return out, Position(str(out[-1][sk_attr]))
    # a short page with nothing to answer: continue at the nearest point not read in every partition
    reached = [
        Position(str(s.buffer[0][sk_attr]), inclusive=True) if s.buffer else Position(str(s.last_read))
        for s in shards
        if s.buffer or (not s.exhausted and s.last_read is not None)
    ]
    return out, (min if forward else max)(reached, key=lambda p: p.key)


def _reader(
    store: Store, pk: str, index: str | None, bound: Position | None, size: int, forward: bool, within: tuple[str, str]
) -> Callable[[], tuple[list[Item], bool]]:
    """The read of up to `size` items of one partition from `bound` on in the list's order (inside `within`): it
    answers them and whether the partition may hold more."""
    sk_attr = f"{index}SK" if index else "SK"

    def read() -> tuple[list[Item], bool]:
        if bound is None:
            whole = within == (LOW, HIGH)
            page = store.query(pk, index=index, limit=size, sk_between=None if whole else within, forward=forward)
            return page.items, page.last_key is not None
        between = (bound.key, within[1]) if forward else (within[0], bound.key)
        extra = 0 if bound.inclusive else 1
        page = store.query(pk, index=index, limit=size + extra, sk_between=between, forward=forward)
        rows = [i for i in page.items if bound.inclusive or str(i[sk_attr]) != bound.key]
        return rows[:size], page.last_key is not None or len(rows) > size

    return read


def merged_state_page(
    store: Store,
    state: dict[str, Any] | None,
    *,
    pks: Sequence[str],
    index: str | None,
    limit: int,
    forward: bool = True,
    keep: Callable[[Item], bool] | None = None,
    within: tuple[str, str] = (LOW, HIGH),
) -> tuple[list[Item], dict[str, Any] | None]:
    """`merged_page` from the state an opaque cursor carries (`switchboard.paging.read_page` seals it, bound to the
    organization and the query): one sort key whatever the number of shards. Answers the items and the next state."""
    start = None
    if state is not None:
        if not isinstance(state.get("after"), str) or not isinstance(state.get("from"), bool):
            raise ValidationFailed.field("query.cursor", "is not a valid cursor for this list")
        start = Position(state["after"], state["from"])
    if state is not None and not within[0] <= state["after"] <= within[1]:
        raise ValidationFailed.field("query.cursor", "is not a valid cursor for this list")
    items, nxt = merged_page(store, pks, start, index=index, limit=limit, forward=forward, keep=keep, within=within)
    return items, ({"after": nxt.key, "from": nxt.inclusive} if nxt else None)
