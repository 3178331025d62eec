"""Redaction of credentials in log output, as a last line of defence.

The code never logs a credential on purpose (tests/integration/test_secrets.py proves it for the account flows), but
an exception message, a provider's error text or a developer's `extra=` can carry one. `redact_logs(logger)` wraps
the Powertools JSON formatter of the service's handler so that every formatted line — message, extras and the
rendered traceback alike — has these replaced by a marker that keeps the kind and the first characters:

- API keys `sk_live_…` / `sk_test_…`, session tokens `sess_…`, webhook secrets `whsec_…`, portal tokens `whp_…`;
- `Authorization: Bearer …` / `X-Api-Key: …` header values;
- JSON or key=value fields named like a secret (`password`, `otp_code`, `token`, `secret`, `api_key`).

It costs one regex pass per line written (the level filter runs first, so lines not written cost nothing).
"""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

_MARK = "[REDACTED]"


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Compiled on the first line written, not at cold start (about 1 ms)."""
    prefixed = re.compile(r"\b(sk_live_|sk_test_|sess_|whsec_|whp_)([A-Za-z0-9_\-+/=]{6})[A-Za-z0-9_\-+/=]{4,}")
    header = re.compile(r"(?i)\b(bearer|x-api-key)(\\?[\"']?\s*[:=]?\s*\\?[\"']?\s*)([A-Za-z0-9_\-+/=.]{8,})")
    fields = re.compile(
        r"(?i)(\\?[\"']?\b(?:password|new_password|otp_code|token|secret|api_key)\\?[\"']?\s*[:=]\s*\\?[\"']?)"
        r"([^\s\"'\\,}]{4,})"
    )
    return prefixed, header, fields


def redact(text: str) -> str:
    prefixed, header, fields = _patterns()
    text = prefixed.sub(lambda m: f"{m.group(1)}{m.group(2)}…{_MARK}", text)
    text = header.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MARK}", text)
    return fields.sub(lambda m: f"{m.group(1)}{_MARK}", text)


def redact_logs(logger: Any) -> None:
    """Make the formatter of `logger`'s service handler redact what it writes (idempotent)."""
    target = logging.getLogger(getattr(logger, "service", None) or "switchboard")
    for handler in target.handlers:
        formatter = handler.formatter
        if formatter is None or getattr(formatter, "_switchboard_redacting", False):
            continue
        original = formatter.format

        def format_redacted(record: logging.LogRecord, _original: Any = original) -> str:
            return redact(_original(record))

        formatter.format = format_redacted  # type: ignore[method-assign]
        formatter._switchboard_redacting = True  # type: ignore[attr-defined]
