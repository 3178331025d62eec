"""CRM events of contact objects through the API: deal and task types (`crm.deal.stage_changed`,
`crm.task.completed`), comments (`crm.comment.created|deleted`) and relationships (`crm.relationship.linked|unlinked`),
each fired exactly once per real change and never when nothing changed."""

from __future__ import annotations

from typing import Any

from tests.integration.support import Api
from tests.integration.test_cdp import contact, events_of, field_error, ok

STAGES = [{"value": v} for v in ("lead", "proposal", "won", "lost")]
STATUSES = [{"value": v} for v in ("todo", "doing", "done")]


def deal_type(api: Api, key: str = "deal") -> dict[str, Any]:
    body = {
        "key": key,
        "name": "Deal",
        "kind": "deal",
        "status_field": "stage",
        "fields": [
            {"key": "title", "label": "Title", "type": "text"},
            {"key": "stage", "label": "Stage", "type": "single_select", "options": STAGES},
            {"key": "amount", "label": "Amount", "type": "number"},
        ],
    }
    return ok(api.post("/v1/cdp/object-types", json=body), 201)  # type: ignore[no-any-return]


def task_type(api: Api) -> dict[str, Any]:
    body = {
        "key": "task",
        "name": "Task",
        "kind": "task",
        "status_field": "status",
        "completed_value": "done",
        "fields": [
            {"key": "title", "label": "Title", "type": "text"},
            {"key": "status", "label": "Status", "type": "single_select", "options": STATUSES},
        ],
    }
    return ok(api.post("/v1/cdp/object-types", json=body), 201)  # type: ignore[no-any-return]


def record(api: Api, type_key: str, contact_id: str, **properties: Any) -> dict[str, Any]:
    body = {"object_type_id": type_key, "contact_id": contact_id, "properties": properties}
    return ok(api.post("/v1/cdp/contact-objects", json=body), 201)  # type: ignore[no-any-return]


def count(api: Api, event_type: str) -> int:
    return len([e for e in events_of(api, event_type) if e["event_type"] == event_type])


def test_deal_and_task_type_definitions_are_validated(api: Api):
    select = {"key": "stage", "label": "Stage", "type": "single_select", "options": STAGES}
    text = {"key": "title", "label": "Title", "type": "text"}
    cases = [
        ({"kind": "deal", "fields": [select]}, "body.status_field"),
        ({"kind": "deal", "status_field": "title", "fields": [text]}, "body.status_field"),
        ({"kind": "deal", "status_field": "nope", "fields": [select]}, "body.status_field"),
        (
            {"kind": "deal", "status_field": "stage", "completed_value": "won", "fields": [select]},
            "body.completed_value",
        ),
        ({"kind": "task", "status_field": "stage", "fields": [select]}, "body.completed_value"),
        ({"kind": "task", "status_field": "stage", "completed_value": "x", "fields": [select]}, "body.completed_value"),
        ({"kind": "custom", "status_field": "stage", "fields": [select]}, "body.status_field"),
        ({"kind": "ticket", "fields": [select]}, "body.kind"),
        ({"fields": [text, {"key": "s", "label": "S", "type": "single_select"}]}, "body.fields.1.options"),
        ({"fields": [{**text, "options": STAGES}]}, "body.fields.0.options"),
    ]
    for extra, where in cases:
        field_error(api, api.post("/v1/cdp/object-types", json={"key": "t", "name": "T", **extra}), where)
    assert ok(api.get("/v1/cdp/object-types")) == []
    deal = deal_type(api)
    assert (deal["kind"], deal["status_field"], deal["completed_value"]) == ("deal", "stage", None)
    stage_field = next(f for f in deal["fields"] if f["key"] == "stage")
    # the status field stays while the type is a deal type
    api.assert_error(api.delete(f"/v1/cdp/object-types/{deal['id']}/fields/{stage_field['id']}"), 409, "conflict")
    task = task_type(api)
    status_field = next(f for f in task["fields"] if f["key"] == "status")
    field_error(
        api,
        api.patch(
            f"/v1/cdp/object-types/{task['id']}/fields/{status_field['id']}",
            json={"options": [{"value": "todo"}, {"value": "doing"}]},
        ),
        "body.options",
    )
    widened = api.patch(
        f"/v1/cdp/object-types/{task['id']}/fields/{status_field['id']}",
        json={"options": [*STATUSES, {"value": "blocked"}]},
    )
    assert len(ok(widened)["options"]) == 4


