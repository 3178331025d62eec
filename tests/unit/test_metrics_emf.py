"""The metrics writer prints the EMF documents Powertools Metrics prints for the same namespace, dimensions and
metrics (the dashboard, the alarms and tests/integration/test_metrics.py read that format), byte for byte apart
from the timestamp, and follows Powertools' rule for when metrics are disabled."""

from __future__ import annotations

import json
import re

import pytest

from switchboard import metrics


def _powertools(namespace: str, service: str, org: str | None, values: dict[str, float]) -> str:
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    emitted = EphemeralMetrics(namespace=namespace, service=service)
    if org:
        emitted.add_dimension(name="organization", value=org)
    for name, value in values.items():
        emitted.add_metric(name=name, unit=MetricUnit.Count, value=value)
    return json.dumps(emitted.serialize_metric_set(), separators=(",", ":"))


def _untimed(line: str) -> str:
    return re.sub(r'"Timestamp":\d+', '"Timestamp":0', line)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Switchboard/unit")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "contacts")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    metrics.flush()
    return monkeypatch


def test_documents_match_powertools_for_totals_and_per_organization(env, capsys):
    org = 'org_"quoted"\\é'  # escaping of an unusual value matches too
    capsys.readouterr()
    for _ in range(2):  # the second round writes from the cached static parts
        metrics.count("ApiRequests", 2, organization=org)
        metrics.count("ApiClientErrors", organization=org)
        metrics.count("ApiRequests", 0.5)
        metrics.count("DlqMoves")
        metrics.flush()
        lines = capsys.readouterr().out.splitlines()
        assert [_untimed(line) for line in lines] == [
            _untimed(
                _powertools(
                    "Switchboard/unit", "contacts", None, {"ApiRequests": 2.5, "ApiClientErrors": 1, "DlqMoves": 1}
                )
            ),
            _untimed(_powertools("Switchboard/unit", "contacts", org, {"ApiRequests": 2, "ApiClientErrors": 1})),
        ]
        for line in lines:
            assert isinstance(json.loads(line)["_aws"]["Timestamp"], int)
    assert metrics.pending() == {}


def test_nothing_is_written_without_counts(env, capsys):
    capsys.readouterr()
    metrics.flush()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("disabled", "dev", "written"),
    [
        ("true", None, False),
        ("1", None, False),
        ("false", None, True),
        (None, "true", False),
        ("false", "true", True),
        (None, None, True),
    ],
)
def test_disabled_follows_powertools_rule(env, capsys, disabled, dev, written):
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    for name, value in (("POWERTOOLS_METRICS_DISABLED", disabled), ("POWERTOOLS_DEV", dev)):
        if value is None:
            env.delenv(name, raising=False)
        else:
            env.setenv(name, value)
    assert is_metrics_disabled() is not written
    capsys.readouterr()
    metrics.count("ApiRequests")
    metrics.flush()
    assert bool(capsys.readouterr().out) is written
    assert metrics.pending() == {}


@pytest.mark.parametrize("organization", [None, "org_1"])
def test_a_counted_response_writes_what_counting_its_names_writes(env, capsys, organization):
    """`count_response` (an API invocation's one count, written from a cache) against `count` of each name: the
    same lines for every kind of status, on the first flush and on the cached ones."""
    names_of = {
        200: ["ApiRequests"],
        202: ["ApiRequests"],
        0: ["ApiRequests"],
        404: ["ApiRequests", "ApiClientErrors"],
        429: ["ApiRequests", "ApiThrottled", "ApiClientErrors"],
        500: ["ApiRequests", "ApiServerErrors"],
        503: ["ApiRequests", "ApiServerErrors"],
    }
    capsys.readouterr()
    for status, names in [*names_of.items(), *names_of.items()]:  # the second time from the cache
        for name in names:
            metrics.count(name, organization=organization)
        metrics.flush()
        expected = [_untimed(line) for line in capsys.readouterr().out.splitlines()]
        metrics.count_response(status, organization=organization)
        counted: dict = {}
        for name in names:
            counted[(name, None)] = 1
            if organization:
                counted[(name, organization)] = 1
        assert metrics.pending() == counted
        metrics.flush()
        assert [_untimed(line) for line in capsys.readouterr().out.splitlines()] == expected, status
        assert len(expected) == (2 if organization else 1)
    assert metrics.pending() == {}


def test_a_response_counted_with_other_counts_joins_them(env, capsys):
    capsys.readouterr()
    metrics.count("ApiRequests", organization="org_1")
    metrics.count("ApiClientErrors", organization="org_1")
    metrics.count("ApiRequests", organization="org_1")
    metrics.count("DlqMoves")
    metrics.flush()
    expected = [_untimed(line) for line in capsys.readouterr().out.splitlines()]

    metrics.count_response(404, organization="org_1")
    metrics.count_response(200, organization="org_1")  # a second response before the flush
    metrics.count("DlqMoves")
    assert metrics.pending() == {
        ("ApiRequests", None): 2,
        ("ApiRequests", "org_1"): 2,
        ("ApiClientErrors", None): 1,
        ("ApiClientErrors", "org_1"): 1,
        ("DlqMoves", None): 1,
    }
    metrics.flush()
    assert [_untimed(line) for line in capsys.readouterr().out.splitlines()] == expected
    assert metrics.pending() == {}
