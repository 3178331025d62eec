"""Message templates through the API: CRUD, the status table, submit / sync with the sandbox reviewer, the
library, `template.status_update` events, and template messages checked against approved templates."""

from __future__ import annotations

import pytest

from switchboard.config import reset_settings
from switchboard.events.outbox import stored_events
from switchboard.store import get_store
from tests.integration.support import Api

BODY = [{"type": "BODY", "text": "Hi {{1}}, your order {{2}} shipped."}]


@pytest.fixture
def channel(api: Api) -> dict:
    ch = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"})
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


@pytest.fixture
def instant_review(monkeypatch):
    """The sandbox reviews templates at once (SANDBOX_STATUS_DELAY=0)."""
    monkeypatch.setenv("SANDBOX_STATUS_DELAY", "0")
    reset_settings()
    yield
    reset_settings()


def _events(api: Api) -> list[dict]:
    rows = stored_events(get_store(), api.org_id)
    return [e["payload"] for e in rows if e["event_type"] == "template.status_update"]


def _create(api: Api, channel: dict, name: str = "order_shipped", **extra) -> dict:
    body = {"channel_id": channel["id"], "name": name, "category": "UTILITY", "language": "en_US", "components": BODY}
    resp = api.post("/v1/templates", json={**body, **extra})
    assert resp.status_code == 201, resp.text
    return resp.json()["data"]


def _admin_only(api: Api) -> dict[str, str]:
    resp = api.post("/v1/api-keys", json={"name": "member", "role": "member"})
    assert resp.status_code == 201, resp.text
    return {"X-Api-Key": resp.json()["data"]["key"]}


def test_template_crud_validation_and_roles(api: Api, channel: dict):
    tpl = _create(api, channel)
    assert tpl["status"] == "draft" and tpl["id"].startswith("tpl_") and tpl["parameters"] == {"BODY": 2}
    assert tpl["components"] == BODY and tpl["provider_template_id"] is None
    api.assert_error(
        api.post(
            "/v1/templates",
            json={"channel_id": channel["id"], "name": "order_shipped", "category": "UTILITY", "components": BODY},
        ),
        409,
        "conflict",
    )
    assert _create(api, channel, language="pt_BR")["language"] == "pt_BR"  # same name, other language
    bad = {"channel_id": channel["id"], "name": "x", "category": "UTILITY", "components": BODY}
    for change, field in [
        ({"name": "Has Spaces"}, "name"),
        ({"category": "PROMO"}, "category"),
        ({"language": "english"}, "language"),
        ({"components": []}, "components"),
        ({"components": [{"type": "FOOTER", "text": "bye"}]}, "components"),
        ({"components": [{"type": "BODY", "text": "Hi {{2}}"}]}, "gap"),
        ({"components": [{"type": "BODY", "text": "a"}, {"type": "BODY", "text": "b"}]}, "two bodies"),
        ({"components": [*BODY, {"type": "FOOTER", "text": "{{1}}"}]}, "footer param"),
        (
            {
                "components": [
                    {"type": "BODY", "text": "a", "buttons": [{"type": "URL", "text": "x", "url": "http://a"}]}
                ]
            },
            "url",
        ),
    ]:
        api.assert_error(api.post("/v1/templates", json={**bad, **change}), 400, "validation_failed"), field
    api.assert_error(api.post("/v1/templates", json={**bad, "channel_id": "ch_nope"}), 404, "not_found")

    listed = api.get("/v1/templates", params={"limit": 1}).json()
    assert len(listed["data"]) == 1 and listed["meta"]["has_more"] is True
    assert [
        t["id"] for t in api.get("/v1/templates", params={"name": "order_shipped", "status": "draft"}).json()["data"]
    ] != []
    assert api.get("/v1/templates", params={"status": "approved"}).json()["data"] == []
    api.assert_error(api.get("/v1/templates", params={"status": "weird"}), 400, "validation_failed")

    edited = api.patch(
        f"/v1/templates/{tpl['id']}",
        json={"name": "order_sent", "components": [{"type": "BODY", "text": "Hi {{1}}"}]},
    ).json()["data"]
    assert edited["name"] == "order_sent" and edited["parameters"] == {"BODY": 1}
    assert _create(api, channel)["name"] == "order_shipped"  # the old name is free again
    assert api.get(f"/v1/templates/{tpl['id']}").json()["data"]["name"] == "order_sent"

    member = _admin_only(api)
    assert api.get(f"/v1/templates/{tpl['id']}", headers=member).status_code == 200
    api.assert_error(api.post(f"/v1/templates/{tpl['id']}/submit", headers=member), 403, "forbidden")
    api.assert_error(api.delete(f"/v1/templates/{tpl['id']}", headers=member), 403, "forbidden")

    copy = api.post(f"/v1/templates/{tpl['id']}/duplicate")
    assert copy.status_code == 201, copy.text
    assert copy.json()["data"]["name"] == "order_sent_copy" and copy.json()["data"]["status"] == "draft"
    api.assert_error(api.post(f"/v1/templates/{tpl['id']}/duplicate"), 409, "conflict")
    named = api.post(f"/v1/templates/{tpl['id']}/duplicate", json={"name": "order_sent_v2"}).json()["data"]
    assert named["components"] == edited["components"] and named["id"] != tpl["id"]

    assert api.delete(f"/v1/templates/{tpl['id']}").status_code == 204
    api.assert_error(api.get(f"/v1/templates/{tpl['id']}"), 404, "not_found")
    api.assert_error(api.post(f"/v1/templates/{tpl['id']}/submit"), 404, "not_found")
    _, session = api.new_org("tpl-other@example.com")
    api.assert_error(api.get(f"/v1/templates/{named['id']}", headers=session), 404, "not_found")


