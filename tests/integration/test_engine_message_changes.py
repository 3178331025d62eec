"""What the customer does to messages already in a linked-device chat, and labels made on the phone, through the
signed callback of a whatsapp_web channel on WAHA and on Evolution API (against the fakes): reactions, edits and
revokes change the stored message they name (never a new message, never a second change on a redelivery), and the
phone's label catalogue events create, rename and delete our label for that engine label id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.events.outbox import stored_events
from switchboard.messaging import messages, status
from switchboard.store import get_store, shards
from tests.fakes.evolution import FakeEvolution
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api

ADA = "4915112345671"


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


class Engine:
    """One engine's fake and its channel, behind the same few verbs."""

    def __init__(self, api: Api, kind: str, fake: Any) -> None:
        self.api, self.kind, self.fake = api, kind, fake
        config = {"engine": kind, "base_url": fake.url, "api_key": "k"}
        body = {"name": kind, "platform": "whatsapp_web", "config": config}
        self.channel = _ok(api.post("/v1/channels", json=body), 201)
        self.id = self.channel["id"]
        _ok(api.post(f"/v1/channels/{self.id}/connect"))
        fake.link(self.id)
        state = fake.session_status(self.id) if kind == "waha" else fake.connection_update(self.id)
        self.post("session.status" if kind == "waha" else "connection.update", state)

    def post(self, event: str, payload: Any) -> Any:
        body, headers = self.fake.webhook(self.id, event, payload)
        return _ok(self.api.post(f"/v1/providers/{self.id}/callback", content=body, headers=headers))

    def inbound(self, text: str) -> tuple[str, dict[str, Any]]:
        """A customer's message, stored: (its engine id, our message)."""
        payload = self.fake.inbound(self.id, ADA, text)
        self.post("message" if self.kind == "waha" else "messages.upsert", payload)
        ident = payload["id"] if self.kind == "waha" else payload["key"]["id"]
        return ident, self.thread()[-1]

    def outbound(self, text: str) -> tuple[str, str]:
        """One of our messages, handed to the engine: (its engine id, our message id)."""
        sent = _ok(self.api.post("/v1/messages", json={"channel_id": self.id, "to": ADA, "text": {"body": text}}), 202)
        assert messages.deliver(get_store(), self.api.org_id, sent["id"]) == "sent"
        ident, _ = self.fake.last_sent(self.id)
        return ident, sent["id"]

    def react(self, ident: str, emoji: str) -> Any:
        if self.kind == "waha":
            return self.post("message.reaction", self.fake.reaction(self.id, ident, ADA, emoji))
        return self.post("messages.upsert", self.fake.reaction(self.id, ident, ADA, emoji))

    def edit(self, ident: str, text: str) -> Any:
        if self.kind == "waha":
            return self.post("message.edited", self.fake.edited(self.id, ident, text))
        return self.post("messages.edited", self.fake.edited(self.id, ident, text))

    def revoke(self, ident: str) -> Any:
        if self.kind == "waha":
            return self.post("message.revoked", self.fake.revoked(self.id, ident))
        return self.post("messages.delete", self.fake.revoked(self.id, ident))

    def label(self, name: str, color: int = 0, ident: str | None = None) -> str:
        payload = self.fake.phone_label(self.id, name, color, ident)
        self.post("label.upsert" if self.kind == "waha" else "labels.edit", payload)
        return str(payload["id"])

    def label_deleted(self, ident: str) -> None:
        payload = self.fake.phone_label_deleted(self.id, ident)
        self.post("label.deleted" if self.kind == "waha" else "labels.edit", payload)

    def thread(self) -> list[dict[str, Any]]:
        convs = _ok(self.api.get("/v1/conversations"))
        (conv,) = [c for c in convs if c["channel_id"] == self.id]
        return list(reversed(_ok(self.api.get(f"/v1/conversations/{conv['id']}/messages"))))


@pytest.fixture(params=["waha", "evolution"])
def engine(request: pytest.FixtureRequest, api: Api) -> Iterator[Engine]:
    fake = FakeWaha(api_key="k") if request.param == "waha" else FakeEvolution(api_key="k")
    with fake:
        yield Engine(api, request.param, fake)


def _events(api: Api, kind: str) -> list[dict[str, Any]]:
    return [e for e in stored_events(get_store(), api.org_id) if e["event_type"] == kind]


def _message(api: Api, message_id: str) -> dict[str, Any]:
    item = status.get_message(get_store(), api.org_id, message_id, consistent=True)
    assert item is not None
    return item


