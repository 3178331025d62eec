"""The resolver factory: every failure leaves in the error envelope with the right status and code."""

from __future__ import annotations

import base64
from typing import Annotated

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from pydantic import BaseModel, Field

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import authenticated, public, requires
from switchboard.errors import Conflict, NotFound, RateLimited
from tests.helpers import FakeContext, api_event, body_of, owner_auth


class Thing(BaseModel):
    name: str = Field(min_length=1)
    count: int = Field(ge=0, le=10)


pytestmark = pytest.mark.usefixtures("aws_resources")

app = create_resolver()


@app.get("/v1/things", middlewares=requires("viewer"))
def list_things(limit: Annotated[int, Query(ge=1, le=100)] = 20) -> dict:
    return {"data": [], "meta": {"has_more": False, "limit": limit}}


@app.post("/v1/things", middlewares=requires("member"), status_code=201)
def create_thing(thing: Annotated[Thing, Body()]) -> dict:
    return {"data": thing.model_dump()}


@app.delete("/v1/things/<thing_id>", middlewares=requires("admin"))
def delete_thing(thing_id: str) -> dict:
    if thing_id == "missing":
        raise NotFound()
    if thing_id == "busy":
        raise Conflict("It is in use.", code="lock_held", details=[{"owner": "x"}])
    if thing_id == "slow":
        raise RateLimited(retry_after=7)
    raise RuntimeError("secret internal detail")


@app.post("/v1/things/archive", middlewares=requires("member"))
def archive_things() -> dict:
    return {"data": {"archived": True}}


@app.get("/v1/me", middlewares=authenticated())
def me() -> dict:
    return {"data": {"ok": True}}


@app.get("/v1/open", middlewares=public())
def open_route() -> dict:
    return {"data": {"open": True}}


handler = make_handler(app)


def call(method: str, path: str, **kwargs):
    kwargs.setdefault("authorizer", owner_auth())
    return handler(api_event(method, path, **kwargs), FakeContext())


def assert_error(resp, status: int, code: str):
    assert resp["statusCode"] == status, resp
    body = body_of(resp)
    assert set(body) == {"error"}
    err = body["error"]
    assert err["code"] == code
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["details"], list)
    assert err["request_id"]
    assert resp["multiValueHeaders"]["Content-Type"] == ["application/json"]
    return err


def test_validation_error_names_the_field():
    err = assert_error(call("POST", "/v1/things", body={"name": "", "count": 11}), 400, "validation_failed")
    fields = {d["field"] for d in err["details"]}
    assert fields == {"body.name", "body.count"}
    assert all(d["message"] for d in err["details"])


def test_missing_field_is_reported():
    err = assert_error(call("POST", "/v1/things", body={"name": "a"}), 400, "validation_failed")
    assert {"field": "body.count", "message": "Field required"} in err["details"]


def test_query_bounds_are_validated():
    err = assert_error(call("GET", "/v1/things", query={"limit": "0"}), 400, "validation_failed")
    assert err["details"][0]["field"] == "query.limit"


def test_malformed_json_is_invalid_json():
    assert_error(call("POST", "/v1/things", raw_body="{not json"), 400, "invalid_json")


def test_body_that_is_not_json_by_content_type_is_415():
    # Found by the contract fuzzer: `Content-Type: text/plain` on a route with a JSON body was a 500.
    event = api_event(
        "POST", "/v1/things", raw_body='{"name": "a", "count": 1}', headers={"Content-Type": "text/plain"}
    )
    event["requestContext"]["authorizer"] = owner_auth()
    assert_error(handler(event, FakeContext()), 415, "unsupported_media_type")
    # ... and a multipart or form body (Powertools would parse the form, or fail on a missing boundary: a 500).
    for content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        event = api_event("POST", "/v1/things", raw_body="name=a&count=1", headers={"Content-Type": content_type})
        event["requestContext"]["authorizer"] = owner_auth()
        assert_error(handler(event, FakeContext()), 415, "unsupported_media_type")
    json_with_charset = api_event(
        "POST",
        "/v1/things",
        body={"name": "a", "count": 1},
        headers={"Content-Type": "application/json; charset=utf-8"},
        authorizer=owner_auth(),
    )
    assert handler(json_with_charset, FakeContext())["statusCode"] == 201


