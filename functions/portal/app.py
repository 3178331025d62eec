"""Webhook portal: HTML pages where a customer manages the webhook endpoints of one organization, sees deliveries and
attempts, and retries. A FastAPI app (switchboard.webhooks.portal) run by Mangum behind API Gateway (`/portal`,
`/portal/{proxy+}`, no authorizer: the single-use link from portal-access is the credential, exchanged for a
session cookie)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from mangum import Mangum

from switchboard import tracing
from switchboard.webhooks.portal import create_app

asgi = Mangum(create_app(), lifespan="off")
_thread = threading.local()


@tracing.traced
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Mangum runs the app on the thread's current event loop (asyncio.get_event_loop()), which only the main thread
    # gets implicitly: give any other invoking thread (the local stack's workers) one loop of its own, once.
    if getattr(_thread, "loop", None) is None:
        _thread.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_thread.loop)
    return dict(asgi(event, context))
