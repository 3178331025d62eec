"""Billing and settings over HTTP against the local stack: messages sent through the real pipeline (stream →
bus → queue → message_sender) are metered per channel, the month's invoice is generated from that usage, issued
(its e-mail reaches the local outbox), paid, and refuses a further transition; integrations keep their secrets
masked; notification preferences and the owner-only billing area answer as documented."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.e2e


def _wait(fn, *, timeout: float = 30.0, every: float = 0.2):
    return wait_until(fn, timeout=timeout, every=every)


def _sent_on(client, channel_id: str) -> int:
    usage = client.get("/v1/settings/billing").json()["data"]["usage"]
    return next((c["messages_sent"] for c in usage["channels"] if c["channel_id"] == channel_id), 0)


def test_metered_usage_to_a_paid_invoice_over_http(local_only):
    tag = uuid.uuid4().hex[:6]
    billing_email = f"billing-{tag}@example.com"
    period = datetime.now(UTC).strftime("%Y-%m")
    with local_only.client() as client:
        ch = client.post("/v1/channels", json={"name": f"billing-{tag}", "platform": "sandbox"}).json()["data"]
        client.post(f"/v1/channels/{ch['id']}/connect").raise_for_status()
        for n in range(2):
            phone = f"+14155{str(uuid.uuid4().int)[:6]}"  # an exchange starting 5: a valid US number
            sent = client.post("/v1/messages", json={"channel_id": ch["id"], "to": phone, "text": {"body": f"#{n}"}})
            assert sent.status_code == 202, sent.text
        assert _wait(lambda: _sent_on(client, ch["id"]) == 2)

        profile = {
            "legal_name": f"E2E {tag} GmbH",
            "billing_email": billing_email,
            "billing_phone": "+49 30 901820",
            "address_line_1": "Unter den Linden 1",
            "city": "Berlin",
            "postal_code": "10117",
            "country_code": "de",
            "tax_name": "USt",
        }
        updated = client.patch(
            "/v1/settings/billing",
            json={"plan": "growth", "currency": "EUR", "tax_rate": 19, "billing_profile": profile},
        )
        assert updated.status_code == 200, updated.text
        assert updated.json()["data"]["billing_profile"]["billing_phone"] == "4930901820"

        created = client.post("/v1/settings/billing/invoices", json={"period": period})
        assert created.status_code == 201, created.text
        invoice = created.json()["data"]
        assert invoice["status"] == "draft" and invoice["currency"] == "EUR" and invoice["target_plan"] == "growth"
        mine = [line for line in invoice["lines"] if f"billing-{tag}" in line["description"]]
        assert len(mine) == 1 and mine[0]["quantity"] == 2 and mine[0]["unit_amount"] == 0.0046
        subtotal = sum(Decimal(str(line["line_total"])) for line in invoice["lines"])
        assert Decimal(str(invoice["subtotal_amount"])) == subtotal
        tax = (subtotal * Decimal("0.19")).quantize(Decimal("0.01"), rounding="ROUND_HALF_UP")
        assert Decimal(str(invoice["tax_amount"])) == tax
        assert Decimal(str(invoice["total_amount"])) == subtotal + tax
        again = client.post("/v1/settings/billing/invoices", json={"period": period})
        assert again.status_code == 200 and again.json()["data"]["id"] == invoice["id"]

        path = f"/v1/settings/billing/invoices/{invoice['id']}"
        issued = client.post(f"{path}/finalize").json()["data"]
        assert issued["status"] == "open" and issued["issued_at"] and issued["due_at"] > issued["issued_at"]
        mail = _wait(lambda: client.get("/_local/mail", params={"to": billing_email}).json()["data"])
        assert invoice["invoice_number"] in mail[0]["subject"]
        paid = client.post(f"{path}/pay", json={"reference_id": f"sepa-{tag}"})
        assert paid.status_code == 200 and paid.json()["data"]["status"] == "paid", paid.text
        refused = client.post(f"{path}/void")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "conflict"
        listed = client.get("/v1/settings/billing/invoices", params={"status": "paid"}).json()["data"]
        assert invoice["id"] in [i["id"] for i in listed]

        token = "pat-na1-" + uuid.uuid4().hex
        integration = client.post(
            "/v1/settings/integrations",
            json={
                "type": "hubspot",
                "name": f"crm-{tag}",
                "config": {"portal_id": "424242"},
                "secrets": {"access_token": token},
            },
        )
        assert integration.status_code == 201, integration.text
        assert integration.json()["data"]["secrets"] == {"access_token": "••••" + token[-4:]}
        assert token not in client.get("/v1/settings/integrations").text

        prefs = client.get("/v1/settings/notifications").json()["data"]
        assert any(p["role"] == "owner" and p["emails"]["billing"] for p in prefs)

        admin_key = client.post("/v1/api-keys", json={"name": f"admin-{tag}", "role": "admin"}).json()["data"]["key"]
    with local_only.client(admin_key) as admin:
        forbidden = admin.get("/v1/settings/billing/invoices")
        assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
        assert admin.get("/v1/settings/integrations").status_code == 200


def test_racing_generations_make_one_invoice_per_period(local_only):
    """No resolver in between: 8 generations of one period interleave their DynamoDB requests against the stack's
    AWS emulator. The period sentinel lets one transaction commit; the others answer the winner's invoice, and the
    invoice number counter moves exactly once."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    from switchboard.api.auth import AuthContext
    from switchboard.billing import invoices
    from switchboard.billing.models import InvoiceGenerate
    from switchboard.store import Store

    client = boto3.client(
        "dynamodb",
        endpoint_url=local_only.aws_endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    (table,) = [t for t in client.list_tables()["TableNames"] if t.endswith("Table") or "table" in t.lower()][:1]
    store = Store(table, client=client)
    org = local_only.organization_id
    auth = AuthContext("api_key", "key_race", None, org, "owner", "key_race")
    period = "2025-0" + str(uuid.uuid4().int % 9 + 1)  # a past month no other test bills
    before = (store.get({"PK": f"ORG#{org}", "SK": "BILLING#invoice_seq"}, consistent=True) or {}).get("last", 0)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: invoices.generate(store, auth, InvoiceGenerate(period=period)), range(8)))
    assert len({invoice.id for invoice, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    after = store.get({"PK": f"ORG#{org}", "SK": "BILLING#invoice_seq"}, consistent=True)
    assert after is not None and after["last"] == before + 1
    stored = store.query_all(f"ORG#{org}", sk_prefix="INVOICE#")
    assert [i["id"] for i in stored if i["period"] == period] == [results[0][0].id]
