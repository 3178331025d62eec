"""Fault injection for the fault tests, and the ledger every fault test prints.

`AwsFaults` answers chosen AWS calls with an error *before they reach moto*, through botocore's `before-send` hook
of the very client the code under test uses (`switchboard.aws.client`). The answer is a real HTTP error response
(status, `__type`, message), so botocore parses it, its retry handler sees it exactly as it would see DynamoDB's or
EventBridge's own throttling, and the configured retry mode decides what happens — nothing is short-circuited above
the retry layer. The backoff sleeps are made zero so that a retried call costs no wall time.

`Ledger` is the account of one test: accepted / arrived / lost / duplicated, printed and asserted.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from moto.core.botocore_stubber import MockRawResponse

from switchboard import aws

Predicate = Callable[[dict[str, Any]], bool]

DYNAMO_ERRORS = {
    # code → (HTTP status, __type prefix)
    "ProvisionedThroughputExceededException": (400, "com.amazonaws.dynamodb.v20120810#"),
    "ThrottlingException": (400, "com.amazon.coral.availability#"),
    "RequestLimitExceeded": (400, "com.amazonaws.dynamodb.v20120810#"),
    "InternalServerError": (500, "com.amazonaws.dynamodb.v20120810#"),
}


@dataclass
class Rule:
    service: str
    operation: str
    code: str
    times: int  # how many matching attempts fail (a large number: "until cleared")
    when: Predicate | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # more fields of the error body (CancellationReasons …)
    status: int = 400
    fired: int = 0


class AwsFaults:
    """Injects error responses into `switchboard.aws.client(service)` calls; counts every attempt per operation."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.attempts: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.log: list[tuple[str, bool]] = []  # (operation, injected) in call order
        self._lock = threading.Lock()
        self._hooked: set[str] = set()

    def fail(
        self,
        service: str,
        operation: str,
        code: str,
        *,
        times: int = 10**9,
        when: Predicate | None = None,
        status: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Rule:
        default_status = DYNAMO_ERRORS.get(code, (400, ""))[0]
        rule = Rule(service, operation, code, times, when, extra or {}, status or default_status)
        with self._lock:
            self.rules.append(rule)
        self._hook(service)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _hook(self, service: str) -> None:
        if service in self._hooked:
            return
        self._hooked.add(service)
        aws.client(service).meta.events.register_first(f"before-send.{service}", self._before_send)

    def _before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        operation = target.rsplit(".", 1)[-1]
        try:
            params = json.loads(request.body or b"{}")
        except ValueError:
            params = {}
        with self._lock:
            self.attempts[operation] += 1
            self.log.append((operation, False))
            for rule in self.rules:
                if rule.operation != operation or rule.fired >= rule.times:
                    continue
                if rule.when is not None and not rule.when(params):
                    continue
                rule.fired += 1
                self.log[-1] = (operation, True)
                self.injected[operation] += 1
                prefix = DYNAMO_ERRORS.get(rule.code, (400, ""))[1]
                body = json.dumps({"__type": f"{prefix}{rule.code}", "message": "injected fault", **rule.extra})
                url = request.url
                # botocore calls every before-send handler and takes the first answer: moto's stubber would still
                # execute the request. Pointing this attempt's request (rebuilt for each retry) at nowhere makes moto
                # pass, so a throttled write is really not written.
                request.url = "https://fault-injected.invalid/"
                return AWSResponse(
                    url,
                    rule.status,
                    {"x-amzn-requestid": "fault-injected", "content-type": "application/x-amz-json-1.0"},
                    MockRawResponse(body.encode()),
                )
        return None

    def detach(self) -> None:
        for service in self._hooked:
            aws.client(service).meta.events.unregister(f"before-send.{service}", self._before_send)
        self._hooked.clear()


@contextmanager
def aws_faults(monkeypatch: Any) -> Iterator[AwsFaults]:
    import botocore.retries.standard as standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0)
    faults = AwsFaults()
    try:
        yield faults
    finally:
        faults.detach()


def key_sk(params: dict[str, Any]) -> str:
    """The SK of a GetItem/UpdateItem/PutItem/DeleteItem request ("" when there is none)."""
    source = params.get("Key") or params.get("Item") or {}
    return str((source.get("SK") or {}).get("S", ""))


def transact_sks(params: dict[str, Any]) -> list[str]:
    sks = []
    for op in params.get("TransactItems", []):
        ((_, body),) = op.items()
        source = body.get("Key") or body.get("Item") or {}
        sks.append(str((source.get("SK") or {}).get("S", "")))
    return sks


@dataclass
class Ledger:
    """What one fault test accepted, what arrived, what was lost and what was duplicated (by id)."""

    name: str
    accepted: list[str] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)  # one entry per arrival, duplicates included

    @property
    def lost(self) -> list[str]:
        got = set(self.arrived)
        return [a for a in self.accepted if a not in got]

    @property
    def duplicated(self) -> int:
        counts = Counter(self.arrived)
        return sum(n - 1 for n in counts.values() if n > 1)

    @property
    def unexpected(self) -> list[str]:
        known = set(self.accepted)
        return [a for a in self.arrived if a not in known]

    def report(self) -> str:
        line = (
            f"[fault] {self.name}: accepted={len(self.accepted)} arrived={len(set(self.arrived))} "
            f"lost={len(self.lost)} duplicated={self.duplicated}"
        )
        print(line)
        return line

    def check(self, *, duplicates_allowed: bool = False) -> None:
        self.report()
        assert self.accepted, "the test accepted nothing: it would prove nothing"
        assert not self.lost, f"{self.name}: lost {self.lost}"
        assert not self.unexpected, f"{self.name}: arrived but never accepted {self.unexpected}"
        if not duplicates_allowed:
            assert self.duplicated == 0, f"{self.name}: {self.duplicated} duplicate(s)"
