"""Integrations and notification preferences through the gateway: the type catalogue, per-type validation with
every problem in the envelope, write-only secrets (masked in every answer, absent from audit entries and logs),
per-member e-mail preferences with role defaults, admin-only access and tenant isolation."""

from __future__ import annotations

import logging

import pytest

from switchboard import sealed
from switchboard.store import get_store
from tests.integration.support import Api, invitation_token

INTEGRATIONS = "/v1/settings/integrations"
NOTIFICATIONS = "/v1/settings/notifications"
SLACK_URL = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXwxyz"
# Loggers of the code under test (botocore's DEBUG output is not ours: it shows the table's items verbatim).
OUR_LOGGERS = ("switchboard", "local")
SHOPIFY_TOKEN = "shpat_0123456789abcdef0123456789abCDEF"


def _ok(resp, status: int = 200):
    assert resp.status_code == status, resp.text
    return resp.json()["data"] if resp.content else None


def test_catalog_lists_types_and_their_fields(api: Api):
    catalog = {t["type"]: t for t in _ok(api.get(f"{INTEGRATIONS}/catalog"))}
    assert set(catalog) == {"slack", "hubspot", "shopify", "smtp"}
    fields = {f["name"]: f for f in catalog["smtp"]["fields"]}
    assert fields["password"]["secret"] is True and fields["host"]["required"] is True
    assert fields["username"]["required"] is False


def test_integration_crud_with_masked_secrets(api: Api, caplog):
    for name in OUR_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    created = _ok(
        api.post(
            INTEGRATIONS,
            json={
                "type": "shopify",
                "name": "Main store",
                "config": {"shop_domain": "Acme-Store.myshopify.com"},
                "secrets": {"access_token": SHOPIFY_TOKEN},
            },
        ),
        201,
    )
    assert created["config"] == {"shop_domain": "acme-store.myshopify.com"}
    assert created["secrets"] == {"access_token": "••••CDEF"} and created["enabled"] is True
    assert created["version"] == 1 and created["id"].startswith("int_")
    path = f"{INTEGRATIONS}/{created['id']}"
    assert _ok(api.get(path)) == created
    listed = api.get(INTEGRATIONS).json()
    assert [i["id"] for i in listed["data"]] == [created["id"]] and listed["meta"]["total"] == 1

    slack = _ok(
        api.post(INTEGRATIONS, json={"type": "slack", "name": "Alerts", "secrets": {"webhook_url": SLACK_URL}}), 201
    )
    assert slack["secrets"] == {"webhook_url": "••••wxyz"} and slack["config"] == {}

    renamed = _ok(api.patch(path, json={"name": "Store", "enabled": False}))
    assert renamed["name"] == "Store" and renamed["enabled"] is False and renamed["version"] == 2
    new_token = "shpat_ffffffffffffffffffffffffffff9999"
    rotated = _ok(api.patch(path, json={"secrets": {"access_token": new_token}}))
    assert rotated["secrets"] == {"access_token": "••••9999"} and rotated["version"] == 3
    assert _ok(api.patch(path, json={"name": "Store"}))["version"] == 3  # nothing changed, nothing written
    error = api.assert_error(api.patch(path, json={"secrets": {"access_token": None}}), 400, "validation_failed")
    assert error["details"] == [{"field": "body.secrets.access_token", "message": "is required"}]
    api.assert_error(api.patch(path, json={"enabled": None}), 400, "validation_failed")

    # Secrets never leave in plain text: not in answers, audit entries or log lines.
    audit = api.get("/v1/audit-logs", params={"target_type": "integration", "limit": 100}).json()
    actions = [a["action"] for a in audit["data"]]
    assert actions.count("integration.created") == 2 and actions.count("integration.updated") == 2
    rotation = next(a for a in audit["data"] if a["after"] and a["after"].get("secrets_changed"))
    assert rotation["after"]["secrets_changed"] == ["access_token"]
    ours = "\n".join(r.getMessage() + str(r.__dict__) for r in caplog.records if r.name.startswith(OUR_LOGGERS))
    assert ours  # the requests were logged
    everything = str(audit) + str(api.get(INTEGRATIONS).json()) + ours
    for secret in (SHOPIFY_TOKEN, new_token, SLACK_URL, "XXXXXXXXXXXXXXXXwxyz"):
        assert secret not in everything
    stored = get_store().get({"PK": f"ORG#{api.org_id}", "SK": f"INTEG#{created['id']}"})
    # Kept for the integration's own use, sealed (tests/integration/test_security_secrets.py).
    assert stored and sealed.unseal(stored["secrets"]["access_token"], api.org_id) == new_token

    assert api.delete(path).status_code == 204
    api.assert_error(api.get(path), 404, "not_found")
    api.assert_error(api.delete(path), 404, "not_found")
    assert [i["id"] for i in _ok(api.get(INTEGRATIONS))] == [slack["id"]]


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"type": "fax", "name": "x"}, {"body.type"}),
        ({"type": "slack", "name": "x"}, {"body.secrets.webhook_url"}),
        (
            {"type": "slack", "name": "x", "config": {"webhook_url": SLACK_URL}},
            {"body.config.webhook_url", "body.secrets.webhook_url"},
        ),
        (
            {"type": "slack", "name": "x", "secrets": {"webhook_url": "http://hooks.slack.com/x"}},
            {"body.secrets.webhook_url"},
        ),
        (
            {"type": "slack", "name": "x", "secrets": {"webhook_url": "https://evil.example.com/hooks.slack.com"}},
            {"body.secrets.webhook_url"},
        ),
        (
            {"type": "shopify", "name": "x", "config": {"shop_domain": "acme.com"}, "secrets": {"access_token": "abc"}},
            {"body.config.shop_domain", "body.secrets.access_token"},
        ),
        (
            {
                "type": "smtp",
                "name": "x",
                "config": {"host": "bad host", "port": 70000, "from_email": "nope", "use_tls": "yes", "colour": 1},
            },
            {
                "body.config.host",
                "body.config.port",
                "body.config.from_email",
                "body.config.use_tls",
                "body.config.colour",
            },
        ),
        (
            {"type": "hubspot", "name": "", "config": {"portal_id": "1"}, "secrets": {"access_token": "x" * 30}},
            {"body.name"},
        ),
    ],
)
def test_integration_validation_reports_every_field(api: Api, body: dict, fields: set[str]):
    error = api.assert_error(api.post(INTEGRATIONS, json=body), 400, "validation_failed")
    assert {d["field"] for d in error["details"]} == fields
    assert _ok(api.get(INTEGRATIONS)) == []


