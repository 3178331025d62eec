"""DynamoDB stream → usage counters: each new usage record (`USAGEREC#`, written when a message is sent) is added to
its channel's daily counter once (switchboard.billing.usage.count_record). A failing record alone is retried by the
stream (partial batch response); records still failing after the mapping's retries land in UsageMeterDLQ."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.billing.usage import count_record
from switchboard.logs import redact_logs
from switchboard.store import get_store
from switchboard.store.table import deserialize

logger = Logger()
redact_logs(logger)
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def record_handler(record: DynamoDBRecord) -> bool:
    image = record.raw_event["dynamodb"]["NewImage"]
    counted = count_record(get_store(), deserialize(image))
    metrics.count("UsageRecordsCounted" if counted else "UsageRecordsRepeated")
    return counted


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