def test_deal_stage_changes_fire_once_per_real_change(api: Api):
    deal_type(api)
    ct = contact(api, name="Buyer", email="buyer@example.com")
    deal = record(api, "deal", ct["id"], title="Big one", stage="lead", amount=10)
    assert count(api, "crm.deal.stage_changed") == 0  # creating is not a stage change
    moved = ok(api.patch(f"/v1/cdp/contact-objects/{deal['id']}", json={"properties": {"stage": "proposal"}}))
    assert moved["properties"]["stage"] == "proposal"
    changes = [e["payload"] for e in events_of(api, "crm.deal.stage_changed")]
    assert len(changes) == 1
    assert {k: changes[0][k] for k in ("record_id", "object_kind", "from_stage", "to_stage", "display_name")} == {
        "record_id": deal["id"],
        "object_kind": "deal",
        "from_stage": "lead",
        "to_stage": "proposal",
        "display_name": "Big one",
    }
    assert changes[0]["organization_id"] == api.org_id and changes[0]["contact_id"] == ct["id"]
    # same stage again, or another property only: no stage event
    ok(api.patch(f"/v1/cdp/contact-objects/{deal['id']}", json={"properties": {"stage": "proposal"}}))
    ok(api.patch(f"/v1/cdp/contact-objects/{deal['id']}", json={"properties": {"amount": 20}}))
    assert count(api, "crm.deal.stage_changed") == 1
    # a bad stage is a 400 naming the property, and changes nothing
    field_error(
        api,
        api.patch(f"/v1/cdp/contact-objects/{deal['id']}", json={"properties": {"stage": "maybe"}}),
        "body.properties.stage",
    )
    ok(api.patch(f"/v1/cdp/contact-objects/{deal['id']}", json={"properties": {"stage": "won"}}))
    stages = [(e["payload"]["from_stage"], e["payload"]["to_stage"]) for e in events_of(api, "crm.deal.stage_changed")]
    assert sorted(stages) == sorted([("lead", "proposal"), ("proposal", "won")])
    assert count(api, "crm.record.updated") == 3  # proposal, amount, won (the no-op patch wrote nothing)


def test_task_completion_fires_once_per_completion(api: Api):
    task_type(api)
    ct = contact(api, name="Doer", email="doer@example.com")
    task = record(api, "task", ct["id"], title="Call back", status="todo")
    ok(api.patch(f"/v1/cdp/contact-objects/{task['id']}", json={"properties": {"status": "doing"}}))
    assert count(api, "crm.task.completed") == 0
    ok(api.patch(f"/v1/cdp/contact-objects/{task['id']}", json={"properties": {"status": "done"}}))
    done = events_of(api, "crm.task.completed")
    assert len(done) == 1
    assert done[0]["payload"]["record_id"] == task["id"] and done[0]["payload"]["previous_status"] == "doing"
    ok(api.patch(f"/v1/cdp/contact-objects/{task['id']}", json={"properties": {"status": "done"}}))
    ok(api.patch(f"/v1/cdp/contact-objects/{task['id']}", json={"properties": {"title": "Call back soon"}}))
    assert count(api, "crm.task.completed") == 1
    ok(api.patch(f"/v1/cdp/contact-objects/{task['id']}", json={"properties": {"status": "todo"}}))
    ok(api.patch(f"/v1/cdp/contact-objects/{task['id']}", json={"properties": {"status": "done"}}))
    assert count(api, "crm.task.completed") == 2  # reopened and completed again: a second real completion