def test_submit_and_sync_with_the_sandbox_reviewer(api: Api, channel: dict, monkeypatch):
    monkeypatch.setenv("SANDBOX_STATUS_DELAY", "3600")  # nothing is decided until the clock moves
    reset_settings()
    good, bad = _create(api, channel), _create(api, channel, name="reject_me")
    submitted = api.post(f"/v1/templates/{good['id']}/submit")
    assert submitted.status_code == 200, submitted.text
    data = submitted.json()["data"]
    assert data["status"] == "pending" and data["provider_template_id"].startswith("sbxtpl_") and data["submitted_at"]
    api.post(f"/v1/templates/{bad['id']}/submit")
    api.assert_error(api.post(f"/v1/templates/{good['id']}/submit"), 409, "conflict")
    api.assert_error(api.patch(f"/v1/templates/{good['id']}", json={"name": "x_y"}), 409, "conflict")
    still = api.post("/v1/templates/sync").json()["data"]
    assert still == {"channels": [channel["id"]], "checked": 2, "changed": [], "unsupported_channels": []}

    monkeypatch.setenv("SANDBOX_STATUS_DELAY", "0")
    reset_settings()
    synced = api.post("/v1/templates/sync", json={"channel_id": channel["id"]})
    assert synced.status_code == 200, synced.text
    changes = {c["template_id"]: c for c in synced.json()["data"]["changed"]}
    assert changes[good["id"]]["status"] == "approved" and changes[bad["id"]]["status"] == "rejected"
    rejected = api.get(f"/v1/templates/{bad['id']}").json()["data"]
    assert rejected["status"] == "rejected" and rejected["rejection_reason"] == "INVALID_FORMAT"
    assert api.post("/v1/templates/sync").json()["data"]["changed"] == []  # nothing new, no event
    events = _events(api)
    assert sorted((e["template_id"], e["previous_status"], e["status"]) for e in events) == sorted(
        [
            (good["id"], "draft", "pending"),
            (bad["id"], "draft", "pending"),
            (good["id"], "pending", "approved"),
            (bad["id"], "pending", "rejected"),
        ]
    )
    assert {e["status"] for e in events} == {"pending", "approved", "rejected"}
    assert next(e for e in events if e["status"] == "rejected")["reason"] == "INVALID_FORMAT"

    # a rejected template is edited (back to draft) and submitted again
    fixed = api.patch(f"/v1/templates/{bad['id']}", json={"components": [{"type": "BODY", "text": "Hello"}]})
    assert fixed.json()["data"]["status"] == "draft" and fixed.json()["data"]["rejection_reason"] is None
    api.assert_error(api.post("/v1/templates/sync", json={"channel_id": "ch_nope"}), 404, "not_found")


def test_submit_decides_at_once_without_delay_and_reports_category_changes(api: Api, channel: dict, instant_review):
    promo = _create(api, channel, name="promo_deal")
    done = api.post(f"/v1/templates/{promo['id']}/submit").json()["data"]
    assert done["status"] == "approved" and done["category"] == "MARKETING"
    events = [e for e in _events(api) if e["template_id"] == promo["id"]]
    assert [e["status"] for e in events] == ["pending", "approved"]
    assert events[1]["category"] == "MARKETING" and "category" not in events[0]
    api.assert_error(api.post(f"/v1/templates/{promo['id']}/submit"), 409, "conflict")
    api.assert_error(api.patch(f"/v1/templates/{promo['id']}", json={"category": "UTILITY"}), 409, "conflict")


