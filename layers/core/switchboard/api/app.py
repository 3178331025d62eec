"""The resolver factory: every endpoint group's resolver is built here, so errors, auth and idempotency behave alike."""

from __future__ import annotations

import json
import logging
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import _NAMED_GROUP_BOUNDARY_PATTERN
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from switchboard import metrics, ratelimit, tracing
from switchboard.api.auth import take_access
from switchboard.api.context import current_auth_optional, header, request_id
from switchboard.api.envelope import error_body
from switchboard.api.idempotency import idempotency_middleware
from switchboard.api.jsonbody import parse_body
from switchboard.api.powertools import (
    POWERTOOLS_ROUTING_LOG,
    ROUTE_PARAMETER,
    ProxyEvent,
    RequestValidation,
    ResponseValidation,
    RouteArguments,
    RoutePattern,
)
from switchboard.config import get_settings
from switchboard.errors import DomainError, MethodNotAllowed, PayloadTooLarge, RateLimited, RouteNotFound
from switchboard.logs import redact_logs, request_context
from switchboard.providers.base import ProviderUnavailable
from switchboard.store import get_store

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
redact_logs(logger)

MAX_BODY_BYTES = 256 * 1024
DEFAULT_SECURITY: list[dict[str, list[str]]] = [{"ApiKey": []}, {"Bearer": []}]
PUBLIC: list[dict[str, list[str]]] = []


_ENCODER: json.JSONEncoder | None = None


def _json(obj: Any) -> str:
    """`json.dumps(obj, separators=(",", ":"), cls=Encoder)` with one encoder kept for the container."""
    global _ENCODER
    encoder = _ENCODER
    if encoder is None:
        from aws_lambda_powertools.shared.json_encoder import Encoder

        encoder = _ENCODER = Encoder(separators=(",", ":"))
    return encoder.encode(obj)


def error_response(app: Any, status: int, code: str, message: str, details: list | None = None, headers=None):
    return Response(
        status_code=status,
        content_type="application/json",
        body=error_body(code, message, request_id(app), details),
        headers={**app.context.get("_rate_headers", {}), **(headers or {})},
    )


def _rate_limit(app: Any) -> dict[str, str] | None:
    """Count the request against its organization's budget and its credential's (API key or session) share of it,
    in one item and one UpdateItem (fixed one-minute window); a credential without an organization (a session
    before its first organization) against its own budget. The `RateLimit-*` headers every response carries (the
    tighter budget; kept in the context for error responses too), or 429 once a budget is spent."""
    auth = current_auth_optional(app)
    if auth is None:
        return None
    settings = get_settings()
    org_limit, own_limit = settings.rate_limit_per_minute, settings.rate_limit_credential_per_minute
    credential = f"{auth.principal_type}:{auth.credential_id or auth.principal_id}"
    try:
        if auth.organization_id:
            window = ratelimit.hit_with_part(
                get_store(),
                f"api:{auth.organization_id}",
                credential,
                limit=org_limit,
                part_limit=own_limit,
                window_seconds=60,
            )
        else:
            window = ratelimit.hit(get_store(), f"api:{credential}", limit=own_limit, window_seconds=60)
    except RateLimited as err:
        app.append_context(_rate_headers=_rate_headers(min(org_limit, own_limit), 0, err.retry_after))
        raise
    headers = _rate_headers(window.limit, window.remaining, window.reset_in)
    app.append_context(_rate_headers=headers)
    return headers


def _rate_headers(limit: int, remaining: int, reset: int) -> dict[str, str]:
    return {"RateLimit-Limit": str(limit), "RateLimit-Remaining": str(remaining), "RateLimit-Reset": str(reset)}


def _field_of(loc: Any) -> str:
    parts = [str(p) for p in (loc or ()) if p != "__root__"]
    return ".".join(parts) if parts else "body"


