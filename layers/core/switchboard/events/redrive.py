"""Redrive of EventPublisherDLQ: outbox events whose stream batch exhausted its retries are published again.

The DLQ holds Lambda's on-failure records (which shard, which sequence numbers, when), not the events. The events are
still in the table's stream (24 h retention): each DLQ record's range is read again from its shard
(`AT_SEQUENCE_NUMBER`), its outbox INSERTs are put on the bus with the publisher's own code, and the DLQ message is
deleted only when every one of them went through. Republishing events that did reach the bus the first time is
safe: every consumer deduplicates by `event_id`.

    PYTHONPATH=layers/core python -m switchboard.events.redrive \
        --queue-url <EventPublisherDLQUrl output> --bus <EventBusName output> [--dry-run]

Records older than the stream's 24 h retention cannot be read any more; they are reported and left in the DLQ
(the outbox items themselves expire after a day too — see docs/operations.md for that case).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

import boto3

from switchboard.events.publisher import outbox_events, publish


@dataclass
class RedriveReport:
    batches: int = 0
    published: int = 0
    failed: int = 0
    unreadable: list[str] = field(default_factory=list)  # DLQ message ids whose range is gone from the stream

    def line(self) -> str:
        return (
            f"batches={self.batches} events republished={self.published} still failing={self.failed} "
            f"unreadable={len(self.unreadable)}"
        )


def stream_records(streams: Any, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one failed batch: from its start sequence number up to its end one, on its shard."""
    start, end = info["startSequenceNumber"], int(info["endSequenceNumber"])
    iterator = streams.get_shard_iterator(
        StreamArn=info["streamArn"],
        ShardId=info["shardId"],
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=start,
    )["ShardIterator"]
    out: list[dict[str, Any]] = []
    while iterator:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        records = page.get("Records", [])
        for record in records:
            if int(record["dynamodb"]["SequenceNumber"]) > end:
                return out
            out.append(record)
        if not records:
            return out
        iterator = page.get("NextShardIterator")
    return out


def redrive(
    *, sqs: Any, streams: Any, events: Any, queue_url: str, bus: str, dry_run: bool = False, max_batches: int = 1000
) -> RedriveReport:
    report = RedriveReport()
    while report.batches < max_batches:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        if not messages:
            return report
        for message in messages:
            report.batches += 1
            info = json.loads(message["Body"])["DDBStreamBatchInfo"]
            try:
                records = stream_records(streams, info)
            except Exception:  # noqa: BLE001 - trimmed from the stream (older than 24 h) or the shard is gone
                report.unreadable.append(message["MessageId"])
                continue
            pending = outbox_events(records)
            if dry_run:
                report.published += len(pending)
                continue
            failed = publish(pending, bus, events)
            report.published += len(pending) - len(failed)
            report.failed += len(failed)
            if not failed:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        if dry_run:
            return report
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queue-url", required=True, help="EventPublisherDLQ URL (stack output EventPublisherDLQUrl)")
    parser.add_argument("--bus", required=True, help="event bus name (stack output EventBusName)")
    parser.add_argument("--dry-run", action="store_true", help="count what would be republished, change nothing")
    args = parser.parse_args(argv)

    session = boto3.session.Session()
    report = redrive(
        sqs=session.client("sqs"),
        streams=session.client("dynamodbstreams"),
        events=session.client("events"),
        queue_url=args.queue_url,
        bus=args.bus,
        dry_run=args.dry_run,
    )
    print(report.line())
    return 1 if report.failed or report.unreadable else 0


if __name__ == "__main__":
    raise SystemExit(main())
