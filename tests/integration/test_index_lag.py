"""Global secondary indexes lag their table on AWS (issue 28 finding 10); moto updates them in the same call. With
`lagging_indexes` (local/index_lag.py) an index read sees the table as it was at the last `settle()`, so each test
writes, then acts before the index has caught up, as a request may on AWS. Every decision that used to rest on an
index read alone (check-then-act) is checked here: deleting an object type or a lifecycle stage still in use, and a
contact erasure finding what was written just before the deletion."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from local.index_lag import IndexLag
from switchboard import clock
from switchboard.cdp import objects
from switchboard.contacts import erasure
from switchboard.contacts import repository as contact_repo
from switchboard.store import get_store
from tests.integration.support import Api
from tests.integration.test_cdp import contact, ok


def deal_type(api: Api) -> dict[str, Any]:
    body = {"key": "deal", "name": "Deal", "fields": [{"key": "title", "label": "Title", "type": "text"}]}
    return ok(api.post("/v1/cdp/object-types", json=body), 201)  # type: ignore[no-any-return]


def record(api: Api, contact_id: str, title: str = "Big deal") -> dict[str, Any]:
    body = {"object_type_id": "deal", "contact_id": contact_id, "properties": {"title": title}}
    return ok(api.post("/v1/cdp/contact-objects", json=body), 201)  # type: ignore[no-any-return]


def test_the_lag_mode_hides_what_the_index_has_not_caught_up_with(api: Api, lagging_indexes: IndexLag):
    deal_type(api)
    person = contact(api, name="Ada", email="ada@example.com")
    lagging_indexes.settle()
    deal = record(api, person["id"])
    store, org = get_store(), api.org_id
    assert store.get(objects.object_key(org, deal["id"])) is not None  # the table has it at once
    assert store.query(objects.contact_pk(org, person["id"]), index="GSI2").items == []  # its index not yet
    lagging_indexes.settle()
    assert [i["id"] for i in store.query(objects.contact_pk(org, person["id"]), index="GSI2").items] == [deal["id"]]
    assert api.delete(f"/v1/cdp/contact-objects/{deal['id']}").status_code == 204
    assert store.query(objects.contact_pk(org, person["id"]), index="GSI2").items  # a deleted item lingers there


def test_an_object_type_whose_record_was_just_written_cannot_be_deleted(api: Api, lagging_indexes: IndexLag):
    """The record's entry in its type is written with it and read consistently: the type stays (409) although its
    index of records does not show the record yet."""
    deal = deal_type(api)
    person = contact(api, name="Ada", email="ada@example.com")
    lagging_indexes.settle()
    written = record(api, person["id"])
    api.assert_error(api.delete(f"/v1/cdp/object-types/{deal['id']}"), 409, "conflict")
    assert ok(api.get(f"/v1/cdp/contact-objects/{written['id']}"))["object_type_id"] == deal["id"]
    # the refused deletion leaves the type open for records
    record(api, person["id"], "Another deal")


def test_an_object_type_whose_last_record_just_went_can_be_deleted(api: Api, lagging_indexes: IndexLag):
    """The other way round: the index still lists the deleted record, the consistent read does not."""
    deal = deal_type(api)
    person = contact(api, name="Ada", email="ada@example.com")
    written = record(api, person["id"])
    lagging_indexes.settle()
    assert api.delete(f"/v1/cdp/contact-objects/{written['id']}").status_code == 204
    assert api.delete(f"/v1/cdp/object-types/{deal['id']}").status_code == 204
    api.assert_error(api.get(f"/v1/cdp/object-types/{deal['id']}"), 404, "not_found")


def test_a_record_written_before_entries_existed_still_keeps_its_type(api: Api):
    """A record without its entry (written before entries existed) is found through the type's index and confirmed
    by a consistent read."""
    deal = deal_type(api)
    person = contact(api, name="Ada", email="ada@example.com")
    written = record(api, person["id"])
    get_store().delete(objects.type_entry_key(api.org_id, deal["id"], written["id"]))
    api.assert_error(api.delete(f"/v1/cdp/object-types/{deal['id']}"), 409, "conflict")


def test_a_type_being_deleted_takes_no_new_record(api: Api):
    """Between the deletion's mark and its end a record's creation fails against the mark, so it can never slip in
    after the deletion checked for records."""
    deal = deal_type(api)
    person = contact(api, name="Ada", email="ada@example.com")
    mark = clock.iso(clock.now() + objects.DELETE_LEASE)
    get_store().update(objects.type_key(api.org_id, deal["id"]), "SET deleting_until = :m", values={":m": mark})
    body = {"object_type_id": "deal", "contact_id": person["id"], "properties": {"title": "Late"}}
    api.assert_error(api.post("/v1/cdp/contact-objects", json=body), 409, "conflict")
    api.assert_error(api.delete(f"/v1/cdp/object-types/{deal['id']}"), 409, "conflict")  # one deletion at a time


def test_a_stage_a_contact_just_entered_cannot_be_deleted(api: Api, lagging_indexes: IndexLag):
    stage = ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "vip", "name": "VIP"}), 201)
    person = contact(api, name="Ada", email="ada@example.com")
    lagging_indexes.settle()
    ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": "vip"}))
    api.assert_error(api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}"), 409, "conflict")
    # a contact created in the stage, the same
    ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": None}))
    lagging_indexes.settle()
    contact(api, name="Bo", email="bo@example.com", lifecycle_stage="vip")
    api.assert_error(api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}"), 409, "conflict")


def test_a_stage_its_last_contact_just_left_can_be_deleted(api: Api, lagging_indexes: IndexLag):
    stage = ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "vip", "name": "VIP"}), 201)
    person = contact(api, name="Ada", email="ada@example.com", lifecycle_stage="vip")
    lagging_indexes.settle()
    ok(api.put(f"/v1/cdp/contacts/{person['id']}/lifecycle-stage", json={"stage": None}))
    assert api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}").status_code == 204


def test_a_contact_in_a_stage_since_before_entries_existed_still_keeps_it(api: Api):
    stage = ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "vip", "name": "VIP"}), 201)
    person = contact(api, name="Ada", email="ada@example.com", lifecycle_stage="vip")
    get_store().delete(contact_repo.stage_entry_key(api.org_id, "vip", person["id"]))
    api.assert_error(api.delete(f"/v1/cdp/lifecycle-stages/{stage['id']}"), 409, "conflict")


def test_an_erasure_finds_what_was_written_just_before_the_deletion(api: Api, lagging_indexes: IndexLag):
    """A record and an inbound message written a moment before the contact's deletion are not in their indexes when
    the erasure's first pass runs; its second pass, once the indexes have caught up, erases them."""
    channel = ok(api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"}), 201)
    ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    deal_type(api)
    phone = "14155554321"
    person = contact(api, name="Grace Hopper", phone=f"+{phone}")
    inbound = {"from_phone": f"+{phone}", "text": "the first line", "name": "Grace Hopper"}
    assert api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json=inbound).status_code == 202
    lagging_indexes.settle()  # the conversation and its first message are indexed
    deal = record(api, person["id"], "Deal with Grace Hopper")
    late = {**inbound, "text": "a late line about compilers"}
    assert api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json=late).status_code == 202
    store, org, ct = get_store(), api.org_id, person["id"]

    assert api.delete(f"/v1/contacts/{ct}").status_code == 204
    assert erasure.drive(store, org, ct)  # the first pass: the indexes do not list the last writes yet
    assert store.get(objects.object_key(org, deal["id"]), consistent=True) is not None
    tombstone = store.get(erasure.tombstone_key(org, ct), consistent=True)
    assert tombstone["status"] == "erasing" and tombstone["GSI1PK"] == "ERASURES#settling"
    assert erasure.release_settled(store) == []  # not before RECHECK_AFTER

    lagging_indexes.settle()
    later = clock.now() + erasure.RECHECK_AFTER + timedelta(minutes=1)
    assert erasure.release_settled(store, now=later) == [ct]
    assert erasure.drive(store, org, ct)
    assert store.get(objects.object_key(org, deal["id"]), consistent=True) is None
    assert store.query(f"ORG#{org}", sk_prefix="CDPOTYPEREC#", consistent=True).items == []
    texts = [m.get("text") for m in store.query_all(f"ORG#{org}", sk_prefix="MSG#")]
    for shard in range(16):
        texts += [m.get("text") for m in store.query_all(f"ORG#{org}#{shard}", sk_prefix="MSG#")]
    assert texts and "a late line about compilers" not in texts and "the first line" not in texts
    done = store.get(erasure.tombstone_key(org, ct), consistent=True)
    assert done["status"] == "erased" and "GSI1PK" not in done and "needles" not in done


def test_the_local_stacks_lag_settles_by_itself_once_its_view_is_older_than_the_lag(api: Api):
    """`LOCAL_INDEX_LAG_MS` (local/stack.py): an index read may miss what was written in the last N ms."""
    deal_type(api)
    person = contact(api, name="Ada", email="ada@example.com")
    store, org = get_store(), api.org_id
    with IndexLag(lag_ms=3_600_000):  # an hour: nothing written since it began shows in the index
        deal = record(api, person["id"])
        assert store.query(objects.contact_pk(org, person["id"]), index="GSI2").items == []
    with IndexLag(lag_ms=0):  # every read finds the view too old and settles first
        later = record(api, person["id"], "Later deal")
        found = store.query(objects.contact_pk(org, person["id"]), index="GSI2").items
        assert {i["id"] for i in found} == {deal["id"], later["id"]}
