"""SQS consumer of CdpSegmentEventsQueue: each `contact.updated` event re-evaluates that contact against its
organization's segments (switchboard.cdp.segments.refresh_contact); memberships that flip are written with their
`crm.list.entry_added` / `crm.list.entry_removed` events. A failing record alone is retried (partial batch response)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import tracing
from switchboard.cdp.segments import handle_records
from switchboard.store import get_store

logger = Logger()


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    failed = handle_records(get_store(), records)
    if failed:
        logger.warning("segment evaluation failed; the events will be retried", extra={"message_ids": failed})
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}
