"""HTTP against the local stack (or a deployed stage with SWITCHBOARD_BASE_URL): the public routes, the gateway's
own answers (unknown route, authorizer denials, body limit), credentials in both headers, local-only routes."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.test_account_flow import latest_code, mails

pytestmark = pytest.mark.e2e


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], list)
    assert isinstance(error["request_id"], str) and error["request_id"]
    return error


def test_health_is_ok(live):
    with live.client(auth=False) as client:
        response = client.get("/v1/health")
    assert response.status_code == 200
    assert response.json() == {"data": {"status": "ok"}}


def test_ready(live):
    with live.client(auth=False) as client:
        response = client.get("/v1/ready")
    assert response.status_code == 200
    assert response.json()["data"]["status"] == "ready"


def test_version_names_the_stage(live):
    with live.client(auth=False) as client:
        data = client.get("/v1/version").json()["data"]
    assert data["version"]
    assert data["commit"]
    assert data["stage"] == ("local" if live.is_local else data["stage"])
    assert data["stage"] in ("local", "dev", "staging", "prod")


def test_openapi_document_lists_the_routes(live):
    with live.client(auth=False) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    for path in ("/v1/health", "/v1/ready", "/v1/version", "/v1/organization", "/v1/api-keys"):
        assert path in doc["paths"], path


def test_unknown_route_is_a_route_not_found_envelope(live):
    with live.client(auth=False) as client:
        response = client.get(f"/v1/no-such-route-{uuid.uuid4().hex[:8]}")
    error = assert_error(response, 404, "route_not_found")
    assert error["request_id"] == response.headers["x-amzn-requestid"]


def test_unknown_route_with_a_valid_key_is_still_route_not_found(live):
    with live.client() as client:
        assert_error(client.delete("/v1/nothing/here"), 404, "route_not_found")


def test_missing_credential_is_unauthenticated(live):
    with live.client(auth=False) as client:
        assert_error(client.get("/v1/organization"), 401, "unauthenticated")


def test_wrong_key_is_unauthenticated(live):
    with live.client("sk_test_" + "x" * 40) as client:
        assert_error(client.get("/v1/organization"), 401, "unauthenticated")


def test_malformed_authorization_header_is_unauthenticated(live):
    with live.client(auth=False, headers={"Authorization": "Basic dXNlcjpwYXNz"}) as client:
        assert_error(client.get("/v1/organization"), 401, "unauthenticated")


def test_error_request_ids_are_unique(live):
    with live.client(auth=False) as client:
        ids = {client.get("/v1/organization").json()["error"]["request_id"] for _ in range(3)}
    assert len(ids) == 3


def test_printed_key_reads_the_organization(live):
    with live.client() as client:
        response = client.get("/v1/organization")
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    if live.organization_id:
        assert data["id"] == live.organization_id
        assert data["name"] == "Local Organization"
    assert response.headers["ratelimit-limit"]


@pytest.mark.parametrize("scheme", ["x-api-key", "bearer"])
def test_both_credential_headers_are_accepted(live, scheme):
    headers = {"X-Api-Key": live.api_key} if scheme == "x-api-key" else {"Authorization": f"Bearer {live.api_key}"}
    with live.client(auth=False, headers=headers) as client:
        response = client.get("/v1/members")
    assert response.status_code == 200, response.text
    members = response.json()["data"]
    if live.owner_email:
        assert any(m["user_email"] == live.owner_email and m["role"] == "owner" for m in members)


def test_wrong_method_on_a_known_path_is_method_not_allowed(live):
    with live.client(auth=False) as client:
        response = client.post("/v1/health", json={})
    assert_error(response, 405, "method_not_allowed")


def test_wrong_method_inside_a_function_is_method_not_allowed(live):
    """`ANY /v1/organization` reaches the identity resolver, which knows the path but not PUT."""
    with live.client() as client:
        response = client.put("/v1/organization", json={"name": "x"})
    assert_error(response, 405, "method_not_allowed")
    assert "GET" in response.headers["allow"]


def test_revoked_key_is_refused_on_the_next_request(live):
    with live.client() as client:
        created = client.post("/v1/api-keys", json={"name": f"e2e-{uuid.uuid4().hex[:6]}", "role": "viewer"})
        assert created.status_code == 201, created.text
        key = created.json()["data"]
        with live.client(key["key"]) as as_new_key:
            assert as_new_key.get("/v1/organization").status_code == 200
            assert client.delete(f"/v1/api-keys/{key['id']}").status_code == 204
            assert_error(as_new_key.get("/v1/organization"), 401, "unauthenticated")


def test_twenty_concurrent_creates_all_succeed(live):
    names = [f"e2e-par-{uuid.uuid4().hex[:8]}" for _ in range(20)]

    def create(name: str):
        with live.client() as client:
            return client.post("/v1/api-keys", json={"name": name, "role": "viewer"})

    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(create, names))
    assert [r.status_code for r in responses] == [201] * 20, [r.text for r in responses if r.status_code != 201]
    ids = {r.json()["data"]["id"] for r in responses}
    assert len(ids) == 20
    with live.client() as client:
        listed = {k["name"] for k in client.get("/v1/api-keys").json()["data"]}
        assert set(names) <= listed
        for key_id in ids:
            client.delete(f"/v1/api-keys/{key_id}")


def test_body_over_ten_megabytes_is_refused_by_the_gateway(local_only):
    with local_only.client() as client:
        response = client.post(
            "/v1/organizations", content=b"x" * (10 * 1024 * 1024 + 1), headers={"Content-Type": "application/json"}
        )
    assert_error(response, 413, "payload_too_large")


def test_local_mail_lists_what_the_stack_sent(local_only):
    email = f"e2e-{uuid.uuid4().hex[:10]}@example.com"
    with local_only.client() as client:
        response = client.post("/v1/auth/email-verification/request", json={"email": email})
        assert response.status_code == 202, response.text
    rows = mails(local_only, email)  # a moment after the request: mail leaves through the queue
    with local_only.client() as client:
        everyone = client.get("/_local/mail")
    assert len(rows) == 1
    assert rows[0]["to"] == email
    assert rows[0]["otp_code"].isdigit() and len(rows[0]["otp_code"]) == 6
    assert {"to", "subject", "text", "sent_at"} <= set(rows[0])
    assert everyone.status_code == 200
    assert isinstance(everyone.json()["data"], list)
    assert any(row["to"] == email for row in everyone.json()["data"])


def test_local_ses_sends_from_the_verified_mail_sender_only(local_only):
    """The stack verified its MailSender at start, as an operator does; moto's SES, like SES, refuses any other From
    address, so a stack sending from an unverified address fails locally too."""
    import boto3
    from botocore.exceptions import ClientError

    sesv2 = boto3.client(
        "sesv2",
        endpoint_url=local_only.aws_endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    identities = {i["IdentityName"] for i in sesv2.list_email_identities()["EmailIdentities"]}
    assert identities == {"no-reply@switchboard.local"}
    to = f"e2e-ses-{uuid.uuid4().hex[:10]}@example.com"
    content = {"Simple": {"Subject": {"Data": "hi"}, "Body": {"Text": {"Data": "hello"}}}}
    with pytest.raises(ClientError) as refused:
        sesv2.send_email(FromEmailAddress="someone@elsewhere.io", Destination={"ToAddresses": [to]}, Content=content)
    assert refused.value.response["Error"]["Code"] == "MessageRejected"
    assert mails(local_only, to, count=0) == []
    sesv2.send_email(FromEmailAddress="no-reply@switchboard.local", Destination={"ToAddresses": [to]}, Content=content)
    assert [(m["to"], m["subject"], m["text"]) for m in mails(local_only, to)] == [(to, "hi", "hello")]


def test_local_mail_is_empty_for_an_unknown_recipient(local_only):
    with local_only.client(auth=False) as client:
        response = client.get("/_local/mail", params={"to": "nobody@example.com"})
    assert response.status_code == 200
    assert response.json() == {"data": []}


def test_swagger_ui_is_served(local_only):
    with local_only.client(auth=False) as client:
        response = client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "swagger" in response.text.lower()
    assert "/openapi.json" in response.text


def test_stack_started_quickly(local_only):
    assert local_only.started_in < 20, f"the local stack took {local_only.started_in:.1f} s to start"


def _second_org_key(live) -> tuple[str, str]:
    """A second organization, made the way a customer would: verify, register, log in, create, mint a key."""
    email = f"iso-{uuid.uuid4().hex[:10]}@example.com"
    with live.client() as client:
        client.post("/v1/auth/email-verification/request", json={"email": email})
        code = latest_code(live, email)
        reg = client.post(
            "/v1/auth/register/verify", json={"email": email, "otp_code": code, "password": "isolation-pass"}
        )
        assert reg.status_code == 201, reg.text
        token = client.post("/v1/auth/login", json={"email": email, "password": "isolation-pass"}).json()["data"]
        session = {"Authorization": f"Bearer {token['token']}", "X-Api-Key": ""}
        org = client.post("/v1/organizations", json={"name": "Isolation"}, headers=session).json()["data"]
        key = client.post("/v1/api-keys", json={"name": "iso", "role": "viewer"}, headers=session).json()["data"]
    return org["id"], key["key"]


def test_concurrent_requests_of_two_organizations_never_see_each_other(local_only):
    """40 interleaved requests of two tenants: each answer names the caller's own organization."""
    other_org, other_key = _second_org_key(local_only)
    callers = [(local_only.api_key, local_only.organization_id), (other_key, other_org)] * 20

    def call(caller: tuple[str, str]) -> tuple[str, str]:
        with local_only.client(api_key=caller[0]) as client:
            return caller[1], client.get("/v1/organization").json()["data"]["id"]

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(call, callers))
    assert all(expected == got for expected, got in results), results
