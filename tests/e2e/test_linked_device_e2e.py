"""The linked-device journey over real HTTP, per engine: the local stack drives a fake WAHA or Evolution API server
(tests/fakes), and the fake posts its signed webhooks back to the stack's callback URL, as the real engines do:
connect → QR → linked → send (queue → message_sender → engine) → ack → inbound → group create → the customer's
reaction → a group member's message → label attach."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.evolution import FakeEvolution
from tests.fakes.waha import FakeWaha
from tests.helpers import wait_until

pytestmark = pytest.mark.e2e

CUSTOMER = "4915112345671"
MEMBER = "4915112345672"


class Engine:
    """What the journey needs from each fake, in one shape."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fake: Any = FakeWaha(api_key="k") if name == "waha" else FakeEvolution(api_key="k")

    def hook_url(self, session: str) -> str:
        if self.name == "waha":
            return str(self.fake.sessions[session].config["webhooks"][0]["url"])
        return str(self.fake.instances[session].webhook["url"])

    def linked(self, session: str) -> list[Any]:
        self.fake.link(session)
        if self.name == "waha":
            return self.fake.deliver(session, "session.status", self.fake.session_status(session))
        return [self.fake.deliver(session, "connection.update", self.fake.connection_update(session))]

    def sent(self, session: str) -> list[dict[str, Any]]:
        return list(self.fake.sent(session))

    def ack_read(self, session: str) -> Any:
        ident, _ = self.fake.last_sent(session)
        if self.name == "waha":
            return self.fake.deliver(session, "message.ack", self.fake.ack(session, ident, 3))
        return self.fake.deliver(session, "messages.update", self.fake.update(session, ident, "READ"))

    def inbound(self, session: str, text: str) -> Any:
        if self.name == "waha":
            return self.fake.deliver(session, "message", self.fake.inbound(session, CUSTOMER, text))
        return self.fake.deliver(session, "messages.upsert", self.fake.inbound(session, CUSTOMER, text))

    def react(self, session: str, emoji: str) -> Any:
        ident, _ = self.fake.last_sent(session)
        if self.name == "waha":
            return self.fake.deliver(session, "message.reaction", self.fake.reaction(session, ident, CUSTOMER, emoji))
        return self.fake.deliver(session, "messages.upsert", self.fake.reaction(session, ident, CUSTOMER, emoji))

    def group_message(self, session: str, jid: str, text: str) -> Any:
        if self.name == "waha":
            payload = self.fake.inbound(session, jid, text, participant=f"{MEMBER}@c.us")
            return self.fake.deliver(session, "message", payload)
        data = self.fake.inbound(session, jid, text, participant=f"{MEMBER}@s.whatsapp.net")
        return self.fake.deliver(session, "messages.upsert", data)

    def forged(self, session: str) -> tuple[bytes, dict[str, str]]:
        if self.name == "waha":
            return self.fake.webhook(session, "session.status", {"name": session, "status": "FAILED"}, key="forged")
        return self.fake.webhook(session, "connection.update", {"instance": session, "state": "close"}, key="forged")

    def group_subject(self, session: str, jid: str) -> str:
        groups = self.fake.sessions[session].groups if self.name == "waha" else self.fake.instances[session].groups
        return str(groups[jid]["subject"])

    def chat_labels(self, session: str) -> Any:
        if self.name == "waha":
            session_state = self.fake.sessions[session]
            return [session_state.labels[i]["name"] for i in session_state.chat_labels.get(f"{CUSTOMER}@c.us", [])]
        instance = self.fake.instances[session]
        return [instance.labels[i]["name"] for i in instance.chat_labels.get(f"{CUSTOMER}@s.whatsapp.net", set())]


