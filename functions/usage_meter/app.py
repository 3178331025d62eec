"""DynamoDB stream → counters. One consumer of the table's stream, filtered (template.yaml) to the records that
move a counter:
- a new usage record (`USAGEREC#`, written when a message is sent): added to its channel's daily counter once
  (switchboard.billing.usage.count_record);
- a contact item inserted, modified or removed: the organization's contacts in total and per lifecycle stage
  (switchboard.contacts.counter.count_contact_record);
- a new stage-change log (`CDPSTAGELOG#`): the day's entries, exits and conversions
  (switchboard.cdp.stages.count_stage_change);
- a segment member row inserted or removed: the segment's `member_count`
  (switchboard.cdp.segment_counts.count_member_record).
Each is idempotent per stream record. A failing record alone is retried by the stream (partial batch response);
records still failing after the mapping's retries land in UsageMeterDLQ."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.billing.usage import RECORD_PREFIX, count_record
from switchboard.cdp.segment_counts import count_member_record, is_member_row
from switchboard.cdp.stages import STAGE_LOG_PREFIX, count_stage_change
from switchboard.contacts.counter import count_contact_record, is_contact
from switchboard.logs import redact_logs
from switchboard.store import get_store
from switchboard.store.table import Item, deserialize

logger = Logger()
redact_logs(logger)


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's state, and the local stack runs invocations of a function
    concurrently in one process."""
    return BatchProcessor(event_type=EventType.DynamoDBStreams)


def record_kind(event: str, old: Item | None, new: Item | None) -> str | None:
    """The counter a stream record moves, or None for a record the consumer has no use for. The mapping's filters
    (template.yaml) let exactly these records through; any other that reaches the function is ignored."""
    if (event in ("INSERT", "MODIFY") and is_contact(new)) or (event == "REMOVE" and is_contact(old)):
        return "contact"
    if (event == "INSERT" and is_member_row(new)) or (event == "REMOVE" and is_member_row(old)):
        return "member"
    sk = str((new or {}).get("SK", ""))
    if event == "INSERT" and sk.startswith(STAGE_LOG_PREFIX):
        return "stage_change"
    if event == "INSERT" and sk.startswith(RECORD_PREFIX):
        return "usage_record"
    return None


def record_handler(record: DynamoDBRecord) -> bool:
    raw = record.raw_event
    stream = raw["dynamodb"]
    event = str(raw["eventName"])
    new = deserialize(stream["NewImage"]) if stream.get("NewImage") else None
    old = deserialize(stream["OldImage"]) if stream.get("OldImage") else None
    kind = record_kind(event, old, new)
    if kind == "contact":
        counted = count_contact_record(get_store(), event, old, new, str(stream["SequenceNumber"]))
        metrics.count("ContactRecordsCounted" if counted else "ContactRecordsRepeated")
    elif kind == "member":
        counted = count_member_record(get_store(), event, old, new, str(stream["SequenceNumber"]))
        metrics.count("SegmentMembersCounted" if counted else "SegmentMembersRepeated")
    elif kind == "stage_change" and new is not None:
        counted = count_stage_change(get_store(), new)
        metrics.count("StageChangesCounted" if counted else "StageChangesRepeated")
    elif kind == "usage_record" and new is not None:
        counted = count_record(get_store(), new)
        metrics.count("UsageRecordsCounted" if counted else "UsageRecordsRepeated")
    else:
        return False
    return counted


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=_processor(), context=context)