def _validation_details(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    details = []
    for err in errors:
        field = _field_of(err.get("loc"))
        message = err.get("msg") or err.get("type") or "invalid"
        if err.get("type") == "missing":
            message = "Field required"
        details.append({"field": field, "message": str(message)})
    return details


def _core_middleware(app: Any, next_middleware: Callable[[Any], Any]) -> Any:
    """The global checks in their order, as one frame of Powertools' middleware stack (each frame, and each function
    a request passes through, costs it time): the body's size limit (413), the organization's rate limit (429, and
    `RateLimit-*` headers on every response), then idempotency (`idempotency_middleware`)."""
    args = app.context.get("_route_args")
    if type(args) is dict and not POWERTOOLS_ROUTING_LOG.isEnabledFor(logging.DEBUG):
        app.context["_route_args"] = RouteArguments(args)
    body = app.current_event.body
    if body and len(body) > MAX_BODY_BYTES:
        raise PayloadTooLarge()
    rate_headers = _rate_limit(app)
    response = idempotency_middleware(app, next_middleware)
    if rate_headers:
        response.headers.update(rate_headers)
    return response


def _allowed_methods(app: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods of the routes a path names: a static route's own when one matches (`/v1/contacts/block` is not
    a value of `/v1/contacts/{contactID}`), else those of every route matching it."""
    routes = [r for r in app._static_routes if r.rule.match(path)] or [
        r for r in app._dynamic_routes if r.rule.match(path)
    ]
    return sorted({r.method for r in routes})


NOT_JSON = "The request body must be JSON (Content-Type: application/json)."


def _refused_body(app: Any, route: Any) -> Response | None:
    """The error for a body a JSON-body route refuses before validating it, or None:
    - sent as something other than JSON (415): Powertools would parse a form, or fail on a multipart header without
      boundary; no Content-Type at all is read as JSON (routes reading the raw body, provider callbacks, declare no
      body parameter and are not concerned);
    - a top-level JSON array for an object body (400): Powertools would validate the array's first element in its
      place (so `[{...}]` passed as `{...}` and `[null]` as no body at all)."""
    body = app.current_event.body
    if not body:
        return None
    media_type = (header(app, "content-type") or "").split(";", 1)[0].strip().lower()
    if media_type and media_type != "application/json" and not media_type.endswith("+json"):
        return error_response(app, 415, "unsupported_media_type", NOT_JSON)
    if body.lstrip()[:1] == "[" and not any(
        _sequence_annotation(p.field_info.annotation) for p in route.dependant.body_params
    ):
        details = [{"field": "body", "message": "Input should be a JSON object, not an array"}]
        return error_response(app, 400, "validation_failed", "body: must be a JSON object", details)
    return None


def _sequence_annotation(annotation: Any) -> bool:
    import typing
    from collections.abc import Sequence

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _sequence_annotation(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_sequence_annotation(a) for a in typing.get_args(annotation))
    return isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str


class Resolver(APIGatewayRestResolver):
    """Checks the route's declared access before anything else (request validation included), so a caller who may
    not use a route learns nothing about it beyond 401/403. The event's header maps and the request validation are
    `switchboard.api.powertools`' (same behaviour, less work per request)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._static_methods: dict[str, list[str]] | None = None  # path → methods of its static routes, on first use
        if self._enable_validation:
            self._request_validation_middleware = RequestValidation()
            self._response_validation_middleware = ResponseValidation(
                validation_serializer=self._serializer,
                has_response_validation_error=self._has_response_validation_error,
            )

    def _static_path_methods(self, path: str) -> list[str] | None:
        """The methods of the static routes at exactly this path, or None."""
        if self._static_methods is None:
            grouped: dict[str, set[str]] = {}
            for r in self._static_routes:
                grouped.setdefault(r.path.rstrip("/"), set()).add(r.method)
            self._static_methods = {p: sorted(m) for p, m in grouped.items()}
        return self._static_methods.get(path.rstrip("/"))

    def _to_proxy_event(self, event: dict) -> Any:
        return ProxyEvent(event, self._json_body_deserializer)

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}/*$") -> Any:
        """`APIGatewayRestResolver._compile_regex` (no trailing slash needed), compiled lazily."""
        expression = base_regex.format(ROUTE_PARAMETER.sub(_NAMED_GROUP_BOUNDARY_PATTERN, rule))
        return RoutePattern(expression, groups=len(ROUTE_PARAMETER.findall(rule)))

    def _call_route(self, route: Any, route_arguments: dict[str, str]) -> Any:
        if route_arguments and (allowed := self._static_path_methods(self.current_event.path)):
            # A static route's path reached a dynamic route (another method): the static segment is no id.
            err = MethodNotAllowed(headers={"Allow": ", ".join(allowed)})
            response = error_response(self, err.status, err.code, err.message, headers=err.headers)
            return self._response_builder_class(response=response, serializer=self._serializer, route=route)
        access = take_access(route)
        if access is not None:
            try:
                access.check(current_auth_optional(self))
            except DomainError as err:
                response = error_response(self, err.status, err.code, err.message, err.details, err.headers)
                return self._response_builder_class(response=response, serializer=self._serializer, route=route)
        if route.dependant.body_params and (refusal := _refused_body(self, route)) is not None:
            return self._response_builder_class(response=refusal, serializer=self._serializer, route=route)
        return super()._call_route(route, route_arguments)


def create_resolver() -> Resolver:
    app = Resolver(
        enable_validation=True,
        response_validation_error_http_code=500,
        serializer=_json,
        json_body_deserializer=parse_body,
    )
    app.use(middlewares=[_core_middleware])

    @app.exception_handler(DomainError)
    def _domain(err: DomainError) -> Response:
        return error_response(app, err.status, err.code, err.message, err.details, err.headers)

    @app.exception_handler(ProviderUnavailable)
    def _provider_down(err: ProviderUnavailable) -> Response:
        message = f"The channel's provider is unavailable; retry shortly. ({err})" if str(err) else None
        return error_response(
            app,
            503,
            "service_unavailable",
            message or "The channel's provider is unavailable; retry shortly.",
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(RequestValidationError)
    def _validation(err: RequestValidationError) -> Response:
        errors = list(err.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(app, 400, "invalid_json", "The request body is not valid JSON.")
        details = _validation_details(errors)
        message = "; ".join(f"{d['field']}: {d['message']}" for d in details[:3]) or "The request is not valid."
        return error_response(app, 400, "validation_failed", message, details)

    @app.exception_handler(RequestUnsupportedContentType)
    def _unsupported_media_type(err: RequestUnsupportedContentType) -> Response:
        return error_response(app, 415, "unsupported_media_type", NOT_JSON)

    @app.exception_handler(UnicodeDecodeError)
    def _undecodable(err: UnicodeDecodeError) -> Response:
        # A body that is not UTF-8 (API Gateway passes it base64-encoded) fails while it is decoded for validation.
        try:
            _ = app.current_event.decoded_body
        except (UnicodeDecodeError, ValueError):
            return error_response(app, 400, "invalid_json", "The request body is not valid UTF-8 JSON.")
        return _unexpected(err)

    @app.exception_handler(ServiceError)
    def _service(err: ServiceError) -> Response:
        code = "validation_failed" if err.status_code == 400 else "internal_error"
        return error_response(app, err.status_code, code, str(err.msg))

    @app.not_found
    def _not_found(_: NotFoundError) -> Response:
        path = app.current_event.path
        allowed = _allowed_methods(app, path)
        if allowed:
            err: DomainError = MethodNotAllowed(headers={"Allow": ", ".join(allowed)})
        else:
            err = RouteNotFound()
        return error_response(app, err.status, err.code, err.message, headers=err.headers)

    @app.exception_handler(Exception)
    def _unexpected(err: Exception) -> Response:
        logger.exception("unhandled error", extra={"error_type": type(err).__name__})
        return error_response(app, 500, "internal_error", "Something went wrong on our side.")

    return app


def make_handler(app: Resolver) -> Callable[[dict[str, Any], LambdaContext], dict[str, Any]]:
    """The Lambda entry point of an endpoint group: every log line carries the Lambda context and the correlation id
    = API Gateway request id (read directly: the same value as Powertools' `correlation_paths.API_GATEWAY_REST`
    JMESPath, without evaluating it on every request); the request is counted and the metrics flushed."""

    @request_context(logger, _api_request_id)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        response = app.resolve(event, context)
        _count_request(event.get("requestContext") if isinstance(event, dict) else None, response)
        return response

    return tracing.traced(metrics.flushed(handler))


def _api_request_id(event: Any) -> str | None:
    ctx = event.get("requestContext") if isinstance(event, dict) else None
    return ctx.get("requestId") if isinstance(ctx, dict) else None


def _count_request(ctx: Any, response: dict[str, Any]) -> None:
    """ApiRequests / ApiClientErrors / ApiServerErrors / ApiThrottled, in total and per organization."""
    authorizer = ctx.get("authorizer") if isinstance(ctx, dict) else None
    org = authorizer.get("organization_id") if isinstance(authorizer, dict) else None
    status = int(response.get("statusCode") or 0) if isinstance(response, dict) else 0
    metrics.count_response(status, organization=org)
