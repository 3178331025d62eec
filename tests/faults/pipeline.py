"""The event pipeline played step by step for fault tests: outbox items → stream records → the real publisher →
moto's EventBridge (the template's rules) → moto's SQS queues → Lambda-shaped SQS records for the real consumers."""

from __future__ import annotations

from typing import Any

from local.pollers import lambda_sqs_record
from switchboard import aws
from switchboard.events.outbox import stored_events
from switchboard.store import get_store
from tests.helpers import FakeContext, stream_record
from tests.integration.support import Api


def outbox(org: str, event_type: str | None = None) -> list[dict[str, Any]]:
    items = stored_events(get_store(), org)
    return [i for i in items if event_type is None or i["event_type"] == event_type]


class Pipeline:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.published: set[str] = set()
        self._seq = 1000

    def stream_records(self, event_type: str | None = None) -> list[dict[str, Any]]:
        """Stream records of the outbox items not yet handed to the publisher (in table order)."""
        records = []
        for item in outbox(self.api.org_id, event_type):
            if item["event_id"] in self.published:
                continue
            self._seq += 1
            records.append(stream_record(item, str(self._seq)))
        return records

    def publish(self, event_type: str | None = None) -> list[str]:
        """Run the real publisher once over the new outbox items; returns the event ids it published."""
        from functions.event_publisher.app import handler

        records = self.stream_records(event_type)
        result = handler({"Records": records}, FakeContext())
        assert result == {"batchItemFailures": []}, result
        ids = [r["dynamodb"]["NewImage"]["event_id"]["S"] for r in records]
        self.published.update(ids)
        return ids

    def receive(self, queue: str) -> list[dict[str, Any]]:
        """Every message now visible on one of the template's queues, as Lambda SQS records."""
        url = self.api.resources.queue_url(queue)
        arn = self.api.resources.queue_arn(queue)
        sqs = aws.client("sqs")
        records: list[dict[str, Any]] = []
        while True:
            got = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            if not got:
                return records
            records += [lambda_sqs_record(m, arn) for m in got]
