"""The pages' HTML: one layout with its security headers (a per-response nonce for the inline style and script),
escaping, error lists and the CSRF field every POST form carries."""

from __future__ import annotations

import secrets
from html import escape
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from switchboard.errors import DomainError
from switchboard.webhooks.portal.common import Session, url

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
