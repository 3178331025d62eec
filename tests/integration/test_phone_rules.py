"""Phone numbers are validated, not only parsed (issue 34, CONVENTIONS "Identifiers and data").

A number must be valid for its country (libphonenumber's `is_valid_number`); bare digits carry their country code;
a national form (parentheses, a trunk `0`, separators without `+`/`00`) is read in the organization's
`default_phone_region` and refused without one. Stored numbers that fail the rule are listed by the phone check job,
never rewritten."""

from __future__ import annotations

import pytest

from switchboard.contacts import erasure
from switchboard.messaging import messages
from switchboard.providers.base import InboundMessage
from switchboard.store import get_store
from tests.integration.support import Api, run_jobs

HINT = "international form, e.g. +14155552671"


@pytest.fixture
def channel(api: Api) -> dict:
    made = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"})
    assert made.status_code == 201, made.text
    return api.post(f"/v1/channels/{made.json()['data']['id']}/connect").json()["data"]


def _refused(resp, field: str) -> str:
    error = Api.assert_error(resp, 400, "validation_failed")
    (detail,) = error["details"]
    assert detail["field"].startswith(field), detail
    assert HINT in detail["message"], detail
    return str(detail["message"])


def _set_region(api: Api, region: str | None) -> dict:
    resp = api.patch("/v1/organization", json={"default_phone_region": region})
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def test_the_issues_national_number_is_refused_not_stored_as_another_country(api: Api):
    message = _refused(api.post("/v1/contacts", json={"phone": "(555) 123-9999"}), "body.phone")
    assert "no country code" in message and "default_phone_region" in message
    assert api.get("/v1/contacts").json()["data"] == []
    resolved = api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": "(555) 123-4567"}]})
    _refused(resolved, "body.identifiers")
    # the value the issue found stored: read as digits with country code it is +55 51239999, not a valid number
    _refused(api.post("/v1/contacts", json={"phone": "5551239999"}), "body.phone")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/contacts", {"phone": "+1 555 123 9999"}),
        ("POST", "/v1/contacts", {"identities": [{"type": "whatsapp", "value": "15551234567@s.whatsapp.net"}]}),
        ("POST", "/v1/contacts/resolve", {"identifiers": [{"type": "wa_id", "value": "15551234567"}]}),
        ("POST", "/v1/contacts/block", {"identifier": {"type": "phone", "value": "+15551234567"}}),
        ("POST", "/v1/cdp/events", {"events": [{"name": "x", "contact": {"type": "phone", "value": "+15551234567"}}]}),
        ("GET", "/v1/contacts/phone/%2B15551234567", None),
    ],
)
def test_a_possible_but_invalid_number_is_refused_wherever_a_number_enters(api: Api, method, path, body):
    resp = api.request(method, path, json=body)
    if path == "/v1/cdp/events":  # each event has its own result
        (result,) = resp.json()["data"]["results"]
        assert result["status"] == "rejected" and HINT in result["error"]["details"][0]["message"], result
    else:
        assert "not a valid phone number" in _refused(resp, "")
    assert api.get("/v1/contacts").json()["data"] == []


def test_a_send_to_an_invalid_number_is_refused_before_anything_is_stored(api: Api, channel: dict):
    resp = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "+1 555 123 9999", "text": {"body": "x"}})
    _refused(resp, "body.to")
    assert api.get("/v1/contacts").json()["data"] == [] and api.get("/v1/conversations").json()["data"] == []


def test_the_default_region_reads_national_forms_everywhere_a_number_enters(api: Api, channel: dict):
    org = _set_region(api, "US")
    assert org["default_phone_region"] == "US"
    assert api.get("/v1/organization").json()["data"]["default_phone_region"] == "US"
    made = api.post("/v1/contacts", json={"name": "Ada", "phone": "(415) 555-2671"})
    assert made.status_code == 201, made.text
    ada = made.json()["data"]
    assert ada["phone"] == "14155552671"
    resolved = api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": "415-555-2671"}]})
    assert resolved.status_code == 200 and resolved.json()["data"]["id"] == ada["id"]
    assert api.get("/v1/contacts/phone/(415)%20555-2671").json()["data"]["id"] == ada["id"]
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "to": "(415) 555-2671", "text": {"body": "hi"}})
    assert sent.status_code == 202 and sent.json()["data"]["to_phone"] == "14155552671", sent.text
    updated = api.patch(f"/v1/contacts/{ada['id']}", json={"phone": "(415) 555-0142"})
    assert updated.status_code == 200 and updated.json()["data"]["phone"] == "14155550142", updated.text
    event = {"name": "signed_up", "contact": {"type": "phone", "value": "(415) 555-0199"}}
    ingested = api.post("/v1/cdp/events", json={"events": [event]}).json()["data"]
    assert ingested["accepted"] == 1, ingested
    csv = "name,phone\nGrace,(415) 555-0123\n"
    imported = api.post("/v1/cdp/imports", json={"format": "csv", "content": csv})
    assert imported.status_code == 201 and imported.json()["data"]["created"] == 1, imported.text
    phones = {c["phone"] for c in api.get("/v1/contacts").json()["data"]}
    assert phones == {"14155550142", "14155550199", "14155550123"}
    # international forms and bare digits are read as before, whatever the region
    assert api.post("/v1/contacts", json={"phone": "+44 20 7946 0958"}).json()["data"]["phone"] == "442079460958"
    assert api.post("/v1/contacts", json={"phone": "4930123456"}).json()["data"]["phone"] == "4930123456"
    # a region does not make an invalid number valid
    assert "not a valid phone number" in _refused(api.post("/v1/contacts", json={"phone": "(555) 123-9999"}), "")


