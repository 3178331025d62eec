"""Event source mappings, played by threads with the same handlers as in AWS.

`StreamPoller` reads the table's DynamoDB stream (every shard, in order, every ~100 ms when idle), turns moto's
records into Lambda's stream records, drops those the mapping's `FilterCriteria` rejects, and invokes the function
with batches of up to `BatchSize`. A reported `batchItemFailures` checkpoints before the lowest failed sequence
number and retries from there; an exception retries the whole batch (halved first when `BisectBatchOnFunctionError`).
After `MaximumRetryAttempts` (bounded locally when the template says -1) the batch is dropped with a log line and,
when the mapping has an on-failure destination queue, an invocation record like Lambda's is sent there.

`SqsPoller` receives up to `BatchSize` messages, invokes the function with SQS records, and deletes what succeeded:
everything when the handler returns without `batchItemFailures`, all but the reported messages otherwise, nothing
when it raises (the messages come back after their visibility timeout, and moto's redrive policy moves poison
messages to the DLQ). Up to `concurrency` batches of one queue run at once.

Every poller stops promptly: waits are on a shared `threading.Event`, and receive calls never long-poll.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from local.functions import FunctionPool
from local.patterns import matches_any
from local.template import REGION, SqsEvent, StreamEvent

log = logging.getLogger("local.pollers")

IDLE_WAIT = 0.1
SHARD_REFRESH_SECONDS = 5.0
LOCAL_MAX_RETRIES = int(os.environ.get("LOCAL_MAX_STREAM_RETRIES", "10"))


def _failed_ids(result: Any, identifiers: list[str]) -> list[str] | None:
    """Reported failures of a batch: [] all succeeded, a list of ids, or None for "the whole batch failed"."""
    if not isinstance(result, dict) or not result.get("batchItemFailures"):
        return []
    failed = []
    known = set(identifiers)
    for item in result["batchItemFailures"]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not identifier or identifier not in known:
            return None  # an invalid identifier fails the whole batch, as Lambda does
        failed.append(str(identifier))
    return failed


class _Poller(threading.Thread):
    def __init__(self, name: str, stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.stop_event = stop

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                busy = self.poll_once()
            except Exception:
                if self.stop_event.is_set():
                    return
                log.exception("%s: poll failed; retrying", self.name)
                busy = False
                self.stop_event.wait(1.0)
            if not busy:
                self.stop_event.wait(IDLE_WAIT)

    def poll_once(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError


# DynamoDB streams ---------------------------------------------------------------------------------------------------
def lambda_stream_record(raw: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A `get_records` record (boto3 shape) as Lambda delivers it."""
    ddb = dict(raw.get("dynamodb") or {})
    created = ddb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        ddb["ApproximateCreationDateTime"] = int(created.timestamp())
    record: dict[str, Any] = {
        "eventID": raw.get("eventID") or uuid.uuid4().hex,
        "eventName": raw.get("eventName"),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": raw.get("awsRegion") or REGION,
        "dynamodb": {
            k: ddb[k]
            for k in (
                "ApproximateCreationDateTime",
                "Keys",
                "NewImage",
                "OldImage",
                "SequenceNumber",
                "SizeBytes",
                "StreamViewType",
            )
            if k in ddb
        },
        "eventSourceARN": stream_arn,
    }
    if raw.get("userIdentity"):
        record["userIdentity"] = raw["userIdentity"]
    return record


class _Shard:
    def __init__(self, shard_id: str, iterator: str | None) -> None:
        self.shard_id = shard_id
        self.iterator = iterator
        self.last_sequence: str | None = None
        self.buffer: list[dict[str, Any]] = []
        self.attempts = 0
        self.limit = 0


