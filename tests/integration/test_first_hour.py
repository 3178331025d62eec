"""README "First hour (local)", step by step through the gateway: what it promises a newcomer holds."""

from __future__ import annotations

from tests.integration.support import Api, latest_code

PASSWORD = "plum-orbit-42-lantern"


def test_the_readme_first_hour_works_as_written(api: Api):
    key = {"X-Api-Key": api.owner_key}  # what `make dev` prints: the bootstrapped organization's key
    # the routes before a session need the platform key, and say so without one
    refused = api.post("/v1/auth/email-verification/request", json={"email": "me@example.com"}, headers={})
    Api.assert_error(refused, 401, "unauthenticated")
    requested = api.post("/v1/auth/email-verification/request", json={"email": "me@example.com"}, headers=key)
    assert requested.status_code == 202, requested.text
    code = latest_code(api, "me@example.com")
    body = {"email": "me@example.com", "otp_code": code, "password": PASSWORD}
    assert api.post("/v1/auth/register/verify", json=body, headers=key).status_code == 201
    login = api.post("/v1/auth/login", json={"email": "me@example.com", "password": PASSWORD}, headers=key)
    session = {"Authorization": f"Bearer {login.json()['data']['token']}"}
    acme = api.post("/v1/organizations", json={"name": "Acme"}, headers=session).json()["data"]
    assert acme["id"] != api.org_id  # the new user did not join the platform key's organization
    made = api.post("/v1/api-keys", json={"name": "server", "role": "admin"}, headers=session)
    assert made.status_code == 201, made.text
    server = {"X-Api-Key": made.json()["data"]["key"]}
    # a second organization: the session now names the one it acts in
    api.post("/v1/organizations", json={"name": "Acme Two"}, headers=session)
    Api.assert_error(api.post("/v1/api-keys", json={"name": "x", "role": "admin"}, headers=session), 403, "forbidden")
    named = {**session, "X-Organization-Id": acme["id"]}
    assert api.post("/v1/api-keys", json={"name": "x", "role": "admin"}, headers=named).status_code == 201

    channel = api.post("/v1/channels", json={"name": "Sandbox", "platform": "sandbox"}, headers=server).json()["data"]
    assert api.post(f"/v1/channels/{channel['id']}/connect", headers=server).json()["data"]["status"] == "connected"
    send = {"channel_id": channel["id"], "to": "+1 415 555 2671", "text": {"body": "Hello"}}
    assert api.post("/v1/messages", json=send, headers=server).json()["data"]["to_phone"] == "14155552671"
    national = {**send, "to": "(415) 555-2671"}
    Api.assert_error(api.post("/v1/messages", json=national, headers=server), 400, "validation_failed")
    region = api.patch("/v1/organization", json={"default_phone_region": "US"}, headers=server)
    assert region.json()["data"]["default_phone_region"] == "US"
    assert api.post("/v1/messages", json=national, headers=server).status_code == 202

    hooks = "/v1/settings/developer/webhooks"
    loopback = api.post(f"{hooks}/endpoints", json={"url": "http://127.0.0.1:9999/hooks"}, headers=server)
    assert loopback.status_code == 201, loopback.text
    named_host = api.post(f"{hooks}/endpoints", json={"url": "http://localhost:9999/hooks"}, headers=server)
    Api.assert_error(named_host, 400, "validation_failed")
    portal = api.post(f"{hooks}/portal-access", headers=server)
    assert portal.status_code == 201 and "/portal/webhooks#token=" in portal.json()["data"]["url"]


def test_a_request_without_a_credential_is_told_which_headers_carry_one(api: Api):
    for headers in ({}, {"X-Api-Key": "sk_test_unknown"}, {"Authorization": "Bearer nope"}):
        error = Api.assert_error(api.get("/v1/contacts", headers=headers), 401, "unauthenticated")
        assert "X-Api-Key" in error["message"] and "Authorization: Bearer" in error["message"], error


def test_every_operation_acting_in_an_organization_documents_x_organization_id():
    """A session caller with several organizations names one in X-Organization-Id: each operation that needs a role
    in an organization lists the header (one shared parameter), and the others (public, pre-session, the user's own
    routes) do not."""
    from switchboard.openapi_doc import load_openapi

    doc = load_openapi()
    param = doc["components"]["parameters"]["OrganizationId"]
    assert (param["name"], param["in"], param["required"]) == ("X-Organization-Id", "header", False)
    ref = {"$ref": "#/components/parameters/OrganizationId"}
    with_header = {
        f"{method.upper()} {path}"
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if ref in op.get("parameters", [])
    }
    assert {"GET /v1/contacts", "POST /v1/messages", "PATCH /v1/organization", "GET /v1/audit-logs"} <= with_header
    without = {"POST /v1/auth/login", "GET /v1/organizations", "POST /v1/organizations", "GET /v1/health"}
    assert not without & with_header
    assert len(with_header) > 250
