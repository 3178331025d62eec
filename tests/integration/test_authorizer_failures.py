"""An authorizer that fails, as API Gateway answers it and as the local gateway (local/gateway.py) now answers it too:
the authorizer raising anything but "Unauthorized", or not answering within its function's Timeout, is API Gateway's
AUTHORIZER_CONFIGURATION_ERROR, which template.yaml maps to 503 `service_unavailable` with `Retry-After` (the client
retries) instead of API Gateway's 500. A wrong key stays 401."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from switchboard import aws
from tests.integration.support import Api


@contextmanager
def credential_lookups(action: Callable[[], None]) -> Iterator[None]:
    """Run `action` on the authorizer's read of a credential (`GetItem` of a `CRED#` key), before it reaches moto."""
    client = aws.client("dynamodb")

    def before_send(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        if b"GetItem" in (target if isinstance(target, bytes) else str(target).encode()) and b"CRED#" in (
            request.body or b""
        ):
            action()

    client.meta.events.register_first("before-send.dynamodb", before_send)
    try:
        yield
    finally:
        client.meta.events.unregister("before-send.dynamodb", before_send)


def _assert_authorizer_unavailable(api: Api, response: Any) -> None:
    error = api.assert_error(response, 503, "service_unavailable")
    assert response.headers["Retry-After"] == "1"
    assert response.headers["x-amzn-ErrorType"] == "AuthorizerConfigurationException"
    assert "Traceback" not in error["message"] and "fire" not in error["message"]


def test_an_authorizer_exception_is_a_503_to_retry_not_a_500(api: Api):
    def fail() -> None:
        raise RuntimeError("the credential table is on fire")

    with credential_lookups(fail):
        _assert_authorizer_unavailable(api, api.get("/v1/contacts"))
    assert api.get("/v1/contacts").status_code == 200


def test_an_authorizer_past_its_timeout_is_a_503_like_on_aws(api: Api):
    """The gateway stops waiting when the authorizer function's Timeout (template.yaml) has passed since its handler
    started, as Lambda ends it; a 1 s Timeout here keeps the test short."""
    gateway = api.client.app
    pool = gateway.functions["AuthorizerFunction"]
    assert pool.spec.timeout == api.template.function("AuthorizerFunction").timeout == 5
    pool.spec = dataclasses.replace(pool.spec, timeout=1)
    release = threading.Event()
    try:
        with credential_lookups(lambda: release.wait(30)):
            _assert_authorizer_unavailable(api, api.get("/v1/contacts"))
    finally:
        release.set()
    assert api.get("/v1/contacts").status_code == 200


def test_a_wrong_key_is_still_401(api: Api):
    response = api.get("/v1/contacts", headers={"X-Api-Key": "sk_test_" + "x" * 40})
    api.assert_error(response, 401, "unauthenticated")
    assert response.headers["x-amzn-ErrorType"] == "UnauthorizedException"
