"""Background jobs (switchboard.jobs): the JobsQueue consumer, one chunk per message, and the schedules that start
due organization purges (daily), start the day's segment window expiry (daily) and re-send the next chunk of
stalled jobs (hourly)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import tracing
from switchboard.cdp import segment_window_job
from switchboard.jobs import purge, service
from switchboard.store import get_store

logger = Logger()


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:
        return service.handle_batch(get_store(), event["Records"])
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
        return {"resumed": resumed}
    raise ValueError(f"unknown jobs action {action!r}")
