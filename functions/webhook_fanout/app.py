"""SQS consumer of WebhookEventsQueue: each domain event (an EventBridge event) becomes one delivery per enabled,
subscribed endpoint of its organization, queued on WebhookDeliveriesQueue. Redelivered events create nothing new
(deterministic delivery ids, conditional puts); a failing record alone is retried (partial batch response)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.logs import redact_logs
from switchboard.webhooks.fanout import handle_batch

logger = Logger()
redact_logs(logger)


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    response = handle_batch(records)
    metrics.dlq_moves("WebhookEventsQueue", records, [f["itemIdentifier"] for f in response["batchItemFailures"]])
    return response
