"""Business and reliability metrics as CloudWatch Embedded Metric Format (EMF), in Powertools' format.

Code counts during an invocation (`count("MessagesSent", organization=org)` — a dict update, no I/O); the
invocation's entry point flushes once at its end (`flushed` decorator), so every invocation writes at most one EMF
line per organization it touched plus one line of totals, on stdout, which Lambda ships to CloudWatch Logs and
CloudWatch turns into metrics. The documents are the ones Powertools Metrics (`EphemeralMetrics.flush_metrics`)
writes for the same namespace, dimensions and units (tests/unit/test_metrics_emf.py compares them), written
directly: a Powertools Metrics object per organization per invocation cost more CPU than a whole bare request, while
this writer serialises each (dimension set, metric names) directive once per container.

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

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

_lock = threading.Lock()
_counts: dict[tuple[str, str | None], float] = {}

# maxReceiveCount of each queue's RedrivePolicy in template.yaml (tests/unit/test_metrics.py keeps them equal).
MAX_RECEIVES = {
    "OutboundMessagesQueue": 5,
    "WebhookEventsQueue": 5,
    "WebhookDeliveriesQueue": 12,
    "CloudWebhookQueue": 5,
}


def count(name: str, value: float = 1, *, organization: str | None = None) -> None:
    """Add to a counter of this invocation (and to its organization's, when given)."""
    if not value:
        return
    with _lock:
        _add(name, value, organization)


def _add(name: str, value: float, organization: str | None) -> None:  # with the lock held
    _counts[(name, None)] = _counts.get((name, None), 0) + value
    if organization:
        _counts[(name, organization)] = _counts.get((name, organization), 0) + value


# An API invocation counts one response and nothing else: it is kept as (metric names, organization) until the flush,
# which writes its documents from a cache per (namespace, service, names, organization) instead of counting, copying
# and rendering a dict of counters on every request. Anything else counted meanwhile makes it an ordinary count.
_response: tuple[tuple[str, ...], str | None] | None = None
_responses: dict[tuple[str, str, tuple[str, ...], str | None], tuple[str, ...]] = {}


def count_response(status: int, *, organization: str | None) -> None:
    """One API response: `ApiRequests`, with `ApiThrottled` for a 429, `ApiClientErrors` for any 4xx and
    `ApiServerErrors` for a 5xx, in total and for `organization`; the same documents as `count` of each name."""
    global _response
    kind = 429 if status == 429 else 400 if 400 <= status < 500 else 500 if status >= 500 else 200
    names = _RESPONSE_NAMES[kind]
    with _lock:
        if _response is not None:  # a second response before a flush: the first becomes ordinary counts
            for name in _response[0]:
                _add(name, 1, _response[1])
        _response = (names, organization)


_RESPONSE_NAMES = {
    200: ("ApiRequests",),
    429: ("ApiRequests", "ApiThrottled", "ApiClientErrors"),
    400: ("ApiRequests", "ApiClientErrors"),
    500: ("ApiRequests", "ApiServerErrors"),
}


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
        counts = dict(_counts)
        if _response is not None:
            for name, org in _response_counts(_response):
                counts[(name, org)] = counts.get((name, org), 0) + 1
        return counts


def _response_counts(response: tuple[tuple[str, ...], str | None]) -> dict[tuple[str, str | None], float]:
    """A response's counters, in the order `count` of each name would have made them."""
    names, organization = response
    counts: dict[tuple[str, str | None], float] = {}
    for name in names:
        counts[(name, None)] = 1
        if organization:
            counts[(name, organization)] = 1
    return counts


def flush() -> None:
    """Write this invocation's counters as EMF (one line of totals, one per organization) and reset them."""
    global _response
    with _lock:
        response, _response = _response, None
        if response is not None and _counts:  # other counts too: the response joins them
            for name in response[0]:
                _add(name, 1, response[1])
            response = None
        if response is None:
            if not _counts:
                return
            counts = dict(_counts)
            _counts.clear()
    namespace, service, disabled = _config_cache or _config()
    if disabled:
        return  # the local stack disables them (its stdout is the developer's console)
    if response is not None:
        cached = (namespace, service, *response)
        tails = _responses.get(cached)
        if tails is None:
            counts = _response_counts(response)
            tails = _render((namespace, service, tuple(counts.items())), counts)
            if len(_responses) >= 1024:  # bounded: organizations are in the key
                _responses.clear()
            _responses[cached] = tails
    else:
        key = (namespace, service, tuple(counts.items()))
        tails = _rendered.get(key)
        if tails is None:
            tails = _render(key, counts)
    timestamp = str(int(time.time() * 1000))
    sys.stdout.write("".join([_HEAD + timestamp + tail for tail in tails]))


_HEAD = '{"_aws":{"Timestamp":'

# The documents of one invocation's counts, everything but the timestamp: an API function's invocations repeat the
# same few (one request counted, for the same organization) and each is rendered once per container.
_rendered: dict[tuple[str, str, tuple[tuple[tuple[str, str | None], float], ...]], tuple[str, ...]] = {}


def _render(
    key: tuple[str, str, tuple[tuple[tuple[str, str | None], float], ...]],
    counts: dict[tuple[str, str | None], float],
) -> tuple[str, ...]:
    """One line of totals, one per organization: each document after its timestamp, newline included."""
    namespace, service, _ = key
    by_org: dict[str | None, dict[str, float]] = {}
    for (name, org), value in counts.items():
        by_org.setdefault(org, {})[name] = value
    tails = tuple(
        _document(namespace, service, org, values, 0)[len(_HEAD) + 1 :] + "\n" for org, values in by_org.items()
    )
    if len(_rendered) >= 1024:  # bounded: organizations are in the key
        _rendered.clear()
    _rendered[key] = tails
    return tails


_config_cache: tuple[str, str, bool] | None = None


def _config() -> tuple[str, str, bool]:
    """Namespace, service and whether metrics are off, read from the environment once per container (the
    environment of a Lambda function does not change; `reset_config` after changing it, as `reset_settings` does)."""
    global _config_cache
    if _config_cache is None:
        _config_cache = (
            os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Switchboard"),
            os.environ.get("POWERTOOLS_SERVICE_NAME", "switchboard"),
            _disabled(),
        )
    return _config_cache


def reset_config() -> None:
    global _config_cache
    _config_cache = None


def _disabled() -> bool:
    """Powertools' rule (`is_metrics_disabled`): POWERTOOLS_METRICS_DISABLED true, or POWERTOOLS_DEV true with
    POWERTOOLS_METRICS_DISABLED unset."""
    flag = os.environ.get("POWERTOOLS_METRICS_DISABLED")
    if flag is not None:
        return flag.strip().lower() in _TRUE
    return os.environ.get("POWERTOOLS_DEV", "").strip().lower() in _TRUE


_TRUE = frozenset(("1", "y", "yes", "t", "true", "on"))


# The serialised static parts of a document per (namespace, service, with organization?, metric names): the same
# few combinations repeat on every invocation of a function, so each is serialised once per container.
_parts: dict[tuple[str, str, bool, tuple[str, ...]], tuple[str, str, tuple[str, ...]]] = {}
_quoted: dict[str, str] = {}


def _document(namespace: str, service: str, org: str | None, values: dict[str, float], timestamp: int) -> str:
    """One EMF document, byte for byte what Powertools' `EphemeralMetrics.flush_metrics` printed for the same
    namespace, `service` (+ `organization`) dimensions and Count metrics:
    `{"_aws":{"Timestamp":…,"CloudWatchMetrics":[{"Namespace":…,"Dimensions":[[…]],"Metrics":[{"Name":…,"Unit":
    "Count"},…]}]},"organization":…,"service":…,"<metric>":[<value>],…}`."""
    key = (namespace, service, org is not None, tuple(values))
    parts = _parts.get(key)
    if parts is None:
        parts = _static_parts(key)
    directive_json, service_json, name_prefixes = parts
    if org is not None:
        organization = _quoted.get(org)
        if organization is None:
            if len(_quoted) >= 1024:
                _quoted.clear()
            organization = _quoted[org] = '"organization":' + json.dumps(org) + ","
        service_json = organization + service_json
    metric_values = ",".join([p + _number(v) + "]" for p, v in zip(name_prefixes, values.values(), strict=True)])
    return '{"_aws":{"Timestamp":' + str(timestamp) + directive_json + service_json + metric_values + "}"


def _static_parts(key: tuple[str, str, bool, tuple[str, ...]]) -> tuple[str, str, tuple[str, ...]]:
    """The directive (namespace, dimension set, metric names and units), the `service` member and each metric's
    `"<name>":[` prefix, serialised once per (namespace, service, with organization?, metric names)."""
    namespace, service, with_org, names = key
    dimensions = ["organization", "service"] if with_org else ["service"]
    metrics = [{"Name": name, "Unit": "Count"} for name in names]
    directive = [{"Namespace": namespace, "Dimensions": [dimensions], "Metrics": metrics}]
    if len(_parts) >= 256:  # bounded; the metric names come from code, organizations are not in the key
        _parts.clear()
    parts = _parts[key] = (
        ',"CloudWatchMetrics":' + json.dumps(directive, separators=(",", ":")) + "},",
        '"service":' + json.dumps(service) + ",",
        tuple(json.dumps(name) + ":[" for name in names),
    )
    return parts


def _number(value: float) -> str:
    number = float(value)  # Powertools stores every value as a float: 2 → 2.0
    text = repr(number)
    return text if text[-1].isdigit() else json.dumps(number)  # inf / nan as json.dumps writes them


def flushed[F: Callable[..., Any]](handler: F) -> F:
    """Flush the metrics at the end of every invocation of `handler`, whatever it returns or raises."""

    @wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            flush()

    return wrapper  # type: ignore[return-value]
