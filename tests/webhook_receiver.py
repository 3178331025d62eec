"""A webhook receiver for tests: a threaded `http.server` on 127.0.0.1 that records every request (raw body bytes,
headers) and answers from a script (a queue of responses, then a default) or from a `decide` function. An answer may
also hang before responding (`delay`, to make the sender time out) or drop the connection without a response."""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0  # seconds to hang before answering
    drop: bool = False  # reset the connection instead of answering


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.script: list[Answer] = []
        self.default = Answer()
        self.decide: Callable[[Received], Answer] | None = None  # when set, answers every request
        self.answers: list[tuple[Received, Answer]] = []  # what each request got, in arrival order
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, *answers: Answer) -> None:
        """The next requests get these answers, in order; later ones get `default`."""
        with self._lock:
            self.script.extend(answers)

    def of(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.of(path)
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise AssertionError(f"{path}: {len(self.of(path))} request(s) within {timeout} s, wanted {count}")

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length)
        received = Received(request.path, {k.lower(): v for k, v in request.headers.items()}, body)
        with self._lock:
            self.requests.append(received)
            if self.decide is not None:
                answer = self.decide(received)
            else:
                answer = self.script.pop(0) if self.script else self.default
            self.answers.append((received, answer))
        if answer.drop:
            request.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            request.connection.close()  # RST: no status line, nothing
            request.close_connection = True
            request.wfile = io.BytesIO()  # what the handler flushes afterwards goes nowhere
            return
        if answer.delay:
            time.sleep(answer.delay)
        try:
            request.send_response(answer.status)
            for name, value in answer.headers.items():
                request.send_header(name, value)
            request.send_header("Content-Length", str(len(answer.body)))
            request.end_headers()
            request.wfile.write(answer.body)
        except OSError:  # the sender gave up (timed out) and closed the connection
            request.close_connection = True
            request.wfile = io.BytesIO()

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(5)