def test_the_default_region_is_checked_and_removable_and_belongs_to_its_organization(api: Api):
    for bad in ("XX", "us", "USA", "AQ", 1):
        resp = api.patch("/v1/organization", json={"default_phone_region": bad})
        assert Api.assert_error(resp, 400, "validation_failed")["details"][0]["field"] == "body.default_phone_region"
    Api.assert_error(api.patch("/v1/organization", json={"name": None}), 400, "validation_failed")
    _set_region(api, "GB")
    assert api.post("/v1/contacts", json={"phone": "020 7946 0958"}).json()["data"]["phone"] == "442079460958"
    other_org, other = api.new_org("other@example.com")
    _refused(api.post("/v1/contacts", json={"phone": "020 7946 0959"}, headers=other), "body.phone")
    renamed = api.patch("/v1/organization", json={"name": "Renamed"}).json()["data"]
    assert (renamed["name"], renamed["default_phone_region"]) == ("Renamed", "GB")  # left out: kept
    assert _set_region(api, None)["default_phone_region"] is None
    assert api.get("/v1/organization").json()["data"]["default_phone_region"] is None
    _refused(api.post("/v1/contacts", json={"phone": "020 7946 0959"}), "body.phone")
    assert other_org != api.org_id


def test_numbers_a_provider_reports_are_kept_even_when_libphonenumber_calls_them_invalid(api: Api, channel: dict):
    """An inbound sender is the provider's word: a customer is never lost to libphonenumber's metadata (only a
    possible number is required). The phone check then lists it."""
    store, org = get_store(), api.org_id
    item = store.get({"PK": f"ORG#{org}", "SK": f"CHANNEL#{channel['id']}"})
    inbound = InboundMessage(provider_message_id="wamid.P1", from_phone="15550100999", type="text", text="hi")
    accepted = messages.receive(store, org, item, inbound)
    contact = api.get(f"/v1/contacts/{accepted.contact_id}").json()["data"]
    assert contact["phone"] == "15550100999" and contact["identities"][0]["type"] == "whatsapp"


def test_the_phone_check_lists_stored_numbers_that_fail_the_rule_and_changes_nothing(api: Api, channel: dict):
    store, org = get_store(), api.org_id
    item = store.get({"PK": f"ORG#{org}", "SK": f"CHANNEL#{channel['id']}"})
    legacy = ["15550100999", "15551234567", "5551239999"]  # as providers reported them, or main stored them
    for n, number in enumerate(legacy):
        inbound = InboundMessage(provider_message_id=f"wamid.L{n}", from_phone=number, type="text", text="hi")
        messages.receive(store, org, item, inbound)
    for phone in ("+14155552671", "+442079460958"):
        assert api.post("/v1/contacts", json={"phone": phone, "email": f"{phone[1:]}@example.com"}).status_code == 201
    started = api.post("/v1/contacts/phone-checks")
    assert started.status_code == 202, started.text
    check = started.json()["data"]
    assert check["id"].startswith("job_") and check["status"] == "running" and check["invalid_numbers"] == 0
    assert run_jobs(api) >= 1
    done = api.get(f"/v1/contacts/phone-checks/{check['id']}").json()["data"]
    assert done["status"] == "completed" and done["finished_at"]
    assert (done["contacts_checked"], done["numbers_checked"], done["invalid_numbers"]) == (5, 5, 3)
    listed, cursor = [], None
    for _ in range(3):  # a page of 2, then the last one
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = api.get(f"/v1/contacts/phone-checks/{check['id']}/numbers", params=params).json()
        listed += page["data"]
        cursor = page["meta"].get("cursor")
        if not page["meta"]["has_more"]:
            break
    assert cursor is None and len(listed) == 3
    assert sorted(f["value"] for f in listed) == sorted(legacy)
    assert {f["type"] for f in listed} == {"whatsapp"}
    assert all(f["problem"] == "not a valid phone number for its country" for f in listed)
    for finding in listed:  # nothing was rewritten
        contact = api.get(f"/v1/contacts/{finding['contact_id']}").json()["data"]
        assert [i["value"] for i in contact["identities"]] == [finding["value"]]
    # a finding holds the person's number: erasing the contact erases it too
    gone = listed[0]["contact_id"]
    assert api.delete(f"/v1/contacts/{gone}").status_code == 204
    assert erasure.drive(store, org, gone)
    left = api.get(f"/v1/contacts/phone-checks/{check['id']}/numbers").json()["data"]
    assert len(left) == 2 and gone not in {f["contact_id"] for f in left}
    # another organization sees no such check
    _, other = api.new_org("other@example.com")
    for path in (f"/v1/contacts/phone-checks/{check['id']}", f"/v1/contacts/phone-checks/{check['id']}/numbers"):
        Api.assert_error(api.get(path, headers=other), 404, "not_found")
    Api.assert_error(api.get("/v1/contacts/phone-checks/job_none"), 404, "not_found")


def test_a_phone_check_walks_every_contact_a_chunk_at_a_time(api: Api, monkeypatch):
    from switchboard.contacts import phone_check

    monkeypatch.setattr(phone_check, "PAGE", 2)
    for n in range(5):
        assert api.post("/v1/contacts", json={"phone": f"+1 415 555 01{n:02d}"}).status_code == 201
    check = api.post("/v1/contacts/phone-checks").json()["data"]
    assert run_jobs(api) >= 3  # at least ⌈5 / 2⌉ chunks
    done = api.get(f"/v1/contacts/phone-checks/{check['id']}").json()["data"]
    assert (done["status"], done["contacts_checked"], done["invalid_numbers"]) == ("completed", 5, 0)
    assert api.get(f"/v1/contacts/phone-checks/{check['id']}/numbers").json()["data"] == []