def test_the_customers_edit_and_revoke_change_their_message_and_create_none(api: Api, engine: Engine):
    ident, stored = engine.inbound("helo")
    new_events = len(_events(api, "message.new"))
    engine.edit(ident, "hello")
    engine.edit(ident, "hello")  # a redelivery
    (after,) = [m for m in engine.thread() if m["id"] == stored["id"]]
    assert after["text"] == "hello" and after["edited_at"] and not after["deleted"]
    assert len(engine.thread()) == 1 and len(_events(api, "message.new")) == new_events

    engine.revoke(ident)
    (gone,) = engine.thread()
    assert gone["id"] == stored["id"] and gone["deleted"] is True and gone["text"] is None
    assert _message(api, stored["id"])["deleted_at"]
    assert len(_events(api, "message.new")) == new_events


def test_the_customers_reaction_is_kept_on_our_message(api: Api, engine: Engine):
    engine.inbound("hi")
    ident, message_id = engine.outbound("our answer")
    before = len(engine.thread())
    engine.react(ident, "👍")
    engine.react(ident, "👍")  # a redelivery
    (ours,) = [m for m in engine.thread() if m["id"] == message_id]
    assert ours["customer_reaction"] == "👍" and ours["reaction"] is None
    engine.react(ident, "")  # the customer took it back
    (ours,) = [m for m in engine.thread() if m["id"] == message_id]
    assert ours["customer_reaction"] is None
    assert len(engine.thread()) == before


def test_a_customer_cannot_edit_or_revoke_our_message(api: Api, engine: Engine):
    engine.inbound("hi")
    ident, message_id = engine.outbound("ours")
    if engine.kind == "waha":  # a forged edit naming our message's bare id from the customer's chat
        engine.post(
            "message.edited", {**engine.fake.inbound(engine.id, ADA, "x"), "editedMessageId": ident.rsplit("_")[-1]}
        )
        engine.post("message.revoked", {"after": engine.fake.inbound(engine.id, ADA, ""), "before": None,
                                        "revokedMessageId": ident.rsplit("_")[-1]})  # fmt: skip
    else:
        engine.post("messages.edited", engine.fake.edited(engine.id, ident, "x"))
        engine.post("messages.delete", {**engine.fake.revoked(engine.id, ident), "fromMe": False})
    (ours,) = [m for m in engine.thread() if m["id"] == message_id]
    assert ours["text"] == "ours" and not ours["deleted"] and ours["edited_at"] is None


def test_changes_to_unknown_messages_are_ignored(api: Api, engine: Engine):
    engine.inbound("hi")
    ident, _ = engine.inbound("bye")
    engine.revoke(ident)
    if engine.kind == "waha":
        engine.post("message.reaction", engine.fake.reaction(engine.id, f"false_{ADA}@c.us_NOPE", ADA, "😀"))
    else:
        engine.post("messages.delete", {"remoteJid": f"{ADA}@s.whatsapp.net", "fromMe": False, "id": "NOPE"})
    assert [m["text"] for m in engine.thread()] == ["hi", None]


def test_labels_made_on_the_phone_follow_into_the_catalogue(api: Api, engine: Engine):
    ident = engine.label("Lead", color=1)
    engine.label("Lead", color=1, ident=ident)  # a redelivery
    (lead,) = _ok(api.get("/v1/labels"))
    assert lead["name"] == "Lead" and lead["color"] == "#64c4ff"
    audit = [
        e
        for e in shards.query_all(get_store(), shards.all_pks(api.org_id), sk_prefix="AUDIT#")
        if e.get("action") == "label.created"
    ]
    assert len(audit) == 1  # created once, however often the engine tells us

    engine.label("Hot lead", color=13, ident=ident)  # renamed and recoloured on the phone
    (renamed,) = _ok(api.get("/v1/labels"))
    assert (renamed["id"], renamed["name"], renamed["color"]) == (lead["id"], "Hot lead", "#f74848")

    existing = _ok(api.post("/v1/labels", json={"name": "VIP", "color": "#000000"}), 201)
    vip = engine.label("vip", color=2)  # a phone label of a name we have: linked, not duplicated
    assert len(_ok(api.get("/v1/labels"))) == 2

    engine.label_deleted(ident)
    engine.label_deleted(vip)
    assert _ok(api.get("/v1/labels")) == []
    engine.post("label.deleted" if engine.kind == "waha" else "labels.edit",
                {"id": ident, "name": "Hot lead", "color": 13, "colorHex": "#f74848", "deleted": True,
                 "instance": engine.id})  # a repeat after the deletion: nothing  # fmt: skip
    assert existing["id"]


