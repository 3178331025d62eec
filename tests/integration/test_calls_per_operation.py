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


def test_an_events_batch_costs_calls_per_batch_not_per_event(api: Api):
    """Issue 29 row 4: 100 events naming 100 new phones were 400 DynamoDB calls (a resolution, an upsert and a
    transaction per event) and half a minute on the local stack. Now: the batch's sentinels and contacts in two
    BatchGetItem requests, the events and the contacts they create in TransactWriteItems of up to 100 operations."""
    recorder = calls._Recorder()
    events = [
        {"name": "signup", "contact": {"type": "phone", "value": f"+1 415 555 {1000 + i:04d}"}} for i in range(100)
    ]
    with calls._recording(recorder):
        recorder.recording = True
        answer = api.post("/v1/cdp/events", json={"events": events})
        recorder.recording = False
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["accepted"] == 100
    route = {op: n for (function, op), n in recorder.calls.items() if function == "CdpFunction"}
    assert route.get("dynamodb.BatchGetItem", 0) <= 2, route
    assert route.get("dynamodb.TransactWriteItems", 0) <= 12, route  # ~10 operations per event and new contact
    assert sum(route.values()) <= 20, route
    # each phone is one new contact, its event on its timeline
    contact = api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": "+1 415 555 1042"}]})
    assert contact.status_code == 200, contact.text
    activity = api.get(f"/v1/cdp/contacts/{contact.json()['data']['id']}/activity").json()["data"]
    assert [a["name"] for a in activity] == ["signup"]
