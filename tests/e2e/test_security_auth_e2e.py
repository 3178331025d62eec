"""The source IP over HTTP (CONVENTIONS "Tenant safety and data lifecycle"): the local stack takes it from the socket
peer, as API Gateway does, so a client's `X-Forwarded-For` neither passes an IP allowlist nor escapes a per-IP
limit; `LOCAL_TRUSTED_PROXIES` makes the gateway believe the header from a named proxy only."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from local.functions import FunctionPool, FunctionRegistry
from local.gateway import Gateway
from tests.e2e.conftest import Stack
from tests.e2e.test_account_flow import latest_code
from tests.e2e.test_emulator import AUTH_HANDLER, ECHO_HANDLER, OTHER_HANDLER, SYNTHETIC_TEMPLATE, write_app

pytestmark = pytest.mark.e2e

SPOOFED = "203.0.113.50"


def test_a_forged_forwarded_for_does_not_pass_the_ip_allowlist(local_only: Stack):
    """Allowing only 203.0.113.0/24 while calling from 127.0.0.1 would lock this key out: refused (409), whatever
    the client claims in X-Forwarded-For."""
    body = {"api_key_allowed_cidrs": ["203.0.113.0/24"]}
    with local_only.client(headers={"X-Forwarded-For": SPOOFED}) as client:
        try:
            refused = client.patch("/v1/settings/security", json=body)
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"]["code"] == "conflict"
        finally:  # the shared stack's key stays usable from here whatever happened
            client.patch("/v1/settings/security", json={"api_key_allowed_cidrs": []})
    with local_only.client() as client:
        assert client.get("/v1/settings/security").json()["data"]["api_key_allowed_cidrs"] == []


def test_a_rotating_forwarded_for_does_not_escape_the_login_delay(local_only: Stack):
    email = f"rotate-{uuid.uuid4().hex[:10]}@example.com"
    with local_only.client() as client:
        assert client.post("/v1/auth/email-verification/request", json={"email": email}).status_code == 202
        code = latest_code(local_only, email)
        body = {"email": email, "otp_code": code, "password": "correct horse battery"}
        assert client.post("/v1/auth/register/verify", json=body).status_code == 201
        statuses = [
            client.post(
                "/v1/auth/login",
                json={"email": email, "password": f"guess-{i}"},
                headers={"X-Forwarded-For": f"198.51.100.{i + 1}"},
            ).status_code
            for i in range(7)
        ]
    assert statuses == [401] * 5 + [429] * 2


# The gateway's rule, behind a proxy and without one -----------------------------------------------------------------
@pytest.fixture
def gateway_factory(tmp_path):
    from local.template import load_template

    (tmp_path / "template.yaml").write_text(SYNTHETIC_TEMPLATE)
    write_app(tmp_path, "fns/auth", AUTH_HANDLER)
    write_app(tmp_path, "fns/echo", ECHO_HANDLER)
    write_app(tmp_path, "fns/other", OTHER_HANDLER)
    template = load_template(tmp_path / "template.yaml", stage="local")
    pools = {
        spec.logical_id: FunctionPool(
            spec, root=tmp_path, size=1, function_name=f"fn-{spec.logical_id}", function_arn=f"arn:fn:{spec.logical_id}"
        )
        for spec in template.functions
    }
    executor = ThreadPoolExecutor(max_workers=4)
    yield lambda **kw: Gateway(template, FunctionRegistry(pools), executor=executor, **kw)
    executor.shutdown(wait=True)


def source_ip(gateway: Gateway, peer: str, forwarded_for: str | None) -> str:
    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway, client=(peer, 1234))
        headers = {"x-token": "allow", **({"X-Forwarded-For": forwarded_for} if forwarded_for else {})}
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:3000") as client:
            return await client.get("/things/a", headers=headers)

    response = asyncio.run(run())
    assert response.status_code == 200, response.text
    return str(response.json()["event"]["requestContext"]["identity"]["sourceIp"])


def test_the_gateway_believes_forwarded_for_only_from_a_trusted_proxy(gateway_factory, monkeypatch):
    monkeypatch.delenv("LOCAL_TRUSTED_PROXIES", raising=False)
    plain = gateway_factory()
    assert source_ip(plain, "127.0.0.1", SPOOFED) == "127.0.0.1"
    assert source_ip(plain, "198.51.100.7", SPOOFED) == "198.51.100.7"
    proxied = gateway_factory(trusted_proxies=["127.0.0.1", "10.0.0.0/8"])
    assert source_ip(proxied, "127.0.0.1", f"{SPOOFED}, 198.51.100.9, 10.1.2.3") == "198.51.100.9"
    assert source_ip(proxied, "198.51.100.7", SPOOFED) == "198.51.100.7"  # not a proxy: the header is not believed
    monkeypatch.setenv("LOCAL_TRUSTED_PROXIES", "127.0.0.1")
    assert source_ip(gateway_factory(), "127.0.0.1", SPOOFED) == SPOOFED