# Group messages -----------------------------------------------------------------------------------------------------
GROUP = "120363025246125486@g.us"
BOB = "4915112345672"


def _group_message(engine: Engine, participant: str, text: str, **alt: str) -> dict[str, Any]:
    """A participant's message in GROUP as the engine posts it: WAHA's WAMessage with `from` = the group and
    `participant` = the sender (src/structures/responses.dto.ts WAMessageBase); Evolution's key with `remoteJid` = the
    group and `participant` (+ `participantAlt` for a lid; whatsapp.baileys.service.ts ExtendedIMessageKey)."""
    if engine.kind == "waha":
        payload = engine.fake.inbound(engine.id, GROUP, text, participant=participant)
        engine.post("message", payload)
        return payload
    data = engine.fake.inbound(engine.id, GROUP, text, participant=participant, **alt)
    engine.post("messages.upsert", data)
    return data


def _convs(api: Api, engine: Engine) -> list[dict[str, Any]]:
    return [c for c in _ok(api.get("/v1/conversations")) if c["channel_id"] == engine.id]


def test_group_messages_land_in_the_groups_conversation_from_their_sender(api: Api, engine: Engine):
    user = "c.us" if engine.kind == "waha" else "s.whatsapp.net"
    _group_message(engine, f"{ADA}@{user}", "hello group")
    _group_message(engine, f"{BOB}@{user}", "hi Ada")
    if engine.kind == "waha":  # a lid participant, resolved through the engine's lids API
        engine.fake.sessions[engine.id].lids["12345678901234@lid"] = f"{ADA}@c.us"
        _group_message(engine, "12345678901234@lid", "from my lid")
    else:  # Evolution names the phone behind a lid participant in the key
        _group_message(engine, "12345678901234@lid", "from my lid", participantAlt=f"{ADA}@s.whatsapp.net")
    (conv,) = _convs(api, engine)
    assert conv["group_jid"] == GROUP and conv["contact_id"] is None
    thread = list(reversed(_ok(api.get(f"/v1/conversations/{conv['id']}/messages"))))
    assert [(m["from_phone"], m["text"]) for m in thread] == [
        (ADA, "hello group"),
        (BOB, "hi Ada"),
        (ADA, "from my lid"),
    ]
    ada = _ok(api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": f"+{ADA}"}]}))
    assert thread[0]["contact_id"] == thread[2]["contact_id"] == ada["id"] != thread[1]["contact_id"]
    news = [e["payload"] for e in _events(api, "message.new") if e["payload"]["conversation_id"] == conv["id"]]
    assert len(news) == 3 and {n["group_jid"] for n in news} == {GROUP}
    assert [n["from_phone"] for n in news] == [ADA, BOB, ADA]
    one_to_one = engine.fake.inbound(engine.id, ADA, "a 1:1 message")  # the person's own chat stays their own
    engine.post("message" if engine.kind == "waha" else "messages.upsert", one_to_one)
    assert len(_convs(api, engine)) == 2


def test_a_group_message_redelivered_is_stored_once(api: Api, engine: Engine):
    user = "c.us" if engine.kind == "waha" else "s.whatsapp.net"
    payload = _group_message(engine, f"{ADA}@{user}", "once")
    engine.post("message" if engine.kind == "waha" else "messages.upsert", payload)
    (conv,) = _convs(api, engine)
    assert len(_ok(api.get(f"/v1/conversations/{conv['id']}/messages"))) == 1


def test_erasing_a_participant_erases_their_group_messages_only(api: Api, engine: Engine):
    from switchboard.contacts import erasure

    user = "c.us" if engine.kind == "waha" else "s.whatsapp.net"
    _group_message(engine, f"{ADA}@{user}", "Ada's secret")
    _group_message(engine, f"{BOB}@{user}", "Bob's words")
    ada = _ok(api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": f"+{ADA}"}]}))
    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 204
    assert erasure.drive(get_store(), api.org_id, ada["id"])
    (conv,) = _convs(api, engine)
    thread = list(reversed(_ok(api.get(f"/v1/conversations/{conv['id']}/messages"))))
    first = thread[0]
    assert (first["from_phone"], first["text"], first["contact_id"]) == (None, None, None)
    assert (thread[1]["from_phone"], thread[1]["text"]) == (BOB, "Bob's words")
    assert conv["last_message_preview"] is None
