"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol for browser tests.

No extra dependency: Chromium is started with `--remote-debugging-pipe`, which speaks the protocol as NUL-terminated
JSON messages on file descriptors 3 (commands in) and 4 (replies and events out). One page is opened and attached
(flat session); the tests navigate, fill and submit forms with small scripts, and read the page as a user sees it.
`find_chromium()` fails (never skips) when no browser is installed: `make install` installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    configured = os.environ.get("CHROMIUM")
    if configured:
        return configured
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class BrowserError(AssertionError):
    pass


class Browser:
    def __init__(self, process: subprocess.Popen[bytes], commands: int, replies: int) -> None:
        self.process = process
        self._out = os.fdopen(commands, "wb", buffering=0)
        self._in = os.fdopen(replies, "rb", buffering=0)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.session: str | None = None

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = self._in.read(65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._cond:
                        self._replies[message["id"]] = message
                        self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, page: bool = True, timeout: float = 15) -> Any:
        with self._cond:
            self._next_id += 1
            call_id = self._next_id
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
        if page and self.session:
            message["sessionId"] = self.session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while call_id not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"{method}: no answer from Chromium within {timeout} s")
                self._cond.wait(left)
            reply = self._replies.pop(call_id)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, page=False)[
            "sessionId"
        ]
        self.send("Page.enable")
        self.send("Runtime.enable")

    # What a test does --------------------------------------------------------------------------------------------
    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def location(self) -> str:
        return str(self.evaluate("location.href"))

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def status_of_page(self) -> str:
        return str(self.evaluate("document.readyState"))

    def wait(self, condition: str, timeout: float = 15.0) -> None:
        """Until the JavaScript `condition` is true in a fully loaded page."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.evaluate(f"document.readyState === 'complete' && !!({condition})")
            except BrowserError as err:  # the page is being replaced by a navigation
                last = str(err)
            if last is True:
                return
            time.sleep(0.05)
        raise BrowserError(f"not true within {timeout} s: {condition} (last {last!r}) at {self.location()}")

    def goto(self, url: str) -> None:
        """Navigate and wait for the new document (a global set on the old one is gone)."""
        self.evaluate("window.__before = true")
        self.send("Page.navigate", {"url": url})
        self.wait("!window.__before")

    def act(self, script: str, *, then: str) -> None:
        """Run `script` (a click, a submit) and wait until the page that follows makes `then` true."""
        self.evaluate(f"window.__before = true; {script}; true")
        self.wait(f"!window.__before && ({then})")

    def cookies(self) -> list[dict[str, Any]]:
        return list(self.send("Storage.getCookies", page=False)["cookies"])

    def clear_cookies(self) -> None:
        self.send("Storage.clearCookies", page=False)


@contextmanager
def chromium(binary: str) -> Iterator[Browser]:
    commands_read, commands_write = os.pipe()
    replies_read, replies_write = os.pipe()
    # Move the child's ends out of the way of 3 and 4 first, so the dup2 calls below cannot clobber each other.
    child_in = os.dup2(commands_read, 100)
    child_out = os.dup2(replies_write, 101)
    os.close(commands_read)
    os.close(replies_write)

    def wire() -> None:
        os.dup2(child_in, 3)
        os.dup2(child_out, 4)

    profile = tempfile.mkdtemp(prefix="switchboard-chromium-")
    process = subprocess.Popen(
        [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--metrics-recording-only",
            "--password-store=basic",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=False,  # the child keeps 3 and 4 (made by dup2 in `wire`, inheritable); Python's own are not
        preexec_fn=wire,  # dup2 only, before exec
    )
    os.close(child_in)
    os.close(child_out)
    browser = Browser(process, commands_write, replies_read)
    try:
        browser.open_page()
        yield browser
    finally:
        with suppress(BrowserError, OSError):
            browser.send("Browser.close", page=False, timeout=5)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        shutil.rmtree(profile, ignore_errors=True)
