"""The send benchmark's machinery works and the send path makes exactly the minimum DynamoDB calls, no SQS."""

from bench import send


def test_send_benchmark_runs_at_the_minimum_calls():
    result = send.run(runs=1)
    assert result["calls"] == send.MINIMUM
    assert result["same_calls"]  # the floor makes the route's requests: same keys, items' attributes, expressions
    assert result["route_us"] > 0 and result["floor_us"] > 0
