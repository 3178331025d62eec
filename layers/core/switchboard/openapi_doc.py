"""The one OpenAPI document of the whole API.

Each endpoint group is its own Lambda with its own resolver, and the system function cannot import the others'
code, so the merged document is generated at build time (`make openapi`, Powertools' OpenAPIMerge over every
`functions/*/app.py`) into this package, and served from here. A test fails when the file drifts from the code.
"""

from __future__ import annotations

import importlib
import json
import re
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


# Every tag an operation carries, described once (a test fails when a route brings a tag that is not here).
TAGS: dict[str, str] = {
    "system": "Health, readiness, version and this document. Public.",
    "auth": "Sign-up, e-mail verification, sign-in and sign-out, password reset, and the signed-in user's own "
    "account, preferences, presence and onboarding.",
    "users": "The signed-in user's profile, avatar, privacy and block list; account look-ups on a channel.",
    "organizations": "The current organization (read, rename, delete, restore) and the caller's organizations.",
    "members": "The organization's members and their roles.",
    "invitations": "Invitations by e-mail to join the organization, and their acceptance.",
    "teams": "Teams of members, for conversation assignment.",
    "api-keys": "API keys of the organization, each with a role; the key itself is shown once, at creation.",
    "audit-logs": "Who did what in the organization, newest first.",
    "settings": "Sessions of the signed-in user and the organization's security settings.",
    "billing": "Billing profile, plans and invoices (owner only).",
    "integrations": "Connections to outside services, from the integration catalogue.",
    "notifications": "Per-member notification preferences.",
    "webhooks": "Webhook endpoints, their deliveries and attempts, alerting, and the webhook portal.",
    "channels": "Messaging channels (sandbox, WhatsApp Business Platform, linked device): create, connect, status, "
    "settings, profiles, blocked numbers, and the sandbox's simulated inbound messages.",
    "messages": "Send messages, and read, edit, delete, react to and mark them; media downloads and uploads.",
    "media": "Uploaded media assets.",
    "conversations": "Conversation threads with a contact: messages, assignment, lock, labels, archive and mute.",
    "orders": "Orders from WhatsApp carts and bills (`order_details`), their status (`order_status` messages) and "
    "payment status.",
    "providers": "Callbacks from channel providers (public, checked by the provider's signature).",
    "contacts": "The CRM contact: create or upsert, resolve by identifiers, notes, tags, consent, suppressions, "
    "blocking and merge.",
    "contact-tags": "The organization's contact tags.",
    "cdp: custom fields": "Custom fields of contacts.",
    "cdp: lifecycle stages": "Lifecycle stages, contacts' stages and stage metrics.",
    "cdp: events": "Customer events ingested for contacts, and the activity log.",
    "cdp: objects": "Custom object types, their fields, records, comments and relationships.",
    "cdp: imports": "Bulk contact imports (CSV or JSON).",
    "cdp: segments": "Segments of contacts by rules, and their members.",
    "cdp: templates": "Customer-data templates: bundles of custom fields, stages and segments to apply at once.",
    "templates": "Message templates of a channel's provider: create, sync, submit, and the template library.",
    "labels": "Labels on chats and messages.",
    "chats and calls": "Chat actions on the channel (archive, mute, pin, history sync) and call rejection.",
    "groups": "Chat groups on a channel: create, join, leave, rename, participants and invite links.",
    "group hubs and communities": "Group hubs and communities that gather groups.",
    "newsletters": "Channel newsletters: create, subscribe, invite links and their messages.",
    "business account onboarding": "Onboarding of a WhatsApp Business Account: OAuth, code exchange, phone "
    "registration, webhook subscription and progress.",
}

# The security of the routes that act as a signed-in person (`Access.sessions_only`): API keys are refused there.
SESSION_SECURITY: list[dict[str, list[str]]] = [{"Session": []}]
# Every route that acts in an organization (a role is required) takes it (`components.parameters.OrganizationId`):
# how a session names its organization.
ORGANIZATION_HEADER: dict[str, Any] = {
    "name": "X-Organization-Id",
    "in": "header",
    "required": False,
    "description": (
        "Sessions: the organization to act in (`org_…`), for a user who belongs to several; without it a session "
        "acts in its user's only organization (403 `forbidden` when there are several), and an organization the "
        "user does not belong to is never acted in. API keys act in their own organization and ignore it."
    ),
    # no bounds: API keys ignore the header, so no value of it is ever refused (the fuzzer's negative phase checks)
    "schema": {"type": "string"},
}


