"""Unit tests are pure: any AWS call is refused at once (a dead loopback endpoint), never sent anywhere."""

import pytest

from switchboard import aws


@pytest.fixture(autouse=True)
def _no_aws(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    aws.reset_clients()
    yield
    aws.reset_clients()
