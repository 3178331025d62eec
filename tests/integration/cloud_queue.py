"""Meta's webhook as the tests drive it: the callback route verifies and queues each change on the template's
CloudWebhookQueue (moto); `drain` then runs the real `cloud_webhook` consumer over what is queued, as Lambda's event
source mapping would, and sums what it processed."""

from __future__ import annotations

from typing import Any
from unittest import mock

import boto3
import httpx

from functions.cloud_webhook.app import handler
from local.pollers import lambda_sqs_record
from switchboard.messaging import cloud_webhook
from tests.helpers import FakeContext
from tests.integration.support import Api

QUEUE = "CloudWebhookQueue"


def drain(api: Api, *, limit: int = 50) -> dict[str, int]:
    """Process every queued change (in batches of 10, deleting what succeeded); the stored messages and applied
    statuses, summed."""
    sqs = boto3.client("sqs")
    url, arn = api.resources.queue_url(QUEUE), api.resources.queue_arn(QUEUE)
    totals = {"received": 0, "statuses_applied": 0}
    real = cloud_webhook.process

    def counted(*args: Any, **kwargs: Any) -> dict[str, int]:
        counts = real(*args, **kwargs)
        for key in totals:
            totals[key] += counts[key]
        return counts

    with mock.patch.object(cloud_webhook, "process", counted):
        for _ in range(limit):
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
            records = [lambda_sqs_record(m, arn) for m in got.get("Messages") or []]
            if not records:
                return totals
            result = handler({"Records": records}, FakeContext())
            assert result == {"batchItemFailures": []}, result
            for record in records:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])
    raise AssertionError("the queue did not drain")


def post(api: Api, url: str, body: bytes, headers: dict[str, str]) -> tuple[httpx.Response, dict[str, int]]:
    """The callback, then its queued changes processed: the answer and what the consumer did."""
    answer = api.post(url, content=body, headers=headers)
    return answer, drain(api) if answer.status_code == 200 else {"received": 0, "statuses_applied": 0}
