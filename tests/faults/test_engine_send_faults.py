"""Sends through a linked-device engine that fails: answers lost after the engine accepted (read timeouts), 5xx before
it did anything, and the queue handing every message out again. Every message reaches the engine exactly once, and
the engine's acks reconcile the ones whose answer was lost (no provider id is missing at the end).

"Arrived" is what the fake WAHA server holds as sent (tests/fakes/waha.py), matched to our messages by their text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.messaging import messages
from switchboard.providers.base import ProviderUnavailable
from switchboard.providers.waha import WahaProvider
from switchboard.store import get_store
from tests.fakes.waha import FakeWaha
from tests.faults.injection import Ledger
from tests.integration.support import Api

MESSAGES = 30


@pytest.fixture
def waha() -> Iterator[FakeWaha]:
    with FakeWaha(api_key="k") as fake:
        yield fake


def _callback(api: Api, waha: FakeWaha, channel_id: str, event: str, payload: dict[str, Any]) -> None:
    body, headers = waha.webhook(channel_id, event, payload)
    answer = api.post(f"/v1/providers/{channel_id}/callback", content=body, headers=headers)
    assert answer.status_code == 200, answer.text


def test_engine_timeouts_after_accepting_never_send_twice(api: Api, waha: FakeWaha, monkeypatch: pytest.MonkeyPatch):
    original = WahaProvider.__init__

    def short_timeout(self: WahaProvider, channel: dict[str, Any]) -> None:
        original(self, channel)
        self.timeout = 0.2

    monkeypatch.setattr(WahaProvider, "__init__", short_timeout)
    config = {"engine": "waha", "base_url": waha.url, "api_key": "k"}
    channel = api.post("/v1/channels", json={"name": "web", "platform": "whatsapp_web", "config": config}).json()[
        "data"
    ]
    cid = channel["id"]
    api.post(f"/v1/channels/{cid}/connect")
    waha.link(cid)
    _callback(api, waha, cid, "session.status", waha.session_status(cid))

    ledger = Ledger("engine timeouts after accepting a send")
    ids: dict[str, str] = {}
    for n in range(MESSAGES):
        text = f"message {n}"
        sent = api.post("/v1/messages", json={"channel_id": cid, "to": f"+1415555{n:04d}", "text": {"body": text}})
        assert sent.status_code == 202, sent.text
        ids[text] = sent.json()["data"]["id"]
        ledger.accepted.append(text)

    outcomes: dict[str, int] = {}
    for n, message_id in enumerate(ids.values()):
        if n % 3 == 0:
            waha.accept_then_hang(0.6)  # the engine sends it, its answer never comes back in time
        elif n % 5 == 1:
            waha.fail_next(503, body={"statusCode": 503, "message": "restarting"})  # nothing done: retried
        for _ in range(3):  # the queue hands every record out three times
            try:
                outcome = messages.deliver(get_store(), api.org_id, message_id)
            except ProviderUnavailable:
                outcome = "retry"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1

    ledger.arrived = [record["text"] for record in waha.sent(cid)]
    ledger.check()
    print(f"[fault] outcomes: {dict(sorted(outcomes.items()))}")
    # at least every held-back answer; a send queued behind a stuck engine times out too (and is uncertain as well)
    assert outcomes["uncertain"] >= len(range(0, MESSAGES, 3))

    for ident, _ in [(k, v) for k, v in waha.sessions[cid].messages.items() if v["fromMe"]]:
        _callback(api, waha, cid, "message.ack", waha.ack(cid, ident, 2))
    for text, message_id in ids.items():
        record = api.get(f"/v1/messages/{message_id}").json()["data"]
        assert record["status"] == "delivered", (text, record)
        assert record["provider_message_id"] and record["uncertain"] is False, (text, record)
