"""Business and reliability metrics as CloudWatch Embedded Metric Format (EMF), through Powertools Metrics.

Code counts during an invocation (`count("MessagesSent", organization=org)` — a dict update, no I/O); the
invocation's entry point flushes once at its end (`flushed` decorator), so every invocation writes at most one EMF
line per organization it touched plus one line of totals, on stdout, which Lambda ships to CloudWatch Logs and
CloudWatch turns into metrics. Nothing is imported from Powertools Metrics until a flush has something to write,
so cold start pays nothing for metrics.

Dimensions: `service` on every metric (the totals the dashboard and alarms use) and `service` + `organization` for
per-tenant figures. The metric names are the contract of the dashboard and alarms in template.yaml:

| metric | where | meaning |
|---|---|---|
| `ApiRequests`, `ApiClientErrors`, `ApiServerErrors`, `ApiThrottled` | every API function | responses, 4xx, 5xx, 429 |
| `MessagesSent`, `MessagesFailed`, `MessageSendRetries` | message_sender | provider accepted, refused, retry |
| `EventsPublished`, `EventsFailed` | event_publisher | outbox events put on the bus / left for the stream to retry |
| `WebhookDeliveries`, `WebhookDeliveryFailures`, `WebhookRetries`, `WebhookExhausted` | webhook_sender | attempts |
| `DlqMoves` | queue consumers | records that failed their last allowed receive: SQS moves them to the DLQ |
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

_lock = threading.Lock()
_counts: dict[tuple[str, str | None], float] = {}

# maxReceiveCount of each queue's RedrivePolicy in template.yaml (tests/unit/test_metrics.py keeps them equal).
MAX_RECEIVES = {"OutboundMessagesQueue": 5, "WebhookEventsQueue": 5, "WebhookDeliveriesQueue": 12}


def count(name: str, value: float = 1, *, organization: str | None = None) -> None:
    """Add to a counter of this invocation (and to its organization's, when given)."""
    if not value:
        return
    with _lock:
        _counts[(name, None)] = _counts.get((name, None), 0) + value
        if organization:
            _counts[(name, organization)] = _counts.get((name, organization), 0) + value


def dlq_moves(queue: str, records: Iterable[dict[str, Any]], failed_ids: Iterable[str]) -> int:
    """Count the failed records of an SQS batch that used their last receive (SQS now moves them to the DLQ)."""
    limit = MAX_RECEIVES[queue]
    failed = set(failed_ids)
    moved = 0
    for record in records:
        if record.get("messageId") not in failed:
            continue
        receives = int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1)
        if receives >= limit:
            moved += 1
    count("DlqMoves", moved)
    return moved


def pending() -> dict[tuple[str, str | None], float]:
    with _lock:
        return dict(_counts)


def flush() -> None:
    """Write this invocation's counters as EMF (one line of totals, one per organization) and reset them."""
    with _lock:
        counts = dict(_counts)
        _counts.clear()
    if not counts or os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() in ("1", "true"):
        return  # the local stack disables them (its stdout is the developer's console)
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Switchboard")
    service = os.environ.get("POWERTOOLS_SERVICE_NAME", "switchboard")
    by_org: dict[str | None, dict[str, float]] = {}
    for (name, org), value in counts.items():
        by_org.setdefault(org, {})[name] = value
    for org, values in by_org.items():
        metrics = EphemeralMetrics(namespace=namespace, service=service)
        if org:
            metrics.add_dimension(name="organization", value=org)
        for name, value in values.items():
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        metrics.flush_metrics()


def flushed[F: Callable[..., Any]](handler: F) -> F:
    """Flush the metrics at the end of every invocation of `handler`, whatever it returns or raises."""

    @wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            flush()

    return wrapper  # type: ignore[return-value]
