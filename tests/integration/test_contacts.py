"""Contacts through the API (gateway + handlers + moto): upsert by identity, resolution, lists, concurrency control,
sub-resources, blocking, merge, and the contact.updated events they emit."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from switchboard.api.auth import AuthContext
from switchboard.contacts import erasure, models, search, service
from switchboard.events.outbox import stored_events
from switchboard.store import get_store, shards
from tests.helpers import count_query_items
from tests.integration.support import Api, run_jobs


def events(api: Api) -> list[dict]:
    return [e for e in stored_events(get_store(), api.org_id) if e["event_type"] == "contact.updated"]


def create(api: Api, **body) -> dict:
    resp = api.post("/v1/contacts", json=body)
    assert resp.status_code in (200, 201), resp.text
    return resp.json()["data"]


def test_create_then_upsert_by_any_form_of_the_phone(api: Api):
    resp = api.post("/v1/contacts", json={"name": "Ada Lovelace", "phone": "+1 415 555 2671", "company": "AE"})
    assert resp.status_code == 201, resp.text
    ada = resp.json()["data"]
    assert ada["id"].startswith("ct_") and ada["organization_id"] == api.org_id
    assert (ada["first_name"], ada["last_name"], ada["phone"]) == ("Ada", "Lovelace", "14155552671")
    assert ada["identities"][0] | {"created_at": None} == {
        "type": "phone",
        "value": "14155552671",
        "source": None,
        "channel_id": None,
        "created_at": None,
    }
    again = api.post("/v1/contacts", json={"phone": "0014155552671", "email": "ADA@example.com"})
    assert again.status_code == 200, again.text
    updated = again.json()["data"]
    assert updated["id"] == ada["id"] and updated["email"] == "ada@example.com"
    assert updated["version"] == ada["version"] + 1
    assert {i["type"] for i in updated["identities"]} == {"phone", "email"}
    wa = api.post("/v1/contacts", json={"identities": [{"type": "whatsapp", "value": "14155552671@s.whatsapp.net"}]})
    assert wa.status_code == 200 and wa.json()["data"]["id"] == ada["id"]
    assert wa.json()["data"]["version"] == updated["version"]  # nothing changed: no write
    assert [e["payload"]["action"] for e in events(api)] == ["created", "upserted"]


def test_identity_conflict_and_validation(api: Api):
    a = create(api, phone="+44 20 7946 0958")
    b = create(api, email="b@example.com")
    resp = api.post("/v1/contacts", json={"phone": "+442079460958", "email": "b@example.com"})
    err = api.assert_error(resp, 409, "identity_conflict")
    assert err["details"] == [{"contact_ids": sorted([a["id"], b["id"]])}]
    bad = api.post("/v1/contacts", json={"identities": [{"type": "external_id", "value": "42"}]})
    assert api.assert_error(bad, 400, "validation_failed")["details"][0]["field"] == "body.identities[0].source"
    api.assert_error(api.post("/v1/contacts", json={"phone": "12"}), 400, "validation_failed")
    api.assert_error(
        api.post("/v1/contacts", json={"identities": [{"type": "fax", "value": "1"}]}), 400, "validation_failed"
    )


def test_resolve_and_lookup(api: Api):
    ada = create(
        api,
        name="Ada",
        phone="+14155552671",
        identities=[{"type": "external_id", "value": "cus_1", "source": "stripe"}],
    )
    other = create(api, email="other@example.com")
    for path in ("/v1/contacts/resolve", "/v1/contacts/lookup"):
        for ident in (
            {"type": "wa_id", "value": "14155552671"},
            {"type": "phone", "value": "+1 (415) 555-2671"},
            {"type": "external_id", "value": "cus_1", "source": "stripe"},
            {"type": "contact_id", "value": ada["id"]},
        ):
            resp = api.post(path, json={"identifiers": [ident]})
            assert resp.status_code == 200, (ident, resp.text)
            assert resp.json()["data"]["id"] == ada["id"]
    both = api.post(
        "/v1/contacts/resolve",
        json={
            "identifiers": [{"type": "phone", "value": "+14155552671"}, {"type": "email", "value": "other@example.com"}]
        },
    )
    assert api.assert_error(both, 409, "identity_conflict")["details"] == [
        {"contact_ids": sorted([ada["id"], other["id"]])}
    ]
    api.assert_error(
        api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "email", "value": "no@example.com"}]}),
        404,
        "not_found",
    )
    no_source = api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "external_id", "value": "x"}]})
    api.assert_error(no_source, 400, "validation_failed")
    api.assert_error(api.post("/v1/contacts/resolve", json={"identifiers": []}), 400, "validation_failed")
    api.assert_error(
        api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "fax", "value": "1"}]}),
        400,
        "validation_failed",
    )


def test_resolve_costs_at_most_two_round_trips(api: Api):
    ada = create(api, phone="+14155552671", email="ada@example.com")
    auth = AuthContext("api_key", "k", None, api.org_id, "owner", "k")
    client = get_store().client
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    ids = [
        models.Identifier(type=t, value=v)
        for t, v in (
            ("phone", "+14155552671"),
            ("wa_id", "14155552671"),
            ("email", "ada@example.com"),
            ("contact_id", ada["id"]),
        )
    ]
    assert service.resolve(get_store(), auth, ids)["id"] == ada["id"]
    assert calls == ["BatchGetItem"]
    calls.clear()
    assert service.resolve(get_store(), auth, ids[:3])["id"] == ada["id"]
    assert calls == ["BatchGetItem", "GetItem"]


def test_get_by_phone_in_any_form(api: Api):
    ada = create(api, phone="+14155552671")
    for form in ("+14155552671", "0014155552671", "14155552671", "+1 415-555-2671"):
        resp = api.get(f"/v1/contacts/phone/{quote(form)}")
        assert resp.status_code == 200, (form, resp.text)
        assert resp.json()["data"]["id"] == ada["id"]
    api.assert_error(api.get("/v1/contacts/phone/%2B14155550119"), 404, "not_found")
    api.assert_error(api.get("/v1/contacts/phone/abc"), 400, "validation_failed")


def test_patch_with_if_match_and_events_only_on_change(api: Api):
    ada = create(api, name="Ada", phone="+14155552671")
    stale = api.patch(
        f"/v1/contacts/{ada['id']}", json={"company": "X"}, headers={**api.owner_headers, "If-Match": "99"}
    )
    assert api.assert_error(stale, 409, "conflict")["details"][0]["current_version"] == 1
    ok = api.patch(
        f"/v1/contacts/{ada['id']}",
        json={"company": "X", "last_name": "King"},
        headers={**api.owner_headers, "If-Match": '"1"'},
    )
    assert ok.status_code == 200, ok.text
    patched = ok.json()["data"]
    assert (patched["company"], patched["name"], patched["version"]) == ("X", "Ada King", 2)
    before = len(events(api))
    same = api.patch(f"/v1/contacts/{ada['id']}", json={"company": "X"})
    assert same.json()["data"]["version"] == 2 and len(events(api)) == before
    moved = api.patch(f"/v1/contacts/{ada['id']}", json={"phone": "+442079460958", "attributes": {"tier": "gold"}})
    body = moved.json()["data"]
    assert body["phone"] == "442079460958" and body["attributes"] == {"tier": "gold"}
    assert [i["value"] for i in body["identities"]] == ["442079460958"]
    api.assert_error(api.get("/v1/contacts/phone/14155552671"), 404, "not_found")  # old number is free
    cleared = api.patch(f"/v1/contacts/{ada['id']}", json={"attributes": {"tier": None}}).json()["data"]
    assert cleared["attributes"] == {}
    other = create(api, phone="+14155550000")
    taken = api.patch(f"/v1/contacts/{other['id']}", json={"phone": "+442079460958"})
    api.assert_error(taken, 409, "identity_conflict")
    api.assert_error(api.patch("/v1/contacts/ct_missing", json={"company": "x"}), 404, "not_found")


def test_list_filters_and_cursor(api: Api):
    made = [
        create(api, name=f"Person {n:02d}", phone=f"+1415555{n:04d}", lifecycle_stage="lead" if n % 2 else "customer")
        for n in range(7)
    ]
    page = api.get("/v1/contacts", params={"limit": 3}).json()
    assert len(page["data"]) == 3 and page["meta"]["has_more"] is True
    seen = [c["id"] for c in page["data"]]
    while page["meta"]["has_more"]:
        page = api.get("/v1/contacts", params={"limit": 3, "cursor": page["meta"]["cursor"]}).json()
        seen += [c["id"] for c in page["data"]]
    assert sorted(seen) == sorted(c["id"] for c in made)
    leads = api.get("/v1/contacts", params={"lifecycle_stage": "lead"}).json()["data"]
    assert {c["id"] for c in leads} == {c["id"] for n, c in enumerate(made) if n % 2}
    by_name = api.get("/v1/contacts", params={"q": "person 0"}).json()["data"]
    assert len(by_name) == 7
    by_phone = api.get("/v1/contacts", params={"q": "+1415555000"}).json()["data"]
    assert {c["id"] for c in by_phone} == {c["id"] for c in made}
    api.post(f"/v1/contacts/{made[0]['id']}/tags", json={"name": "VIP"})
    tagged = api.get("/v1/contacts", params={"tag": "VIP"}).json()["data"]
    assert [c["id"] for c in tagged] == [made[0]["id"]]
    since = api.get("/v1/contacts", params={"updated_since": "2999-01-01T00:00:00Z"}).json()["data"]
    assert since == []
    bad_cursor = api.get("/v1/contacts", params={"cursor": page["meta"].get("cursor") or "x.y", "tag": "VIP"})
    api.assert_error(bad_cursor, 400, "validation_failed")


def test_delete_frees_identities_and_removes_children(api: Api):
    ada = create(api, phone="+14155552671")
    api.post(f"/v1/contacts/{ada['id']}/notes", json={"body": "hello"})
    api.post(f"/v1/contacts/{ada['id']}/tags", json={"name": "vip"})
    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 204
    api.assert_error(api.get(f"/v1/contacts/{ada['id']}"), 404, "not_found")
    api.assert_error(api.get(f"/v1/contacts/{ada['id']}/notes"), 404, "not_found")
    assert erasure.drive(get_store(), api.org_id, ada["id"])  # the cascade (a contact.erasure event's consumer)
    assert get_store().query_all(f"ORG#{api.org_id}", sk_prefix=f"CONTACT#{ada['id']}") == []
    assert get_store().query_all(f"ORG#{api.org_id}", sk_prefix="CTAG#") == []
    again = api.post("/v1/contacts", json={"phone": "+14155552671"})
    assert again.status_code == 201 and again.json()["data"]["id"] != ada["id"]


def test_notes(api: Api):
    ada = create(api, name="Ada")
    notes = [api.post(f"/v1/contacts/{ada['id']}/notes", json={"body": f"note {n}"}).json()["data"] for n in range(3)]
    page = api.get(f"/v1/contacts/{ada['id']}/notes", params={"limit": 2}).json()
    assert [n["body"] for n in page["data"]] == ["note 2", "note 1"] and page["meta"]["has_more"]
    one = api.patch(f"/v1/contacts/{ada['id']}/notes/{notes[0]['id']}", json={"body": "edited"}).json()["data"]
    assert one["body"] == "edited"
    assert api.get(f"/v1/contacts/{ada['id']}/notes/{notes[0]['id']}").json()["data"]["body"] == "edited"
    assert api.delete(f"/v1/contacts/{ada['id']}/notes/{notes[0]['id']}").status_code == 204
    api.assert_error(api.get(f"/v1/contacts/{ada['id']}/notes/{notes[0]['id']}"), 404, "not_found")
    api.assert_error(api.post(f"/v1/contacts/{ada['id']}/notes", json={"body": ""}), 400, "validation_failed")
    api.assert_error(api.post("/v1/contacts/ct_none/notes", json={"body": "x"}), 404, "not_found")


def test_tags_catalogue_and_assignment(api: Api):
    ada = create(api, name="Ada")
    assigned = api.post(f"/v1/contacts/{ada['id']}/tags", json={"name": "VIP"})
    assert assigned.status_code == 201
    tag_id = assigned.json()["data"]["tag_id"]
    catalogue = api.get("/v1/contact-tags").json()["data"]
    assert [t["name"] for t in catalogue] == ["VIP"]
    api.assert_error(api.post(f"/v1/contacts/{ada['id']}/tags", json={"tag_id": tag_id}), 409, "conflict")
    api.assert_error(api.post("/v1/contact-tags", json={"name": "vip"}), 409, "conflict")
    assert api.get(f"/v1/contacts/{ada['id']}").json()["data"]["tags"] == ["VIP"]
    renamed = api.patch(f"/v1/contact-tags/{tag_id}", json={"name": "Gold", "color": "#ffcc00"}).json()["data"]
    assert renamed["name"] == "Gold" and renamed["job_id"]
    run_jobs(api)  # the tag.cascade job renames the tag on its contacts
    assert api.get(f"/v1/contacts/{ada['id']}").json()["data"]["tags"] == ["Gold"]
    assert [t["name"] for t in api.get(f"/v1/contacts/{ada['id']}/tags").json()["data"]] == ["Gold"]
    assert api.delete(f"/v1/contacts/{ada['id']}/tags/{tag_id}").status_code == 204
    assert api.get(f"/v1/contacts/{ada['id']}").json()["data"]["tags"] == []
    api.assert_error(api.delete(f"/v1/contacts/{ada['id']}/tags/{tag_id}"), 404, "not_found")
    other = api.post("/v1/contact-tags", json={"name": "Churn risk"}).json()["data"]
    api.post(f"/v1/contacts/{ada['id']}/tags", json={"tag_id": other["id"]})
    assert api.delete(f"/v1/contact-tags/{other['id']}").status_code == 204
    run_jobs(api)
    assert api.get(f"/v1/contacts/{ada['id']}").json()["data"]["tags"] == []
    api.assert_error(api.post(f"/v1/contacts/{ada['id']}/tags", json={}), 400, "validation_failed")


def test_consent_and_suppressions(api: Api):
    ada = create(api, name="Ada")
    first = api.put(f"/v1/contacts/{ada['id']}/consent/whatsapp", json={"status": "opted_in", "source": "web"})
    assert first.status_code == 200 and first.json()["data"]["status"] == "opted_in"
    second = api.put(
        f"/v1/contacts/{ada['id']}/consent/whatsapp",
        json={"status": "opted_out", "captured_at": "2026-11-01T10:00:00Z"},
    )
    body = second.json()["data"]
    assert body["status"] == "opted_out" and [h["status"] for h in body["history"]] == ["opted_out", "opted_in"]
    api.put(f"/v1/contacts/{ada['id']}/consent/email", json={"status": "unknown"})
    consents = api.get(f"/v1/contacts/{ada['id']}/consents").json()["data"]
    assert {c["channel"]: c["status"] for c in consents} == {"whatsapp": "opted_out", "email": "unknown"}
    api.assert_error(
        api.put(f"/v1/contacts/{ada['id']}/consent/whatsapp", json={"status": "maybe"}), 400, "validation_failed"
    )
    created = api.post(f"/v1/contacts/{ada['id']}/suppressions", json={"channel": "sms", "reason": "bounced"})
    assert created.status_code == 201 and created.json()["data"]["active"] is True
    updated = api.post(
        f"/v1/contacts/{ada['id']}/suppressions",
        json={"channel": "sms", "reason": "complaint", "expires_at": "2000-01-01T00:00:00Z"},
    )
    assert updated.status_code == 200 and updated.json()["data"]["active"] is False
    assert [s["reason"] for s in api.get(f"/v1/contacts/{ada['id']}/suppressions").json()["data"]] == ["complaint"]
    api.assert_error(api.put("/v1/contacts/ct_none/consent/sms", json={"status": "opted_in"}), 404, "not_found")


def test_block_and_unblock_by_id_or_identifier(api: Api):
    ada = create(api, phone="+14155552671")
    blocked = api.post("/v1/contacts/block", json={"identifier": {"type": "phone", "value": "0014155552671"}})
    assert blocked.status_code == 200 and blocked.json()["data"]["blocked"] is True
    count = len(events(api))
    again = api.post("/v1/contacts/block", json={"contact_id": ada["id"]})
    assert again.json()["data"]["blocked"] is True and len(events(api)) == count
    assert api.post("/v1/contacts/unblock", json={"contact_id": ada["id"]}).json()["data"]["blocked"] is False
    api.assert_error(api.post("/v1/contacts/block", json={}), 400, "validation_failed")
    api.assert_error(api.post("/v1/contacts/block", json={"contact_id": "ct_none"}), 404, "not_found")


def test_merge_answers_the_conflict_case(api: Api):
    a = create(api, name="Ada", phone="+14155552671")
    b = create(api, email="ada@example.com", company="AE", attributes={"plan": "pro"})
    api.post(f"/v1/contacts/{b['id']}/notes", json={"body": "from b"})
    api.post(f"/v1/contacts/{b['id']}/tags", json={"name": "VIP"})
    api.put(f"/v1/contacts/{b['id']}/consent/email", json={"status": "opted_in"})
    conflict = api.post(
        "/v1/contacts/resolve",
        json={
            "identifiers": [{"type": "phone", "value": "+14155552671"}, {"type": "email", "value": "ada@example.com"}]
        },
    )
    api.assert_error(conflict, 409, "identity_conflict")
    merged = api.post(f"/v1/contacts/{a['id']}/merge", json={"from_contact_id": b["id"]})
    assert merged.status_code == 200, merged.text
    body = merged.json()["data"]
    assert body["company"] == "AE" and body["email"] == "ada@example.com" and body["tags"] == ["VIP"]
    assert body["attributes"] == {"plan": "pro"}
    assert {i["type"] for i in body["identities"]} == {"phone", "email"}
    resolved = api.post(
        "/v1/contacts/resolve",
        json={
            "identifiers": [{"type": "phone", "value": "+14155552671"}, {"type": "email", "value": "ada@example.com"}]
        },
    )
    assert resolved.json()["data"]["id"] == a["id"]
    api.assert_error(api.get(f"/v1/contacts/{b['id']}"), 404, "not_found")
    assert [n["body"] for n in api.get(f"/v1/contacts/{a['id']}/notes").json()["data"]] == ["from b"]
    assert [c["channel"] for c in api.get(f"/v1/contacts/{a['id']}/consents").json()["data"]] == ["email"]
    assert [c["id"] for c in api.get("/v1/contacts", params={"tag": "VIP"}).json()["data"]] == [a["id"]]
    assert any(
        e["action"] == "contact.merged"
        for e in shards.query_all(get_store(), shards.all_pks(api.org_id), sk_prefix="AUDIT#")
    )
    api.assert_error(
        api.post(f"/v1/contacts/{a['id']}/merge", json={"from_contact_id": a["id"]}), 400, "validation_failed"
    )


@pytest.mark.parametrize("role", ["viewer"])
def test_viewers_read_but_do_not_write(api: Api, role: str):
    key = api.post("/v1/api-keys", json={"name": role, "role": role}).json()["data"]["key"]
    h = {"X-Api-Key": key}
    ada = create(api, name="Ada")
    assert api.get(f"/v1/contacts/{ada['id']}", headers=h).status_code == 200
    assert (
        api.post(
            "/v1/contacts/resolve", json={"identifiers": [{"type": "contact_id", "value": ada["id"]}]}, headers=h
        ).status_code
        == 200
    )
    api.assert_error(api.post("/v1/contacts", json={"name": "x"}, headers=h), 403, "forbidden")
    api.assert_error(api.delete(f"/v1/contacts/{ada['id']}", headers=h), 403, "forbidden")


def test_blocking_a_contact_applies_the_provider_block_on_connected_channels(api: Api):
    channel = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"}).json()["data"]
    idle = api.post("/v1/channels", json={"name": "idle", "platform": "sandbox"}).json()["data"]
    assert api.post(f"/v1/channels/{channel['id']}/connect").json()["data"]["status"] == "connected"
    ada = create(api, phone="+14155552671")
    resp = api.post("/v1/contacts/block", json={"contact_id": ada["id"]})
    assert resp.status_code == 200, resp.text
    blocked = api.get(f"/v1/channels/{channel['id']}/blocked-contacts").json()["data"]
    assert [b["phone"] for b in blocked] == ["14155552671"]
    assert api.get(f"/v1/channels/{idle['id']}/blocked-contacts").json()["data"] == []
    logs = api.get(f"/v1/channels/{channel['id']}/logs").json()["data"]
    assert logs[0]["event"] == "contact_block" and logs[0]["detail"]["blocked"] is True
    api.post("/v1/contacts/unblock", json={"contact_id": ada["id"]})
    assert api.get(f"/v1/channels/{channel['id']}/blocked-contacts").json()["data"] == []


def test_attributes_that_dynamodb_cannot_store_are_refused(api: Api):
    # Found by the contract fuzzer: a 1e300 attribute answered 503 "data store busy", an empty key stored an item the
    # table gave back mangled.
    for attributes in ({"score": 1.8e257}, {"": "x"}, {"big": 10**40 + 1}):
        resp = api.post("/v1/contacts", json={"name": "Attr", "attributes": attributes})
        api.assert_error(resp, 400, "validation_failed")
    created = api.post("/v1/contacts", json={"name": "Attr", "attributes": {"score": 1.5e100}})
    assert created.status_code == 201
    stored = api.get(f"/v1/contacts/{created.json()['data']['id']}").json()["data"]["attributes"]["score"]
    assert float(stored) == 1.5e100


# Search -----------------------------------------------------------------------------------------------------------
def _found(api: Api, q: str, **params) -> list[str]:
    resp = api.get("/v1/contacts", params={"q": q, "limit": 100, **params})
    assert resp.status_code == 200, resp.text
    return [c["id"] for c in resp.json()["data"]]


def test_search_finds_any_word_of_the_name_or_company_an_email_prefix_and_phone_fragments(api: Api):
    ada = create(
        api,
        name="Ada Lovelace",
        company="Analytical Engines Ltd",
        email="ada@lovelace.example.org",
        phone="+44 20 7946 0958",
    )
    zoe = create(api, name="Zoë Ångström", phone="+1 415 555 0142", lifecycle_stage="lead")
    for q in ("love", "LOVELACE", "ada", "engines", "analytical ltd", "ada love", "ada@love", "+44 20 79", "207946"):
        assert _found(api, q) == [ada["id"]], q
    for q in ("zoe", "ångström", "angs", "415 555", "+1 (415) 555-01", "0014155550142"):
        assert _found(api, q) == [zoe["id"]], q
    for q in ("ada smith", "velace", "lovelace.example", "9999"):
        assert _found(api, q) == [], q
    assert _found(api, "zoe", lifecycle_stage="lead") == [zoe["id"]]
    assert _found(api, "zoe", lifecycle_stage="customer") == []
    api.post(f"/v1/contacts/{ada['id']}/tags", json={"name": "Founding Member"})
    assert _found(api, "founding") == [ada["id"]]
    assert _found(api, "ada", tag="Founding Member") == [ada["id"]]
    assert _found(api, "zoe", tag="Founding Member") == []

    # A change moves the rows with it; a deleted contact leaves none behind.
    assert api.patch(f"/v1/contacts/{ada['id']}", json={"name": "Ada Byron"}).status_code == 200
    assert _found(api, "love") == [] and _found(api, "byron") == [ada["id"]]
    assert api.delete(f"/v1/contacts/{ada['id']}").status_code == 204
    rows = get_store().query_all(f"ORG#{api.org_id}", sk_prefix="CSRCH#")
    assert rows and all(r["contact_id"] == zoe["id"] for r in rows)


def test_search_pages_list_each_contact_once_and_read_a_bounded_amount(api: Api, monkeypatch: pytest.MonkeyPatch):
    made = {create(api, name=f"Pat Patterson {n}")["id"] for n in range(25)}  # two words start with "pat"
    seen: list[str] = []
    page = api.get("/v1/contacts", params={"q": "pat", "limit": 10}).json()
    while True:
        seen += [c["id"] for c in page["data"]]
        if not page["meta"]["has_more"]:
            break
        page = api.get("/v1/contacts", params={"q": "pat", "limit": 10, "cursor": page["meta"]["cursor"]}).json()
    assert len(seen) == len(set(seen)) == 25 and set(seen) == made

    queries = count_query_items(monkeypatch)
    rare = api.get("/v1/contacts", params={"q": "pat", "limit": 5, "lifecycle_stage": "customer"}).json()
    assert rare["data"] == [] and rare["meta"]["has_more"] is True  # no match within the page's reads: go on
    assert len(queries) == search.MAX_READS and sum(queries) == 5 * search.MAX_READS


def test_reindex_builds_search_rows_for_contacts_written_before_them_a_chunk_at_a_time(api: Api):
    made = [create(api, name=f"Old Timer {n}", company="Legacy Works")["id"] for n in range(30)]
    store = get_store()
    for row in store.query_all(f"ORG#{api.org_id}", sk_prefix="CSRCH#"):  # as before the search rows existed
        store.delete({"PK": row["PK"], "SK": row["SK"]})
    store.put({"PK": f"ORG#{api.org_id}", "SK": f"CNAME#old timer 0#{made[0]}", "contact_id": made[0]})
    assert _found(api, "legacy") == []
    chunks, checkpoint = 0, None
    while True:
        checkpoint = search.reindex_chunk(store, api.org_id, checkpoint)
        chunks += 1
        if checkpoint is None:
            break
    assert chunks == 2  # 30 contacts, 25 a chunk
    assert sorted(_found(api, "legacy")) == sorted(made) and len(_found(api, "timer")) == 30
    assert store.query_all(f"ORG#{api.org_id}", sk_prefix="CNAME#") == []
    search.reindex_chunk(store, api.org_id, None)  # a chunk run twice changes nothing
    assert len(_found(api, "legacy")) == 30


def test_static_contact_paths_answer_405_for_other_methods(api):
    """`/v1/contacts/block` is not a contact id: GET there is 405 (Allow: POST), not 404 "No such contact"."""
    for method in ("GET", "PATCH", "DELETE", "OPTIONS"):
        resp = api.request(method, "/v1/contacts/block")
        assert resp.status_code == 405, (method, resp.text)
        assert resp.json()["error"]["code"] == "method_not_allowed"
        assert resp.headers["Allow"] == "POST"
