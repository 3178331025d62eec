"""The webhook portal through the local gateway emulation: `/portal/…` is routed (no authorizer) to PortalFunction,
whose handler is the FastAPI app run by Mangum with a REST v1 proxy event — the same path as on AWS. Covers the
single-use, expiring link, the session cookie, CSRF and origin checks, tenant isolation, and the pages managing
endpoints, listing deliveries and attempts, and retrying (the same service rules as the API)."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from starlette.testclient import TestClient

from switchboard import clock, sealed
from switchboard.store import get_store, shards
from switchboard.webhooks import repository, service
from tests.integration.support import Api
from tests.integration.test_webhooks import Pipeline, create_endpoint, pipeline, receiver  # noqa: F401
from tests.webhook_receiver import Answer, Receiver

BASE = "/v1/settings/developer/webhooks"
PORTAL = "/portal/webhooks"
ORIGIN = "http://127.0.0.1:3000"


def portal_link(api: Api, headers: dict[str, str] | None = None, expires_in: int = 600) -> str:
    resp = api.post(f"{BASE}/portal-access", json={"expires_in": expires_in}, headers=headers)
    assert resp.status_code == 201, resp.text
    url = resp.json()["data"]["url"]
    assert url.startswith(f"{ORIGIN}{PORTAL}#token=whp_")
    return str(url.split("#token=", 1)[1])


def browser(api: Api) -> TestClient:
    """A fresh cookie jar on the same gateway: one visitor."""
    return TestClient(api.client.app, base_url=ORIGIN, follow_redirects=False)


def open_portal(api: Api, token: str) -> TestClient:
    visitor = browser(api)
    resp = visitor.post(f"{PORTAL}/session", data={"token": token}, headers={"Origin": ORIGIN})
    assert resp.status_code == 303, resp.text
    assert resp.headers["location"] == f"{PORTAL}/endpoints"
    return visitor


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "no CSRF field on the page"
    return unescape(match.group(1))


def page(visitor: TestClient, path: str, expect: int = 200, **params: Any) -> str:
    resp = visitor.get(path, params=params or None)
    assert resp.status_code == expect, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("text/html")
    return resp.text


def submit(visitor: TestClient, path: str, data: dict[str, Any], *, csrf_from: str = f"{PORTAL}/endpoints") -> Any:
    token = csrf_of(page(visitor, csrf_from))
    return visitor.post(path, data={**data, "csrf_token": token}, headers={"Origin": ORIGIN})


# The link and the session -----------------------------------------------------------------------------------------
def test_the_link_opens_one_session_once_with_a_strict_cookie(api: Api):
    token = portal_link(api)
    visitor = browser(api)
    landing = visitor.get(PORTAL)
    assert landing.status_code == 200 and 'id="open"' in landing.text and f'action="{PORTAL}/session"' in landing.text
    csp = landing.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp)
    assert nonce and f'<script nonce="{nonce.group(1)}">' in landing.text  # the only script, allowed by nonce
    assert "default-src 'none'" in csp and "form-action 'self'" in csp and "frame-ancestors 'none'" in csp
    assert landing.headers["cache-control"] == "no-store"
    assert page(visitor, f"{PORTAL}/endpoints", 401)  # no session yet

    resp = visitor.post(f"{PORTAL}/session", data={"token": token}, headers={"Origin": ORIGIN})
    assert resp.status_code == 303 and resp.headers["location"] == f"{PORTAL}/endpoints"
    cookie = resp.headers["set-cookie"]
    attributes = {part.strip().split("=", 1)[0].lower() for part in cookie.split(";")}
    assert cookie.startswith("sb_portal=whps_")
    assert {"httponly", "max-age", "path", "samesite"} <= attributes and "secure" not in attributes  # local: http
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/portal/webhooks" in cookie and "Max-Age=1800" in cookie
    assert "No endpoints yet" in page(visitor, f"{PORTAL}/endpoints")
    assert visitor.get(PORTAL).headers["location"] == f"{PORTAL}/endpoints"  # signed in: straight to the pages

    again = browser(api).post(f"{PORTAL}/session", data={"token": token}, headers={"Origin": ORIGIN})
    assert again.status_code == 401 and "invalid, used or expired" in again.text  # single use
    assert "set-cookie" not in again.headers or "sb_portal=whps_" not in again.headers["set-cookie"]
    stored = get_store().query_all("WHPORTAL#" + service._token_hash(token))
    assert stored == []  # consumed

    session_value = cookie.split(";", 1)[0].split("=", 1)[1]
    session = service.portal_session(get_store(), session_value)
    assert session is not None and session["organization_id"] == api.org_id
    assert get_store().get(repository.portal_session_key(service._token_hash(session_value))) is not None
    assert session_value not in str(session)  # stored only as a hash

    logout = submit(visitor, f"{PORTAL}/logout", {})
    assert logout.status_code == 200 and "signed out" in logout.text
    assert page(visitor, f"{PORTAL}/endpoints", 401)
    assert service.portal_session(get_store(), session_value) is None


def test_expired_links_and_sessions_and_forged_cookies_are_refused(api: Api):
    token = portal_link(api, expires_in=60)
    key = repository.portal_key(service._token_hash(token))
    get_store().update(key, "SET expires_at = :past", values={":past": "2020-01-01T00:00:00.000Z"})
    resp = browser(api).post(f"{PORTAL}/session", data={"token": token}, headers={"Origin": ORIGIN})
    assert resp.status_code == 401 and "sb_portal=whps_" not in resp.headers.get("set-cookie", "")
    for bogus in ("", "nope", "whp_" + "x" * 43):
        assert browser(api).post(f"{PORTAL}/session", data={"token": bogus}).status_code == 401

    visitor = open_portal(api, portal_link(api))
    value = visitor.cookies["sb_portal"]
    session_key = repository.portal_session_key(service._token_hash(value))
    get_store().update(session_key, "SET expires_at = :past", values={":past": clock.iso(clock.now())})
    assert "session has ended" in page(visitor, f"{PORTAL}/endpoints", 401)

    forged = browser(api)
    forged.cookies.set("sb_portal", "whps_" + "A" * 43, path=PORTAL)
    assert page(forged, f"{PORTAL}/endpoints", 401)
    assert page(forged, f"{PORTAL}/deliveries", 401)


def test_forms_need_the_session_csrf_token_and_a_same_site_origin(api: Api):
    visitor = open_portal(api, portal_link(api))
    form = {"url": "http://127.0.0.1:9/hook", "description": "csrf"}
    assert visitor.post(f"{PORTAL}/endpoints", data=form).status_code == 403  # no token
    assert visitor.post(f"{PORTAL}/endpoints", data={**form, "csrf_token": "guess"}).status_code == 403
    other = open_portal(api, portal_link(api))  # another session's token does not fit this session
    foreign_token = csrf_of(page(other, f"{PORTAL}/endpoints"))
    assert visitor.post(f"{PORTAL}/endpoints", data={**form, "csrf_token": foreign_token}).status_code == 403
    token = csrf_of(page(visitor, f"{PORTAL}/endpoints"))
    cross_site = visitor.post(
        f"{PORTAL}/endpoints", data={**form, "csrf_token": token}, headers={"Origin": "https://evil.example"}
    )
    assert cross_site.status_code == 403
    opaque = visitor.post(f"{PORTAL}/endpoints", data={**form, "csrf_token": token}, headers={"Origin": "null"})
    assert opaque.status_code == 403
    assert api.get(BASE).json()["data"]["endpoints"] == []  # nothing was created
    login_csrf = browser(api).post(
        f"{PORTAL}/session", data={"token": portal_link(api)}, headers={"Origin": "https://evil.example"}
    )
    assert login_csrf.status_code == 403

    created = visitor.post(f"{PORTAL}/endpoints", data={**form, "csrf_token": token}, headers={"Origin": ORIGIN})
    assert created.status_code == 201, created.text
    assert len(api.get(BASE).json()["data"]["endpoints"]) == 1


# Endpoints --------------------------------------------------------------------------------------------------------
def test_endpoints_create_edit_disable_rotate_and_delete_through_the_service_rules(api: Api):
    visitor = open_portal(api, portal_link(api))
    resp = submit(
        visitor,
        f"{PORTAL}/endpoints",
        {"url": "http://127.0.0.1:9/orders", "description": "orders", "filter_types": ["message.new", "message.sent"]},
    )
    assert resp.status_code == 201, resp.text
    secret = unescape(re.search(r'id="secret">([^<]+)<', resp.text).group(1))  # type: ignore[union-attr]
    assert secret.startswith("whsec_") and "not shown again" in resp.text
    (endpoint,) = api.get(BASE).json()["data"]["endpoints"]
    assert endpoint["url"] == "http://127.0.0.1:9/orders" and endpoint["description"] == "orders"
    assert endpoint["filter_types"] == ["message.new", "message.sent"]
    stored = get_store().get(repository.endpoint_key(api.org_id, endpoint["id"]))
    assert stored is not None and sealed.unseal(stored["secret"], api.org_id) == secret
    listing = page(visitor, f"{PORTAL}/endpoints")
    assert secret not in listing and "http://127.0.0.1:9/orders" in listing
    detail_path = f"{PORTAL}/endpoints/{endpoint['id']}"
    assert secret not in page(visitor, detail_path)  # shown once

    # The API's rules, as 400 pages that keep what was typed: unsafe URLs, unknown event types.
    for bad, message in (
        ({"url": "https://10.0.0.1/hook"}, "private address"),
        ({"url": "ftp://example.test/x"}, "https"),
        ({"url": "http://127.0.0.1:9/x", "filter_types": ["nope.event"]}, "unknown event type"),
    ):
        refused = submit(visitor, f"{PORTAL}/endpoints", bad)
        assert refused.status_code == 400 and message in unescape(refused.text), refused.text
        assert f'value="{bad["url"]}"' in refused.text
    assert len(api.get(BASE).json()["data"]["endpoints"]) == 1

    edited = submit(
        visitor,
        detail_path,
        {
            "url": "http://127.0.0.1:9/v2",
            "description": "v2",
            "filter_types": ["crm.record.created"],
            "enabled": "true",
        },
        csrf_from=detail_path,
    )
    assert edited.status_code == 303 and edited.headers["location"] == detail_path
    now = api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]
    assert (now["url"], now["description"], now["filter_types"], now["enabled"]) == (
        "http://127.0.0.1:9/v2",
        "v2",
        ["crm.record.created"],
        True,
    )
    refused = submit(visitor, detail_path, {"url": "https://169.254.169.254/"}, csrf_from=detail_path)
    assert refused.status_code == 400 and "metadata" in refused.text

    assert submit(visitor, f"{detail_path}/disable", {}, csrf_from=detail_path).status_code == 303
    assert api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]["disabled_reason"] == "manual"
    assert "disabled (manual)" in page(visitor, detail_path)
    assert submit(visitor, f"{detail_path}/enable", {}, csrf_from=detail_path).status_code == 303
    assert api.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]["enabled"] is True

    rotated = submit(visitor, f"{detail_path}/rotate-secret", {}, csrf_from=detail_path)
    new_secret = unescape(re.search(r'id="secret">([^<]+)<', rotated.text).group(1))  # type: ignore[union-attr]
    stored = get_store().get(repository.endpoint_key(api.org_id, endpoint["id"]))
    assert stored is not None and sealed.unseal(stored["secret"], api.org_id) == new_secret
    assert sealed.unseal(stored["previous_secret"], api.org_id) == secret

    assert submit(visitor, f"{detail_path}/delete", {}, csrf_from=detail_path).headers["location"] == (
        f"{PORTAL}/endpoints"
    )
    assert api.get(BASE).json()["data"]["endpoints"] == []
    assert "No such webhook endpoint" in page(visitor, detail_path, 404)
    audit = shards.query_all(get_store(), shards.all_pks(api.org_id), sk_prefix="AUDIT#")
    portal_actions = [a["action"] for a in audit if a["actor_type"] == "portal"]
    assert "webhook_endpoint.created" in portal_actions and "webhook_endpoint.deleted" in portal_actions


# Deliveries, attempts, retry --------------------------------------------------------------------------------------
def test_deliveries_with_filters_attempts_and_retry(api: Api, pipeline: Pipeline, receiver: Receiver):  # noqa: F811
    orders = create_endpoint(api, receiver.url("/orders"), filter_types=["message.new"])
    crm = create_endpoint(api, receiver.url("/crm"), filter_types=["crm.record.created"])
    receiver.answer(Answer(500, body=b"boom"))
    first = pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.emit("crm.record.created", {"record_id": "r-1"})
    pipeline.fan_out()
    pipeline.send()  # one attempt each: the first request (whichever endpoint) failed
    visitor = open_portal(api, portal_link(api))

    html = page(visitor, f"{PORTAL}/deliveries")
    assert html.count("<tr>") == 3  # header + two deliveries
    only_orders = page(visitor, f"{PORTAL}/deliveries", endpoint_id=orders["id"])
    order_msg = repository.delivery_id(first, orders["id"])
    assert order_msg in only_orders and crm["id"] not in only_orders.split("</select>")[-1]
    by_type = page(visitor, f"{PORTAL}/deliveries", event_type="crm.record.created")
    assert "crm.record.created" in by_type.split("<tbody>")[1] and order_msg not in by_type
    failed = api.get(f"{BASE}/deliveries", params={"status": "retrying"}).json()["data"]
    assert len(failed) == 1
    retrying = page(visitor, f"{PORTAL}/deliveries", status="retrying")
    assert failed[0]["id"] in retrying and retrying.split("<tbody>")[1].count("<tr>") == 1
    assert "No deliveries match" in page(visitor, f"{PORTAL}/deliveries", since="2999-01-01T00:00:00Z")
    assert "RFC 3339" in page(visitor, f"{PORTAL}/deliveries", 400, since="yesterday")
    assert page(visitor, f"{PORTAL}/deliveries", 400, status="lost")

    msg = failed[0]["id"]
    detail_path = f"{PORTAL}/deliveries/{msg}"
    detail = page(visitor, detail_path)
    assert "boom" in detail and "HTTP 500" in detail and 'id="delivery-status">retrying' in detail

    retried = submit(visitor, f"{detail_path}/retry", {}, csrf_from=detail_path)
    assert retried.status_code == 303 and retried.headers["location"] == f"{detail_path}?queued=1"
    assert "Queued again" in page(visitor, retried.headers["location"])
    pipeline.send()
    path = "/orders" if failed[0]["endpoint_id"] == orders["id"] else "/crm"
    ids = [r.headers["webhook-id"] for r in receiver.of(path)]
    assert ids == [msg, msg]  # the same webhook-id, sent again
    after = page(visitor, detail_path)
    assert 'id="delivery-status">succeeded' in after
    assert after.split("<tbody>")[1].count("<tr>") == 2 and "manual" in after


# Tenancy ----------------------------------------------------------------------------------------------------------
def test_a_session_sees_and_changes_only_its_own_organization(api: Api, pipeline: Pipeline, receiver: Receiver):  # noqa: F811
    mine = create_endpoint(api, receiver.url("/mine"))
    event = pipeline.emit("message.new", {"message_id": "m-1"})
    pipeline.pump()
    my_delivery = repository.delivery_id(event, mine["id"])

    other_org, session_headers = api.new_org("portal-other@example.com")
    other_token = portal_link(api, headers={**session_headers, "X-Organization-Id": other_org})
    stranger = open_portal(api, other_token)
    assert mine["url"] not in page(stranger, f"{PORTAL}/endpoints")
    assert "No deliveries match" in page(stranger, f"{PORTAL}/deliveries")
    assert "No deliveries match" in page(stranger, f"{PORTAL}/deliveries", endpoint_id=mine["id"])
    assert page(stranger, f"{PORTAL}/endpoints/{mine['id']}", 404)
    assert page(stranger, f"{PORTAL}/deliveries/{my_delivery}", 404)
    for path in (
        f"/endpoints/{mine['id']}/delete",
        f"/endpoints/{mine['id']}/disable",
        f"/deliveries/{my_delivery}/retry",
    ):
        assert submit(stranger, PORTAL + path, {}).status_code == 404, path
    assert api.get(f"{BASE}/endpoints/{mine['id']}").json()["data"]["enabled"] is True
    assert len(receiver.of("/mine")) == 1

    created = submit(stranger, f"{PORTAL}/endpoints", {"url": "http://127.0.0.1:9/theirs"})
    assert created.status_code == 201
    assert [e["url"] for e in api.get(BASE).json()["data"]["endpoints"]] == [mine["url"]]
    theirs = service.settings_view(get_store(), service.portal_auth({"PK": "WHPSESS#x", "organization_id": other_org}))
    assert [e.url for e in theirs.endpoints] == ["http://127.0.0.1:9/theirs"]


@pytest.mark.parametrize("path", ["/portal", "/portal/webhooks/nowhere", "/portal/other"])
def test_unknown_portal_pages_are_html_404s_or_the_landing_redirect(api: Api, path: str):
    resp = browser(api).get(path)
    if path == "/portal":
        assert resp.status_code == 303 and resp.headers["location"] == PORTAL
    else:
        assert resp.status_code == 404 and resp.headers["content-type"].startswith("text/html")
