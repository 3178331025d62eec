"""SQS consumer of WebhookDeliveriesQueue: one attempt per due delivery — signed POST (Standard Webhooks), the
attempt recorded, a failure rescheduled on the same message with ChangeMessageVisibility (5 s … 10 h), 410 disabling
the endpoint, `exhausted` after the last attempt. httpx is imported on the first delivery, not at cold start."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    async_process_partial_response,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.logs import redact_logs
from switchboard.webhooks.delivery import Payloads, attempt_record, attempt_record_async

logger = Logger()
redact_logs(logger)


def process_batch(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The batch's attempts, reported partially; a batch where every record failed is reported like any other (SQS
    shows each message again once its visibility ends). A lone record is attempted in the invoking thread
    (`BatchProcessor`: no event loop to start); the records of a larger batch concurrently (`AsyncBatchProcessor`,
    each attempt on a worker thread). A processor per invocation: it holds the batch's state, and the local stack
    runs invocations of a function concurrently in one process."""
    bodies = Payloads()  # the event payloads this batch has read (the deliveries of one event share one)

    def attempt(record: SQSRecord) -> None:
        attempt_record(record.raw_event, bodies)

    async def attempt_async(record: SQSRecord) -> None:
        await attempt_record_async(record.raw_event, bodies)

    if len(event.get("Records") or []) <= 1:
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        return process_partial_response(event=event, record_handler=attempt, processor=processor, context=context)
    concurrent = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return async_process_partial_response(
        event=event, record_handler=attempt_async, processor=concurrent, context=context
    )


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_batch(event, context)
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    metrics.dlq_moves("WebhookDeliveriesQueue", event.get("Records") or [], failed)
    return response
