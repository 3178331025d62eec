"""Opening and closing a portal session: the landing page (whose script posts the link's token once), the token
exchange for the session cookie, and sign-out."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from switchboard.errors import Unauthenticated
from switchboard.webhooks.portal.common import (
    COOKIE,
    ROOT,
    Form,
    PortalError,
    PostSession,
    check_origin,
    get_store,
    is_local,
    one,
    public_prefix,
    service,
    url,
)
from switchboard.webhooks.portal.html import e, render

# The landing page's script: move the fragment's token into the form and submit it once; the fragment is removed
# from the address bar (and history) first.
OPEN_SCRIPT = """
(function(){var m=/(?:^#|&)token=([^&]+)/.exec(location.hash);if(!m)return;
history.replaceState(null,"",location.pathname+location.search);
var f=document.getElementById("open");f.elements.token.value=decodeURIComponent(m[1]);f.submit();})();
"""


router = APIRouter()


@router.get("/portal")
def portal_root(request: Request) -> Response:
    return RedirectResponse(url(request), status_code=303)


@router.get(ROOT)
def landing(request: Request) -> Response:
    value = request.cookies.get(COOKIE)
    if value and service.portal_session(get_store(), value) is not None:
        return RedirectResponse(url(request, "/endpoints"), status_code=303)
    body = (
        "<p>Opening the portal with your link…</p>"
        f'<form id="open" method="post" action="{e(url(request, "/session"))}">'
        '<label>Portal link token <input type="text" name="token" autocomplete="off" required'
        ' placeholder="whp_…"></label><button type="submit">Open the portal</button></form>'
    )
    return render(request, "Webhooks portal", body, script=OPEN_SCRIPT)


@router.post(f"{ROOT}/session")
def open_session(request: Request, form: Form) -> Response:
    check_origin(request)
    token = one(form, "token")
    if not token.startswith(service.PORTAL_TOKEN_PREFIX) or len(token) > 100:
        raise PortalError(401, "The portal link is invalid, used or expired. Ask for a new one.")
    try:
        value, _ = service.open_portal_session(get_store(), token, ip=request.client.host if request.client else None)
    except Unauthenticated:
        raise PortalError(401, "The portal link is invalid, used or expired. Ask for a new one.") from None
    response = RedirectResponse(url(request, "/endpoints"), status_code=303)
    response.set_cookie(
        COOKIE,
        value,
        max_age=int(service.PORTAL_SESSION_TTL.total_seconds()),
        path=public_prefix(request) + ROOT,
        secure=not is_local(),
        httponly=True,
        samesite="strict",
    )
    return response


@router.post(f"{ROOT}/logout")
def logout(request: Request, session: PostSession) -> Response:
    service.close_portal_session(get_store(), session.value)
    response = render(request, "Signed out", "<p>You are signed out of the portal.</p>")
    response.delete_cookie(COOKIE, path=public_prefix(request) + ROOT)
    return response
