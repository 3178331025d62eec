"""An in-memory DynamoDB table for `bench.scale`: the low-level client's requests and answers (typed attribute values),
fast enough to hold 10^5 contacts, and counting what DynamoDB bills.

It serves `switchboard.store.table.Store` unchanged: GetItem, PutItem, UpdateItem, DeleteItem, Query (table, GSI1 to
GSI3; `Select=COUNT`, `Limit`, 1 MB pages, `ExclusiveStartKey`, both directions), BatchGetItem (projection),
BatchWriteItem, TransactWriteItems (all-or-nothing, `CancellationReasons`), and the expression syntax the code uses:
comparisons, `BETWEEN`, `IN`, `AND` / `OR` / `NOT`, `attribute_exists`, `attribute_not_exists`, `begins_with`,
`contains`, `size`; `SET` (`+` / `-`, `if_not_exists`, `list_append`), `REMOVE`, `ADD`, `DELETE`; dotted paths and
list indexes. A failed condition raises botocore's `ClientError` with DynamoDB's codes.

Each partition keeps its sort keys in a sorted list (bisect), each index its `(index SK, PK, SK)` tuples per index
partition key. `bulk()` appends without sorting (seeding) and sorts once at the end.

Counting, per request (`Meter`): items read = items a GetItem / BatchGetItem asked for, items a Query examined
(before its filter, within `Limit` and the 1 MB page) and items a transaction's ConditionCheck reads; items written =
every Put, Update and Delete (in or out of a transaction); and writes per partition-key value (the table's `PK` and
each index's PK of the written item), for the key-distribution check.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from functools import lru_cache
from typing import Any

from botocore.exceptions import ClientError

Raw = dict[str, Any]  # an item in DynamoDB JSON
INDEXES = ("GSI1", "GSI2", "GSI3")
PAGE_BYTES = 1024 * 1024
_TOP = "\U0010ffff"


class Meter:
    """What one request (or a job) did to the table."""

    def __init__(self) -> None:
        self.reads = 0
        self.writes = 0
        self.calls: Counter[str] = Counter()
        self.keys: Counter[str] = Counter()  # writes per partition-key value, table and indexes

    def __repr__(self) -> str:
        return f"Meter(reads={self.reads}, writes={self.writes}, calls={dict(self.calls)})"


# Expressions -----------------------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+)|(?P<op><>|<=|>=|=|<|>|\(|\)|,|\.|\[|\]|\+|-)|(?P<word>[#:]?[A-Za-z_][A-Za-z0-9_\-]*))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"}


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse expression at {text[pos:]!r}")
        out.append(m.group(m.lastgroup or "word"))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, n: int = 0) -> str | None:
        j = self.i + n
        return self.toks[j] if j < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok.upper() != expected):
            raise ValueError(f"expected {expected!r}, got {tok!r} in {' '.join(self.toks)!r}")
        self.i += 1
        return tok

    def at_keyword(self, *words: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.upper() in words

    # paths and operands
    def path(self) -> tuple[Any, ...]:
        parts: list[Any] = [("name", self.take())]
        while self.peek() in (".", "["):
            if self.take() == ".":
                parts.append(("name", self.take()))
            else:
                parts.append(("index", int(self.take())))
                self.take("]")
        return ("path", tuple(parts))

    def operand(self) -> Any:
        tok = self.peek()
        if tok is None:
            raise ValueError("operand expected")
        if tok.startswith(":"):
            self.i += 1
            return ("value", tok)
        if self.peek(1) == "(" and tok.lower() in ("size", "if_not_exists", "list_append"):
            self.i += 2
            args = [self.set_value() if tok.lower() != "size" else self.operand()]
            while self.peek() == ",":
                self.take()
                args.append(self.set_value())
            self.take(")")
            return ("fn", tok.lower(), tuple(args))
        return self.path()

    def set_value(self) -> Any:
        left = self.operand()
        if self.peek() in ("+", "-"):
            op = self.take()
            return ("arith", op, left, self.operand())
        return left

    # conditions
    def condition(self) -> Any:
        left = self.conjunction()
        while self.at_keyword("OR"):
            self.take()
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> Any:
        left = self.negation()
        while self.at_keyword("AND"):
            self.take()
            left = ("and", left, self.negation())
        return left

    def negation(self) -> Any:
        if self.at_keyword("NOT"):
            self.take()
            return ("not", self.negation())
        return self.primary()

    def primary(self) -> Any:
        tok = self.peek()
        if tok == "(":
            self.take()
            inner = self.condition()
            self.take(")")
            return inner
        if (
            tok
            and self.peek(1) == "("
            and tok.lower()
            in (
                "attribute_exists",
                "attribute_not_exists",
                "begins_with",
                "contains",
                "attribute_type",
            )
        ):
            self.i += 2
            args = [self.operand()]
            while self.peek() == ",":
                self.take()
                args.append(self.operand())
            self.take(")")
            return ("cond_fn", tok.lower(), tuple(args))
        left = self.operand()
        if self.at_keyword("BETWEEN"):
            self.take()
            low = self.operand()
            self.take("AND")
            return ("between", left, low, self.operand())
        if self.at_keyword("IN"):
            self.take()
            self.take("(")
            options = [self.operand()]
            while self.peek() == ",":
                self.take()
                options.append(self.operand())
            self.take(")")
            return ("in", left, tuple(options))
        op = self.take()
        if op not in ("=", "<>", "<", "<=", ">", ">="):
            raise ValueError(f"comparison expected, got {op!r}")
        return ("cmp", op, left, self.operand())

    def update(self) -> list[tuple[str, Any]]:
        actions: list[tuple[str, Any]] = []
        while self.peek() is not None:
            clause = self.take().upper()
            while True:
                if clause == "SET":
                    target = self.path()
                    self.take("=")
                    actions.append(("SET", (target, self.set_value())))
                elif clause == "REMOVE":
                    actions.append(("REMOVE", self.path()))
                elif clause in ("ADD", "DELETE"):
                    target = self.path()
                    actions.append((clause, (target, self.operand())))
                else:
                    raise ValueError(f"unknown update clause {clause!r}")
                if self.peek() == ",":
                    self.take()
                    continue
                break
        return actions


@lru_cache(maxsize=4096)
def parse_condition(text: str) -> Any:
    p = _Parser(text)
    tree = p.condition()
    if p.peek() is not None:
        raise ValueError(f"trailing tokens in {text!r}")
    return tree


@lru_cache(maxsize=4096)
def parse_update(text: str) -> list[tuple[str, Any]]:
    return _Parser(text).update()


_MISSING = object()


class _Ctx:
    def __init__(self, names: dict[str, str] | None, values: dict[str, Any] | None) -> None:
        self.names = names or {}
        self.values = values or {}

    def name(self, tok: str) -> str:
        if tok.startswith("#"):
            return self.names[tok]
        return tok

    def value(self, tok: str) -> Any:
        if tok not in self.values:
            raise _validation(f"An expression attribute value used in expression is not defined: {tok}")
        return self.values[tok]


def _resolve(item: Raw | None, path: tuple[Any, ...], ctx: _Ctx) -> Any:
    node: Any = {"M": item or {}}
    for kind, part in path:
        if kind == "name":
            inner = node.get("M") if isinstance(node, dict) else None
            if inner is None:
                return _MISSING
            node = inner.get(ctx.name(part), _MISSING)
        else:
            inner = node.get("L") if isinstance(node, dict) else None
            if inner is None or part >= len(inner):
                return _MISSING
            node = inner[part]
        if node is _MISSING:
            return _MISSING
    return node


def _operand(item: Raw | None, node: Any, ctx: _Ctx) -> Any:
    kind = node[0]
    if kind == "value":
        return ctx.value(node[1])
    if kind == "path":
        return _resolve(item, node[1], ctx)
    if kind == "arith":
        left, right = _operand(item, node[2], ctx), _operand(item, node[3], ctx)
        if left is _MISSING or right is _MISSING or "N" not in left or "N" not in right:
            raise _validation("An operand in the update expression has an incorrect data type")
        a, b = Decimal(left["N"]), Decimal(right["N"])
        return {"N": _num(a + b if node[1] == "+" else a - b)}
    name, args = node[1], node[2]
    if name == "if_not_exists":
        current = _operand(item, args[0], ctx)
        return _operand(item, args[1], ctx) if current is _MISSING else current
    if name == "list_append":
        a, b = _operand(item, args[0], ctx), _operand(item, args[1], ctx)
        return {"L": list(a["L"]) + list(b["L"])}
    if name == "size":
        value = _operand(item, args[0], ctx)
        if value is _MISSING:
            return _MISSING
        ((tag, inner),) = value.items()
        return {"N": str(len(inner.encode() if tag == "S" else inner))}
    raise ValueError(name)


def _num(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text


def _key(value: Any) -> Any:
    """A comparable form of a typed value (numbers as Decimal)."""
    ((tag, inner),) = value.items()
    if tag == "N":
        return ("N", Decimal(inner))
    if tag in ("SS", "NS", "BS"):
        return (tag, frozenset(inner))
    if tag in ("M", "L"):
        return (tag, repr(inner))
    return (tag, inner)


def _compare(op: str, a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return op == "<>" and not (a is _MISSING and b is _MISSING)
    ka, kb = _key(a), _key(b)
    if op == "=":
        return ka == kb
    if op == "<>":
        return ka != kb
    if ka[0] != kb[0] or ka[0] not in ("S", "N", "B"):
        return False
    x, y = ka[1], kb[1]
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def evaluate(tree: Any, item: Raw | None, ctx: _Ctx) -> bool:
    kind = tree[0]
    if kind == "and":
        return evaluate(tree[1], item, ctx) and evaluate(tree[2], item, ctx)
    if kind == "or":
        return evaluate(tree[1], item, ctx) or evaluate(tree[2], item, ctx)
    if kind == "not":
        return not evaluate(tree[1], item, ctx)
    if kind == "cmp":
        return _compare(tree[1], _operand(item, tree[2], ctx), _operand(item, tree[3], ctx))
    if kind == "between":
        value = _operand(item, tree[1], ctx)
        return _compare(">=", value, _operand(item, tree[2], ctx)) and _compare(
            "<=", value, _operand(item, tree[3], ctx)
        )
    if kind == "in":
        value = _operand(item, tree[1], ctx)
        return any(_compare("=", value, _operand(item, o, ctx)) for o in tree[2])
    name, args = tree[1], tree[2]
    if name == "attribute_exists":
        return _operand(item, args[0], ctx) is not _MISSING
    if name == "attribute_not_exists":
        return _operand(item, args[0], ctx) is _MISSING
    if name == "attribute_type":
        value = _operand(item, args[0], ctx)
        return value is not _MISSING and next(iter(value)) == _operand(item, args[1], ctx)["S"]
    value, other = _operand(item, args[0], ctx), _operand(item, args[1], ctx)
    if value is _MISSING or other is _MISSING:
        return False
    if name == "begins_with":
        return "S" in value and "S" in other and value["S"].startswith(other["S"])
    if name == "contains":
        ((tag, inner),) = value.items()
        if tag == "S":
            return "S" in other and other["S"] in inner
        if tag in ("SS", "NS"):
            return next(iter(other.values())) in inner
        if tag == "L":
            return any(_key(v) == _key(other) for v in inner)
        return False
    raise ValueError(name)


def _set_path(item: Raw, path: tuple[Any, ...], ctx: _Ctx, value: Any) -> None:
    """Write `value` at `path` in `item` (a fresh top-level dict), copying the maps and lists on the way."""
    (_kind, part), rest = path[0], path[1:]
    name = ctx.name(part)
    if not rest:
        if value is _MISSING:
            item.pop(name, None)
        else:
            item[name] = value
        return
    current = item.get(name)
    if current is None:
        raise _validation("The document path provided in the update expression is invalid for update")
    item[name] = _set_nested(current, rest, ctx, value)


def _set_nested(node: Any, path: tuple[Any, ...], ctx: _Ctx, value: Any) -> Any:
    (kind, part), rest = path[0], path[1:]
    if kind == "name":
        if "M" not in node:
            raise _validation("The document path provided in the update expression is invalid for update")
        inner = dict(node["M"])
        name = ctx.name(part)
        if rest:
            if name not in inner:
                raise _validation("The document path provided in the update expression is invalid for update")
            inner[name] = _set_nested(inner[name], rest, ctx, value)
        elif value is _MISSING:
            inner.pop(name, None)
        else:
            inner[name] = value
        return {"M": inner}
    if "L" not in node:
        raise _validation("The document path provided in the update expression is invalid for update")
    items = list(node["L"])
    if rest:
        items[part] = _set_nested(items[part], rest, ctx, value)
    elif value is _MISSING:
        if part < len(items):
            del items[part]
    elif part < len(items):
        items[part] = value
    else:
        items.append(value)
    return {"L": items}


def apply_update(old: Raw | None, key: Raw, expression: str, ctx: _Ctx) -> tuple[Raw, set[str]]:
    """The item after `expression`, and the top-level attributes it touched."""
    new: Raw = dict(old) if old else dict(key)
    touched: set[str] = set()
    for clause, action in parse_update(expression):
        if clause == "SET":
            target, source = action
            value = _operand(old, source, ctx)
            if value is _MISSING:
                raise _validation("The provided expression refers to an attribute that does not exist in the item")
            _set_path(new, target[1], ctx, value)
        elif clause == "REMOVE":
            target = action
            _set_path(new, target[1], ctx, _MISSING)
        else:
            target, source = action
            value = ctx.value(source[1])
            current = _resolve(new, target[1], ctx)
            ((tag, inner),) = value.items()
            if clause == "ADD" and tag == "N":
                base = Decimal(current["N"]) if current is not _MISSING else Decimal(0)
                result: Any = {"N": _num(base + Decimal(inner))}
            elif tag in ("SS", "NS", "BS"):
                present = set(current[tag]) if current is not _MISSING else set()
                present = present | set(inner) if clause == "ADD" else present - set(inner)
                result = {tag: sorted(present)} if present else _MISSING
            else:
                raise _validation("An operand in the update expression has an incorrect data type")
            _set_path(new, target[1], ctx, result)
        touched.add(ctx.name(action[0][1][0][1] if clause != "REMOVE" else action[1][0][1]))
    for attr in ("PK", "SK"):
        if new.get(attr) != key[attr]:
            raise _validation("Cannot update attribute PK. This attribute is part of the key")
    return new, touched


def _validation(message: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": message}}, "FakeDynamoDB")


def _failed(operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"}},
        operation,
    )


def size_of(raw: Raw) -> int:
    """About DynamoDB's item size (names and values; the JSON's punctuation is taken off roughly)."""
    text = json.dumps(raw, separators=(",", ":"))
    return len(text) * 2 // 3


class _Partition:
    """Sorted keys of one partition (table: `(SK,)`; index: `(index SK, PK, SK)`)."""

    __slots__ = ("dirty", "keys")

    def __init__(self) -> None:
        self.keys: list[tuple[str, ...]] = []
        self.dirty = False

    def add(self, key: tuple[str, ...], bulk: bool) -> None:
        if bulk:
            self.keys.append(key)
            self.dirty = True
        else:
            self.sorted()
            bisect.insort(self.keys, key)

    def remove(self, key: tuple[str, ...]) -> None:
        keys = self.sorted()
        at = bisect.bisect_left(keys, key)
        if at < len(keys) and keys[at] == key:
            del keys[at]

    def sorted(self) -> list[tuple[str, ...]]:
        if self.dirty:
            self.keys.sort()
            self.dirty = False
        return self.keys


class FakeDynamoDB:
    """The low-level client of one table with indexes GSI1 to GSI3 (projection ALL)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Raw] = {}
        self.sizes: dict[tuple[str, str], int] = {}  # filled when a query first reads the item
        self.parts: dict[str, _Partition] = {}
        self.index_parts: dict[str, dict[str, _Partition]] = {name: {} for name in INDEXES}
        self.meter = Meter()
        self._bulk = False
        self._reads = threading.Lock()

    # bookkeeping ------------------------------------------------------------------------------------------------
    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Writes append to the partitions' key lists, sorted once at the end (seeding)."""
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
            for part in self.parts.values():
                part.sorted()
            for parts in self.index_parts.values():
                for part in parts.values():
                    part.sorted()

    @contextmanager
    def metered(self) -> Iterator[Meter]:
        """A fresh meter for the duration (the previous one restored after)."""
        saved, self.meter = self.meter, Meter()
        try:
            yield self.meter
        finally:
            self.meter = saved

    def _store(self, key: tuple[str, str], new: Raw | None) -> None:
        """Write or delete one item, keeping partitions and indexes in step, and count the write."""
        old = self.items.get(key)
        meter = self.meter
        meter.writes += 1
        meter.keys[key[0]] += 1
        for name in INDEXES:
            old_idx = _index_key(old, name) if old else None
            new_idx = _index_key(new, name) if new else None
            if new_idx is not None:
                meter.keys[f"{name}:{new_idx[0]}"] += 1
            if old_idx is not None and old_idx != new_idx:
                meter.keys[f"{name}:{old_idx[0]}"] += 0 if new_idx and new_idx[0] == old_idx[0] else 1
            if old_idx == new_idx:
                continue
            if old_idx is not None:
                self.index_parts[name][old_idx[0]].remove((old_idx[1], key[0], key[1]))
            if new_idx is not None:
                part = self.index_parts[name].get(new_idx[0])
                if part is None:
                    part = self.index_parts[name][new_idx[0]] = _Partition()
                part.add((new_idx[1], key[0], key[1]), self._bulk)
        if new is None:
            if old is not None:
                del self.items[key]
                self.sizes.pop(key, None)
                self.parts[key[0]].remove((key[1],))
            return
        if old is None:
            part = self.parts.get(key[0])
            if part is None:
                part = self.parts[key[0]] = _Partition()
            part.add((key[1],), self._bulk)
        self.items[key] = new
        self.sizes.pop(key, None)

    def load(self, raw: Raw) -> None:
        """Put one item without a request (seeding): not metered."""
        saved, self.meter = self.meter, Meter()
        try:
            self._store((raw["PK"]["S"], raw["SK"]["S"]), raw)
        finally:
            self.meter = saved

    def drop(self, pk: str, sk: str) -> Raw:
        """Delete one item without a request (seeding): not metered. Answers the item."""
        raw = self.items[(pk, sk)]
        saved, self.meter = self.meter, Meter()
        try:
            self._store((pk, sk), None)
        finally:
            self.meter = saved
        return raw

    # requests ---------------------------------------------------------------------------------------------------
    def get_item(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["GetItem"] += 1
        self.meter.reads += 1
        item = self.items.get(_k(kw["Key"]))
        if item is None:
            return {}
        return {"Item": _project(item, kw.get("ProjectionExpression"), kw.get("ExpressionAttributeNames"))}

    def batch_get_item(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["BatchGetItem"] += 1
        out: dict[str, list[Raw]] = {}
        for table, req in kw["RequestItems"].items():
            if len(req["Keys"]) > 100:
                raise _validation("Too many items requested for the BatchGetItem call")
            self.meter.reads += len(req["Keys"])
            found = [self.items[_k(k)] for k in req["Keys"] if _k(k) in self.items]
            projection, names = req.get("ProjectionExpression"), req.get("ExpressionAttributeNames")
            out[table] = [_project(i, projection, names) for i in found]
        return {"Responses": out, "UnprocessedKeys": {}}

    def put_item(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["PutItem"] += 1
        item = kw["Item"]
        key = (item["PK"]["S"], item["SK"]["S"])
        old = self.items.get(key)
        self._check(old, kw, "PutItem")
        self._store(key, dict(item))
        return {"Attributes": old} if old and kw.get("ReturnValues") == "ALL_OLD" else {}

    def update_item(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["UpdateItem"] += 1
        key = _k(kw["Key"])
        old = self.items.get(key)
        self._check(old, kw, "UpdateItem")
        ctx = _Ctx(kw.get("ExpressionAttributeNames"), kw.get("ExpressionAttributeValues"))
        new, touched = apply_update(old, kw["Key"], kw["UpdateExpression"], ctx)
        self._store(key, new)
        wanted = kw.get("ReturnValues", "NONE")
        if wanted == "ALL_NEW":
            return {"Attributes": new}
        if wanted == "UPDATED_NEW":
            return {"Attributes": {k: new[k] for k in touched if k in new}}
        if wanted == "ALL_OLD" and old:
            return {"Attributes": old}
        if wanted == "UPDATED_OLD" and old:
            return {"Attributes": {k: old[k] for k in touched if k in old}}
        return {}

    def delete_item(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["DeleteItem"] += 1
        key = _k(kw["Key"])
        old = self.items.get(key)
        self._check(old, kw, "DeleteItem")
        self._store(key, None)
        return {"Attributes": old} if old and kw.get("ReturnValues") == "ALL_OLD" else {}

    def batch_write_item(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["BatchWriteItem"] += 1
        for _table, requests in kw["RequestItems"].items():
            if len(requests) > 25:
                raise _validation("Too many items requested for the BatchWriteItem call")
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    self._store((item["PK"]["S"], item["SK"]["S"]), dict(item))
                else:
                    self._store(_k(request["DeleteRequest"]["Key"]), None)
        return {"UnprocessedItems": {}}

    def transact_write_items(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["TransactWriteItems"] += 1
        ops = kw["TransactItems"]
        if len(ops) > 100:
            raise _validation("Member must have length less than or equal to 100")
        seen: set[tuple[str, str]] = set()
        reasons: list[dict[str, str]] = []
        planned: list[tuple[tuple[str, str], Raw | None]] = []
        failed = False
        for op in ops:
            ((kind, body),) = op.items()
            key = (body["Item"]["PK"]["S"], body["Item"]["SK"]["S"]) if kind == "Put" else _k(body["Key"])
            if key in seen:
                raise _validation("Transaction request cannot include multiple operations on one item")
            seen.add(key)
            old = self.items.get(key)
            if kind == "ConditionCheck":
                self.meter.reads += 1
            condition = body.get("ConditionExpression")
            ctx = _Ctx(body.get("ExpressionAttributeNames"), body.get("ExpressionAttributeValues"))
            if condition and not evaluate(parse_condition(condition), old, ctx):
                reasons.append({"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"})
                failed = True
                continue
            reasons.append({"Code": "None"})
            if kind == "Put":
                planned.append((key, dict(body["Item"])))
            elif kind == "Update":
                planned.append((key, apply_update(old, body["Key"], body["UpdateExpression"], ctx)[0]))
            elif kind == "Delete":
                planned.append((key, None))
        if failed:
            codes = ", ".join(r["Code"] for r in reasons)
            response: Any = {
                "Error": {
                    "Code": "TransactionCanceledException",
                    "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons "
                    f"[{codes}]",
                },
                "CancellationReasons": reasons,
            }
            raise ClientError(response, "TransactWriteItems")
        for key, new in planned:
            self._store(key, new)
        return {}

    def query(self, **kw: Any) -> dict[str, Any]:
        with self._reads:  # a merge over shards queries from a thread pool: the meter and lazy sorts stay exact
            return self._query(**kw)

    def _query(self, **kw: Any) -> dict[str, Any]:
        self.meter.calls["Query"] += 1
        ctx = _Ctx(kw.get("ExpressionAttributeNames"), kw.get("ExpressionAttributeValues"))
        index = kw.get("IndexName")
        pk_attr, sk_attr = ("PK", "SK") if index is None else (f"{index}PK", f"{index}SK")
        pk_value, sk_cond = _key_condition(parse_condition(kw["KeyConditionExpression"]), ctx, pk_attr, sk_attr)
        part = self.parts.get(pk_value) if index is None else self.index_parts[index].get(pk_value)
        keys = part.sorted() if part else []
        lo, hi = _bounds(keys, sk_cond)
        forward = kw.get("ScanIndexForward", True)
        start = kw.get("ExclusiveStartKey")
        if start:
            at: tuple[str, ...] = (
                (start["SK"]["S"],) if index is None else (start[sk_attr]["S"], start["PK"]["S"], start["SK"]["S"])
            )
            if forward:
                lo = max(lo, bisect.bisect_right(keys, at))
            else:
                hi = min(hi, bisect.bisect_left(keys, at))
        limit = kw.get("Limit")
        filter_tree = parse_condition(kw["FilterExpression"]) if kw.get("FilterExpression") else None
        count_only = kw.get("Select") == "COUNT"
        out: list[Raw] = []
        scanned = 0
        size = 0
        last: tuple[str, ...] | None = None
        positions = range(lo, hi) if forward else range(hi - 1, lo - 1, -1)
        for n in positions:
            entry = keys[n]
            table_key = (pk_value, entry[0]) if index is None else (entry[1], entry[2])
            item = self.items[table_key]
            scanned += 1
            item_size = self.sizes.get(table_key)
            if item_size is None:
                item_size = self.sizes[table_key] = size_of(item)
            size += item_size
            if filter_tree is None or evaluate(filter_tree, item, ctx):
                out.append(item)
            last = entry
            if (limit and scanned >= limit) or size >= PAGE_BYTES:
                break
        self.meter.reads += scanned
        more = last is not None and (n != (hi - 1 if forward else lo))
        resp: dict[str, Any] = {"Count": len(out), "ScannedCount": scanned}
        if not count_only:
            resp["Items"] = [
                _project(i, kw.get("ProjectionExpression"), kw.get("ExpressionAttributeNames")) for i in out
            ]
        if more and last is not None:
            item = self.items[(pk_value, last[0]) if index is None else (last[1], last[2])]
            attrs = ("PK", "SK") if index is None else ("PK", "SK", pk_attr, sk_attr)
            resp["LastEvaluatedKey"] = {a: item[a] for a in attrs}
        return resp

    def scan(self, **kw: Any) -> dict[str, Any]:
        raise AssertionError("the scale benchmark's table refuses Scan: no request may read the whole table")

    def _check(self, old: Raw | None, kw: dict[str, Any], operation: str) -> None:
        condition = kw.get("ConditionExpression")
        if not condition:
            return
        ctx = _Ctx(kw.get("ExpressionAttributeNames"), kw.get("ExpressionAttributeValues"))
        if not evaluate(parse_condition(condition), old, ctx):
            raise _failed(operation)


def _k(key: Raw) -> tuple[str, str]:
    return key["PK"]["S"], key["SK"]["S"]


def _index_key(item: Raw, index: str) -> tuple[str, str] | None:
    pk, sk = item.get(f"{index}PK"), item.get(f"{index}SK")
    if pk is None or sk is None or "S" not in pk or "S" not in sk:
        return None
    return pk["S"], sk["S"]


def _project(item: Raw, projection: str | None, names: dict[str, str] | None) -> Raw:
    if not projection:
        return item
    wanted = {(names or {}).get(p.strip(), p.strip()) for p in projection.split(",")}
    return {k: v for k, v in item.items() if k in wanted}


def _key_condition(tree: Any, ctx: _Ctx, pk_attr: str, sk_attr: str) -> tuple[str, Any]:
    """The partition key's value and the sort key's condition (`None`, or the parsed clause) of a key condition."""
    clauses = [tree[1], tree[2]] if tree[0] == "and" else [tree]
    pk_value: str | None = None
    sk_cond: Any = None
    for clause in clauses:
        target = clause[2] if clause[0] == "cmp" else clause[1] if clause[0] == "between" else clause[2][0]
        attr = ctx.name(target[1][0][1])
        if attr == pk_attr and clause[0] == "cmp" and clause[1] == "=":
            pk_value = _operand(None, clause[3], ctx)["S"]
        elif attr == sk_attr:
            if clause[0] == "cmp":
                sk_cond = (clause[1], _operand(None, clause[3], ctx)["S"])
            elif clause[0] == "between":
                sk_cond = ("between", _operand(None, clause[2], ctx)["S"], _operand(None, clause[3], ctx)["S"])
            elif clause[0] == "cond_fn" and clause[1] == "begins_with":
                sk_cond = ("begins_with", _operand(None, clause[2][1], ctx)["S"])
            else:
                raise _validation(f"unsupported key condition {clause!r}")
        else:
            raise _validation(f"Query condition missed key schema element: {attr}")
    if pk_value is None:
        raise _validation("Query condition missed key schema element")
    return pk_value, sk_cond


def _bounds(keys: list[tuple[str, ...]], cond: Any) -> tuple[int, int]:
    if cond is None:
        return 0, len(keys)
    op = cond[0]

    def left(v: str) -> int:  # first entry with sort key >= v
        return bisect.bisect_left(keys, (v,))

    def right(v: str) -> int:  # first entry with sort key > v
        return bisect.bisect_left(keys, (v + "\x00",))

    if op == "=":
        return left(cond[1]), right(cond[1])
    if op == "<":
        return 0, left(cond[1])
    if op == "<=":
        return 0, right(cond[1])
    if op == ">":
        return right(cond[1]), len(keys)
    if op == ">=":
        return left(cond[1]), len(keys)
    if op == "between":
        return left(cond[1]), right(cond[2])
    return left(cond[1]), left(cond[1] + _TOP)