def operation_id(function_name: str) -> str:
    """The one operationId convention: the handler's name in camelCase (`create_contact` → `createContact`)."""
    head, *rest = function_name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _load_resolver(app_file: Path) -> Any:
    module = importlib.import_module(f"functions.{app_file.parent.name}.app")
    return module.app


def security_schemes() -> dict[str, Any]:
    """Built only when documenting: the OpenAPI models are a large import that no request needs."""
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    return {
        "ApiKey": APIKey(name="X-Api-Key", in_=APIKeyIn.header, description="API key (sk_live_… / sk_test_…)"),  # type: ignore[call-arg]
        "Bearer": HTTPBearer(description="Session token or API key"),
        "Session": HTTPBearer(
            description="A signed-in user's session token (POST /v1/auth/login); API keys are refused"
        ),
    }


def _resolver_schema(resolver: Any) -> dict[str, Any]:
    """One resolver's document with the envelope's error responses and explicit security on public routes."""
    # documenting only (`make openapi`): the system function serves the stored document and never loads these
    from switchboard import __version__
    from switchboard.api.app import DEFAULT_SECURITY
    from switchboard.api.auth import route_access

    resolver.configure_openapi(
        title="Switchboard API", version=__version__, security_schemes=security_schemes(), security=DEFAULT_SECURITY
    )
    routes = resolver.routes
    access_of = {(route.openapi_path, route.method.lower()): route_access(route) for route in routes}
    names = {(route.openapi_path, route.method.lower()): operation_id(route.func.__name__) for route in routes}
    schema: dict[str, Any] = json.loads(resolver.get_openapi_json_schema())
    for path, ops in schema.get("paths", {}).items():
        for method, op in ops.items():
            access = access_of.get((path, method))
            is_public = access is not None and access.kind == "public"
            op["operationId"] = names[(path, method)]
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
            elif access is not None and access.sessions_only:
                op["security"] = SESSION_SECURITY
            if access is not None and access.kind == "role":
                op.setdefault("parameters", []).append({"$ref": "#/components/parameters/OrganizationId"})
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
    (`CatalogTemplate`, `CdpTemplate`), as name and title, in every group that has them, until no name means two
    schemas."""
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
                # The title too: generators name their classes after it (two `Template` classes would clash).
                renamed["components"]["schemas"] = {
                    renames.get(k, k): {**v, "title": renames[k]} if k in renames else v for k, v in schemas.items()
                }
                groups[index] = (group, renamed)


def build_openapi(functions_dir: Path) -> dict[str, Any]:
    # documenting only (`make openapi`): the system function serves the stored document and never loads these
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
    from aws_lambda_powertools.event_handler.openapi.models import Contact, License, Tag

    from switchboard import __version__
    from switchboard.api.app import DEFAULT_SECURITY
    from switchboard.api.envelope import ErrorEnvelope
    from switchboard.openapi_examples import add_operation_examples

    merge = OpenAPIMerge(
        title="Switchboard API",
        version=__version__,
        description="Business messaging on chat channels and CRM data for multi-tenant organizations.",
        tags=[Tag(name=name, description=text) for name, text in TAGS.items()],
        contact=Contact(name="Switchboard API team", email="api@switchboard.local"),
        license_info=License(name="Proprietary", identifier="LicenseRef-Switchboard-Proprietary"),
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
    add_operation_examples(doc)
    doc["paths"] = dict(sorted(doc.get("paths", {}).items()))
    envelope = ErrorEnvelope.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(envelope.pop("$defs", {}))
    schemas["ErrorEnvelope"] = envelope
    doc["components"].setdefault("parameters", {})["OrganizationId"] = ORGANIZATION_HEADER
    _check_operation_ids(doc)
    _link_creates_to_gets(doc)
    _request_defaults_as_text(doc)
    return doc


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        own = {ref[len(REF_PREFIX) :]} if isinstance(ref, str) and ref.startswith(REF_PREFIX) else set()
        return own.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _request_defaults_as_text(doc: dict[str, Any]) -> None:
    """A request field with a `default` is optional: the server applies the default. Typed-client generators read a
    schema property's `default` as "always present" (openapi-typescript makes it required), which is true of a
    response and false of a request, so in every schema a request body reaches the default is said in the field's
    description instead, and the field stays optional for every generator."""
    schemas = doc["components"]["schemas"]
    todo = set().union(*(_refs(op.get("requestBody", {})) for item in doc["paths"].values() for op in item.values()))
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        if name in reached or name not in schemas:
            continue
        reached.add(name)
        todo |= _refs(schemas[name])
    for name in sorted(reached):
        for prop in schemas[name].get("properties", {}).values():
            if "default" in prop:
                default = json.dumps(prop.pop("default"), ensure_ascii=False)
                text = prop.get("description", "").rstrip()
                prop["description"] = f"{text}{' ' if text else ''}Default: `{default}`."


def _check_operation_ids(doc: dict[str, Any]) -> None:
    seen: dict[str, str] = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            if (other := seen.setdefault(op["operationId"], where)) != where:
                raise ValueError(f"operationId {op['operationId']} of both {other} and {where}: rename a handler")


def _data_has_id(doc: dict[str, Any], response: dict[str, Any]) -> bool:
    """Whether a JSON response is `{"data": {..., "id"}}` (the envelope of one resource)."""
    schemas = doc["components"]["schemas"]

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref", "")
        return schemas.get(ref[len(REF_PREFIX) :], {}) if ref.startswith(REF_PREFIX) else node

    envelope = resolve(response.get("content", {}).get("application/json", {}).get("schema", {}))
    data = resolve(envelope.get("properties", {}).get("data", {}))
    return "id" in data.get("properties", {})


# Creates whose new resource is read at a path that is not theirs plus `/{id}`.
CREATES_ELSEWHERE = {
    "/v1/templates/{templateID}/duplicate": "/v1/templates/{templateID}",
    "/v1/templates/library/{libraryItemID}": "/v1/templates/{templateID}",
}


def _link_creates_to_gets(doc: dict[str, Any]) -> None:
    """OpenAPI `links` from each create (`POST /things`, or `POST /things/{id}/parts`) to the read of what it made
    (`GET /things/{thingID}`) and the other operations on that path: the new resource's `data.id` fills their last
    parameter, the request's own path parameters the others. Generators and stateful fuzzers (tests/contract) chain
    them through it."""
    paths = doc["paths"]
    for path, item in paths.items():
        create = item.get("post")
        if create is None:
            continue
        reads = [
            (child, paths[child]["get"])
            for child in paths
            if child.startswith(path + "/{") and child.count("/") == path.count("/") + 1 and "get" in paths[child]
        ]
        if path in CREATES_ELSEWHERE:
            reads = [(CREATES_ELSEWHERE[path], paths[CREATES_ELSEWHERE[path]]["get"])]
        if len(reads) != 1:
            continue
        child, read = reads[0]
        *kept, new_param = re.findall(r"\{([^}]+)\}", child)
        parameters = {name: f"$request.path.{name}" for name in kept}
        parameters[new_param] = "$response.body#/data/id"
        # The read first, then the resource's other operations (update, replace, delete, an action on it).
        targets = [read] + [op for method, op in paths[child].items() if method != "get"]
        link = {
            op["operationId"]: {
                "operationId": op["operationId"],
                "parameters": parameters,
                "description": f"The new resource's `{new_param}` (its `data.id`), for {op['operationId']}.",
            }
            for op in targets
        }
        for status, response in create["responses"].items():
            if status in ("200", "201", "202") and _data_has_id(doc, response):
                response["links"] = link


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    functions_dir = Path(argv[1]) if len(argv) > 1 else Path("functions")
    DOC_PATH.write_text(render(build_openapi(functions_dir)))
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
