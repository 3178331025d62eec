"""Fault tests share the integration fixtures (moto in-process with template.yaml's resources, the API in-process), a
spy on the sandbox provider's sends and a connected sandbox channel."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from switchboard.providers.sandbox import SandboxProvider
from tests.integration.conftest import api, aws_resources
from tests.integration.support import Api

__all__ = ["ProviderSpy", "api", "aws_resources", "channel", "spy"]


class ProviderSpy:
    """Counts every message handed to the sandbox provider; `before` runs first (to fail, crash or stall a send)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.before: Callable[[str, int], None] | None = None
        self._lock = threading.Lock()

    def install(self, monkeypatch: Any) -> None:
        original = SandboxProvider.send
        spy = self

        def send(provider: SandboxProvider, message: Any) -> Any:
            with spy._lock:
                seen = spy.sent.count(message.message_id)
            if spy.before is not None:
                spy.before(message.message_id, seen)
            result = original(provider, message)
            with spy._lock:
                spy.sent.append(message.message_id)
            return result

        monkeypatch.setattr(SandboxProvider, "send", send)


@pytest.fixture
def spy(monkeypatch) -> ProviderSpy:
    provider_spy = ProviderSpy()
    provider_spy.install(monkeypatch)
    return provider_spy


@pytest.fixture
def channel(api: Api) -> dict[str, Any]:
    created = api.post("/v1/channels", json={"name": "faults", "platform": "sandbox"})
    assert created.status_code == 201, created.text
    connected = api.post(f"/v1/channels/{created.json()['data']['id']}/connect")
    assert connected.status_code == 200, connected.text
    return connected.json()["data"]
