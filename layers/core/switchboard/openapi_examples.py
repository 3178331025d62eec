"""Request and response examples of every operation, from the examples of the models.

Each model states its own examples (`openapi_examples`, switchboard.models), which become its schema's `examples`.
Tools that show or replay an operation (documentation viewers, mock servers, generated clients' docs) read the
examples of the operation's media types, and a response is an envelope around the model: this step gives each JSON
request body the examples of its schema, and each `{"data": …}` / `{"data": […], "meta": …}` response the envelope
around the example of its resource. An operation that states its own media examples keeps them; a schema without an
example gets none (nothing is made up). tests/contract/test_document_examples.py validates every result.
"""

from __future__ import annotations

from typing import Any

REF_PREFIX = "#/components/schemas/"
# The `meta` of a list example: a cursor list with a next page (every list's Meta accepts it).
EXAMPLE_META = {"has_more": True, "limit": 20, "cursor": "eyJrIjoiY3RfMDFqZDh4MWsyIn0"}


def _component(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    if ref.startswith(REF_PREFIX):
        return doc["components"]["schemas"].get(ref[len(REF_PREFIX) :], {})  # type: ignore[no-any-return]
    return schema


def _examples_of(doc: dict[str, Any], schema: dict[str, Any]) -> list[Any]:
    """The examples a schema (or the one it refers to) states; a nullable `anyOf` takes its non-null branch's."""
    resolved = _component(doc, schema)
    if resolved.get("examples"):
        return list(resolved["examples"])
    branches = [b for b in resolved.get("anyOf", []) if b.get("type") != "null"]
    return _examples_of(doc, branches[0]) if len(branches) == 1 else []


def _envelope_examples(doc: dict[str, Any], schema: dict[str, Any]) -> list[Any]:
    """`{"data": x}` for each example x of a Data envelope's resource; one list page for a ListData envelope."""
    envelope = _component(doc, schema)
    properties = envelope.get("properties", {})
    data = properties.get("data")
    if data is None or set(properties) - {"data", "meta"}:
        return []
    if data.get("type") == "array":
        items = _examples_of(doc, data.get("items", {}))
        return [{"data": items[:1], "meta": EXAMPLE_META}] if items and "meta" in properties else []
    return [{"data": example} for example in _examples_of(doc, data)]


def _named(examples: list[Any]) -> dict[str, dict[str, Any]]:
    return {f"example{n + 1}" if n else "example": {"value": value} for n, value in enumerate(examples)}


def add_operation_examples(doc: dict[str, Any]) -> None:
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None and not {"examples", "example"} & set(body):
                body["examples"] = _named(_examples_of(doc, body.get("schema", {})))
                if not body["examples"]:
                    del body["examples"]
            for status, response in operation.get("responses", {}).items():
                media = response.get("content", {}).get("application/json")
                if not status.startswith("2") or media is None or "examples" in media or "example" in media:
                    continue
                if examples := _envelope_examples(doc, media.get("schema", {})):
                    media["examples"] = _named(examples)
