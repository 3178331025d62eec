"""Signed webhook deliveries per second of `webhook_sender` against a local receiver, as a ratio to a floor.

The sender: the real handler (`functions/webhook_sender/app.py`) invoked with SQS records of one delivery each, so a
delivery costs what it costs in Lambda: the delivery and endpoint reads, the event's payload (once per batch), the
claim, the URL and address checks, the signature over the stored body, the POST with httpx, the attempt and delivery
written in one transaction, and the endpoint's success stamp. DynamoDB is an in-memory fake
(`bench._harness.FakeDynamoDB`, extended to answer the claim), so the store costs no network; the POST is real, to a
threaded `http.server` on 127.0.0.1.

The floor: a plain loop of the same signed POSTs (Standard Webhooks headers over the same body) with httpx to the
same receiver — the least a sender can cost. Both run interleaved in the same process; the ratio is
deliveries/s of the sender ÷ deliveries/s of the floor (higher is better, target >= 0.8).
Run: `python -m bench.webhook_send [--runs N]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench._harness import Ctx, FakeDynamoDB, bench_env, interleaved

ORG = "org_bench"
ENDPOINT = "whe_bench"
# Records per invocation. One, so the sender and the floor both send one delivery at a time: the records of a
# bigger batch are attempted in parallel threads, which a sequential floor cannot be compared with.
BATCH = 1
MSGS = [f"msg_{n:032d}" for n in range(BATCH)]
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = {"message_id": "m-1", "conversation_id": "cv_1", "text": "hello", "from_phone": "15550100"}
TARGET = 0.8


class Receiver(BaseHTTPRequestHandler):
    """Answers 200 in one write (no Nagle stall between headers and body), keeping the connection alive."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def receiver() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


class SenderTable(FakeDynamoDB):
    """The harness's fake, answering the sender's claim with the claimed delivery, or with its updated attributes
    under `UPDATED_NEW` (conditions are not evaluated and writes are not applied, so every round starts from the
    same due delivery)."""

    def update_item(self, **kw: Any) -> dict[str, Any]:
        self.calls["UpdateItem"] += 1
        if kw.get("ReturnValues") == "NONE":
            return {}
        item = dict(self.items[self._key(kw["Key"])])
        item["attempt_count"] = {"N": "1"}
        item["run_attempts"] = {"N": "1"}
        if kw.get("ReturnValues") == "UPDATED_NEW":  # as DynamoDB: only the attributes the update sets or adds
            names = kw.get("ExpressionAttributeNames") or {}
            words = kw["UpdateExpression"].split(" REMOVE ")[0].replace(",", " ").split()
            updated = {names.get(word, word) for word in words}
            item = {name: value for name, value in item.items() if name in updated}
        return {"Attributes": item}


def _items(url: str) -> list[dict[str, Any]]:
    from switchboard import clock

    pk, now = f"ORG#{ORG}", "2026-11-01T00:00:00.000Z"
    return [
        {
            "PK": pk,
            "SK": f"WHEP#{ENDPOINT}",
            "entity": "WebhookEndpoint",
            "id": ENDPOINT,
            "organization_id": ORG,
            "url": url,
            "filter_types": [],
            "enabled": True,
            "secret": SECRET,
            "consecutive_failures": 0,
            "last_success_at": clock.now_iso(),  # a healthy, busy endpoint (its success stamp is fresh)
            "created_at": now,
            "updated_at": now,
            "version": 1,
        },
    ] + [
        {
            "PK": f"{pk}#DLV#{msg}",
            "SK": "DLV",
            "entity": "WebhookDelivery",
            "id": msg,
            "organization_id": ORG,
            "endpoint_id": ENDPOINT,
            "event_id": f"evt_bench_{n}",
            "event_type": "message.new",
            "status": "pending",
            "attempt_count": 0,
            "run_attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
            "updated_at": now,
        }
        for n, msg in enumerate(MSGS)
    ]


def _payloads() -> list[dict[str, Any]]:
    """The events' payloads, stored once per event (DeliveriesTable)."""
    return [
        {
            "PK": f"ORG#{ORG}#WHEVT#evt_bench_{n}",
            "SK": "EVT",
            "entity": "WebhookEvent",
            "organization_id": ORG,
            "event_id": f"evt_bench_{n}",
            "event_type": "message.new",
            "body": json.dumps(BODY, separators=(",", ":")),
        }
        for n in range(len(MSGS))
    ]


def sqs_event() -> dict[str, Any]:
    """One batch as Lambda hands it over: one record per delivery."""
    return {
        "Records": [
            {
                "messageId": f"bench-message-{n}",
                "receiptHandle": f"bench-receipt-{n}",
                "body": json.dumps({"organization_id": ORG, "delivery_id": msg}),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:bench",
                "awsRegion": "us-east-1",
            }
            for n, msg in enumerate(MSGS)
        ]
    }


def run(runs: int, per_round: int = 20) -> dict[str, Any]:
    import httpx

    from switchboard.webhooks import signing

    with receiver() as url:
        fake = SenderTable(_items(url) + _payloads())
        with bench_env(fake):
            from functions.webhook_sender.app import handler, process_batch

            event, ctx = sqs_event(), Ctx()
            body = json.dumps(BODY, separators=(",", ":")).encode()
            client = httpx.Client(timeout=15.0, follow_redirects=False, trust_env=False)

            def sender() -> None:
                result = handler(event, ctx)
                assert result == {"batchItemFailures": []}, result

            def core() -> None:  # the same work without the Lambda wrappers (log context, metrics flush)
                result = process_batch(event, ctx)
                assert result == {"batchItemFailures": []}, result

            def floor() -> None:
                for msg in MSGS:
                    headers = signing.delivery_headers([SECRET], msg, int(time.time()), body, "message.new")
                    response = client.post(url, content=body, headers=headers)
                    assert response.status_code == 200

            fake.calls.clear()
            sender()
            calls = {name: count // BATCH for name, count in fake.calls.items()}
            try:
                medians = interleaved(
                    {"sender": sender, "core": core, "floor": floor}, rounds=runs, per_round=per_round
                )
            finally:
                client.close()
    per_second = {name: BATCH * 1e6 / us for name, us in medians.items()}
    return {
        "calls": calls,
        "sender_per_s": per_second["sender"],
        "core_per_s": per_second["core"],
        "floor_per_s": per_second["floor"],
        "ratio": per_second["sender"] / per_second["floor"],
        "core_ratio": per_second["core"] / per_second["floor"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.webhook_send")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--check", action="store_true")
    args, _ = parser.parse_known_args(argv)
    r = run(args.runs)
    print(f"webhook_sender: {BATCH} signed delivery per invocation to a local receiver (DynamoDB: an in-memory fake)")
    print(f"  DynamoDB calls per delivery: {r['calls']}")
    print(
        f"  sender {r['sender_per_s']:.0f}/s vs floor (signed POSTs, same client library) {r['floor_per_s']:.0f}/s"
        f"  -> {r['ratio']:.2f} (target >= {TARGET})"
    )
    print(f"  without the Lambda wrappers (log context, metrics flush): {r['core_per_s']:.0f}/s", end="")
    print(f" -> {r['core_ratio']:.2f}")
    return 1 if args.check and r["ratio"] < TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
