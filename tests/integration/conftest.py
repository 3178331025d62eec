"""Integration fixtures: moto in-process, resources from template.yaml, the API through the gateway emulation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local.index_lag import IndexLag
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


@pytest.fixture
def lagging_indexes(api: Api) -> Iterator[IndexLag]:
    """GSI reads see the table as it was at the last `settle()`, as a read right after a write may on AWS
    (`local/index_lag.py`); settle after the test's setup, then act before settling again."""
    with IndexLag() as lag:
        yield lag
