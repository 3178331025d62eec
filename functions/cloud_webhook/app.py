"""SQS consumer of the WhatsApp Cloud webhook queue: each record is one change of Meta's callback, its signature
already checked by the callback route; processed once (`switchboard.messaging.cloud_webhook.process`). Partial
batch failures: a change that raised is retried, then the DLQ."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.logs import redact_logs
from switchboard.messaging import cloud_webhook
from switchboard.store import get_store

logger = Logger()
redact_logs(logger)


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's state, and the local stack runs invocations of a function
    concurrently in one process."""
    return BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> dict[str, int]:
    body: dict[str, Any] = json.loads(record.body)
    counts = cloud_webhook.process(
        get_store(), str(body["organization_id"]), str(body["channel_id"]), str(body["field"]), dict(body["value"])
    )
    logger.info("cloud webhook change", extra={"channel_id": body["channel_id"], "field": body["field"], **counts})
    return counts


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    try:
        response = process_partial_response(
            event=event, record_handler=record_handler, processor=_processor(), context=context
        )
    except BatchProcessingError:  # every record failed: Lambda retries the whole batch
        metrics.dlq_moves("CloudWebhookQueue", records, [r.get("messageId", "") for r in records])
        raise
    metrics.dlq_moves(
        "CloudWebhookQueue", records, [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]
    )
    return response