def test_body_that_is_not_utf8_is_invalid_json():
    # Found by the contract fuzzer: a base64 body that does not decode to UTF-8 used to answer 500.
    event = api_event(
        "POST", "/v1/things", raw_body=base64.b64encode(b"\xc1\xd7\xbc{").decode(), authorizer=owner_auth()
    )
    event["isBase64Encoded"] = True
    assert_error(handler(event, FakeContext()), 400, "invalid_json")


def test_success_and_status_code():
    resp = call("POST", "/v1/things", body={"name": "a", "count": 1})
    assert resp["statusCode"] == 201
    assert body_of(resp) == {"data": {"name": "a", "count": 1}}


def test_unknown_route_and_wrong_method():
    assert_error(call("GET", "/v1/nothing"), 404, "route_not_found")
    resp = call("PUT", "/v1/things")
    assert_error(resp, 405, "method_not_allowed")
    assert resp["multiValueHeaders"]["Allow"] == ["GET, POST"]


def test_a_static_path_never_resolves_as_an_id():
    """`/v1/things/archive` is a route of its own: another method there is 405 with the static route's methods, not
    `DELETE /v1/things/{thing_id}` with `thing_id = "archive"` (nor an Allow listing that route's methods)."""
    for method in ("DELETE", "GET", "OPTIONS"):
        resp = call(method, "/v1/things/archive")
        assert_error(resp, 405, "method_not_allowed")
        assert resp["multiValueHeaders"]["Allow"] == ["POST"]
    assert call("POST", "/v1/things/archive")["statusCode"] == 200
    assert_error(call("DELETE", "/v1/things/missing"), 404, "not_found")  # ids still reach the dynamic route


def test_domain_errors_map_to_status_code_and_details():
    assert_error(call("DELETE", "/v1/things/missing"), 404, "not_found")
    err = assert_error(call("DELETE", "/v1/things/busy"), 409, "lock_held")
    assert err["details"] == [{"owner": "x"}]
    resp = call("DELETE", "/v1/things/slow")
    assert_error(resp, 429, "rate_limited")
    assert resp["multiValueHeaders"]["Retry-After"] == ["7"]


def test_unexpected_error_hides_internals():
    resp = call("DELETE", "/v1/things/boom")
    err = assert_error(resp, 500, "internal_error")
    assert "secret" not in resp["body"]
    assert "Traceback" not in err["message"]


@pytest.mark.parametrize(
    ("role", "method", "path", "allowed"),
    [
        ("viewer", "GET", "/v1/things", True),
        ("viewer", "POST", "/v1/things", False),
        ("member", "POST", "/v1/things", True),
        ("member", "DELETE", "/v1/things/missing", False),
        ("admin", "DELETE", "/v1/things/missing", True),
        ("owner", "DELETE", "/v1/things/missing", True),
    ],
)
def test_roles_are_enforced_per_route(role, method, path, allowed):
    resp = call(method, path, body={"name": "a", "count": 1}, authorizer=owner_auth(role=role))
    if allowed:
        assert resp["statusCode"] != 403
    else:
        assert_error(resp, 403, "forbidden")


def test_no_credential_context_is_unauthenticated():
    assert_error(call("GET", "/v1/things", authorizer=None), 401, "unauthenticated")
    assert_error(call("GET", "/v1/me", authorizer=None), 401, "unauthenticated")
    assert call("GET", "/v1/open", authorizer=None)["statusCode"] == 200


def test_session_without_organization_is_forbidden_on_org_routes_but_authenticated():
    auth = {**owner_auth(), "principal_type": "session", "organization_id": "", "role": ""}
    assert_error(call("GET", "/v1/things", authorizer=auth), 403, "forbidden")
    assert call("GET", "/v1/me", authorizer=auth)["statusCode"] == 200


def test_body_over_256_kib_is_refused():
    big = {"name": "x" * (260 * 1024), "count": 1}
    assert_error(call("POST", "/v1/things", body=big), 413, "payload_too_large")
