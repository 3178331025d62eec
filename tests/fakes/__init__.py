"""Fake provider servers for tests: real HTTP on 127.0.0.1, a thread per connection, every request recorded.

`FakeServer` is the shared machinery; `graph_api.FakeGraphApi` and `waha.FakeWaha` speak the wire formats.
Usage::

    with FakeGraphApi(token="t") as graph:
        adapter = WhatsAppCloudProvider({... "config": {"base_url": graph.url, "access_token": "t", ...}})
        ...
        assert graph.requests[-1].json == {...}

Failure injection (applies to the next requests, before any routing or auth):
`fail_next(status=503, times=1, body=None)`, `hang_next(seconds=2.0, times=1)` (the answer is held back; use a short
client timeout), `drop_next()` (the connection is closed without an answer).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Request:
    """One request the fake received."""

    method: str
    path: str  # percent-decoded, without the query
    raw_path: str  # as sent, with the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Response:
    status: int = 200
    body: Any = None  # dict/list → JSON; bytes → as is; None → empty
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None

    def encode(self) -> tuple[bytes, str | None]:
        if self.body is None:
            return b"", self.content_type
        if isinstance(self.body, bytes):
            return self.body, self.content_type or "application/octet-stream"
        return json.dumps(self.body).encode(), self.content_type or "application/json; charset=UTF-8"


class HttpError(Exception):
    """Raise from a route to answer with this response."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


@dataclass
class _Fault:
    kind: str  # fail | hang | drop
    status: int = 503
    body: Any = None
    seconds: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class FakeServer:
    """Subclasses implement `handle(request) -> Response` (raise `HttpError` for error answers)."""

    name = "fake"

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle --------------------------------------------------------------------------------------------------------
    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5  # idle keep-alive connections are closed after this
            wbufsize = 64 * 1024  # headers and body leave in one segment (flushed after each request)
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _dispatch(self) -> None:
                fake._serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _dispatch

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name=f"{self.name}-server", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def root(self) -> str:
        assert self._server is not None, "start the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # Failure injection ------------------------------------------------------------------------------------------------
    def fail_next(
        self, status: int = 503, times: int = 1, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        with self._lock:
            self._faults.extend(_Fault("fail", status=status, body=body, headers=headers or {}) for _ in range(times))

    def hang_next(self, seconds: float = 2.0, times: int = 1) -> None:
        with self._lock:
            self._faults.extend(_Fault("hang", seconds=seconds) for _ in range(times))

    def drop_next(self, times: int = 1) -> None:
        with self._lock:
            self._faults.extend(_Fault("drop") for _ in range(times))

    # Requests ---------------------------------------------------------------------------------------------------------
    @property
    def last(self) -> Request:
        with self._lock:
            return self.requests[-1]

    def requests_to(self, method: str, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path == path]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def handle(self, request: Request) -> Response:  # pragma: no cover - subclasses
        raise NotImplementedError

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        request = Request(
            method=handler.command,
            path=unquote(parts.path),
            raw_path=handler.path,
            query={k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
        )
        with self._lock:
            self.requests.append(request)
            fault = self._faults.pop(0) if self._faults else None
        if fault is not None and fault.kind == "drop":
            handler.close_connection = True
            return
        if fault is not None and fault.kind == "hang":
            self._release.wait(fault.seconds)
        if fault is not None and fault.kind == "fail":
            response = Response(fault.status, fault.body, dict(fault.headers))
        else:
            try:
                with self._lock:
                    response = self.handle(request)
            except HttpError as err:
                response = err.response
        self._write(handler, response)

    @staticmethod
    def _write(handler: BaseHTTPRequestHandler, response: Response) -> None:
        payload, content_type = response.encode()
        try:
            handler.send_response(response.status)
            if content_type and response.status != 204:
                handler.send_header("Content-Type", content_type)
            for name, value in response.headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(0 if response.status == 204 else len(payload)))
            handler.end_headers()
            if response.status != 204:
                handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            handler.close_connection = True


def json_error(status: int, body: dict[str, Any]) -> HttpError:
    return HttpError(Response(status, body))


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
