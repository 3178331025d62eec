"""The webhook send benchmark's machinery works: the real sender delivers signed requests to its receiver through
the fake table at the expected DynamoDB calls, and the floor runs (no timing is checked here)."""

from bench import webhook_send


def test_webhook_send_benchmark_runs():
    result = webhook_send.run(runs=1, per_round=1)
    assert result["calls"] == {"GetItem": 2, "BatchGetItem": 1, "UpdateItem": 1, "TransactWriteItems": 1}
    assert result["sender_per_s"] > 0 and result["floor_per_s"] > 0 and result["ratio"] > 0
