"""One delivery attempt (webhook_sender): check, claim, sign, POST, record, reschedule.

The SQS message of a delivery is a wake-up call; the delivery item (DeliveriesTable) is the state, and the body sent
is its event's payload item, read once per batch and event:

- `status` pending | retrying (an attempt is due at `next_attempt_at`) | succeeded | exhausted | canceled.
- `owner` is the SQS message id driving the delivery. The first message to claim it becomes its owner; another
  message for the same delivery (a duplicate send by fan-out, a stale one from before an API retry) is dropped.
- `lease_until` (epoch ms) is held while an attempt runs, so two receivers never POST the same delivery at once,
  and an API retry is refused meanwhile.
- `generation` counts the API retries and recoveries of the delivery (absent = 0); each one queues a new message
  carrying the new generation. A message of an earlier generation (the one still scheduled for the next attempt of
  a `retrying` delivery when it was recovered) is superseded: acknowledged and dropped on its next receive, checked
  on the read and again in the claim's condition, so it never attempts, never waits "not due" and never takes over
  the new run (it would carry its receive count into it, towards the DLQ). A message without the field (fan-out's,
  or queued before generations existed) is generation 0.

After a failed attempt the same message is made visible again when the next attempt is due
(ChangeMessageVisibility, at most 12 h) and reported as a batch item failure, so SQS keeps it. Every attempt is
recorded; 2xx ends the delivery, 410 disables the endpoint, the last failure leaves it `exhausted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from switchboard import aws, clock, metrics, netguard
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Conflict
from switchboard.ids import new_ulid
from switchboard.mail import Mail, enqueue, mail_puts
from switchboard.store import Put, Store, Update, get_store
from switchboard.webhooks import repository as repo
from switchboard.webhooks import schedule, service, signing

Item = dict[str, Any]
logger = Logger(child=True)

LEASE = timedelta(seconds=90)  # longer than the worst request (connect + write + read timeouts)
EARLY_TOLERANCE = 1.0  # seconds: visibility timeouts are whole seconds
RESPONSE_EXCERPT_BYTES = 1024
ERROR_MAX = 500
DISABLE_AFTER = timedelta(days=5)
# A healthy endpoint's `last_success_at` is refreshed at most this often: a busy endpoint is not written on every
# delivery (one item, many concurrent senders).
SUCCESS_STAMP_EVERY = timedelta(seconds=60)
ACTIVE = ("pending", "retrying")


@dataclass(frozen=True)
class Outcome:
    done: bool  # delete the message
    visibility: int | None = None  # seconds until the message should come back (when not done)
    status: str = ""


@dataclass(frozen=True)
class HttpResult:
    status_code: int | None
    duration_ms: int
    error: str | None = None
    response: str | None = None
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def system_auth(org: str) -> AuthContext:
    return AuthContext("system", "webhook_sender", None, org, "owner", "system")


# HTTP -------------------------------------------------------------------------------------------------------------
def post(target: netguard.Target, address: str, headers: dict[str, str], body: bytes) -> HttpResult:
    """POST to the checked address (the URL's host only names the TLS server and the Host header); no redirects,
    no proxies from the environment, 15 s timeouts (`WEBHOOK_TIMEOUT_SECONDS`), at most 1 KiB of the answer is read,
    on a kept-alive connection to the same address and host name when there is one.

    The request goes straight to the client's transport: `Client.send` would add only what a delivery never uses
    (auth flows, redirects, event hooks) and a cookie jar, which would also make a receiver's `Set-Cookie` ride
    along on later deliveries to it; skipping it is about 0.1 ms of CPU per attempt."""
    import httpx  # imported on first delivery, not at cold start

    timeout = get_settings().webhook_timeout_seconds

    extensions = netguard.sni(target)  # the certificate is checked against the host name
    started = time.perf_counter()

    def elapsed() -> int:
        return int((time.perf_counter() - started) * 1000)

    try:
        client, transport = netguard.pinned_client(target, address, timeout)
        request = client.build_request(
            "POST",
            target.url_for(address),
            headers={**headers, "host": target.host_header},
            content=body,
            extensions=extensions,
        )
        response = transport.handle_request(request)
        try:
            excerpt = bytearray()
            for chunk in response.iter_bytes():
                excerpt += chunk
                if len(excerpt) >= RESPONSE_EXCERPT_BYTES:
                    break
        finally:
            response.close()
    except httpx.TimeoutException:
        return HttpResult(None, elapsed(), error=f"timed out after {timeout:g} s")
    except httpx.HTTPError as err:
        return HttpResult(None, elapsed(), error=f"{type(err).__name__}: {err}"[:ERROR_MAX])
    text = bytes(excerpt[:RESPONSE_EXCERPT_BYTES]).decode("utf-8", errors="replace")
    code = response.status_code
    return HttpResult(
        code,
        elapsed(),
        error=None if 200 <= code < 300 else f"HTTP {code}",
        response=text or None,
        retry_after=response.headers.get("retry-after"),
    )


@functools.lru_cache(maxsize=256)
def _parsed(url: str, allow_local: bool) -> netguard.Target:
    """`netguard.parse` of an endpoint URL, kept per URL (a pure function of the text; a refused URL is not kept). The
    addresses are still resolved and checked before every attempt."""
    return netguard.parse(url, allow_local=allow_local)


def attempt_http(endpoint: Item, delivery: Item, body: bytes) -> HttpResult:
    """Check the URL and its current addresses, sign the event's stored body, POST it."""
    allow_local = get_settings().is_local
    started = time.perf_counter()
    try:
        target = _parsed(endpoint["url"], allow_local)
        address = netguard.checked_address(target, allow_local=allow_local)
    except netguard.UnsafeUrl as err:
        return HttpResult(None, int((time.perf_counter() - started) * 1000), error=f"refused: the URL {err.message}")
    timestamp = int(time.time())  # real time, never scaled
    secrets = service.signing_secrets(endpoint, clock.now_iso())
    headers = signing.delivery_headers(secrets, delivery["id"], timestamp, body, delivery["event_type"])
    return post(target, address, headers, body)


# State changes ----------------------------------------------------------------------------------------------------
def generation_of(item: Item) -> int:
    return int(item.get("generation") or 0)


def _same_generation(generation: int) -> str:
    """The condition that the delivery is still at the message's generation (`:gen` is bound only when > 0)."""
    return "attribute_not_exists(generation)" if generation == 0 else "generation = :gen"


_CLAIM = (
    "(attribute_not_exists(#owner) OR #owner = :me) AND #status IN (:pending, :retrying)"
    " AND (attribute_not_exists(lease_until) OR lease_until < :now_ms) AND "
)
_CLAIM_CONDITIONS = (_CLAIM + _same_generation(0), _CLAIM + _same_generation(1))


def _claim(org: str, delivery: Item, message_id: str, now: datetime, generation: int) -> Item | None:
    """Take the delivery for this attempt; returns it as claimed. Only the claimed attributes come back (the rest an
    attempt reads, id, body, event type, never change after creation and were just read consistently). Refused to a
    message of an earlier generation (an API retry or recovery between the read and the claim)."""
    values = {
        ":me": message_id,
        ":lease": _ms(now + LEASE),
        ":now": clock.iso(now),
        ":now_ms": _ms(now),
        ":one": 1,
        ":pending": "pending",
        ":retrying": "retrying",
    }
    if generation:
        values[":gen"] = generation
    try:
        updated = repo.deliveries_store().update(
            repo.delivery_key(org, delivery["id"]),
            "SET #owner = :me, lease_until = :lease, last_attempt_at = :now, updated_at = :now"
            " ADD attempt_count :one, run_attempts :one REMOVE manual",
            condition=_CLAIM_CONDITIONS[generation > 0],
            names={"#owner": "owner", "#status": "status"},
            values=values,
            return_values="UPDATED_NEW",
        )
    except Conflict:
        return None
    claimed = {k: v for k, v in delivery.items() if k != "manual"}
    claimed.update(updated or {})
    return claimed


def _cancel(org: str, delivery: Item, reason: str, message_id: str, generation: int) -> None:
    now = clock.now()
    values = {
        ":canceled": "canceled",
        ":reason": reason,
        ":now": clock.iso(now),
        ":pending": "pending",
        ":retrying": "retrying",
        ":me": message_id,
        ":now_ms": _ms(now),
    }
    if generation:
        values[":gen"] = generation
    index, index_names, index_values = repo.status_index_update(delivery, "canceled")
    with contextlib.suppress(Conflict):  # it changed meanwhile (claimed, retried): nothing to cancel
        repo.deliveries_store().update(
            repo.delivery_key(org, delivery["id"]),
            f"SET #status = :canceled, last_error = :reason, updated_at = :now, {index} REMOVE next_attempt_at",
            condition="#status IN (:pending, :retrying) AND (attribute_not_exists(#owner) OR #owner = :me)"
            " AND (attribute_not_exists(lease_until) OR lease_until < :now_ms) AND " + _same_generation(generation),
            names={"#status": "status", "#owner": "owner", **index_names},
            values=values | index_values,
            return_values="NONE",
        )


def _alert_mails(store: Store, org: str, subject: str, text: str) -> list[Mail]:
    """One mail per alerting address of the organization (at most 10: webhooks.models)."""
    alerting = service.alerting_of(repo.get_alerting(store, org))
    return [Mail(to=email, subject=subject, text=text) for email in alerting.emails]


def _notify(store: Store, org: str, subject: str, text: str) -> None:
    """Queue the alert mails on their own (the change they report is written already)."""
    try:
        enqueue(store, _alert_mails(store, org, subject, text))
    except Exception:  # an alert that cannot be queued must not fail the delivery
        logger.exception("alert e-mail not queued", extra={"organization_id": org})


def disable_endpoint(store: Store, org: str, endpoint: Item, reason: str, detail: str) -> bool:
    """Disable once (condition: still enabled), audited as the system; the alerting e-mails are queued in the same
    transaction."""
    now = clock.now_iso()
    mails = _alert_mails(
        store,
        org,
        f"Webhook endpoint disabled: {endpoint['url']}",
        f"Switchboard disabled the webhook endpoint {endpoint['id']} ({endpoint['url']}): {detail}\n"
        "Fix the receiver, enable the endpoint again, then recover its failed deliveries.",
    )
    try:
        store.transact(
            [
                Update(
                    key=repo.endpoint_key(org, endpoint["id"]),
                    expression="SET enabled = :false, disabled_reason = :reason, disabled_at = :now,"
                    " updated_at = :now ADD version :one",
                    condition="enabled = :true",
                    values={":false": False, ":true": True, ":reason": reason, ":now": now, ":one": 1},
                ),
                audit_put(
                    system_auth(org),
                    "webhook_endpoint.disabled",
                    "webhook_endpoint",
                    endpoint["id"],
                    after={"reason": reason, "detail": detail},
                ),
                *mail_puts(mails),
            ]
        )
    except Conflict:
        return False  # already disabled (or deleted)
    return True


def _healthy_and_stamped(endpoint: Item, now: datetime) -> bool:
    """No failure streak to reset and `last_success_at` younger than `SUCCESS_STAMP_EVERY` (as read just before)."""
    if endpoint.get("consecutive_failures") or endpoint.get("failing_since"):
        return False
    stamp = endpoint.get("last_success_at")
    stamped = clock.parse_stored(stamp, "endpoint last_success_at") if isinstance(stamp, str) else None
    return stamped is not None and stamped > now - SUCCESS_STAMP_EVERY


def _endpoint_after(store: Store, org: str, endpoint: Item, result: HttpResult, now: datetime) -> bool:
    """Update the endpoint's failure streak; returns True when the endpoint is (now) disabled."""
    try:
        if result.ok and _healthy_and_stamped(endpoint, now):
            return False  # nothing to reset, and its success stamp is fresh: no write on the hot item
        key, iso = repo.endpoint_key(org, endpoint["id"]), clock.iso(now)
        if result.ok:
            store.update(
                key,
                "SET last_success_at = :now, consecutive_failures = :zero REMOVE failing_since",
                condition="attribute_exists(PK)",
                values={":now": iso, ":zero": 0},
                return_values="NONE",
            )
            return False
        if result.status_code == 410:
            disable_endpoint(store, org, endpoint, "gone", "it answered 410 Gone")
            return True
        updated = store.update(
            key,
            "SET failing_since = if_not_exists(failing_since, :now), last_failure_at = :now"
            " ADD consecutive_failures :one",
            condition="attribute_exists(PK)",
            values={":now": iso, ":one": 1},
        )
    except Conflict:
        return True  # the endpoint was deleted meanwhile
    assert updated is not None
    failures = int(updated.get("consecutive_failures", 0))
    threshold = service.alerting_of(repo.get_alerting(store, org)).failure_threshold
    if failures == threshold:
        _notify(
            store,
            org,
            f"Webhook endpoint failing: {endpoint['url']}",
            f"The webhook endpoint {endpoint['id']} ({endpoint['url']}) failed {failures} attempts in a row; "
            f"the last one: {result.error or 'failed'}.",
        )
    failing_since = clock.parse_stored(updated.get("failing_since"), "endpoint failing_since")
    if failing_since is not None and failing_since <= now - DISABLE_AFTER:
        disable_endpoint(store, org, updated, "failing", "every attempt failed for 5 days")
        return True
    return False


@functools.lru_cache(maxsize=64)
def _state_update(present: tuple[str, ...], removes: tuple[str, ...]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The delivery's update expression and attribute names for these set and removed attributes (a handful of
    combinations, each built once)."""
    expression = "SET " + ", ".join(f"#{k} = :{k}" for k in present) + " REMOVE " + ", ".join(f"#{k}" for k in removes)
    return expression, (("#owner", "owner"), *((f"#{k}", k) for k in (*present, *removes)))


def _record(
    store: Store, org: str, claimed: Item, endpoint: Item, result: HttpResult, message_id: str, trigger: str
) -> Outcome:
    now = clock.now()
    disabled = _endpoint_after(store, org, endpoint, result, now)
    sets: dict[str, Any] = {"last_status_code": result.status_code, "last_error": result.error}
    delay: float | None = None
    if result.ok:
        status = "succeeded"
    elif result.status_code == 410:
        status, sets["last_error"] = "canceled", "HTTP 410 Gone: the endpoint was disabled"
    elif disabled:
        status = "canceled"
    else:
        retry_after = None
        if result.status_code in schedule.RETRY_AFTER_STATUSES:
            retry_after = schedule.parse_retry_after(result.retry_after, now)
        delay = schedule.next_delay(
            int(claimed.get("run_attempts", 1)), retry_after=retry_after, scale=get_settings().local_time_scale
        )
        status = "exhausted" if delay is None else "retrying"
    sets["status"] = status
    sets.update(repo.status_index(claimed, status))  # the delivery moves to its new status's lists
    sets["updated_at"] = now_iso = clock.iso(now)
    removes = ["lease_until"]
    if delay is None:
        removes.append("next_attempt_at")
    else:
        sets["next_attempt_at"] = clock.iso(now + timedelta(seconds=delay))
    present = {k: v for k, v in sets.items() if v is not None}
    removes += [k for k, v in sets.items() if v is None]
    ulid = new_ulid()
    attempt = {
        **repo.attempt_key(org, claimed["id"], ulid),
        "entity": "WebhookAttempt",
        "id": f"att_{ulid.lower()}",
        "delivery_id": claimed["id"],
        "endpoint_id": endpoint["id"],
        "attempt": int(claimed.get("attempt_count", 1)),
        "status": "succeeded" if result.ok else "failed",
        "trigger": trigger,
        "url": endpoint["url"],
        "status_code": result.status_code,
        "duration_ms": result.duration_ms,
        "error": result.error,
        "response": result.response,
        "created_at": now_iso,
        "ttl": clock.epoch(now + repo.DELIVERY_RETENTION),
    }
    expression, names = _state_update(tuple(present), tuple(removes))
    try:
        repo.deliveries_store().transact(
            [
                Put(item=attempt),
                Update(
                    key=repo.delivery_key(org, claimed["id"]),
                    expression=expression,
                    condition="#owner = :me",
                    names=dict(names),
                    values={":me": message_id, **{f":{k}": v for k, v in present.items()}},
                ),
            ]
        )
    except Conflict:
        return Outcome(True, status="superseded")  # an API retry took the delivery over
    if status == "retrying":
        assert delay is not None
        return Outcome(False, schedule.visibility_timeout(delay), status)
    return Outcome(True, status=status)


class Payloads:
    """The event payloads one batch has read: the deliveries of one event share one read, also while their attempts
    run at once on the worker threads (a missing payload is read under the lock)."""

    def __init__(self) -> None:
        self._bytes: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def of(self, org: str, delivery: Item) -> bytes:
        key = (org, str(delivery["event_id"]))
        with self._lock:
            if key not in self._bytes:
                self._bytes[key] = event_body(org, delivery)
            return self._bytes[key]


def event_body(org: str, delivery: Item) -> bytes:
    """The bytes every attempt of the delivery sends: its event's stored payload."""
    event_id = str(delivery["event_id"])
    stored = repo.event_bodies(org, [event_id]).get(event_id)
    return (stored if stored is not None else str(delivery.get("body") or "{}")).encode()


def process(
    store: Store,
    org: str,
    msg_id: str,
    message_id: str,
    generation: int = 0,
    bodies: Payloads | None = None,
) -> Outcome:
    """Handle one wake-up of delivery `msg_id` by SQS message `message_id` of the delivery's `generation`
    (`bodies`: the event payloads this batch read already)."""
    delivery = repo.get_delivery(org, msg_id, consistent=True)
    if delivery is None or delivery.get("status") not in ACTIVE:
        return Outcome(True, status="nothing to do")
    if generation_of(delivery) != generation:
        return Outcome(True, status="superseded")  # an API retry or recovery queued its own message since
    if delivery.get("owner") and delivery["owner"] != message_id:
        return Outcome(True, status="duplicate")
    now = clock.now()
    due = clock.parse_stored(delivery.get("next_attempt_at"), "delivery next_attempt_at") or now  # unreadable: due
    wait = (due - now).total_seconds()
    if wait > EARLY_TOLERANCE:
        return Outcome(False, schedule.visibility_timeout(wait), "not due")
    endpoint = repo.get_endpoint(store, org, delivery["endpoint_id"], consistent=True)
    if endpoint is None or not endpoint.get("enabled"):
        reason = "the endpoint was deleted" if endpoint is None else "the endpoint is disabled"
        _cancel(org, delivery, reason, message_id, generation)
        return Outcome(True, status="canceled")
    claimed = _claim(org, delivery, message_id, now, generation)
    if claimed is None:
        return Outcome(True, status="claimed elsewhere")
    trigger = "manual" if delivery.get("manual") else "scheduled"
    result = attempt_http(endpoint, claimed, (bodies or Payloads()).of(org, claimed))
    outcome = _record(store, org, claimed, endpoint, result, message_id, trigger)
    metrics.count("WebhookDeliveries" if result.ok else "WebhookDeliveryFailures", organization=org)
    if outcome.status in ("retrying", "exhausted"):
        metrics.count("WebhookRetries" if outcome.status == "retrying" else "WebhookExhausted", organization=org)
    logger.info(
        "webhook attempt",
        extra={
            "delivery_id": msg_id,
            "endpoint_id": endpoint["id"],
            "attempt": claimed.get("attempt_count"),
            "status_code": result.status_code,
            "error": result.error,
            "delivery_status": outcome.status,
            "duration_ms": result.duration_ms,
        },
    )
    return outcome


# The SQS consumer -------------------------------------------------------------------------------------------------
def _one(record: dict[str, Any], bodies: Payloads | None = None) -> Outcome:
    try:
        body = json.loads(record["body"])
        return process(
            get_store(),
            body["organization_id"],
            body["delivery_id"],
            record["messageId"],
            int(body.get("generation", 0)),
            bodies,
        )
    except Exception:  # the message stays on the queue and comes back after its visibility timeout
        logger.exception("webhook delivery failed unexpectedly", extra={"message_id": record.get("messageId")})
        return Outcome(False)


BATCH_WORKERS = 10  # the queue's BatchSize: every record of a batch is attempted at once


_pools = threading.local()


def _workers() -> ThreadPoolExecutor:
    """The invoking thread's pool, kept for the container's life (its threads sleep between invocations), not started
    per batch. One per invoking thread: Lambda invokes a container from one thread, while the local stack runs many
    invocations of this function at once in one process, which must not wait for each other's attempts."""
    pool: ThreadPoolExecutor | None = getattr(_pools, "pool", None)
    if pool is None:
        pool = _pools.pool = ThreadPoolExecutor(max_workers=BATCH_WORKERS, thread_name_prefix="webhook-attempt")
    return pool


class AttemptPending(Exception):
    """A delivery this attempt did not finish: its record is reported as a batch item failure."""


def attempt_record(record: dict[str, Any], bodies: Payloads | None = None) -> None:
    """One WebhookDeliveriesQueue record: its due attempt. A delivery not done raises `AttemptPending` (after its
    message is rescheduled, when the attempt asked for a later retry), so the consumer's batch processor reports it
    and SQS shows the message again once its visibility ends. `bodies`: the event payloads the batch has read (the
    deliveries of one event share one)."""
    outcome = _one(record, bodies)
    if outcome.done:
        return
    if outcome.visibility is not None:
        reschedule(record["receiptHandle"], outcome.visibility)
    raise AttemptPending(record.get("messageId"))


async def attempt_record_async(record: dict[str, Any], bodies: Payloads | None = None) -> None:
    """`attempt_record` on the container's worker threads: the attempts of a batch run at once (each may take up to
    its timeouts), each in a copy of the caller's context (as `asyncio.to_thread` does)."""
    run = contextvars.copy_context().run
    await asyncio.get_running_loop().run_in_executor(_workers(), run, attempt_record, record, bodies)


def reschedule(receipt_handle: str, seconds: int) -> None:
    try:
        aws.client("sqs").change_message_visibility(
            QueueUrl=get_settings().webhook_deliveries_queue_url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=seconds,
        )
    except Exception:  # the message then returns after the queue's own visibility timeout
        logger.exception("could not reschedule a webhook delivery message")
