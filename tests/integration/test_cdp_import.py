"""Contacts imports (/v1/cdp/imports): CSV and JSON lines validated row by row with a report of the rejected rows,
valid rows created or upserted through the contacts rules (identity sentinels, custom fields), committed in
all-or-nothing batches of at most 100 items, `crm.import.committed` once per import that changed something."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchboard.cdp import imports
from switchboard.errors import ServiceUnavailable
from switchboard.store import Store
from tests.integration.support import Api
from tests.integration.test_cdp import contact, events_of, field_error, ok


def run_import(api: Api, fmt: str, content: str, **extra: Any) -> dict[str, Any]:
    return ok(api.post("/v1/cdp/imports", json={"format": fmt, "content": content, **extra}), 201)  # type: ignore[no-any-return]


def contacts_by_email(api: Api) -> dict[str, dict[str, Any]]:
    rows = api.get("/v1/contacts", params={"limit": 100}).json()["data"]
    return {c["email"]: c for c in rows if c.get("email")}


def test_csv_import_validates_rows_and_reports_rejections(api: Api):
    ok(api.post("/v1/cdp/custom-fields", json={"key": "seats", "label": "Seats", "type": "number"}), 201)
    ok(api.post("/v1/cdp/custom-fields", json={"key": "vip", "label": "VIP", "type": "boolean"}), 201)
    existing = contact(api, name="Old Name", email="grace@example.com")
    csv_text = (
        "name,email,phone,company,attributes.seats,attributes.vip,attributes.note\n"
        "Ada Lovelace,ada@example.com,+44 20 7946 0958,Engines,12,yes,first\n"  # row 1: created
        "Grace Hopper,GRACE@example.com,,Navy,3,no,\n"  # row 2: upserts the existing contact
        "Bad Seats,bad@example.com,,,many,,\n"  # row 3: seats is not a number
        "No Identity,,,,1,,\n"  # row 4: nothing to identify the contact
        "Broken,broken@,,,,,\n"  # row 5: not an e-mail
        'Ada Again,"ada@example.com",,,,,\n'  # row 6: repeats row 1's identity
        "\n"
        'Quoted "Name",quoted@example.com,,"Acme, Inc.",,maybe,\n'  # row 7: vip is not a boolean
    )
    report = run_import(api, "csv", csv_text)
    assert report["id"].startswith("imp_") and report["status"] == "committed" and report["format"] == "csv"
    assert (report["rows"], report["created"], report["updated"], report["rejected"]) == (7, 1, 1, 5)
    assert report["batches"] == 1
    problems = {(e["row"], e["field"]) for e in report["errors"]}
    assert problems == {
        (3, "attributes.seats"),
        (4, "row"),
        (5, "email"),
        (6, "identities"),
        (7, "attributes.vip"),
    }, report["errors"]
    assert all(e["message"] for e in report["errors"])
    stored = contacts_by_email(api)
    assert stored["ada@example.com"]["attributes"] == {"seats": 12, "vip": True, "note": "first"}
    assert stored["ada@example.com"]["phone"] == "442079460958"
    assert stored["ada@example.com"]["company"] == "Engines"
    grace = stored["grace@example.com"]
    assert grace["id"] == existing["id"] and grace["name"] == "Grace Hopper"
    assert grace["attributes"] == {"seats": 3, "vip": False}
    assert {"bad@example.com", "quoted@example.com"}.isdisjoint(stored)
    committed = events_of(api, "crm.import.committed")
    assert len(committed) == 1
    assert committed[0]["payload"] | {} == {
        "import_id": report["id"],
        "object_kind": "contact",
        "rows": 7,
        "created": 1,
        "updated": 1,
        "rejected": 5,
        "organization_id": api.org_id,
    }
    # the report stays readable
    assert ok(api.get(f"/v1/cdp/imports/{report['id']}")) == report
    assert [r["id"] for r in ok(api.get("/v1/cdp/imports"))] == [report["id"]]
    api.assert_error(api.get("/v1/cdp/imports/imp_missing"), 404, "not_found")
    _, other = api.new_org("import-other@example.com")
    api.assert_error(api.get(f"/v1/cdp/imports/{report['id']}", headers=other), 404, "not_found")


def test_reimporting_the_same_rows_changes_nothing_and_fires_nothing(api: Api):
    lines = "\n".join(
        json.dumps(row)
        for row in (
            {"name": "Lin One", "email": "lin1@example.com", "attributes": {"tier": "gold"}},
            {"name": "Lin Two", "whatsapp": "+1 415 555 0100", "external_id.shop": "c-2"},
        )
    )
    first = run_import(api, "jsonl", lines)
    assert (first["created"], first["updated"], first["unchanged"], first["rejected"]) == (2, 0, 0, 0)
    again = run_import(api, "jsonl", lines)
    assert (again["created"], again["updated"], again["unchanged"], again["batches"]) == (0, 0, 2, 0)
    assert len(events_of(api, "crm.import.committed")) == 1
    two = next(c for c in api.get("/v1/contacts").json()["data"] if c["name"] == "Lin Two")
    assert {(i["type"], i["value"], i["source"]) for i in two["identities"]} == {
        ("whatsapp", "14155550100", None),
        ("external_id", "c-2", "shop"),
    }


def test_jsonl_rows_are_checked_one_by_one(api: Api):
    content = "\n".join(
        [
            json.dumps({"name": "Fine", "email": "fine@example.com"}),
            "{not json",
            json.dumps(["a", "list"]),
            json.dumps({"email": "extra@example.com", "favourite_colour": "blue"}),
            json.dumps({"email": "x" * 400 + "@example.com"}),
            json.dumps({"email": "attrs@example.com", "attributes": "nope"}),
        ]
    )
    report = run_import(api, "jsonl", content)
    assert (report["rows"], report["created"], report["rejected"]) == (6, 1, 5)
    assert {(e["row"], e["field"]) for e in report["errors"]} == {
        (2, "row"),
        (3, "row"),
        (4, "favourite_colour"),
        (5, "email"),
        (6, "attributes"),
    }


def test_dry_run_validates_without_writing(api: Api):
    report = run_import(api, "csv", "email,name\nd1@example.com,D One\nnot-an-email,D Two\n", dry_run=True)
    assert (report["status"], report["dry_run"], report["created"], report["rejected"]) == ("validated", True, 1, 1)
    assert report["batches"] == 0
    assert contacts_by_email(api) == {}
    assert events_of(api, "crm.import.committed") == []


def test_bad_files_are_400_with_the_field(api: Api):
    field_error(api, api.post("/v1/cdp/imports", json={"format": "xml", "content": "x"}), "body.format")
    field_error(api, api.post("/v1/cdp/imports", json={"format": "csv", "content": ""}), "body.content")
    field_error(
        api, api.post("/v1/cdp/imports", json={"format": "csv", "content": "email,shoe_size\n"}), "body.content"
    )
    field_error(api, api.post("/v1/cdp/imports", json={"format": "csv", "content": "email,email\n"}), "body.content")
    field_error(api, api.post("/v1/cdp/imports", json={"format": "csv", "content": "email\n"}), "body.content")
    many = "email\n" + "".join(f"m{n}@example.com\n" for n in range(imports.MAX_ROWS + 1))
    field_error(api, api.post("/v1/cdp/imports", json={"format": "csv", "content": many}), "body.content")
    assert api.get("/v1/cdp/imports").json()["data"] == []


def test_batches_hold_at_most_100_items_and_commit_all_or_nothing(api: Api, monkeypatch: pytest.MonkeyPatch):
    sizes: list[int] = []
    real = Store.transact

    def counting(self: Store, ops: Any) -> None:
        ops = list(ops)
        sizes.append(len(ops))
        real(self, ops)

    monkeypatch.setattr(Store, "transact", counting)
    rows = "email,name\n" + "".join(f"b{n}@example.com,B {n}\n" for n in range(60))
    report = run_import(api, "csv", rows)
    assert report["created"] == 60 and report["batches"] >= 3
    # per row: contact, sentinel, 3 search rows (the name's two words, the e-mail), event; no counter (the stream's)
    assert max(sizes) <= 100 and sum(sizes[: report["batches"]]) == 60 * 6
    assert len(contacts_by_email(api)) == 60

    # a batch the store refuses twice leaves none of its rows behind, and the report says which rows
    calls = {"n": 0}

    def failing_second_batch(self: Store, ops: Any) -> None:
        ops = list(ops)
        if len(ops) > 2:
            calls["n"] += 1
            if calls["n"] >= 2:
                raise ServiceUnavailable("The data store is busy; retry shortly.")
        real(self, ops)

    monkeypatch.setattr(Store, "transact", failing_second_batch)
    rows = "email\n" + "".join(f"c{n}@example.com\n" for n in range(40))
    report = run_import(api, "csv", rows)
    assert report["status"] == "partial" and report["batches"] == 1, (report, calls)
    committed_rows = report["created"]
    assert 0 < committed_rows < 40 and report["rejected"] == 40 - committed_rows
    assert all(e["field"] == "row" and e["message"].startswith("was not committed") for e in report["errors"])
    stored = {e for e in contacts_by_email(api) if e.startswith("c")}
    failed_rows = {e["row"] for e in report["errors"]}
    assert stored == {f"c{n - 1}@example.com" for n in range(1, 41) if n not in failed_rows}
    created = sorted(e["payload"]["created"] for e in events_of(api, "crm.import.committed"))
    assert created == sorted([60, committed_rows])
