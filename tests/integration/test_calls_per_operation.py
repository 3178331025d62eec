"""The main routes make exactly the AWS calls their rules need (bench.calls), counted through the in-process gateway
with moto: a regression guard for 'calls per operation at the minimum' (docs/performance.md)."""

from bench import calls
from tests.integration.support import Api


def test_main_routes_at_the_minimum_calls(api: Api):
    rows = calls.measure(api)
    assert [row["operation"].name for row in rows] == [
        op.name for op in calls._operations(dict.fromkeys(("contact", "channel", "message", "conversation"), "x"))
    ]
    for row in rows:
        op = row["operation"]
        assert row["route"] == op.minimum, (op.name, row["route"])
        assert row["authorizer"] == calls.AUTHORIZER_MINIMUM, (op.name, row["authorizer"])
        assert not any(name.startswith("sqs.") for name in row["route"])  # sends leave through the outbox
