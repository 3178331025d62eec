"""An ASGI app that plays API Gateway (REST API, Lambda proxy integration) in front of the real handlers.

What it emulates, from `template.yaml`:
- routing over every function's `Api` events with API Gateway's precedence: static segments beat `{var}`, which
  beats `{proxy+}`; an explicit method beats `ANY`; no resource, or no method on it → `MISSING_AUTHENTICATION_TOKEN`;
- the REQUEST (or TOKEN) Lambda authorizer on every route that does not say `Auth: {Authorizer: NONE}`:
  `Exception("Unauthorized")` → `UNAUTHORIZED`; as on AWS, any other exception, no answer within the authorizer
  function's Timeout (counted from the handler's start, as Lambda counts it) or a malformed answer →
  `AUTHORIZER_CONFIGURATION_ERROR`; a Deny (or no matching Allow) → `ACCESS_DENIED`; an Allow puts its `context`
  (values as strings) and `principalId` into `requestContext.authorizer`;
- REST API v1 proxy events and results; a handler that raises, or answers a malformed result, → `DEFAULT_5XX` (502);
  29 s without an answer → `INTEGRATION_TIMEOUT` (504); bodies over 10 MB → `REQUEST_TOO_LARGE`; a result whose JSON
  (as the Python runtime serialises it) is over Lambda's synchronous response limit of 6,291,556 bytes →
  `INTEGRATION_FAILURE` (502), as AWS answers when the runtime cannot hand such a response over;
- gateway responses: status, headers and the `application/json` template of the template's
  `AWS::ApiGateway::GatewayResponse` resources (`$context.*` substituted), falling back as API Gateway does to
  `DEFAULT_4XX` / `DEFAULT_5XX`, and finally to a built-in error envelope.

The local URL has no stage prefix (like a custom domain): `path` and `requestContext.path` are the request path.
Local-only routes, served here and never deployed: `GET /_local/mail?to=` and `GET /docs` (Swagger UI).

`requestContext.identity.sourceIp` is the socket peer, as API Gateway's is the TCP peer: a client's `X-Forwarded-For`
is passed on (with the peer appended) but never believed, unless the peer is one of the trusted proxies named by
`trusted_proxies` (`LOCAL_TRUSTED_PROXIES`: comma-separated addresses or networks, for tests that play a client
behind a proxy); then the source is the nearest untrusted address of the header.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import ipaddress
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from local.functions import FunctionRegistry
from local.template import GatewayResponseSpec, LocalTemplate, TemplateError

log = logging.getLogger("local.gateway")

MAX_BODY_BYTES = 10 * 1024 * 1024
# Lambda's limit for a synchronous invocation's response: the handler's return value as JSON (the runtime's
# `json.dumps`, default separators). Over it, the invocation fails with "Response payload size exceeded maximum allowed
# payload size (6291556 bytes)" and API Gateway answers 502 INTEGRATION_FAILURE.
MAX_RESPONSE_BYTES = 6_291_556
API_ID = "local"
GATEWAY_ACCOUNT_ID = "000000000000"
GATEWAY_REGION = "us-east-1"
LOCAL_ROUTES = ("/docs", "/_local/")
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive"}

# API Gateway's default status of each gateway response type (None: the status of the error itself).
DEFAULT_STATUS: dict[str, int | None] = {
    "ACCESS_DENIED": 403,
    "API_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_CONFIGURATION_ERROR": 500,
    "AUTHORIZER_FAILURE": 500,
    "BAD_REQUEST_PARAMETERS": 400,
    "BAD_REQUEST_BODY": 400,
    "DEFAULT_4XX": None,
    "DEFAULT_5XX": None,
    "EXPIRED_TOKEN": 403,
    "INTEGRATION_FAILURE": 504,
    "INTEGRATION_TIMEOUT": 504,
    "INVALID_API_KEY": 403,
    "INVALID_SIGNATURE": 403,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "QUOTA_EXCEEDED": 429,
    "REQUEST_TOO_LARGE": 413,
    "RESOURCE_NOT_FOUND": 404,
    "THROTTLED": 429,
    "UNAUTHORIZED": 401,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "WAF_FILTERED": 403,
}

# Used only when the template customises neither the type nor its DEFAULT_4XX / DEFAULT_5XX.
BUILTIN_ERRORS: dict[str, tuple[str, str]] = {
    "ACCESS_DENIED": ("forbidden", "The credential is not allowed to perform this action."),
    "MISSING_AUTHENTICATION_TOKEN": ("route_not_found", "No route matches the method and path."),
    "RESOURCE_NOT_FOUND": ("route_not_found", "No route matches the method and path."),
    "UNAUTHORIZED": ("unauthenticated", "The request has no valid credential."),
    "EXPIRED_TOKEN": ("unauthenticated", "The credential has expired."),
    "INVALID_API_KEY": ("unauthenticated", "The request has no valid credential."),
    "THROTTLED": ("rate_limited", "Too many requests."),
    "QUOTA_EXCEEDED": ("rate_limited", "The request quota is exhausted."),
    "REQUEST_TOO_LARGE": ("payload_too_large", "The request body is too large."),
    "BAD_REQUEST_BODY": ("validation_failed", "The request body is not valid."),
    "BAD_REQUEST_PARAMETERS": ("validation_failed", "The request parameters are not valid."),
    "UNSUPPORTED_MEDIA_TYPE": ("unsupported_media_type", "The content type is not supported."),
    "INTEGRATION_TIMEOUT": ("internal_error", "The request timed out."),
}


class GatewayError(Exception):
    """A failure the gateway answers itself with a gateway response."""

    def __init__(self, response_type: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.response_type = response_type
        self.message = message
        self.status = status


# Routing ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    method: str
    resource: str  # the template path, e.g. /v1/contacts/{proxy+}
    function: str  # logical id
    authorizer: str | None


@dataclass
class _Node:
    path: str
    static: dict[str, _Node] = field(default_factory=dict)
    var: tuple[str, _Node] | None = None
    proxy: tuple[str, _Node] | None = None
    methods: dict[str, Route] = field(default_factory=dict)


def split_path(path: str) -> list[str]:
    return [segment for segment in path.split("/") if segment]


class RouteTable:
    """API Gateway's resource tree: static beats `{var}` beats `{proxy+}`, explicit methods beat `ANY`."""

    def __init__(self) -> None:
        self.root = _Node("/")
        self.routes: list[Route] = []

    @classmethod
    def from_template(cls, template: LocalTemplate) -> RouteTable:
        table = cls()
        for spec in template.functions:
            for event in spec.api_events:
                table.add(Route(event.method, event.path, spec.logical_id, event.authorizer))
        return table

    def add(self, route: Route) -> None:
        node = self.root
        segments = split_path(route.resource)
        for index, segment in enumerate(segments):
            child_path = "/" + "/".join(segments[: index + 1])
            if segment.startswith("{") and segment.endswith("+}"):
                if index != len(segments) - 1:
                    raise TemplateError(f"{route.resource}: a greedy {segment} must be the last segment")
                name = segment[1:-2]
                if node.proxy is None:
                    node.proxy = (name, _Node(child_path))
                elif node.proxy[0] != name:
                    raise TemplateError(f"{route.resource}: conflicting greedy variables at {node.path}")
                node = node.proxy[1]
            elif segment.startswith("{") and segment.endswith("}"):
                name = segment[1:-1]
                if node.var is None:
                    node.var = (name, _Node(child_path))
                elif node.var[0] != name:
                    raise TemplateError(f"{route.resource}: conflicting path variables at {node.path}")
                node = node.var[1]
            else:
                node = node.static.setdefault(segment, _Node(child_path))
        if route.method in node.methods:
            other = node.methods[route.method]
            raise TemplateError(f"{route.method} {route.resource} is routed to {other.function} and {route.function}")
        node.methods[route.method] = route
        self.routes.append(route)

    def resource(self, path: str) -> tuple[_Node, dict[str, str]] | None:
        return self._walk(self.root, split_path(path), 0, {})

    def _walk(self, node: _Node, segments: list[str], index: int, params: dict[str, str]) -> Any:
        if index == len(segments):
            return node, params
        segment = segments[index]
        child = node.static.get(segment)
        if child is not None:
            found = self._walk(child, segments, index + 1, params)
            if found is not None:
                return found
        if node.var is not None:
            name, var_node = node.var
            found = self._walk(var_node, segments, index + 1, {**params, name: segment})
            if found is not None:
                return found
        if node.proxy is not None:
            name, proxy_node = node.proxy
            return proxy_node, {**params, name: "/".join(segments[index:])}
        return None

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        found = self.resource(path)
        if found is None:
            return None
        node, params = found
        route = node.methods.get(method.upper()) or node.methods.get("ANY")
        return (route, params) if route is not None else None


