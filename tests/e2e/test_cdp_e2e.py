"""Customer data over HTTP against the local stack: a custom field validates contact attributes, a stage move, an
idempotent event batch feeding a segment, and a contact object with its record event."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.helpers import wait_until

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
        assert seg.status_code == 201 and seg.json()["data"]["status"] == "building", seg.text
        seg_path = f"/v1/cdp/segments/{seg.json()['data']['id']}"

        def ready() -> dict[str, Any] | None:
            data: dict[str, Any] = client.get(seg_path).json()["data"]
            # the segment.build job ran on the JobsQueue; the stream consumer counted its member row
            return data if data["status"] == "ready" and data["member_count"] == 1 else None

        assert wait_until(ready, timeout=30.0)["member_count"] == 1
        members = client.get(f"{seg_path}/members").json()
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


def test_crm_events_imports_and_incremental_segments_over_http(local_only):
    """Deal stage moves, task completion, comments, links and an import reach a subscribed webhook endpoint once per
    real change (the whole pipeline: outbox → stream → bus → fan-out → sender); a contact change moves it into a
    segment through CdpSegmentsFunction, fed by the template's rule and queue."""
    import json
    import time

    from tests.e2e.test_webhooks_e2e import BASE
    from tests.webhook_receiver import Receiver

    suffix = uuid.uuid4().hex[:8]
    crm_events = [
        "crm.deal.stage_changed",
        "crm.task.completed",
        "crm.comment.created",
        "crm.comment.deleted",
        "crm.relationship.linked",
        "crm.relationship.unlinked",
        "crm.import.committed",
        "crm.list.entry_added",
    ]
    with Receiver().running() as receiver, local_only.client() as client:
        path = f"/cdp-{suffix}"
        endpoint = client.post(f"{BASE}/endpoints", json={"url": receiver.url(path), "filter_types": crm_events})
        assert endpoint.status_code == 201, endpoint.text
        try:
            seg = client.post(
                "/v1/cdp/segments",
                json={
                    "name": f"Tier {suffix}",
                    "rules": {"field": f"attributes.tier_{suffix}", "op": "eq", "value": "gold"},
                },
            )
            assert seg.status_code == 201 and seg.json()["data"]["status"] == "building", seg.text
            wait_until(
                lambda: client.get(f"/v1/cdp/segments/{seg.json()['data']['id']}").json()["data"]["status"] == "ready",
                timeout=30.0,
            )
            imported = client.post(
                "/v1/cdp/imports",
                json={
                    "format": "csv",
                    "content": f"name,email,attributes.tier_{suffix}\nImp,imp-{suffix}@example.com,silver\nBad,nope,\n",
                },
            )
            assert imported.status_code == 201, imported.text
            report = imported.json()["data"]
            assert (report["created"], report["rejected"]) == (1, 1)
            assert report["errors"] == [{"row": 2, "field": "email", "message": report["errors"][0]["message"]}]
            assert client.get(f"/v1/cdp/imports/{report['id']}").json()["data"]["id"] == report["id"]
            resolved = client.post(
                "/v1/contacts/resolve", json={"identifiers": [{"type": "email", "value": f"imp-{suffix}@example.com"}]}
            )
            assert resolved.status_code == 200, resolved.text
            contact_id = resolved.json()["data"]["id"]

            deal_type = client.post(
                "/v1/cdp/object-types",
                json={
                    "key": f"deal_{suffix}",
                    "name": "Deal",
                    "kind": "deal",
                    "status_field": "stage",
                    "fields": [
                        {
                            "key": "stage",
                            "label": "Stage",
                            "type": "single_select",
                            "options": [{"value": "a"}, {"value": "b"}],
                        }
                    ],
                },
            )
            assert deal_type.status_code == 201, deal_type.text
            bad = client.post("/v1/cdp/object-types", json={"key": f"x_{suffix}", "name": "X", "kind": "task"})
            assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "body.status_field"
            deal = client.post(
                "/v1/cdp/contact-objects",
                json={"object_type_id": f"deal_{suffix}", "contact_id": contact_id, "properties": {"stage": "a"}},
            ).json()["data"]
            for stage in ("b", "b"):  # the second is no change
                moved = client.patch(f"/v1/cdp/contact-objects/{deal['id']}", json={"properties": {"stage": stage}})
                assert moved.status_code == 200, moved.text
            comment = client.post(f"/v1/cdp/contact-objects/{deal['id']}/comments", json={"body": "hello"}).json()[
                "data"
            ]
            assert client.delete(f"/v1/cdp/contact-objects/{deal['id']}/comments/{comment['id']}").status_code == 204
            link = f"/v1/cdp/contact-objects/{deal['id']}/relationships/{contact_id}"
            assert client.put(link, json={"label": "owner"}).status_code == 201
            assert client.put(link, json={"label": "owner"}).status_code == 200
            assert client.delete(link).status_code == 204

            # the incremental path: the contact now matches the segment
            assert (
                client.patch(f"/v1/contacts/{contact_id}", json={"attributes": {f"tier_{suffix}": "gold"}}).status_code
                == 200
            )

            def members() -> list[str]:
                rows = client.get(f"/v1/cdp/segments/{seg.json()['data']['id']}/members").json()["data"]
                return [m["contact_id"] for m in rows]

            assert wait_until(members, timeout=30.0) == [contact_id]

            ids = {deal["id"], contact_id, report["id"], seg.json()["data"]["id"]}
            expected = {
                "crm.import.committed": 1,
                "crm.deal.stage_changed": 1,
                "crm.comment.created": 1,
                "crm.comment.deleted": 1,
                "crm.relationship.linked": 1,
                "crm.relationship.unlinked": 1,
                "crm.list.entry_added": 1,
            }

            def mine() -> dict[str, int] | None:
                """Event type → count of the deliveries about this test's records (other tests share the org)."""
                got = [
                    r.headers.get("switchboard-event-type")
                    for r in receiver.of(path)
                    if ids & {v for k, v in json.loads(r.body).items() if k.endswith("_id")}
                ]
                counts = {t: got.count(t) for t in set(got) | set(expected)}
                return counts if counts == expected else None

            wait_until(mine, timeout=60)
            time.sleep(1.0)  # and nothing more arrives: the no-op changes fired nothing
            assert mine() == expected
        finally:
            client.delete(f"{BASE}/endpoints/{endpoint.json()['data']['id']}")
