"""The webhook portal in headless Chromium against the local stack: the magic link from portal-access is opened as a
customer would (the fragment's token posted by the landing page's script, exchanged for an HttpOnly, SameSite=Strict
cookie), an endpoint is created in the page and its secret (shown once) verifies a real delivery, the deliveries
and attempts pages show it, the retry button re-sends it with the same webhook-id, the endpoint is disabled and
deleted, and the used link no longer opens anything. Fails (does not skip) without Chromium: `make install`."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import standardwebhooks

from tests.browser import Browser, chromium, find_chromium
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.e2e
BASE = "/v1/settings/developer/webhooks"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        pytest.fail("Chromium is not installed (Debian package `chromium`; `make install` installs it)")
    with chromium(binary) as running:
        yield running


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver().running() as running:
        yield running


def js(value: str) -> str:
    return json.dumps(value)


def test_the_portal_in_a_browser(local_only, browser: Browser, receiver: Receiver):
    stack = local_only
    with stack.client() as client:
        link = client.post(f"{BASE}/portal-access", json={"expires_in": 300}).json()["data"]["url"]
    assert link.startswith(f"{stack.url}/portal/webhooks#token=whp_")
    browser.clear_cookies()

    # The link: the script posts the token and the browser lands on the endpoints page, the token gone from the URL.
    browser.goto(link)
    browser.wait("location.pathname === '/portal/webhooks/endpoints'")
    assert "#token" not in browser.location() and "Add an endpoint" in browser.text()
    (cookie,) = [c for c in browser.cookies() if c["name"] == "sb_portal"]
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["path"] == "/portal/webhooks"
    assert "sb_portal" not in browser.evaluate("document.cookie")  # out of scripts' reach
    assert time.time() + 1700 < cookie["expires"] <= time.time() + 1801  # 30 minutes, then gone

    # Create an endpoint in the page, subscribed to test events only; the secret is shown once.
    path = f"/portal-e2e-{uuid.uuid4().hex[:8]}"
    hook_url = receiver.url(path)
    browser.act(
        f"""const f = document.querySelector('form[action="/portal/webhooks/endpoints"]');
        f.elements.url.value = {js(hook_url)}; f.elements.description.value = 'from the browser';
        f.querySelector('input[value="webhook.test"]').checked = true; f.submit()""",
        then="document.getElementById('secret')",
    )
    secret = browser.evaluate("document.getElementById('secret').textContent")
    assert secret.startswith("whsec_") and "not shown again" in browser.text()
    with stack.client() as client:
        endpoints = client.get(BASE).json()["data"]["endpoints"]
        (endpoint,) = [e for e in endpoints if e["url"] == hook_url]
        assert endpoint["filter_types"] == ["webhook.test"] and endpoint["description"] == "from the browser"
        queued = client.post(f"{BASE}/endpoints/{endpoint['id']}/test").json()["data"]
    (got,) = receiver.wait_for(path, 1)
    standardwebhooks.Webhook(secret).verify(got.body, got.headers)  # the secret the page showed signs it
    assert got.headers["webhook-id"] == queued["delivery_id"]

    # Deliveries filtered by the endpoint, then the delivery's attempts, then retry.
    browser.goto(f"{stack.url}/portal/webhooks/deliveries?endpoint_id={endpoint['id']}")
    for n in range(100):  # the delivery's record is written just after the receiver answered
        if "succeeded" in browser.text():
            break
        time.sleep(0.1)
        browser.goto(f"{stack.url}/portal/webhooks/deliveries?endpoint_id={endpoint['id']}&n={n}")
    assert queued["delivery_id"] in browser.text() and "succeeded" in browser.text()
    browser.act(
        f"document.querySelector('a[href$={js('/' + queued['delivery_id'])}]').click()",
        then="document.getElementById('delivery-status')",
    )
    assert "Attempts" in browser.text() and "200" in browser.text()
    browser.act(
        "[...document.querySelectorAll('button')].find(b => b.textContent.startsWith('Retry')).click()",
        then="document.body.innerText.includes('Queued again')",
    )
    again = receiver.wait_for(path, 2)
    assert [r.headers["webhook-id"] for r in again] == [queued["delivery_id"]] * 2
    standardwebhooks.Webhook(secret).verify(again[1].body, again[1].headers)

    # Disable, then delete, from the endpoint's page.
    browser.goto(f"{stack.url}/portal/webhooks/endpoints/{endpoint['id']}")
    browser.act(
        "[...document.querySelectorAll('button')].find(b => b.textContent === 'Disable').click()",
        then="document.body.innerText.includes('disabled (manual)')",
    )
    with stack.client() as client:
        assert client.get(f"{BASE}/endpoints/{endpoint['id']}").json()["data"]["enabled"] is False
    browser.act(
        "[...document.querySelectorAll('button')].find(b => b.textContent === 'Delete').click()",
        then="location.pathname === '/portal/webhooks/endpoints'",
    )
    assert hook_url not in browser.text()
    with stack.client() as client:
        assert client.get(f"{BASE}/endpoints/{endpoint['id']}").status_code == 404

    # The link was used: a browser without the session cookie gets nothing from it.
    browser.clear_cookies()
    browser.goto(link)
    browser.wait("document.body.innerText.includes('invalid, used or expired')")
    browser.goto(f"{stack.url}/portal/webhooks/endpoints")
    assert "session has ended" in browser.text()
