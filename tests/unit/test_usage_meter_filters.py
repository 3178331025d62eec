"""The usage meter's stream mapping (template.yaml, UsageMeterFunction) lets through exactly the records the consumer
counts, within Lambda's 5 filters per mapping. The filters are evaluated as Lambda evaluates them (local.patterns,
the local stack's evaluator) on stream records of every item kind the table holds, for every event name."""

from __future__ import annotations

from typing import Any

import pytest

from functions.usage_meter.app import handler, record_kind
from local.patterns import matches_any
from local.template import MAX_FILTERS, TemplateError, load_template
from switchboard.store.table import serialize
from tests.helpers import FakeContext

ITEMS: dict[str, dict[str, Any]] = {
    "contact": {"PK": "ORG#o1", "SK": "CONTACT#ct_1", "entity": "Contact", "id": "ct_1", "lifecycle_stage": "lead"},
    "member": {
        "PK": "ORG#o1",
        "SK": "SEGMENT#sg_1#MEMBER#ct_1",
        "entity": "SegmentMember",
        "segment_id": "sg_1",
        "contact_id": "ct_1",
        "counted": "stream",
    },
    "usage record": {"PK": "ORG#o1#3", "SK": "USAGEREC#01J0", "entity": "UsageRecord", "channel_id": "ch_1"},
    "stage change": {"PK": "ORG#o1", "SK": "CDPSTAGELOG#01J0", "entity": "StageLog", "contact_id": "ct_1"},
    "outbox event": {"PK": "ORG#o1#5", "SK": "EVENT#01J0", "entity": "Event", "event_type": "contact.updated"},
    "message": {"PK": "ORG#o1#2", "SK": "MSG#01J0", "entity": "Message", "status": "sent"},
    "contact stage history": {"PK": "ORG#o1", "SK": "CONTACT#ct_1#STAGELOG#01J0", "entity": "ContactStageLog"},
    "segment": {"PK": "ORG#o1", "SK": "SEGMENT#sg_1", "entity": "Segment", "id": "sg_1"},
}

# What the counters consume: (item kind, event name) → the counter moved.
NEEDED = {
    ("contact", "INSERT"): "contact",
    ("contact", "MODIFY"): "contact",
    ("contact", "REMOVE"): "contact",
    ("member", "INSERT"): "member",
    ("member", "REMOVE"): "member",
    ("usage record", "INSERT"): "usage_record",
    ("stage change", "INSERT"): "stage_change",
}


def stream_record(item: dict[str, Any], event: str, seq: int) -> dict[str, Any]:
    """A NEW_AND_OLD_IMAGES stream record of `item`, as Lambda's filter and the function see it."""
    data: dict[str, Any] = {"Keys": serialize({"PK": item["PK"], "SK": item["SK"]}), "SequenceNumber": str(seq)}
    if event in ("INSERT", "MODIFY"):
        data["NewImage"] = serialize(item)
    if event in ("MODIFY", "REMOVE"):
        data["OldImage"] = serialize(item)
    return {"eventID": str(seq), "eventName": event, "eventSource": "aws:dynamodb", "dynamodb": data}


@pytest.fixture(scope="module")
def filters() -> tuple[dict[str, Any], ...]:
    (stream,) = load_template().function("UsageMeterFunction").stream_events
    return stream.filters


def test_the_mapping_has_no_more_filters_than_lambda_allows(filters):
    assert 0 < len(filters) <= MAX_FILTERS == 5


@pytest.mark.parametrize("event", ["INSERT", "MODIFY", "REMOVE"])
@pytest.mark.parametrize("kind", list(ITEMS))
def test_the_filters_pass_exactly_the_records_the_consumer_counts(filters, kind: str, event: str):
    item = ITEMS[kind]
    record = stream_record(item, event, 1)
    old = item if event != "INSERT" else None
    new = item if event != "REMOVE" else None
    assert record_kind(event, old, new) == NEEDED.get((kind, event))
    assert matches_any(filters, record) is ((kind, event) in NEEDED)


def test_a_record_the_consumer_does_not_need_is_ignored_without_touching_the_table():
    """A member row MODIFY (the filters never pass one) reaching the function: ignored, no AWS call (this unit
    test's AWS endpoint refuses every call, which would fail the record)."""
    records = [stream_record(ITEMS["member"], "MODIFY", 1), stream_record(ITEMS["message"], "INSERT", 2)]
    assert handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}


def test_the_local_stack_refuses_a_mapping_lambda_would_refuse(tmp_path):
    filters = "\n".join(f"""                - Pattern: '{{"eventName": ["E{n}"]}}'""" for n in range(6))
    (tmp_path / "template.yaml").write_text(
        f"""
Transform: AWS::Serverless-2016-10-31
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Consumer:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fns/consumer/
      Handler: app.handler
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: LATEST
            FilterCriteria:
              Filters:
{filters}
"""
    )
    with pytest.raises(TemplateError, match=r"Consumer\.Stream: 6 FilterCriteria filters; Lambda allows 5"):
        load_template(tmp_path / "template.yaml")
