"""SQS consumer of MailQueue: sends the mails the requests queued (switchboard.mail) with SES v2. A failed send is
reported alone (SQS retries it, then MailDLQ); the mail's content is sealed until here and never logged."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError

from switchboard import mail, metrics, tracing
from switchboard.logs import redact_logs

logger = Logger()
redact_logs(logger)


def _processor() -> BatchProcessor:
    """A processor per invocation (the local stack runs invocations concurrently in one process). A batch where every
    record failed is reported like any other: SQS retries each record, then the DLQ."""
    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> str:
    detail: dict[str, Any] = json.loads(record.body).get("detail") or {}  # an EventBridge event: mail.send
    event_id = detail.get("event_id")
    try:
        outcome = mail.deliver(detail)
    except ClientError as err:
        error = err.response.get("Error", {})
        logger.warning(
            "mail not sent; SQS retries it",
            extra={"event_id": event_id, "error_code": error.get("Code"), "error": str(error.get("Message"))[:300]},
        )
        raise
    except Exception as err:
        logger.warning("mail not sent; SQS retries it", extra={"event_id": event_id, "error_type": type(err).__name__})
        raise
    metrics.count("MailSent" if outcome == "sent" else "MailExpired")
    logger.info("mail handled", extra={"event_id": event_id, "outcome": outcome})
    return outcome


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=_processor(), context=context
    )
    failed = [f["itemIdentifier"] for f in response.get("batchItemFailures", [])]
    metrics.count("MailFailed", len(failed))
    metrics.dlq_moves("MailQueue", event.get("Records") or [], failed)
    return response
