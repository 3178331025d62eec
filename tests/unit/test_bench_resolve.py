"""The resolve benchmark's machinery works and the route makes the minimum DynamoDB calls (no timing asserted)."""

from bench import resolve


def test_resolve_benchmark_runs_and_counts_calls():
    result = resolve.run(runs=1)
    assert result["calls"] == {"UpdateItem": 1, "BatchGetItem": 1, "GetItem": 1}
    assert result["resolution_calls"] <= resolve.TARGET_CALLS
    assert result["route_us"] > 0 and result["floor_us"] > 0
    assert result["ratio"] == result["route_us"] / result["floor_us"]
    assert result["same_calls"]  # the floor makes the route's requests: same keys, attributes, expressions


def test_shape_ignores_values_and_tells_requests_apart():
    from bench._harness import shape

    def tx(item: dict, condition: str = "attribute_not_exists(PK)") -> list:
        return [("TransactWriteItems", {"TransactItems": [{"Put": {"Item": item, "ConditionExpression": condition}}]})]

    a = {"PK": {"S": "ORG#a"}, "SK": {"S": "MSG#1"}, "text": {"S": "hi"}}
    b = {"PK": {"S": "ORG#b"}, "SK": {"S": "MSG#2"}, "text": {"S": "other"}}
    assert shape(tx(a)) == shape(tx(b))  # values differ, the request is the same
    assert shape(tx(a)) != shape(tx({**b, "extra": {"S": "x"}}))  # one more attribute written
    assert shape(tx(a)) != shape(tx(a, "#v = :v"))  # another condition
    read = ("BatchGetItem", {"RequestItems": {"t": {"Keys": [a], "ConsistentRead": True}}})
    assert shape([read]) != shape([("BatchGetItem", {"RequestItems": {"t": {"Keys": [a, b], "ConsistentRead": True}}})])
