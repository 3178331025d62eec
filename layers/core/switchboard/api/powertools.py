"""Powertools' per-request pieces with the same behaviour and less repeated work.

Every request reads the event's headers several times (the request validation's header and cookie parameters, the
body's content type, the response builder's CORS and compression checks, our own content-type check), and
Powertools' `APIGatewayProxyEvent` builds a new case-insensitive dict at each read: six per request, ~15-25 µs.
`ProxyEvent` builds each of the two header maps once per request.

The request validation reads and normalises the query string, the headers (twice) and the cookies for every route,
then validates the parameters the route declares: most routes declare none of them (a path parameter and a body at
most). `RequestValidation` runs Powertools' own steps for the parameter kinds the route declares and skips the reads
for the kinds it does not, so the values, the errors and their order are the same. For the body it asks whether the
parameter's annotation is a sequence only when the value is a non-empty list, the one case the answer changes
anything (Powertools asks for every body: ~8 µs of ABC subclass checks against a request model).

The response validation validates the route's return value against its declared type, dumps it to Python objects
(`mode="json"`) and leaves them to the response builder's JSON encoder. `ResponseValidation` validates it the same
way and dumps it to JSON text in one step (pydantic's `dump_json`, non-ASCII escaped as `json.dumps` writes it): the
same document, ~8 µs less for a contact.

`RouteArguments` keeps Powertools' routing DEBUG message from rendering the request model on every request, and
`RoutePattern` compiles a route's expression on its first match instead of at registration (cold start).
"""

from __future__ import annotations

import logging
import re
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import _DYNAMIC_ROUTE_PATTERN
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
    _extract_field_value_from_body,
    _get_body_field_location,
    _get_embed_body,
    _handle_missing_field_value,
    _is_or_contains_sequence,
    _normalize_errors,
    _request_params_to_args,
    _validate_field,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import UploadFile
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.data_classes.common import CaseInsensitiveDict

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
    from aws_lambda_powertools.event_handler.types import EventHandlerInstance


class ProxyEvent(APIGatewayProxyEvent):
    """`APIGatewayProxyEvent` whose header maps are built on first read and kept for the request (the event is not
    changed while a request is served)."""

    @cached_property
    def headers(self) -> dict[str, str]:  # type: ignore[override]
        return _case_insensitive(self.get("headers"))

    @cached_property
    def multi_value_headers(self) -> dict[str, list[str]]:  # type: ignore[override]
        return _case_insensitive(self.get("multiValueHeaders"))


def _case_insensitive(raw: Any) -> CaseInsensitiveDict:
    """`CaseInsensitiveDict(raw)` (keys lower-cased, lookups lower-case the name), filled in one update."""
    mapping = CaseInsensitiveDict()
    if raw:
        dict.update(mapping, {key.lower(): value for key, value in raw.items()})
    return mapping


class RequestValidation(OpenAPIRequestValidationMiddleware):
    """Powertools' request validation; a route with no query, header or cookie parameter skips reading them."""

    def handler(self, app: EventHandlerInstance, next_middleware: NextMiddleware) -> Any:
        dependant = app.context["_route"].dependant
        if dependant.query_params or dependant.header_params or dependant.cookie_params:
            return super().handler(app, next_middleware)
        values, errors = _request_params_to_args(dependant.path_params, app.context["_route_args"])
        if dependant.body_params:
            body_values, body_errors = _body_to_args(dependant.body_params, self._get_body(app))
            values.update(body_values)
            errors.extend(body_errors)
        if errors:
            raise RequestValidationError(_normalize_errors(errors))
        app.context["_route_args"] = values
        return next_middleware(app)


