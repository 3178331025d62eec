"""The endpoints pages: the list with its create form, one endpoint with its edit form, and its actions (enable,
disable, rotate the secret, delete)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from switchboard.errors import ValidationFailed
from switchboard.lazy import lazy_module
from switchboard.webhooks.catalogue import EVENT_TYPES
from switchboard.webhooks.portal.common import (
    ROOT,
    Form,
    PortalError,
    PostSession,
    Session,
    SessionDep,
    get_store,
    one,
    service,
    url,
)
from switchboard.webhooks.portal.html import csrf_field, e, errors_html, field_errors, render

if TYPE_CHECKING:
    from switchboard.webhooks import models
else:
    models = lazy_module("switchboard.webhooks.models")  # the request models load on the first page that needs them

router = APIRouter()


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


def endpoints_page(
    request: Request,
    session: Session,
    *,
    values: dict[str, Any] | None = None,
    errors: list[str] | None = None,
    notice: str = "",
    status: int = 200,
) -> HTMLResponse:
    view = service.settings_view(get_store(), session.auth)
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


@router.get(f"{ROOT}/endpoints")
def list_endpoints(request: Request, session: SessionDep) -> Response:
    return endpoints_page(request, session)


@router.post(f"{ROOT}/endpoints")
def create_endpoint(request: Request, session: PostSession, form: Form) -> Response:
    values = form_values(form)
    try:
        body = models.EndpointCreate.model_validate({**values, "enabled": True})
        created = service.create_endpoint(get_store(), session.auth, body)
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
    endpoint = service.get_endpoint(get_store(), session.auth, endpoint_id)
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


@router.get(f"{ROOT}/endpoints/{{endpoint_id}}")
def show_endpoint(request: Request, session: SessionDep, endpoint_id: str) -> Response:
    return endpoint_page(request, session, endpoint_id)


@router.post(f"{ROOT}/endpoints/{{endpoint_id}}")
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
        service.update_endpoint(get_store(), session.auth, endpoint_id, body)
    except (ValidationError, ValidationFailed) as err:
        return endpoint_page(request, session, endpoint_id, values=values, errors=field_errors(err), status=400)
    return RedirectResponse(url(request, f"/endpoints/{endpoint_id}"), status_code=303)


@router.post(f"{ROOT}/endpoints/{{endpoint_id}}/{{action}}")
def endpoint_action(request: Request, session: PostSession, endpoint_id: str, action: str) -> Response:
    if action in ("enable", "disable"):
        update = models.EndpointUpdate(enabled=action == "enable")
        service.update_endpoint(get_store(), session.auth, endpoint_id, update)
        return RedirectResponse(url(request, f"/endpoints/{endpoint_id}"), status_code=303)
    if action == "rotate-secret":
        rotated = service.rotate_secret(get_store(), session.auth, endpoint_id)
        notice = secret_html(rotated.secret) + (
            "<p>The previous secret keeps signing (a second signature) for 24 hours.</p>"
        )
        return endpoint_page(request, session, endpoint_id, notice=notice)
    if action == "delete":
        service.delete_endpoint(get_store(), session.auth, endpoint_id)
        return RedirectResponse(url(request, "/endpoints"), status_code=303)
    raise PortalError(404, "No such page.")
