"""Per-tenant fairness of webhook delivery: one organization floods, a quiet one's deliveries stay as fast as alone.

The real pipeline runs in-process against moto on a simulated clock: outbox items → the real event_publisher →
moto's EventBridge (the template's rules) → WebhookEventsQueue → the real webhook_fanout (pacing each organization
at WEBHOOK_TENANT_RATE with DelaySeconds) → WebhookDeliveriesQueue → the real webhook_sender. Only the receivers'
side is modelled: `delivery.post` answers 200 at once, and the time a sender batch takes is a fixed cost on the
simulated clock (`SEND_COST` when it made requests, as a batch's attempts run in parallel; `POLL` when it found
nothing); a fan-out batch costs `FAN_COST`. `switchboard.clock.now` and moto's SQS clock (the delays and visibility
timeouts) both read the simulated clock, so a run does the same steps whatever the machine's load: the figures are
deterministic up to the hash spread of random ids over shards, which does not touch the queue order.

Workers: `SENDERS` sender "invocations" and `FANOUTS` fan-out ones, each a loop of receive (10) → handler → delete
what it did not report failed, advancing its own time by the batch's cost (a discrete-event simulation: the worker
that is free first runs next). The sender pool serves `SENDERS * 10 / SEND_COST` deliveries per second.

The quiet organization sends one event every `QUIET_EVERY` s to its endpoint. Its latency (event written → the
POST answered) is measured alone, then while the flooding organization writes `BURST` events at once and
`FLOOD_RATE` events per second to `FLOOD_ENDPOINTS` endpoints (more deliveries per second than the senders serve).
The p99 ratio must stay ≤ 2. (Alone, idle workers poll every `POLL` s; busy ones take the next batch at once, so
the ratio may be below 1.) Without pacing (WEBHOOK_TENANT_RATE above any burst) the same flood queues the quiet
organization's deliveries behind the whole backlog: docs/architecture.md gives the figures of that run.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.event_publisher.app import handler as publisher_handler
from functions.webhook_fanout.app import handler as fanout_handler
from functions.webhook_sender.app import handler as sender_handler
from local.pollers import lambda_sqs_record
from switchboard import aws, clock
from switchboard.config import reset_settings
from switchboard.events.outbox import outbox_put
from switchboard.store import get_store
from switchboard.webhooks import delivery
from tests.helpers import FakeContext, stream_record
from tests.integration.support import Api

BASE = "/v1/settings/developer/webhooks"
TENANT_RATE = 20  # deliveries per second per organization (WEBHOOK_TENANT_RATE): a tenth of the senders' pace
SENDERS, FANOUTS = 4, 2
SEND_COST, FAN_COST, POLL = 0.2, 0.02, 0.05  # simulated seconds
QUIET_EVERY, QUIET_EVENTS = 0.1, 100  # (p99 of 100 samples: the second largest)
FLOOD_ENDPOINTS, BURST, FLOOD_RATE = 4, 100, 60  # 400 deliveries at once, then 240 per second
FLOOD_UNTIL = QUIET_EVERY * QUIET_EVENTS
MAX_RATIO = 2.0


class SimClock:
    def __init__(self) -> None:
        self.start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)
        self.t = 0.0  # seconds since start

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    def millis(self, dt: Any = None) -> float:
        return (self.now() if dt is None else dt).timestamp() * 1000.0


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> SimClock:
    """The simulated clock for the code under test and moto's SQS (delays, visibility, retention)."""
    import moto.sqs.models as sqs_models

    simulated = SimClock()
    monkeypatch.setattr(clock, "now", simulated.now)
    monkeypatch.setattr(sqs_models, "unix_time_millis", simulated.millis)
    monkeypatch.setattr(sqs_models, "unix_time", lambda dt=None: simulated.millis(dt) / 1000.0)
    return simulated


def paced(monkeypatch: pytest.MonkeyPatch, rate: int) -> None:
    monkeypatch.setenv("WEBHOOK_TENANT_RATE", str(rate))
    reset_settings()


