"""A static path segment is never read as an id: `GET /v1/contacts/block` is not the contact `block` (it answered
404 "No such contact"), it is the path of `POST /v1/contacts/block` with a method it does not serve: 405 with the
static route's methods in `Allow`, and OPTIONS lists those methods only. Generic: every group, every static path that
a dynamic route of another method would match."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from switchboard.api.app import Resolver
from tests.helpers import FakeContext, api_event, body_of, owner_auth

pytestmark = pytest.mark.usefixtures("aws_resources")

ROOT = Path(__file__).resolve().parents[2]


def _module(group: str):
    return importlib.import_module(f"functions.{group}.app")


def _call(group: str, method: str, path: str):
    return _module(group).handler(api_event(method, path, authorizer=owner_auth()), FakeContext())


def _assert_405(response, allow: str) -> None:
    assert response["statusCode"] == 405, response
    error = body_of(response)["error"]
    assert error["code"] == "method_not_allowed", error
    assert error["request_id"] and isinstance(error["details"], list)
    assert response["multiValueHeaders"]["Allow"] == [allow], response["multiValueHeaders"]


@pytest.mark.parametrize(
    ("group", "path", "method", "allow"),
    [
        ("contacts", "/v1/contacts/block", "GET", "POST"),
        ("contacts", "/v1/contacts/block", "DELETE", "POST"),
        ("contacts", "/v1/contacts/unblock", "GET", "POST"),
        ("contacts", "/v1/contacts/unblock", "PATCH", "POST"),
        ("contacts", "/v1/contacts/resolve", "GET", "POST"),
        ("contacts", "/v1/contacts/resolve", "DELETE", "POST"),
        ("messaging", "/v1/messages/edit", "GET", "POST"),
        ("catalog", "/v1/templates/library", "DELETE", "GET"),
    ],
)
def test_a_static_path_with_another_method_is_405_not_an_id(group: str, path: str, method: str, allow: str):
    _assert_405(_call(group, method, path), allow)
    _assert_405(_call(group, method, path + "/"), allow)


@pytest.mark.parametrize(
    ("group", "path", "allow"),
    [
        ("contacts", "/v1/contacts/block", "POST"),
        ("contacts", "/v1/contacts/unblock", "POST"),
        ("contacts", "/v1/contacts/resolve", "POST"),
        ("catalog", "/v1/templates/library", "GET"),
    ],
)
def test_options_lists_the_static_routes_methods_only(group: str, path: str, allow: str):
    _assert_405(_call(group, "OPTIONS", path), allow)


def test_an_id_still_reaches_the_dynamic_route():
    response = _call("contacts", "GET", "/v1/contacts/ct_missing")
    assert response["statusCode"] == 404 and body_of(response)["error"]["code"] == "not_found", response
    response = _call("contacts", "OPTIONS", "/v1/contacts/ct_missing")
    _assert_405(response, "DELETE, GET, PATCH")


def test_every_shadowed_static_path_of_every_group_is_405():
    checked = 0
    for app_file in sorted((ROOT / "functions").glob("*/app.py")):
        if "create_resolver()" not in app_file.read_text():
            continue
        group = app_file.parent.name
        app: Resolver = _module(group).app
        for path, methods in app.static_paths.items():
            allow = ", ".join(sorted(set(methods)))
            for spec in app.routes:
                if spec.dynamic and spec.method not in methods and path in _concrete(spec.rule, path):
                    _assert_405(_call(group, spec.method, path), allow)
                    checked += 1
    assert checked >= 20


def _concrete(rule: str, path: str) -> set[str]:
    """`path` when the dynamic `rule` would match it segment by segment (a parameter takes any one segment)."""
    rule_parts, path_parts = rule.strip("/").split("/"), path.strip("/").split("/")
    if len(rule_parts) != len(path_parts):
        return set()
    same = all(r.startswith("<") or r == p for r, p in zip(rule_parts, path_parts, strict=True))
    return {path} if same else set()


@pytest.mark.parametrize(
    ("group", "method", "path"),
    [
        ("contacts", "POST", "/v1/contacts/\u0082<\U0010c656\uf96b|\u0096C/notes"),
        ("catalog", "POST", "/v1/templates/library/\U000c9994"),
    ],
)
def test_an_id_no_route_accepts_is_404_for_the_routes_own_method(group: str, method: str, path: str):
    """The method's own route exists but the id holds characters no path segment takes: no resource, 404 (a 405
    would tell the caller to use the method it used)."""
    response = _call(group, method, path)
    assert response["statusCode"] == 404, response
    assert body_of(response)["error"]["code"] == "route_not_found"
