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

import hmac
import secrets
from html import escape
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from switchboard.errors import DomainError, Unauthenticated, ValidationFailed
from switchboard.lazy import lazy_module
from switchboard.webhooks.catalogue import EVENT_TYPES

if TYPE_CHECKING:
    from switchboard.access import AuthContext
    from switchboard.store import Store
    from switchboard.webhooks import models, service
else:
    # The webhook rules, their models and the store (boto3's DynamoDB types) load on the first request that needs
    # them, not at cold start: the portal's init is FastAPI's and Mangum's own (bench/cold_start.py, its floor).
    models = lazy_module("switchboard.webhooks.models")
    service = lazy_module("switchboard.webhooks.service")

COOKIE = "sb_portal"
ROOT = "/portal/webhooks"
MAX_FORM_BYTES = 64 * 1024
PAGE_SIZE = 20
STATUSES = ("pending", "retrying", "succeeded", "exhausted", "canceled")

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.7rem 1.5rem;display:flex;gap:1.5rem;align-items:center}
header a{color:#fff}header form{margin-left:auto}main{padding:1.5rem;max-width:72rem}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border:1px solid #d9dde3;padding:.35rem .5rem;
text-align:left;vertical-align:top}code,.mono{font-family:ui-monospace,monospace;font-size:13px}
.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.6rem .8rem}.note{background:#e8f4fd;
border:1px solid #9cc7e8;padding:.6rem .8rem}.secret{font-size:16px;background:#fff8d6;padding:.3rem .5rem}
fieldset{border:1px solid #d9dde3;background:#fff;margin:1rem 0}label{display:block;margin:.3rem 0}
.types label{display:inline-block;min-width:16rem}form.inline{display:inline}input[type=text],input[type=url]
{width:32rem;max-width:100%}
"""

# The landing page's script: move the fragment's token into the form and submit it once; the fragment is removed
# from the address bar (and history) first.
OPEN_SCRIPT = """
(function(){var m=/(?:^#|&)token=([^&]+)/.exec(location.hash);if(!m)return;
history.replaceState(null,"",location.pathname+location.search);
var f=document.getElementById("open");f.elements.token.value=decodeURIComponent(m[1]);f.submit();})();
"""


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
    from switchboard.store import get_store as store_of_table

    return store_of_table()


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


def _is_local() -> bool:
    from switchboard.config import get_settings

    return get_settings().is_local


# HTML -------------------------------------------------------------------------------------------------------------
def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def csrf_field(session: Session) -> str:
    return f'<input type="hidden" name="csrf_token" value="{e(session.csrf)}">'


def render(
    request: Request,
    title: str,
    body: str,
    *,
    session: Session | None = None,
    status: int = 200,
    script: str | None = None,
) -> HTMLResponse:
    nonce = secrets.token_urlsafe(16)
    nav = ""
    if session is not None:
        nav = (
            f'<a href="{e(url(request, "/endpoints"))}">Endpoints</a>'
            f'<a href="{e(url(request, "/deliveries"))}">Deliveries</a>'
            f'<form method="post" action="{e(url(request, "/logout"))}">{csrf_field(session)}'
            '<button type="submit">Sign out</button></form>'
        )
    script_tag = f'<script nonce="{nonce}">{script}</script>' if script else ""
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{e(title)} · Webhooks</title><style nonce="{nonce}">{STYLE}</style></head>'
        f"<body><header><strong>Webhooks portal</strong>{nav}</header><main><h1>{e(title)}</h1>{body}</main>"
        f"{script_tag}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=security_headers(nonce))


def security_headers(nonce: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; form-action 'self'; "
            "frame-ancestors 'none'; base-uri 'none'"
        ),
        "Cache-Control": "no-store",
        "Referrer-Policy": "same-origin",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
    }


def errors_html(messages: list[str]) -> str:
    if not messages:
        return ""
    items = "".join(f"<li>{e(m)}</li>" for m in messages)
    return f'<div class="error" role="alert"><ul>{items}</ul></div>'


def field_errors(err: Exception) -> list[str]:
    if isinstance(err, ValidationError):
        out = []
        for detail in err.errors():
            where = ".".join(str(p) for p in detail.get("loc", ()) if not isinstance(p, int))
            message = str(detail.get("msg", "is not valid")).removeprefix("Value error, ")
            out.append(f"{where}: {message}" if where else message)
        return out
    if isinstance(err, DomainError):
        if err.details:
            return [f"{str(d.get('field', '')).removeprefix('body.')}: {d.get('message', '')}" for d in err.details]
        return [err.message]
    return [str(err)]


def status_text(endpoint: models.Endpoint) -> str:
    if endpoint.enabled:
        return "enabled"
    return f"disabled ({endpoint.disabled_reason})" if endpoint.disabled_reason else "disabled"


def endpoint_form(
    request: Request, session: Session, action: str, values: dict[str, Any], *, submit: str, show_enabled: bool
) -> str:
    chosen = set(values.get("filter_types") or [])
    boxes = "".join(
        f'<label><input type="checkbox" name="filter_types" value="{e(name)}"'
        f"{' checked' if name in chosen else ''}> <code>{e(name)}</code></label>"
        for name in EVENT_TYPES
    )
    enabled = ""
    if show_enabled:
        checked = " checked" if values.get("enabled", True) else ""
        enabled = f'<label><input type="checkbox" name="enabled" value="true"{checked}> Enabled</label>'
    return (
        f'<form method="post" action="{e(action)}">{csrf_field(session)}'
        f'<label>URL <input type="url" name="url" required maxlength="2048" value="{e(values.get("url"))}"></label>'
        f'<label>Description <input type="text" name="description" maxlength="500"'
        f' value="{e(values.get("description"))}"></label>'
        f'<fieldset class="types"><legend>Event types (none checked: every event)</legend>{boxes}</fieldset>'
        f'{enabled}<button type="submit">{e(submit)}</button></form>'
    )


def form_values(form: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "url": one(form, "url"),
        "description": one(form, "description") or None,
        "filter_types": [t for t in form.get("filter_types", []) if t],
        "enabled": one(form, "enabled") in ("true", "1", "on"),
    }


def secret_html(secret: str) -> str:
    return (
        '<div class="note" role="status"><p>The signing secret of this endpoint. <strong>Copy it now: it is not '
        f'shown again.</strong></p><p><code class="secret" id="secret">{e(secret)}</code></p></div>'
    )


def delivery_row(request: Request, delivery: models.Delivery) -> str:
    link = url(request, f"/deliveries/{delivery.id}")
    return (
        f'<tr><td><a class="mono" href="{e(link)}">{e(delivery.id)}</a></td><td><code>{e(delivery.event_type)}</code>'
        f'</td><td class="mono">{e(delivery.endpoint_id)}</td><td class="status">{e(delivery.status)}</td>'
        f"<td>{e(delivery.attempt_count)}</td><td>{e(delivery.last_status_code)}</td>"
        f"<td>{e(delivery.created_at)}</td></tr>"
    )


# The app ----------------------------------------------------------------------------------------------------------
def create_app() -> FastAPI:
    app = FastAPI(title="Switchboard webhook portal", docs_url=None, redoc_url=None, openapi_url=None)
    store = get_store

    @app.exception_handler(PortalError)
    async def _portal_error(request: Request, err: PortalError) -> Response:
        body = f"{errors_html([err.message])}"
        if err.status == 401:
            response = render(request, "Signed out", body, status=401)
            response.delete_cookie(COOKIE, path=public_prefix(request) + ROOT)
            return response
        return render(request, "Error", body, status=err.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, err: RequestValidationError) -> Response:
        return render(request, "Error", errors_html(["The request is not valid."]), status=400)

    @app.exception_handler(DomainError)
    async def _domain_error(request: Request, err: DomainError) -> Response:
        response = render(request, "Error", errors_html(field_errors(err)), status=err.status)
        response.headers.update(err.headers or {})  # Retry-After of a 429
        return response

    @app.get("/portal")
    def portal_root(request: Request) -> Response:
        return RedirectResponse(url(request), status_code=303)

    @app.get(ROOT)
    def landing(request: Request) -> Response:
        value = request.cookies.get(COOKIE)
        if value and service.portal_session(store(), value) is not None:
            return RedirectResponse(url(request, "/endpoints"), status_code=303)
        body = (
            "<p>Opening the portal with your link…</p>"
            f'<form id="open" method="post" action="{e(url(request, "/session"))}">'
            '<label>Portal link token <input type="text" name="token" autocomplete="off" required'
            ' placeholder="whp_…"></label><button type="submit">Open the portal</button></form>'
        )
        return render(request, "Webhooks portal", body, script=OPEN_SCRIPT)

    @app.post(f"{ROOT}/session")
    def open_session(request: Request, form: Form) -> Response:
        check_origin(request)
        token = one(form, "token")
        if not token.startswith(service.PORTAL_TOKEN_PREFIX) or len(token) > 100:
            raise PortalError(401, "The portal link is invalid, used or expired. Ask for a new one.")
        try:
            value, _ = service.open_portal_session(store(), token, ip=request.client.host if request.client else None)
        except Unauthenticated:
            raise PortalError(401, "The portal link is invalid, used or expired. Ask for a new one.") from None
        response = RedirectResponse(url(request, "/endpoints"), status_code=303)
        response.set_cookie(
            COOKIE,
            value,
            max_age=int(service.PORTAL_SESSION_TTL.total_seconds()),
            path=public_prefix(request) + ROOT,
            secure=not _is_local(),
            httponly=True,
            samesite="strict",
        )
        return response

    @app.post(f"{ROOT}/logout")
    def logout(request: Request, session: PostSession) -> Response:
        service.close_portal_session(store(), session.value)
        response = render(request, "Signed out", "<p>You are signed out of the portal.</p>")
        response.delete_cookie(COOKIE, path=public_prefix(request) + ROOT)
        return response

    # Endpoints ----------------------------------------------------------------------------------------------------
    def endpoints_page(
        request: Request,
        session: Session,
        *,
        values: dict[str, Any] | None = None,
        errors: list[str] | None = None,
        notice: str = "",
        status: int = 200,
    ) -> HTMLResponse:
        view = service.settings_view(store(), session.auth)
        rows = "".join(
            f'<tr><td><a href="{e(url(request, f"/endpoints/{ep.id}"))}">{e(ep.url)}</a></td>'
            f"<td>{e(ep.description)}</td><td>{e(', '.join(ep.filter_types) or 'every event')}</td>"
            f'<td class="status">{e(status_text(ep))}</td>'
            f'<td><a href="{e(url(request, "/deliveries", endpoint_id=ep.id))}">deliveries</a></td></tr>'
            for ep in view.endpoints
        )
        table = (
            "<table><thead><tr><th>URL</th><th>Description</th><th>Events</th><th>Status</th><th></th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            if rows
            else "<p>No endpoints yet.</p>"
        )
        body = f"{notice}{table}<h2>Add an endpoint</h2>{errors_html(errors or [])}" + endpoint_form(
            request,
            session,
            url(request, "/endpoints"),
            values or {},
            submit="Create endpoint",
            show_enabled=False,
        )
        return render(request, "Endpoints", body, session=session, status=status)

    @app.get(f"{ROOT}/endpoints")
    def list_endpoints(request: Request, session: SessionDep) -> Response:
        return endpoints_page(request, session)

    @app.post(f"{ROOT}/endpoints")
    def create_endpoint(request: Request, session: PostSession, form: Form) -> Response:
        values = form_values(form)
        try:
            body = models.EndpointCreate.model_validate({**values, "enabled": True})
            created = service.create_endpoint(store(), session.auth, body)
        except (ValidationError, ValidationFailed) as err:
            return endpoints_page(request, session, values=values, errors=field_errors(err), status=400)
        notice = f"<p>Created the endpoint <code>{e(created.id)}</code> for {e(created.url)}.</p>"
        notice += secret_html(created.secret)
        return endpoints_page(request, session, notice=notice, status=201)

    def endpoint_page(
        request: Request,
        session: Session,
        endpoint_id: str,
        *,
        values: dict[str, Any] | None = None,
        errors: list[str] | None = None,
        notice: str = "",
        status: int = 200,
    ) -> HTMLResponse:
        endpoint = service.get_endpoint(store(), session.auth, endpoint_id)
        shown = values or endpoint.model_dump()
        base = url(request, f"/endpoints/{endpoint.id}")
        toggle = "disable" if endpoint.enabled else "enable"
        actions = "".join(
            f'<form class="inline" method="post" action="{e(base)}/{action}">{csrf_field(session)}'
            f'<button type="submit" name="action" value="{action}">{label}</button></form> '
            for action, label in (
                (toggle, toggle.capitalize()),
                ("rotate-secret", "Rotate secret"),
                ("delete", "Delete"),
            )
        )
        facts = (
            f'<p>Id <code>{e(endpoint.id)}</code> · status <span class="status">{e(status_text(endpoint))}</span>'
            f" · consecutive failures {e(endpoint.consecutive_failures)} · last success"
            f" {e(endpoint.last_success_at or 'never')} ·"
            f' <a href="{e(url(request, "/deliveries", endpoint_id=endpoint.id))}">deliveries</a></p>'
        )
        body = f"{notice}{facts}<p>{actions}</p><h2>Edit</h2>{errors_html(errors or [])}" + endpoint_form(
            request, session, base, shown, submit="Save", show_enabled=True
        )
        return render(request, f"Endpoint {endpoint.url}", body, session=session, status=status)

    @app.get(f"{ROOT}/endpoints/{{endpoint_id}}")
    def show_endpoint(request: Request, session: SessionDep, endpoint_id: str) -> Response:
        return endpoint_page(request, session, endpoint_id)

    @app.post(f"{ROOT}/endpoints/{{endpoint_id}}")
    def edit_endpoint(request: Request, session: PostSession, form: Form, endpoint_id: str) -> Response:
        values = form_values(form)
        try:
            body = models.EndpointUpdate.model_validate(
                {
                    "url": values["url"],
                    "description": values["description"],
                    "filter_types": values["filter_types"],
                    "enabled": values["enabled"],
                }
            )
            service.update_endpoint(store(), session.auth, endpoint_id, body)
        except (ValidationError, ValidationFailed) as err:
            return endpoint_page(request, session, endpoint_id, values=values, errors=field_errors(err), status=400)
        return RedirectResponse(url(request, f"/endpoints/{endpoint_id}"), status_code=303)

    @app.post(f"{ROOT}/endpoints/{{endpoint_id}}/{{action}}")
    def endpoint_action(request: Request, session: PostSession, endpoint_id: str, action: str) -> Response:
        if action in ("enable", "disable"):
            update = models.EndpointUpdate(enabled=action == "enable")
            service.update_endpoint(store(), session.auth, endpoint_id, update)
            return RedirectResponse(url(request, f"/endpoints/{endpoint_id}"), status_code=303)
        if action == "rotate-secret":
            rotated = service.rotate_secret(store(), session.auth, endpoint_id)
            notice = secret_html(rotated.secret) + (
                "<p>The previous secret keeps signing (a second signature) for 24 hours.</p>"
            )
            return endpoint_page(request, session, endpoint_id, notice=notice)
        if action == "delete":
            service.delete_endpoint(store(), session.auth, endpoint_id)
            return RedirectResponse(url(request, "/endpoints"), status_code=303)
        raise PortalError(404, "No such page.")

    # Deliveries ---------------------------------------------------------------------------------------------------
    @app.get(f"{ROOT}/deliveries")
    def list_deliveries(
        request: Request,
        session: SessionDep,
        endpoint_id: str = "",
        status: str = "",
        event_type: str = "",
        since: str = "",
        cursor: str = "",
    ) -> Response:
        if status and status not in STATUSES:
            raise ValidationFailed.field("query.status", f"must be one of {', '.join(STATUSES)}")
        if event_type and event_type not in EVENT_TYPES:
            raise ValidationFailed.field("query.event_type", "is not a published event type")
        items, nxt = service.list_deliveries(
            store(),
            session.auth,
            limit=PAGE_SIZE,
            cursor=cursor[:2048] or None,
            endpoint_id=endpoint_id[:64] or None,
            status=status or None,
            event_type=event_type or None,
            since=since[:40] or None,
        )
        endpoints = service.settings_view(store(), session.auth).endpoints

        def options(current: str, choices: list[tuple[str, str]]) -> str:
            return "".join(
                f'<option value="{e(v)}"{" selected" if v == current else ""}>{e(label)}</option>'
                for v, label in [("", "any"), *choices]
            )

        filters = (
            f'<form method="get" action="{e(url(request, "/deliveries"))}"><fieldset><legend>Filters</legend>'
            f'<label>Endpoint <select name="endpoint_id">'
            f"{options(endpoint_id, [(ep.id, ep.url) for ep in endpoints])}</select></label>"
            f'<label>Status <select name="status">{options(status, [(s, s) for s in STATUSES])}</select></label>'
            f'<label>Event type <select name="event_type">'
            f"{options(event_type, [(t, t) for t in EVENT_TYPES])}</select></label>"
            f'<label>Since <input type="text" name="since" value="{e(since)}" placeholder="2026-11-21T10:00:00Z">'
            '</label><button type="submit">Filter</button></fieldset></form>'
        )
        rows = "".join(delivery_row(request, d) for d in items)
        table = (
            "<table><thead><tr><th>Delivery (webhook-id)</th><th>Event</th><th>Endpoint</th><th>Status</th>"
            f"<th>Attempts</th><th>Last code</th><th>Created</th></tr></thead><tbody>{rows}</tbody></table>"
            if rows
            else "<p>No deliveries match.</p>"
        )
        more = ""
        if nxt:
            link = url(
                request,
                "/deliveries",
                endpoint_id=endpoint_id,
                status=status,
                event_type=event_type,
                since=since,
                cursor=nxt,
            )
            more = f'<p><a rel="next" href="{e(link)}">Older deliveries</a></p>'
        return render(request, "Deliveries", filters + table + more, session=session)

    @app.get(f"{ROOT}/deliveries/{{delivery_id}}")
    def show_delivery(
        request: Request, session: SessionDep, delivery_id: str, cursor: str = "", queued: str = ""
    ) -> Response:
        notice = '<p class="note" role="status">Queued again with the same webhook-id.</p>' if queued else ""
        return delivery_page(request, session, delivery_id, cursor=cursor, notice=notice)

    def delivery_page(
        request: Request, session: Session, delivery_id: str, *, cursor: str = "", notice: str = ""
    ) -> HTMLResponse:
        delivery = service.get_delivery(store(), session.auth, delivery_id)
        attempts, nxt = service.list_attempts(
            store(), session.auth, delivery_id, limit=50, cursor=cursor[:2048] or None
        )
        rows = "".join(
            f'<tr><td>{e(a.attempt)}</td><td class="status">{e(a.status)}</td><td>{e(a.status_code)}</td>'
            f"<td>{e(a.duration_ms)} ms</td><td>{e(a.error)}</td><td><code>{e(a.response)}</code></td>"
            f"<td>{e(a.trigger)}</td><td>{e(a.created_at)}</td></tr>"
            for a in attempts
        )
        table = (
            "<table><thead><tr><th>#</th><th>Result</th><th>Code</th><th>Duration</th><th>Error</th>"
            f"<th>Response</th><th>Trigger</th><th>At</th></tr></thead><tbody>{rows}</tbody></table>"
            if rows
            else "<p>No attempts yet.</p>"
        )
        more = ""
        if nxt:
            more = f'<p><a rel="next" href="{e(url(request, f"/deliveries/{delivery_id}", cursor=nxt))}">Older</a></p>'
        retry = (
            f'<form method="post" action="{e(url(request, f"/deliveries/{delivery_id}/retry"))}">'
            f'{csrf_field(session)}<button type="submit">Retry this delivery</button></form>'
        )
        endpoint_link = url(request, f"/endpoints/{delivery.endpoint_id}")
        facts = (
            f'<p>Event <code>{e(delivery.event_type)}</code> · status <span class="status" id="delivery-status">'
            f'{e(delivery.status)}</span> · endpoint <a href="{e(endpoint_link)}">'
            f"<code>{e(delivery.endpoint_id)}</code></a> · next attempt {e(delivery.next_attempt_at or '—')}</p>"
            f'<details><summary>Payload</summary><pre class="mono">{e(_pretty(delivery.payload))}</pre></details>'
        )
        body = f"{notice}{facts}{retry}<h2>Attempts</h2>{table}{more}"
        return render(request, f"Delivery {delivery.id}", body, session=session)

    @app.post(f"{ROOT}/deliveries/{{delivery_id}}/retry")
    def retry_delivery(request: Request, session: PostSession, delivery_id: str) -> Response:
        service.retry_delivery(store(), session.auth, delivery_id)
        return RedirectResponse(url(request, f"/deliveries/{delivery_id}", queued="1"), status_code=303)

    @app.exception_handler(404)
    async def _not_found(request: Request, err: Exception) -> Response:
        return render(request, "Not found", errors_html(["No such page."]), status=404)

    @app.exception_handler(405)
    async def _not_allowed(request: Request, err: Exception) -> Response:
        return render(request, "Not allowed", errors_html(["This page does not take that method."]), status=405)

    return app


def _pretty(payload: dict[str, Any]) -> str:
    import json

    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True)