def test_comments_fire_once_and_go_with_their_record(api: Api):
    deal_type(api)
    ct = contact(api, name="Commenter", email="commenter@example.com")
    deal = record(api, "deal", ct["id"], title="Deal", stage="lead")
    base = f"/v1/cdp/contact-objects/{deal['id']}/comments"
    field_error(api, api.post(base, json={"body": ""}), "body.body")
    api.assert_error(api.post("/v1/cdp/contact-objects/obj_missing/comments", json={"body": "x"}), 404, "not_found")
    first = ok(api.post(base, json={"body": "Called, interested."}), 201)
    second = ok(api.post(base, json={"body": "Sent the proposal."}), 201)
    assert first["id"].startswith("cmt_") and first["record_id"] == deal["id"] and first["object_kind"] == "deal"
    listed = api.get(base, params={"limit": 1}).json()
    assert [c["id"] for c in listed["data"]] == [first["id"]] and listed["meta"]["has_more"] is True
    rest = api.get(base, params={"limit": 1, "cursor": listed["meta"]["cursor"]}).json()
    assert [c["id"] for c in rest["data"]] == [second["id"]]
    created = events_of(api, "crm.comment.created")
    assert len(created) == 2 and {e["payload"]["comment_id"] for e in created} == {first["id"], second["id"]}
    assert api.delete(f"{base}/{first['id']}").status_code == 204
    api.assert_error(api.delete(f"{base}/{first['id']}"), 404, "not_found")
    deleted = events_of(api, "crm.comment.deleted")
    assert [e["payload"]["comment_id"] for e in deleted] == [first["id"]]
    # another organization sees nothing of it
    _, other = api.new_org("crm-other@example.com")
    api.assert_error(api.get(base, headers=other), 404, "not_found")
    api.assert_error(api.post(base, json={"body": "x"}, headers=other), 404, "not_found")
    # the record's delete takes its comments along (its crm.record.deleted covers them)
    assert api.delete(f"/v1/cdp/contact-objects/{deal['id']}").status_code == 204
    api.assert_error(api.get(base), 404, "not_found")
    assert count(api, "crm.comment.deleted") == 1 and count(api, "crm.record.deleted") == 1


def test_relationships_link_and_unlink_once(api: Api):
    deal_type(api)
    task_type(api)
    ct = contact(api, name="Linker", email="linker@example.com")
    other_ct = contact(api, name="Payer", email="payer@example.com")
    deal = record(api, "deal", ct["id"], title="Deal", stage="lead")
    task = record(api, "task", ct["id"], title="Task", status="todo")
    rel = f"/v1/cdp/contact-objects/{deal['id']}/relationships"
    linked = api.put(f"{rel}/{task['id']}", json={"label": "follow_up"})
    assert linked.status_code == 201, linked.text
    assert linked.json()["data"]["related_kind"] == "task"
    again = api.put(f"{rel}/{task['id']}", json={"label": "follow_up"})
    assert again.status_code == 200 and again.json()["data"]["label"] == "follow_up"
    relabeled = api.put(f"{rel}/{task['id']}", json={"label": "next_step"})
    assert relabeled.status_code == 200 and relabeled.json()["data"]["label"] == "next_step"
    events = events_of(api, "crm.relationship.linked")
    assert len(events) == 1
    assert {k: events[0]["payload"][k] for k in ("record_id", "object_kind", "related_id", "related_kind")} == {
        "record_id": deal["id"],
        "object_kind": "deal",
        "related_id": task["id"],
        "related_kind": "task",
    }
    # both sides list the link, with the new label
    mirror = ok(api.get(f"/v1/cdp/contact-objects/{task['id']}/relationships"))
    assert [(m["related_id"], m["related_kind"], m["label"]) for m in mirror] == [(deal["id"], "deal", "next_step")]
    # a contact as the related record
    assert api.put(f"{rel}/{other_ct['id']}", json={"label": "billed_to"}).status_code == 201
    assert {r["related_id"] for r in ok(api.get(rel))} == {task["id"], other_ct["id"]}
    field_error(api, api.put(f"{rel}/{deal['id']}", json={}), "path.relatedID")
    api.assert_error(api.put(f"{rel}/obj_missing", json={}), 404, "not_found")
    api.assert_error(api.put(f"{rel}/ct_missing", json={}), 404, "not_found")
    api.assert_error(api.put(f"{rel}/something", json={}), 404, "not_found")
    assert count(api, "crm.relationship.linked") == 2
    # unlink once; unlinking again is 404 and fires nothing
    assert api.delete(f"{rel}/{task['id']}").status_code == 204
    api.assert_error(api.delete(f"{rel}/{task['id']}"), 404, "not_found")
    assert ok(api.get(f"/v1/cdp/contact-objects/{task['id']}/relationships")) == []
    unlinked = events_of(api, "crm.relationship.unlinked")
    assert [e["payload"]["related_id"] for e in unlinked] == [task["id"]]
    # deleting the deal unlinks what is still linked, once
    assert api.delete(f"/v1/cdp/contact-objects/{deal['id']}").status_code == 204
    unlinked = events_of(api, "crm.relationship.unlinked")
    assert sorted(e["payload"]["related_id"] for e in unlinked) == sorted([task["id"], other_ct["id"]])
    assert count(api, "crm.relationship.linked") == 2