@pytest.fixture(params=["waha", "evolution"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    made = Engine(request.param)
    with made.fake:
        yield made


def _wait(fn: Callable[[], Any], timeout: float = 20.0) -> Any:
    return wait_until(fn, timeout=timeout, every=0.1)


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def test_linked_device_journey(local_only, engine: Engine):
    stack = local_only
    with stack.client() as client:
        config = {"engine": engine.name, "base_url": engine.fake.url, "api_key": "k"}
        name = f"web-{uuid.uuid4().hex[:6]}"
        channel = _ok(
            client.post("/v1/channels", json={"name": name, "platform": "whatsapp_web", "config": config}), 201
        )
        cid = channel["id"]
        assert _ok(client.post(f"/v1/channels/{cid}/connect"))["status"] == "pairing"
        assert engine.hook_url(cid) == f"{stack.url}/v1/providers/{cid}/callback"
        assert _ok(client.get(f"/v1/channels/{cid}/qr"))["qr"].startswith("2@")

        body, headers = engine.forged(cid)  # a webhook not signed with the channel's secret changes nothing
        forged = httpx.post(engine.hook_url(cid), content=body, headers=headers, timeout=15)
        assert forged.status_code == 401 and forged.json()["error"]["code"] == "unauthenticated"

        assert engine.linked(cid) == [200]  # the engine posts its signed state change to the stack
        assert _ok(client.get(f"/v1/channels/{cid}"))["status"] == "connected"

        message = _ok(
            client.post("/v1/messages", json={"channel_id": cid, "to": f"+{CUSTOMER}", "text": {"body": "hi"}}), 202
        )
        _wait(lambda: engine.sent(cid))
        sent = _wait(lambda: (m := _ok(client.get(f"/v1/messages/{message['id']}")))["status"] == "sent" and m)
        assert sent["provider_message_id"] and sent["uncertain"] is False
        engine.ack_read(cid)
        _wait(lambda: _ok(client.get(f"/v1/messages/{message['id']}"))["status"] == "read")
        assert len(engine.sent(cid)) == 1

        engine.inbound(cid, "thanks!")
        [conv] = [c for c in _ok(client.get("/v1/conversations", params={"limit": 100})) if c["channel_id"] == cid]
        texts = {m["text"] for m in _ok(client.get(f"/v1/conversations/{conv['id']}/messages"))}
        assert texts == {"hi", "thanks!"}

        group = _ok(
            client.post("/v1/groups", json={"channel_id": cid, "name": "Team", "participants": [f"+{MEMBER}"]}), 201
        )
        assert engine.group_subject(cid, group["jid"]) == "Team"

        engine.react(cid, "🙏")  # the customer reacts to our message: recorded on it, no new message
        thread = _ok(client.get(f"/v1/conversations/{conv['id']}/messages"))
        assert [m["customer_reaction"] for m in thread if m["id"] == message["id"]] == ["🙏"] and len(thread) == 2

        engine.group_message(cid, group["jid"], "hello team")  # a member writes in the group: its conversation
        convs = _ok(client.get("/v1/conversations", params={"limit": 100}))
        [group_conv] = [c for c in convs if c["channel_id"] == cid and c.get("group_jid") == group["jid"]]
        assert group_conv["group_id"] == group["id"]
        [posted] = _ok(client.get(f"/v1/conversations/{group_conv['id']}/messages"))
        assert (posted["from_phone"], posted["text"]) == (MEMBER, "hello team")

        label_name = f"VIP-{uuid.uuid4().hex[:4]}"
        if engine.name == "evolution":  # Evolution cannot create labels: the phone has it
            engine.fake.instances[cid].labels["9"] = {"id": "9", "name": label_name, "color": "#ff9485"}
        label = _ok(client.post("/v1/labels", json={"name": label_name, "color": "#ff9485"}), 201)
        attached = _ok(
            client.post("/v1/labels/chats/attach", json={"label_id": label["id"], "conversation_id": conv["id"]})
        )
        assert attached["provider_sync"] == "synced" and engine.chat_labels(cid) == [label_name]

        assert _ok(client.post(f"/v1/channels/{cid}/disconnect"))["status"] == "disconnected"
