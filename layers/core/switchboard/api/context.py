"""Per-request values read from the current API Gateway event."""

from __future__ import annotations

from typing import Any

from switchboard.access import AuthContext
from switchboard.errors import Unauthenticated


def request_id(app: Any) -> str:
    try:
        return str(app.current_event.request_context.request_id or "")
    except Exception:  # noqa: BLE001 - no event yet (e.g. an error raised before routing)
        return ""


def current_auth_optional(app: Any) -> AuthContext | None:
    cached = app.context.get("_auth")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    raw = (app.current_event.raw_event.get("requestContext") or {}).get("authorizer")
    auth = AuthContext.from_authorizer(raw)
    if auth is not None:
        app.append_context(_auth=auth)
    return auth


def current_auth(app: Any) -> AuthContext:
    auth = current_auth_optional(app)
    if auth is None:
        raise Unauthenticated()
    return auth


def header(app: Any, name: str) -> str | None:
    """A request header, by case-insensitive name (the event's single-value `headers`, as Powertools' `headers`).
    Powertools builds that map anew at each read of `headers`; it is kept in the request's context (cleared after
    every request) for the next read."""
    headers = app.context.get("switchboard_headers")
    if headers is None:
        headers = app.current_event.headers
        app.append_context(switchboard_headers=headers)
    return headers.get(name)  # type: ignore[no-any-return]


def base_url(app: Any) -> str:
    """The public base URL of this API as the client called it (scheme, host and stage prefix)."""
    host = header(app, "Host") or "localhost"
    proto = header(app, "X-Forwarded-Proto") or ("http" if host.startswith(("127.", "localhost")) else "https")
    stage = ""
    ctx = app.current_event.raw_event.get("requestContext") or {}
    if ctx.get("stage") and "execute-api" in host:
        stage = f"/{ctx['stage']}"
    return f"{proto}://{host}{stage}"


def source_ip(app: Any) -> str | None:
    ctx = app.current_event.raw_event.get("requestContext") or {}
    return (ctx.get("identity") or {}).get("sourceIp")


# API Gateway gives up on an integration after 29 s, whatever the function's own timeout.
GATEWAY_TIMEOUT_SECONDS = 29.0


def seconds_left(app: Any) -> float | None:
    """How long this request may still run: the invocation's remaining time, never more than API Gateway's 29 s;
    None outside Lambda (no context)."""
    context = getattr(app, "lambda_context", None)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    return min(remaining() / 1000, GATEWAY_TIMEOUT_SECONDS)
