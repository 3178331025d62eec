"""Input hardening (issue 19, findings 10, 13, 14): numbers DynamoDB cannot store, duplicate JSON keys, control and
bidirectional formatting characters in names, the media id's shape and who may trigger a media download."""

from __future__ import annotations

import json

import pytest

from tests.integration.support import Api

FIFTY_DIGITS = "1" * 50
UNSTORABLE = ["1e300", "1e-300", FIFTY_DIGITS, "-1e300", f"0.{FIFTY_DIGITS}"]


def _with_number(body: dict, number: str) -> str:
    """`body` as JSON text with the number written as given (json.dumps would rewrite it)."""
    return json.dumps(body).replace('"NUMBER"', number)


def _raw(api: Api, method: str, path: str, text: str, headers: dict[str, str] | None = None):
    sent = {**(headers or api.owner_headers), "Content-Type": "application/json"}
    return api.request(method, path, content=text.encode(), headers=sent)


@pytest.fixture
def channel(api: Api) -> dict:
    ch = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"})
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


# Finding 10: numbers ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("number", UNSTORABLE)
def test_unstorable_numbers_in_preferences_are_refused(api: Api, number: str):
    _, session = api.new_org("prefs@example.com")
    text = _with_number({"preferences": {"zoom": "NUMBER"}}, number)
    error = api.assert_error(_raw(api, "PUT", "/v1/auth/me/preferences", text, session), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.preferences.zoom", error


@pytest.mark.parametrize("number", UNSTORABLE)
def test_unstorable_numbers_in_segment_rules_are_refused(api: Api, number: str):
    text = _with_number({"name": "Big", "rules": {"field": "attributes.score", "op": "gt", "value": "NUMBER"}}, number)
    api.assert_error(_raw(api, "POST", "/v1/cdp/segments", text), 400, "validation_failed")


@pytest.mark.parametrize("number", UNSTORABLE)
def test_unstorable_numbers_in_message_locations_are_refused(api: Api, channel: dict, number: str):
    body = {"channel_id": channel["id"], "to": "+14155550134", "type": "location"}
    text = _with_number({**body, "location": {"latitude": "NUMBER", "longitude": 1}}, number)
    error = api.assert_error(_raw(api, "POST", "/v1/messages", text), 400, "validation_failed")
    assert error["details"][0]["field"].startswith("body"), error


def test_storable_numbers_still_pass(api: Api, channel: dict):
    body = {"channel_id": channel["id"], "to": "+14155550134", "type": "location"}
    text = _with_number({**body, "location": {"latitude": "NUMBER", "longitude": 12.345678901234567}}, "1e-100")
    sent = _raw(api, "POST", "/v1/messages", text)
    assert sent.status_code == 202, sent.text
    for number in ("9.99e125", "9" * 38, "-1e-130", "0"):
        rules = {"name": "Big", "rules": {"field": "attributes.score", "op": "gt", "value": "NUMBER"}}
        assert _raw(api, "POST", "/v1/cdp/segments", _with_number(rules, number)).status_code == 201, number


# Finding 13: duplicate keys -------------------------------------------------------------------------------------------
def test_a_duplicate_key_is_refused_not_last_wins(api: Api):
    text = '{"name": "escalate", "role": "viewer", "role": "owner"}'
    error = api.assert_error(_raw(api, "POST", "/v1/api-keys", text), 400, "validation_failed")
    assert "role" in error["message"], error
    keys = api.get("/v1/api-keys").json()["data"]
    assert all(k["name"] != "escalate" for k in keys)


def test_a_duplicate_key_deep_inside_a_body_is_refused(api: Api):
    text = '{"name": "Ada", "attributes": {"plan": "free", "plan": "pro"}}'
    error = api.assert_error(_raw(api, "POST", "/v1/contacts", text), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.attributes", error
    nested = '{"identifiers": [{"type": "phone", "value": "+14155550101", "type": "email"}]}'
    api.assert_error(_raw(api, "POST", "/v1/contacts/resolve", nested), 400, "validation_failed")


def test_the_same_key_in_sibling_objects_is_fine(api: Api):
    identities = [{"type": "email", "value": "a@x.io"}, {"type": "email", "value": "b@x.io"}]
    text = json.dumps({"name": "Ada", "identities": identities})
    assert _raw(api, "POST", "/v1/contacts", text).status_code == 201


# Finding 14: names, media ids, media download ------------------------------------------------------------------------
BAD_NAMES = ["Ada\x00Lovelace", "Ada\u202eecalevol", "Ada\u2066x\u2069", "Ada\x7f", "A\x85da", "Ada\nLovelace", "A\tB"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_every_control_character_kind_is_refused_in_a_contact_name(api: Api, name: str):
    error = api.assert_error(api.post("/v1/contacts", json={"name": name}), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.name", error


@pytest.mark.parametrize("name", ["Ada\x00Lovelace", "Ada\u202eecalevol"])
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/contacts", {"name": "NAME"}),
        ("POST", "/v1/contacts", {"first_name": "NAME"}),
        ("POST", "/v1/channels", {"name": "NAME", "platform": "sandbox"}),
        ("POST", "/v1/organizations", {"name": "NAME"}),
        ("PATCH", "/v1/organization", {"name": "NAME"}),
        ("POST", "/v1/teams", {"name": "NAME"}),
        ("POST", "/v1/labels", {"name": "NAME"}),
        ("POST", "/v1/contact-tags", {"name": "NAME"}),
        ("POST", "/v1/cdp/segments", {"name": "NAME", "rules": {"field": "name", "op": "exists"}}),
        ("POST", "/v1/cdp/templates", {"name": "NAME"}),
        ("POST", "/v1/api-keys", {"name": "NAME", "role": "viewer"}),
        ("PATCH", "/v1/auth/me", {"name": "NAME"}),
    ],
)
def test_control_and_bidi_characters_in_names_are_refused(api: Api, method: str, path: str, body: dict, name: str):
    sent = {k: name if v == "NAME" else v for k, v in body.items()}
    # A signed-in user's routes refuse an API key before reading the body: those are called with a session.
    headers = api.login("owner@example.com") if path in ("/v1/organizations", "/v1/auth/me") else None
    response = api.request(method, path, json=sent, headers=headers)
    error = api.assert_error(response, 400, "validation_failed")
    assert any(d["field"].startswith("body.") for d in error["details"]), error


def test_ordinary_names_still_pass(api: Api):
    for name in ("Ada Lovelace", "José Núñez-O'Brien", "محمد", "李小龍", "Zoë 🚀"):
        created = api.post("/v1/contacts", json={"name": name})
        assert created.status_code == 201, created.text
        assert created.json()["data"]["name"] == name


@pytest.mark.parametrize("media_id", ["m" * 257, "../../org_other/x", "a/b", "a b", "a?x=1", "%2e%2e"])
def test_media_ids_are_bounded_and_plain(api: Api, channel: dict, media_id: str):
    body = {"channel_id": channel["id"], "media_id": media_id, "message_id": "wamid.1", "message_payload": "{}"}
    error = api.assert_error(api.post("/v1/messages/media/download", json=body), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.media_id", error


def test_a_long_media_id_in_the_path_is_refused(api: Api, channel: dict):
    response = api.get(f"/v1/channels/{channel['id']}/media/{'m' * 257}")
    api.assert_error(response, 400, "validation_failed")


def test_a_viewer_cannot_trigger_a_media_download(api: Api, channel: dict):
    created = api.post("/v1/api-keys", json={"name": "reader", "role": "viewer"})
    assert created.status_code == 201, created.text
    viewer = {"X-Api-Key": created.json()["data"]["key"]}
    body = {"channel_id": channel["id"], "media_id": "m1", "message_id": "wamid.1", "message_payload": "{}"}
    api.assert_error(api.post("/v1/messages/media/download", json=body, headers=viewer), 403, "forbidden")
    api.assert_error(api.get(f"/v1/channels/{channel['id']}/media/m1", headers=viewer), 403, "forbidden")
    assert api.get(f"/v1/channels/{channel['id']}", headers=viewer).status_code == 200  # reads stay open
    assert api.post("/v1/messages/media/download", json=body).status_code == 200  # a member+ key may


@pytest.mark.parametrize(
    ("number", "storable"),
    [
        ("9.9999999999999999999999999999999999999e125", True),
        ("1e126", False),
        ("-9.99e125", True),
        ("1e-130", True),
        ("9.9e-131", False),
        ("0", True),
        ("0.0e-500", True),
        ("9" * 38, True),
        ("9" * 39, False),
        ("1" + "0" * 49, True),  # 1e49: one significant digit
        ("1." + "0" * 60, True),
        ("1e400", False),
    ],
)
def test_the_number_rule_at_its_bounds(number: str, storable: bool):
    from switchboard.api.jsonbody import BodyRefused, loads
    from switchboard.models import unstorable_number

    assert (unstorable_number(number) is None) is storable, unstorable_number(number)
    if storable:
        loads(f'{{"n": {number}}}')
    else:
        with pytest.raises(BodyRefused) as refused:
            loads(f'{{"a": [1, {{"n": {number}}}]}}')
        assert refused.value.field == "body.a.1.n"
