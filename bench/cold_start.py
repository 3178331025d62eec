"""Cold-start benchmark: the init phase of every function, as a ratio against a floor measured in the same run.

For each ``functions/<name>/app.py`` a fresh interpreter imports the module and takes its ``handler`` exactly as
Lambda's init phase does (the function directory first on ``sys.path``, the core layer after it, the function's
environment set). The floor is a standard Powertools function in a fresh interpreter: it imports Powertools'
``APIGatewayRestResolver``, ``Logger``, ``Metrics``, ``boto3`` and ``pydantic``, builds an
``APIGatewayRestResolver(enable_validation=True)`` with one trivial route, and wraps its handler in
``Logger.inject_lambda_context`` (API Gateway correlation id) and ``Metrics.log_metrics``. Time is taken inside
the child with ``time.perf_counter()`` around the import, so interpreter startup is excluded. Floor and functions
run interleaved, round after round, and the ratio is median(function) / median(floor): on a noisy machine compare,
don't quote absolute times. The portal, a FastAPI app run by Mangum (as the architecture requires), has a floor of
its own, measured in the same rounds: a fresh interpreter importing FastAPI, Mangum, ``boto3`` and ``pydantic`` and
building a bare FastAPI app with one route wrapped in ``Mangum`` (``FLOOR_OF``). Both floors are printed.

    python -m bench.cold_start [--runs N] [--check] [--only NAME ...]

``BENCH_CLOCK=cpu`` takes the child's CPU time (``time.process_time()``) instead: on a shared machine whose load
varies from second to second, the wall clock also counts the time the child waited for a core.

Exit code 0 unless ``--check`` is given and a function is over target (or failed to initialise).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
PYTHONPATH = os.pathsep.join([str(REPO_ROOT / "layers" / "core"), str(REPO_ROOT)])
TARGET_RATIO = 1.25
DEFAULT_RUNS = 15
FLOOR = "floor"
# The portal is a FastAPI app run by Mangum (the architecture mandates it): its floor is a bare FastAPI app through
# Mangum, not the Powertools resolver. Functions not named here are compared with FLOOR.
ASGI_FLOOR = "floor_asgi"
FLOOR_OF = {"portal": ASGI_FLOOR}
FLOOR_TEXT = {
    FLOOR: "fresh process importing APIGatewayRestResolver, Logger, Metrics, boto3 and pydantic, building\n"
    "       APIGatewayRestResolver(enable_validation=True) with one route, inject_lambda_context, log_metrics",
    ASGI_FLOOR: "fresh process importing FastAPI, Mangum, boto3 and pydantic, building a bare\n"
    "       FastAPI app with one route run by Mangum (the floor of: {functions})",
}
CHILD_TIMEOUT_S = 60
IMPORTTIME_TOP = 10
CLOCK = "cpu" if os.environ.get("BENCH_CLOCK", "").lower() == "cpu" else "wall"
MARKER = "bench.cold_start: timed init begins"

# Globals.Function.Environment of template.yaml (fake values), plus what Lambda itself sets. No network: fake
# credentials, the instance metadata service off, and every AWS endpoint pointed at a dead loopback port, so a
# stray AWS call at import time fails at once instead of leaving the machine.
LAMBDA_ENV = {
    "STAGE": "dev",
    "TABLE_NAME": "switchboard-dev",
    "EVENT_BUS_NAME": "switchboard-dev",
    "MEDIA_BUCKET": "switchboard-dev-media-123456789012",
    "WEBHOOK_EVENTS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/switchboard-dev-webhook-events",
    "WEBHOOK_DELIVERIES_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/switchboard-dev-webhook-deliveries",
    "OUTBOUND_MESSAGES_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/switchboard-dev-outbound-messages",
    "JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/switchboard-dev-jobs",
    "CLOUD_WEBHOOK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/switchboard-dev-cloud-webhook",
    "CURSOR_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:switchboard-dev-CursorSecret-AbCdEf",
    "API_KEY_MODE": "test",
    "MAIL_SENDER": "no-reply@example.com",
    "SANDBOX_STATUS_DELAY": "1",
    "POWERTOOLS_SERVICE_NAME": "switchboard",
    "POWERTOOLS_METRICS_NAMESPACE": "Switchboard",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "bench-fake-secret-access-key",
    "AWS_SESSION_TOKEN": "bench-fake-session-token",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_MAX_ATTEMPTS": "1",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_LAMBDA_LOG_FORMAT": "JSON",
    "_HANDLER": "app.handler",
    "TZ": ":UTC",
}
PASSTHROUGH_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")

# Runs in the child with nothing imported beyond interpreter startup (sys and time are built in), so neither side
# gets a module for free. argv[1] is "floor" or the function directory.
CHILD_SOURCE = f"""
import sys, time

