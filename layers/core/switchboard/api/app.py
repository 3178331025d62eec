"""The resolver factory: every endpoint group's resolver is built here, so errors, auth and idempotency behave alike."""

from __future__ import annotations

import base64
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
    OpenAPIRequestValidationMiddleware,
    OpenAPIResponseValidationMiddleware,
)
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.shared.json_encoder import Encoder

from switchboard import metrics, ratelimit, tracing
from switchboard.api.auth import Access, AccessMiddleware
from switchboard.api.context import current_auth_optional, header, request_id
from switchboard.api.envelope import error_body
from switchboard.api.idempotency import idempotency_middleware
from switchboard.api.jsonbody import parse_body
from switchboard.config import get_settings
from switchboard.errors import DomainError, MethodNotAllowed, PayloadTooLarge, RateLimited, RouteNotFound
from switchboard.jsonbody import MAX_DEPTH, too_deep
from switchboard.logs import redact_logs
from switchboard.providers.base import ProviderUnavailable
from switchboard.store import get_store

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.params import Dependant
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger()
redact_logs(logger)

MAX_BODY_BYTES = 256 * 1024
DEFAULT_SECURITY: list[dict[str, list[str]]] = [{"ApiKey": []}, {"Bearer": []}]
PUBLIC: list[dict[str, list[str]]] = []


# Powertools' own response serializer.
_json = partial(json.dumps, separators=(",", ":"), cls=Encoder)


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
    """The checks every route makes after its request is validated, in their order: the organization's rate limit
    (429, and `RateLimit-*` headers on every response), then idempotency (`idempotency_middleware`); the body's size
    limit (413) is checked before (`_refused_request`)."""
    rate_headers = _rate_limit(app)
    response = idempotency_middleware(app, next_middleware)
    if rate_headers:
        response.headers.update(rate_headers)
    return response


NOT_JSON = "The request body must be JSON (Content-Type: application/json)."


def _refused_body(app: Any, body_params: Sequence[Any]) -> Response | None:
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
    if body.lstrip()[:1] == "[" and not any(_sequence_annotation(p.field_info.annotation) for p in body_params):
        details = [{"field": "body", "message": "Input should be a JSON object, not an array"}]
        return error_response(app, 400, "validation_failed", "body: must be a JSON object", details)
    return None


