"""Contract fuzzing setup: a local stack of its own, its /openapi.json loaded by schemathesis, the envelope check.

The stack is started with the e2e helpers (tests/e2e/conftest.py) but is not the e2e `stack` fixture: the fuzzer
writes thousands of odd records with the owner key (and finally deletes the organization), which the e2e tests on the
same worker must not see.

Knobs (environment):
- FUZZ_EXAMPLES: generated examples per operation in the fuzzing phase, valid and invalid (default 1: about 650
  requests over ~325 operations, about a minute on a busy 2-core machine; `make fuzz` uses 25).
- FUZZ_COVERAGE=1: add schemathesis' coverage phase (boundary values and type mutations of every field and parameter,
  many more requests); `make fuzz` sets it.
- FUZZ_SEED: default fixed, so a failure seen in CI reproduces; `make fuzz` passes a random one.
- FUZZ_STRICT=1: the advisory checks (ADVISORY_CHECKS, with why each is advisory) fail the run instead of being listed.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from schemathesis import Case, CheckContext, Response
from schemathesis.engine import Status, events, from_schema

from tests.e2e.conftest import Stack, _start_local_stack, _stop_local_stack

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1"))
FUZZ_COVERAGE = os.environ.get("FUZZ_COVERAGE", "") not in ("", "0")
FUZZ_SEED = int(os.environ.get("FUZZ_SEED", "20261122"))
FUZZ_STRICT = os.environ.get("FUZZ_STRICT", "") not in ("", "0")
# `positive_data_acceptance` fails when a request that matches the documented schema is answered 400: an e-mail field
# documented as any string, an opaque cursor that is not one of ours, a phone number libphonenumber refuses. That is
# the document being looser than the validation (worth tightening, listed in the output), not a broken contract.
# `allow_header_conformance` (OPTIONS, coverage phase) compares `Allow` with the document's methods of the *template*;
# the API answers for the concrete URL, where `/v1/messages/delete` is also matched by `GET /v1/messages/{messageID}`
# (the routing API Gateway does too), so `GET` is rightly listed there.
ADVISORY_CHECKS = frozenset() if FUZZ_STRICT else frozenset({"positive_data_acceptance", "allow_header_conformance"})
ERROR_CODE = re.compile(r"^[a-z][a-z0-9_]*$")


@schemathesis.check
def error_envelope(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """CONVENTIONS: every failure is `{"error": {code, message, details, request_id}}` as JSON, without internals;
    every other JSON answer is `{"data": ...}`; a 204 has no body."""
    status = response.status_code
    if status == 204:
        assert not response.content, f"204 with a body: {response.content[:200]!r}"
        return None
    if case.operation.path == "/openapi.json" and status < 400:
        return None  # the document itself
    if 300 <= status < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0].split(";")[0].strip()
    assert content_type == "application/json", f"{status} answered with Content-Type {content_type!r}"
    body = response.json()
    assert isinstance(body, dict), f"{status} body is not an object: {response.text[:200]}"
    if status < 300:
        assert "data" in body, f"{status} without `data`: {response.text[:300]}"
        return None
    error = body.get("error")
    assert isinstance(error, dict) and set(body) == {"error"}, f"not an error envelope: {response.text[:300]}"
    assert isinstance(error.get("code"), str) and ERROR_CODE.match(error["code"]), f"bad code: {error!r}"
    assert isinstance(error.get("message"), str) and error["message"], f"no message: {error!r}"
    assert isinstance(error.get("details"), list), f"no details list: {error!r}"
    assert isinstance(error.get("request_id"), str) and error["request_id"], f"no request_id: {error!r}"
    assert "Traceback" not in response.text, "a stack trace in an error body"
    return None


@pytest.fixture(scope="module")  # stopped once the contract tests are done, not kept for the whole session
def contract_stack() -> Iterator[Stack]:
    # The per-organization request budget would turn most of the run into 429s; the limiter is not under test here.
    stack = _start_local_stack(extra_env={"RATE_LIMIT_PER_MINUTE": "1000000"})
    try:
        yield stack
    finally:
        _stop_local_stack(stack)


def fuzz_config(stack: Stack) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": FUZZ_SEED,
            "base-url": stack.url,
            "headers": {"X-Api-Key": stack.api_key},
            "request-timeout": 30,
            "generation": {"mode": "all", "max-examples": FUZZ_EXAMPLES, "database": "none"},
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": FUZZ_COVERAGE},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": False},
            },
        }
    )


@pytest.fixture(scope="module")
def api_schema(contract_stack: Stack) -> Any:
    """The document the running stack serves (so every route any group added is in it), not the file on disk."""
    return schemathesis.openapi.from_url(f"{contract_stack.url}/openapi.json", config=fuzz_config(contract_stack))


def pytest_configure(config: pytest.Config) -> None:
    # Registered by pytest-xdist when it runs; declared here too so `-p no:xdist` runs accept the mark.
    config.addinivalue_line("markers", "xdist_group(name): keep these tests on one xdist worker, in order")


@dataclass
class FuzzReport:
    operations: set[str] = field(default_factory=set)
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[tuple[str, str], str] = field(default_factory=dict)
    advisories: dict[tuple[str, str], str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def summary(self) -> str:
        by_class = Counter(f"{code // 100}xx" for code in self.statuses.elements())
        lines = [
            f"fuzzed {len(self.operations)} operations with {self.requests} requests in {self.elapsed:.1f} s; "
            f"responses {dict(sorted(by_class.items()))}; {len(self.failures)} distinct failures, "
            f"{len(self.errors)} errors"
        ]
        if self.advisories:
            lines.append(f"advisory ({len(self.advisories)}; FUZZ_STRICT=1 makes them failures):")
            lines += [f"  {label}: {title}" for label, title in sorted(self.advisories)]
        return "\n".join(lines)

    def failure_text(self) -> str:
        return "\n\n".join(f"{label}: {text}" for (label, _), text in sorted(self.failures.items()))

    def error_text(self) -> str:
        return "\n\n".join(self.errors)


def run_fuzzer(schema: Any, stack: Stack) -> FuzzReport:
    """Run schemathesis' engine (what `st run` uses) over `schema`; every response, failure and error is collected."""
    report = FuzzReport()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for interaction in recorder.interactions.values():
                if interaction.response is not None:
                    report.requests += 1
                    report.statuses[interaction.response.status_code] += 1
                    report.operations.add(recorder.label)
            for checks in recorder.checks.values():
                for check in checks:
                    if check.status != Status.FAILURE or check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    target = report.advisories if check.name in ADVISORY_CHECKS else report.failures
                    target.setdefault(
                        (recorder.label, f"{check.name}: {failure.title}"),
                        f"[{check.name}] {failure.title}\n{failure.message}\n{check.failure_info.code_sample}",
                    )
        elif isinstance(event, events.NonFatalError):
            report.errors.append(f"{event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            report.errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            report.elapsed = event.running_time
    stack.assert_alive()
    return report
