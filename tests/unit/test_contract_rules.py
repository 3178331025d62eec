"""The contract fuzzer's exceptions stay narrow: only listed fields of listed operations, only shadowed static paths."""

from __future__ import annotations

import json

from switchboard.openapi_doc import load_openapi
from tests.contract.conftest import SCHEMA_INEXPRESSIBLE, detail_fields, inexpressible, shadowing_static_paths


def _envelope(*details: dict[str, str], code: str = "validation_failed") -> bytes:
    return json.dumps({"error": {"code": code, "message": "m", "details": list(details), "request_id": "r"}}).encode()


def test_a_listed_field_is_relaxed_only_on_its_operation() -> None:
    fields = detail_fields(_envelope({"field": "body.participants.0", "message": "not a phone"}))
    assert fields == ["body.participants.0"]
    assert inexpressible("POST /v1/groups", fields)
    assert not inexpressible("POST /v1/groups/name", fields)  # the same field elsewhere is not listed
    assert not inexpressible("POST /v1/groups", ["body.participantsX"])  # a prefix is a whole path segment
    assert inexpressible("GET /v1/contacts", ["query.cursor"])  # a list's cursor, on every operation
    assert not inexpressible("GET /v1/contacts", ["query.cursor", "query.limit"])


def test_every_named_field_must_be_listed() -> None:
    assert not inexpressible("POST /v1/groups", ["body.participants.0", "body.name"])
    assert not inexpressible("POST /v1/groups", [])  # not an envelope: never relaxed


def test_a_refusal_without_field_is_named_by_its_code() -> None:
    body = _envelope({"platform": "sandbox", "operation": "QR codes"}, code="unsupported_by_provider")
    assert detail_fields(body) == ["code:unsupported_by_provider"]
    assert inexpressible("GET /v1/channels/{channelID}/qr", detail_fields(body))
    assert not inexpressible("GET /v1/channels/{channelID}/qr", detail_fields(_envelope(code="validation_failed")))
    assert detail_fields(b"not json") == []


def test_only_paths_another_template_also_matches_are_shadowing() -> None:
    paths = ["/v1/messages/delete", "/v1/messages/{messageID}", "/v1/messages", "/v1/a/{x}/b", "/v1/a/c/b/d"]
    assert shadowing_static_paths(paths) == {"/v1/messages/delete"}
    fields = ["/v1/t/{id}/fields/reorder", "/v1/t/{id}/fields/{fieldID}", "/v1/t/{id}/fields", "/v1/t/{id}"]
    assert shadowing_static_paths(fields) == {"/v1/t/{id}/fields/reorder"}


def test_the_exceptions_name_documented_operations() -> None:
    doc = load_openapi()
    documented = {f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in item if m != "parameters"}
    assert set(SCHEMA_INEXPRESSIBLE) <= documented
    for label, fields in SCHEMA_INEXPRESSIBLE.items():
        assert fields, label
        for name, reason in fields.items():
            assert name.startswith(("body", "query.", "path.", "code:")), (label, name)
            assert reason, (label, name)
