"""Background jobs (switchboard.jobs): the JobsQueue consumer, one chunk per message, and the schedules that start
due organization purges (daily), start the day's segment window expiry (daily), send the chunk message of stalled
jobs, or of jobs whose message could not be sent, and release contact erasures due for their second pass (every 5
minutes)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import metrics, tracing
from switchboard.cdp import segment_window_job
from switchboard.jobs import purge, service
from switchboard.store import get_store

logger = Logger()


def _processor() -> BatchProcessor:
    """A processor per invocation: it holds the batch's state, and the local stack runs invocations of a function
    concurrently in one process. A batch where every record failed is reported like any other (SQS retries each
    record, then the DLQ)."""
    return BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> str:
    return service.handle_record(get_store(), record.raw_event)


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=_processor(), context=context
        )
    action = event.get("action")
    if action == "start_due_purges":
        started = purge.start_due_purges(get_store())
        logger.info("organization purges started", extra={"jobs": started})
        return {"started": started}
    if action == "expire_segment_windows":
        started = segment_window_job.start_due(get_store())
        logger.info("segment window expiry started", extra={"jobs": started})
        return {"started": started}
    if action == "resume_stalled":
        resumed = service.resume_stalled(get_store())
        logger.info("stalled jobs resumed", extra={"jobs": resumed})
        # on first use: keeps switchboard.contacts.erasure off the queue consumer's cold start
        from switchboard.contacts import erasure

        released = erasure.release_settled(get_store())
        logger.info("contact erasures released for their second pass", extra={"contacts": len(released)})
        return {"resumed": resumed, "erasures_released": len(released)}
    raise ValueError(f"unknown jobs action {action!r}")
