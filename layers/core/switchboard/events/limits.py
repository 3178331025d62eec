"""EventBridge's PutEvents limits, computed as EventBridge computes them.

- At most 10 entries per request.
- An entry's size is the UTF-8 bytes of its `Source`, `DetailType`, `Detail` and each of its `Resources`, plus 14
  bytes when it has a `Time` ("Calculating PutEvents event entry size", EventBridge user guide); `EventBusName` and
  `TraceHeader` do not count. An entry may be at most 256 KiB, and so may all the entries of one request together:
  a request over it fails whole (ValidationException "Total size of the entries in the request is over the limit").

The bus hands each event to SQS targets wrapped in its envelope (id, time, account, region, …), and an SQS message is
capped at 256 KiB too, so the publisher keeps an entry inline only up to `MAX_INLINE_ENTRY_BYTES`, leaving room for the
envelope; a larger event travels by reference (switchboard.events.publisher).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

MAX_ENTRIES_PER_REQUEST = 10
MAX_REQUEST_BYTES = 256 * 1024  # one entry, and every entry of a request together
TIME_BYTES = 14
ENVELOPE_ALLOWANCE = 2 * 1024  # what EventBridge adds around `detail` when it delivers to an SQS target
MAX_INLINE_ENTRY_BYTES = MAX_REQUEST_BYTES - ENVELOPE_ALLOWANCE


def _utf8(value: Any) -> int:
    return len(str(value).encode("utf-8")) if value is not None else 0


def entry_size(entry: dict[str, Any]) -> int:
    """The size EventBridge counts for one PutEvents entry."""
    size = TIME_BYTES if entry.get("Time") is not None else 0
    size += _utf8(entry.get("Source")) + _utf8(entry.get("DetailType")) + _utf8(entry.get("Detail"))
    return size + sum(_utf8(resource) for resource in entry.get("Resources") or [])


def requests[T](items: Iterable[T], size: Callable[[T], int]) -> Iterator[list[T]]:
    """`items` in order, cut into PutEvents requests: at most 10 entries and `MAX_REQUEST_BYTES` each. An item
    larger than the request limit by itself goes alone (EventBridge refuses that request; the caller sees it fail)."""
    batch: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if batch and (len(batch) == MAX_ENTRIES_PER_REQUEST or total + n > MAX_REQUEST_BYTES):
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch
