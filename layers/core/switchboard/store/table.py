"""The single-table client.

Wraps the low-level DynamoDB client (cheaper at cold start than the resource layer) with Python-native items,
conditional writes, transactions whose failed conditions become domain errors, queries with opaque continuation,
and batch gets that retry unprocessed keys.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from switchboard import aws
from switchboard.config import get_settings
from switchboard.errors import Conflict, DomainError, NotFound, ServiceUnavailable

Item = dict[str, Any]

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

_TX_THROTTLE_REASONS = {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
_THROTTLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
}


_TX_ATTEMPTS = 4  # a cancelled (conflicted or throttled) transaction: the first try and three more


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    if isinstance(value, set):
        return {_from_dynamo(v) for v in value}
    return value


def _ser(value: Any) -> dict[str, Any]:
    """One Python value → DynamoDB JSON. The exact common types by `type(...) is` (cheaper than the `isinstance`
    chain, which still takes subclasses, floats and the rest: `_ser_any`)."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is dict:
        return {"M": {k: _ser(v) for k, v in value.items() if v is not None}}
    if kind is list:
        return {"L": [_ser(v) for v in value]}
    if kind is bool:
        return {"BOOL": value}
    if kind is int:
        return {"N": str(value)}
    return _ser_any(value)


def _ser_any(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, float):
        return {"N": str(Decimal(str(value)))}
    if isinstance(value, dict):
        return {"M": {k: _ser(v) for k, v in value.items() if v is not None}}
    if isinstance(value, list | tuple):
        return {"L": [_ser(v) for v in value]}
    if value is None:
        return {"NULL": True}
    return dict(_serializer.serialize(_to_dynamo(value)))


def _number(text: str) -> int | float:
    if "." in text or "e" in text or "E" in text:
        number = Decimal(text)
        return int(number) if number == number.to_integral_value() else float(number)
    return int(text)


def _de(raw: dict[str, Any]) -> Any:
    """DynamoDB JSON → Python (int for integral numbers, float otherwise)."""
    ((tag, value),) = raw.items()
    if tag == "S":
        return value
    if tag == "N":
        return _number(value)
    if tag == "BOOL":
        return value
    if tag == "M":  # strings, the most common values, without a call each
        return {k: v["S"] if "S" in v else _de(v) for k, v in value.items()}
    if tag == "L":
        return [v["S"] if "S" in v else _de(v) for v in value]
    if tag == "NULL":
        return None
    if tag == "SS":
        return set(value)
    if tag == "NS":
        return {_number(v) for v in value}
    return _from_dynamo(_deserializer.deserialize(raw))  # type: ignore[arg-type]


def serialize(item: Item) -> dict[str, Any]:
    return {k: _ser(v) for k, v in item.items() if v is not None}


def serialize_key(key: dict[str, str]) -> dict[str, Any]:
    """A table key (`PK` and `SK`, both strings: every key of the table) written directly; anything else through
    `serialize` (an index's or a test's key)."""
    if len(key) == 2:
        pk, sk = key.get("PK"), key.get("SK")
        if type(pk) is str and type(sk) is str:
            return {"PK": {"S": pk}, "SK": {"S": sk}}
    return serialize(key)


def deserialize(raw: dict[str, Any]) -> Item:
    return {k: v["S"] if "S" in v else _de(v) for k, v in raw.items()}


def _values(values: dict[str, Any] | None) -> dict[str, Any] | None:
    if not values:
        return None
    return {k: _ser(v) for k, v in values.items()}


def _add_expression_parts(
    params: dict[str, Any], condition: str | None, names: dict[str, str] | None, values: dict[str, Any] | None
) -> None:
    """A request's condition, attribute names and (serialised) attribute values, those given."""
    if condition:
        params["ConditionExpression"] = condition
    if names:
        params["ExpressionAttributeNames"] = names
    if values:
        params["ExpressionAttributeValues"] = _values(values)


MAX_FILTERED_READS = 10  # reads a filtered page may take before it answers short (with a cursor)


