"""What an integrator's tools need of the merged document: names, tags, security, links and types that generators
turn into usable clients (issue 23). tests/contract/test_generated_clients.py runs the generators themselves."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from switchboard.api.auth import route_access
from switchboard.openapi_doc import TAGS, _qualify_colliding_schemas, build_openapi, operation_id

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


@cache
def _doc() -> dict[str, Any]:
    return build_openapi(FUNCTIONS)


def _ops() -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, item in _doc()["paths"].items() for method, op in item.items()]


def test_operation_ids_are_the_handler_names_in_camel_case_and_unique():
    ids = [op["operationId"] for _, _, op in _ops()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert all(CAMEL.match(i) for i in ids), [i for i in ids if not CAMEL.match(i)]
    by_route = {(p, m): op["operationId"] for p, m, op in _ops()}
    assert by_route[("/v1/contacts", "post")] == "createContact"
    assert by_route[("/v1/contacts", "get")] == "listContacts"
    assert by_route[("/v1/messages", "post")] == "sendMessage"
    assert by_route[("/v1/messages/{messageID}", "get")] == "getMessage"
    assert operation_id("resolve_contact") == "resolveContact"


def test_every_operation_has_a_tag_described_at_the_top():
    top = {tag["name"]: tag.get("description") for tag in _doc()["tags"]}
    assert top == TAGS and all(top.values())
    undefined = {(p, m, t) for p, m, op in _ops() for t in op.get("tags") or ["(none)"] if t not in top}
    assert not undefined, sorted(undefined)
    used = {t for _, _, op in _ops() for t in op["tags"]}
    assert used == set(top), f"described but unused: {set(top) - used}"


def test_info_has_license_and_contact():
    info = _doc()["info"]
    assert info["license"]["name"] and info["license"]["identifier"]
    assert info["contact"]["name"] and info["contact"]["email"]


def test_session_only_routes_declare_only_the_session_scheme():
    import importlib

    marked = set()
    for app_file in sorted(FUNCTIONS.glob("*/app.py")):
        if "create_resolver()" not in app_file.read_text():
            continue
        app = importlib.import_module(f"functions.{app_file.parent.name}.app").app
        for route in app.routes:
            access = route_access(route)
            if access is not None and access.sessions_only:
                marked.add((route.openapi_path, route.method.lower()))
    declared = {(p, m) for p, m, op in _ops() if op.get("security") == [{"Session": []}]}
    assert ("/v1/auth/me", "get") in marked and ("/v1/settings/sessions", "get") in marked
    assert declared == marked
    assert _doc()["components"]["securitySchemes"]["Session"]["scheme"] == "bearer"


def test_creates_link_to_the_read_of_what_they_made():
    paths = _doc()["paths"]
    link = paths["/v1/contacts"]["post"]["responses"]["201"]["links"]["getContact"]
    assert link == {**link, "operationId": "getContact", "parameters": {"contactID": "$response.body#/data/id"}}
    note = paths["/v1/contacts/{contactID}/notes"]["post"]["responses"]["201"]["links"]["getNote"]
    assert note["parameters"] == {"contactID": "$request.path.contactID", "noteID": "$response.body#/data/id"}
    assert "getMessage" in paths["/v1/messages"]["post"]["responses"]["202"]["links"]
    assert set(paths["/v1/contacts"]["post"]["responses"]["201"]["links"]) == {
        "getContact",
        "updateContact",
        "deleteContact",
    }
    ids = {op["operationId"]: (p, m) for p, m, op in _ops()}
    for path, _method, op in _ops():
        for response in op["responses"].values():
            links = response.get("links", {})
            targets = {ids[target["operationId"]] for target in links.values()}
            if links:  # the read of the new resource, and only operations on that one path
                assert len({p for p, _ in targets}) == 1 and any(m == "get" for _, m in targets), (path, targets)
            for target in links.values():
                target_path, _ = ids[target["operationId"]]
                assert set(target["parameters"]) == set(re.findall(r"\{([^}]+)\}", target_path)), (path, target)


def test_list_meta_is_typed():
    meta = _doc()["components"]["schemas"]["Meta"]
    assert "additionalProperties" not in meta
    assert set(meta["properties"]) == {"has_more", "limit", "offset", "cursor", "total"}
    assert meta["required"] == ["has_more", "limit"]


def test_every_timestamp_of_a_resource_is_a_date_time():
    schemas = _doc()["components"]["schemas"]
    untyped = []
    for name, schema in schemas.items():
        if schema.get("additionalProperties") is False:
            continue  # request bodies (Strict models): their `*_at` inputs keep their own rules
        for field, prop in schema.get("properties", {}).items():
            if field.endswith("_at") and "date-time" not in str(prop):
                untyped.append(f"{name}.{field}")
    assert not untyped, untyped


def test_request_schemas_carry_no_default_that_generators_read_as_required():
    doc = _doc()
    text = doc["components"]["schemas"]["TextContent"]["properties"]["preview_url"]
    assert "default" not in text and "Default: `false`." in text["description"]
    assert "preview_url" not in doc["components"]["schemas"]["TextContent"]["required"]


def test_qualified_names_are_also_the_titles():
    groups = [
        ("catalog", {"paths": {}, "components": {"schemas": {"Template": {"title": "Template", "x": 1}}}}),
        ("cdp", {"paths": {}, "components": {"schemas": {"Template": {"title": "Template", "x": 2}}}}),
    ]
    _qualify_colliding_schemas(groups)
    titles = [schema["components"]["schemas"][f"{g.title()}Template"]["title"] for g, schema in groups]
    assert titles == ["CatalogTemplate", "CdpTemplate"]
