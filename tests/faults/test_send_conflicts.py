"""Transaction conflicts on the send path: a conflicted write is retried, a message is never handed to its provider
twice.

DynamoDB cancels a transaction with a `TransactionConflict` reason when another transaction touches one of its items
at the same moment; nothing of it was written. Every transaction of the send path (the API's `pending` write) and of
the sender (the `pending → sent` write) is made to conflict here, and the provider's sends are counted per message:
exactly one each, whatever the conflicts, the queue's redeliveries included. "Arrived" is a provider send.
"""

from __future__ import annotations

import json
import types
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from functions.message_sender.app import handler as sender_handler
from switchboard import clock
from switchboard.messaging import messages
from switchboard.store import get_store
from tests.faults.conftest import ProviderSpy
from tests.faults.injection import Ledger, aws_faults, transact_sks
from tests.faults.pipeline import Pipeline
from tests.faults.test_queue_redelivery import _queued_records, _send_messages, _status
from tests.helpers import FakeContext
from tests.integration.support import Api

CONFLICT = {"CancellationReasons": [{"Code": "TransactionConflict"}]}
MESSAGES = 200


@pytest.fixture
def no_backoff(monkeypatch) -> None:
    """The store's and the sender's pauses between attempts take no wall time (their count is what is tested)."""
    instant = types.SimpleNamespace(sleep=lambda seconds: None)
    monkeypatch.setattr("switchboard.store.table.time", instant)
    monkeypatch.setattr("switchboard.messaging.messages.time", instant)


def _sends_per_message(spy: ProviderSpy, accepted: list[str], name: str) -> float:
    counts = Counter(spy.sent)
    ratio = sum(counts[m] for m in accepted) / len(accepted)
    print(f"[fault] {name}: provider sends per message = {ratio:.2f} over {len(accepted)} messages")
    return ratio


def test_every_transaction_of_the_send_path_conflicting_once_sends_each_message_once(
    api: Api, channel, spy: ProviderSpy, monkeypatch, no_backoff
):
    ledger = Ledger("send path: every transaction conflicts once")
    seen: set[str] = set()

    def first_attempt(params: dict[str, Any]) -> bool:
        # botocore gives each call a new ClientRequestToken: the transaction is its items
        signature = json.dumps(params["TransactItems"], sort_keys=True)
        if signature in seen:
            return False
        seen.add(signature)
        return True

    with aws_faults(monkeypatch) as faults:
        faults.fail(
            "dynamodb", "TransactWriteItems", "TransactionCanceledException", when=first_attempt, extra=CONFLICT
        )
        ledger.accepted = _send_messages(api, channel, MESSAGES)
        records = _queued_records(api, Pipeline(api))
        assert len(records) == MESSAGES
        for start in range(0, len(records), 10):  # the queue's batches
            result = sender_handler({"Records": records[start : start + 10]}, FakeContext())
            assert result == {"batchItemFailures": []}, result
        refused = sum(1 for op, injected in faults.log if op == "TransactWriteItems" and injected)
    assert refused >= 2 * MESSAGES  # each message's `pending` write and its `sent` write, refused once each
    ledger.arrived = list(spy.sent)
    ledger.check()
    assert _sends_per_message(spy, ledger.accepted, ledger.name) == 1.00
    assert {_status(api, m) for m in ledger.accepted} == {"sent"}


def test_a_sent_write_that_keeps_conflicting_is_finished_by_the_redelivery_without_a_second_send(
    api: Api, channel, spy: ProviderSpy, monkeypatch, no_backoff
):
    """The `pending → sent` write conflicts on every attempt of the first delivery (the store's and the sender's):
    the record goes back to the queue, and its redelivery records the provider's id it kept, sending nothing."""
    ledger = Ledger("sender: the sent write conflicts until the redelivery")
    ledger.accepted = _send_messages(api, channel, 20)
    records = _queued_records(api, Pipeline(api))

    def marks_sent(params: dict[str, Any]) -> bool:
        return any(sk.startswith("USAGEREC#") for sk in transact_sks(params))

    with aws_faults(monkeypatch) as faults:
        faults.fail("dynamodb", "TransactWriteItems", "TransactionCanceledException", when=marks_sent, extra=CONFLICT)
        with pytest.raises(BatchProcessingError):  # every record failed: Lambda hands the whole batch back
            sender_handler({"Records": records[:10]}, FakeContext())
    assert {_status(api, m) for m in ledger.accepted[:10]} == {"pending"}
    kept = [messages.get_item(get_store(), api.org_id, m, consistent=True) for m in ledger.accepted[:10]]
    assert all(item.get(messages.HANDED_OFF) for item in kept)
    assert len(spy.sent) == 10

    # The redelivery comes after the claim's lease has run out (the queue's visibility timeout is longer).
    later = clock.now() + messages.SEND_LEASE + timedelta(seconds=1)
    monkeypatch.setattr(clock, "now", lambda: later)
    assert sender_handler({"Records": records}, FakeContext()) == {"batchItemFailures": []}
    ledger.arrived = list(spy.sent)
    ledger.check()
    assert _sends_per_message(spy, ledger.accepted, ledger.name) == 1.00
    for message_id, item in zip(ledger.accepted[:10], kept, strict=True):
        stored = messages.get_item(get_store(), api.org_id, message_id, consistent=True)
        assert stored["status"] == "sent"
        assert stored["provider_message_id"] == item[messages.HANDED_OFF]
