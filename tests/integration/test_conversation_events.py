"""issue 30: `conversation.updated` fires once per change of a conversation's metadata, a new message included
(inbound or outbound), in the message's own transaction."""

from __future__ import annotations

import pytest

from switchboard.events.outbox import stored_events
from switchboard.messaging import messages
from switchboard.providers.base import InboundMessage
from switchboard.store import get_store
from tests.integration.support import Api


@pytest.fixture
def channel(api: Api) -> dict:
    ch = api.post(
        "/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {"api_token": "long-secret-value-1234"}}
    )
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


def _updates(api: Api, conv_id: str) -> list[dict]:
    return [
        e["payload"]
        for e in stored_events(get_store(), api.org_id)
        if e["event_type"] == "conversation.updated" and e["payload"]["conversation_id"] == conv_id
    ]


def _receive(api: Api, channel: dict, pmid: str, text: str = "hello") -> messages.models.InboundAccepted:
    store, org = get_store(), api.org_id
    ch = store.get({"PK": f"ORG#{org}", "SK": f"CHANNEL#{channel['id']}"})
    inbound = InboundMessage(provider_message_id=pmid, from_phone="14155552671", type="text", text=text)
    return messages.receive(store, org, ch, inbound)


def test_an_inbound_message_fires_one_update_with_the_preview(api: Api, channel: dict):
    got = _receive(api, channel, "wamid.CE1")
    (update,) = _updates(api, got.conversation_id)
    assert update == {
        "conversation_id": got.conversation_id,
        "organization_id": api.org_id,
        "status": "open",
        "changes": ["preview", "unread_count"],
    }
    assert _receive(api, channel, "wamid.CE1").duplicate is True  # a redelivered callback changes nothing
    assert len(_updates(api, got.conversation_id)) == 1


def test_an_inbound_message_reopening_a_closed_conversation_says_so(api: Api, channel: dict):
    conv_id = _receive(api, channel, "wamid.CE2").conversation_id
    assert api.post(f"/v1/conversations/{conv_id}/close").json()["data"]["status"] == "closed"
    assert api.post(f"/v1/conversations/{conv_id}/archive").json()["data"]["archived"] is True
    assert len(_updates(api, conv_id)) == 3  # the message, close, archive: one each
    _receive(api, channel, "wamid.CE3", "again")
    last = _updates(api, conv_id)[-1]
    assert len(_updates(api, conv_id)) == 4
    assert last["status"] == "open" and last["changes"] == ["archived", "preview", "status", "unread_count"]
    conv = api.get(f"/v1/conversations/{conv_id}").json()["data"]
    assert conv["status"] == "open" and conv["archived"] is False and conv["last_message_preview"] == "again"


def test_an_outbound_send_fires_one_update_and_actions_still_one_each(api: Api, channel: dict):
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+14155552671", "text": {"body": "hi"}})
    assert sent.status_code == 202, sent.text
    conv_id = messages.get_item(get_store(), api.org_id, sent.json()["data"]["id"])["conversation_id"]
    (update,) = _updates(api, conv_id)
    assert update["changes"] == ["preview"] and update["status"] == "open"
    assert api.post(f"/v1/conversations/{conv_id}/pin").status_code == 200
    assert api.post(f"/v1/conversations/{conv_id}/pin").status_code == 200  # no change, no event
    updates = _updates(api, conv_id)
    assert len(updates) == 2 and updates[-1]["changes"] == ["pinned"]
