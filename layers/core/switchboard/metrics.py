"""Business and reliability metrics as CloudWatch Embedded Metric Format (EMF), in Powertools' format.

Code counts during an invocation (`count("MessagesSent", organization=org)` — a dict update, no I/O); the
invocation's entry point flushes once at its end (`flushed` decorator), so every invocation writes at most one EMF
line per organization it touched plus one line of totals, on stdout, which Lambda ships to CloudWatch Logs and
CloudWatch turns into metrics. The documents are the ones Powertools Metrics (`EphemeralMetrics.flush_metrics`)
writes for the same namespace, dimensions and units (tests/unit/test_metrics_emf.py compares them), written
directly: one small writer instead of a Powertools Metrics object per organization per invocation.

Dimensions: `service` on every metric (the totals the dashboard and alarms use) and `service` + `organization` for
per-tenant figures. The metric names are the contract of the dashboard and alarms in template.yaml:

| metric | where | meaning |
|---|---|---|
| `ApiRequests`, `ApiClientErrors`, `ApiServerErrors`, `ApiThrottled` | every API function | responses, 4xx, 5xx, 429 |
| `MessagesSent`, `MessagesFailed`, `MessageSendRetries` | message_sender | provider accepted, refused, retry |
| `EventsPublished`, `EventsFailed` | event_publisher | outbox events put on the bus / left for the stream to retry |
| `EventsByReference` | event_publisher | events too large for the bus, published as a reference to their outbox item |
| `EventsErasedBeforeUse` | event consumers | events by reference whose outbox item was erased or purged: skipped |
| `WebhookDeliveries`, `WebhookDeliveryFailures`, `WebhookRetries`, `WebhookExhausted` | webhook_sender | attempts |
| `MailSent`, `MailFailed`, `MailExpired` | mail | SES took a mail / refused or failed it (retried) / past its expiry |
| `JobEnqueueFailures` | API functions, jobs | a committed job's chunk message not sent (the job sweep sends it) |
| `DlqMoves` | queue consumers | records that failed their last allowed receive: SQS moves them to the DLQ |
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

from aws_lambda_powertools.metrics.functions import is_metrics_disabled

_lock = threading.Lock()
_counts: dict[tuple[str, str | None], float] = {}

# maxReceiveCount of each queue's RedrivePolicy in template.yaml (tests/unit/test_metrics.py keeps them equal).
MAX_RECEIVES = {
    "OutboundMessagesQueue": 5,
    "WebhookEventsQueue": 5,
    "WebhookDeliveriesQueue": 12,
    "CloudWebhookQueue": 5,
    "MailQueue": 5,
}

_RESPONSE_NAMES = {
    200: ("ApiRequests",),
    429: ("ApiRequests", "ApiThrottled", "ApiClientErrors"),
    400: ("ApiRequests", "ApiClientErrors"),
    500: ("ApiRequests", "ApiServerErrors"),
}


def count(name: str, value: float = 1, *, organization: str | None = None) -> None:
    """Add to a counter of this invocation (and to its organization's, when given)."""
    if not value:
        return
    with _lock:
        _counts[(name, None)] = _counts.get((name, None), 0) + value
        if organization:
            _counts[(name, organization)] = _counts.get((name, organization), 0) + value


def count_response(status: int, *, organization: str | None) -> None:
    """One API response: `ApiRequests`, with `ApiThrottled` for a 429, `ApiClientErrors` for any 4xx and
    `ApiServerErrors` for a 5xx, in total and for `organization`."""
    kind = 429 if status == 429 else 400 if 400 <= status < 500 else 500 if status >= 500 else 200
    for name in _RESPONSE_NAMES[kind]:
        count(name, organization=organization)


def dlq_moves(queue: str, records: Iterable[dict[str, Any]], failed_ids: Iterable[str]) -> int:
    """Count the failed records of an SQS batch that used their last receive (SQS now moves them to the DLQ)."""
    limit, failed = MAX_RECEIVES[queue], set(failed_ids)
    moved = sum(
        1
        for record in records
        if record.get("messageId") in failed
        and int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1) >= limit
    )
    count("DlqMoves", moved)
    return moved


def pending() -> dict[tuple[str, str | None], float]:
    with _lock:
        return dict(_counts)


def flush() -> None:
    """Write this invocation's counters as EMF (one line of totals, one per organization) and reset them; nothing
    when Powertools' rule says metrics are disabled (the local stack: its stdout is the developer's console)."""
    with _lock:
        counts = dict(_counts)
        _counts.clear()
    if not counts or is_metrics_disabled():
        return
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Switchboard")
    service = os.environ.get("POWERTOOLS_SERVICE_NAME", "switchboard")
    by_org: dict[str | None, dict[str, float]] = {}
    for (name, org), value in counts.items():
        by_org.setdefault(org, {})[name] = value
    timestamp = int(time.time() * 1000)
    lines = [_document(namespace, service, org, values, timestamp) for org, values in by_org.items()]
    sys.stdout.write("\n".join(lines) + "\n")


def _document(namespace: str, service: str, org: str | None, values: dict[str, float], timestamp: int) -> str:
    """One EMF document as Powertools' `EphemeralMetrics.flush_metrics` prints it (Count metrics, values as floats)."""
    dimensions = ["organization", "service"] if org is not None else ["service"]
    metrics = [{"Name": name, "Unit": "Count"} for name in values]
    directive = {"Namespace": namespace, "Dimensions": [dimensions], "Metrics": metrics}
    document: dict[str, Any] = {"_aws": {"Timestamp": timestamp, "CloudWatchMetrics": [directive]}}
    if org is not None:
        document["organization"] = org
    document["service"] = service
    document.update({name: [float(value)] for name, value in values.items()})
    return json.dumps(document, separators=(",", ":"))


def flushed[F: Callable[..., Any]](handler: F) -> F:
    """Flush the metrics at the end of every invocation of `handler`, whatever it returns or raises."""

    @wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            flush()

    return wrapper  # type: ignore[return-value]
