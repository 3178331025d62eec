"""A small bounded load run inside `make test` (`make load` runs a larger one): the stack in one process, the load
generator in another (`python -m tests.load`), over loopback. It must end by itself with 0 errors and print
throughput, p50/p99 and the ratios to the floor routes measured in the same run.

LOAD_REQUESTS (default 40 per phase) and LOAD_TIME_CAP (default 10 s per phase) bound it: about 30 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import ROOT, Stack, _start_local_stack, _stop_local_stack
from tests.load.loadgen import LOAD_STACK_ENV, MIX_WEIGHTS, REPORT_MARKER

pytestmark = pytest.mark.e2e

LOAD_REQUESTS = int(os.environ.get("LOAD_REQUESTS", "40"))
LOAD_TIME_CAP = float(os.environ.get("LOAD_TIME_CAP", "10"))


@pytest.fixture(scope="module")
def load_stack() -> Iterator[Stack]:
    stack = _start_local_stack(extra_env=LOAD_STACK_ENV)
    try:
        yield stack
    finally:
        _stop_local_stack(stack)


def test_bounded_load_run_has_no_errors(load_stack: Stack) -> None:
    command = [
        sys.executable,
        "-m",
        "tests.load",
        f"--url={load_stack.url}",
        f"--api-key={load_stack.api_key}",
        f"--requests={LOAD_REQUESTS}",
        "--concurrency=2",
        f"--time-cap={LOAD_TIME_CAP}",
    ]
    # The generator's own bound is 5 phases times the cap; the timeout here only guards against a hang.
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=5 * LOAD_TIME_CAP + 60)
    print(done.stdout)
    load_stack.assert_alive()
    assert done.returncode == 0, f"load generator failed:\n{done.stdout}\n{done.stderr[-5000:]}"
    line = next(line for line in done.stdout.splitlines() if line.startswith(REPORT_MARKER + " "))
    report = json.loads(line[len(REPORT_MARKER) + 1 :])
    assert report["errors"] == 0
    mix, floor = report["phases"]["mix"], report["phases"]["floor"]
    # Every phase ran (a phase may stop at the time cap on a busy machine, never with nothing done).
    assert mix["requests"] > 0 and floor["requests"] > 0 and report["phases"]["auth_floor"]["requests"] > 0
    if not report["capped"]:
        assert mix["requests"] == LOAD_REQUESTS
        assert floor["requests"] == LOAD_REQUESTS
        assert set(mix["by_operation"]) == set(MIX_WEIGHTS)
    assert 0 < floor["p50_ms"] <= floor["p99_ms"]
    assert 0 < mix["p50_ms"] <= mix["p99_ms"]
    assert report["ratio_to_floor"]["p50"] is not None