class StreamPoller(_Poller):
    def __init__(
        self,
        *,
        pool: FunctionPool,
        mapping: StreamEvent,
        stream_arn: str,
        streams_client: Any,
        sqs_client: Any,
        on_failure_url: str | None,
        stop: threading.Event,
    ) -> None:
        super().__init__(f"stream:{pool.spec.logical_id}.{mapping.name}", stop)
        self.pool = pool
        self.mapping = mapping
        self.stream_arn = stream_arn
        self.streams = streams_client
        self.sqs = sqs_client
        self.on_failure_url = on_failure_url
        self.shards: dict[str, _Shard] = {}
        self._refreshed = 0.0
        retries = mapping.maximum_retry_attempts
        self.max_retries = LOCAL_MAX_RETRIES if retries < 0 else retries
        self.invocations = 0

    def _refresh_shards(self) -> None:
        self._refreshed = time.monotonic()
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            shard_id = shard["ShardId"]
            if shard_id in self.shards:
                continue
            position = self.mapping.starting_position if not self.shards else "TRIM_HORIZON"
            iterator = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType=position
            )["ShardIterator"]
            state = _Shard(shard_id, iterator)
            state.limit = self.mapping.batch_size
            self.shards[shard_id] = state

    def poll_once(self) -> bool:
        if not self.shards or time.monotonic() - self._refreshed > SHARD_REFRESH_SECONDS:
            self._refresh_shards()
        busy = False
        for shard in list(self.shards.values()):
            if self.stop_event.is_set():
                return False
            if not shard.buffer and shard.iterator:
                self._fetch(shard)
            if shard.buffer:
                self._process(shard)
                busy = True
        return busy

    def _fetch(self, shard: _Shard) -> None:
        from botocore.exceptions import ClientError

        try:
            response = self.streams.get_records(ShardIterator=shard.iterator, Limit=1000)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ExpiredIteratorException":
                raise
            kind = "AFTER_SEQUENCE_NUMBER" if shard.last_sequence else "TRIM_HORIZON"
            extra = {"SequenceNumber": shard.last_sequence} if shard.last_sequence else {}
            shard.iterator = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard.shard_id, ShardIteratorType=kind, **extra
            )["ShardIterator"]
            return
        shard.iterator = response.get("NextShardIterator")
        for raw in response.get("Records", []):
            record = lambda_stream_record(raw, self.stream_arn)
            shard.last_sequence = record["dynamodb"].get("SequenceNumber", shard.last_sequence)
            if matches_any(self.mapping.filters, record):
                shard.buffer.append(record)

    def _process(self, shard: _Shard) -> None:
        batch = shard.buffer[: max(1, shard.limit)]
        sequences = [str(r["dynamodb"].get("SequenceNumber", "")) for r in batch]
        error: str | None = None
        self.invocations += 1
        try:
            result = self.pool.invoke({"Records": batch})
            failed = _failed_ids(result, sequences) if self.mapping.report_batch_item_failures else []
        except Exception:
            log.exception("%s: the handler raised; the batch of %d will be retried", self.name, len(batch))
            failed, error = None, "Unhandled"
        if failed == []:
            del shard.buffer[: len(batch)]
            shard.attempts = 0
            shard.limit = self.mapping.batch_size
            return
        first_failed = 0 if failed is None else min(sequences.index(f) for f in failed)
        del shard.buffer[:first_failed]  # records before the lowest failure are checkpointed
        remaining = batch[first_failed:]
        if failed is None and self.mapping.bisect_on_error and len(batch) > 1:
            shard.limit = max(1, len(batch) // 2)
        shard.attempts += 1
        if shard.attempts > self.max_retries:
            log.error(
                "%s: dropping %d record(s) after %d attempts (first sequence number %s)",
                self.name,
                len(remaining),
                shard.attempts,
                remaining[0]["dynamodb"].get("SequenceNumber"),
            )
            self._on_failure(shard, remaining, error)
            del shard.buffer[: len(remaining)]
            shard.attempts = 0
            shard.limit = self.mapping.batch_size
            return
        self.stop_event.wait(min(0.05 * 2**shard.attempts, 2.0))

    def _on_failure(self, shard: _Shard, records: list[dict[str, Any]], error: str | None) -> None:
        if not self.on_failure_url:
            return
        arrivals = [r["dynamodb"].get("ApproximateCreationDateTime", 0) for r in records]
        record = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self.pool.function_arn,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": shard.attempts,
            },
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                **({"functionError": error} if error else {}),
            },
            "version": "1.0",
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "DDBStreamBatchInfo": {
                "shardId": shard.shard_id,
                "startSequenceNumber": records[0]["dynamodb"].get("SequenceNumber"),
                "endSequenceNumber": records[-1]["dynamodb"].get("SequenceNumber"),
                "approximateArrivalOfFirstRecord": _iso(min(arrivals)),
                "approximateArrivalOfLastRecord": _iso(max(arrivals)),
                "batchSize": len(records),
                "streamArn": self.stream_arn,
            },
        }
        try:
            self.sqs.send_message(QueueUrl=self.on_failure_url, MessageBody=json.dumps(record))
        except Exception:
            log.exception("%s: could not record the failed batch in its on-failure destination", self.name)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


