"""Shared pieces of the handler benchmarks: a fake DynamoDB client (no network, no emulator), events, the floor's
standard entry point, timing.

The fake answers from a dict of items in DynamoDB JSON, so the measured cost is the handler's own work (routing,
validation, auth context, serialisation, store code) — exactly what differs between a route and its floor.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ENV = {
    "STAGE": "test",
    "TABLE_NAME": "bench",
    "DELIVERIES_TABLE_NAME": "bench-deliveries",  # (the fake serves both tables: their keys never collide)
    "EVENT_BUS_NAME": "bench",
    "MEDIA_BUCKET": "bench-media",
    "WEBHOOK_EVENTS_QUEUE_URL": "http://127.0.0.1:9/q1",
    "WEBHOOK_DELIVERIES_QUEUE_URL": "http://127.0.0.1:9/q2",
    "OUTBOUND_MESSAGES_QUEUE_URL": "http://127.0.0.1:9/q3",
    "JOBS_QUEUE_URL": "http://127.0.0.1:9/q4",
    "CLOUD_WEBHOOK_QUEUE_URL": "http://127.0.0.1:9/q5",
    "CURSOR_SECRET": "bench-cursor-secret-0123456789",
    "API_KEY_MODE": "test",
    "MAIL_SENDER": "bench@example.com",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_SERVICE_NAME": "switchboard",
    "POWERTOOLS_LOG_LEVEL": "ERROR",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
}


@contextmanager
def bench_env(fake_dynamodb: Any) -> Iterator[None]:
    """The functions' environment and a fake DynamoDB client for the duration; everything restored after. The
    functions' EMF lines (stdout) are written to /dev/null: still formatted and written, as on Lambda, not shown."""
    from switchboard import aws
    from switchboard.config import reset_settings

    saved = dict(os.environ)
    os.environ.update(ENV)
    reset_settings()
    aws.reset_clients()
    aws._clients["dynamodb"] = fake_dynamodb
    try:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        reset_settings()
        aws.reset_clients()


class FakeDynamoDB:
    """get_item / batch_get_item / update_item / query over an in-memory table; counts every call."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        from switchboard.store.table import serialize

        self.items = {(i["PK"], i["SK"]): serialize(i) for i in items}
        self.calls: Counter[str] = Counter()
        self.log: list[tuple[str, dict[str, Any]]] | None = None  # a list: every request's arguments are kept

    def _seen(self, operation: str, kw: dict[str, Any]) -> None:
        self.calls[operation] += 1
        if self.log is not None:
            self.log.append((operation, kw))

    def _key(self, key: dict[str, Any]) -> tuple[str, str]:
        return key["PK"]["S"], key["SK"]["S"]

    def get_item(self, **kw: Any) -> dict[str, Any]:
        self._seen("GetItem", kw)
        item = self.items.get(self._key(kw["Key"]))
        return {"Item": item} if item else {}

    def batch_get_item(self, **kw: Any) -> dict[str, Any]:
        self._seen("BatchGetItem", kw)
        ((table, req),) = kw["RequestItems"].items()
        found = [self.items[self._key(k)] for k in req["Keys"] if self._key(k) in self.items]
        return {"Responses": {table: found}, "UnprocessedKeys": {}}

    def update_item(self, **kw: Any) -> dict[str, Any]:
        self._seen("UpdateItem", kw)
        attributes = {"hits": {"N": "1"}}
        part = (kw.get("ExpressionAttributeNames") or {}).get("#part")
        if part:  # a credential's share of its organization's window (`Store.add_hits_with_part`)
            attributes[part] = {"N": "1"}
        return {"Attributes": attributes}

    def put_item(self, **kw: Any) -> dict[str, Any]:
        self._seen("PutItem", kw)
        return {}

    def transact_write_items(self, **kw: Any) -> dict[str, Any]:
        """Accepted without applying: each benchmark request starts from the same state."""
        self._seen("TransactWriteItems", kw)
        return {}


CREDENTIAL = "api_key:key_b"  # `api_event`'s credential, as the rate limiter names it


def api_event(method: str, path: str, body: Any, org_id: str, role: str = "owner") -> dict[str, Any]:
    raw = json.dumps(body) if body is not None else None
    headers = {"Content-Type": "application/json", "Host": "bench.local"}
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "stage": "bench",
            "path": path,
            "httpMethod": method,
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": {
                "principalId": "key_b",
                "principal_type": "api_key",
                "principal_id": "key_b",
                "user_id": "",
                "organization_id": org_id,
                "role": role,
                "credential_id": "key_b",
            },
        },
        "body": raw,
        "isBase64Encoded": False,
    }


def standard_handler(resolver: Any) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The floor's Lambda entry point, as the Powertools examples write one: a `Logger` with
    `inject_lambda_context(correlation_id_path=API_GATEWAY_REST, clear_state=True)`, the resolver, and the response
    counted and flushed by the same EMF writer (`switchboard.metrics`) the functions use, so both sides write the
    same metrics."""
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging import correlation_paths

    from switchboard import metrics

    logger = Logger(service="floor")

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
    @metrics.flushed
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        response: dict[str, Any] = resolver.resolve(event, context)
        org = event["requestContext"]["authorizer"]["organization_id"]
        metrics.count_response(response["statusCode"], organization=org)
        return response

    return handler


