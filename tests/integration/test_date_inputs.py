"""Date-time inputs are read as real date-times at the edge, and no stored date can make a read fail.

Every request field and query parameter carrying a date-time is `format: date-time` in the document and is read as
RFC 3339 (a calendar date that exists, a time, an offset): anything else is 400 `validation_failed` naming the field,
before anything is stored. What a request stored is the API's own form (UTC, milliseconds, `Z`). A date stored
before that rule (written here straight to the table) is read as absent and logged, never a 500."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from switchboard.contacts import repository as contacts_repo
from switchboard.messaging import conversations, messages
from switchboard.store import get_store
from tests.integration.support import Api

IMPOSSIBLE = "2027-13-45T00:00:00Z"
DOCUMENT = Path(__file__).parents[2] / "layers" / "core" / "switchboard" / "openapi.json"


@pytest.fixture
def channel(api: Api) -> dict:
    made = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"})
    assert made.status_code == 201, made.text
    return api.post(f"/v1/channels/{made.json()['data']['id']}/connect").json()["data"]


def _contact(api: Api, phone: str = "+14155552671") -> dict:
    made = api.post("/v1/contacts", json={"name": "Ada", "phone": phone})
    assert made.status_code in (200, 201), made.text
    return made.json()["data"]


def _field(resp) -> str:
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "validation_failed"
    return error["details"][0]["field"]


def test_the_issues_impossible_suppression_date_is_refused_and_nothing_is_stored(api: Api):
    ada = _contact(api)
    body = {"channel": "whatsapp", "reason": "x", "expires_at": IMPOSSIBLE}
    resp = api.post(f"/v1/contacts/{ada['id']}/suppressions", json=body)
    assert _field(resp) == "body.expires_at"
    assert "RFC 3339" in resp.json()["error"]["details"][0]["message"]
    listed = api.get(f"/v1/contacts/{ada['id']}/suppressions")
    assert listed.status_code == 200 and listed.json()["data"] == []


# (method, path, body or None, query or None, the field the 400 names); `{ct}` is a contact of the organization, the
# other ids need not exist: the request is refused before anything is looked up.
CASES = [
    ("POST", "/v1/contacts/{ct}/suppressions", {"channel": "sms", "reason": "x", "expires_at": "{t}"}, None,
     "body.expires_at"),
    ("PUT", "/v1/contacts/{ct}/consent/sms", {"status": "opted_in", "captured_at": "{t}"}, None, "body.captured_at"),
    ("POST", "/v1/cdp/events", {"events": [{"name": "x", "contact_id": "{ct}", "timestamp": "{t}"}]}, None,
     "body.events.0.timestamp"),
    ("POST", "/v1/conversations/cv_none/mute", {"until": "{t}"}, None, "body.until"),
    ("POST", "/v1/chats/mute", {"channel_id": "ch_none", "chat_id": "14155552671", "until": "{t}"}, None,
     "body.until"),
    ("POST", "/v1/settings/billing/invoices/inv_none/pay", {"reference_id": "r", "paid_at": "{t}"}, None,
     "body.paid_at"),
    ("POST", "/v1/settings/developer/webhooks/endpoints/whe_none/recover", {"since": "{t}"}, None, "body.since"),
    ("POST", "/v1/auth/fingerprint-events", {"telemetry_id": "fp", "event_type": "x", "occurred_at": "{t}"}, None,
     "body.occurred_at"),
    ("GET", "/v1/audit-logs", None, {"since": "{t}"}, "query.since"),
    ("GET", "/v1/audit-logs", None, {"until": "{t}"}, "query.until"),
    ("GET", "/v1/cdp/activity-log", None, {"since": "{t}"}, "query.since"),
    ("GET", "/v1/cdp/activity-log", None, {"until": "{t}"}, "query.until"),
    ("GET", "/v1/cdp/lifecycle-stages/metrics", None, {"since": "{t}"}, "query.since"),
    ("GET", "/v1/cdp/lifecycle-stages/metrics", None, {"until": "{t}"}, "query.until"),
    ("GET", "/v1/contacts", None, {"updated_since": "{t}"}, "query.updated_since"),
    ("GET", "/v1/settings/developer/webhooks/deliveries", None, {"since": "{t}"}, "query.since"),
]  # fmt: skip


def _fill(value, ct: str, t: str):
    return json.loads(json.dumps(value).replace("{ct}", ct).replace("{t}", t)) if value is not None else None


@pytest.mark.parametrize(
    "bad",
    [
        IMPOSSIBLE,  # no 13th month
        "2026-02-29T10:00:00Z",  # not a leap year
        "2026-11-21T25:00:00Z",  # no 25th hour
        "2026-11-21T10:00:00",  # no offset
        "2026-11-21",  # no time
        "2026-11-21 10:00:00Z",  # a space for the T
        "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
    ],
)
def test_every_date_time_input_refuses_what_is_no_real_date_time(api: Api, bad: str):
    ct = _contact(api)["id"]
    for method, path, body, query, field in CASES:
        resp = api.request(method, path.replace("{ct}", ct), json=_fill(body, ct, bad), params=_fill(query, ct, bad))
        assert _field(resp) == field, (method, path, bad)


def test_the_document_says_date_time_for_every_date_time_input():
    """Each request body property and query parameter named like a time (`*_at`, `since`, `until`, `timestamp`) is
    `format: date-time`: a date field that is only a pattern, or only a string, fails here."""
    doc = json.loads(DOCUMENT.read_text())
    schemas = doc["components"]["schemas"]
    timely = ("since", "until", "timestamp", "updated_since")
    # Meta's embedded signup posts its own `timestamp` (a string or epoch seconds): relayed, never read as a time
    relayed = {("SignupEventData", "timestamp")}

    def date_time(node: dict) -> bool:
        return node.get("format") == "date-time" or any(date_time(b) for b in node.get("anyOf", []))

    def refs(node, found: set[str]) -> set[str]:
        if isinstance(node, dict):
            if "$ref" in node:
                found.add(node["$ref"].rsplit("/", 1)[1])
            for value in node.values():
                refs(value, found)
        elif isinstance(node, list):
            for value in node:
                refs(value, found)
        return found

    bodies: set[str] = set()
    missing = []
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            for param in op.get("parameters", []):
                if param.get("in") == "query" and param["name"] in timely and not date_time(param["schema"]):
                    missing.append(f"{method.upper()} {path} ?{param['name']}")
            refs(op.get("requestBody", {}), bodies)
    seen: set[str] = set()
    while bodies - seen:
        name = (bodies - seen).pop()
        seen.add(name)
        refs(schemas[name], bodies)
        for prop, node in schemas[name].get("properties", {}).items():
            if (prop.endswith("_at") or prop in timely) and (name, prop) not in relayed and not date_time(node):
                missing.append(f"{name}.{prop}")
    assert missing == []
    assert len(seen) > 100  # the walk reached the request schemas


def test_a_date_time_with_an_offset_is_stored_in_utc(api: Api):
    ada = _contact(api)
    body = {"channel": "sms", "reason": "x", "expires_at": "2999-01-01T01:30:00.123456789+01:30"}
    made = api.post(f"/v1/contacts/{ada['id']}/suppressions", json=body)
    assert made.status_code == 201, made.text
    assert made.json()["data"]["expires_at"] == "2999-01-01T00:00:00.123Z"
    consent = api.put(
        f"/v1/contacts/{ada['id']}/consent/sms", json={"status": "opted_in", "captured_at": "2026-11-21t10:00:00z"}
    )
    assert consent.json()["data"]["captured_at"] == "2026-11-21T10:00:00.000Z"
    # `updated_since` compares with stored `updated_at` text: an offset is read as the moment it names
    since = api.get("/v1/contacts", params={"updated_since": "2999-01-01T00:00:00+14:00"})
    assert since.status_code == 200 and since.json()["data"] == []


def test_time_windows_before_1970_or_far_ahead_answer_not_fail(api: Api):
    """A ULID (the key of every log) starts in 1970: a window reaching before it reads from the start."""
    ct = _contact(api)["id"]
    for path in ("/v1/audit-logs", "/v1/cdp/activity-log", "/v1/cdp/lifecycle-stages/metrics"):
        for window in (
            {"since": "1900-01-01T00:00:00Z"},
            {"until": "1969-12-31T00:00:00Z"},
            {"since": "0001-01-01T00:00:00Z", "until": "9999-12-31T23:59:59Z"},
            {"since": "9999-12-31T00:00:00Z", "until": "9999-12-31T23:59:59Z"},
        ):
            resp = api.get(path, params=window)
            assert resp.status_code == 200, (path, window, resp.text)
    assert api.patch("/v1/organization", json={"name": "Renamed"}).status_code == 200  # audited
    logged = api.get("/v1/audit-logs", params={"since": "1900-01-01T00:00:00Z"}).json()["data"]
    assert "organization.updated" in [e["action"] for e in logged]
    old = api.post(
        "/v1/cdp/events", json={"events": [{"name": "x", "contact_id": ct, "timestamp": "1960-01-01T00:00:00Z"}]}
    )
    assert old.status_code == 200, old.text
    (result,) = old.json()["data"]["results"]
    assert result["status"] == "rejected" and result["error"]["details"][0]["field"] == "body.events[0].timestamp"


def test_a_stored_impossible_suppression_date_never_fails_a_read_or_a_send(api: Api, channel: dict, caplog):
    """The state the issue left behind (an item stored before the rule): the list answers, the suppression holds
    (its end is unknown), and a send to the contact is refused as suppressed, not a 500."""
    ada = _contact(api)
    store = get_store()
    store.put(
        {
            **contacts_repo.child_key(api.org_id, ada["id"], "SUPP", "whatsapp"),
            "entity": "ContactSuppression",
            "channel": "whatsapp",
            "reason": "x",
            "expires_at": IMPOSSIBLE,
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
        }
    )
    with caplog.at_level(logging.WARNING, logger="switchboard"):
        listed = api.get(f"/v1/contacts/{ada['id']}/suppressions")
    assert listed.status_code == 200, listed.text
    (row,) = listed.json()["data"]
    assert (row["active"], row["expires_at"]) == (True, None)
    assert any(IMPOSSIBLE in r.getMessage() for r in caplog.records)
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+14155552671", "text": {"body": "hi"}})
    api.assert_error(sent, 409, "recipient_suppressed")
    by_id = api.post("/v1/messages", json={"channel_id": channel["id"], "contact_id": ada["id"], "text": {"body": "x"}})
    api.assert_error(by_id, 409, "recipient_suppressed")
    # a new suppression replaces it with a readable end
    fixed = {"channel": "whatsapp", "reason": "x", "expires_at": "2000-01-01T00:00:00Z"}
    assert api.post(f"/v1/contacts/{ada['id']}/suppressions", json=fixed).json()["data"]["active"] is False
    again = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+14155552671", "text": {"body": "hi"}})
    assert again.status_code == 202, again.text


def test_a_stored_impossible_mute_end_reads_as_muted_until_unmuted(api: Api, channel: dict):
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+14155552671", "text": {"body": "hi"}})
    store = get_store()
    conv_id = messages.get_item(store, api.org_id, sent.json()["data"]["id"])["conversation_id"]
    api.post(f"/v1/conversations/{conv_id}/mute", json={"until": "2999-01-01T00:00:00Z"})
    item = conversations.get_item(store, api.org_id, conv_id, consistent=True)
    store.put({**item, "muted_until": IMPOSSIBLE})
    read = api.get(f"/v1/conversations/{conv_id}")
    assert read.status_code == 200, read.text
    assert (read.json()["data"]["muted"], read.json()["data"]["muted_until"]) == (True, None)
    assert api.get("/v1/conversations").status_code == 200