class Run:
    """One simulation: emissions (time, org, endpoints' receivers) and the workers, until every quiet delivery
    arrived."""

    def __init__(self, api: Api, sim: SimClock, monkeypatch: pytest.MonkeyPatch) -> None:
        self.api, self.sim = api, sim
        self.sqs = aws.client("sqs")
        self.written: dict[str, tuple[str, float]] = {}  # event id → (org, simulated time written)
        self.arrived: dict[str, float] = {}  # event id → simulated time its first delivery was answered
        self.by_delivery: dict[str, str] = {}
        self.seq = itertools.count(10_000)
        self.requests = 0
        monkeypatch.setattr(delivery, "post", self._post)

    def _post(self, target: Any, address: str, headers: dict[str, str], body: bytes) -> delivery.HttpResult:
        self.requests += 1
        event_id = self.by_delivery.get(headers["webhook-id"])
        if event_id is not None and event_id not in self.arrived:
            self.arrived[event_id] = self.sim.t + SEND_COST  # answered when the batch's requests are
        return delivery.HttpResult(200, 1)

    def emit(self, org: str, count: int, endpoint_ids: list[str]) -> None:
        """`count` events of the organization written now, and their stream records handed to the publisher."""
        from switchboard.webhooks import repository

        items = [outbox_put(org, "message.new", {"n": next(self.seq)}).item for _ in range(count)]
        get_store().batch_put(items)
        for item in items:
            self.written[item["event_id"]] = (org, self.sim.t)
            for endpoint_id in endpoint_ids:
                self.by_delivery[repository.delivery_id(item["event_id"], endpoint_id)] = item["event_id"]
        records = [stream_record(i, str(next(self.seq))) for i in items]
        for start in range(0, len(records), 100):
            assert publisher_handler({"Records": records[start : start + 100]}, FakeContext()) == {
                "batchItemFailures": []
            }

    def step(self, queue: str, handler: Callable[..., Any]) -> int:
        """One invocation's receive → handler → delete; returns the number of records."""
        url, arn = self.api.resources.queue_url(queue), self.api.resources.queue_arn(queue)
        got = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
        records = [lambda_sqs_record(m, arn) for m in got.get("Messages", [])]
        if not records:
            return 0
        result = handler({"Records": records}, FakeContext())
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for record in records:
            if record["messageId"] not in failed:
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])
        return len(records)

    def run(self, emissions: list[tuple[float, str, int, list[str]]], quiet_org: str) -> list[float]:
        """Play the emissions and the workers on the simulated clock; the quiet organization's latencies."""
        agenda: list[tuple[float, int, str, Any]] = []
        order = itertools.count()
        for at, org, count, endpoints in emissions:
            heapq.heappush(agenda, (at, next(order), "emit", (org, count, endpoints)))
        for _ in range(FANOUTS):
            heapq.heappush(agenda, (0.0, next(order), "fanout", None))
        for _ in range(SENDERS):
            heapq.heappush(agenda, (0.0, next(order), "send", None))
        quiet = {e for e in self.written if self.written[e][0] == quiet_org}
        expected = sum(c for _, org, c, _ in emissions if org == quiet_org)
        while agenda:
            at, _, kind, what = heapq.heappop(agenda)
            self.sim.t = max(self.sim.t, at)
            if kind == "emit":
                self.emit(*what)
                quiet = {e for e in self.written if self.written[e][0] == quiet_org}
                continue
            if kind == "fanout":
                took = FAN_COST if self.step("WebhookEventsQueue", fanout_handler) else POLL
            else:
                took = SEND_COST if self.step("WebhookDeliveriesQueue", sender_handler) else POLL
            if len(quiet) == expected and all(e in self.arrived for e in quiet):
                break
            assert self.sim.t < 600, "the quiet organization's deliveries did not all arrive"
            heapq.heappush(agenda, (self.sim.t + took, next(order), kind, None))
        return sorted(self.arrived[e] - self.written[e][1] for e in quiet)


def p99(values: list[float]) -> float:
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, math.ceil(0.99 * len(ranked)) - 1)]


def endpoint(api: Api, path: str, headers: dict[str, str] | None = None) -> str:
    resp = api.post(f"{BASE}/endpoints", json={"url": f"http://127.0.0.1:9{path}"}, headers=headers)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["data"]["id"])


def quiet_emissions(org: str, endpoints: list[str], offset: float) -> list[tuple[float, str, int, list[str]]]:
    return [(offset + n * QUIET_EVERY + 0.013, org, 1, endpoints) for n in range(QUIET_EVENTS)]


def flood_emissions(org: str, endpoints: list[str], offset: float) -> list[tuple[float, str, int, list[str]]]:
    steady = [(offset + 0.1 * n, org, FLOOD_RATE // 10, endpoints) for n in range(int(FLOOD_UNTIL * 10))]
    return [(offset, org, BURST, endpoints), *steady]


def test_a_flooding_organization_does_not_slow_a_quiet_one(
    api: Api, sim: SimClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    paced(monkeypatch, TENANT_RATE)
    flood_eps = [endpoint(api, f"/flood/{n}") for n in range(FLOOD_ENDPOINTS)]
    quiet_org, quiet_headers = api.new_org("quiet@example.com", "Quiet Org")
    quiet_eps = [endpoint(api, "/quiet", quiet_headers)]
    assert TENANT_RATE < SENDERS * 10 / SEND_COST < FLOOD_ENDPOINTS * FLOOD_RATE  # the flood outruns the senders

    alone = Run(api, sim, monkeypatch).run(quiet_emissions(quiet_org, quiet_eps, sim.t), quiet_org)
    loaded_run = Run(api, sim, monkeypatch)
    start = sim.t + 1
    loaded = loaded_run.run(
        flood_emissions(api.org_id, flood_eps, start) + quiet_emissions(quiet_org, quiet_eps, start + 0.05), quiet_org
    )
    ratio = p99(loaded) / p99(alone)
    flood = [e for e, (org, _) in loaded_run.written.items() if org == api.org_id]
    flood_arrived = sum(1 for e in flood if e in loaded_run.arrived)

    print(
        f"\nwebhook fairness (simulated clock; senders serve {SENDERS * 10 / SEND_COST:.0f} deliveries/s, "
        f"tenant rate {TENANT_RATE}/s): quiet p99 alone {p99(alone):.2f} s, while another organization floods "
        f"({BURST} events at once + {FLOOD_RATE}/s to {FLOOD_ENDPOINTS} endpoints) {p99(loaded):.2f} s, "
        f"ratio {ratio:.2f} (max {MAX_RATIO}); flood events delivered meanwhile: {flood_arrived}"
    )
    assert len(alone) == len(loaded) == QUIET_EVENTS
    assert ratio <= MAX_RATIO
    assert flood_arrived > 0  # the flood is served too, at its rate