def test_transition_table():
    from switchboard.catalog.templates import TRANSITIONS

    assert set(TRANSITIONS) == {"draft", "pending", "approved", "rejected", "paused", "disabled"}
    assert TRANSITIONS["disabled"] == frozenset()
    assert "approved" not in TRANSITIONS["draft"] and "pending" in TRANSITIONS["rejected"]


def test_library_list_get_and_import(api: Api, channel: dict, instant_review):
    items = api.get("/v1/templates/library").json()
    assert items["meta"]["total"] == len(items["data"]) >= 5
    assert {i["category"] for i in items["data"]} == {"MARKETING", "UTILITY", "AUTHENTICATION"}
    auth = api.get("/v1/templates/library", params={"category": "AUTHENTICATION"}).json()["data"]
    assert [i["id"] for i in auth] == ["lib_verification_code"]
    item = api.get("/v1/templates/library/lib_order_confirmation").json()["data"]
    assert item["name"] == "order_confirmation"
    api.assert_error(api.get("/v1/templates/library/lib_nope"), 404, "not_found")
    imported = api.post("/v1/templates/library/lib_order_confirmation", json={"channel_id": channel["id"]})
    assert imported.status_code == 201, imported.text
    tpl = imported.json()["data"]
    assert tpl["status"] == "draft" and tpl["library_item_id"] == "lib_order_confirmation"
    assert tpl["parameters"] == {"HEADER": 0, "BODY": 3}
    api.assert_error(
        api.post("/v1/templates/library/lib_order_confirmation", json={"channel_id": channel["id"]}), 409, "conflict"
    )
    api.assert_error(api.post("/v1/templates/library/lib_nope", json={"channel_id": channel["id"]}), 404, "not_found")
    api.assert_error(api.post("/v1/templates/library/lib_order_confirmation", json={}), 400, "validation_failed")
    for row in items["data"]:  # every library item is a valid template here
        resp = api.post(
            f"/v1/templates/library/{row['id']}", json={"channel_id": channel["id"], "name": f"x_{row['name']}"}
        )
        assert resp.status_code == 201, (row["id"], resp.text)


def test_template_messages_need_an_approved_template_and_its_parameters(api: Api, channel: dict, instant_review):
    tpl = _create(api, channel)

    def send(**template):
        body = {"channel_id": channel["id"], "to": "+14155552671", "type": "template", "template": template}
        return api.post("/v1/messages", json=body)

    params = [{"type": "body", "parameters": [{"type": "text", "text": "Ana"}, {"type": "text", "text": "#1"}]}]
    api.assert_error(send(name="unknown_one", components=params), 400, "validation_failed")
    api.assert_error(send(name="order_shipped", components=params), 409, "conflict")  # still a draft
    api.post(f"/v1/templates/{tpl['id']}/submit")
    assert send(name="order_shipped", components=params).status_code == 202
    api.assert_error(send(name="order_shipped", components=params[:0]), 400, "validation_failed")
    one = [{"type": "body", "parameters": [{"type": "text", "text": "Ana"}]}]
    api.assert_error(send(name="order_shipped", components=one), 400, "validation_failed")
    empty = [{"type": "body", "parameters": [{"type": "text", "text": ""}, {"type": "text", "text": "x"}]}]
    api.assert_error(send(name="order_shipped", components=empty), 400, "validation_failed")
    api.assert_error(send(name="order_shipped", language="pt_BR", components=params), 400, "validation_failed")


def test_list_filters_take_only_the_documented_statuses_and_categories(api: Api, channel: dict) -> None:
    """`status` and `category` are enums in the document; the server refuses anything else with 400."""
    _create(api, channel)
    ok = api.get("/v1/templates", params={"status": "draft", "category": "UTILITY"})
    assert ok.status_code == 200, ok.text
    assert [t["name"] for t in ok.json()["data"]] == ["order_shipped"]
    for params in ({"status": "live"}, {"category": "utility"}, {"status": "DRAFT"}):
        bad = api.get("/v1/templates", params=params)
        assert bad.status_code == 400, (params, bad.text)
        assert bad.json()["error"]["code"] == "validation_failed"
