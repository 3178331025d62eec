"""The deliveries pages: the filtered list (newest first, a cursor to older ones), one delivery with its payload
and attempts, and a retry."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from switchboard.errors import ValidationFailed
from switchboard.webhooks.catalogue import EVENT_TYPES
from switchboard.webhooks.portal.common import (
    PAGE_SIZE,
    ROOT,
    STATUSES,
    PostSession,
    Session,
    SessionDep,
    get_store,
    service,
    url,
)
from switchboard.webhooks.portal.html import csrf_field, e, render

if TYPE_CHECKING:
    from switchboard.webhooks import models

router = APIRouter()


def delivery_row(request: Request, delivery: models.Delivery) -> str:
    link = url(request, f"/deliveries/{delivery.id}")
    return (
        f'<tr><td><a class="mono" href="{e(link)}">{e(delivery.id)}</a></td><td><code>{e(delivery.event_type)}</code>'
        f'</td><td class="mono">{e(delivery.endpoint_id)}</td><td class="status">{e(delivery.status)}</td>'
        f"<td>{e(delivery.attempt_count)}</td><td>{e(delivery.last_status_code)}</td>"
        f"<td>{e(delivery.created_at)}</td></tr>"
    )


@router.get(f"{ROOT}/deliveries")
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
        get_store(),
        session.auth,
        limit=PAGE_SIZE,
        cursor=cursor[:2048] or None,
        endpoint_id=endpoint_id[:64] or None,
        status=status or None,
        event_type=event_type or None,
        since=since[:40] or None,
    )
    endpoints = service.settings_view(get_store(), session.auth).endpoints

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


@router.get(f"{ROOT}/deliveries/{{delivery_id}}")
def show_delivery(
    request: Request, session: SessionDep, delivery_id: str, cursor: str = "", queued: str = ""
) -> Response:
    notice = '<p class="note" role="status">Queued again with the same webhook-id.</p>' if queued else ""
    return delivery_page(request, session, delivery_id, cursor=cursor, notice=notice)


def delivery_page(
    request: Request, session: Session, delivery_id: str, *, cursor: str = "", notice: str = ""
) -> HTMLResponse:
    delivery = service.get_delivery(get_store(), session.auth, delivery_id)
    attempts, nxt = service.list_attempts(
        get_store(), session.auth, delivery_id, limit=50, cursor=cursor[:2048] or None
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


@router.post(f"{ROOT}/deliveries/{{delivery_id}}/retry")
def retry_delivery(request: Request, session: PostSession, delivery_id: str) -> Response:
    service.retry_delivery(get_store(), session.auth, delivery_id)
    return RedirectResponse(url(request, f"/deliveries/{delivery_id}", queued="1"), status_code=303)


def _pretty(payload: dict[str, Any]) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True)
