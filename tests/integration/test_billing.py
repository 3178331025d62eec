"""Billing through the gateway: metered usage (messages sent per channel, counted once when a message becomes
`sent`), the billing profile's validation, invoices generated per period with consistent amounts, their state
transitions (allowed and refused), idempotent generation, owner-only access and tenant isolation."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from switchboard import clock
from switchboard.events.outbox import stored_events
from switchboard.messaging import messages
from switchboard.store import get_store
from tests.helpers import run_usage_meter
from tests.integration.support import Api

BILLING = "/v1/settings/billing"
INVOICES = f"{BILLING}/invoices"
SPEC_FIELDS = {
    "id",
    "invoice_number",
    "status",
    "currency",
    "subtotal_amount",
    "tax_amount",
    "total_amount",
    "issued_at",
    "due_at",
    "paid_at",
    "period_start",
    "period_end",
    "target_plan",
    "latest_reference_id",
    "latest_session_status",
    "notes",
    "billing_profile",
    "lines",
}
PROFILE_FIELDS = {
    "legal_name",
    "billing_email",
    "billing_phone",
    "address_line_1",
    "address_line_2",
    "city",
    "state_or_province",
    "postal_code",
    "country_code",
    "tax_id",
    "tax_name",
}
LINE_FIELDS = {"description", "line_type", "position", "quantity", "unit_amount", "line_total"}
PROFILE = {
    "legal_name": "Acme Trading Ltd",
    "billing_email": "Billing@Acme.example.com",
    "billing_phone": "+44 20 7946 0958",
    "address_line_1": "1 High Street",
    "city": "London",
    "postal_code": "EC1A 1BB",
    "country_code": "gb",
    "tax_id": "GB123456789",
    "tax_name": "VAT",
}


def _channel(api: Api, name: str) -> dict:
    ch = api.post("/v1/channels", json={"name": name, "platform": "sandbox"})
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


def _send_and_deliver(api: Api, channel: dict, to: str) -> str:
    resp = api.post("/v1/messages", json={"channel_id": channel["id"], "to": to, "text": {"body": "hi"}})
    assert resp.status_code == 202, resp.text
    message_id = resp.json()["data"]["id"]
    outcome = messages.deliver(get_store(), api.org_id, message_id)
    run_usage_meter(api.org_id)  # the stream's usage meter, which follows a send within seconds
    return outcome


def _ok(resp, status: int = 200) -> dict:
    assert resp.status_code == status, resp.text
    return resp.json()["data"]


def _this_period() -> str:
    return clock.now().strftime("%Y-%m")


def _dec(value) -> Decimal:
    return Decimal(str(value))


def assert_amounts_consistent(invoice: dict, places: int = 2) -> None:
    """line_total = quantity x unit_amount (to the minor unit), subtotal = sum of lines, total = subtotal + tax."""
    unit = Decimal(1).scaleb(-places)
    for n, line in enumerate(invoice["lines"], start=1):
        assert set(line) == LINE_FIELDS and line["position"] == n
        product = (_dec(line["quantity"]) * _dec(line["unit_amount"])).quantize(unit, rounding="ROUND_HALF_UP")
        assert _dec(line["line_total"]) == product, line
    subtotal = sum((_dec(line["line_total"]) for line in invoice["lines"]), Decimal(0))
    assert _dec(invoice["subtotal_amount"]) == subtotal
    assert _dec(invoice["total_amount"]) == _dec(invoice["subtotal_amount"]) + _dec(invoice["tax_amount"])


def test_usage_counts_messages_sent_per_channel_exactly_once(api: Api):
    one, two = _channel(api, "Main line"), _channel(api, "Support line")
    assert _send_and_deliver(api, one, "+1 415 555 0101") == "sent"
    assert _send_and_deliver(api, one, "+1 415 555 0102") == "sent"
    assert _send_and_deliver(api, two, "+1 415 555 0103") == "sent"
    assert _send_and_deliver(api, two, "+1 415 555 0000") == "failed"  # refused by the sandbox: not billed
    # A redelivered queue message for a message already sent counts nothing.
    pending = api.post("/v1/messages", json={"channel_id": one["id"], "to": "+14155550104", "text": {"body": "x"}})
    message_id = pending.json()["data"]["id"]
    assert messages.deliver(get_store(), api.org_id, message_id) == "sent"
    assert messages.deliver(get_store(), api.org_id, message_id) == "skipped"
    run_usage_meter(api.org_id)
    run_usage_meter(api.org_id)  # the stream hands a record over again: it is counted once

    usage = _ok(api.get(BILLING))["usage"]
    assert usage["period"] == _this_period()
    assert usage["messages_sent"] == 4
    by_channel = {c["channel_id"]: c for c in usage["channels"]}
    assert by_channel[one["id"]] == {
        "channel_id": one["id"],
        "channel_name": "Main line",
        "platform": "sandbox",
        "messages_sent": 3,
    }
    assert by_channel[two["id"]]["messages_sent"] == 1
    contacts = api.get("/v1/contacts", params={"limit": 100}).json()["data"]
    assert usage["contacts_stored"] == len(contacts) == 5  # every recipient became a contact, the refused one too
    start = clock.parse_iso(usage["period_start"])
    assert start.day == 1 and clock.parse_iso(usage["period_end"]) > clock.now() >= start


def test_billing_settings_defaults_validation_and_audit(api: Api):
    settings = _ok(api.get(BILLING))
    assert settings["plan"]["id"] == "free" and settings["currency"] == "USD" and settings["version"] == 0
    assert settings["billing_profile"] == dict.fromkeys(PROFILE_FIELDS)
    plans = _ok(api.get(f"{BILLING}/plans"))
    assert [p["id"] for p in plans] == ["free", "starter", "growth"]
    assert {p["currency"] for p in plans[1]["prices"]} == {"USD", "EUR", "GBP", "JPY"}

    bad = {
        "billing_email": "not-an-email",
        "country_code": "XX",
        "billing_phone": "+1 12",
        "postal_code": "<script>",
    }
    error = api.assert_error(api.patch(BILLING, json={"billing_profile": bad}), 400, "validation_failed")
    assert {d["field"] for d in error["details"]} == {f"body.billing_profile.{k}" for k in bad}
    for body, field in (
        ({"plan": "platinum"}, "body.plan"),
        ({"currency": "CHF"}, "body.currency"),
        ({"tax_rate": 101}, "body.tax_rate"),
        ({"payment_terms_days": -1}, "body.payment_terms_days"),
        ({"billing_profile": {"legal_name": "x", "shoe_size": 42}}, "body.billing_profile.shoe_size"),
        ({"plan": None}, "body.plan"),
    ):
        error = api.assert_error(api.patch(BILLING, json=body), 400, "validation_failed")
        assert field in {d["field"] for d in error["details"]}, error
    assert _ok(api.get(BILLING))["version"] == 0  # nothing was stored

    updated = _ok(api.patch(BILLING, json={"plan": "starter", "tax_rate": "20", "billing_profile": PROFILE}))
    profile = updated["billing_profile"]
    assert profile["billing_phone"] == "442079460958" and profile["country_code"] == "GB"
    assert profile["billing_email"] == "Billing@acme.example.com"  # the domain normalised, as e-mail validation does
    assert updated["plan"]["id"] == "starter" and updated["tax_rate"] == 20 and updated["version"] == 1
    cleared = _ok(api.patch(BILLING, json={"billing_profile": {"tax_id": None, "city": "Leeds"}}))
    assert cleared["billing_profile"]["tax_id"] is None and cleared["billing_profile"]["city"] == "Leeds"
    assert cleared["billing_profile"]["legal_name"] == "Acme Trading Ltd" and cleared["version"] == 2
    assert _ok(api.patch(BILLING, json={"plan": "starter"}))["version"] == 2  # no change, no write

    audit = _ok(api.get("/v1/audit-logs", params={"action": "billing.updated"}))
    assert len(audit) == 2
    assert audit[0]["before"]["billing_profile"]["tax_id"] == "GB123456789"
    assert audit[0]["after"]["billing_profile"]["city"] == "Leeds"


def test_invoice_from_usage_has_every_field_and_consistent_amounts(api: Api):
    _ok(api.patch(BILLING, json={"plan": "starter", "currency": "EUR", "tax_rate": "19.5", "billing_profile": PROFILE}))
    channel = _channel(api, "Sales")
    for n in range(3):
        assert _send_and_deliver(api, channel, f"+1 415 555 02{n:02d}") == "sent"

    created = api.post(INVOICES, json={"period": _this_period(), "notes": "First one"})
    invoice = _ok(created, 201)
    assert set(invoice) >= SPEC_FIELDS and set(invoice["billing_profile"]) == PROFILE_FIELDS
    assert invoice["status"] == "draft" and invoice["currency"] == "EUR" and invoice["target_plan"] == "starter"
    assert invoice["issued_at"] is None and invoice["due_at"] is None and invoice["paid_at"] is None
    assert invoice["latest_reference_id"] is None and invoice["latest_session_status"] is None
    assert invoice["notes"] == "First one"
    assert invoice["billing_profile"]["legal_name"] == "Acme Trading Ltd"
    assert invoice["invoice_number"].endswith("-00001")
    start, end = clock.parse_iso(invoice["period_start"]), clock.parse_iso(invoice["period_end"])
    assert start.day == 1 and end.day == 1 and start <= clock.now() < end

    lines = invoice["lines"]
    assert [line["line_type"] for line in lines] == ["subscription", "usage", "credit"]
    assert lines[0] == {
        "description": f"Starter plan, {_this_period()}",
        "line_type": "subscription",
        "position": 1,
        "quantity": 1,
        "unit_amount": 45,
        "line_total": 45,
    }
    assert lines[1]["quantity"] == 3 and lines[1]["unit_amount"] == 0.0075 and lines[1]["line_total"] == 0.02
    assert "Sales (sandbox)" in lines[1]["description"]
    assert lines[2]["quantity"] == 3 and lines[2]["unit_amount"] == -0.0075 and lines[2]["line_total"] == -0.02
    assert_amounts_consistent(invoice)
    assert invoice["subtotal_amount"] == 45 and invoice["tax_amount"] == 8.78 and invoice["total_amount"] == 53.78

    # One invoice per period: asking again answers the same invoice.
    again = api.post(INVOICES, json={"period": _this_period()})
    assert _ok(again, 200)["id"] == invoice["id"]
    assert _ok(api.get(f"{INVOICES}/{invoice['id']}")) == invoice
    listed = api.get(INVOICES).json()
    assert [i["id"] for i in listed["data"]] == [invoice["id"]] and listed["meta"]["has_more"] is False

    future = (clock.now() + timedelta(days=40)).strftime("%Y-%m")
    api.assert_error(api.post(INVOICES, json={"period": future}), 400, "validation_failed")
    error = api.assert_error(api.post(INVOICES, json={"period": "2026-13"}), 400, "validation_failed")
    assert error["details"][0]["field"] == "body.period"


def test_invoice_state_transitions_allowed_and_refused(api: Api):
    invoice = _ok(api.post(INVOICES, json={"period": "2026-01"}), 201)  # an empty past month: the base fee only
    assert invoice["target_plan"] == "free" and invoice["total_amount"] == 0
    path = f"{INVOICES}/{invoice['id']}"

    # Drafts can be edited; issuing needs a complete billing profile.
    assert _ok(api.patch(path, json={"notes": "PO 4711"}))["notes"] == "PO 4711"
    error = api.assert_error(api.post(f"{path}/finalize"), 409, "conflict")
    assert {d["field"] for d in error["details"]} >= {"billing_profile.legal_name", "billing_profile.country_code"}
    for action in ("pay", "mark-uncollectible", "checkout"):
        body = {"reference_id": "ref-1"} if action == "pay" else None
        error = api.assert_error(api.post(f"{path}/{action}", json=body), 409, "conflict")
    assert error["details"][0]["status"] == "draft"

    _ok(api.patch(BILLING, json={"billing_profile": PROFILE, "payment_terms_days": 14}))
    opened = _ok(api.post(f"{path}/finalize"))
    assert opened["status"] == "open" and opened["billing_profile"]["legal_name"] == "Acme Trading Ltd"
    issued, due = clock.parse_iso(opened["issued_at"]), clock.parse_iso(opened["due_at"])
    assert due - issued == timedelta(days=30)  # the terms in force when the invoice was generated
    api.assert_error(api.patch(path, json={"notes": "too late"}), 409, "conflict")
    api.assert_error(api.post(f"{path}/finalize"), 409, "conflict")
    mail = api.mail("billing@acme.example.com")
    assert mail and opened["invoice_number"] in mail[0]["subject"]
    assert api.mail("owner@example.com")  # the owner gets billing e-mails by default

    session = _ok(api.post(f"{path}/checkout"))
    assert session["latest_session_status"] == "open" and session["latest_reference_id"].startswith("bps_")
    uncollectible = _ok(api.post(f"{path}/mark-uncollectible", json={"reason": "customer unreachable"}))
    assert uncollectible["status"] == "uncollectible"
    api.assert_error(api.post(f"{path}/pay", json={}), 400, "validation_failed")
    error = api.assert_error(
        api.post(f"{path}/pay", json={"reference_id": "x", "paid_at": "yesterday"}), 400, "validation_failed"
    )
    assert error["details"][0]["field"] == "body.paid_at"
    paid = _ok(api.post(f"{path}/pay", json={"reference_id": "wire-2026-0042"}))
    assert paid["status"] == "paid" and paid["paid_at"] and paid["latest_reference_id"] == "wire-2026-0042"
    assert paid["latest_session_status"] == "complete"
    for action in ("void", "mark-uncollectible", "finalize", "checkout"):
        error = api.assert_error(api.post(f"{path}/{action}"), 409, "conflict")
    assert error["details"][0]["status"] == "paid"

    audit = _ok(api.get("/v1/audit-logs", params={"target_id": invoice["id"], "limit": 100}))
    assert [a["action"] for a in reversed(audit)] == [
        "invoice.created",
        "invoice.updated",
        "invoice.open",
        "invoice.checkout",
        "invoice.uncollectible",
        "invoice.paid",
    ]
    events = [e for e in stored_events(get_store(), api.org_id) if "invoice" in e["event_type"]]
    assert [e["payload"]["status"] for e in events][-1] == "paid"


def test_voiding_frees_the_period_and_numbers_have_no_gaps(api: Api):
    first = _ok(api.post(INVOICES, json={"period": "2026-02"}), 201)
    voided = _ok(api.post(f"{INVOICES}/{first['id']}/void", json={"reason": "wrong plan"}))
    assert voided["status"] == "void"
    api.assert_error(api.post(f"{INVOICES}/{first['id']}/finalize"), 409, "conflict")
    second = _ok(api.post(INVOICES, json={"period": "2026-02"}), 201)
    third = _ok(api.post(INVOICES, json={"period": "2026-03"}), 201)
    assert second["id"] != first["id"]
    numbers = [int(i["invoice_number"].rsplit("-", 1)[1]) for i in (first, second, third)]
    assert numbers == [1, 2, 3]

    page = api.get(INVOICES, params={"limit": 2}).json()
    assert [i["id"] for i in page["data"]] == [third["id"], second["id"]] and page["meta"]["has_more"] is True
    rest = api.get(INVOICES, params={"limit": 2, "cursor": page["meta"]["cursor"]}).json()
    assert [i["id"] for i in rest["data"]] == [first["id"]]
    drafts = api.get(INVOICES, params={"status": "void"}).json()["data"]
    assert [i["id"] for i in drafts] == [first["id"]]
    api.assert_error(api.get(INVOICES, params={"status": "late"}), 400, "validation_failed")
    api.assert_error(
        api.get(INVOICES, params={"limit": 2, "cursor": page["meta"]["cursor"], "status": "draft"}),
        400,
        "validation_failed",
    )


def test_generation_without_a_period_bills_the_previous_month(api: Api):
    invoice = _ok(api.post(INVOICES), 201)
    start = clock.parse_iso(invoice["period_start"])
    assert clock.parse_iso(invoice["period_end"]) <= clock.now() and (clock.now() - start).days < 63


def test_billing_is_owner_only_and_invoices_are_per_organization(api: Api):
    invoice = _ok(api.post(INVOICES, json={"period": "2026-04"}), 201)
    for role in ("admin", "member", "viewer"):
        key = _ok(api.post("/v1/api-keys", json={"name": f"billing-{role}", "role": role}), 201)["key"]
        headers = {"X-Api-Key": key}
        api.assert_error(api.get(BILLING, headers=headers), 403, "forbidden")
        api.assert_error(api.get(f"{INVOICES}/{invoice['id']}", headers=headers), 403, "forbidden")
        api.assert_error(api.post(INVOICES, json={"period": "2026-05"}, headers=headers), 403, "forbidden")

    _, b_session = api.new_org("billing-b@example.com", name="Billing B")
    assert _ok(api.get(INVOICES, headers=b_session)) == []
    for method, suffix, body in (
        ("GET", "", None),
        ("PATCH", "", {"notes": "B was here"}),
        ("POST", "/finalize", None),
        ("POST", "/void", None),
        ("POST", "/pay", {"reference_id": "b"}),
    ):
        resp = api.request(method, f"{INVOICES}/{invoice['id']}{suffix}", headers=b_session, json=body)
        api.assert_error(resp, 404, "not_found")
    b_invoice = _ok(api.post(INVOICES, json={"period": "2026-04"}, headers=b_session), 201)
    assert b_invoice["id"] != invoice["id"]
    assert _ok(api.get(f"{INVOICES}/{invoice['id']}"))["status"] == "draft"


@pytest.mark.parametrize(
    "body",
    [
        {"period": "2026-06", "extra": 1},
        {"notes": "x" * 2001},
        {"period": "0000-01"},  # the fuzzer's: a month of year 0 was a 500
        {"period": "9999-12"},  # its end would be in year 10000
        {"period": "2026-13"},
    ],
)
def test_generation_body_is_validated(api: Api, body: dict):
    api.assert_error(api.post(INVOICES, json=body), 400, "validation_failed")
