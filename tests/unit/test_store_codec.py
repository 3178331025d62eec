"""The store's item codec: `serialize` writes what boto3's TypeSerializer writes for the same item (floats as
Decimal, None attributes and map entries dropped) and `deserialize` reads it back to the same Python values
(integral numbers as int), for random JSON-like items, subclasses of the common types included."""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import given, settings
from hypothesis import strategies as st

from switchboard.store.table import _to_dynamo, deserialize, serialize, serialize_key

# the numbers the API stores: money, scores, coordinates (DynamoDB's 38 digits hold them exactly as Decimal text)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda f: f == 0 or 1e-6 < abs(f) < 1e12)
scalars = st.one_of(st.text(max_size=8), st.booleans(), st.integers(-(10**12), 10**12), finite, st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=4),
    ),
    max_leaves=12,
)
items = st.dictionaries(st.text(min_size=1, max_size=6), values, max_size=8)


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _numbers_as_python(value: Any) -> Any:
    if isinstance(value, float) and value == int(value):
        return int(value)
    if isinstance(value, dict):
        return {k: _numbers_as_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_python(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(items)
def test_serialize_matches_boto3(item: dict[str, Any]) -> None:
    boto = TypeSerializer()
    expected = {k: boto.serialize(_to_dynamo(v)) for k, v in item.items() if v is not None}
    assert serialize(item) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries({"PK": scalars, "SK": scalars})
    | st.dictionaries(st.sampled_from(["PK", "SK", "GSI1PK"]), scalars)
)
def test_serialize_key_is_serialize(key: dict[str, Any]) -> None:
    """The key fast path (two strings) and everything else (the general path) write what `serialize` writes."""
    assert serialize_key(key) == serialize(key)


def test_serialize_key_of_a_table_key() -> None:
    assert serialize_key({"PK": "ORG#o", "SK": "CONTACT#c"}) == {"PK": {"S": "ORG#o"}, "SK": {"S": "CONTACT#c"}}


@settings(max_examples=300, deadline=None)
@given(items)
def test_round_trip(item: dict[str, Any]) -> None:
    raw = serialize(item)
    back = deserialize(raw)
    assert _numbers_as_python(back) == _numbers_as_python(_without_none(item))
    boto = TypeDeserializer()
    reference = {k: boto.deserialize(v) for k, v in raw.items()}
    assert _numbers_as_python(_decimals_as_python(reference)) == _numbers_as_python(back)


def _decimals_as_python(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _decimals_as_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decimals_as_python(v) for v in value]
    return value


class Colour(StrEnum):
    RED = "red"


def test_subclasses_and_other_types_take_the_general_path() -> None:
    raw = serialize({"c": Colour.RED, "t": ("a", 1), "s": {"x", "y"}, "d": Decimal("1.5"), "b": b"\x00", "n": None})
    assert raw["c"] == {"S": "red"} and raw["t"] == {"L": [{"S": "a"}, {"N": "1"}]}
    assert raw["s"]["SS"] and sorted(raw["s"]["SS"]) == ["x", "y"]
    assert raw["d"] == {"N": "1.5"} and "n" not in raw
    back = deserialize(raw)
    assert back["c"] == "red" and back["t"] == ["a", 1] and back["s"] == {"x", "y"} and back["d"] == 1.5
    assert bytes(back["b"]) == b"\x00"
    assert deserialize({"m": {"M": {"x": {"NULL": True}, "y": {"L": [{"S": "z"}, {"N": "2"}]}}}}) == {
        "m": {"x": None, "y": ["z", 2]}
    }


def test_count_reads_every_page_and_maps_throttling() -> None:
    from botocore.exceptions import ClientError

    from switchboard.errors import ServiceUnavailable
    from switchboard.store.table import Store

    class Pages:
        def __init__(self, counts: list[int], fail: bool = False) -> None:
            self.counts, self.fail, self.requests = counts, fail, []

        def query(self, **params: Any) -> dict[str, Any]:
            self.requests.append(dict(params))
            if self.fail:
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "Query")
            n = len(self.requests)
            page: dict[str, Any] = {"Count": self.counts[n - 1]}
            if n < len(self.counts):
                page["LastEvaluatedKey"] = {"PK": {"S": "p"}, "SK": {"S": f"k{n}"}}
            return page

    client = Pages([3, 0, 4])
    total = Store("t", client).count(
        "ORG#o",
        sk_prefix="CONTACT#",
        consistent=True,
        filter_expression="#e = :e",
        names={"#e": "entity"},
        values={":e": "Contact"},
    )
    assert total == 7 and len(client.requests) == 3
    first, last = client.requests[0], client.requests[-1]
    assert first["Select"] == "COUNT" and first["ConsistentRead"] is True and "ExclusiveStartKey" not in first
    assert first["KeyConditionExpression"] == "#pk = :pk AND begins_with(#sk, :skp)"
    assert last["ExclusiveStartKey"] == {"PK": {"S": "p"}, "SK": {"S": "k2"}}
    indexed = Pages([2])
    assert Store("t", indexed).count("ORG#o#STAGE#lead", index="GSI2") == 2
    assert indexed.requests[0]["IndexName"] == "GSI2" and "ConsistentRead" not in indexed.requests[0]
    with pytest.raises(ServiceUnavailable):
        Store("t", Pages([1], fail=True)).count("ORG#o")


