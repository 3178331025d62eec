"""Every operation of the served /openapi.json, fuzzed with valid and invalid input, authenticated as the owner.

Checks on every response: no 5xx, status code / content type / headers / body conform to the documented responses,
invalid input is rejected and valid input is accepted (schemathesis' checks), and every error is in the CONVENTIONS
envelope (`error_envelope` in conftest.py). Operations are discovered from the running stack's document at test
time, so routes added by any group are fuzzed without touching this file. Every operation with a JSON body also gets
the two bodies schemathesis cannot write: nested 20,000 levels deep and with a key given twice.

schemathesis runs through its engine (what `st run` uses) rather than its pytest plugin, which does not support
pytest 9 yet; the test fails with one line per distinct failure and a curl command that reproduces it.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis

from tests.contract.conftest import (
    DEEP_BODY,
    DUPLICATE_BODY,
    FUZZ_COVERAGE,
    FUZZ_EXAMPLES,
    FUZZ_SEED,
    SCHEMA_INEXPRESSIBLE,
    FuzzReport,
    fuzz_config,
    json_operations,
    run_fuzzer,
)
from tests.e2e.conftest import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("contract")]


# Deleting the organization is fuzzed on its own (an API key may never do it), in its own test below.
ORG_DELETE = {"method": "DELETE", "path": "/v1/organization"}


def _assert_clean(report: FuzzReport) -> None:
    print(f"\nFUZZ_EXAMPLES={FUZZ_EXAMPLES} FUZZ_COVERAGE={int(FUZZ_COVERAGE)} FUZZ_SEED={FUZZ_SEED}")
    print(report.summary())
    assert report.operations, "the fuzzer found no operation in /openapi.json"
    assert report.requests, "the fuzzer sent no request"
    assert not report.failures, report.failure_text()
    assert not report.errors, report.error_text()


def test_every_operation_conforms(contract_stack: Stack, api_schema: Any) -> None:
    report = run_fuzzer(api_schema.exclude(**ORG_DELETE), contract_stack)
    _assert_clean(report)
    # Each documented /v1 operation except the deletion was exercised, with at least one answered request.
    documented = {
        f"{method.upper()} {path}"
        for path, item in api_schema.raw_schema["paths"].items()
        if path.startswith("/v1/")
        for method in item
        if method != "parameters"
    }
    missed = documented - {"DELETE /v1/organization"} - report.operations
    # The stateful phase ran along the document's links (create → read): chains, not only single requests.
    assert report.stateful_scenarios and report.stateful_requests > report.stateful_scenarios, report.summary()
    assert not missed, f"not fuzzed: {sorted(missed)}"
    # The exceptions to `positive_data_acceptance` name real operations (a renamed route must not keep one).
    stale = set(SCHEMA_INEXPRESSIBLE) - documented
    assert not stale, f"SCHEMA_INEXPRESSIBLE lists undocumented operations: {sorted(stale)}"


def test_organization_delete_conforms(contract_stack: Stack) -> None:
    # One operation, no link to follow: no stateful phase.
    url = f"{contract_stack.url}/openapi.json"
    schema = schemathesis.openapi.from_url(url, config=fuzz_config(contract_stack, stateful=False))
    report = run_fuzzer(schema.include(**ORG_DELETE), contract_stack)
    _assert_clean(report)
    assert report.operations == {"DELETE /v1/organization"}
    # The fuzzer sends the owner's API key, and only an owner's session may delete the organization (CONVENTIONS
    # "Tenant safety and data lifecycle"): every request was refused, the key still opens the organization.
    with contract_stack.client() as client:
        org = client.get("/v1/organization")
        assert org.status_code == 200 and org.json()["data"]["status"] == "active"


def test_every_json_route_refuses_deep_nesting_and_duplicate_keys(contract_stack: Stack, api_schema: Any) -> None:
    """Every operation with a JSON body, with the owner's key: a body nested 20,000 levels is 400 `invalid_json`
    before anything else reads it, a key given twice is 400 `validation_failed`; a route the key may not use at all
    (sessions only) is 403 first. Never a 5xx."""
    operations = json_operations(api_schema.raw_schema)
    assert len(operations) > 100, operations
    wrong: list[str] = []
    with contract_stack.client(headers={"Content-Type": "application/json"}, timeout=30.0) as client:
        for method, path in operations:
            for body, code in ((DEEP_BODY, "invalid_json"), (DUPLICATE_BODY, "validation_failed")):
                answer = client.request(method, path, content=body.encode())
                error = (
                    answer.json().get("error")
                    if answer.headers.get("content-type", "").startswith("application/json")
                    else None
                )
                refused_first = answer.status_code == 403 and error and error.get("code") == "forbidden"
                if not refused_first and (answer.status_code != 400 or not error or error.get("code") != code):
                    wrong.append(f"{method} {path} ({code}): {answer.status_code} {answer.text[:200]}")
    contract_stack.assert_alive()
    assert not wrong, "\n".join(wrong)
