"""Integration fixtures: moto in-process, resources from template.yaml, the API through the gateway emulation."""

from __future__ import annotations

import pytest

from tests.integration.support import Api, moto_resources, running_api


@pytest.fixture
def aws_resources(monkeypatch):
    with moto_resources(monkeypatch) as (template, resources):
        yield template, resources


@pytest.fixture
def api(aws_resources) -> Api:
    template, resources = aws_resources
    with running_api(template, resources) as api:
        yield api