# Gateway responses --------------------------------------------------------------------------------------------------
_CONTEXT_VAR = re.compile(r"\$context\.([A-Za-z0-9_.]+)|\$\{context\.([A-Za-z0-9_.]+)\}")


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif value is not None:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)


def _json_escape(text: str) -> str:
    return json.dumps(text)[1:-1]


class GatewayResponses:
    def __init__(self, specs: dict[str, GatewayResponseSpec]) -> None:
        self.specs = specs

    def spec_for(self, response_type: str, status: int) -> GatewayResponseSpec | None:
        if response_type in self.specs:
            return self.specs[response_type]
        return self.specs.get("DEFAULT_5XX" if status >= 500 else "DEFAULT_4XX")

    def render(
        self,
        response_type: str,
        *,
        context: dict[str, Any],
        request_headers: dict[str, str],
        status: int | None = None,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        default = status or DEFAULT_STATUS.get(response_type) or 500
        spec = self.spec_for(response_type, default)
        flat: dict[str, str] = {}
        _flatten("", context, flat)
        if spec is None or "application/json" not in spec.templates:
            code, message = BUILTIN_ERRORS.get(
                response_type,
                ("internal_error", "An internal error occurred.")
                if default >= 500
                else ("bad_request", "The request could not be processed."),
            )
            body = {"error": {"code": code, "message": message, "details": [], "request_id": flat["requestId"]}}
            resolved = spec.status_code if spec is not None and spec.status_code else default
            headers = [("Content-Type", "application/json")]
            if spec is not None:
                headers += self._headers(spec, flat, request_headers)
            return resolved, _dedupe(headers), json.dumps(body, separators=(",", ":")).encode()

        def substitute(match: re.Match[str]) -> str:
            return _json_escape(flat.get(match.group(1) or match.group(2), ""))

        body_text = _CONTEXT_VAR.sub(substitute, spec.templates["application/json"])
        headers = [("Content-Type", "application/json"), *self._headers(spec, flat, request_headers)]
        return spec.status_code or default, _dedupe(headers), body_text.encode()

    @staticmethod
    def _headers(spec: GatewayResponseSpec, flat: dict[str, str], request_headers: dict[str, str]) -> list[Any]:
        out = []
        lowered = {k.lower(): v for k, v in request_headers.items()}
        for name, expression in spec.headers.items():
            expr = expression.strip()
            if len(expr) >= 2 and expr[0] == expr[-1] == "'":
                value: str | None = expr[1:-1]
            elif expr.startswith("method.request.header."):
                value = lowered.get(expr.removeprefix("method.request.header.").lower())
            elif expr.startswith("context."):
                value = flat.get(expr.removeprefix("context."))
            else:
                value = None
            if value is not None:
                out.append((name, value))
        return out


def _dedupe(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Later values of a header replace earlier ones (Content-Type from the template wins over the default)."""
    seen: dict[str, tuple[str, str]] = {}
    for name, value in headers:
        seen[name.lower()] = (name, value)
    return list(seen.values())


# Authorizer policy --------------------------------------------------------------------------------------------------
def _arn_pattern(resource: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(resource).replace(r"\*", ".*").replace(r"\?", ".") + "$")


def policy_effect(policy: Any, method_arn: str) -> str | None:
    """ "Allow", "Deny" or None (no statement applies) for execute-api:Invoke on `method_arn`."""
    if not isinstance(policy, dict):
        raise ValueError("policyDocument is not an object")
    statements = policy.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list):
        raise ValueError("policyDocument.Statement is missing")
    allowed = False
    for statement in statements:
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(_arn_pattern(a.lower()).match("execute-api:invoke") for a in actions):
            continue
        resources = statement.get("Resource", [])
        resources = [resources] if isinstance(resources, str) else resources
        if not any(_arn_pattern(r).match(method_arn) for r in resources):
            continue
        effect = str(statement.get("Effect", ""))
        if effect == "Deny":
            return "Deny"
        if effect == "Allow":
            allowed = True
    return "Allow" if allowed else None


# The ASGI app -------------------------------------------------------------------------------------------------------
@dataclass
class _Request:
    method: str
    path: str
    headers: list[tuple[str, str]]
    query: list[tuple[str, str]]
    client_ip: str
    server_port: int
    scheme: str
    body: bytes
    request_id: str
    epoch_ms: int

    def header_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in self.headers:
            out[name] = value  # the last value of a repeated header, as API Gateway does
        return out


class Gateway:
    """ASGI application: `uvicorn.run(Gateway(...))`."""

    def __init__(
        self,
        template: LocalTemplate,
        functions: FunctionRegistry,
        *,
        executor: ThreadPoolExecutor,
        stage: str = "local",
        mail_reader: Callable[[str | None], list[dict[str, Any]]] | None = None,
        integration_timeout: float = 29.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        trusted_proxies: Iterable[str] | None = None,
    ) -> None:
        self.template = template
        if trusted_proxies is None:
            trusted_proxies = os.environ.get("LOCAL_TRUSTED_PROXIES", "").split(",")
        self.trusted_proxies = [ipaddress.ip_network(p.strip(), strict=False) for p in trusted_proxies if p.strip()]
        self.functions = functions
        self.executor = executor
        self.stage = stage
        self.mail_reader = mail_reader
        self.integration_timeout = integration_timeout
        self.max_body_bytes = max_body_bytes
        self.max_response_bytes = max_response_bytes
        self.routes = RouteTable.from_template(template)
        self.responses = GatewayResponses(template.gateway_responses)
        for route in self.routes.routes:
            if route.resource == "/docs" or route.resource.startswith("/_local"):
                raise TemplateError(f"{route.resource} collides with a local-only route of the local stack")
            if route.function not in functions:
                raise TemplateError(f"{route.resource} is routed to unknown function {route.function}")
            if route.authorizer is not None:
                auth = template.authorizers.get(route.authorizer)
                if auth is None or auth.function not in functions:
                    raise TemplateError(f"{route.resource} uses unknown authorizer {route.authorizer}")

    # ASGI ------------------------------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        status, headers, body = await self._handle(scope, receive)
        raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in headers]
        if status >= 200 and status not in (204, 304):
            raw_headers.append((b"content-length", str(len(body)).encode()))
        else:
            body = b""
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": body})
        log.info(
            "%s %s -> %d (%.0f ms)", scope["method"], scope["path"], status, (time.perf_counter() - started) * 1000
        )

    async def _read_body(self, scope: dict[str, Any], receive: Callable[..., Any]) -> bytes:
        declared = next((v for k, v in scope["headers"] if k.lower() == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise GatewayError("REQUEST_TOO_LARGE", "Request Too Long", 413)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise GatewayError("REQUEST_TOO_LARGE", "Request Too Long", 413)
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks)

    def _trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.trusted_proxies)

    def _source_ip(self, peer: str, raw_headers: list[tuple[bytes, bytes]]) -> str:
        """The socket peer; behind a trusted proxy, the nearest address of `X-Forwarded-For` that is not one."""
        if not self.trusted_proxies or not self._trusted(peer):
            return peer
        forwarded = ",".join(v.decode("latin-1") for k, v in raw_headers if k.lower() == b"x-forwarded-for")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not self._trusted(hop):
                return hop
        return hops[0] if hops else peer

    async def _handle(self, scope: dict[str, Any], receive: Callable[..., Any]) -> tuple[int, list[Any], bytes]:
        client = scope.get("client") or ("127.0.0.1", 0)
        server = scope.get("server") or ("127.0.0.1", 0)
        request = _Request(
            method=scope["method"].upper(),
            path=scope["path"] or "/",
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
            query=parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True),
            client_ip=self._source_ip(str(client[0]), scope["headers"]),
            server_port=int(server[1] or 0),
            scheme=str(scope.get("scheme", "http")),
            body=b"",
            request_id=str(uuid.uuid4()),
            epoch_ms=int(time.time() * 1000),
        )
        context: dict[str, Any] = self._error_context(request)
        try:
            if request.path == "/docs" or request.path.startswith("/_local/"):
                return await self._local_route(request)
            request.body = await self._read_body(scope, receive)
            matched = self.routes.match(request.method, request.path)
            if matched is None:
                raise GatewayError("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")
            route, params = matched
            context["resourcePath"] = route.resource
            event = self._proxy_event(request, route, params)
            if route.authorizer is not None:
                authorizer_context = await self._authorize(request, route, params, event)
                event["requestContext"]["authorizer"] = authorizer_context
                context["authorizer"] = authorizer_context
            result = await self._invoke(route.function, event)
            return self._proxy_result(result, request)
        except Exception as exc:
            err = exc if isinstance(exc, GatewayError) else None
            if err is None:
                log.exception("the gateway itself failed on %s %s", request.method, request.path)
                err = GatewayError("DEFAULT_5XX", "Internal server error", 500)
            context["error"] = {"message": err.message, "messageString": json.dumps(err.message)}
            context["error"]["responseType"] = err.response_type
            status, headers, body = self.responses.render(
                err.response_type, context=context, request_headers=request.header_map(), status=err.status
            )
            return (
                status,
                [*headers, ("x-amzn-RequestId", request.request_id), ("x-amzn-ErrorType", _error_type(err))],
                body,
            )

    # Local routes ----------------------------------------------------------------------------------------------
    async def _local_route(self, request: _Request) -> tuple[int, list[Any], bytes]:
        base = [("x-amzn-RequestId", request.request_id)]
        if request.method not in ("GET", "HEAD"):
            raise GatewayError("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")
        if request.path == "/docs":
            from fastapi.openapi.docs import get_swagger_ui_html

            html = get_swagger_ui_html(openapi_url="/openapi.json", title="Switchboard API (local)")
            return 200, [("Content-Type", "text/html; charset=utf-8"), *base], bytes(html.body)
        if request.path.rstrip("/") == "/_local/mail" and self.mail_reader is not None:
            to = next((v for k, v in reversed(request.query) if k == "to"), None) or None
            loop = asyncio.get_running_loop()
            reader = self.mail_reader
            rows = await loop.run_in_executor(self.executor, lambda: reader(to))
            body = json.dumps({"data": rows}, separators=(",", ":"), default=str).encode()
            return 200, [("Content-Type", "application/json"), *base], body
        raise GatewayError("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")

    # Events ----------------------------------------------------------------------------------------------------
    def _error_context(self, request: _Request) -> dict[str, Any]:
        return {
            "requestId": request.request_id,
            "extendedRequestId": request.request_id,
            "path": request.path,
            "httpMethod": request.method,
            "stage": self.stage,
            "apiId": API_ID,
            "accountId": GATEWAY_ACCOUNT_ID,
            "resourcePath": request.path,
            "requestTime": _request_time(request.epoch_ms),
            "requestTimeEpoch": request.epoch_ms,
            "protocol": "HTTP/1.1",
            "identity": {"sourceIp": request.client_ip, "userAgent": request.header_map().get("user-agent", "")},
        }

    def _request_context(self, request: _Request, route: Route, host: str) -> dict[str, Any]:
        return {
            "resourceId": format(abs(hash(route.resource)) % (36**6), "x")[:6],
            "resourcePath": route.resource,
            "httpMethod": request.method,
            "extendedRequestId": request.request_id[:16],
            "requestTime": _request_time(request.epoch_ms),
            "path": request.path,
            "accountId": GATEWAY_ACCOUNT_ID,
            "protocol": "HTTP/1.1",
            "stage": self.stage,
            "domainPrefix": host.split(".", 1)[0].split(":", 1)[0],
            "requestTimeEpoch": request.epoch_ms,
            "requestId": request.request_id,
            "identity": {
                "cognitoIdentityPoolId": None,
                "accountId": None,
                "cognitoIdentityId": None,
                "caller": None,
                "sourceIp": request.client_ip,
                "principalOrgId": None,
                "accessKey": None,
                "cognitoAuthenticationType": None,
                "cognitoAuthenticationProvider": None,
                "userArn": None,
                "userAgent": request.header_map().get("user-agent"),
                "user": None,
            },
            "domainName": host,
            "deploymentId": "local",
            "apiId": API_ID,
        }

    def _proxy_event(self, request: _Request, route: Route, params: dict[str, str]) -> dict[str, Any]:
        headers = list(request.headers)
        names = {name.lower() for name, _ in headers}
        forwarded_for = next((v for k, v in request.headers if k.lower() == "x-forwarded-for"), None)
        headers = [(k, v) for k, v in headers if k.lower() != "x-forwarded-for"]
        headers.append(
            ("X-Forwarded-For", f"{forwarded_for}, {request.client_ip}" if forwarded_for else request.client_ip)
        )
        if "x-forwarded-proto" not in names:
            headers.append(("X-Forwarded-Proto", request.scheme))
        if "x-forwarded-port" not in names:
            headers.append(("X-Forwarded-Port", str(request.server_port)))
        single: dict[str, str] = {}
        multi: dict[str, list[str]] = {}
        for name, value in headers:
            single[name] = value
            multi.setdefault(name, []).append(value)
        query_single: dict[str, str] = {}
        query_multi: dict[str, list[str]] = {}
        for name, value in request.query:
            query_single[name] = value
            query_multi.setdefault(name, []).append(value)
        body: str | None = None
        is_base64 = False
        if request.body:
            try:
                body = request.body.decode("utf-8")
            except UnicodeDecodeError:
                body, is_base64 = base64.b64encode(request.body).decode(), True
        host = single.get("host") or single.get("Host") or f"127.0.0.1:{request.server_port}"
        return {
            "resource": route.resource,
            "path": request.path,
            "httpMethod": request.method,
            "headers": single or None,
            "multiValueHeaders": multi or None,
            "queryStringParameters": query_single or None,
            "multiValueQueryStringParameters": query_multi or None,
            "pathParameters": dict(params) or None,
            "stageVariables": None,
            "requestContext": self._request_context(request, route, host),
            "body": body,
            "isBase64Encoded": is_base64,
        }

    def method_arn(self, method: str, path: str) -> str:
        return f"arn:aws:execute-api:{GATEWAY_REGION}:{GATEWAY_ACCOUNT_ID}:{API_ID}/{self.stage}/{method}{path}"

    # Authorizer ------------------------------------------------------------------------------------------------
    async def _authorize(
        self, request: _Request, route: Route, params: dict[str, str], event: dict[str, Any]
    ) -> dict[str, Any]:
        assert route.authorizer is not None
        spec = self.template.authorizers[route.authorizer]
        method_arn = self.method_arn(request.method, request.path)
        headers = event["headers"] or {}
        lowered = {k.lower(): v for k, v in headers.items()}
        if spec.identity_headers and not all(lowered.get(h.lower()) for h in spec.identity_headers):
            raise GatewayError("UNAUTHORIZED", "Unauthorized")
        if spec.payload_type == "TOKEN":
            header = (spec.identity_headers or ("Authorization",))[0]
            auth_event: dict[str, Any] = {
                "type": "TOKEN",
                "authorizationToken": lowered.get(header.lower(), ""),
                "methodArn": method_arn,
            }
        else:
            context = {k: v for k, v in event["requestContext"].items() if k != "authorizer"}
            auth_event = {
                "type": "REQUEST",
                "methodArn": method_arn,
                "resource": route.resource,
                "path": request.path,
                "httpMethod": request.method,
                "headers": event["headers"],
                "multiValueHeaders": event["multiValueHeaders"],
                "queryStringParameters": event["queryStringParameters"],
                "multiValueQueryStringParameters": event["multiValueQueryStringParameters"],
                "pathParameters": event["pathParameters"],
                "stageVariables": event["stageVariables"],
                "requestContext": context,
            }
        started = time.perf_counter()
        try:
            result = await self._call_authorizer(spec.function, auth_event)
        except GatewayError:
            raise
        except Exception as err:
            if str(err) == "Unauthorized":
                raise GatewayError("UNAUTHORIZED", "Unauthorized") from None
            log.exception("authorizer %s failed", spec.function)
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer error") from None
        latency = int((time.perf_counter() - started) * 1000)
        if not isinstance(result, dict) or "principalId" not in result or "policyDocument" not in result:
            log.error("authorizer %s answered without principalId/policyDocument: %r", spec.function, result)
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer error")
        try:
            effect = policy_effect(result["policyDocument"], method_arn)
        except (ValueError, AttributeError, TypeError):
            log.error("authorizer %s answered an invalid policy: %r", spec.function, result["policyDocument"])
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer error") from None
        if effect != "Allow":
            raise GatewayError("ACCESS_DENIED", "User is not authorized to access this resource with an explicit deny")
        out: dict[str, Any] = {}
        for key, value in (result.get("context") or {}).items():
            if isinstance(value, dict | list):
                log.error("authorizer context value %s is not a primitive", key)
                raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer error")
            if value is None:
                continue
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        out["principalId"] = str(result["principalId"])
        out["integrationLatency"] = latency
        return out

    async def _call_authorizer(self, function: str, event: dict[str, Any]) -> Any:
        """The authorizer's answer; a Lambda timeout (the function's Timeout from the handler's start: a local import
        of a new copy does not count, as Lambda's init does not) is `AUTHORIZER_CONFIGURATION_ERROR`, as on AWS."""
        pool = self.functions[function]
        limit = float(pool.spec.timeout)
        loop = asyncio.get_running_loop()
        began = asyncio.Event()
        run = functools.partial(pool.invoke, event, on_start=lambda: loop.call_soon_threadsafe(began.set))
        future = loop.run_in_executor(self.executor, run)
        starting = asyncio.ensure_future(began.wait())
        try:
            await asyncio.wait({future, starting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            starting.cancel()
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=limit)
        except TimeoutError:
            log.error("authorizer %s did not answer within its %.1f s timeout", function, limit)
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer error") from None

    # Integration -----------------------------------------------------------------------------------------------
    async def _call(self, function: str, event: dict[str, Any]) -> Any:
        pool = self.functions[function]
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, pool.invoke, event)
        if not self.integration_timeout:
            return await future
        try:
            return await asyncio.wait_for(future, timeout=self.integration_timeout)
        except TimeoutError:
            log.error("%s did not answer within %.0f s", function, self.integration_timeout)
            raise GatewayError("INTEGRATION_TIMEOUT", "Endpoint request timed out", 504) from None

    async def _invoke(self, function: str, event: dict[str, Any]) -> Any:
        try:
            result = await self._call(function, event)
        except GatewayError:
            raise
        except Exception:
            log.exception("%s raised (Lambda function error)", function)
            raise GatewayError("DEFAULT_5XX", "Internal server error", 502) from None
        self._check_response_size(function, result)
        return result

    def _check_response_size(self, function: str, result: Any) -> None:
        """Lambda refuses to return a response whose JSON is over the synchronous limit: the handler ran (and
        committed whatever it wrote), the client gets API Gateway's 502."""
        try:
            size = len(json.dumps(result).encode())
        except (TypeError, ValueError):
            return  # not JSON-serialisable: `_proxy_result` answers it as a malformed result
        if size > self.max_response_bytes:
            log.error(
                "%s: Response payload size (%d bytes) exceeded maximum allowed payload size (%d bytes)",
                function,
                size,
                self.max_response_bytes,
            )
            raise GatewayError("INTEGRATION_FAILURE", "Internal server error", 502)

    def _proxy_result(self, result: Any, request: _Request) -> tuple[int, list[Any], bytes]:
        if not isinstance(result, dict) or "statusCode" not in result:
            log.error("malformed Lambda proxy response: %r", result)
            raise GatewayError("DEFAULT_5XX", "Internal server error", 502)
        try:
            status = int(result["statusCode"])
        except (TypeError, ValueError):
            log.error("malformed Lambda proxy response (statusCode): %r", result)
            raise GatewayError("DEFAULT_5XX", "Internal server error", 502) from None
        body = result.get("body")
        if body is not None and not isinstance(body, str):
            log.error("malformed Lambda proxy response (body is not a string): %r", type(body))
            raise GatewayError("DEFAULT_5XX", "Internal server error", 502)
        headers: list[tuple[str, str]] = []
        multi = result.get("multiValueHeaders") or {}
        present = set()
        for name, values in multi.items():
            for value in values if isinstance(values, list) else [values]:
                headers.append((str(name), str(value)))
            present.add(str(name).lower())
        for name, value in (result.get("headers") or {}).items():
            if str(name).lower() not in present:
                headers.append((str(name), str(value)))
        headers = [(k, v) for k, v in headers if k.lower() not in _HOP_HEADERS]
        if not any(k.lower() == "content-type" for k, _ in headers):
            headers.append(("Content-Type", "application/json"))
        headers.append(("x-amzn-RequestId", request.request_id))
        raw = (body or "").encode("utf-8")
        if result.get("isBase64Encoded") and body:
            try:
                raw = base64.b64decode(body)
            except ValueError:
                raise GatewayError("DEFAULT_5XX", "Internal server error", 502) from None
        return status, headers, raw


def _request_time(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")


def _error_type(err: GatewayError) -> str:
    return {
        "UNAUTHORIZED": "UnauthorizedException",
        "ACCESS_DENIED": "AccessDeniedException",
        "AUTHORIZER_CONFIGURATION_ERROR": "AuthorizerConfigurationException",
        "MISSING_AUTHENTICATION_TOKEN": "MissingAuthenticationTokenException",
        "REQUEST_TOO_LARGE": "RequestTooLargeException",
    }.get(err.response_type, "InternalServerErrorException")
