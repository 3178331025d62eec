"""SQS consumer of CdpSegmentEventsQueue: each `contact.updated` event re-evaluates that contact against its
organization's segments (switchboard.cdp.segments.refresh_contact); memberships that flip are written with their
`crm.list.entry_added` / `crm.list.entry_removed` events. Each `contact.erasure` event runs a deleted contact's
erasure cascade from its checkpoint (switchboard.contacts.erasure.drive) while the invocation has time. A failing
record alone is retried (partial batch response)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.cdp import segments
from switchboard.contacts import erasure
from switchboard.store import get_store

logger = Logger()


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's state, and the local stack runs invocations of a function
    concurrently in one process. A batch where every record failed is reported like any other (SQS retries each
    record, then the DLQ)."""
    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> None:
    if erasure.is_erasure_record(record.raw_event):
        erasure.handle_record(get_store(), record.raw_event, has_time=lambda: _has_time(lambda_context))
    else:
        segments.handle_record(get_store(), record.raw_event)


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=_processor(), context=context
    )
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    if failed:
        logger.warning("segment evaluation failed; the events will be retried", extra={"message_ids": failed})
    return response


def _has_time(context: LambdaContext) -> bool:
    """Room for one more erasure chunk (a page read and ~25 writes) before the function's timeout."""
    return context.get_remaining_time_in_millis() > ERASURE_CHUNK_MARGIN_MS


ERASURE_CHUNK_MARGIN_MS = 8_000
