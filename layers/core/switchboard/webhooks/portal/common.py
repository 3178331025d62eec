"""What every portal page shares: paths, the error page exception, the request's form and URL helpers, and the
session (cookie → organization) with its CSRF check for POSTs."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import Depends, Request

from switchboard.lazy import lazy_module

if TYPE_CHECKING:
    from switchboard import store as store_module
    from switchboard.access import AuthContext
    from switchboard.store import Store
    from switchboard.webhooks import service
else:
    # The webhook rules, their models and the store (boto3's DynamoDB types) load on the first request that needs
    # them, not at cold start: the portal's init is FastAPI's and Mangum's own (bench/cold_start.py, its floor).
    service = lazy_module("switchboard.webhooks.service")
    store_module = lazy_module("switchboard.store")

COOKIE = "sb_portal"
ROOT = "/portal/webhooks"
MAX_FORM_BYTES = 64 * 1024
PAGE_SIZE = 20
STATUSES = ("pending", "retrying", "succeeded", "exhausted", "canceled")


class PortalError(Exception):
    """An error page with a status (and, for 401, a way back to a new link)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# Request helpers --------------------------------------------------------------------------------------------------
def _header(request: Request, name: str) -> str | None:
    return request.headers.get(name)


def public_prefix(request: Request) -> str:
    """The stage prefix of the public URL (`/Prod` on an execute-api host; none on a custom domain or locally)."""
    event = request.scope.get("aws.event") or {}
    stage = (event.get("requestContext") or {}).get("stage")
    host = _header(request, "host") or ""
    return f"/{stage}" if stage and "execute-api" in host else ""


def url(request: Request, path: str = "", **query: Any) -> str:
    params = {k: v for k, v in query.items() if v not in (None, "")}
    return public_prefix(request) + ROOT + path + (("?" + urlencode(params)) if params else "")


async def form_data(request: Request) -> dict[str, list[str]]:
    """An `application/x-www-form-urlencoded` body (the only kind the pages post)."""
    if request.method != "POST":
        return {}
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise PortalError(413, "The form is too large.")
    kind = (_header(request, "content-type") or "").split(";", 1)[0].strip().lower()
    if body and kind != "application/x-www-form-urlencoded":
        raise PortalError(415, "Forms must be sent as application/x-www-form-urlencoded.")
    return parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)


Form = Annotated[dict[str, list[str]], Depends(form_data)]


def one(form: dict[str, list[str]], name: str) -> str:
    values = form.get(name) or [""]
    return values[-1].strip()


def check_origin(request: Request) -> None:
    """A browser's POST from another site (or an opaque origin) is refused, whatever it carries."""
    origin = _header(request, "origin")
    if origin is None:
        return
    if urlsplit(origin).netloc.lower() != (_header(request, "host") or "").lower():
        raise PortalError(403, "The form was not sent from this portal.")


def get_store() -> Store:
    return store_module.get_store()


class Session:
    def __init__(self, value: str, item: dict[str, Any]) -> None:
        self.value = value
        self.item = item
        self.csrf = str(item["csrf_token"])
        self.auth: AuthContext = service.portal_auth(item)

    @property
    def org(self) -> str:
        return self.auth.org_id


def current_session(request: Request) -> Session:
    value = request.cookies.get(COOKIE)
    item = service.portal_session(get_store(), value) if value else None
    if value is None or item is None:
        raise PortalError(401, "Your portal session has ended. Ask an administrator for a new portal link.")
    return Session(value, item)


def checked_session(request: Request, form: Form) -> Session:
    """For POSTs: a live session, the form's CSRF token equal to the session's, and a same-site origin."""
    check_origin(request)
    session = current_session(request)
    if not hmac.compare_digest(one(form, "csrf_token").encode(), session.csrf.encode()):
        raise PortalError(403, "The form has expired or did not come from this portal. Reload the page and retry.")
    return session


SessionDep = Annotated[Session, Depends(current_session)]
PostSession = Annotated[Session, Depends(checked_session)]


def is_local() -> bool:
    from switchboard.config import get_settings  # lazy: the settings load on the first session, off the cold start

    return get_settings().is_local
