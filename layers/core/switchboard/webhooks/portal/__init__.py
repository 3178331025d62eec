"""The webhook portal: server-rendered HTML pages (FastAPI, run in Lambda by Mangum) where a customer manages the
webhook endpoints of one organization, sees deliveries and their attempts, and retries.

Access: `POST …/portal-access` gives a single-use link `<base>/portal/webhooks#token=whp_…`. The token sits in the
fragment (never sent in a request line, so never in access logs); the landing page's script posts it once to
`/portal/webhooks/session`, which consumes it (conditional delete) and sets the session cookie: HttpOnly, Secure
(outside the local stack), SameSite=Strict, scoped to the portal's path, 30 minutes, naming one organization.
Without JavaScript the token can be pasted into the same form.

Every POST form carries the session's CSRF token (compared in constant time); a POST whose `Origin` is another site
is refused too. Pages send a strict Content-Security-Policy (inline style and script allowed only by nonce, forms
only to this origin, no framing) and `Cache-Control: no-store`. Every rule (URL safety, event types, retries,
tenancy) is the management API's: the pages call `switchboard.webhooks.service` with the session's organization.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from switchboard.errors import DomainError
from switchboard.webhooks.portal import deliveries, endpoints, session
from switchboard.webhooks.portal.common import COOKIE, ROOT, PortalError, public_prefix
from switchboard.webhooks.portal.html import errors_html, field_errors, render

__all__ = ["create_app"]


def create_app() -> FastAPI:
    """The portal: its pages (`session`, `endpoints`, `deliveries` routers) and its error pages."""
    app = FastAPI(title="Switchboard webhook portal", docs_url=None, redoc_url=None, openapi_url=None)
    for module in (session, endpoints, deliveries):
        app.include_router(module.router)
    app.add_exception_handler(PortalError, _portal_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(DomainError, _domain_error)  # type: ignore[arg-type]
    app.add_exception_handler(404, _not_found)
    app.add_exception_handler(405, _not_allowed)
    return app


async def _portal_error(request: Request, err: PortalError) -> Response:
    body = f"{errors_html([err.message])}"
    if err.status == 401:
        response = render(request, "Signed out", body, status=401)
        response.delete_cookie(COOKIE, path=public_prefix(request) + ROOT)
        return response
    return render(request, "Error", body, status=err.status)


async def _invalid(request: Request, err: RequestValidationError) -> Response:
    return render(request, "Error", errors_html(["The request is not valid."]), status=400)


async def _domain_error(request: Request, err: DomainError) -> Response:
    response = render(request, "Error", errors_html(field_errors(err)), status=err.status)
    response.headers.update(err.headers or {})  # Retry-After of a 429
    return response


async def _not_found(request: Request, err: Exception) -> Response:
    return render(request, "Not found", errors_html(["No such page."]), status=404)


async def _not_allowed(request: Request, err: Exception) -> Response:
    return render(request, "Not allowed", errors_html(["This page does not take that method."]), status=405)