def test_smtp_integration_normalises_and_keeps_optional_secret_absent(api: Api):
    created = _ok(
        api.post(
            INTEGRATIONS,
            json={
                "type": "smtp",
                "name": "Relay",
                "config": {"host": "SMTP.Example.com", "port": 587, "from_email": "noreply@example.com"},
            },
        ),
        201,
    )
    assert created["config"]["host"] == "smtp.example.com" and created["secrets"] == {}
    updated = _ok(
        api.patch(
            f"{INTEGRATIONS}/{created['id']}",
            json={"config": {"username": "relay", "use_tls": False}, "secrets": {"password": "hunter22"}},
        )
    )
    assert updated["secrets"] == {"password": "••••"}  # short secrets show nothing
    assert updated["config"] == {
        "host": "smtp.example.com",
        "port": 587,
        "from_email": "noreply@example.com",
        "username": "relay",
        "use_tls": False,
    }
    removed = _ok(api.patch(f"{INTEGRATIONS}/{created['id']}", json={"config": {"username": None}}))
    assert "username" not in removed["config"]


def _member(api: Api, email: str, role: str) -> tuple[str, dict[str, str]]:
    _, user_id = api.register(email)
    invitation = _ok(api.post("/v1/invitations", json={"email": email, "role": role}), 201)
    session = api.login(email)
    token = invitation_token(api, email)
    _ok(api.post(f"/v1/invitations/{invitation['id']}/accept", json={"token": token}, headers=session))
    return user_id, session


