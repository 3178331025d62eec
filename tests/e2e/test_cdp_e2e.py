"""Customer data over HTTP against the local stack: a custom field validates contact attributes, a stage move, an
idempotent event batch feeding a segment, and a contact object with its record event."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.e2e


def test_cdp_flow_over_http(local_only):
    suffix = uuid.uuid4().hex[:8]
    with local_only.client() as client:
        field = client.post(
            "/v1/cdp/custom-fields", json={"key": f"seats_{suffix}", "label": "Seats", "type": "number"}
        )
        assert field.status_code == 201, field.text
        bad = client.post("/v1/contacts", json={"name": "Bad", "attributes": {f"seats_{suffix}": "many"}})
        assert bad.status_code == 400
        assert bad.json()["error"]["details"][0]["field"] == f"body.attributes.seats_{suffix}"
        email = f"cdp-{suffix}@example.com"
        ct = client.post("/v1/contacts", json={"name": "Cdp", "email": email, "attributes": {f"seats_{suffix}": 7}})
        assert ct.status_code == 201, ct.text
        contact_id = ct.json()["data"]["id"]

        stage = client.post("/v1/cdp/lifecycle-stages", json={"key": f"lead_{suffix}", "name": "Lead"})
        assert stage.status_code == 201, stage.text
        moved = client.put(f"/v1/cdp/contacts/{contact_id}/lifecycle-stage", json={"stage": f"lead_{suffix}"})
        assert moved.status_code == 200 and moved.json()["data"]["stage"]["key"] == f"lead_{suffix}"

        batch = {
            "events": [
                {"event_id": f"evt-{suffix}", "name": f"bought_{suffix}", "contact": {"type": "email", "value": email}}
            ]
        }
        first = client.post("/v1/cdp/events", json=batch).json()["data"]
        again = client.post("/v1/cdp/events", json=batch).json()["data"]
        assert (first["accepted"], again["duplicates"]) == (1, 1)
        activity = client.get(f"/v1/cdp/contacts/{contact_id}/activity").json()
        assert [a["name"] for a in activity["data"]][:1] == [f"bought_{suffix}"]

        rules = {
            "and": [
                {"event": f"bought_{suffix}", "op": "gte", "count": 1},
                {"field": "lifecycle_stage", "op": "eq", "value": f"lead_{suffix}"},
            ]
        }
        seg = client.post("/v1/cdp/segments", json={"name": f"Buyers {suffix}", "rules": rules})
        assert seg.status_code == 201 and seg.json()["data"]["member_count"] == 1, seg.text
        members = client.get(f"/v1/cdp/segments/{seg.json()['data']['id']}/members").json()
        assert [m["contact_id"] for m in members["data"]] == [contact_id]

        otype = client.post(
            "/v1/cdp/object-types",
            json={
                "key": f"deal_{suffix}",
                "name": "Deal",
                "fields": [{"key": "title", "label": "Title", "type": "text"}],
            },
        )
        assert otype.status_code == 201, otype.text
        record = client.post(
            "/v1/cdp/contact-objects",
            json={"object_type_id": f"deal_{suffix}", "contact_id": contact_id, "properties": {"title": "First"}},
        )
        assert record.status_code == 201 and record.json()["data"]["display_name"] == "First", record.text
        missing = client.get("/v1/cdp/contact-objects/obj_missing")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
