"""DynamoDB stream → EventBridge: publishes outbox items, reporting only the records that failed. Requests stay within
PutEvents' limits; an event too large for the bus is published as a reference to its outbox item
(switchboard.events.publisher)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import aws, metrics, tracing
from switchboard.config import get_settings
from switchboard.events.publisher import fits_inline, outbox_events, publish
from switchboard.logs import redact_logs

logger = Logger()
redact_logs(logger)


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
@metrics.flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    pending = outbox_events(event.get("Records", []))
    failed = publish(pending, get_settings().event_bus_name, aws.client("events"))
    metrics.count("EventsPublished", len(pending) - len(failed))
    metrics.count("EventsFailed", len(failed))
    metrics.count("EventsByReference", sum(not fits_inline(p.event) for p in pending))
    if failed:
        logger.warning("events not published; the stream will retry them", extra={"failed": len(failed)})
    # For streams, Lambda restarts from the lowest failed sequence number; later records may be re-sent, and
    # consumers deduplicate by event_id.
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed]}
