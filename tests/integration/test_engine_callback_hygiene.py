"""A linked-device engine's signed callback is held to the API's own rules for bodies (on WAHA and on Evolution API,
against the fakes): a key given twice, a NUL character (escaped or raw) or nesting beyond the depth limit is a 400,
stores nothing and is never a 500; the same callback well formed is then accepted."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.jsonbody import MAX_DEPTH
from tests.fakes.evolution import FakeEvolution
from tests.fakes.waha import FakeWaha
from tests.integration.support import Api

ADA = "4915112345671"


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

    def message_json(self, text: str) -> str:
        """The engine's body for a customer's message, as JSON text (to be edited before it is signed)."""
        event = "message" if self.kind == "waha" else "messages.upsert"
        body, _ = self.fake.webhook(self.id, event, self.fake.inbound(self.id, ADA, text))
        return body.decode()

    def post_signed(self, raw: bytes) -> Any:
        """Post `raw` with the engine's valid signature for it."""
        if self.kind == "waha":
            key = self.fake.sessions[self.id].config["webhooks"][0]["hmac"]["key"]
            headers = {"Content-Type": "application/json", "X-Webhook-Hmac-Algorithm": "sha512",
                       "X-Webhook-Hmac": hmac.new(key.encode(), raw, hashlib.sha512).hexdigest()}  # fmt: skip
        else:  # Evolution's JWT does not cover the body: a fresh token of the instance's key
            _, headers = self.fake.webhook(self.id, "messages.upsert", {})
        return self.api.post(f"/v1/providers/{self.id}/callback", content=raw, headers=headers)

    def stored(self) -> int:
        return len(_ok(self.api.get("/v1/conversations")))


@pytest.fixture(params=["waha", "evolution"])
def engine(request: pytest.FixtureRequest, api: Api) -> Iterator[Engine]:
    fake_class = FakeWaha if request.param == "waha" else FakeEvolution
    with fake_class(api_key="k") as fake:
        yield Engine(api, request.param, fake)


def _refused(engine: Engine, raw: bytes, code: str = "validation_failed") -> dict[str, Any]:
    response = engine.post_signed(raw)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert engine.stored() == 0
    return error


def test_a_key_given_twice_is_refused(engine: Engine):
    text = engine.message_json("hello")
    doubled = text.replace('"event": ', '"event": "label.deleted", "event": ', 1)
    assert json.loads(doubled)["event"] != "label.deleted"  # plain JSON would read the last one silently
    error = _refused(engine, doubled.encode())
    assert "more than once" in error["message"] and error["details"][0]["field"] == "body"
    nested = text.replace('"hello"', '"hello", "x": 1, "x": 2', 1)
    error = _refused(engine, nested.encode())
    assert error["details"][0]["field"].startswith("body.") and "'x'" in error["message"]
    assert engine.post_signed(text.encode()).status_code == 200
    assert engine.stored() == 1


@pytest.mark.parametrize("where", ["value", "key"])
def test_an_escaped_nul_character_is_refused(engine: Engine, where: str):
    text = engine.message_json("hello")
    bad = text.replace('"hello"', '"hel\\u0000lo"') if where == "value" else text.replace('"event"', '"ev\\u0000ent"')
    error = _refused(engine, bad.encode())
    assert "NUL" in error["message"]


def test_a_raw_nul_byte_is_refused(engine: Engine):
    text = engine.message_json("hello")
    _refused(engine, text.replace("hello", "hel\x00lo").encode())


def test_nesting_beyond_the_depth_limit_is_refused(engine: Engine):
    text = engine.message_json("hello")
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    _refused(engine, text.replace('"hello"', f'"hello", "deep": {deep}', 1).encode(), "invalid_json")
    ok = "[" * (MAX_DEPTH - 10) + "]" * (MAX_DEPTH - 10)
    assert engine.post_signed(text.replace('"hello"', f'"hello", "deep": {ok}', 1).encode()).status_code == 200
