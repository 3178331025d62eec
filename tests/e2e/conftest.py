"""The `stack` fixture: the local stack in a subprocess (`python -m local`, PORT=0), or a deployed stage.

With SWITCHBOARD_BASE_URL (and SWITCHBOARD_API_KEY) set, the tests run against that URL instead; the local-only
fields (organization id, owner credentials, AWS endpoint) are then None and tests that need them skip.
Under pytest-xdist every worker starts its own stack (each with its own moto server), which is fine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from local.iam_recorder import VIOLATION_MARKER, Violation
from tests import iam_check

ROOT = Path(__file__).resolve().parents[2]
READY_MARKER = "SWITCHBOARD_LOCAL_READY"
START_TIMEOUT = 60.0
E2E_API_KEY = "sk_test_e2e_0123456789abcdefghijklmnopqrstuv"


@dataclass
class Stack:
    url: str
    api_key: str
    organization_id: str | None = None
    owner_email: str | None = None
    owner_password: str | None = None
    aws_endpoint_url: str | None = None
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    started_in: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    iam_read: int = 0  # how much of the output the IAM check has read

    def iam_violations(self) -> list[Violation]:
        """The ungranted AWS calls the local stack logged since the last look (local/iam_recorder.py)."""
        if self.log_path is None or not self.log_path.exists():
            return []
        with self.log_path.open("rb") as log:
            log.seek(self.iam_read)
            data = log.read()
        end = data.rfind(b"\n") + 1  # whole lines only
        self.iam_read += end
        marker = VIOLATION_MARKER + " "
        return [
            Violation.from_json(line.split(marker, 1)[1])
            for line in data[:end].decode(errors="replace").splitlines()
            if marker in line
        ]

    def check_iam(self) -> None:
        """Fails the test when the stack logged an ungranted call since the last check (tests/iam_check.py)."""
        failure = iam_check.report(self.iam_violations())
        if failure:
            pytest.fail(f"the local stack: {failure}", pytrace=False)

    @property
    def is_local(self) -> bool:
        return self.process is not None

    def client(self, api_key: str | None = None, *, auth: bool = True, **kwargs: Any) -> httpx.Client:
        """An httpx client on the base URL; sends `X-Api-Key` (the stack's key unless given) when `auth`."""
        headers = dict(kwargs.pop("headers", {}) or {})
        if auth:
            headers.setdefault("X-Api-Key", api_key or self.api_key)
        return httpx.Client(base_url=self.url, headers=headers, timeout=kwargs.pop("timeout", 15.0), **kwargs)

    def output(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def assert_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            pytest.fail(
                f"the local stack died (exit code {self.process.returncode}); its output:\n{self.output()[-20000:]}",
                pytrace=False,
            )


def _read_ready(log_path: Path) -> dict[str, Any] | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith(READY_MARKER + " "):
            return json.loads(line[len(READY_MARKER) + 1 :])  # type: ignore[no-any-return]
    return None


def _start_local_stack(extra_env: dict[str, str] | None = None) -> Stack:
    """Start `python -m local` on a free port (`extra_env` adds to its environment) and wait for its ready line."""
    log_file = tempfile.NamedTemporaryFile(prefix="switchboard-local-", suffix=".log", delete=False)  # noqa: SIM115
    log_path = Path(log_file.name)
    env = {
        **os.environ,
        "PORT": "0",
        "LOCAL_TIME_SCALE": "0.001",
        "LOCAL_API_KEY": E2E_API_KEY,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers" / "core")]),
        **(extra_env or {}),
    }
    env.pop("AWS_ENDPOINT_URL", None)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
    )
    log_file.close()
    stack = Stack(url="", api_key=E2E_API_KEY, process=process, log_path=log_path)
    deadline = started + START_TIMEOUT
    while True:
        ready = _read_ready(log_path)
        if ready is not None:
            break
        if process.poll() is not None:
            pytest.fail(
                f"the local stack exited with {process.returncode} before it was ready:\n{stack.output()}",
                pytrace=False,
            )
        if time.monotonic() > deadline:
            process.kill()
            process.wait(10)
            pytest.fail(f"the local stack was not ready within {START_TIMEOUT:.0f} s:\n{stack.output()}", pytrace=False)
        time.sleep(0.05)
    stack.started_in = time.monotonic() - started
    stack.url = ready["url"]
    stack.api_key = ready["api_key"]
    stack.organization_id = ready["organization_id"]
    stack.owner_email = ready["owner_email"]
    stack.owner_password = ready["owner_password"]
    stack.aws_endpoint_url = ready.get("aws_endpoint_url")
    stack.extra = ready
    return stack


def _stop_local_stack(stack: Stack) -> None:
    assert stack.process is not None
    if stack.process.poll() is not None:
        stack.assert_alive()
    stack.process.send_signal(signal.SIGTERM)
    try:
        code = stack.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        stack.process.kill()
        stack.process.wait(10)
        pytest.fail(f"the local stack did not stop within 15 s of SIGTERM:\n{stack.output()[-20000:]}", pytrace=False)
    if code != 0:
        pytest.fail(f"the local stack exited with {code} on SIGTERM:\n{stack.output()[-20000:]}", pytrace=False)
    stack.check_iam()
    if stack.log_path is not None:
        stack.log_path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    base_url = os.environ.get("SWITCHBOARD_BASE_URL")
    if base_url:
        api_key = os.environ.get("SWITCHBOARD_API_KEY")
        if not api_key:
            pytest.fail("SWITCHBOARD_BASE_URL is set but SWITCHBOARD_API_KEY is not", pytrace=False)
        yield Stack(url=base_url.rstrip("/"), api_key=api_key)
        return
    local = _start_local_stack()
    try:
        yield local
    finally:
        _stop_local_stack(local)


@pytest.fixture
def live(stack: Stack) -> Iterator[Stack]:
    """The stack, checked to be still running after the test (a crash fails the test with the stack's output)."""
    stack.assert_alive()
    yield stack
    stack.assert_alive()


@pytest.fixture(autouse=True)
def local_stack_iam_grants(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test using the local stack fails when a function made an AWS call its IAM grants do not allow."""
    if "stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("stack")
    if stack.is_local:
        stack.iam_violations()  # what earlier tests left behind was theirs
    yield
    if stack.is_local:
        stack.check_iam()


@pytest.fixture
def local_only(stack: Stack) -> Stack:
    if not stack.is_local:
        pytest.skip("needs the local stack (not a deployed stage)")
    return stack
