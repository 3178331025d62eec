"""Handler cost in instructions: the route and its floor (bench.resolve, bench.send) counted by valgrind's callgrind.

Instructions executed do not depend on the machine's load, so this ratio repeats from run to run where the time
ratios move by ±0.1x (docs/performance.md). It is not a substitute for the time ratio: a request that executes more
distinct code also runs at fewer instructions per cycle (more cache misses), so the time ratio is the higher one.

Each side runs in its own process, once with `--warmup` requests only and once with `--requests` more; the
difference divided by `--requests` is the cost of one warm request. Needs `valgrind` (Debian package).
Run: `python -m bench.instructions [--requests N] [--only resolve|send ...]`.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

ROUTES = {
    "resolve": ("bench.resolve", "functions.contacts.app", "/v1/contacts/resolve", "owner"),
    "send": ("bench.send", "functions.messaging.app", "/v1/messages", "member"),
}


def _child(route: str, side: str, warmup: int, requests: int) -> None:
    """Run `warmup + requests` requests of one side (called under valgrind)."""
    import importlib

    from bench._harness import Ctx, FakeDynamoDB, api_event, bench_env, standard_handler

    module_name, app_module, path, role = ROUTES[route]
    bench: Any = importlib.import_module(module_name)
    fake = FakeDynamoDB(bench._items())
    with bench_env(fake):
        if side == "route":
            handler = importlib.import_module(app_module).handler
        else:
            handler = standard_handler(bench.build_floor(fake))
        event = api_event("POST", path, bench.BODY, bench.ORG, role=role)
        ctx = Ctx()
        for _ in range(warmup + requests):
            response = handler(event, ctx)
            assert response["statusCode"] in (200, 202), response


def _count(route: str, side: str, warmup: int, requests: int) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--child",
        route,
        side,
        str(warmup),
        str(requests),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    match = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if not match:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(match.group(1))


def run(requests: int, warmup: int = 50, only: Sequence[str] = ()) -> dict[str, dict[str, float]]:
    from concurrent.futures import ThreadPoolExecutor

    routes = [route for route in ROUTES if not only or route in only]
    jobs = [(route, side, n) for route in routes for side in ("route", "floor") for n in (0, requests)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # valgrind runs one thread: two processes at a time
        counts = dict(zip(jobs, pool.map(lambda job: _count(job[0], job[1], warmup, job[2]), jobs), strict=True))
    results: dict[str, dict[str, float]] = {}
    for route in routes:
        per_request = {
            side: (counts[(route, side, requests)] - counts[(route, side, 0)]) / requests for side in ("route", "floor")
        }
        per_request["ratio"] = per_request["route"] / per_request["floor"]
        results[route] = per_request
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.instructions")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", nargs="+", choices=sorted(ROUTES), default=[], help="these routes only")
    parser.add_argument("--child", nargs=4, metavar=("ROUTE", "SIDE", "WARMUP", "REQUESTS"))
    args, _ = parser.parse_known_args(argv)
    if args.child:
        route, side, warmup, requests = args.child
        _child(route, side, int(warmup), int(requests))
        return 0
    if shutil.which("valgrind") is None:
        print("bench.instructions: NOT RUN, valgrind is not installed (apt-get install valgrind)")
        return 1 if args.check else 0
    results = run(args.requests, only=args.only)
    print(
        f"Instructions per warm request (valgrind callgrind, {args.requests} requests after 50 of warm-up), route/floor"
    )
    for route, r in results.items():
        print(f"  {route:8s} route {r['route']:>10,.0f}  floor {r['floor']:>10,.0f}  -> {r['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
