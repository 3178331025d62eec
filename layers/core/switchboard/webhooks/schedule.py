"""The retry schedule of a delivery (CONVENTIONS "Webhooks").

Attempt 1 goes out at once; after each failure the next one waits 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (± 10 %
jitter): 8 attempts over about 28 h, then the delivery is `exhausted`. A `Retry-After` on 429/503 is honoured within
the schedule: it can push the next attempt later than the schedule says, up to the longest step (10 h), never
earlier. `LOCAL_TIME_SCALE` multiplies every delay (the local stack compresses the schedule with it).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from email.utils import parsedate_to_datetime

# Seconds before attempt n+1 (index n = attempts already made in this run); index 0 is the first attempt.
SCHEDULE: tuple[int, ...] = (0, 5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600)
MAX_ATTEMPTS = len(SCHEDULE)
JITTER = 0.10
LONGEST_STEP = max(SCHEDULE)
MAX_VISIBILITY = 12 * 3600 - 1  # SQS: a message's visibility timeout is at most 12 h
RETRY_AFTER_STATUSES = frozenset({429, 503})


def next_delay(
    attempts_made: int,
    *,
    retry_after: float | None = None,
    scale: float = 1.0,
    rand: Callable[[], float] = random.random,
) -> float | None:
    """Seconds until the next attempt once `attempts_made` attempts of this run failed; None when none is left."""
    if attempts_made >= MAX_ATTEMPTS:
        return None
    delay = SCHEDULE[attempts_made] * (1 + JITTER * (2 * rand() - 1))
    if retry_after is not None and retry_after > delay:
        delay = min(retry_after, LONGEST_STEP)
    return max(0.0, delay * scale)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """`Retry-After` as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def visibility_timeout(delay: float) -> int:
    """Whole seconds for ChangeMessageVisibility (the sender accepts a message up to 1 s before it is due)."""
    return max(0, min(MAX_VISIBILITY, int(delay)))