@dataclass
class TxOp:
    """One operation of a transaction; `error` is raised when its condition is what cancelled the transaction."""

    condition: str | None = None
    names: dict[str, str] | None = None
    values: dict[str, Any] | None = None
    error: DomainError | None = None

    def _operation(self, kind: str, operation: dict[str, Any]) -> dict[str, Any]:
        """`{kind: operation}` with this operation's condition, names and values added."""
        _add_expression_parts(operation, self.condition, self.names, self.values)
        return {kind: operation}

    def to_transact(self, table: str) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass
class Put(TxOp):
    item: Item = field(default_factory=dict)

    def to_transact(self, table: str) -> dict[str, Any]:
        return self._operation("Put", {"TableName": table, "Item": serialize(self.item)})


@dataclass
class Update(TxOp):
    key: dict[str, str] = field(default_factory=dict)
    expression: str = ""

    def to_transact(self, table: str) -> dict[str, Any]:
        return self._operation(
            "Update", {"TableName": table, "Key": serialize_key(self.key), "UpdateExpression": self.expression}
        )


@dataclass
class Delete(TxOp):
    key: dict[str, str] = field(default_factory=dict)

    def to_transact(self, table: str) -> dict[str, Any]:
        return self._operation("Delete", {"TableName": table, "Key": serialize_key(self.key)})


@dataclass
class ConditionCheck(TxOp):
    key: dict[str, str] = field(default_factory=dict)

    def to_transact(self, table: str) -> dict[str, Any]:
        return self._operation("ConditionCheck", {"TableName": table, "Key": serialize_key(self.key)})


@dataclass
class Page:
    items: list[Item]
    last_key: dict[str, Any] | None


def _raise_for(err: ClientError, conflict: DomainError | None = None) -> None:
    code = err.response.get("Error", {}).get("Code", "")
    if code == "ConditionalCheckFailedException":
        raise conflict or Conflict()
    if code in _THROTTLE_CODES:
        raise ServiceUnavailable("The data store is busy; retry shortly.") from err
    raise err


