"""The one OpenAPI document of the whole API.

Each endpoint group is its own Lambda with its own resolver, and the system function cannot import the others'
code, so the merged document is generated at build time (`make openapi`, Powertools' OpenAPIMerge over every
`functions/*/app.py`) into this package, and served from here. A test fails when the file drifts from the code.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

DOC_PATH = Path(__file__).with_name("openapi.json")
REF_PREFIX = "#/components/schemas/"


@lru_cache(maxsize=1)
def load_openapi() -> dict[str, Any]:
    return json.loads(DOC_PATH.read_text())  # type: ignore[no-any-return]


def _error_responses(public: bool, path: str = "") -> dict[str, Any]:
    ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}
    statuses = {"400": "Invalid request", "429": "Rate limited", "500": "Internal error", "503": "Unavailable"}
    if not public:
        statuses |= {"401": "Unauthenticated", "403": "Forbidden", "404": "Not found", "409": "Conflict"}
        # `provider_rejected` (switchboard.providers.base.ProviderRejected): a channel's provider refused the call.
        statuses["422"] = "Refused by the channel's provider"
    elif "{" in path:
        statuses["404"] = "Not found"  # a public route that names a resource (a provider callback's channel)
    return {code: {"description": text, **ref} for code, text in statuses.items()}


def _load_resolver(app_file: Path) -> Any:
    import importlib

    module = importlib.import_module(f"functions.{app_file.parent.name}.app")
    return module.app


def security_schemes() -> dict[str, Any]:
    """Built only when documenting: the OpenAPI models cost ~70 ms of import that no request needs."""
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    return {
        "ApiKey": APIKey(name="X-Api-Key", in_=APIKeyIn.header, description="API key (sk_live_… / sk_test_…)"),  # type: ignore[call-arg]
        "Bearer": HTTPBearer(description="Session token or API key"),
    }


def _resolver_schema(resolver: Any) -> dict[str, Any]:
    """One resolver's document with the envelope's error responses and explicit security on public routes."""
    from switchboard import __version__
    from switchboard.api.app import DEFAULT_SECURITY
    from switchboard.api.auth import route_access

    resolver.configure_openapi(
        title="Switchboard API", version=__version__, security_schemes=security_schemes(), security=DEFAULT_SECURITY
    )
    public_ops = {
        (route.openapi_path, route.method.lower())
        for route in resolver.routes
        if (access := route_access(route)) is not None and access.kind == "public"
    }
    schema: dict[str, Any] = json.loads(resolver.get_openapi_json_schema())
    for path, ops in schema.get("paths", {}).items():
        for method, op in ops.items():
            is_public = (path, method) in public_ops
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            if "204" in responses:
                responses["204"].pop("content", None)  # a 204 has no body (Powertools documents a JSON `null`)
            if responses.get("500", {}).get("description") == "Response Validation Error":
                responses.pop("500")
            for code, response in _error_responses(is_public, path).items():
                responses.setdefault(code, response)
            if "requestBody" in op:
                responses.setdefault("415", {**_error_responses(True)["400"], "description": "Not a JSON body"})
            if is_public:
                op["security"] = []
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    return schema


def _rename_refs(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX) and ref[len(REF_PREFIX) :] in renames:
            node = {**node, "$ref": REF_PREFIX + renames[ref[len(REF_PREFIX) :]]}
        return {k: _rename_refs(v, renames) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename_refs(v, renames) for v in node]
    return node


def _qualify_colliding_schemas(groups: list[tuple[str, dict[str, Any]]]) -> None:
    """Two groups may each have a model of the same class name (catalog's and CDP's `Template`); merged under one
    name, one group's operations would document the other's model. Such names get the group as prefix
    (`CatalogTemplate`, `CdpTemplate`), in every group that has them, until no name means two schemas."""
    while True:
        variants: dict[str, set[str]] = {}
        for _, schema in groups:
            for name, component in schema.get("components", {}).get("schemas", {}).items():
                variants.setdefault(name, set()).add(json.dumps(component, sort_keys=True))
        colliding = {name for name, seen in variants.items() if len(seen) > 1}
        if not colliding:
            return
        # One new name per distinct schema, from the first group (in order) that has it: identical copies stay one.
        qualified: dict[tuple[str, str], str] = {}
        for group, schema in groups:
            for name, component in schema.get("components", {}).get("schemas", {}).items():
                if name in colliding:
                    prefix = "".join(part.title() for part in group.split("_"))
                    qualified.setdefault((name, json.dumps(component, sort_keys=True)), prefix + name)
        for index, (group, schema) in enumerate(groups):
            components = schema.get("components", {}).get("schemas", {})
            renames = {
                name: qualified[(name, json.dumps(components[name], sort_keys=True))]
                for name in colliding
                if name in components
            }
            if renames:
                renamed = _rename_refs(schema, renames)
                schemas = renamed["components"]["schemas"]
                renamed["components"]["schemas"] = {renames.get(k, k): v for k, v in schemas.items()}
                groups[index] = (group, renamed)


def build_openapi(functions_dir: Path) -> dict[str, Any]:
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge

    from switchboard import __version__
    from switchboard.api.app import DEFAULT_SECURITY
    from switchboard.api.envelope import ErrorEnvelope

    merge = OpenAPIMerge(
        title="Switchboard API",
        version=__version__,
        description="Business messaging on chat channels and CRM data for multi-tenant organizations.",
        security_schemes=security_schemes(),
        security=DEFAULT_SECURITY,
        on_conflict="error",
    )
    groups = [
        (app_file.parent.name, _resolver_schema(_load_resolver(app_file)))
        for app_file in sorted(functions_dir.glob("*/app.py"))
        if "create_resolver()" in app_file.read_text()
    ]
    _qualify_colliding_schemas(groups)
    for _, schema in groups:
        merge.add_schema(schema)
    doc: dict[str, Any] = json.loads(merge.get_openapi_json_schema())
    doc["paths"] = dict(sorted(doc.get("paths", {}).items()))
    envelope = ErrorEnvelope.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(envelope.pop("$defs", {}))
    schemas["ErrorEnvelope"] = envelope
    return doc


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    functions_dir = Path(argv[1]) if len(argv) > 1 else Path("functions")
    DOC_PATH.write_text(render(build_openapi(functions_dir)))
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
