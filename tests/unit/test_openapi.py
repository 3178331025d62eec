"""The served OpenAPI document is the one the code generates, and every route declares who may call it."""

from __future__ import annotations

import importlib
from pathlib import Path

from switchboard.api.auth import route_access
from switchboard.openapi_doc import DOC_PATH, build_openapi, render

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"


def resolvers():
    for app_file in sorted(FUNCTIONS.glob("*/app.py")):
        if "create_resolver()" in app_file.read_text():
            yield app_file.parent.name, importlib.import_module(f"functions.{app_file.parent.name}.app").app


def test_committed_openapi_matches_the_code():
    generated = render(build_openapi(FUNCTIONS))
    assert DOC_PATH.read_text() == generated, "run `make openapi` and commit layers/core/switchboard/openapi.json"


def test_document_is_openapi_3_with_security_schemes():
    doc = build_openapi(FUNCTIONS)
    assert doc["openapi"].startswith("3.")
    assert set(doc["components"]["securitySchemes"]) == {"ApiKey", "Bearer", "Session"}
    assert doc["paths"]["/v1/health"]["get"]["security"] == []
    assert "ErrorEnvelope" in doc["components"]["schemas"]


def test_every_route_is_documented_and_declares_access():
    doc = build_openapi(FUNCTIONS)
    count = 0
    for name, app in resolvers():
        for route in app.routes:
            count += 1
            assert route_access(route) is not None, f"{name}: {route.method} {route.path} declares no access"
            assert route.method.lower() in doc["paths"][route.openapi_path], (name, route.path)
    assert count >= 4