target = sys.argv[1]
if target == {FLOOR!r}:
    def init():
        from aws_lambda_powertools import Logger, Metrics
        from aws_lambda_powertools.event_handler import APIGatewayRestResolver
        from aws_lambda_powertools.logging import correlation_paths
        import boto3
        import pydantic

        logger = Logger()
        metrics = Metrics(namespace="Floor")
        app = APIGatewayRestResolver(enable_validation=True)

        @app.get("/ping")
        def ping() -> dict[str, str]:
            return {{"status": "ok"}}

        @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
        @metrics.log_metrics
        def handler(event, context):
            return app.resolve(event, context)

        return handler
elif target == {ASGI_FLOOR!r}:
    def init():
        from fastapi import FastAPI
        from mangum import Mangum
        import boto3
        import pydantic

        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

        @app.get("/ping")
        def ping() -> dict[str, str]:
            return {{"status": "ok"}}

        asgi = Mangum(app, lifespan="off")

        def handler(event, context):
            return asgi(event, context)

        return handler
else:
    sys.path.insert(0, target)

    def init():
        import app

        return app.handler

sys.stderr.write({MARKER!r} + "\\n")
sys.stderr.flush()
t0 = time.perf_counter()
handler = init()
elapsed = time.perf_counter() - t0
if not callable(handler):
    raise SystemExit("handler is not callable")
sys.stdout.write(repr(elapsed) + "\\n")
"""


@dataclass(frozen=True)
class Target:
    """What one child process initialises: the floor, or one function directory."""

    name: str
    directory: Path | None  # None for the floor

    @property
    def argv_target(self) -> str:
        return self.name if self.directory is None else str(self.directory)


FLOOR_TARGET = Target(FLOOR, None)
ASGI_FLOOR_TARGET = Target(ASGI_FLOOR, None)
FLOOR_TARGETS = {FLOOR: FLOOR_TARGET, ASGI_FLOOR: ASGI_FLOOR_TARGET}


def floor_of(name: str) -> str:
    """The floor a function is compared with."""
    return FLOOR_OF.get(name, FLOOR)


@dataclass(frozen=True)
class Row:
    name: str
    samples_ms: tuple[float, ...]
    median_ms: float
    ratio: float | None  # None for the floor itself
    error: str | None = None
    floor: str = FLOOR  # the floor `ratio` is against

    @property
    def over(self) -> bool:
        return self.error is not None or (self.ratio is not None and self.ratio > TARGET_RATIO)

    @property
    def status(self) -> str:
        if self.error is not None:
            return "ERROR"
        return "OVER" if self.over else "PASS"


@dataclass(frozen=True)
class Report:
    floor: Row
    rows: list[Row]
    runs: int
    seconds: float
    other_floors: tuple[Row, ...] = ()  # the ASGI floor, when a function measured is compared with it


@dataclass
class ImportLine:
    """One ``-X importtime`` line; ``children`` are the imports it triggered (nested one level deeper)."""

    module: str
    depth: int
    self_ms: float
    cumulative_ms: float
    children: list[ImportLine] = field(default_factory=list)

    def beyond_floor_ms(self, floor_modules: set[str]) -> float:
        """Time in this module and everything it pulled in that the floor does not import too."""
        own = 0.0 if self.module in floor_modules else self.self_ms
        return own + sum(child.beyond_floor_ms(floor_modules) for child in self.children)


class ChildError(RuntimeError):
    pass


def discover_functions(functions_dir: Path = FUNCTIONS_DIR) -> list[Target]:
    """Every ``functions/*/app.py``, sorted by name."""
    return [Target(app.parent.name, app.parent) for app in sorted(functions_dir.glob("*/app.py"))]


def child_env(target: Target) -> dict[str, str]:
    env = {key: os.environ[key] for key in PASSTHROUGH_ENV if key in os.environ}
    env.update(LAMBDA_ENV)
    env["AWS_LAMBDA_FUNCTION_NAME"] = f"switchboard-dev-{target.name}"
    env["LAMBDA_TASK_ROOT"] = str(target.directory or REPO_ROOT)
    env["PYTHONPATH"] = PYTHONPATH
    return env


