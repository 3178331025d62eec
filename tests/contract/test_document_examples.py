"""Every example the OpenAPI document shows is one the server accepts or could answer.

An example that does not fit its own schema teaches integrators the wrong shape (and generated mocks, contract tests
and fuzzers seeded with examples start from a broken value). Two checks:
- every `examples` of a component schema, and every `example` / `examples` of a media type or a parameter, validates
  against its schema in the committed document (JSON Schema 2020-12, formats checked);
- every model's `openapi_examples` (`switchboard.models.BaseModel`) passes the model itself, so the rules the schema
  cannot state (`exactly_one_of` validators, storable numbers, …) hold for the examples too.
No stack is started: this reads the document and the models.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import switchboard
from switchboard.models import BaseModel
from switchboard.openapi_doc import load_openapi

DOC_URI = "urn:switchboard:openapi"


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(DOC_URI, Resource.from_contents(doc, DRAFT202012))
    rebased = _rebase(schema)
    return jsonschema.Draft202012Validator(rebased, registry=registry, format_checker=jsonschema.FormatChecker())


def _rebase(node: Any) -> Any:
    """`#/components/…` refs point into the document resource (the schema under test is not the document's root)."""
    if isinstance(node, dict):
        return {k: (DOC_URI + v if k == "$ref" and v.startswith("#/") else _rebase(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node


def document_examples(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(where, schema, example) for every example the document states."""
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        for index, example in enumerate(schema.get("examples", [])):
            yield f"components.schemas.{name}.examples[{index}]", {"$ref": f"#/components/schemas/{name}"}, example
    for path, operations in doc.get("paths", {}).items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            media = [("requestBody", m) for m in operation.get("requestBody", {}).get("content", {}).values()]
            for status, response in operation.get("responses", {}).items():
                media += [(f"responses.{status}", m) for m in response.get("content", {}).values()]
            media += [(f"parameters.{p.get('name')}", p) for p in operation.get("parameters", [])]
            for part, holder in media:
                if "schema" not in holder:
                    continue
                if "example" in holder:
                    yield f"{where} {part}.example", holder["schema"], holder["example"]
                for key, example in (holder.get("examples") or {}).items():
                    if "value" in example:
                        yield f"{where} {part}.examples.{key}", holder["schema"], example["value"]


def _failures(doc: dict[str, Any]) -> list[str]:
    failures = []
    for where, schema, example in document_examples(doc):
        errors = sorted(_validator(doc, schema).iter_errors(example), key=lambda e: list(e.absolute_path))
        failures += [f"{where}: {'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:3]]
    return failures


def test_every_example_of_the_document_fits_its_schema() -> None:
    doc = load_openapi()
    assert sum(1 for _ in document_examples(doc)) >= 50, "the document should carry examples"
    failures = _failures(doc)
    assert not failures, "\n".join(failures)


def test_an_example_that_breaks_its_schema_is_reported() -> None:
    doc = load_openapi()
    broken = {"ResolveRequest": {"examples": [{"identifiers": []}]}, "Note": {"examples": [{"id": "cn_1"}]}}
    mutated = {**doc, "components": {**doc["components"], "schemas": {**doc["components"]["schemas"]}}}
    for name, extra in broken.items():
        mutated["components"]["schemas"][name] = {**doc["components"]["schemas"][name], **extra}
    failures = _failures(mutated)
    assert any(f.startswith("components.schemas.ResolveRequest.examples[0]: identifiers") for f in failures), failures
    assert any(f.startswith("components.schemas.Note.examples[0]") for f in failures), failures


def _models() -> Iterator[type[BaseModel]]:
    root = Path(switchboard.__file__).parent  # every module, namespace packages (no __init__.py) included
    for file in sorted(root.rglob("*.py")):
        parts = file.relative_to(root.parent).with_suffix("").parts
        importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    seen: set[type[BaseModel]] = set()
    stack = list(BaseModel.__subclasses__())
    while stack:
        model = stack.pop()
        if model not in seen:
            seen.add(model)
            stack += model.__subclasses__()
            yield model


def _model_examples() -> list[tuple[str, type[BaseModel], Any]]:
    return [
        (f"{model.__module__}.{model.__qualname__}[{index}]", model, example)
        for model in _models()
        for index, example in enumerate(model.__dict__.get("openapi_examples", ()))
    ]


@pytest.mark.parametrize(
    ("where", "model", "example"), _model_examples(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_model_example_passes_its_model(where: str, model: type[BaseModel], example: Any) -> None:
    model.model_validate(example)
