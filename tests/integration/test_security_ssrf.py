"""Provider HTTP calls are held to the webhook sender's SSRF rules (CONVENTIONS "Real channel engines", "Tenant
safety"): the resolved address is checked at every request and the connection pinned to it (a second DNS answer
never redirects it), no verdict is cached by host name, NAT64 / mapped / 6to4 / Teredo forms of private and metadata
addresses are refused, a `whatsapp_cloud` channel's `base_url` is Meta's Graph root outside the local stack, and a
provider's error body is never echoed to the tenant.

The resolver is a stub in place of `socket.getaddrinfo` (what the guard and the HTTP library's connect both use); the
"internal service" is a TCP listener on 127.0.0.1 that records every connection it accepts.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.config import reset_settings
from switchboard.store import get_store
from tests.fakes.graph_api import FakeGraphApi
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api

PUBLIC = "93.184.216.34"
HOST = "engine.example.test"
REAL_GETADDRINFO = socket.getaddrinfo


class Listener:
    """An internal service on 127.0.0.1: accepts, records and closes every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class Resolver:
    """DNS as the test says: `answers[host]` is a list of successive answers (the last one repeats). The public
    address is not routable here (its lookup by the connect fails at once), so nothing leaves the machine."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {}
        self.lookups: list[str] = []

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        name = host.decode() if isinstance(host, bytes) else str(host)
        self.lookups.append(name)
        if name == PUBLIC:
            raise socket.gaierror(socket.EAI_NONAME, "no route to the public test address")
        if name in self.answers:
            queue = self.answers[name]
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]
        if name in ("127.0.0.1", "localhost"):
            return REAL_GETADDRINFO(host, port, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"unknown host {name}")


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def resolver(monkeypatch) -> Resolver:
    stub = Resolver()
    monkeypatch.setattr(socket, "getaddrinfo", stub)
    return stub


@pytest.fixture
def outside_local(monkeypatch) -> Iterator[None]:
    monkeypatch.setenv("STAGE", "dev")
    reset_settings()
    yield
    monkeypatch.setenv("STAGE", "local")
    reset_settings()


def web_channel(api: Api, base_url: str) -> dict[str, Any]:
    created = api.post(
        "/v1/channels",
        json={"name": "engine", "platform": "whatsapp_web", "config": {"base_url": base_url, "api_key": "k" * 20}},
    )
    assert created.status_code == 201, created.text
    return created.json()["data"]  # type: ignore[no-any-return]


def connect(api: Api, channel_id: str) -> dict[str, Any]:
    resp = api.post(f"/v1/channels/{channel_id}/connect")
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]  # type: ignore[no-any-return]


# DNS rebinding -------------------------------------------------------------------------------------------------
def test_a_host_rebinding_to_loopback_between_check_and_connect_is_never_connected(
    api: Api, listener: Listener, resolver: Resolver, outside_local: None
):
    channel = web_channel(api, f"https://{HOST}:{listener.port}")
    resolver.answers[HOST] = [PUBLIC, "127.0.0.1"]  # public when checked, loopback for any later lookup
    after = connect(api, channel["id"])
    assert after["status"] == "error"
    assert listener.connections == 0
    # One lookup of the name, by the guard; the connection went to the address it checked.
    assert resolver.lookups == [HOST, PUBLIC]


def test_no_verdict_is_cached_by_host_name(api: Api, listener: Listener, resolver: Resolver, outside_local: None):
    resolver.answers[HOST] = [PUBLIC]
    channel = web_channel(api, f"https://{HOST}:{listener.port}")
    assert connect(api, channel["id"])["status"] == "error"  # public, but unreachable here
    resolver.answers[HOST] = ["127.0.0.1"]  # the name now points inside
    after = connect(api, channel["id"])
    assert after["status"] == "error" and "loopback" in after["last_error"]
    assert listener.connections == 0


# Addresses hidden in IPv6 forms --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 well-known prefix carrying 169.254.169.254
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a00:7", "private"),  # NAT64 of 10.0.0.7
        ("64:ff9b:1::a9fe:a9fe", "NAT64"),  # local-use NAT64 prefix
        ("::ffff:169.254.169.254", "metadata"),  # IPv4-mapped
        ("2002:a9fe:a9fe::1", "metadata"),  # 6to4 of 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ],
)
def test_embedded_private_and_metadata_addresses_are_refused_for_providers_and_webhooks(
    api: Api, resolver: Resolver, outside_local: None, address: str, reason: str
):
    resolver.answers[HOST] = [address]
    channel = web_channel(api, f"https://{HOST}")
    lookups = len(resolver.lookups)
    after = connect(api, channel["id"])
    assert after["status"] == "error" and reason in after["last_error"], after
    assert resolver.lookups[lookups:] == [HOST]  # the guard's lookup only: no connection was attempted
    hook = api.post("/v1/settings/developer/webhooks/endpoints", json={"url": f"https://{HOST}/hook"})
    error = Api.assert_error(hook, 400, "validation_failed")
    assert reason in error["details"][0]["message"]


# whatsapp_cloud base_url ----------------------------------------------------------------------------------------
CLOUD_CONFIG = {"access_token": "EAAG-tenant-token-0001", "phone_number_id": "1001", "waba_id": "2002"}


@pytest.mark.parametrize(
    "base_url",
    [
        f"https://{HOST}/v21.0",
        "https://graph.facebook.com.evil.example/v21.0",
        "https://graph.facebook.com:8443/v21.0",
        "https://graph.facebook.com/v21.0/../../x",
        "http://graph.facebook.com/v21.0",
    ],
)
def test_a_cloud_base_url_other_than_metas_graph_root_is_refused_outside_the_local_stack(
    api: Api, resolver: Resolver, outside_local: None, base_url: str
):
    resolver.answers[HOST] = [PUBLIC]
    created = api.post(
        "/v1/channels",
        json={"name": "c", "platform": "whatsapp_cloud", "config": {**CLOUD_CONFIG, "base_url": base_url}},
    )
    error = Api.assert_error(created, 400, "validation_failed")
    assert error["details"][0]["field"] == "body.config.base_url"

    ok = api.post(
        "/v1/channels",
        json={"name": "c", "platform": "whatsapp_cloud", "config": {**CLOUD_CONFIG, "base_url": DEFAULT_GRAPH}},
    )
    assert ok.status_code == 201, ok.text
    patched = api.patch(f"/v1/channels/{ok.json()['data']['id']}", json={"config": {"base_url": base_url}})
    error = Api.assert_error(patched, 400, "validation_failed")
    assert error["details"][0]["field"] == "body.config.base_url"


DEFAULT_GRAPH = "https://graph.facebook.com/v21.0"


def test_a_stored_cloud_base_url_elsewhere_is_refused_again_at_call_time(
    api: Api, listener: Listener, resolver: Resolver, outside_local: None
):
    ok = api.post(
        "/v1/channels",
        json={"name": "c", "platform": "whatsapp_cloud", "config": {**CLOUD_CONFIG, "base_url": DEFAULT_GRAPH}},
    )
    channel = ok.json()["data"]
    # An item written before the rule (or by any other path): the token must still not go to that host.
    store = get_store()
    key = {"PK": f"ORG#{api.org_id}", "SK": f"CHANNEL#{channel['id']}"}
    item = store.get(key, consistent=True)
    assert item is not None
    resolver.answers[HOST] = [PUBLIC]
    store.put({**item, "config": {**item["config"], "base_url": f"https://{HOST}:{listener.port}/v21.0"}})
    after = connect(api, channel["id"])
    assert after["status"] == "error" and "base_url" in after["last_error"]
    assert HOST not in resolver.lookups and listener.connections == 0


def test_the_local_stack_may_point_a_cloud_channel_at_its_fake(api: Api):
    with FakeGraphApi(token="tok") as graph:
        config = {
            **CLOUD_CONFIG,
            "access_token": "tok",
            "base_url": graph.url,
            "phone_number_id": graph.phone_number_id,
        }
        created = api.post("/v1/channels", json={"name": "c", "platform": "whatsapp_cloud", "config": config})
        assert created.status_code == 201, created.text
        assert connect(api, created.json()["data"]["id"])["status"] == "connected"


# Error bodies ---------------------------------------------------------------------------------------------------
INTERNAL_PAGE = b"<html><h1>Admin console</h1><p>db password: hunter2-internal</p></html>"


@pytest.mark.parametrize("status", [403, 500])
def test_a_providers_non_json_error_body_is_never_echoed(api: Api, status: int):
    with FakeWaha(api_key="k" * 20) as gateway:
        channel = web_channel(api, gateway.url)
        gateway.fail_next(status, body=INTERNAL_PAGE, headers={"Content-Type": "text/html"})
        after = connect(api, channel["id"])
    assert after["status"] == "error"
    assert f"HTTP {status}" in after["last_error"]
    assert "hunter2" not in after["last_error"] and "Admin" not in after["last_error"]
    status_view = api.get(f"/v1/channels/{channel['id']}/status").json()["data"]
    assert "hunter2" not in str(status_view)
    logs = api.get(f"/v1/channels/{channel['id']}/logs").json()["data"]
    assert "hunter2" not in str(logs)


def test_metas_json_error_keeps_its_code_and_message_but_not_a_raw_body(api: Api):
    with FakeGraphApi(token="tok") as graph:
        config = {
            **CLOUD_CONFIG,
            "access_token": "tok",
            "base_url": graph.url,
            "phone_number_id": graph.phone_number_id,
        }
        created = api.post("/v1/channels", json={"name": "c", "platform": "whatsapp_cloud", "config": config})
        channel_id = created.json()["data"]["id"]
        graph.fail_next(
            400,
            body={
                "error": {"message": "Invalid parameter", "type": "OAuthException", "code": 100, "error_subcode": 33}
            },
        )
        first = connect(api, channel_id)
        assert first["status"] == "error" and "Invalid parameter" in first["last_error"]
        graph.fail_next(400, body=INTERNAL_PAGE, headers={"Content-Type": "text/html"})
        second = api.post(f"/v1/channels/{channel_id}/reconnect/force").json()["data"]
        assert second["status"] == "error" and "HTTP 400" in second["last_error"]
        assert "hunter2" not in second["last_error"]
        graph.fail_next(400, body={"unexpected": "hunter2-internal"})
        third = api.post(f"/v1/channels/{channel_id}/reconnect/force").json()["data"]
        assert third["status"] == "error" and "hunter2" not in third["last_error"]
