"""The resolve benchmark's machinery works and the route makes the minimum DynamoDB calls (no timing asserted)."""

from bench import resolve


def test_resolve_benchmark_runs_and_counts_calls():
    result = resolve.run(runs=1)
    assert result["calls"] == {"UpdateItem": 1, "BatchGetItem": 1, "GetItem": 1}
    assert result["resolution_calls"] <= resolve.TARGET_CALLS
    assert result["route_us"] > 0 and result["floor_us"] > 0
    assert result["ratio"] == result["route_us"] / result["floor_us"]
