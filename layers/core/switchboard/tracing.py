"""Opt-in X-Ray subsegments: Powertools `Tracer` around every function's handler, AWS calls and outbound HTTP.

`Tracing: Active` (template.yaml) gives every invocation its Lambda segment and API Gateway its stage segment at no
cost to the function. The detail below that — a `## handler` subsegment per invocation and one per DynamoDB, SQS,
EventBridge or S3 call (botocore) and per provider or webhook request (httpx) — needs the X-Ray SDK, whose import
and patching cost ~0.2 s of init (docs/performance.md: more than the whole cold-start budget). So it is a switch:
`SWITCHBOARD_TRACER=on` (the stack parameter `DetailedTracing`, off by default) makes `traced` wrap the handler in
`Tracer.capture_lambda_handler`; off, it returns the handler unchanged and the SDK is never imported.

Responses are not recorded (`capture_response=False`): an API response can carry a new API key or a session token,
and X-Ray metadata is not the place for them. Errors are recorded as the subsegment's exception (type and message).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENV = "SWITCHBOARD_TRACER"
PATCHED = ("botocore", "httpx")


def enabled() -> bool:
    return os.environ.get(ENV, "off").strip().lower() in ("on", "true", "1", "yes")


def traced[F: Callable[..., Any]](handler: F) -> F:
    """`handler` under a Powertools Tracer when `SWITCHBOARD_TRACER=on`; `handler` itself otherwise."""
    if not enabled():
        return handler
    from aws_lambda_powertools import Tracer  # only when tracing is on: the X-Ray SDK stays off other cold starts

    tracer = Tracer(patch_modules=PATCHED)
    return tracer.capture_lambda_handler(handler, capture_response=False)  # type: ignore[return-value]
