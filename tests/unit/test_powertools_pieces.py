"""`switchboard.api.powertools` does what Powertools does with less work per request: the same validated values and
the same validation errors, in the same order, for routes with and without query, header and cookie parameters; the
same header maps; and a route's access, checked before its middleware stack, still answers `route_access`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from pydantic import BaseModel, ConfigDict, Field, field_validator

from bench._harness import Ctx, FakeDynamoDB, api_event, bench_env
from switchboard.api.app import PUBLIC, create_resolver
from switchboard.api.auth import AccessMiddleware, public, requires, route_access
from switchboard.api.powertools import ProxyEvent, RequestValidation, ResponseValidation


class Thing(BaseModel):
    name: str = Field(min_length=2)
    size: int = 1
    tags: list[str] = []


class Out(BaseModel):
    name: str
    score: float
    ratio: float = 0.5
    note: str | None = None
    items: list[Thing]


class Revalidated(BaseModel):
    """Asks pydantic to validate its own instances again: the response validation must not skip it."""

    model_config = ConfigDict(revalidate_instances="always")
    word: str

    @field_validator("word")
    @classmethod
    def _exclaim(cls, value: str) -> str:
        return value + "!"


class OutChild(Out):
    extra: int = 3


def _register(app: Any, seen: list[Any]) -> None:
    @app.post("/things/<thing_id>")
    def body_and_path(thing_id: int, body: Annotated[Thing, Body()]) -> dict[str, Any]:
        seen.append(("body_and_path", thing_id, body.model_dump()))
        return {"ok": True}

    @app.get("/things")
    def query_and_header(
        limit: Annotated[int, Query(ge=1, le=10)] = 5,
        x_tenant: Annotated[str | None, Header(alias="X-Tenant")] = None,
    ) -> dict[str, Any]:
        seen.append(("query_and_header", limit, x_tenant))
        return {"ok": True}

    @app.get("/plain/<name>")
    def path_only(name: str) -> dict[str, Any]:
        seen.append(("path_only", name))
        return {"ok": True}

    @app.get("/text")
    def text() -> Response[str]:
        return Response(status_code=200, content_type="text/plain", body="42")

    @app.get("/json-text")
    def json_text() -> str:
        return "already text"

    @app.delete("/things/<thing_id>")
    def delete(thing_id: int) -> None:
        seen.append(("delete", thing_id))

    @app.get("/typed/<name>")
    def typed(name: str) -> Out:
        if name == "bad":
            return {"name": name, "score": "not a number"}  # type: ignore[return-value]  # fails validation
        return Out(name=f"{name} \u2013 Zoë ✓", score=0.1 + 1e-7, ratio=1e16, items=[Thing(name="lamp", tags=["é"])])

    @app.get("/revalidated")
    def revalidated() -> Revalidated:
        return Revalidated(word="hi")  # validated again on the way out: "hi!!"

    @app.get("/child")
    def child() -> Out:
        return OutChild(name="c", score=1, items=[])  # a subclass: validated as `Out` (its extra field dropped)

    @app.post("/batch")
    def batch(body: Annotated[list[Thing], Body()]) -> dict[str, Any]:
        seen.append(("batch", [t.model_dump() for t in body]))
        return {"ok": True}

    @app.post("/maybe-batch")
    def maybe_batch(body: Annotated[Thing | list[Thing], Body()]) -> dict[str, Any]:
        seen.append(("maybe_batch", body.model_dump() if isinstance(body, Thing) else len(body)))
        return {"ok": True}

    @app.post("/pair")
    def pair(thing: Annotated[Thing, Body(embed=True)], count: Annotated[int, Body(embed=True)] = 1) -> dict:
        seen.append(("pair", thing.model_dump(), count))
        return {"ok": True}


def _outcome(app: Any, seen: list[Any], event: dict[str, Any]) -> Any:
    seen.clear()
    try:
        response = app.resolve(event, Ctx())
    except RequestValidationError as err:  # no exception handler registered: the errors themselves are compared
        return ("invalid", json.loads(json.dumps(err.errors(), default=str)))
    body = response["body"]
    try:
        document = json.loads(body)  # the same document; its text may differ in escaping and number spelling
    except (TypeError, ValueError):
        document = ("text", body)
    return (response["statusCode"], document, list(seen))


def _event(method: str, path: str, body: Any = None, query: dict | None = None, headers: dict | None = None) -> dict:
    event = api_event(method, path, body, "org_unit")
    if query is not None:
        event["queryStringParameters"] = query
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()}
    if headers:
        event["headers"].update(headers)
        event["multiValueHeaders"].update({k: [v] for k, v in headers.items()})
    return event


CASES = [
    _event("POST", "/things/7", {"name": "lamp", "size": 3, "tags": ["a"]}),
    _event("POST", "/things/x", {"name": "lamp"}),  # path parameter error
    _event("POST", "/things/x", {"name": "l", "size": "big"}),  # path then body errors, in that order
    _event("POST", "/things/7", {"size": 2}),  # missing field
    _event("POST", "/things/7", None),  # no body
    _event("POST", "/things/7", {"name": "lamp", "extra": {"deep": [1, 2]}}),
    _event("GET", "/things", query={"limit": "3"}, headers={"X-Tenant": "t1"}),
    _event("GET", "/things", query={"limit": "0"}),  # query error
    _event("GET", "/things"),
    _event("GET", "/plain/abc"),
    _event("GET", "/text"),  # a text body as the route gives it
    _event("GET", "/json-text"),
    _event("DELETE", "/things/3"),  # no body
    _event("GET", "/typed/ok"),  # non-ASCII text, floats, nested models, a null
    _event("GET", "/typed/bad"),  # the response fails validation: Powertools' error
    _event("GET", "/revalidated"),  # a model that revalidates its instances: validated, not skipped
    _event("GET", "/child"),  # an instance of a subclass of the declared model: validated, not skipped
    _event("POST", "/batch", [{"name": "lamp"}, {"name": "desk", "size": 2}]),  # a list body for a list
    _event("POST", "/batch", [{"name": "lamp"}, {"name": "x"}]),  # an error in the second item
    _event("POST", "/batch", []),
    _event("POST", "/batch", {"name": "lamp"}),  # an object for a list
    _event("POST", "/maybe-batch", [{"name": "lamp"}]),  # a union holding a list keeps the list
    _event("POST", "/maybe-batch", {"name": "lamp"}),
    _event("POST", "/things/7", [{"name": "lamp"}, {"name": "x"}]),  # a list for a model: its first item
    _event("POST", "/things/7", []),  # an empty list for a model
    _event("POST", "/things/7", "lamp"),  # a JSON string for a model
    _event("POST", "/pair", {"thing": {"name": "lamp"}, "count": 3}),  # embedded parameters
    _event("POST", "/pair", {"thing": [{"name": "lamp"}], "count": [4, 5]}),  # lists for embedded scalars
    _event("POST", "/pair", {"count": "x"}),  # a missing and an invalid embedded parameter, in order
    _event("POST", "/pair", ["not", "an", "object"]),  # not an object: no embedded parameter can be read
    _event("POST", "/pair", "text"),
]


@pytest.mark.parametrize("event", CASES, ids=[f"{e['httpMethod']} {e['path']} {i}" for i, e in enumerate(CASES)])
def test_same_values_and_errors_as_powertools(event: dict[str, Any]) -> None:
    stock_seen: list[Any] = []
    stock = APIGatewayRestResolver(enable_validation=True)
    _register(stock, stock_seen)

    ours_seen: list[Any] = []
    ours = APIGatewayRestResolver(enable_validation=True)
    ours._request_validation_middleware = RequestValidation()
    ours._response_validation_middleware = ResponseValidation(validation_serializer=ours._serializer)
    ours._to_proxy_event = lambda raw: ProxyEvent(raw, ours._json_body_deserializer)  # type: ignore[method-assign]
    _register(ours, ours_seen)

    expected = _outcome(stock, stock_seen, json.loads(json.dumps(event)))
    assert _outcome(ours, ours_seen, json.loads(json.dumps(event))) == expected


def test_response_text_is_json_dumps_escaping() -> None:
    """The body is the JSON document Powertools' encoder writes, non-ASCII escaped (the bytes on the wire stay
    ASCII, as before)."""
    app = create_resolver()

    @app.get("/typed", middlewares=public(), tags=["t"], security=PUBLIC)
    def typed() -> Out:
        return Out(name="Zoë ✓", score=2.5, items=[])

    event = api_event("GET", "/typed", None, "org_unit")
    event["requestContext"]["authorizer"] = None
    body = app.resolve(event, Ctx())["body"]
    assert body.isascii() and "\\u00eb" in body
    assert json.loads(body) == {"name": "Zoë ✓", "score": 2.5, "ratio": 0.5, "note": None, "items": []}


def test_header_maps_equal_powertools_and_built_once() -> None:
    raw = _event("POST", "/x", {"a": 1}, headers={"X-Mixed-Case": "v", "accept-encoding": "gzip"})
    stock, ours = APIGatewayProxyEvent(raw), ProxyEvent(raw)
    assert ours.headers == stock.headers
    assert ours.multi_value_headers == stock.multi_value_headers
    assert ours.resolved_headers_field == stock.resolved_headers_field
    assert ours.headers.get("x-MIXED-case") == stock.headers.get("x-MIXED-case") == "v"
    assert ours.headers is ours.headers and ours.multi_value_headers is ours.multi_value_headers
    assert ProxyEvent({"headers": None}).headers == APIGatewayProxyEvent({"headers": None}).headers == {}


def test_access_checked_once_and_still_readable() -> None:
    app = create_resolver()

    @app.get("/open", middlewares=public(), tags=["t"], security=PUBLIC)
    def open_route() -> dict[str, Any]:
        return {"data": {"ok": True}}

    @app.get("/admins", middlewares=requires("admin"), tags=["t"])
    def admin_route() -> dict[str, Any]:
        return {"data": {"ok": True}}

    routes = {r.path: r for r in app._static_routes}
    assert route_access(routes["/admins"]).role == "admin"  # type: ignore[union-attr]

    event = api_event("GET", "/open", None, "org_unit")
    event["requestContext"]["authorizer"] = None
    assert app.resolve(event, Ctx())["statusCode"] == 200
    with bench_env(FakeDynamoDB([])):  # the rate limiter's update, on an in-memory table
        member = api_event("GET", "/admins", None, "org_unit", role="member")
        assert app.resolve(member, Ctx())["statusCode"] == 403
        admin = api_event("GET", "/admins", None, "org_unit", role="admin")
        assert app.resolve(admin, Ctx())["statusCode"] == 200

    for path, kind in (("/open", "public"), ("/admins", "role")):
        route = routes[path]
        assert not any(isinstance(mw, AccessMiddleware) for mw in route.middlewares)  # checked by the resolver only
        assert route_access(route).kind == kind  # type: ignore[union-attr]
