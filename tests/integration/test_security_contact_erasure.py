"""`DELETE /v1/contacts/{id}` erases the person (issue 19 finding 8, issue 20; CONVENTIONS "Tenant safety and data
lifecycle"): the request answers 204 and leaves a tombstone (reads 404 at once, identities free), then the erasure
cascade (`switchboard.contacts.erasure`, driven by the internal `contact.erasure` event through
CdpSegmentEventsQueue → functions/cdp_segments) erases every item that mentions the person in bounded chunks.
After it, a scan of the whole table finds none of the person's phone, e-mail, name or message text anywhere, and
the contact id only on items that carry nothing else about the person; the counts are true again."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3

from functions.cdp_segments.app import handler as segments_handler
from switchboard import clock
from switchboard.config import get_settings
from switchboard.contacts import counter, erasure
from switchboard.messaging import messages
from switchboard.store import get_store
from tests.helpers import run_counters
from tests.integration.support import Api
from tests.integration.test_cdp import contact, ok
from tests.integration.test_webhooks import Pipeline, create_endpoint

QUEUE = "CdpSegmentEventsQueue"
PHONE = "14155550432"
EMAIL = "grace.hopper@example.com"
NAME = "Grace Hopper"
TEXTS = ["Outbound secret about COBOL", "Inbound reply about compilers", "another inbound line nanoseconds"]
# Items that may keep the contact id after the erasure, each with nothing else about the person: the tombstone, the
# conversation row and its channel/contact pair (anonymised: no preview), the audit entry of the deletion, the
# events the erasure itself emits (segment exits, its own continuation) and their webhook deliveries, and the
# counters' tombstone of the contact (`contacts.counter`: the id alone, expiring after two days).
MAY_KEEP_ID = {
    "ContactErasure",
    "Conversation",
    "ConversationKey",
    "AuditLog",
    "Event",
    "WebhookDelivery",
    "WebhookEvent",  # a payload cut to its ids, `redacted: true`
    "ContactTally",
    "SegmentMemberTally",  # ids only, `member: false` and a TTL of 2 days once counted out
}


def scan_all() -> list[dict[str, Any]]:
    """Every item of the single table and of DeliveriesTable (webhook deliveries and their events' payloads)."""
    client = boto3.client("dynamodb")
    items: list[dict[str, Any]] = []
    for table in (get_store().table_name, get_settings().deliveries_table_name):
        for page in client.get_paginator("scan").paginate(TableName=table):
            items += page["Items"]
    return items


def run_cascade(pipeline: Pipeline, rounds: int = 50) -> int:
    """Publish outbox items and feed the segment queue to its consumer until nothing is left, erasures' second passes
    included (the hourly schedule releasing them, its clock moved past `RECHECK_AFTER`); → consumer rounds."""
    for n in range(rounds):
        pipeline.publish()
        records = pipeline.receive(QUEUE)
        if not records:
            later = clock.now() + erasure.RECHECK_AFTER + timedelta(minutes=1)
            if erasure.release_settled(get_store(), now=later):
                continue
            return n
        assert pipeline.invoke(segments_handler, QUEUE, records) == {"batchItemFailures": []}
    raise AssertionError("the erasure did not finish")


def test_deleting_a_contact_erases_every_item_that_mentions_the_person(api: Api):
    pipeline = Pipeline(api)
    create_endpoint(api, "http://127.0.0.1:9/hook")  # deliveries are stored with the event body
    channel = ok(api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"}), 201)
    ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    ok(api.post("/v1/cdp/lifecycle-stages", json={"key": "lead", "name": "Lead"}), 201)
    ok(
        api.post(
            "/v1/cdp/object-types",
            json={
                "key": "deal",
                "name": "Deal",
                "display_field": "title",
                "fields": [{"key": "title", "label": "Title", "type": "text", "required": True}],
            },
        ),
        201,
    )
    rules = {"field": "attributes.plan", "op": "eq", "value": "pro"}
    segment = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": rules}), 201)
    other = contact(api, name="Someone Else", email="else@example.com", attributes={"plan": "pro"})

    person = contact(
        api,
        name=NAME,
        phone=f"+{PHONE}",
        email=EMAIL,
        company="Navy",
        attributes={"plan": "pro"},
        identities=[{"type": "external_id", "source": "crm", "value": "grace-42"}],
    )
    ct = person["id"]
    ok(api.post(f"/v1/contacts/{ct}/notes", json={"body": "Grace prefers calls"}), 201)
    ok(api.post(f"/v1/contacts/{ct}/tags", json={"name": "vip"}), 201)
    api.put(f"/v1/contacts/{ct}/consent/whatsapp", json={"status": "opted_in", "source": "web"})
    ok(api.post(f"/v1/contacts/{ct}/suppressions", json={"channel": "sms", "reason": "bounced"}), 201)
    ok(api.put(f"/v1/cdp/contacts/{ct}/lifecycle-stage", json={"stage": "lead", "reason": "signup"}))
    ingest = {"events": [{"event_id": "e-1", "name": "viewed_pricing", "contact_id": ct, "properties": {"who": NAME}}]}
    assert ok(api.post("/v1/cdp/events", json=ingest))["accepted"] == 1
    deal = {"object_type_id": "deal", "contact_id": ct, "properties": {"title": f"Deal with {NAME}"}}
    record = ok(api.post("/v1/cdp/contact-objects", json=deal), 201)
    ok(api.post(f"/v1/cdp/contact-objects/{record['id']}/comments", json={"body": f"{NAME} called"}), 201)
    theirs = {"object_type_id": "deal", "contact_id": other["id"], "properties": {"title": "Their deal"}}
    their_record = ok(api.post("/v1/cdp/contact-objects", json=theirs), 201)
    link = f"/v1/cdp/contact-objects/{their_record['id']}/relationships/{ct}"
    assert api.put(link, json={"label": "referred_by"}).status_code in (200, 201)
    sent = api.post("/v1/messages", json={"channel_id": channel["id"], "contact_id": ct, "text": {"body": TEXTS[0]}})
    assert sent.status_code == 202, sent.text
    for text in TEXTS[1:]:
        inbound = {"from_phone": f"+{PHONE}", "text": text, "name": NAME}
        assert api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json=inbound).status_code == 202
    cart = {
        "catalog_id": "1",
        "product_items": [{"product_retailer_id": "mug", "quantity": 1, "item_price": 9, "currency": "USD"}],
    }
    order_id = ok(
        api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": f"+{PHONE}", "order": cart}), 202
    )["order_id"]
    assert ok(api.get("/v1/orders", params={"contact_id": ct}))[0]["id"] == order_id
    pipeline.fan_out()  # webhook deliveries of message.new / contact.updated … with their bodies
    run_cascade(pipeline)  # segment membership of both contacts
    run_counters()
    assert ok(api.get(f"/v1/cdp/segments/{segment['id']}"))["member_count"] == 2
    conversation = ok(api.get("/v1/conversations"))[0]

    mentions_before = [i for i in scan_all() if _mentions(i, ct)]
    assert len(mentions_before) > 20, len(mentions_before)
    payloads = [i for i in scan_all() if i.get("entity", {}).get("S") == "WebhookEvent" and PHONE in json.dumps(i)]
    assert payloads  # the person's number in webhook payloads, before the erasure

    assert api.delete(f"/v1/contacts/{ct}").status_code == 204
    # At once: the contact reads as gone, by id and by identity, and its identities are free for someone new.
    api.assert_error(api.get(f"/v1/contacts/{ct}"), 404, "not_found")
    api.assert_error(
        api.post("/v1/contacts/resolve", json={"identifiers": [{"type": "email", "value": EMAIL}]}), 404, "not_found"
    )
    api.assert_error(api.get(f"/v1/contacts/phone/{PHONE}"), 404, "not_found")
    assert all(c["id"] != ct for c in ok(api.get("/v1/contacts")))

    run_cascade(pipeline)
    pipeline.fan_out()
    run_counters()

    leftovers = []
    for item in scan_all():
        text = json.dumps(item)
        personal = [needle for needle in (PHONE, EMAIL, NAME, "Grace", "grace-42", *TEXTS) if needle in text]
        entity = item.get("entity", {}).get("S")
        if personal or (ct in text and entity not in MAY_KEEP_ID):
            leftovers.append((item["PK"]["S"], item["SK"]["S"], entity, personal))
    assert not leftovers, leftovers

    # Counts are true: the segment, the organization's contacts.
    assert ok(api.get(f"/v1/cdp/segments/{segment['id']}"))["member_count"] == 1
    members = ok(api.get(f"/v1/cdp/segments/{segment['id']}/members", params={"limit": 100}))
    assert [m["contact_id"] for m in members] == [other["id"]]
    assert counter.contacts_stored(get_store(), api.org_id) == 1
    tally = get_store().get(counter.tally_key(api.org_id, ct), consistent=True)
    assert tally is not None and tally["gone"] and set(tally) == {"PK", "SK", "entity", "gone", "seq", "ttl"}
    # Another contact's record stays, without its link to the erased person.
    assert ok(api.get(f"/v1/cdp/contact-objects/{their_record['id']}"))["id"] == their_record["id"]
    assert ok(api.get(f"/v1/cdp/contact-objects/{their_record['id']}/relationships")) == []
    # The person's order stays for the business's books, without the person.
    kept_order = ok(api.get(f"/v1/orders/{order_id}"))
    assert kept_order["contact_id"] is None and kept_order["total_amount"] == 9
    assert ok(api.get("/v1/orders", params={"contact_id": ct})) == []
    # The conversation stays, anonymised; its messages stay without text, media or the person's number.
    kept = ok(api.get(f"/v1/conversations/{conversation['id']}"))
    assert not kept.get("last_message_preview")
    tombstone = get_store().get(erasure.tombstone_key(api.org_id, ct), consistent=True)
    assert tombstone is not None and tombstone["status"] == "erased"


def _mentions(item: dict[str, Any], contact_id: str) -> bool:
    text = json.dumps(item)
    return any(needle in text for needle in (contact_id, PHONE, EMAIL, NAME, *TEXTS))


def test_the_identities_are_free_at_once_and_a_new_contact_can_take_them(api: Api):
    person = contact(api, name=NAME, phone=f"+{PHONE}", email=EMAIL)
    assert api.delete(f"/v1/contacts/{person['id']}").status_code == 204
    again = api.post("/v1/contacts", json={"name": "New Owner", "phone": f"+{PHONE}", "email": EMAIL})
    assert again.status_code == 201, again.text
    assert again.json()["data"]["id"] != person["id"]
    api.assert_error(api.delete(f"/v1/contacts/{person['id']}"), 404, "not_found")


def test_a_contact_with_150_identities_deletes(api: Api, monkeypatch):
    """Issue 20: the delete was one transaction per ~95 identities (500 past 100 operations). The cascade here runs
    two chunks per event, so it continues through several `contact.erasure` events."""
    monkeypatch.setattr(erasure, "CHUNKS_PER_RUN", 2)
    pipeline = Pipeline(api)
    person = contact(api, name=NAME, email=EMAIL)
    for start in range(0, 160, 20):
        batch = [{"type": "external_id", "source": "crm", "value": f"grace-{n}"} for n in range(start, start + 20)]
        ok(api.post("/v1/contacts", json={"email": EMAIL, "identities": batch}))
    assert len(ok(api.get(f"/v1/contacts/{person['id']}"))["identities"]) == 161
    assert api.delete(f"/v1/contacts/{person['id']}").status_code == 204
    # Identities not yet released resolve as not found, and a new contact may claim them before the cascade runs.
    late = {"identifiers": [{"type": "external_id", "source": "crm", "value": "grace-149"}]}
    api.assert_error(api.post("/v1/contacts/resolve", json=late), 404, "not_found")
    claim = {"name": "Claimer", "identities": [{"type": "external_id", "source": "crm", "value": "grace-148"}]}
    assert api.post("/v1/contacts", json=claim).status_code == 201
    assert run_cascade(pipeline) > 3  # continued by its own events
    left = [i for i in scan_all() if "grace-" in json.dumps(i) and "grace-148" not in json.dumps(i)]
    assert not left, left
    tombstone = get_store().get(erasure.tombstone_key(api.org_id, person["id"]), consistent=True)
    assert tombstone["status"] == "erased" and "pending_identities" not in tombstone and "needles" not in tombstone


def test_identities_sharing_one_sentinel_delete_in_one_transaction(api: Api):
    """phone, whatsapp and wa_id of one number share the sentinel `IDENT#phone#<digits>`: the delete releases it
    once and the number is free for a new contact."""
    shared = [{"type": "whatsapp", "value": f"{PHONE}@s.whatsapp.net"}, {"type": "wa_id", "value": PHONE}]
    person = contact(api, name=NAME, phone=f"+{PHONE}", identities=shared)
    assert len(person["identities"]) >= 1
    assert api.delete(f"/v1/contacts/{person['id']}").status_code == 204
    assert erasure.drive(get_store(), api.org_id, person["id"])
    assert api.post("/v1/contacts", json={"phone": f"+{PHONE}"}).status_code == 201


def test_the_erasure_deletes_the_media_of_the_persons_inbound_messages(api: Api):
    """Inbound media is kept in the bucket under `media/<org>/<channel>/<media id>`: the erasure (CdpSegmentsFunction)
    deletes it, which its role must be granted (the IAM check fails this test otherwise)."""
    pipeline = Pipeline(api)
    channel = ok(api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"}), 201)
    ok(api.post(f"/v1/channels/{channel['id']}/connect"))
    received = api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": f"+{PHONE}", "text": "a"})
    assert received.status_code == 202, received.text
    accepted = received.json()["data"]
    # as a provider's inbound image is stored: the message names its media, the bytes are in the bucket
    store, s3, bucket = get_store(), boto3.client("s3"), get_settings().media_bucket
    message = messages.get_item(store, api.org_id, accepted["message_id"], consistent=True)
    store.update(
        {"PK": message["PK"], "SK": message["SK"]},
        "SET media = :media",
        values={":media": {"id": "wamedia-1", "mime_type": "image/jpeg"}},
    )
    key = f"media/{api.org_id}/{channel['id']}/wamedia-1"
    s3.put_object(Bucket=bucket, Key=key, Body=b"\xff\xd8\xff")

    assert api.delete(f"/v1/contacts/{accepted['contact_id']}").status_code == 204
    run_cascade(pipeline)
    assert s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount") == 0
    erased = messages.get_item(store, api.org_id, accepted["message_id"], consistent=True)
    assert erased["erased"] is True and erased.get("media") is None
