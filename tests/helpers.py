"""Builders for Lambda events and contexts, shared by unit and integration tests."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass
class FakeContext:
    function_name: str = "test-function"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


def api_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
    authorizer: dict[str, str] | None = None,
    raw_body: str | None = None,
) -> dict[str, Any]:
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if raw_body is None and body is not None:
        raw_body = json.dumps(body)
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "stage": "test",
            "path": path,
            "httpMethod": method,
            "resourcePath": path,
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": authorizer,
        },
        "body": raw_body,
        "isBase64Encoded": False,
    }


def owner_auth(org_id: str = "org_a", role: str = "owner", principal: str = "key_a") -> dict[str, str]:
    return {
        "principalId": principal,
        "principal_type": "api_key",
        "principal_id": principal,
        "user_id": "usr_a",
        "organization_id": org_id,
        "role": role,
        "credential_id": principal,
    }


def body_of(response: dict[str, Any]) -> Any:
    return json.loads(response["body"]) if response.get("body") else None


def wait_until(fn: Any, *, timeout: float = 20.0, every: float = 0.1) -> Any:
    """Polls `fn` until it returns something truthy (returned) or `timeout` seconds pass (the test fails, showing the
    last value): for what the pipeline does asynchronously (queues, pollers, sandbox timers)."""
    import time

    import pytest

    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s; last value {value!r}")
        time.sleep(every)


def stream_record(item: dict[str, Any], seq: str) -> dict[str, Any]:
    """A DynamoDB stream INSERT record of `item`, as Lambda hands it to a stream consumer."""
    from switchboard.store.table import serialize

    return {
        "eventID": seq,
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "SequenceNumber": seq,
            "NewImage": serialize(item),
            "Keys": serialize({"PK": item["PK"], "SK": item["SK"]}),
        },
    }


def _consumed(record: dict[str, Any]) -> bool:
    """Whether the counters' stream filters (template.yaml, UsageMeterFunction) hand `record` to the function."""
    from local.patterns import matches_any
    from local.template import load_template

    global _COUNTER_FILTERS
    if _COUNTER_FILTERS is None:
        (event,) = load_template().function("UsageMeterFunction").stream_events
        _COUNTER_FILTERS = event.filters
    return matches_any(_COUNTER_FILTERS, record)


_COUNTER_FILTERS: tuple[dict[str, Any], ...] | None = None


def stream_records() -> list[dict[str, Any]]:
    """Every record of the table's stream so far (moto keeps them all), oldest first, as Lambda hands them over."""
    import boto3

    from switchboard.config import get_settings

    table = boto3.client("dynamodb").describe_table(TableName=get_settings().table_name)["Table"]
    streams = boto3.client("dynamodbstreams")
    shards = streams.describe_stream(StreamArn=table["LatestStreamArn"])["StreamDescription"]["Shards"]
    found: list[dict[str, Any]] = []
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=table["LatestStreamArn"], ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            found += page["Records"]
            iterator = page.get("NextShardIterator") if page["Records"] else None
    return found


def run_counters(*, batch: int = 100) -> int:
    """Play the whole table stream (from its first record: everything seen before is handed over again, as a
    redelivery would) to the real counters consumer through its filters; returns the records handed over."""
    from functions.usage_meter.app import handler

    records = [r for r in stream_records() if _consumed(r)]
    for start in range(0, len(records), batch):
        assert handler({"Records": records[start : start + batch]}, FakeContext()) == {"batchItemFailures": []}
    return len(records)


def run_usage_meter(org: str) -> None:
    """Play the table stream's records to the counters consumer (usage records among them), as its mapping would."""
    run_counters()


def count_query_items(monkeypatch: Any) -> list[int]:
    """From now on, the number of items each `Store.query` answers, in call order (the list fills as queries run)."""
    from switchboard.store import Store

    read: list[int] = []
    real = Store.query

    def counting(self: Store, pk: str, **kwargs: Any) -> Any:
        page = real(self, pk, **kwargs)
        read.append(len(page.items))
        return page

    monkeypatch.setattr(Store, "query", counting)
    return read
