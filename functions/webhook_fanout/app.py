"""SQS consumer of WebhookEventsQueue: each domain event (an EventBridge event) becomes one delivery per enabled,
subscribed endpoint of its organization, queued on WebhookDeliveriesQueue, paced per organization. Redelivered events
create nothing new (deterministic delivery ids); a failing record alone is retried (partial batch response)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.logs import redact_logs
from switchboard.webhooks.fanout import plan_batch

logger = Logger()
redact_logs(logger)


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's state, and the local stack runs invocations of a function
    concurrently in one process. A batch where every record failed is reported like any other (SQS retries each
    record, then the DLQ)."""
    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    steps = plan_batch(event.get("Records") or [])  # the whole batch planned: one pacing reservation per organization

    def record_handler(record: SQSRecord) -> list[str]:
        return steps[record.message_id]()

    response = process_partial_response(
        event=event, record_handler=record_handler, processor=_processor(), context=context
    )
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    metrics.dlq_moves("WebhookEventsQueue", event.get("Records") or [], failed)
    return response
