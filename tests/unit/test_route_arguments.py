"""The route's validated arguments reach the route unchanged; while Powertools' routing logger is not at DEBUG they
travel as `RouteArguments`, whose repr names the arguments instead of rendering the request model (Powertools
formats them into a DEBUG message on every request); at DEBUG they stay the plain dict, so that message is the usual
one."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Body

from bench._harness import Ctx, api_event
from switchboard.api.app import PUBLIC, RouteArguments, create_resolver
from switchboard.api.auth import public
from switchboard.models import Strict


class Item(Strict):
    name: str
    tags: list[str] = []


def _resolver(seen: dict[str, Any]) -> Any:
    app = create_resolver()

    @app.post("/t/<thing>", middlewares=public(), tags=["t"], security=PUBLIC)
    def route(thing: str, body: Annotated[Item, Body()]) -> dict[str, Any]:
        seen.update(thing=thing, body=body, args=app.context["_route_args"])
        return {"data": {"thing": thing, "name": body.name}}

    return app


def _call(app: Any) -> dict[str, Any]:
    event = api_event("POST", "/t/abc", {"name": "n", "tags": ["x"]}, "org_unit")
    event["requestContext"]["authorizer"] = None  # public route: no rate limit, no idempotency record
    response = app.resolve(event, Ctx())
    assert response["statusCode"] == 200, response
    return json.loads(response["body"])


def test_arguments_unchanged_and_cheap_repr_when_debug_is_off():
    seen: dict[str, Any] = {}
    assert _call(_resolver(seen)) == {"data": {"thing": "abc", "name": "n"}}
    args = seen["args"]
    assert type(args) is RouteArguments and dict(args) == {"thing": "abc", "body": Item(name="n", tags=["x"])}
    assert repr(args) == "<route arguments: thing, body>"
    assert seen["body"] == Item(name="n", tags=["x"])


def test_plain_arguments_when_powertools_routing_debug_is_on(monkeypatch: pytest.MonkeyPatch):
    routing = logging.getLogger("aws_lambda_powertools.event_handler.api_gateway")
    monkeypatch.setattr(routing, "level", logging.DEBUG)
    routing.manager._clear_cache()
    try:
        seen: dict[str, Any] = {}
        _call(_resolver(seen))
        assert type(seen["args"]) is dict and "Item(name='n'" in repr(seen["args"])
    finally:
        monkeypatch.undo()
        routing.manager._clear_cache()