class Ctx:
    function_name = "bench"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:bench"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


def clock() -> Callable[[], float]:
    """`time.perf_counter`, or the process's CPU time with `BENCH_CLOCK=cpu` (a shared machine under varying load:
    the wall clock also counts the time spent waiting for a core)."""
    return time.process_time if os.environ.get("BENCH_CLOCK", "").lower() == "cpu" else time.perf_counter


def interleaved(candidates: dict[str, Callable[[], Any]], rounds: int, per_round: int) -> dict[str, float]:
    """Median µs per call of each candidate, measured in alternating rounds (noise hits all alike)."""
    now = clock()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():  # warm-up: imports, schema builds, first-call caches
        for _ in range(20):
            fn()
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = now()
            for _ in range(per_round):
                fn()
            samples[name].append((now() - start) / per_round * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def paired(
    route: Callable[[], Any], floor: Callable[[], Any], rounds: int, per_round: int
) -> tuple[float, float, float]:
    """Median µs per call of `route` and of `floor`, and the median of their per-round ratios. Each round times both
    back to back, in alternating order (route first, then floor first), so a change of the machine's load between
    rounds moves both sides of a round's ratio alike and neither side always runs right after the other's warm-up.
    The median of the rounds' ratios is steadier on a shared machine than the ratio of the two medians."""
    now = clock()
    for fn in (route, floor):  # warm-up: imports, schema builds, first-call caches
        for _ in range(20):
            fn()

    def timed(fn: Callable[[], Any]) -> float:
        start = now()
        for _ in range(per_round):
            fn()
        return (now() - start) / per_round * 1e6

    route_us: list[float] = []
    floor_us: list[float] = []
    for n in range(rounds):
        if n % 2:
            floor_us.append(timed(floor))
            route_us.append(timed(route))
        else:
            route_us.append(timed(route))
            floor_us.append(timed(floor))
    ratios = [r / f for r, f in zip(route_us, floor_us, strict=True)]
    return statistics.median(route_us), statistics.median(floor_us), statistics.median(ratios)


def across_processes(module: str, runs: int, processes: int) -> dict[str, Any]:
    """`module.run(runs)` in `processes` fresh interpreters, one after the other, and their results gathered: the
    median of the processes' ratios (and of their µs), with the lowest and highest ratio.

    One process's ratio depends on that process: the same tree gave 1.25x to 1.39x from one interpreter to the next
    on an idle machine, steady within each (a fixed `PYTHONHASHSEED` repeats its figure), so the hash seed and the
    memory layout it leads to move the route and its floor differently. The median of a few processes is the figure
    to compare; the spread says how far one run can stray."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "layers" / "core"), str(root)])}
    env.pop("PYTHONHASHSEED", None)  # each process its own seed
    code = f"import json, {module} as m; print(json.dumps(m.run({int(runs)})))"
    results = []
    for _ in range(processes):
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    ratios = sorted(r["ratio"] for r in results)
    return {
        **results[0],  # calls and request shapes: the same in every process
        "same_calls": all(r["same_calls"] for r in results),
        "route_us": statistics.median(r["route_us"] for r in results),
        "floor_us": statistics.median(r["floor_us"] for r in results),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
    }


def spread(result: dict[str, Any]) -> str:
    """`(median of 5 processes: 1.21-1.34x)`, or nothing for a single process."""
    ratios = result.get("ratios") or []
    if len(ratios) < 2:
        return ""
    return f" (median of {len(ratios)} processes: {ratios[0]:.2f}-{ratios[-1]:.2f}x)"


def shape(calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The requests without their values: operation, keys' and items' attribute names, expressions, read
    consistency, and for a transaction each operation's kind, item attributes and condition."""

    def of(kw: dict[str, Any]) -> Any:
        out: dict[str, Any] = {}
        for name, value in kw.items():
            if name in ("Key", "Item"):
                out[name] = sorted(value)
            elif name == "RequestItems":
                ((_table, req),) = value.items()
                out[name] = (len(req["Keys"]), req.get("ConsistentRead"))
            elif name == "TransactItems":
                out[name] = [{kind: of(op)} for item in value for kind, op in item.items()]
            elif name == "ExpressionAttributeValues":
                out[name] = sorted(value)
            else:
                out[name] = value
        return out

    return [(op, of(kw)) for op, kw in calls]


def rate_limit_request(
    fake: FakeDynamoDB, rate_pk: str, epoch: int, window: int = 60, credential: str | None = None
) -> None:
    """The rate limiter's request (`switchboard.ratelimit.hit`: one fixed window; with `credential`,
    `hit_with_part`: the credential's share counted in the same item), as a floor writes it by hand."""
    start = epoch - epoch % window
    names = {"#ttl": "ttl"}
    expression = "ADD hits :n SET #ttl = if_not_exists(#ttl, :ttl)"
    if credential:
        names["#part"] = f"p_{hashlib.sha256(credential.encode()).hexdigest()[:16]}"
        expression = "ADD hits :n, #part :n SET #ttl = if_not_exists(#ttl, :ttl)"
    fake.update_item(
        TableName="bench",
        Key={"PK": {"S": rate_pk}, "SK": {"S": str(start)}},
        UpdateExpression=expression,
        ReturnValues="UPDATED_NEW",
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={":n": {"N": "1"}, ":ttl": {"N": str(start + window + 60)}},
    )