def test_require_answers_the_item_or_404_with_its_message() -> None:
    from switchboard.errors import NotFound
    from switchboard.store.table import Store

    class One:
        def __init__(self) -> None:
            self.reads: list[dict[str, Any]] = []

        def get_item(self, **params: Any) -> dict[str, Any]:
            self.reads.append(params)
            return {"Item": serialize({"PK": "p", "SK": "a", "n": 1})} if params["Key"]["SK"]["S"] == "a" else {}

    client = One()
    store = Store("t", client)
    assert store.require({"PK": "p", "SK": "a"}, "No such thing.", consistent=True) == {"PK": "p", "SK": "a", "n": 1}
    assert client.reads[0]["ConsistentRead"] is True
    with pytest.raises(NotFound) as missing:
        store.require({"PK": "p", "SK": "b"}, "No such thing.")
    assert missing.value.status == 404 and missing.value.message == "No such thing."
    assert client.reads[1]["ConsistentRead"] is False


def test_filtered_page_with_keep_pages_through_every_kept_item_once() -> None:
    """A `keep` predicate thins reads like a filter: pages follow each other with no item lost or repeated, the
    continuation key being the last returned item's (the conversations list's label / assignee / unread filters)."""
    from switchboard.store.table import Store

    rows = [{"PK": "p", "SK": f"{n:03d}", "GSI1PK": "g", "GSI1SK": f"{n:03d}", "n": n} for n in range(60)]

    class Index:
        def query(self, **params: Any) -> dict[str, Any]:
            start = deserialize(params["ExclusiveStartKey"])["GSI1SK"] if "ExclusiveStartKey" in params else None
            after = [r for r in rows if start is None or r["GSI1SK"] > start]
            page = after[: params["Limit"]]
            out: dict[str, Any] = {"Items": [serialize(r) for r in page]}
            if len(after) > len(page):
                out["LastEvaluatedKey"] = serialize({k: page[-1][k] for k in ("PK", "SK", "GSI1PK", "GSI1SK")})
            return out

    store = Store("t", Index())
    seen: list[int] = []
    start = None
    for _ in range(20):
        items, start = store.filtered_page(
            "g", index="GSI1", limit=4, start_key=start, keep=lambda i: i["n"] % 7 == 0, max_reads=2
        )
        assert len(items) <= 4
        seen += [i["n"] for i in items]
        if start is None:
            break
    assert seen == [n for n in range(60) if n % 7 == 0]
