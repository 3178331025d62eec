"""SQS consumer of CdpSegmentEventsQueue: each `contact.updated` event re-evaluates that contact against its
organization's segments (switchboard.cdp.segments.refresh_contact); memberships that flip are written with their
`crm.list.entry_added` / `crm.list.entry_removed` events. Each `contact.erasure` event runs a deleted contact's
erasure cascade from its checkpoint (switchboard.contacts.erasure.drive) while the invocation has time. A failing
record alone is retried (partial batch response)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from switchboard import tracing
from switchboard.cdp.segments import handle_records
from switchboard.contacts import erasure
from switchboard.store import get_store

logger = Logger()


@tracing.traced
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records") or []
    erasures = [r for r in records if erasure.is_erasure_record(r)]
    others = [r for r in records if r not in erasures]
    failed = handle_records(get_store(), others) if others else []
    if erasures:
        failed += erasure.handle_records(get_store(), erasures, has_time=lambda: _has_time(context))
    if failed:
        logger.warning("segment evaluation failed; the events will be retried", extra={"message_ids": failed})
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def _has_time(context: LambdaContext) -> bool:
    """Room for one more erasure chunk (a page read and ~25 writes) before the function's timeout."""
    return context.get_remaining_time_in_millis() > ERASURE_CHUNK_MARGIN_MS


ERASURE_CHUNK_MARGIN_MS = 8_000
