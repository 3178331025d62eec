"""The segment-members benchmark's machinery works, and a members page reads the same at any depth: a fixed number
of calls and `2 x limit` items, never a scan (no timing asserted)."""

from bench import segment_members


def test_segment_members_benchmark_runs_and_pages_cost_the_same_at_any_depth():
    result = segment_members.run(runs=1, size=1_000)
    assert result["pages"] == 1_000 // segment_members.PAGE
    expected = {"UpdateItem": 1, "GetItem": 1, "Query": 1, "BatchGetItem": 1}
    assert result["first_calls"] == result["deep_calls"] == expected
    assert result["first_items"] == result["deep_items"] == 2 * segment_members.PAGE
    assert result["first_us"] > 0 and result["deep_us"] > 0 and result["floor_us"] > 0
    assert result["ratio"] == result["first_us"] / result["floor_us"]
