"""Rules of the merged OpenAPI document that the contract fuzzer found missing (tests/contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from switchboard.openapi_doc import _qualify_colliding_schemas, build_openapi

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def _ops(doc: dict[str, Any]):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield path, method, op


def test_a_204_documents_no_body():
    doc = build_openapi(FUNCTIONS)
    no_content = [op["responses"]["204"] for _, _, op in _ops(doc) if "204" in op["responses"]]
    assert no_content, "some route answers 204"
    assert all("content" not in response for response in no_content)


def test_a_route_with_extra_responses_still_documents_its_own_status():
    # POST /v1/contacts answers 201 on create and 200 on upsert; only the 200 used to be documented.
    doc = build_openapi(FUNCTIONS)
    responses = doc["paths"]["/v1/contacts"]["post"]["responses"]
    assert {"200", "201"} <= set(responses)
    assert responses["201"]["content"] == responses["200"]["content"]


def test_a_public_route_naming_a_resource_documents_404():
    doc = build_openapi(FUNCTIONS)
    assert "404" in doc["paths"]["/v1/providers/{channelID}/callback"]["post"]["responses"]
    assert "404" not in doc["paths"]["/v1/health"]["get"]["responses"]


def test_one_name_never_means_two_schemas():
    # Identity's `Contact` (a chat contact) and the CRM `Contact` both existed; the merge kept one of them for both.
    doc = build_openapi(FUNCTIONS)
    schemas = doc["components"]["schemas"]
    block = doc["paths"]["/v1/contacts/block"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    data_ref = schemas[block["$ref"].rsplit("/", 1)[1]]["properties"]["data"]["$ref"].rsplit("/", 1)[1]
    assert "lifecycle_stage" in schemas[data_ref]["properties"]


def test_colliding_names_are_qualified_by_group_and_identical_copies_stay_one():
    def group(contact: dict[str, Any]) -> dict[str, Any]:
        wrapper = {"properties": {"data": {"$ref": "#/components/schemas/Contact"}}}
        return {"paths": {}, "components": {"schemas": {"Contact": contact, "Data_Contact_": wrapper}}}

    crm, chat = {"properties": {"email": {}}}, {"properties": {"user_id": {}}}
    groups = [("contacts", group(crm)), ("identity", group(chat)), ("messaging", group(crm))]
    _qualify_colliding_schemas(groups)
    names = [set(schema["components"]["schemas"]) for _, schema in groups]
    assert names[0] == names[2] == {"ContactsContact", "ContactsData_Contact_"}
    assert names[1] == {"IdentityContact", "IdentityData_Contact_"}
    wrapper = groups[1][1]["components"]["schemas"]["IdentityData_Contact_"]
    assert wrapper["properties"]["data"]["$ref"] == "#/components/schemas/IdentityContact"


def test_authenticated_routes_document_the_provider_refusal():
    # Found by the contract fuzzer: channel routes answered 422 provider_rejected, undocumented.
    doc = build_openapi(FUNCTIONS)
    assert "422" in doc["paths"]["/v1/channels/{channelID}/status"]["get"]["responses"]
    assert "422" not in doc["paths"]["/v1/health"]["get"]["responses"]


def test_a_route_with_a_body_documents_415():
    doc = build_openapi(FUNCTIONS)
    with_body = [op for _, _, op in _ops(doc) if "requestBody" in op]
    assert with_body
    assert all("415" in op["responses"] for op in with_body)
    assert "415" not in doc["paths"]["/v1/health"]["get"]["responses"]


def _string_nodes(node: Any):
    if isinstance(node, dict):
        if node.get("type") == "string":
            yield node
        for key in ("anyOf", "items"):
            branches = node.get(key)
            for branch in branches if isinstance(branches, list) else [branches] if branches else []:
                yield from _string_nodes(branch)


def test_a_trimmed_string_documents_its_minimum_length_after_trimming():
    """Request strings are trimmed before their length is checked: `minLength: 3` alone says `"   "` passes."""
    import re

    from switchboard.messaging.models import PairingCodeRequest

    doc = build_openapi(FUNCTIONS)
    checked = 0
    for schema in doc["components"]["schemas"].values():
        if schema.get("additionalProperties") is not False:  # request bodies (Strict) only
            continue
        for prop in schema.get("properties", {}).values():
            for node in _string_nodes(prop):
                if node.get("minLength", 0) >= 1 and "enum" not in node:
                    checked += 1
                    assert "pattern" in node, node
                    assert not re.search(node["pattern"], " " * (node["minLength"] + 3)), node
    assert checked > 50
    pattern = PairingCodeRequest.model_json_schema()["properties"]["phone_number"]["pattern"]
    for text, fits in (("  12  ", False), (" 123 ", True), ("1 2", True)):
        assert bool(re.search(pattern, text)) is fits
        assert (len(text.strip()) >= 3) is fits  # what the server counts (str_strip_whitespace)


def test_a_webhook_url_documents_https_on_create_and_update():
    import re

    schemas = build_openapi(FUNCTIONS)["components"]["schemas"]
    for name in ("EndpointCreate", "EndpointUpdate"):
        (url,) = list(_string_nodes(schemas[name]["properties"]["url"]))
        assert re.search(url["pattern"], "https://hooks.example.com/x"), name
        assert re.search(url["pattern"], " HTTPS://hooks.example.com/x"), name  # trimmed, scheme in any case
        assert not re.search(url["pattern"], "http://hooks.example.com/x"), name
    emails = schemas["AlertingSettingsUpdate"]["properties"]["emails"]["items"]
    assert emails["format"] == "email"
