"""Every contacts route over HTTP against the local stack: create-or-upsert, list with filters and cursors, get,
If-Match patch, phone lookup, resolve and its alias (200 / 404 / 409 / 400), identities, notes, the tag catalogue and
assignment, consent with history, suppressions, block / unblock, merge and delete — errors in the envelope."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import httpx
import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


def _phone() -> tuple[str, str]:
    """A fresh US number written for humans, and its stored digits."""
    seven = "5" + str(uuid.uuid4().int)[:6]  # an exchange starting 5: a valid US number
    return f"+1 (415) {seven[:3]}-{seven[3:]}", f"1415{seven}"


def _error(resp: httpx.Response, status: int, code: str) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert body["error"]["message"] and body["error"]["request_id"] and isinstance(body["error"]["details"], list)
    return body["error"]


def _data(resp: httpx.Response, status: int = 200):
    assert resp.status_code == status, (resp.status_code, resp.text)
    return resp.json()["data"]


def test_contact_lifecycle_over_http(live):
    human, digits = _phone()
    email = f"ada-{uuid.uuid4().hex[:8]}@example.com"
    with live.client() as c:
        ada = _data(c.post("/v1/contacts", json={"name": "Ada Lovelace", "phone": human, "company": "AE"}), 201)
        assert (ada["phone"], ada["first_name"], ada["last_name"], ada["version"]) == (digits, "Ada", "Lovelace", 1)
        # The same phone in another written form upserts the same contact (200) and adds the e-mail identity.
        upserted = _data(c.post("/v1/contacts", json={"phone": "00" + digits, "email": email.upper()}))
        assert upserted["id"] == ada["id"] and upserted["email"] == email and upserted["version"] == 2
        assert _data(c.get(f"/v1/contacts/{ada['id']}"))["company"] == "AE"
        for form in (human, "+" + digits, digits):
            assert _data(c.get(f"/v1/contacts/phone/{quote(form)}"))["id"] == ada["id"]
        _error(c.get("/v1/contacts/phone/abc"), 400, "validation_failed")

        # Resolve and its alias: any identifier type, 404 when nothing matches, 400 without a source.
        for path in ("/v1/contacts/resolve", "/v1/contacts/lookup"):
            for ident in (
                {"type": "whatsapp", "value": f"{digits}@s.whatsapp.net"},
                {"type": "wa_id", "value": digits},
                {"type": "email", "value": f"  {email.upper()} "},
                {"type": "contact_id", "value": ada["id"]},
            ):
                assert _data(c.post(path, json={"identifiers": [ident]}))["id"] == ada["id"], ident
        nobody = {"identifiers": [{"type": "email", "value": f"nobody-{uuid.uuid4().hex}@example.com"}]}
        _error(c.post("/v1/contacts/resolve", json=nobody), 404, "not_found")
        no_source = {"identifiers": [{"type": "external_id", "value": "cus_1"}]}
        assert _error(c.post("/v1/contacts/resolve", json=no_source), 400, "validation_failed")["details"]
        _error(
            c.post("/v1/contacts/resolve", json={"identifiers": [{"type": "fax", "value": "1"}]}),
            400,
            "validation_failed",
        )

        # A second contact with an external id: resolving across both is a 409 listing both, merge answers it.
        ext = f"cus_{uuid.uuid4().hex[:10]}"
        bea = _data(
            c.post(
                "/v1/contacts",
                json={"name": "Bea", "identities": [{"type": "external_id", "value": ext, "source": "stripe"}]},
            ),
            201,
        )
        both = {
            "identifiers": [
                {"type": "phone", "value": human},
                {"type": "external_id", "value": ext, "source": "stripe"},
            ]
        }
        conflict = _error(c.post("/v1/contacts/resolve", json=both), 409, "identity_conflict")
        assert conflict["details"] == [{"contact_ids": sorted([ada["id"], bea["id"]])}]

        # If-Match: a stale version is refused, the current one applies.
        stale = c.patch(f"/v1/contacts/{ada['id']}", json={"company": "X"}, headers={"If-Match": "1"})
        assert _error(stale, 409, "conflict")["details"][0]["current_version"] == 2
        patched = _data(c.patch(f"/v1/contacts/{ada['id']}", json={"company": "X"}, headers={"If-Match": '"2"'}))
        assert (patched["company"], patched["version"]) == ("X", 3)
        _error(c.patch(f"/v1/contacts/{ada['id']}", json={"email": "not-an-email"}), 400, "validation_failed")

        identities = _data(c.get(f"/v1/contacts/{ada['id']}/identities"))
        assert {(i["type"], i["value"]) for i in identities} == {("phone", digits), ("email", email)}

        # Notes.
        note = _data(c.post(f"/v1/contacts/{ada['id']}/notes", json={"body": "first call"}), 201)
        assert (
            _data(c.patch(f"/v1/contacts/{ada['id']}/notes/{note['id']}", json={"body": "edited"}))["body"] == "edited"
        )
        assert _data(c.get(f"/v1/contacts/{ada['id']}/notes/{note['id']}"))["body"] == "edited"
        assert [n["id"] for n in _data(c.get(f"/v1/contacts/{ada['id']}/notes"))] == [note["id"]]
        _error(c.post(f"/v1/contacts/{ada['id']}/notes", json={"body": ""}), 400, "validation_failed")

        # Tags: the catalogue and assignment by name or id.
        tag_name = f"VIP-{uuid.uuid4().hex[:6]}"
        tag = _data(c.post(f"/v1/contacts/{ada['id']}/tags", json={"name": tag_name}), 201)
        assert tag_name in [t["name"] for t in _data(c.get("/v1/contact-tags"))]  # the whole catalogue
        assert _data(c.get(f"/v1/contact-tags/{tag['tag_id']}"))["name"] == tag_name
        _error(c.post(f"/v1/contacts/{ada['id']}/tags", json={"tag_id": tag["tag_id"]}), 409, "conflict")
        assert [x["id"] for x in _data(c.get("/v1/contacts", params={"tag": tag_name}))] == [ada["id"]]
        assert [t["name"] for t in _data(c.get(f"/v1/contacts/{ada['id']}/tags"))] == [tag_name]
        other_tag = _data(c.post("/v1/contact-tags", json={"name": f"other-{uuid.uuid4().hex[:6]}"}), 201)
        renamed = _data(c.patch(f"/v1/contact-tags/{other_tag['id']}", json={"name": other_tag["name"] + "-x"}))
        assert renamed["name"].endswith("-x")
        assert c.delete(f"/v1/contact-tags/{other_tag['id']}").status_code == 204
        # a rename reaches the tagged contacts through the tag.cascade job (the local stack polls JobsQueue)
        gold = _data(c.patch(f"/v1/contact-tags/{tag['tag_id']}", json={"name": tag_name + "-gold"}))
        assert gold["job_id"]
        wait_until(lambda: _data(c.get(f"/v1/contacts/{ada['id']}"))["tags"] == [tag_name + "-gold"], timeout=30.0)

        # Consent with history, suppressions.
        c.put(f"/v1/contacts/{ada['id']}/consent/whatsapp", json={"status": "opted_in", "source": "web"})
        consent = _data(c.put(f"/v1/contacts/{ada['id']}/consent/whatsapp", json={"status": "opted_out"}))
        assert [h["status"] for h in consent["history"]] == ["opted_out", "opted_in"]
        assert [x["status"] for x in _data(c.get(f"/v1/contacts/{ada['id']}/consents"))] == ["opted_out"]
        _error(c.put(f"/v1/contacts/{ada['id']}/consent/whatsapp", json={"status": "maybe"}), 400, "validation_failed")
        sup = _data(c.post(f"/v1/contacts/{ada['id']}/suppressions", json={"channel": "sms", "reason": "bounced"}), 201)
        assert sup["active"] is True
        assert [s["reason"] for s in _data(c.get(f"/v1/contacts/{ada['id']}/suppressions"))] == ["bounced"]

        # Block by identifier, unblock by id.
        blocked = _data(c.post("/v1/contacts/block", json={"identifier": {"type": "phone", "value": "+" + digits}}))
        assert blocked["id"] == ada["id"] and blocked["blocked"] is True
        assert _data(c.post("/v1/contacts/unblock", json={"contact_id": ada["id"]}))["blocked"] is False
        _error(c.post("/v1/contacts/block", json={}), 400, "validation_failed")

        # Merge Bea into Ada: the conflict is gone, Bea is gone, her identity is Ada's.
        merged = _data(c.post(f"/v1/contacts/{ada['id']}/merge", json={"from_contact_id": bea["id"]}))
        assert {i["type"] for i in merged["identities"]} == {"phone", "email", "external_id"}
        assert _data(c.post("/v1/contacts/resolve", json=both))["id"] == ada["id"]
        _error(c.get(f"/v1/contacts/{bea['id']}"), 404, "not_found")

        # List: cursor pages, search by name.
        page = c.get("/v1/contacts", params={"q": "ada lovelace", "limit": 1}).json()
        assert [x["id"] for x in page["data"]] == [ada["id"]] and set(page["meta"]) >= {"has_more", "limit"}
        _error(c.get("/v1/contacts", params={"limit": 0}), 400, "validation_failed")

        # Delete: the contact, its children and its identities (free for reuse).
        assert c.delete(f"/v1/contacts/{ada['id']}").status_code == 204
        _error(c.get(f"/v1/contacts/{ada['id']}"), 404, "not_found")
        _error(c.get(f"/v1/contacts/{ada['id']}/notes"), 404, "not_found")
        _error(
            c.post("/v1/contacts/resolve", json={"identifiers": [{"type": "phone", "value": human}]}), 404, "not_found"
        )
        reborn = _data(c.post("/v1/contacts", json={"phone": human}), 201)
        assert reborn["id"] != ada["id"]
        assert c.delete(f"/v1/contacts/{reborn['id']}").status_code == 204


def test_contacts_refuse_bad_input_in_the_envelope(live):
    with live.client() as c:
        _error(c.post("/v1/contacts", json={"phone": "12"}), 400, "validation_failed")
        _error(
            c.post("/v1/contacts", content=b"{not json", headers={"Content-Type": "application/json"}),
            400,
            "invalid_json",
        )
        bad = c.post("/v1/contacts", json={"identities": [{"type": "external_id", "value": "1"}]})
        assert _error(bad, 400, "validation_failed")["details"][0]["field"] == "body.identities[0].source"
        _error(c.get("/v1/contacts/ct_nope"), 404, "not_found")
        _error(c.delete("/v1/contacts/ct_nope"), 404, "not_found")
        _error(c.get("/v1/contacts", params={"cursor": "tampered"}), 400, "validation_failed")
