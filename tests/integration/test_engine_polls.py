"""Polls (`type: "poll"`) on the linked-device engines, through the API against the fakes: WAHA's `sendPoll`
(MessagePoll `{name, options, multipleAnswers}`) and Evolution's `sendPoll` (`{name, selectableCount, values}`);
platforms that cannot send one answer 400 `unsupported_by_provider` before anything is queued."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.messaging import messages
from switchboard.store import get_store
from tests.fakes.evolution import FakeEvolution
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api

ADA = "4915112345671"
POLL = {"name": "Lunch?", "options": ["Pizza", "Sushi", "Salad"], "selectable_count": 1}


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


class Engine:
    def __init__(self, api: Api, kind: str, fake: Any) -> None:
        self.api, self.kind, self.fake = api, kind, fake
        config = {"engine": kind, "base_url": fake.url, "api_key": "k"}
        body = {"name": kind, "platform": "whatsapp_web", "config": config}
        self.id = _ok(api.post("/v1/channels", json=body), 201)["id"]
        _ok(api.post(f"/v1/channels/{self.id}/connect"))
        fake.link(self.id)
        state = fake.session_status(self.id) if kind == "waha" else fake.connection_update(self.id)
        body, headers = fake.webhook(self.id, "session.status" if kind == "waha" else "connection.update", state)
        _ok(api.post(f"/v1/providers/{self.id}/callback", content=body, headers=headers))

    def send_poll(self, poll: dict[str, Any]) -> tuple[dict[str, Any], str]:
        body = {"channel_id": self.id, "to": ADA, "type": "poll", "poll": poll}
        sent = _ok(self.api.post("/v1/messages", json=body), 202)
        return sent, messages.deliver(get_store(), self.api.org_id, sent["id"])


@pytest.fixture(params=["waha", "evolution"])
def engine(request: pytest.FixtureRequest, api: Api) -> Iterator[Engine]:
    fake_class = FakeWaha if request.param == "waha" else FakeEvolution
    with fake_class(api_key="k") as fake:
        yield Engine(api, request.param, fake)


def test_a_poll_reaches_the_engine_in_its_own_shape(engine: Engine):
    sent, outcome = engine.send_poll(POLL)
    assert outcome == "sent" and sent["type"] == "poll"
    _, record = engine.fake.last_sent(engine.id)
    if engine.kind == "waha":
        request = engine.fake.requests_to("POST", "/api/sendPoll")[-1].json
        assert request["chatId"] == f"{ADA}@c.us"
        assert request["poll"] == {"name": "Lunch?", "options": ["Pizza", "Sushi", "Salad"], "multipleAnswers": False}
    else:
        request = engine.fake.requests_to("POST", f"/message/sendPoll/{engine.id}")[-1].json
        assert request == {"number": ADA, "name": "Lunch?", "selectableCount": 1, "values": ["Pizza", "Sushi", "Salad"]}
    assert record["kind"] == "poll"
    stored = _ok(engine.api.get(f"/v1/messages/{sent['id']}"))
    assert stored["status"] == "sent" and stored["provider_message_id"]


def test_any_number_of_answers(engine: Engine):
    _, outcome = engine.send_poll({**POLL, "selectable_count": 0})
    assert outcome == "sent"
    if engine.kind == "waha":
        assert engine.fake.requests_to("POST", "/api/sendPoll")[-1].json["poll"]["multipleAnswers"] is True
    else:
        assert engine.fake.requests_to("POST", f"/message/sendPoll/{engine.id}")[-1].json["selectableCount"] == 0


@pytest.mark.parametrize(
    "poll",
    [
        {"name": "Q", "options": ["only one"]},
        {"name": "Q", "options": ["same", "same"]},
        {"name": "", "options": ["a", "b"]},
        {"name": "Q", "options": ["a", "b"], "selectable_count": 3},
    ],
)
def test_a_malformed_poll_is_refused(api: Api, engine: Engine, poll: dict[str, Any]):
    body = {"channel_id": engine.id, "to": ADA, "type": "poll", "poll": poll}
    api.assert_error(api.post("/v1/messages", json=body), 400, "validation_failed")


def test_a_poll_without_its_object_is_refused(api: Api, engine: Engine):
    body = {"channel_id": engine.id, "to": ADA, "type": "poll"}
    api.assert_error(api.post("/v1/messages", json=body), 400, "validation_failed")


def test_platforms_without_polls_answer_unsupported_by_provider(api: Api):
    channel = _ok(api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"}), 201)
    body = {"channel_id": channel["id"], "to": ADA, "type": "poll", "poll": POLL}
    api.assert_error(api.post("/v1/messages", json=body), 400, "unsupported_by_provider")
    assert _ok(api.get("/v1/conversations")) == []


def test_waha_poll_votes_come_back_as_the_polls_tally(api: Api):
    with FakeWaha(api_key="k") as fake:
        engine = Engine(api, "waha", fake)
        sent, _ = engine.send_poll({**POLL, "selectable_count": 0})
        poll_id, _ = fake.last_sent(engine.id)
        bob = "4915112345672"

        def vote(phone: str, options: list[str], at: int) -> None:
            body, headers = fake.webhook(engine.id, "poll.vote", fake.poll_vote(engine.id, poll_id, phone, options, at))
            _ok(api.post(f"/v1/providers/{engine.id}/callback", content=body, headers=headers))

        def tally() -> dict[str, int]:
            [conv] = _ok(api.get("/v1/conversations"))
            thread = _ok(api.get(f"/v1/conversations/{conv['id']}/messages"))
            [poll] = [m for m in thread if m["id"] == sent["id"]]
            return dict(poll["poll_tally"])

        vote(ADA, ["Pizza"], 1_000)
        vote(bob, ["Pizza", "Sushi", "Nope"], 1_000)  # an answer the poll lacks is ignored
        assert tally() == {"Pizza": 2, "Sushi": 1, "Salad": 0}
        vote(ADA, ["Salad"], 3_000)  # Ada changed her vote…
        vote(ADA, ["Sushi"], 2_000)  # …after a change that lands last
        assert tally() == {"Pizza": 1, "Sushi": 1, "Salad": 1}
        vote(bob, [], 4_000)  # withdrawn
        assert tally() == {"Pizza": 0, "Sushi": 0, "Salad": 1}
        assert len(_ok(api.get(f"/v1/conversations/{_ok(api.get('/v1/conversations'))[0]['id']}/messages"))) == 1


LIST = {
    "type": "list",
    "header": {"type": "text", "text": "Menu"},
    "body": {"text": "Pick a dish"},
    "footer": {"text": "Open till 10"},
    "action": {
        "button": "Dishes",
        "sections": [{"title": "Mains", "rows": [{"id": "p1", "title": "Pizza", "description": "Margherita"},
                                                 {"id": "s1", "title": "Sushi"}]}],
    },
}  # fmt: skip
BUTTONS = {
    "type": "button",
    "body": {"text": "Confirm the order?"},
    "action": {"buttons": [{"type": "reply", "reply": {"id": "yes", "title": "Yes"}},
                           {"type": "reply", "reply": {"id": "no", "title": "No"}}]},
}  # fmt: skip


def test_evolution_sends_interactive_lists_and_buttons(api: Api):
    with FakeEvolution(api_key="k") as fake:
        engine = Engine(api, "evolution", fake)
        for interactive in (LIST, BUTTONS):
            body = {"channel_id": engine.id, "to": ADA, "type": "interactive", "interactive": interactive}
            sent = _ok(api.post("/v1/messages", json=body), 202)
            assert messages.deliver(get_store(), api.org_id, sent["id"]) == "sent"
        [listed] = fake.requests_to("POST", f"/message/sendList/{engine.id}")
        assert listed.json == {
            "number": ADA,
            "title": "Menu",
            "description": "Pick a dish",
            "footerText": "Open till 10",
            "buttonText": "Dishes",
            "sections": [{"title": "Mains", "rows": [{"title": "Pizza", "rowId": "p1", "description": "Margherita"},
                                                     {"title": "Sushi", "rowId": "s1"}]}],
        }  # fmt: skip
        [buttons] = fake.requests_to("POST", f"/message/sendButtons/{engine.id}")
        assert buttons.json == {"number": ADA, "title": "", "description": "Confirm the order?",
                                "buttons": [{"type": "reply", "displayText": "Yes", "id": "yes"},
                                            {"type": "reply", "displayText": "No", "id": "no"}]}  # fmt: skip
        cta = {"type": "cta_url", "body": {"text": "Site"}, "action": {"name": "cta_url", "parameters": {}}}
        body = {"channel_id": engine.id, "to": ADA, "type": "interactive", "interactive": cta}
        api.assert_error(api.post("/v1/messages", json=body), 400, "unsupported_by_provider")


def test_waha_has_no_interactive_messages(api: Api):
    with FakeWaha(api_key="k") as fake:
        engine = Engine(api, "waha", fake)
        body = {"channel_id": engine.id, "to": ADA, "type": "interactive", "interactive": LIST}
        api.assert_error(api.post("/v1/messages", json=body), 400, "unsupported_by_provider")


def test_evolution_poll_votes_come_back_as_the_polls_tally(api: Api):
    with FakeEvolution(api_key="k") as fake:
        engine = Engine(api, "evolution", fake)
        sent, _ = engine.send_poll({**POLL, "selectable_count": 0})
        key_id = fake.last_sent(engine.id)[0]
        bob = "4915112345672"

        def update(voters: dict[str, list[str]], at: str) -> None:
            data = fake.poll_update(engine.id, key_id, voters)
            body, headers = fake.webhook(engine.id, "messages.update", data, at=at)
            _ok(api.post(f"/v1/providers/{engine.id}/callback", content=body, headers=headers))

        def tally() -> dict[str, int]:
            [conv] = _ok(api.get("/v1/conversations"))
            [poll] = _ok(api.get(f"/v1/conversations/{conv['id']}/messages"))
            assert poll["id"] == sent["id"] and poll["status"] == "sent"
            return dict(poll["poll_tally"])

        update({"Pizza": [ADA, bob], "Sushi": [bob]}, "2026-01-01T10:00:02.000Z")
        assert tally() == {"Pizza": 2, "Sushi": 1, "Salad": 0}
        update({"Pizza": [ADA]}, "2026-01-01T10:00:01.000Z")  # an older state, delivered late
        assert tally() == {"Pizza": 2, "Sushi": 1, "Salad": 0}
        update({"Salad": [ADA]}, "2026-01-01T10:00:03.000Z")  # Bob withdrew, Ada changed her answer
        assert tally() == {"Pizza": 0, "Sushi": 0, "Salad": 1}