def _body_to_args(params: list[Any], received_body: dict[str, Any] | None) -> tuple[dict[str, Any], list[Any]]:
    """Powertools' `_request_body_to_args`, step for step, with its `_normalize_field_value` written so that the
    sequence check runs only for a non-empty list (where it decides between the list and its first item)."""
    values: dict[str, Any] = {}
    errors: list[Any] = []
    received_body, alias_omitted = _get_embed_body(field=params[0], required_params=params, received_body=received_body)
    for field in params:
        loc = _get_body_field_location(field, alias_omitted)
        value = _extract_field_value_from_body(field, received_body, loc, errors)
        if value is None:
            _handle_missing_field_value(field, values, errors, loc)
            continue
        value = _normalized(value, field.field_info)
        if isinstance(value, UploadFile):
            values[field.name] = value
        else:
            values[field.name] = _validate_field(field=field, value=value, loc=loc, existing_errors=errors)
    return values, errors


def _normalized(value: Any, field_info: Any) -> Any:
    """`_normalize_field_value`: an upload for a `bytes` parameter is its content; a non-empty list for a parameter
    that takes no sequence is its first item; anything else is itself."""
    if isinstance(value, UploadFile) and field_info.annotation is bytes:
        return value.content
    if isinstance(value, list) and value and not _is_or_contains_sequence(field_info.annotation):
        return value[0]
    return value


class ResponseValidation(OpenAPIResponseValidationMiddleware):
    """Powertools' response validation; a valid JSON response is serialised straight to JSON text. Anything else (no
    body, a text body, a body already encoded, an invalid value) takes Powertools' own path, so its answers and
    errors are unchanged."""

    def _handle_response(self, *, route: Any, response: Any) -> Any:
        field = route.dependant.return_param
        adapter = getattr(field, "_type_adapter", None)
        body = response.body
        if adapter is None or not response.is_json() or body is None or isinstance(body, str | bytes):
            return super()._handle_response(route=route, response=response)  # no body, text, or encoded already
        if _returns_itself(field, body):
            value = body
        else:
            errors: list[Any] = []
            value = _validate_field(field=field, value=body, loc=("response",), existing_errors=errors)
            if errors:
                return super()._handle_response(route=route, response=response)  # raises Powertools' error
        response.body = adapter.dump_json(value, by_alias=True, ensure_ascii=True).decode()
        return response


def _returns_itself(field: Any, body: Any) -> bool:
    """The route returned an instance of exactly its declared model, which validation would hand back unchanged
    (pydantic does not revalidate a model's own instances unless the model asks for it; the return type carries no
    constraints): validating it is skipped (~3 µs)."""
    model = type(body)
    return model is field.field_info.annotation and not field.field_info.metadata and _never_revalidated(model)


@cache
def _never_revalidated(model: type) -> bool:
    from pydantic import BaseModel

    return issubclass(model, BaseModel) and model.model_config.get("revalidate_instances", "never") == "never"


# Powertools' routing logger: its last middleware frame formats the route's validated arguments into a DEBUG message
# (an f-string, so the arguments' repr is built on every request whether or not the message is emitted).
POWERTOOLS_ROUTING_LOG = logging.getLogger("aws_lambda_powertools.event_handler.api_gateway")


class RouteArguments(dict[str, Any]):
    """The route's validated arguments, unchanged, with a repr that names the arguments instead of rendering them:
    the repr of a request model (pydantic renders every field, nested models included) cost ~15-25 µs per request
    for a DEBUG message that is not emitted. Used only while that logger is not at DEBUG."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<route arguments: " + ", ".join(self) + ">"


# Powertools' own route-parameter expression and its replacement (a named group per `<name>`)
ROUTE_PARAMETER = re.compile(_DYNAMIC_ROUTE_PATTERN)


class RoutePattern:
    """A route's regular expression, compiled on its first match instead of at registration: Powertools compiles
    every route's at import (~5 ms of a 70-route function's cold start), while a request tries only the routes
    before the one it matches. Same expression, same matching; `groups` (read at registration to sort static from
    dynamic routes) is the number of path parameters."""

    __slots__ = ("_compiled", "groups", "pattern")

    def __init__(self, pattern: str, groups: int) -> None:
        self.pattern = pattern
        self.groups = groups
        self._compiled: re.Pattern[str] | None = None

    def match(self, path: str) -> re.Match[str] | None:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern)
        return compiled.match(path)
