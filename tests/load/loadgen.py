"""A bounded load run against a running stack, from its own process (`python -m tests.load --url ... --api-key ...`).

Three phases with the same number of requests and the same concurrency: the floor route (`GET /v1/health`: the gateway
and a function invocation, no credential, no DynamoDB), the mix (contact writes, resolves, message sends on a
connected sandbox channel, contact lists), and the floor again; the floor's figures combine both of its phases, so a
machine that slows down during the run moves both sides of the ratio. The authenticated floor (`GET
/v1/organization`: authorizer, rate limiter, one read) is measured the same way.

Every phase stops at its request count or at the time cap, whichever comes first. A request is an error when it does
not get the status the operation documents for success (or raises). The last line of the output is the report as
JSON (`LOAD_REPORT {...}`), which tests/load/test_load.py reads.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

REPORT_MARKER = "LOAD_REPORT"
MIX_WEIGHTS = {"contact_write": 3, "resolve": 3, "send": 2, "list": 2}


@dataclass
class PhaseResult:
    name: str
    requests: int = 0
    errors: int = 0
    elapsed: float = 0.0
    capped: bool = False
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    by_operation: Counter[str] = field(default_factory=Counter)
    op_latencies_ms: dict[str, list[float]] = field(default_factory=dict, repr=False)
    error_samples: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        return self.requests / self.elapsed if self.elapsed else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    def merge(self, other: PhaseResult) -> PhaseResult:
        merged = PhaseResult(self.name)
        for part in (self, other):
            merged.requests += part.requests
            merged.errors += part.errors
            merged.elapsed += part.elapsed
            merged.capped |= part.capped
            merged.latencies_ms += part.latencies_ms
            merged.by_operation.update(part.by_operation)
            for op, values in part.op_latencies_ms.items():
                merged.op_latencies_ms.setdefault(op, []).extend(values)
            merged.error_samples += part.error_samples
        return merged

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed, 3),
            "throughput_rps": round(self.throughput, 1),
            "p50_ms": round(self.percentile(0.50), 2),
            "p99_ms": round(self.percentile(0.99), 2),
            "mean_ms": round(statistics.fmean(self.latencies_ms), 2) if self.latencies_ms else 0.0,
            "capped": self.capped,
            "by_operation": dict(self.by_operation),
            "by_operation_p50_ms": {
                op: round(statistics.median(values), 2) for op, values in sorted(self.op_latencies_ms.items())
            },
            "error_samples": self.error_samples[:5],
        }


@dataclass
class Fixture:
    """What the mix needs: a connected sandbox channel and contacts whose identities are known."""

    channel_id: str
    phones: list[str]
    run_id: str


Operation = Callable[[httpx.Client, int], tuple[str, httpx.Response, int]]


def _phone(rng: random.Random) -> str:
    # A valid number (libphonenumber: San Francisco's 415, any exchange from 200); never ending in 0000 (the sandbox
    # refuses those).
    return f"+1 415 {rng.randrange(200, 999)} {rng.randrange(1000, 9999)}"


def prepare(client: httpx.Client, contacts: int, seed: int) -> Fixture:
    run_id = uuid.uuid4().hex[:8]
    rng = random.Random(seed)
    resp = client.post("/v1/channels", json={"name": f"load {run_id}", "platform": "sandbox"})
    resp.raise_for_status()
    channel_id = resp.json()["data"]["id"]
    client.post(f"/v1/channels/{channel_id}/connect").raise_for_status()
    phones = []
    for i in range(contacts):
        phone = _phone(rng)
        resp = client.post("/v1/contacts", json={"name": f"Load {run_id} {i}", "phone": phone})
        resp.raise_for_status()
        phones.append(resp.json()["data"]["phone"])
    return Fixture(channel_id=channel_id, phones=phones, run_id=run_id)


def mix_operations(fixture: Fixture, seed: int, weights: dict[str, int] | None = None) -> list[Operation]:
    rng = random.Random(seed)
    lock = threading.Lock()

    def pick_phone() -> str:
        with lock:
            return rng.choice(fixture.phones)

    def contact_write(client: httpx.Client, i: int) -> tuple[str, httpx.Response, int]:
        body = {
            "name": f"Load {fixture.run_id} w{i}",
            "email": f"load-{fixture.run_id}-{i}@example.com",
            "attributes": {"source": "load"},
        }
        return "contact_write", client.post("/v1/contacts", json=body), 201

    def resolve(client: httpx.Client, i: int) -> tuple[str, httpx.Response, int]:
        body = {"identifiers": [{"type": "phone", "value": pick_phone()}]}
        return "resolve", client.post("/v1/contacts/resolve", json=body), 200

    def send(client: httpx.Client, i: int) -> tuple[str, httpx.Response, int]:
        body = {"channel_id": fixture.channel_id, "to": pick_phone(), "type": "text", "text": {"body": f"load {i}"}}
        return "send", client.post("/v1/messages", json=body), 202

    def list_contacts(client: httpx.Client, i: int) -> tuple[str, httpx.Response, int]:
        return "list", client.get("/v1/contacts", params={"limit": 20}), 200

    table = {"contact_write": contact_write, "resolve": resolve, "send": send, "list": list_contacts}
    return [table[name] for name, weight in (weights or MIX_WEIGHTS).items() for _ in range(weight)]


def floor_operation(path: str) -> Operation:
    def floor(client: httpx.Client, i: int) -> tuple[str, httpx.Response, int]:
        return path, client.get(path), 200

    return floor


def run_phase(
    name: str,
    url: str,
    api_key: str,
    operations: list[Operation],
    requests: int,
    concurrency: int,
    time_cap: float,
    seed: int,
) -> PhaseResult:
    """`requests` calls spread over `concurrency` threads (each its own keep-alive client), stopped at `time_cap`."""
    result = PhaseResult(name)
    lock = threading.Lock()
    counter = iter(range(requests))
    rng = random.Random(seed)
    plan = [rng.choice(operations) for _ in range(requests)]
    started = time.perf_counter()
    deadline = started + time_cap

    def worker() -> None:
        with httpx.Client(base_url=url, headers={"X-Api-Key": api_key}, timeout=30.0) as client:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                if time.perf_counter() > deadline:
                    with lock:
                        result.capped = True
                    return
                t0 = time.perf_counter()
                try:
                    op_name, resp, expected = plan[i](client, i)
                    ok = resp.status_code == expected
                    sample = "" if ok else f"{op_name}: {resp.status_code} {resp.text[:200]}"
                except httpx.HTTPError as err:
                    op_name, ok, sample = "?", False, f"{type(err).__name__}: {err}"
                elapsed_ms = (time.perf_counter() - t0) * 1000
                with lock:
                    result.requests += 1
                    result.latencies_ms.append(elapsed_ms)
                    result.by_operation[op_name] += 1
                    result.op_latencies_ms.setdefault(op_name, []).append(elapsed_ms)
                    if not ok:
                        result.errors += 1
                        result.error_samples.append(sample)

    threads = [threading.Thread(target=worker, name=f"load-{name}-{n}") for n in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.elapsed = time.perf_counter() - started
    return result


def run(
    url: str,
    api_key: str,
    requests: int,
    concurrency: int,
    time_cap: float,
    seed: int,
    weights: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The whole run; `time_cap` bounds each phase (five phases), so the run ends within about 5 x `time_cap`."""
    with httpx.Client(base_url=url, headers={"X-Api-Key": api_key}, timeout=30.0) as client:
        fixture = prepare(client, contacts=max(5, min(50, requests // 20)), seed=seed)
    half = max(1, requests // 2)
    args: dict[str, Any] = {"url": url, "api_key": api_key, "concurrency": concurrency, "time_cap": time_cap}
    health = [floor_operation("/v1/health")]
    authed = [floor_operation("/v1/organization")]
    floor_a = run_phase("floor", operations=health, requests=half, seed=seed, **args)
    auth_a = run_phase("auth_floor", operations=authed, requests=half, seed=seed, **args)
    mix = run_phase("mix", operations=mix_operations(fixture, seed, weights), requests=requests, seed=seed, **args)
    auth_b = run_phase("auth_floor", operations=authed, requests=requests - half, seed=seed, **args)
    floor_b = run_phase("floor", operations=health, requests=requests - half, seed=seed, **args)
    floor, auth_floor = floor_a.merge(floor_b), auth_a.merge(auth_b)
    phases = {"mix": mix, "floor": floor, "auth_floor": auth_floor}
    report: dict[str, Any] = {
        "url": url,
        "requests_per_phase": requests,
        "concurrency": concurrency,
        "time_cap_s": time_cap,
        "seed": seed,
        "mix_weights": weights or MIX_WEIGHTS,
        "phases": {name: phase.summary() for name, phase in phases.items()},
        "errors": sum(phase.errors for phase in phases.values()),
        "capped": any(phase.capped for phase in phases.values()),
    }
    for name in ("floor", "auth_floor"):
        base = phases[name]
        report[f"ratio_to_{name}"] = {
            "throughput": round(mix.throughput / base.throughput, 3) if base.throughput else None,
            "p50": round(mix.percentile(0.5) / base.percentile(0.5), 2) if base.percentile(0.5) else None,
            "p99": round(mix.percentile(0.99) / base.percentile(0.99), 2) if base.percentile(0.99) else None,
        }
    return report


def render(report: dict[str, Any]) -> str:
    lines = [
        f"load: {report['requests_per_phase']} requests per phase, concurrency {report['concurrency']}, "
        f"time cap {report['time_cap_s']} s per phase, seed {report['seed']}, mix {report['mix_weights']}",
        f"{'phase':<12}{'requests':>9}{'errors':>8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}  mix",
    ]
    for name, phase in report["phases"].items():
        ops = ""
        if name == "mix":
            p50s = phase["by_operation_p50_ms"]
            ops = ", ".join(f"{k} {v} (p50 {p50s.get(k)} ms)" for k, v in sorted(phase["by_operation"].items()))
        lines.append(
            f"{name:<12}{phase['requests']:>9}{phase['errors']:>8}{phase['throughput_rps']:>9}"
            f"{phase['p50_ms']:>9}{phase['p99_ms']:>9}  {ops}"
        )
    for name in ("floor", "auth_floor"):
        ratio = report[f"ratio_to_{name}"]
        lines.append(f"mix / {name}: throughput {ratio['throughput']}x, p50 {ratio['p50']}x, p99 {ratio['p99']}x")
    lines.append(f"errors: {report['errors']}" + ("  (a phase hit the time cap)" if report["capped"] else ""))
    for phase in report["phases"].values():
        lines += [f"  error: {sample}" for sample in phase["error_samples"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="base URL of a running stack; without it a local stack is started")
    parser.add_argument("--api-key")
    parser.add_argument("--requests", type=int, default=2000, help="requests per phase (mix; floor split in two)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--time-cap", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument(
        "--mix",
        type=_weights,
        default=None,
        help="operation weights, e.g. contact_write=3,resolve=3,send=2,list=2 (the default)",
    )
    args = parser.parse_args(argv)
    if args.url:
        if not args.url.startswith(("http://127.0.0.1", "http://localhost")):
            parser.error("the load test runs against the loopback interface only")
        if not args.api_key:
            parser.error("--api-key is required with --url")
        report = run(args.url, args.api_key, args.requests, args.concurrency, args.time_cap, args.seed, args.mix)
    else:
        report = _run_with_local_stack(args)
    print(render(report))
    print(f"{REPORT_MARKER} {json.dumps(report)}")
    return 1 if report["errors"] else 0


def _weights(text: str) -> dict[str, int]:
    weights = {name.strip(): int(weight) for name, _, weight in (part.partition("=") for part in text.split(","))}
    unknown = set(weights) - set(MIX_WEIGHTS)
    if unknown or not any(weights.values()):
        raise argparse.ArgumentTypeError(f"operations are {sorted(MIX_WEIGHTS)}; unknown: {sorted(unknown)}")
    return {name: weight for name, weight in weights.items() if weight > 0}


def _run_with_local_stack(args: argparse.Namespace) -> dict[str, Any]:
    """`make load`: a stack of its own (the e2e helpers start it), this process generating the load."""
    from tests.e2e.conftest import _start_local_stack, _stop_local_stack

    stack = _start_local_stack(extra_env=LOAD_STACK_ENV)
    try:
        return run(stack.url, stack.api_key, args.requests, args.concurrency, args.time_cap, args.seed, args.mix)
    finally:
        _stop_local_stack(stack)


# The per-organization and per-credential request budgets (1200 and 600/min by default) would answer the run with
# 429s; the limiter's own work (one conditional update per request) still runs. Request logging off: the stack
# writes one line per request.
LOAD_STACK_ENV = {
    "RATE_LIMIT_PER_MINUTE": "100000000",
    "RATE_LIMIT_CREDENTIAL_PER_MINUTE": "100000000",
    "LOCAL_LOG_LEVEL": "WARNING",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


if __name__ == "__main__":
    sys.exit(main())
