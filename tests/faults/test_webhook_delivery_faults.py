"""Webhook delivery under faults on a compressed clock.

1,000 domain events (outbox items) run the real pipeline in-process against moto: the stream's records → the real
event_publisher → moto's EventBridge with the template's rules → WebhookEventsQueue → the real webhook_fanout →
WebhookDeliveriesQueue → the real webhook_sender, invoked by four concurrent "Lambda" workers that receive batches
and delete what the handler did not report failed (a failed attempt is rescheduled by the handler itself with
ChangeMessageVisibility, which moto honours in real time). The receivers, threaded HTTP servers on 127.0.0.1, fail
30 % of requests (500), time out 5 % (they hang past the sender's timeout) and drop 5 % of connections (reset, no
response). LOCAL_TIME_SCALE=0.0001 compresses the 28 h retry schedule to ~10 s, and WEBHOOK_TIMEOUT_SECONDS=0.2
shortens the sender's 15 s timeouts for this test only (configuration; the production defaults are unchanged).

Checked: every expected delivery (event x subscribed, enabled endpoint; its webhook-id is deterministic) reaches its
receiver and is answered 2xx at least once, signed with the endpoint's secret, its body the event's data; no request
reaches an endpoint that did not subscribe (one subscribed to an event never emitted, one disabled, and each endpoint
only its own types); the deliveries API shows every one `succeeded` and nothing else; no message reached the DLQ.
With 40 % of requests failing, a delivery exhausts its 8 attempts with probability 0.4^8 = 0.07 %: such a delivery is
not lost, it stays `exhausted` and the recover API (what an operator does) sends it again with the same id; the test
prints how many needed it, with the other counts.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import standardwebhooks

from functions.event_publisher.app import handler as publisher_handler
from functions.jobs.app import handler as jobs_handler
from functions.webhook_fanout.app import handler as fanout_handler
from functions.webhook_sender.app import handler as sender_handler
from local.pollers import lambda_sqs_record
from switchboard import aws
from switchboard.config import reset_settings
from switchboard.events.outbox import outbox_put
from switchboard.store import get_store
from switchboard.store.table import serialize
from switchboard.webhooks import repository
from switchboard.webhooks.schedule import MAX_ATTEMPTS
from tests.helpers import FakeContext
from tests.integration.support import Api
from tests.webhook_receiver import Answer, Received, Receiver

BASE = "/v1/settings/developer/webhooks"
EVENTS = 1000
TIMEOUT = 0.2  # the sender's timeouts here (WEBHOOK_TIMEOUT_SECONDS)
WORKERS = 4  # concurrent sender invocations, as Lambda would run
TYPES = ("message.new", "message.sent", "crm.record.created", "commerce.order.updated")
# endpoint name → (receiver index, subscribed types, enabled)
ENDPOINTS: dict[str, tuple[int, list[str], bool]] = {
    "messages": (0, ["message.new", "message.sent"], True),
    "crm": (1, ["crm.record.created", "commerce.order.updated"], True),
    "templates": (0, ["template.status_update"], True),  # subscribed to an event that never comes
    "disabled": (1, [], False),  # every event, but disabled
}
IDLE_MIN, IDLE_MAX = 0.02, 0.32  # a Lambda poller's wait after an empty receive, doubling while idle
SETTLE_DEADLINE = 420.0  # a safety net for a shared, loaded machine; the time it took is printed


@pytest.fixture
def serialized_sqs(monkeypatch) -> None:
    """moto's SQS is not thread-safe in-process either: deleting a message rebuilds the queue's message list from
    the one it iterated, so a message sent (or another deleted) by a concurrent thread meanwhile is lost (or comes
    back). A lost message is a delivery nobody drives any more: the test waited for it until its deadline. The
    message operations (EventBridge's sends to its targets included) run one at a time, as in SQS itself."""
    from moto.sqs.models import SQSBackend

    lock = threading.RLock()
    for name in ("send_message", "receive_message", "delete_message", "change_message_visibility"):
        original = getattr(SQSBackend, name)

        def locked(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return __original(*args, **kwargs)

        monkeypatch.setattr(SQSBackend, name, locked)


@pytest.fixture
def lean_sqs(monkeypatch) -> None:
    """moto 5.2's SQS, same results, less CPU (one GIL for all of this test's threads). Every receive, send and
    attribute read checks each message of the queue against the clock, and each reading of the clock builds two
    datetimes (`unix_time`): the clock is read with `time.time()` instead. And each received message's retention was
    checked through `get_queue_attributes`, which builds every attribute of the queue, approximate counts included
    (three scans of all its messages, three times, per message received): it reads the retention period directly.
    With ~1,000 deliveries in flight, that was a third of the test's CPU."""
    import moto.sqs.models as sqs_models
    from moto.core.utils import unix_time as moto_unix_time

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else moto_unix_time(dt)

    def unix_time_millis(dt: Any = None) -> float:
        return unix_time(dt) * 1000.0

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > unix_time())

    monkeypatch.setattr(sqs_models, "unix_time", unix_time)
    monkeypatch.setattr(sqs_models, "unix_time_millis", unix_time_millis)
    monkeypatch.setattr(
        sqs_models.SQSBackend, "is_message_valid_based_on_retention_period", is_message_valid_based_on_retention_period
    )


@pytest.fixture
def cached_input_paths(monkeypatch) -> None:
    """moto's EventBridge builds a new jsonpath parser (ply lexer and LALR tables) for every input path of the
    rule's input transformer, for every event: a seventh of this test's CPU for 1,000 events. The parsed paths are
    immutable, so each is parsed once."""
    import jsonpath_ng.ext

    monkeypatch.setattr(jsonpath_ng.ext, "parse", functools.lru_cache(maxsize=64)(jsonpath_ng.ext.parse))


@pytest.fixture
def compressed_clock(monkeypatch) -> Iterator[None]:
    monkeypatch.setenv("LOCAL_TIME_SCALE", "0.0001")
    monkeypatch.setenv("WEBHOOK_TIMEOUT_SECONDS", str(TIMEOUT))
    reset_settings()
    yield
    reset_settings()


class Faults:
    """Decides each request's fate: 30 % fail, 5 % time out, 5 % dropped, the rest answered 200."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.kinds: Counter[str] = Counter()

    def __call__(self, received: Received) -> Answer:
        roll = self.rng.random()
        if roll < 0.30:
            kind, answer = "failed (500)", Answer(500, body=b"injected failure")
        elif roll < 0.35:
            kind, answer = "timed out", Answer(200, delay=TIMEOUT * 3)
        elif roll < 0.40:
            kind, answer = "dropped", Answer(drop=True)
        else:
            kind, answer = "ok", Answer(200)
        self.kinds[kind] += 1
        return answer


def write_events(org: str, rng: random.Random) -> list[dict[str, Any]]:
    """1,000 outbox items, as the services write them (25 per BatchWriteItem)."""
    items = []
    for n in range(EVENTS):
        data = {"n": n, "id": f"obj_{n:04d}", "note": rng.choice(["a", "ß", "✓", "x" * 40])}
        items.append(outbox_put(org, TYPES[n % len(TYPES)], data).item)
    dynamodb, table = aws.client("dynamodb"), get_store().table_name
    for start in range(0, len(items), 25):
        pending: dict[str, Any] = {table: [{"PutRequest": {"Item": serialize(i)}} for i in items[start : start + 25]]}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
    return items


def publish(items: list[dict[str, Any]]) -> None:
    """The stream's part: INSERT records of the outbox items → event_publisher (batches of 100, as mapped)."""
    records = [
        {
            "eventID": str(n),
            "eventName": "INSERT",
            "eventSource": "aws:dynamodb",
            "dynamodb": {
                "SequenceNumber": str(1000 + n),
                "NewImage": serialize(i),
                "Keys": serialize({"PK": i["PK"], "SK": i["SK"]}),
            },
        }
        for n, i in enumerate(items)
    ]
    for start in range(0, len(records), 100):
        result = publisher_handler({"Records": records[start : start + 100]}, FakeContext())
        assert result == {"batchItemFailures": []}, result


class Lambda:
    """Lambda's part for one queue: `workers` threads receive batches of up to 10 visible messages, invoke the
    handler, and delete every message it did not report failed."""

    def __init__(self, api: Api, queue: str, handler: Any, workers: int) -> None:
        self.url = api.resources.queue_url(queue)
        self.arn = api.resources.queue_arn(queue)
        self.handler = handler
        self.stop = threading.Event()
        self.invocations = 0
        self.failed = 0  # records the handler reported failed (kept on the queue)
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(workers)]

    def __enter__(self) -> Lambda:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _run(self) -> None:
        sqs = aws.client("sqs")
        idle = IDLE_MIN
        while not self.stop.is_set():
            try:
                got = sqs.receive_message(
                    QueueUrl=self.url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
                ).get("Messages", [])
                if not got:
                    # Idle: back off (0.02 s doubling to 0.32 s). moto checks every message of the queue on each
                    # receive, so constant fast polling of a queue holding ~1,000 invisible messages by six threads
                    # would spend most of the process's CPU (one GIL) on empty receives.
                    self.stop.wait(idle)
                    idle = min(idle * 2, IDLE_MAX)
                    continue
                idle = IDLE_MIN
                records = [lambda_sqs_record(m, self.arn) for m in got]
                result = self.handler({"Records": records}, FakeContext())
                failed = {f["itemIdentifier"] for f in result.get("batchItemFailures") or []}
                for record in records:
                    if record["messageId"] not in failed:
                        sqs.delete_message(QueueUrl=self.url, ReceiptHandle=record["receiptHandle"])
                with self._lock:
                    self.invocations += 1
                    self.failed += len(failed)
            except BaseException as err:  # reported by the test, never swallowed
                self.errors.append(err)
                return

    def depth(self) -> int:
        attributes = aws.client("sqs").get_queue_attributes(
            QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def all_deliveries(api: Api, **params: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": 100, **params, **({"cursor": cursor} if cursor else {})}
        resp = api.get(f"{BASE}/deliveries", params=query)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        rows += body["data"]
        cursor = body["meta"].get("cursor")
        if not body["meta"]["has_more"]:
            return rows


def test_a_thousand_events_through_failing_receivers_are_all_delivered_at_least_once(
    api: Api,
    compressed_clock: None,
    serialized_sqs: None,
    lean_sqs: None,
    cached_input_paths: None,
):
    seed = random.randrange(1 << 30)
    faults = Faults(seed)
    with ExitStack() as exits:
        receivers = [exits.enter_context(Receiver().running()) for _ in range(2)]
        endpoints: dict[str, dict[str, Any]] = {}
        for name, (index, types, enabled) in ENDPOINTS.items():
            resp = api.post(
                f"{BASE}/endpoints",
                json={"url": receivers[index].url(f"/{name}"), "filter_types": types, "enabled": enabled},
            )
            assert resp.status_code == 201, resp.text
            endpoints[name] = resp.json()["data"]
        # Each request is verified as it arrives, as a receiver would: its timestamp is then within standardwebhooks'
        # tolerance however long the whole run takes. The verdict (the payload, or the error) is asserted later.
        verdicts: dict[int, Any] = {}

        def verify_then_answer(request: Received) -> Answer:
            secret = endpoints.get(request.path.lstrip("/"), {}).get("secret", "whsec_" + "A" * 44)
            try:
                verdicts[id(request)] = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
            except Exception as err:
                verdicts[id(request)] = err
            return faults(request)

        for receiver in receivers:
            receiver.decide = verify_then_answer
        since = min(e["created_at"] for e in endpoints.values())
        started = time.monotonic()
        items = write_events(api.org_id, random.Random(seed))
        expected: dict[str, tuple[str, dict[str, Any]]] = {}  # webhook-id → (endpoint name, body)
        for item in items:
            for name, (_, types, enabled) in ENDPOINTS.items():
                if enabled and item["event_type"] in types:
                    expected[repository.delivery_id(item["event_id"], endpoints[name]["id"])] = (name, item["payload"])

        def progress() -> tuple[set[str], Counter[str]]:
            """Webhook-ids answered 2xx; and the failed requests of each webhook-id never answered 2xx."""
            ok: set[str] = set()
            failed: Counter[str] = Counter()
            for receiver in receivers:
                with receiver._lock:
                    answers = list(receiver.answers)
                for request, answer in answers:
                    if answer.status == 200 and not answer.delay and not answer.drop:
                        ok.add(request.headers["webhook-id"])
                    else:
                        failed[request.headers["webhook-id"]] += 1
            return ok, Counter({i: n for i, n in failed.items() if i not in ok})

        recovered: dict[str, tuple[float, int]] = {}  # webhook-id → (when recovered, its failed requests then)
        fanout = exits.enter_context(Lambda(api, "WebhookEventsQueue", fanout_handler, 2))
        sender = exits.enter_context(Lambda(api, "WebhookDeliveriesQueue", sender_handler, WORKERS))
        recoveries = exits.enter_context(Lambda(api, "JobsQueue", jobs_handler, 1))  # recover runs as a job
        publish(items)
        while True:
            assert not fanout.errors and not sender.errors, (fanout.errors, sender.errors)
            assert not recoveries.errors, recoveries.errors
            done, failed = progress()
            if expected.keys() <= done:
                break
            assert time.monotonic() - started < SETTLE_DEADLINE, (
                f"{len(expected) - len(done & expected.keys())} of {len(expected)} deliveries not answered 2xx "
                f"within {SETTLE_DEADLINE:.0f} s (seed {seed}); requests so far {dict(faults.kinds)}"
            )
            # What an operator does: recover the endpoint of a delivery that failed all 8 attempts of its schedule
            # (exhausted), once. Not over and over: recover also requeues the endpoint's `retrying` deliveries. Again
            # only if it got no request within 5 s of that (the recover came before its last attempt was recorded
            # and was refused) or it failed 8 more times (exhausted again).
            now = time.monotonic()
            due = set()
            for webhook_id, failures in failed.items():
                if failures < MAX_ATTEMPTS:
                    continue
                when, then = recovered.get(webhook_id, (0.0, -MAX_ATTEMPTS))
                if failures >= then + MAX_ATTEMPTS or (failures == then and now - when > 5):
                    due.add(webhook_id)
            if due:
                time.sleep(0.5)  # the last attempt's record is written just after the receiver answered
                for name in {expected[i][0] for i in due if i in expected}:
                    resp = api.post(f"{BASE}/endpoints/{endpoints[name]['id']}/recover", json={"since": since})
                    assert resp.status_code == 202, resp.text
                recovered |= {i: (time.monotonic(), failed[i]) for i in due}
            time.sleep(0.2)
        received_in = time.monotonic() - started

        # The deliveries API agrees once the last attempts are recorded: every one succeeded, nothing else exists.
        # A 2xx can come from an attempt that a recover superseded (it outlived its lease on a loaded machine): the
        # delivery is then driven by the recover's message, which may fail and retry a few times more (40 % of
        # requests fail), or exhaust its schedule and be recovered again, as above.
        deadline, last_recover = time.monotonic() + 90, 0.0
        while True:
            rows = all_deliveries(api)
            statuses = Counter(r["status"] for r in rows)
            if statuses == Counter({"succeeded": len(expected)}) or time.monotonic() > deadline:
                break
            exhausted = {expected[r["id"]][0] for r in rows if r["status"] == "exhausted" and r["id"] in expected}
            if exhausted and time.monotonic() - last_recover > 5:
                for name in exhausted:
                    resp = api.post(f"{BASE}/endpoints/{endpoints[name]['id']}/recover", json={"since": since})
                    assert resp.status_code == 202, resp.text
                last_recover = time.monotonic()
            time.sleep(0.2)
        assert statuses == Counter({"succeeded": len(expected)}), statuses
        assert {r["id"] for r in rows} == expected.keys()
        assert sender.depth() == 0 and fanout.failed == 0
        dlq = aws.client("sqs").get_queue_attributes(
            QueueUrl=api.resources.queue_url("WebhookDeliveriesDLQ"), AttributeNames=["ApproximateNumberOfMessages"]
        )
        assert dlq["Attributes"]["ApproximateNumberOfMessages"] == "0"

        # Every request: for an expected delivery, at the endpoint it was for, its body the event's, signed.
        requests = [r for receiver in receivers for r in receiver.requests]
        misrouted = 0
        per_id: Counter[str] = Counter()
        for request in requests:
            webhook_id = request.headers["webhook-id"]
            per_id[webhook_id] += 1
            name, data = expected.get(webhook_id, ("", {}))
            if request.path != f"/{name}":
                misrouted += 1
                continue
            assert verdicts[id(request)] == data, verdicts[id(request)]
        lost = len(expected.keys() - per_id.keys())
        duplicates = sum(1 for webhook_id, count in per_id.items() if count > 1)
        for name in ("templates", "disabled"):
            assert receivers[ENDPOINTS[name][0]].of(f"/{name}") == [], name

    print(
        f"\nwebhook faults (seed {seed}): {EVENTS} events -> {len(expected)} deliveries to "
        f"{sum(1 for _, _, on in ENDPOINTS.values() if on)} enabled endpoints; {len(requests)} requests received "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(faults.kinds.items()))}); "
        f"webhook-ids received at least once: {len(per_id.keys() & expected.keys())}/{len(expected)}; "
        f"received more than once: {duplicates}; lost: {lost}; to an endpoint that did not subscribe: {misrouted}; "
        f"exhausted, then sent again by recover: {len(recovered)}; all answered 2xx within {received_in:.1f} s "
        f"({sender.invocations} sender invocations)"
    )
    assert lost == 0 and misrouted == 0
    assert len(per_id.keys() & expected.keys()) == len(expected)
    assert faults.kinds["failed (500)"] and faults.kinds["timed out"] and faults.kinds["dropped"]