def _sequence_annotation(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _sequence_annotation(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_sequence_annotation(a) for a in typing.get_args(annotation))
    return isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str


def _refused_request(app: Any, spec: RouteSpec) -> Response | None:
    """The error for a request every route refuses before reading it (CONVENTIONS "Requests the service refuses"),
    or None:
    - a query parameter the route does not declare (400 `validation_failed`, one detail `query.<name>` each): an
      unknown filter must not be read as "no filter";
    - `Idempotency-Key` given more than once (400): which one counts would be undefined;
    - a body over 256 KiB (413), or nested deeper than `switchboard.jsonbody.MAX_DEPTH` (400 `invalid_json`), before
      anything parses it (the routes that read their raw body, provider callbacks, included)."""
    event = app.current_event
    raw = event.raw_event
    given = raw.get("multiValueQueryStringParameters") or raw.get("queryStringParameters") or {}
    if given:
        unknown = sorted(set(given) - spec.query_names)
        if unknown:
            details = [{"field": f"query.{n}", "message": "is not a parameter of this operation"} for n in unknown]
            message = "; ".join(f"{d['field']}: {d['message']}" for d in details[:3])
            return error_response(app, 400, "validation_failed", message, details)
    headers = raw.get("multiValueHeaders") or {}
    if sum(len(v or ()) for k, v in headers.items() if k.lower() == "idempotency-key") > 1:
        details = [{"field": "headers.idempotency-key", "message": "must be sent once"}]
        return error_response(app, 400, "validation_failed", "headers.idempotency-key: must be sent once", details)
    body = event.body
    if body:
        if len(body) > MAX_BODY_BYTES:
            raise PayloadTooLarge()  # before any reading of it
        text = body
        if event.is_base64_encoded:
            try:
                text = base64.b64decode(body)
            except ValueError:
                return None  # left to the route's own reading
        if too_deep(text):
            message = f"The request body is not valid JSON: arrays and objects nest deeper than {MAX_DEPTH} levels."
            return error_response(app, 400, "invalid_json", message)
    return None


@dataclass(eq=False)
class RouteSpec:
    """One method of one route as the resolver registered it: what tests and the OpenAPI document read."""

    rule: str
    method: str
    func: Callable[..., Any]
    access: Access | None
    status_code: int
    responses: dict[int, Any] | None = None
    dynamic: bool = field(init=False)

    def __post_init__(self) -> None:
        self.dynamic = "<" in self.rule

    @property
    def path(self) -> str:
        return self.rule

    @property
    def openapi_path(self) -> str:
        return re.sub(r"<(.*?)>", r"{\1}", self.rule)

    @cached_property
    def query_names(self) -> frozenset[str]:
        """The query parameters the route declares (their aliases: `hub.mode`), as the document lists them."""
        return frozenset(param.alias for param in self.dependant.query_params)

    @cached_property
    def dependant(self) -> Dependant:
        # on a route's first call or when documenting: the dependant models stay off the cold start
        from aws_lambda_powertools.event_handler.openapi.dependant import get_dependant

        return get_dependant(path=self.openapi_path, call=self.func, responses=self.responses)


class RouteGate:
    """The first middleware of every route, before its request is validated, so a caller who may not use a route
    learns nothing about it beyond 401/403:
    - a dynamic route never serves a path that is a static route's path (`GET /v1/contacts/block` is not the contact
      `block`): 405 with the static route's methods in `Allow`;
    - the route's declared access (`requires`, `authenticated`, `public`);
    - what every route refuses before reading the request (`_refused_request`: unknown query parameters, a repeated
      `Idempotency-Key`, a body too large or nested too deep);
    - a body the route refuses before validating it (`_refused_body`).
    Then it runs Powertools' request validation, `_core_middleware` and (for a route without middlewares of its own)
    Powertools' response validation through their public `handler` method, in this one frame of the route's
    middleware stack: every frame costs each request its bookkeeping."""

    def __init__(self, resolver: Resolver, spec: RouteSpec, *, validates_response: bool) -> None:
        self.resolver = resolver
        self.spec = spec
        self.validates_response = validates_response
        self.__name__ = f"gate_{spec.method}_{spec.rule}"

    def __call__(self, app: Any, next_middleware: Callable[[Any], Any]) -> Any:
        spec = self.spec
        if spec.dynamic:
            shadowing = self.resolver.static_methods(app.current_event.path)
            if shadowing:
                raise MethodNotAllowed(headers={"Allow": ", ".join(shadowing)})
        if spec.access is not None:
            spec.access.check(current_auth_optional(app))
        refusal = _refused_request(app, spec)
        if refusal is not None:
            return refusal
        if app.current_event.body and (body_params := spec.dependant.body_params):
            refusal = _refused_body(app, body_params)
            if refusal is not None:
                return refusal
        resolver = self.resolver
        if self.validates_response:
            after = next_middleware

            def next_middleware(app: Any) -> Any:
                return resolver.response_validation.handler(app, after)  # type: ignore[arg-type]

        def validated(app: Any) -> Any:
            return _core_middleware(app, next_middleware)

        return resolver.request_validation.handler(app, validated)  # type: ignore[arg-type]


_ROUTE_PARAMETERS = inspect.signature(APIGatewayRestResolver.route).parameters


class Resolver(APIGatewayRestResolver):
    """`APIGatewayRestResolver` whose routes all run the same stack, in this order: `RouteGate` (static paths,
    access, refused requests and bodies), Powertools' request validation, `_core_middleware` (rate limit,
    idempotency), the route's own middlewares, Powertools' response validation (`RouteGate` runs the ones before and
    after the route's own middlewares). Powertools would validate the request before any middleware, so every route
    is registered with `enable_validation=False` and gets the validation middlewares in its own list (the OpenAPI
    document is the resolver's, with validation on). `routes` lists what was registered."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.routes: list[RouteSpec] = []
        self.static_paths: dict[str, list[str]] = {}
        self.request_validation = OpenAPIRequestValidationMiddleware()
        self.response_validation = OpenAPIResponseValidationMiddleware(
            validation_serializer=kwargs.get("serializer"),
            has_response_validation_error=kwargs.get("response_validation_error_http_code") is not None,
        )

    def route(self, rule: str, method: Any, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        options = dict(zip(list(_ROUTE_PARAMETERS)[3:], args, strict=False)) | kwargs
        methods = [method] if isinstance(method, str) else list(method)
        own = [mw for mw in options.get("middlewares") or [] if not isinstance(mw, AccessMiddleware)]
        access = next((mw.access for mw in options.get("middlewares") or [] if isinstance(mw, AccessMiddleware)), None)
        status_code = options.get("status_code", _ROUTE_PARAMETERS["status_code"].default)
        responses = options.get("responses")
        if responses and status_code not in responses:
            # Powertools documents only `responses=` when a route gives it; the route's own status stays documented.
            options["responses"] = responses = {status_code: {"description": "Successful Response"}, **responses}

        def register(func: Any) -> Any:
            for item in methods:
                spec = RouteSpec(rule, item.upper(), func, access, status_code, responses)
                self.routes.append(spec)
                if not spec.dynamic:
                    self.static_paths.setdefault(rule, []).append(spec.method)
                if own:  # the route's own middlewares run after `_core_middleware`, before the response validation
                    stack = [RouteGate(self, spec, validates_response=False), *own, self.response_validation]
                else:
                    stack = [RouteGate(self, spec, validates_response=True)]
                registration = {**options, "middlewares": stack, "enable_validation": False}
                super(Resolver, self).route(rule, item, **registration)(func)
            return func

        return register

    def static_methods(self, path: str) -> list[str]:
        """The methods of the static route whose path is `path` (trailing slashes ignored), sorted; [] if none."""
        methods = self.static_paths.get(path) or self.static_paths.get(path.rstrip("/") or "/")
        return sorted(set(methods)) if methods else []

    def allowed_methods(self, path: str) -> list[str]:
        """The methods some route serves at `path`: a static route's own, else those of the dynamic routes matching."""
        static = self.static_methods(path)
        if static:
            return static
        return sorted({spec.method for spec in self.routes if spec.dynamic and _matches(spec.rule, path)})


def _matches(rule: str, path: str) -> bool:
    return re.fullmatch(re.sub(r"<\w+>", "[^/]+", rule) + "/*", path) is not None


def create_resolver() -> Resolver:
    app = Resolver(
        enable_validation=True,
        response_validation_error_http_code=500,
        serializer=_json,
        json_body_deserializer=parse_body,
    )

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
        _rate_limit(app)
        allowed = app.allowed_methods(app.current_event.path)
        # 405 only when the method is not among the path's: a path the method's own route did not take has an id
        # no route accepts (characters outside a path segment's), which names no resource: 404.
        if allowed and app.current_event.http_method not in allowed:
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
    (the API Gateway request id); the request is counted and the metrics flushed. The event is never logged (it
    carries credentials), whatever `POWERTOOLS_LOGGER_LOG_EVENT` says."""

    @logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True, log_event=False
    )
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        response = app.resolve(event, context)
        _count_request(event.get("requestContext") if isinstance(event, dict) else None, response)
        return response

    return tracing.traced(metrics.flushed(handler))


def _count_request(ctx: Any, response: dict[str, Any]) -> None:
    """ApiRequests / ApiClientErrors / ApiServerErrors / ApiThrottled, in total and per organization."""
    authorizer = ctx.get("authorizer") if isinstance(ctx, dict) else None
    org = authorizer.get("organization_id") if isinstance(authorizer, dict) else None
    status = int(response.get("statusCode") or 0) if isinstance(response, dict) else 0
    metrics.count_response(status, organization=org)
