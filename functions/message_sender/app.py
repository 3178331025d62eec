"""SQS consumer of the outbound-messages queue: hands queued messages to their provider and advances sandbox
statuses. Partial batch failures: only records whose provider was unreachable are retried (then the DLQ)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.events.outbox import read_detail
from switchboard.logs import redact_logs
from switchboard.messaging import messages
from switchboard.store import get_store

logger = Logger()
redact_logs(logger)


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's state, and the local stack runs invocations of a function
    concurrently in one process."""
    return BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    body: dict[str, Any] = json.loads(record.body)
    if body.get("kind") == "sandbox_status":
        messages.advance_sandbox(get_store(), body["organization_id"], body["message_id"], body["status"])
        return "advanced"
    detail = read_detail(get_store(), body.get("detail") or {})  # an EventBridge event: message.queued
    if detail is None:
        return "erased"  # the message's event was erased with its recipient: nothing to send
    data = detail.get("data") or {}
    org = detail["organization_id"]
    outcome = messages.deliver(get_store(), org, data["message_id"])
    if outcome in ("sent", "failed"):
        metrics.count("MessagesSent" if outcome == "sent" else "MessagesFailed", organization=org)
    logger.info("message handled", extra={"message_id": data["message_id"], "outcome": outcome})
    return outcome


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
        _retries(records, [r.get("messageId", "") for r in records])
        raise
    _retries(records, [f["itemIdentifier"] for f in response.get("batchItemFailures", [])])
    return response


def _retries(records: list[dict[str, Any]], failed: list[str]) -> None:
    metrics.count("MessageSendRetries", len(failed))
    metrics.dlq_moves("OutboundMessagesQueue", records, failed)
