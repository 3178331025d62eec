"""Engines post their webhooks concurrently and retry them, so callbacks arrive out of order: on WAHA and on Evolution
API (against the fakes), session states, group events and label events are ordered by the engine's own event time
(WAHA's `timestamp`, Evolution's `date_time`), and a late delivery of an older event never moves state backwards."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.fakes.evolution import FakeEvolution
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api

ADA, BOB = "4915112345671", "4915112345672"


def _ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


class Engine:
    """One engine's fake and its connected channel; `post(event, payload, at)` delivers an event the engine saw at
    `at` (ms since the epoch)."""

    def __init__(self, api: Api, kind: str, fake: Any) -> None:
        self.api, self.kind, self.fake = api, kind, fake
        config = {"engine": kind, "base_url": fake.url, "api_key": "k"}
        body = {"name": kind, "platform": "whatsapp_web", "config": config}
        self.id = _ok(api.post("/v1/channels", json=body), 201)["id"]
        _ok(api.post(f"/v1/channels/{self.id}/connect"))

    def post(self, event: str, payload: Any, at: int) -> Any:
        if self.kind == "waha":
            body, headers = self.fake.webhook(self.id, event, payload, at=at)
        else:
            stamp = datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            body, headers = self.fake.webhook(self.id, event, payload, at=stamp)
        return _ok(self.api.post(f"/v1/providers/{self.id}/callback", content=body, headers=headers))

    def session(self, state: str, at: int) -> None:
        """The session's state as the engine reports it: `pairing` or `working`."""
        if self.kind == "waha":
            status = {"pairing": "SCAN_QR_CODE", "working": "WORKING"}[state]
            self.post("session.status", {"name": self.id, "status": status}, at)
        else:
            data = {"instance": self.id, "state": {"pairing": "connecting", "working": "open"}[state]}
            if state == "working":
                data |= {"wuid": f"{self.fake.phone}@s.whatsapp.net", "profileName": "Acme"}
            self.post("connection.update", data, at)

    def channel(self) -> dict[str, Any]:
        return _ok(self.api.get(f"/v1/channels/{self.id}"))

    def participants(self, jid: str, action: str, phones: list[str], at: int) -> None:
        if self.kind == "waha":
            self.post("group.v2.participants", self.fake.group_participants(jid, action, phones), at)
        else:
            verb = {"join": "add", "leave": "remove"}[action]
            self.post("group-participants.update", self.fake.group_participants(jid, verb, phones), at)

    def chat_label(self, name: str, attach: bool, at: int) -> None:
        if self.kind == "waha":
            labels = self.fake.sessions[self.id].labels
            labels.setdefault("5", {"id": "5", "name": name, "color": 5, "colorHex": "#55ccb3"})
            event = "label.chat.added" if attach else "label.chat.deleted"
            self.post(event, {"labelId": "5", "label": labels["5"], "chatId": f"{ADA}@c.us"}, at)
        else:
            self.fake.instances[self.id].labels.setdefault("5", {"id": "5", "name": name, "color": 5})
            data = {"instance": self.id, "type": "add" if attach else "remove", "chatId": f"{ADA}@s.whatsapp.net",
                    "labelId": "5"}  # fmt: skip
            self.post("labels.association", data, at)

    def phone_label(self, name: str, at: int, *, deleted: bool = False) -> None:
        if deleted:
            payload = self.fake.phone_label_deleted(self.id, "9")
        else:
            payload = self.fake.phone_label(self.id, name, 1, "9")
        if self.kind == "waha":
            self.post("label.deleted" if deleted else "label.upsert", payload, at)
        else:
            self.post("labels.edit", payload, at)


@pytest.fixture(params=["waha", "evolution"])
def engine(request: pytest.FixtureRequest, api: Api) -> Iterator[Engine]:
    fake_class = FakeWaha if request.param == "waha" else FakeEvolution
    with fake_class(api_key="k") as fake:
        yield Engine(api, request.param, fake)


def _now() -> int:
    return int(time.time() * 1000)


