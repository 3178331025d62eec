"""The send benchmark's machinery works (in this process and in fresh ones) and the send path makes exactly the
minimum DynamoDB calls, no SQS."""

from bench import send
from bench._harness import across_processes, spread


def test_send_benchmark_runs_at_the_minimum_calls():
    result = send.run(runs=1)
    assert result["calls"] == send.MINIMUM
    assert result["same_calls"]  # the floor makes the route's requests: same keys, items' attributes, expressions
    assert result["route_us"] > 0 and result["floor_us"] > 0


def test_fresh_interpreters_give_the_median_and_the_spread():
    result = across_processes("bench.send", runs=1, processes=2)
    assert result["calls"] == send.MINIMUM and result["same_calls"]
    assert len(result["ratios"]) == 2 and result["ratios"][0] <= result["ratio"] <= result["ratios"][1]
    assert spread(result).startswith(" (median of 2 processes: ")