def test_notification_preferences_defaults_put_and_access(api: Api):
    member_id, member_session = _member(api, "member-n@example.com", "member")
    admin_id, admin_session = _member(api, "admin-n@example.com", "admin")
    rows = {r["user_id"]: r for r in _ok(api.get(NOTIFICATIONS))}
    owner = rows[api.boot.user_id]
    assert owner["emails"] == {"invitations": True, "webhook_failures": True, "billing": True, "weekly_digest": False}
    assert owner["customized"] is False and owner["version"] == 0 and owner["role"] == "owner"
    assert rows[admin_id]["emails"]["billing"] is False and rows[admin_id]["emails"]["invitations"] is True
    assert not any(rows[member_id]["emails"].values())

    # The admin sets their own ("me" with a session) and a member's.
    mine = _ok(api.put(f"{NOTIFICATIONS}/me", json={"emails": {"weekly_digest": True}}, headers=admin_session))
    assert mine["user_id"] == admin_id and mine["emails"]["weekly_digest"] is True and mine["customized"] is True
    assert mine["emails"]["invitations"] is True  # left out: the role's default
    theirs = _ok(api.put(f"{NOTIFICATIONS}/{member_id}", json={"emails": {"billing": True}}))
    assert theirs["emails"]["billing"] is True and theirs["version"] == 1
    again = _ok(api.put(f"{NOTIFICATIONS}/{member_id}", json={"emails": {"invitations": True}}))
    assert again["emails"] == {"invitations": True, "webhook_failures": False, "billing": False, "weekly_digest": False}
    assert again["version"] == 2
    assert _ok(api.get(f"{NOTIFICATIONS}/{member_id}")) == again

    error = api.assert_error(
        api.put(f"{NOTIFICATIONS}/{member_id}", json={"emails": {"sms": True}}), 400, "validation_failed"
    )
    assert error["details"][0]["field"] == "body.emails.sms"
    api.assert_error(
        api.put(f"{NOTIFICATIONS}/{member_id}", json={"emails": {"billing": "often"}}), 400, "validation_failed"
    )
    api.assert_error(api.get(f"{NOTIFICATIONS}/me"), 404, "not_found")  # an API key is nobody's member
    api.assert_error(api.get(f"{NOTIFICATIONS}/usr_nobody"), 404, "not_found")
    api.assert_error(api.get(NOTIFICATIONS, headers=member_session), 403, "forbidden")
    api.assert_error(api.put(f"{NOTIFICATIONS}/me", json={"emails": {}}, headers=member_session), 403, "forbidden")

    audit = _ok(api.get("/v1/audit-logs", params={"action": "notifications.updated", "limit": 10}))
    assert audit[0]["target_id"] == member_id and audit[0]["after"] == {"invitations": True, "billing": False}

    # The billing e-mail of an issued invoice goes to the members who want it.
    profile = {
        "legal_name": "Acme",
        "billing_email": "ap@acme.example.com",
        "address_line_1": "1 Road",
        "country_code": "US",
    }
    assert api.patch("/v1/settings/billing", json={"billing_profile": profile}).status_code == 200
    _ok(api.put(f"{NOTIFICATIONS}/{member_id}", json={"emails": {"billing": True}}))
    invoice = _ok(api.post("/v1/settings/billing/invoices", json={"period": "2026-01"}), 201)
    _ok(api.post(f"/v1/settings/billing/invoices/{invoice['id']}/finalize"))
    assert api.mail("member-n@example.com")[0]["subject"] == f"Invoice {invoice['invoice_number']}"
    assert not [m for m in api.mail("admin-n@example.com") if m["subject"].startswith("Invoice")]


def test_settings_are_admin_only_and_per_organization(api: Api):
    created = _ok(
        api.post(INTEGRATIONS, json={"type": "slack", "name": "A alerts", "secrets": {"webhook_url": SLACK_URL}}), 201
    )
    key = _ok(api.post("/v1/api-keys", json={"name": "member", "role": "member"}), 201)["key"]
    member = {"X-Api-Key": key}
    api.assert_error(api.get(INTEGRATIONS, headers=member), 403, "forbidden")
    api.assert_error(api.post(INTEGRATIONS, json={"type": "slack", "name": "x"}, headers=member), 403, "forbidden")

    _, b_session = api.new_org("settings-b@example.com", name="Settings B")
    assert _ok(api.get(INTEGRATIONS, headers=b_session)) == []
    path = f"{INTEGRATIONS}/{created['id']}"
    api.assert_error(api.get(path, headers=b_session), 404, "not_found")
    api.assert_error(api.patch(path, json={"name": "B"}, headers=b_session), 404, "not_found")
    api.assert_error(api.delete(path, headers=b_session), 404, "not_found")
    api.assert_error(api.get(f"{NOTIFICATIONS}/{api.boot.user_id}", headers=b_session), 404, "not_found")
    api.assert_error(
        api.put(f"{NOTIFICATIONS}/{api.boot.user_id}", json={"emails": {}}, headers=b_session), 404, "not_found"
    )
    assert _ok(api.get(path))["name"] == "A alerts"
    b_rows = _ok(api.get(NOTIFICATIONS, headers=b_session))
    assert [r["user_email"] for r in b_rows] == ["settings-b@example.com"]