# SQS ----------------------------------------------------------------------------------------------------------------
def lambda_sqs_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """A `receive_message` message (boto3 shape) as Lambda delivers it."""
    attributes = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
    message_attributes = {}
    for name, attr in (message.get("MessageAttributes") or {}).items():
        binary = attr.get("BinaryValue")
        message_attributes[name] = {
            "stringValue": attr.get("StringValue"),
            "binaryValue": base64.b64encode(binary).decode() if isinstance(binary, bytes) else binary,
            "stringListValues": list(attr.get("StringListValues") or []),
            "binaryListValues": [
                base64.b64encode(b).decode() if isinstance(b, bytes) else b for b in attr.get("BinaryListValues") or []
            ],
            "dataType": attr.get("DataType"),
        }
        message_attributes[name] = {k: v for k, v in message_attributes[name].items() if v is not None}
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


def _filter_view(record: dict[str, Any]) -> dict[str, Any]:
    """What SQS filter patterns see: the record with `body` parsed when it is a JSON object."""
    try:
        body = json.loads(record["body"])
    except (TypeError, ValueError):
        return record
    return {**record, "body": body} if isinstance(body, dict) else record


class SqsPoller(_Poller):
    def __init__(
        self,
        *,
        pool: FunctionPool,
        mapping: SqsEvent,
        queue_url: str,
        queue_arn: str,
        sqs_client: Any,
        executor: ThreadPoolExecutor,
        concurrency: int,
        stop: threading.Event,
    ) -> None:
        super().__init__(f"sqs:{pool.spec.logical_id}.{mapping.name}", stop)
        self.pool = pool
        self.mapping = mapping
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.sqs = sqs_client
        self.executor = executor
        self.slots = threading.BoundedSemaphore(max(1, concurrency))
        self.invocations = 0

    def _receive(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while len(messages) < self.mapping.batch_size and not self.stop_event.is_set():
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, self.mapping.batch_size - len(messages)),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            received = response.get("Messages") or []
            messages.extend(received)
            if len(received) < 10:
                break
        return messages

    def poll_once(self) -> bool:
        if not self.slots.acquire(timeout=IDLE_WAIT):
            return True
        try:
            messages = self._receive()
        except BaseException:
            self.slots.release()
            raise
        if not messages:
            self.slots.release()
            return False
        try:
            self.executor.submit(self._process, messages)
        except RuntimeError:  # the executor is shutting down
            self.slots.release()
            return False
        return True

    def _process(self, messages: list[dict[str, Any]]) -> None:
        try:
            records = [lambda_sqs_record(m, self.queue_arn) for m in messages]
            kept = [r for r in records if matches_any(self.mapping.filters, _filter_view(r))]
            filtered_out = [r for r in records if r not in kept]
            done = list(filtered_out)  # Lambda deletes messages its filter rejects
            if kept:
                self.invocations += 1
                try:
                    result = self.pool.invoke({"Records": kept})
                except Exception:
                    log.exception("%s: the handler raised; %d message(s) stay on the queue", self.name, len(kept))
                    self._delete_messages(done)
                    return
                ids = [r["messageId"] for r in kept]
                failed = _failed_ids(result, ids) if self.mapping.report_batch_item_failures else []
                if failed is None:
                    log.warning("%s: invalid batchItemFailures; the whole batch stays on the queue", self.name)
                    self._delete_messages(done)
                    return
                done += [r for r in kept if r["messageId"] not in set(failed)]
            self._delete_messages(done)
        except Exception:
            log.exception("%s: could not process a batch", self.name)
        finally:
            self.slots.release()

    def _delete_messages(self, records: list[dict[str, Any]]) -> None:
        for start in range(0, len(records), 10):
            chunk = records[start : start + 10]
            response = self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(chunk)],
            )
            for failure in response.get("Failed") or []:
                log.warning("%s: could not delete a message: %s", self.name, failure.get("Message"))
