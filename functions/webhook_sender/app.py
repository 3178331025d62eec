"""SQS consumer of WebhookDeliveriesQueue: one attempt per due delivery — signed POST (Standard Webhooks), the
attempt recorded, a failure rescheduled on the same message with ChangeMessageVisibility (5 s … 10 h), 410 disabling
the endpoint, `exhausted` after the last attempt. httpx is imported on the first delivery, not at cold start."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.logs import redact_logs
from switchboard.webhooks.delivery import handle_batch

logger = Logger()
redact_logs(logger)


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    response = handle_batch(records)
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    metrics.dlq_moves("WebhookDeliveriesQueue", records, failed)
    return response