def test_an_older_pairing_state_after_working_leaves_the_channel_connected(engine: Engine):
    t = _now()
    engine.fake.link(engine.id)
    engine.session("working", t)  # the phone scanned the QR code
    assert engine.channel()["status"] == "connected"
    engine.session("pairing", t - 40)  # the engine's earlier SCAN_QR_CODE, posted a few ms apart, lands last
    channel = engine.channel()
    assert channel["status"] == "connected" and channel["last_error"] is None
    engine.session("pairing", t + 1000)  # a genuinely newer state still moves it
    assert engine.channel()["status"] == "pairing"


def test_a_confirmation_of_the_current_state_is_remembered(engine: Engine):
    """WORKING twice (the second newer) then an older SCAN_QR_CODE that is newer than the first: still connected."""
    t = _now()
    engine.fake.link(engine.id)
    engine.session("working", t)
    engine.session("working", t + 500)  # changes nothing but the time that confirms the state
    engine.session("pairing", t + 100)
    assert engine.channel()["status"] == "connected"


def test_group_events_out_of_order_keep_the_latest(api: Api, engine: Engine):
    engine.fake.link(engine.id)
    engine.session("working", _now())
    if engine.kind == "evolution":
        engine.fake.numbers_on_whatsapp = None
    group = _ok(api.post("/v1/groups", json={"channel_id": engine.id, "name": "Team", "participants": [ADA]}), 201)
    t = _now()
    engine.participants(group["jid"], "leave", [ADA], t + 200)  # Ada left…
    engine.participants(group["jid"], "join", [ADA], t + 100)  # …after the join that lands last
    engine.participants(group["jid"], "join", [BOB], t + 300)
    engine.participants(group["jid"], "leave", [BOB], t + 250)
    stored = _ok(api.get(f"/v1/groups/{group['id']}"))
    assert {p["phone"] for p in stored["participants"]} == {BOB}


def test_waha_group_info_updates_out_of_order_keep_the_latest(api: Api):
    with FakeWaha(api_key="k") as fake:
        engine = Engine(api, "waha", fake)
        fake.link(engine.id)
        engine.session("working", _now())
        group = _ok(api.post("/v1/groups", json={"channel_id": engine.id, "name": "Team", "participants": [ADA]}), 201)
        t = _now()
        engine.post("group.v2.update", {"group": {"id": group["jid"], "subject": "Newest"}, "_data": {}}, t + 20)
        engine.post("group.v2.update", {"group": {"id": group["jid"], "subject": "Older"}, "_data": {}}, t + 10)
        assert _ok(api.get(f"/v1/groups/{group['id']}"))["name"] == "Newest"


def test_chat_label_events_out_of_order_keep_the_latest(api: Api, engine: Engine):
    engine.fake.link(engine.id)
    engine.session("working", _now())
    inbound = engine.fake.inbound(engine.id, ADA, "hello")
    engine.post("message" if engine.kind == "waha" else "messages.upsert", inbound, _now())
    [conv] = _ok(api.get("/v1/conversations"))
    ours = _ok(api.post("/v1/labels", json={"name": "Paid", "color": "#55ccb3"}), 201)
    t = _now()
    engine.chat_label("Paid", True, t + 100)
    engine.chat_label("Paid", False, t + 300)  # removed on the phone…
    engine.chat_label("Paid", True, t + 200)  # …after an add that lands last
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == []
    engine.chat_label("Paid", False, t + 500)  # already off: only its time is kept
    engine.chat_label("Paid", True, t + 400)
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == []
    engine.chat_label("Paid", True, t + 600)
    assert _ok(api.get(f"/v1/conversations/{conv['id']}"))["labels"] == [ours["id"]]


def test_a_label_deleted_on_the_phone_stays_deleted_after_an_older_upsert(api: Api, engine: Engine):
    engine.fake.link(engine.id)
    engine.session("working", _now())
    t = _now()
    engine.phone_label("Phone made", t + 100)
    assert [x["name"] for x in _ok(api.get("/v1/labels"))] == ["Phone made"]
    engine.phone_label("Phone made", t + 300, deleted=True)
    assert _ok(api.get("/v1/labels")) == []
    engine.phone_label("Renamed before the delete", t + 200)  # a late, older rename
    assert _ok(api.get("/v1/labels")) == []