def _run_child(target: Target, *, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    source = CHILD_SOURCE if CLOCK == "wall" else CHILD_SOURCE.replace("time.perf_counter()", "time.process_time()")
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", source, target.argv_target]
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, env=child_env(target), capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise ChildError(f"{target.name}: init failed (exit {proc.returncode}):\n{tail}")
    return proc


def measure_once(target: Target) -> float:
    """Init time of one fresh process, in milliseconds."""
    proc = _run_child(target)
    return float(proc.stdout.strip().splitlines()[-1]) * 1000.0


def measure(targets: Sequence[Target], runs: int, *, warmup: bool = True) -> dict[str, list[float] | str]:
    """Samples (ms) per target name, or the error text of a target that failed. Floors first in every round (the
    ASGI floor only when a function measured is compared with it); the functions' order rotates so none always runs
    right after a floor."""
    floors = [FLOOR_TARGET] + ([ASGI_FLOOR_TARGET] if any(floor_of(t.name) == ASGI_FLOOR for t in targets) else [])
    ordered = [*floors, *targets]
    results: dict[str, list[float] | str] = {t.name: [] for t in ordered}
    if warmup:  # writes bytecode caches and warms the page cache; not counted
        for target in ordered:
            try:
                measure_once(target)
            except ChildError as err:
                results[target.name] = str(err)
    for round_no in range(runs):
        shift = round_no % len(targets) if targets else 0
        for target in [*floors, *targets[shift:], *targets[:shift]]:
            samples = results[target.name]
            if isinstance(samples, str):
                continue
            try:
                samples.append(measure_once(target))
            except ChildError as err:
                results[target.name] = str(err)
    return results


def summarize_floors(results: dict[str, list[float] | str]) -> dict[str, Row]:
    """The floors measured, by name (the main floor first)."""
    floors: dict[str, Row] = {}
    for name in FLOOR_TARGETS:
        if name not in results:
            continue
        samples = results[name]
        if isinstance(samples, str) or not samples:
            raise ChildError(f"the floor {name} could not be measured: {samples}")
        floors[name] = Row(name, tuple(samples), statistics.median(samples), None, floor=name)
    if FLOOR not in floors:
        raise ChildError("the floor was not measured")
    return floors


def summarize(results: dict[str, list[float] | str]) -> tuple[Row, list[Row]]:
    floors = summarize_floors(results)
    rows = []
    for name, samples in results.items():
        if name in FLOOR_TARGETS:
            continue
        floor = floors.get(floor_of(name), floors[FLOOR])
        if isinstance(samples, str) or not samples:
            error = samples if isinstance(samples, str) else "no samples"
            rows.append(Row(name, (), 0.0, None, error=error, floor=floor.name))
            continue
        median = statistics.median(samples)
        rows.append(Row(name, tuple(samples), median, median / floor.median_ms, floor=floor.name))
    return floors[FLOOR], rows


def run_benchmark(runs: int, targets: Sequence[Target] | None = None, *, warmup: bool = True) -> Report:
    targets = discover_functions() if targets is None else list(targets)
    started = time.perf_counter()
    results = measure(targets, runs, warmup=warmup)
    floor, rows = summarize(results)
    others = tuple(row for name, row in summarize_floors(results).items() if name != FLOOR)
    return Report(floor, rows, runs, time.perf_counter() - started, others)


def parse_importtime(stderr: str) -> list[ImportLine]:
    """The ``-X importtime`` lines printed after the child's marker (the timed init only, not interpreter startup),
    in output order (children before their parent), each with its children attached."""
    _, found, after = stderr.partition(MARKER)
    lines: list[ImportLine] = []
    pending: dict[int, list[ImportLine]] = {}  # depth -> lines whose parent has not been printed yet
    for raw in (after if found else stderr).splitlines():
        if not raw.startswith("import time:"):
            continue
        fields = raw[len("import time:") :].split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line
        name = fields[2].rstrip()
        stripped = name.lstrip()
        depth = max(0, (len(name) - len(stripped) - 1) // 2)
        line = ImportLine(stripped, depth, int(fields[0]) / 1000.0, int(fields[1]) / 1000.0)
        line.children = pending.pop(depth + 1, [])
        pending.setdefault(depth, []).append(line)
        lines.append(line)
    return lines


def importtime(target: Target) -> list[ImportLine]:
    return parse_importtime(_run_child(target, importtime=True).stderr)


def format_report(report: Report) -> str:
    target = f"<={TARGET_RATIO:.2f}x"
    lines = [f"Cold start (Lambda init: import + module-level code), {report.runs} interleaved runs, medians"]
    for floor in (report.floor, *report.other_floors):
        spread = f"{min(floor.samples_ms):.1f}-{max(floor.samples_ms):.1f}"
        users = ", ".join(sorted(row.name for row in report.rows if row.floor == floor.name))
        text = FLOOR_TEXT[floor.name].format(functions=users)
        lines.append(f"{floor.name + ':':<11} {floor.median_ms:.1f} ms (range {spread} ms) = {text}")
    lines += ["", f"{'function':<24} {'init ms':>9} {'ratio':>8} {'target':>8}  result"]
    for row in report.rows:
        against = "" if row.floor == FLOOR else f"  (to {row.floor})"
        if row.error is not None or row.ratio is None:
            lines.append(f"{row.name:<24} {'-':>9} {'-':>8} {target:>8}  {row.status}")
        else:
            ratio = f"{row.ratio:.2f}x"
            lines.append(f"{row.name:<24} {row.median_ms:>9.1f} {ratio:>8} {target:>8}  {row.status}{against}")
    clock_note = " clock: CPU time of each child (BENCH_CLOCK=cpu)" if CLOCK == "cpu" else ""
    lines.append(f"({report.seconds:.0f} s){clock_note}")
    for row in report.rows:
        if row.error is not None:
            lines += ["", row.error]
    return "\n".join(lines)


def format_importtime(name: str, imports: list[ImportLine], floor_modules: set[str]) -> str:
    """Where one function's init goes: top cumulative imports (``*`` = the floor does not import it), then the
    imports that cost the most beyond what the floor pays too."""
    roots = [line for line in imports if line.depth == 0]
    app = next((line for line in roots if line.module == "app"), None)
    rest = [line for line in imports if line is not app]
    total = sum(line.cumulative_ms for line in roots)
    beyond = sum(line.beyond_floor_ms(floor_modules) for line in roots)
    out = [f"{name}: python -X importtime, one run (inflated by the tracing: read it relatively)"]
    summary = f"  init {total:.1f} ms, of which {beyond:.1f} ms in modules the floor does not import"
    if app is not None:
        summary += f"; the app module's own code {app.self_ms:.1f} ms"
    out.append(summary)

    top = sorted(rest, key=lambda line: line.cumulative_ms, reverse=True)[:IMPORTTIME_TOP]
    out += [f"  top {IMPORTTIME_TOP} cumulative imports (* = not imported by the floor):"]
    out += [f"    {'cum ms':>8} {'self ms':>8}  module"]
    for line in top:
        mark = "" if line.module in floor_modules else " *"
        out.append(f"    {line.cumulative_ms:>8.1f} {line.self_ms:>8.1f}  {'  ' * line.depth}{line.module}{mark}")

    extra = [line for line in rest if line.module not in floor_modules]
    extra.sort(key=lambda line: line.beyond_floor_ms(floor_modules), reverse=True)
    out += [f"  top {IMPORTTIME_TOP} beyond the floor (ms in the module and what it pulls in that the floor does not):"]
    out += [f"    {'beyond':>8} {'self ms':>8}  module"]
    for line in extra[:IMPORTTIME_TOP]:
        beyond_ms = line.beyond_floor_ms(floor_modules)
        out.append(f"    {beyond_ms:>8.1f} {line.self_ms:>8.1f}  {'  ' * line.depth}{line.module}")
    if not extra:
        out.append("    (none)")
    return "\n".join(out)


def runs_default() -> int:
    value = os.environ.get("BENCH_RUNS", "")
    return int(value) if value.strip() else DEFAULT_RUNS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help=f"rounds (default BENCH_RUNS or {DEFAULT_RUNS})")
    parser.add_argument("--check", action="store_true", help="exit 1 when a function is over target")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only these functions (directory names)")
    args = parser.parse_args(argv)
    runs = args.runs if args.runs is not None else runs_default()
    if runs < 1:
        parser.error("--runs must be at least 1")

    targets = discover_functions()
    if args.only:
        unknown = set(args.only) - {t.name for t in targets}
        if unknown:
            parser.error(f"unknown function(s): {', '.join(sorted(unknown))}")
        targets = [t for t in targets if t.name in args.only]

    try:
        report = run_benchmark(runs, targets)
    except ChildError as err:
        print(err, file=sys.stderr)
        return 1 if args.check else 0
    print(format_report(report), flush=True)

    over = [row for row in report.rows if row.over and row.error is None]
    if over:
        floor_modules: dict[str, set[str]] = {}
        by_name = {t.name: t for t in targets}
        for row in over:
            if row.floor not in floor_modules:
                floor_modules[row.floor] = {line.module for line in importtime(FLOOR_TARGETS[row.floor])}
            print()
            print(format_importtime(row.name, importtime(by_name[row.name]), floor_modules[row.floor]), flush=True)

    failed = any(row.over for row in report.rows)
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