class Store:
    def __init__(self, table_name: str, client: Any | None = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        return self._client or aws.cached_client("dynamodb") or aws.client("dynamodb")

    # Reads ----------------------------------------------------------------------------------------------------------
    def get(self, key: dict[str, str], *, consistent: bool = False) -> Item | None:
        try:
            resp = self.client.get_item(TableName=self.table_name, Key=serialize_key(key), ConsistentRead=consistent)
        except ClientError as err:
            _raise_for(err)
        raw = resp.get("Item")
        return deserialize(raw) if raw else None

    def require(self, key: dict[str, str], missing: str, *, consistent: bool = False) -> Item:
        """`get`, or 404 `not_found` with `missing` as its message: the one read-or-404 of every domain module."""
        item = self.get(key, consistent=consistent)
        if item is None:
            raise NotFound(missing)
        return item

    def batch_get(
        self, keys: Sequence[dict[str, str]], *, consistent: bool = False, projection: Sequence[str] | None = None
    ) -> list[Item]:
        """Every existing item among `keys` (≤ 100 per request; unprocessed keys are retried); `projection` names
        the only attributes to return."""
        out: list[Item] = []
        unique = list({(k["PK"], k["SK"]): k for k in keys}.values())
        shape: dict[str, Any] = {"ConsistentRead": consistent}
        if projection:
            names = {f"#p{n}": name for n, name in enumerate(projection)}
            shape |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
        for start in range(0, len(unique), 100):
            request: dict[str, Any] = {
                self.table_name: {"Keys": [serialize_key(k) for k in unique[start : start + 100]], **shape}
            }
            for _attempt in range(6):
                try:
                    resp = self.client.batch_get_item(RequestItems=request)
                except ClientError as err:
                    _raise_for(err)
                out += [deserialize(i) for i in resp.get("Responses", {}).get(self.table_name, [])]
                request = resp.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise ServiceUnavailable("The data store is busy; retry shortly.")
        return out

    def query(
        self,
        pk: str,
        *,
        sk_prefix: str | None = None,
        sk_between: tuple[str, str] | None = None,
        index: str | None = None,
        limit: int | None = None,
        start_key: dict[str, Any] | None = None,
        forward: bool = True,
        consistent: bool = False,
        filter_expression: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> Page:
        params = self._query_params(
            pk,
            sk_prefix=sk_prefix,
            sk_between=sk_between,
            index=index,
            forward=forward,
            consistent=consistent,
            filter_expression=filter_expression,
            names=names,
            values=values,
        )
        if limit:
            params["Limit"] = limit
        if start_key:
            params["ExclusiveStartKey"] = serialize(start_key)
        try:
            resp = self.client.query(**params)
        except ClientError as err:
            _raise_for(err)
        last = resp.get("LastEvaluatedKey")
        return Page([deserialize(i) for i in resp.get("Items", [])], deserialize(last) if last else None)

    def count(self, pk: str, **query: Any) -> int:
        """How many items the key condition (and filter) selects: `Select=COUNT` over every page. `query` takes
        `query`'s key condition, index, consistency and filter (`sk_prefix`, `sk_between`, `index`, `consistent`,
        `filter_expression`, `names`, `values`). No items are transferred, but every item in the key range is read
        (and billed): not for a request's hot path."""
        params = self._query_params(pk, **query)
        params["Select"] = "COUNT"
        total = 0
        while True:
            try:
                resp = self.client.query(**params)
            except ClientError as err:
                _raise_for(err)
            total += int(resp.get("Count", 0))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return total
            params["ExclusiveStartKey"] = last

    def _query_params(
        self,
        pk: str,
        *,
        sk_prefix: str | None = None,
        sk_between: tuple[str, str] | None = None,
        index: str | None = None,
        forward: bool = True,
        consistent: bool = False,
        filter_expression: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        pk_attr, sk_attr = ("PK", "SK") if index is None else (f"{index}PK", f"{index}SK")
        expr_names = {"#pk": pk_attr, **(names or {})}
        expr_values: dict[str, Any] = {":pk": pk, **(values or {})}
        condition = "#pk = :pk"
        if sk_prefix is not None:
            expr_names["#sk"] = sk_attr
            expr_values[":skp"] = sk_prefix
            condition += " AND begins_with(#sk, :skp)"
        elif sk_between is not None:
            expr_names["#sk"] = sk_attr
            expr_values[":lo"], expr_values[":hi"] = sk_between
            condition += " AND #sk BETWEEN :lo AND :hi"
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": expr_names,
            "ExpressionAttributeValues": _values(expr_values),
            "ScanIndexForward": forward,
        }
        if index:
            params["IndexName"] = index
        elif consistent:
            params["ConsistentRead"] = True
        if filter_expression:
            params["FilterExpression"] = filter_expression
        return params

    def filtered_page(
        self,
        pk: str,
        *,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, Any] | None = None,
        keep: Callable[[Item], bool] | None = None,
        max_reads: int = MAX_FILTERED_READS,
        **query: Any,
    ) -> tuple[list[Item], dict[str, Any] | None]:
        """A page of up to `limit` items whose attributes equal `filters` (`None` values are ignored; a list or tuple
        means "one of") and that `keep` accepts (for what a filter expression does not say well, e.g. a nested
        attribute's absence), and the key to continue from. Filters can thin a read, so it reads on — at most
        `max_reads` queries — until the page is full or the range ends. `query` takes the key condition and order of
        `query` (`sk_prefix`, `sk_between`, `index`, `forward`)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        clauses: list[str] = []
        for n, (attr, wanted) in enumerate((k, v) for k, v in (filters or {}).items() if v is not None):
            names[f"#f{n}"] = attr
            options = wanted if isinstance(wanted, list | tuple) else [wanted]
            for m, option in enumerate(options):
                values[f":f{n}_{m}"] = option
            clauses.append("(" + " OR ".join(f"#f{n} = :f{n}_{m}" for m in range(len(options))) + ")")
        expression = " AND ".join(clauses) or None
        items: list[Item] = []
        last = start_key
        for _ in range(max_reads):
            page = self.query(
                pk,
                limit=max(limit, 50) if expression or keep else limit - len(items),
                start_key=last,
                filter_expression=expression,
                names=names or None,
                values=values or None,
                **query,
            )
            items.extend(page.items if keep is None else filter(keep, page.items))
            last = page.last_key
            if last is None or len(items) >= limit:
                break
        if len(items) > limit:  # the last read went past the page: continue right after its last item
            items = items[:limit]
            index = query.get("index")
            key_attrs = ("PK", "SK") if index is None else ("PK", "SK", f"{index}PK", f"{index}SK")
            last = {k: items[-1][k] for k in key_attrs}
        return items, last

    def query_all(self, pk: str, *, start_key: dict[str, Any] | None = None, **kwargs: Any) -> list[Item]:
        """Every item of a (small, bounded) collection: follows continuation."""
        items: list[Item] = []
        start = start_key
        while True:
            page = self.query(pk, start_key=start, **kwargs)
            items.extend(page.items)
            if not page.last_key:
                return items
            start = page.last_key

    # Writes ---------------------------------------------------------------------------------------------------------
    def put(
        self,
        item: Item,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        error: DomainError | None = None,
    ) -> None:
        params: dict[str, Any] = {"TableName": self.table_name, "Item": serialize(item)}
        _add_expression_parts(params, condition, names, values)
        try:
            self.client.put_item(**params)
        except ClientError as err:
            _raise_for(err, error)

    def update(
        self,
        key: dict[str, str],
        expression: str,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        error: DomainError | None = None,
        return_values: str = "ALL_NEW",
    ) -> Item | None:
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": serialize_key(key),
            "UpdateExpression": expression,
            "ReturnValues": return_values,
        }
        _add_expression_parts(params, condition, names, values)
        try:
            resp = self.client.update_item(**params)
        except ClientError as err:
            _raise_for(err, error)
        raw = resp.get("Attributes")
        return deserialize(raw) if raw else None

    def add_hits(self, key: dict[str, str], amount: int, *, ttl: int) -> int:
        """Add `amount` to a counter item's `hits` (the item made when missing, its `ttl` set once) and answer the new
        count: one UpdateItem returning only the updated attributes. The rate limiter's request on every API call,
        written out (no expression values to serialise, no item to deserialise): less work than `update`."""
        try:
            resp = self.client.update_item(
                TableName=self.table_name,
                Key=serialize_key(key),
                UpdateExpression="ADD hits :n SET #ttl = if_not_exists(#ttl, :ttl)",
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues={":n": {"N": str(int(amount))}, ":ttl": {"N": str(int(ttl))}},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as err:
            _raise_for(err)
        return int(resp["Attributes"]["hits"]["N"])

    def add_hits_with_part(self, key: dict[str, str], amount: int, *, ttl: int, part: str) -> tuple[int, int]:
        """`add_hits` that also adds `amount` to the item's `part` attribute (a sub-counter of the same window, such
        as one credential's share of its organization's budget), in the same UpdateItem: (hits, part's hits)."""
        try:
            resp = self.client.update_item(
                TableName=self.table_name,
                Key=serialize_key(key),
                UpdateExpression="ADD hits :n, #part :n SET #ttl = if_not_exists(#ttl, :ttl)",
                ExpressionAttributeNames={"#ttl": "ttl", "#part": part},
                ExpressionAttributeValues={":n": {"N": str(int(amount))}, ":ttl": {"N": str(int(ttl))}},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as err:
            _raise_for(err)
        attributes = resp["Attributes"]
        return int(attributes["hits"]["N"]), int(attributes[part]["N"])

    def delete(
        self,
        key: dict[str, str],
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        error: DomainError | None = None,
    ) -> Item | None:
        params: dict[str, Any] = {"TableName": self.table_name, "Key": serialize_key(key), "ReturnValues": "ALL_OLD"}
        _add_expression_parts(params, condition, names, values)
        try:
            resp = self.client.delete_item(**params)
        except ClientError as err:
            _raise_for(err, error)
        raw = resp.get("Attributes")
        return deserialize(raw) if raw else None

    def batch_put(self, items: Sequence[Item]) -> int:
        """Write every item (BatchWriteItem, 25 per request, unprocessed items retried with jittered back-off). No
        conditions: the caller knows the items are new, or that writing them again is harmless."""
        for start in range(0, len(items), 25):
            request: dict[str, Any] = {
                self.table_name: [{"PutRequest": {"Item": serialize(i)}} for i in items[start : start + 25]]
            }
            for attempt in range(8):
                try:
                    resp = self.client.batch_write_item(RequestItems=request)
                except ClientError as err:
                    _raise_for(err)
                request = resp.get("UnprocessedItems") or {}
                if not request:
                    break
                time.sleep(random.uniform(0.5, 1.0) * 0.05 * 2**attempt)  # noqa: S311 - jitter, not a secret
            else:
                raise ServiceUnavailable("The data store is busy; retry shortly.")
        return len(items)

    def batch_delete(self, keys: Sequence[dict[str, str]]) -> int:
        """Delete every key (BatchWriteItem, 25 per request, unprocessed keys retried with back-off); deleting a
        missing item is no error, so a repeated call is harmless. Background jobs only (no conditions)."""
        unique = list({(k["PK"], k["SK"]): k for k in keys}.values())
        for start in range(0, len(unique), 25):
            request: dict[str, Any] = {
                self.table_name: [{"DeleteRequest": {"Key": serialize_key(k)}} for k in unique[start : start + 25]]
            }
            for attempt in range(6):
                try:
                    resp = self.client.batch_write_item(RequestItems=request)
                except ClientError as err:
                    _raise_for(err)
                request = resp.get("UnprocessedItems") or {}
                if not request:
                    break
                time.sleep(0.05 * 2**attempt)
            else:
                raise ServiceUnavailable("The data store is busy; retry shortly.")
        return len(unique)

    def transact(self, ops: Iterable[TxOp]) -> None:
        """All-or-nothing write of up to 100 operations. A failed condition raises that operation's error."""
        op_list = list(ops)
        if not op_list:
            return
        if len(op_list) > 100:
            raise ValueError("a transaction holds at most 100 operations")
        items = [op.to_transact(self.table_name) for op in op_list]
        for attempt in range(_TX_ATTEMPTS):
            try:
                self.client.transact_write_items(TransactItems=items)
                return
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code", "")
                if code != "TransactionCanceledException":
                    _raise_for(err)
                reasons = err.response.get("CancellationReasons") or _reasons_from_message(
                    err.response.get("Error", {}).get("Message", ""), len(op_list)
                )
                for op, reason in zip(op_list, reasons, strict=False):
                    if reason.get("Code") == "ConditionalCheckFailed":
                        raise op.error or Conflict() from err
                conflicted = any(r.get("Code") == "TransactionConflict" for r in reasons)
                if not conflicted and not any(r.get("Code") in _TX_THROTTLE_REASONS for r in reasons):
                    raise  # e.g. ValidationError: an item DynamoDB refuses is a bug to see (500), not a "busy" (503)
                # Cancelled for a concurrent transaction on one of its items, or for throttling (botocore retries
                # neither): nothing was written and every condition is evaluated again, so the same transaction is
                # tried again after a jittered pause; then the caller is told to retry (409 or 503).
                if attempt + 1 == _TX_ATTEMPTS:
                    if conflicted:
                        raise Conflict("A concurrent change touched the same records; retry.") from err
                    raise ServiceUnavailable("The data store is busy; retry shortly.") from err
                time.sleep(random.uniform(0.5, 1.0) * 0.05 * 2**attempt)  # noqa: S311 - jitter, not a secret


def _reasons_from_message(message: str, count: int) -> list[dict[str, str]]:
    """Parse `... reasons [None, ConditionalCheckFailed]` when the client did not return CancellationReasons."""
    start, end = message.find("["), message.rfind("]")
    if start < 0 or end < start:
        return []
    parts = [p.strip() for p in message[start + 1 : end].split(",")]
    return [{"Code": p} for p in parts[:count]]


def versioned(
    expected: Any,
    *,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `condition`, `names` and `values` of an optimistic write, to splat into a `Put`, `Update` or `Delete`: the
    stored `version` still equals `expected`, what the caller read (None: the item must not exist yet). `condition`
    (its placeholders in `names` and `values`) must hold as well; `names` and `values` also carry an Update's own."""
    if expected is None:
        check, own_names, own_values = "attribute_not_exists(PK)", {}, {}
    else:
        check, own_names, own_values = "#v = :v", {"#v": "version"}, {":v": expected}
    return {
        "condition": f"{check} AND {condition}" if condition else check,
        "names": {**(names or {}), **own_names},
        "values": {**(values or {}), **own_values},
    }


@lru_cache(maxsize=4)
def _store_for(table_name: str) -> Store:
    return Store(table_name)


def get_store() -> Store:
    return _store_for(get_settings().table_name)
