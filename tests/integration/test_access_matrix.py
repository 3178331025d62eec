"""The role matrix: every route of every resolver, its declared access against CONVENTIONS' role policy, the
enforcement of that access for each role through the gateway, and tenant isolation on every route with an id.

Routes are discovered from `functions/*/app.py` (every module that builds a resolver), so new endpoint groups are
checked as soon as they exist: the policy below has general rules for the groups the spec lists but that are not
built yet (reads → viewer, messaging/CRM writes → member, the administrative areas → admin).
"""

from __future__ import annotations

import importlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard.api.auth import ROLE_RANK, Access, route_access
from switchboard.config import reset_settings
from tests.integration.support import Api, invitation_token

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("viewer", "member", "admin", "owner")
DUMMY_ID = "x_nonexistent"
OWNER_EMAIL = "owner@example.com"
BODY_METHODS = ("POST", "PUT", "PATCH")


# Route discovery ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RouteInfo:
    group: str
    method: str
    path: str  # the OpenAPI form, e.g. /v1/teams/{teamID}
    declared: Access | None
    body: str  # "required", "optional" or "none"

    @property
    def params(self) -> list[str]:
        return re.findall(r"\{([^}/]+)\}", self.path)

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


def discover_routes() -> list[RouteInfo]:
    routes: list[RouteInfo] = []
    for app_file in sorted((ROOT / "functions").glob("*/app.py")):
        if "create_resolver()" not in app_file.read_text():
            continue
        group = app_file.parent.name
        module = importlib.import_module(f"functions.{group}.app")
        for route in module.app.routes:
            body_params = route.dependant.body_params
            body = "none" if not body_params else ("required" if any(p.required for p in body_params) else "optional")
            routes.append(RouteInfo(group, route.method.upper(), route.openapi_path, route_access(route), body))
    return routes


ROUTES = discover_routes()


def test_routes_were_discovered():
    groups = {r.group for r in ROUTES}
    assert {"identity", "system"} <= groups, groups
    assert len(ROUTES) > 50
    assert len({r.name for r in ROUTES}) == len(ROUTES), "two resolvers declare the same method and path"


# The policy, from CONVENTIONS "Authentication and tenancy" and "Account flows" --------------------------------------
PUBLIC = Access("public")
AUTHENTICATED = Access("authenticated")
# The signed-in user's own routes: a person's session, never an API key (the document's `Session` scheme).
SESSION = Access("authenticated", sessions_only=True)
VIEWER, MEMBER, ADMIN, OWNER = (Access("role", role) for role in ROLES)

# "Public, no credential: GET /v1/health, /v1/ready, /v1/version, /openapi.json".
SYSTEM_PATHS = {"/v1/health", "/v1/ready", "/v1/version", "/openapi.json"}
# Routes that act on the caller's own user or session, or come before there is one (the pre-session auth routes take
# the platform key): any valid credential, no role in an organization.
SELF_AREAS = ("/v1/auth", "/v1/users/me", "/v1/settings/sessions")
# The routes before there is a session (they take the platform key), within SELF_AREAS.
PRE_SESSION = (
    "/v1/auth/email-verification",
    "/v1/auth/register",
    "/v1/auth/login",
    "/v1/auth/password",
    "/v1/auth/fingerprint-events",
)
# Administrative areas: reading them is administration too (who holds which key, who was invited, what the audit log
# says, how the organization is secured, webhook endpoints and deliveries, integrations, notifications).
ADMIN_AREAS = ("/v1/api-keys", "/v1/audit-logs", "/v1/invitations", "/v1/settings")
OWNER_AREAS = ("/v1/settings/billing",)
# Areas that everyone reads and admins change: channels, teams, members' roles/removal, the organization's name,
# templates (message templates and the customer-data templates), business-account onboarding (a channel's setup).
ADMIN_WRITE_AREAS = ("/v1/channels", "/v1/teams", "/v1/members", "/v1/organization", "/v1/templates", "/v1/waba")
ADMIN_WRITE_SEGMENTS = {"templates", "webhooks"}
# POST routes that only read: identity resolution (and its alias).
READ_QUERIES = {
    ("POST", "/v1/contacts/resolve"),
    ("POST", "/v1/contacts/lookup"),
}
# Reads that make the channel's provider work (fetch a message's media from it and keep a copy): member, like
# /v1/users/lookup; a viewer reads what is stored.
PROVIDER_WORK_READS = {
    ("POST", "/v1/messages/media/download"),
    ("GET", "/v1/channels/{channelID}/media/{mediaID}"),
}
# Inside a channel, operating messaging (member), not managing the channel: a simulated customer message, blocking a
# number at the provider, and the provider's profile lookup of a number (like /v1/users/lookup/*).
CHANNEL_OPERATIONS = {"sandbox/inbound", "blocked-contacts", "contacts/lookup"}
# Channel reads that are channel management: pairing material (the QR that links a device) and the parts of the
# configuration that hold credentials or the account's security setup (two-step PIN settings, proxy credentials).
CHANNEL_MANAGEMENT_READS = {"qr", "settings/phone/two-step", "proxy", "network/proxy"}
# "Tenant safety and data lifecycle": while an organization is pending deletion, its owner (only) still reads it,
# repeats the deletion request and restores it; no other route acts in it.
ORGANIZATION_LIFECYCLE = {
    ("GET", "/v1/organization"): Access("role", "viewer", when_pending="owner"),
    ("DELETE", "/v1/organization"): Access("role", "owner", when_pending="owner", sessions_only=True),
    ("POST", "/v1/organization/restore"): Access("role", "owner", when_pending="owner", sessions_only=True),
}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def expected_access(method: str, path: str) -> Access:
    """What CONVENTIONS requires of `method path`: owner > admin > member > viewer, public or any credential."""
    method = method.upper()
    segments = path.strip("/").split("/")
    if path in SYSTEM_PATHS:
        return PUBLIC
    if re.fullmatch(r"/v1/providers/\{[^/]+\}/callback", path) or path == "/v1/providers/whatsapp_cloud/webhook":
        return PUBLIC  # the provider calls back; it holds no API key and is checked by its signature
    if any(_under(path, area) for area in PRE_SESSION) or (method, path) == ("GET", "/v1/organizations"):
        return AUTHENTICATED  # GET /v1/organizations: the caller's own organizations (a key's: its one)
    if any(_under(path, area) for area in SELF_AREAS) or path == "/v1/organizations":
        return SESSION  # POST /v1/organizations: a user creates an organization and becomes its owner
    if method == "POST" and re.fullmatch(r"/v1/invitations/\{[^/]+\}/accept", path):
        return SESSION  # the invited user, who is not a member yet
    if (method, path) in ORGANIZATION_LIFECYCLE:
        return ORGANIZATION_LIFECYCLE[(method, path)]
    if any(_under(path, area) for area in OWNER_AREAS):
        return OWNER
    if _under(path, "/v1/users/lookup") or (method, path) in PROVIDER_WORK_READS:
        return MEMBER
    if any(_under(path, area) for area in ADMIN_AREAS):
        return ADMIN
    channel_sub = re.fullmatch(r"/v1/channels/\{[^/]+\}/(.+)", path)
    sub = channel_sub.group(1) if channel_sub else None
    if method in ("GET", "HEAD") or (method, path) in READ_QUERIES:
        return ADMIN if sub in CHANNEL_MANAGEMENT_READS else VIEWER
    if sub in CHANNEL_OPERATIONS:
        return MEMBER
    if any(_under(path, area) for area in ADMIN_WRITE_AREAS) or ADMIN_WRITE_SEGMENTS & set(segments):
        return ADMIN
    return MEMBER  # messaging and CRM: messages, conversations, contacts, tags, media, groups, labels, cdp …


def _show(access: Access | None) -> str:
    if access is None:
        return "nothing declared"
    return access.role if access.kind == "role" else str(access.kind)


def test_declared_access_matches_the_conventions_policy():
    disagreements = [
        f"{r.name} ({r.group}): declared {_show(r.declared)}, CONVENTIONS want {_show(wanted)}"
        for r in ROUTES
        if r.declared != (wanted := expected_access(r.method, r.path))
    ]
    assert not disagreements, "routes whose declared access disagrees with CONVENTIONS:\n" + "\n".join(disagreements)


# Enforcement ----------------------------------------------------------------------------------------------------------
def _fill(path: str, values: Callable[[str], str]) -> str:
    return re.sub(r"\{([^}/]+)\}", lambda m: values(m.group(1)), path)


def _call(api: Api, route: RouteInfo, headers: dict[str, str], path: str | None = None, body: Any = None):
    kwargs: dict[str, Any] = {}
    if route.method in BODY_METHODS:
        kwargs["json"] = {} if body is None else body
    return api.request(route.method, path or _fill(route.path, lambda _: DUMMY_ID), headers=headers, **kwargs)


def _error_code(resp: httpx.Response) -> str | None:
    try:
        return str(resp.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def _is_forbidden_envelope(resp: httpx.Response) -> bool:
    try:
        Api.assert_error(resp, 403, "forbidden")
    except AssertionError:
        return False
    return True


def _reached_the_route(resp: httpx.Response) -> bool:
    """Allowed through: not 401/403, and really handled by the route (not the gateway's or resolver's "no such route",
    not a server error; 400/404/409 for the dummy ids and empty bodies are fine)."""
    if resp.status_code in (401, 403) or resp.status_code >= 500:
        return False
    return _error_code(resp) not in ("route_not_found", "method_not_allowed")


def _mint_keys(api: Api, headers: dict[str, str]) -> dict[str, dict[str, str]]:
    keys = {}
    for role in ROLES:
        resp = api.post("/v1/api-keys", json={"name": f"matrix-{role}", "role": role}, headers=headers)
        assert resp.status_code == 201, resp.text
        keys[role] = {"X-Api-Key": resp.json()["data"]["key"]}
    return keys


@pytest.fixture
def roomy_rate_limit(monkeypatch):
    """The matrix sends several requests per route and role in one minute; the per-organization budget is not what
    is under test here, so it is raised for this test only (the route count keeps growing)."""
    monkeypatch.setenv("RATE_LIMIT_PER_MINUTE", "1000000")
    monkeypatch.setenv("RATE_LIMIT_CREDENTIAL_PER_MINUTE", "1000000")
    reset_settings()
    yield
    reset_settings()


def _role_checks(
    api: Api,
    route: RouteInfo,
    keys: dict[str, dict[str, str]],
    problems: list[str],
    session: dict[str, str] | None = None,
) -> None:
    required = expected_access(route.method, route.path)
    assert required.kind == "role" and required.role
    for role in ROLES:  # lowest first: a collection-level DELETE by the owner comes last
        resp = _call(api, route, keys[role])
        if ROLE_RANK[role] < ROLE_RANK[required.role] or required.sessions_only:
            if not _is_forbidden_envelope(resp):
                problems.append(f"{route.name} as {role} (needs {required.role}): {resp.status_code} {resp.text[:200]}")
        elif not _reached_the_route(resp):
            problems.append(f"{route.name} as {role} (needs {required.role}): {resp.status_code} {resp.text[:200]}")
    if required.sessions_only and required.role == "owner":  # refuses every key; an owner's session reaches it
        resp = _call(api, route, session or api.login(OWNER_EMAIL))
        if not _reached_the_route(resp):
            problems.append(f"{route.name} with an owner's session: {resp.status_code} {resp.text[:200]}")


def _authenticated_checks(api: Api, route: RouteInfo, keys: dict[str, dict[str, str]], problems: list[str]) -> None:
    answers = {}
    for role in ROLES:
        resp = _call(api, route, keys[role])
        answers[role] = (resp.status_code, _error_code(resp))
        if resp.status_code == 401 or resp.status_code >= 500 or _error_code(resp) == "route_not_found":
            problems.append(f"{route.name} as {role} key: {resp.status_code} {resp.text[:200]}")
    if len(set(answers.values())) != 1:
        problems.append(f"{route.name} (any credential) answers differently per role: {answers}")
    # Routes about the signed-in user refuse API keys by design (403 "needs a signed-in user"), some only after
    # validating the body; with a session of the owner every one of them must work. A fresh session each time: some
    # of these routes end the session (logout).
    resp = _call(api, route, api.login(OWNER_EMAIL))
    if not _reached_the_route(resp):
        problems.append(f"{route.name} with a session: {resp.status_code} {resp.text[:200]}")


def test_every_role_gets_exactly_what_the_policy_allows(api: Api, roomy_rate_limit):
    """Below the required role: 403 `forbidden` in the envelope. At or above: anything but 401/403 (dummy ids make
    most answers 400/404). Routes for any credential: the same answer for every role, never 401, and those that
    refuse API keys (they need a signed-in user) work with a session."""
    keys = _mint_keys(api, api.owner_headers)
    problems: list[str] = []
    # A collection-level DELETE (the organization itself) would end the organization the other checks run in; each
    # runs in a throwaway organization of its own.
    destructive = [r for r in ROUTES if r.method == "DELETE" and not r.params]
    for route in ROUTES:
        if route in destructive:
            continue
        kind = expected_access(route.method, route.path).kind
        if kind == "role":
            _role_checks(api, route, keys, problems)
        elif kind == "authenticated":
            _authenticated_checks(api, route, keys, problems)
    for n, route in enumerate(destructive):
        _, session = api.new_org(f"throwaway-{n}@example.com", name=f"Throwaway {n}")
        throwaway_keys = _mint_keys(api, session)
        if expected_access(route.method, route.path).kind == "role":
            _role_checks(api, route, throwaway_keys, problems)
        else:
            _authenticated_checks(api, route, throwaway_keys, problems)
    assert not problems, f"{len(problems)} role checks failed:\n" + "\n".join(problems)


def test_an_api_key_is_refused_on_exactly_the_session_only_routes(api: Api, roomy_rate_limit):
    """Routes declared `sessions_only` (the document gives them only the `Session` scheme) answer an owner's API key
    403 before anything else (a body is not even read); every other route lets the key through to its own checks."""
    owner_key = _mint_keys(api, api.owner_headers)["owner"]
    problems = []
    for route in ROUTES:
        if route.declared is None or route.declared.kind == "public" or (route.method == "DELETE" and not route.params):
            continue
        resp = _call(api, route, owner_key)
        refused = _is_forbidden_envelope(resp) and "session" in resp.json()["error"]["message"]
        if refused != route.declared.sessions_only:
            problems.append(f"{route.name} (sessions_only={route.declared.sessions_only}): {resp.text[:160]}")
    assert not problems, "\n".join(problems)


def test_no_credential_is_401_on_every_non_public_route(api: Api):
    problems = []
    for route in ROUTES:
        resp = _call(api, route, headers={})
        if expected_access(route.method, route.path).kind == "public":
            if resp.status_code in (401, 403):
                problems.append(f"{route.name} is public but answered {resp.status_code} without a credential")
            continue
        try:
            Api.assert_error(resp, 401, "unauthenticated")
        except AssertionError:
            problems.append(f"{route.name} without a credential: {resp.status_code} {resp.text[:200]}")
    assert not problems, "\n".join(problems)


# Tenant isolation -----------------------------------------------------------------------------------------------------
@dataclass
class OrgB:
    org_id: str
    owner: dict[str, str]  # session headers of B's owner
    owner_user_id: str
    member: dict[str, str]  # session headers of B's second member
    member_user_id: str
    key: dict[str, str]
    ids: dict[str, str]


ROUTE_NAMES = {r.name for r in ROUTES}
WEBHOOKS = "/v1/settings/developer/webhooks"
B_PHONE = "+1 415 555 0123"
B_PHONE_DIGITS = "14155550123"


def _ok(resp: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    return resp.json()["data"] if resp.content else {}


def build_org_b(api: Api) -> OrgB:
    """A second organization with one of everything an id can name."""
    org_id, owner = api.new_org("owner-b@example.com", name="Org B")
    owner_user_id = _ok(api.get("/v1/auth/me", headers=owner))["id"]
    member_email, member_user_id = api.register("member-b@example.com", name="Member Bee")
    invitation = _ok(api.post("/v1/invitations", json={"email": member_email, "role": "member"}, headers=owner), 201)
    member = api.login(member_email)
    token = invitation_token(api, member_email)
    _ok(api.post(f"/v1/invitations/{invitation['id']}/accept", json={"token": token}, headers=member))
    pending = _ok(
        api.post("/v1/invitations", json={"email": "pending-b@example.com", "role": "viewer"}, headers=owner), 201
    )
    team = _ok(api.post("/v1/teams", json={"name": "B team"}, headers=owner), 201)
    _ok(api.post(f"/v1/teams/{team['id']}/members", json={"user_id": member_user_id}, headers=owner), 201)
    key = _ok(api.post("/v1/api-keys", json={"name": "b-key", "role": "admin"}, headers=owner), 201)
    channel = _ok(api.post("/v1/channels", json={"name": "B sandbox", "platform": "sandbox"}, headers=owner), 201)
    _ok(api.post(f"/v1/channels/{channel['id']}/connect", headers=owner))
    _ok(api.put(f"/v1/channels/{channel['id']}/settings/advanced", json={"auto_read": True}, headers=owner))
    contact = _ok(api.post("/v1/contacts", json={"name": "B Contact", "phone": B_PHONE}, headers=owner), 201)
    _ok(api.post("/v1/contacts", json={"name": "B Other", "email": "other-b@example.com"}, headers=owner), 201)
    note = _ok(api.post(f"/v1/contacts/{contact['id']}/notes", json={"body": "B's note"}, headers=owner), 201)
    tag = _ok(api.post(f"/v1/contacts/{contact['id']}/tags", json={"name": "b-vip"}, headers=owner), 201)
    _ok(api.put(f"/v1/contacts/{contact['id']}/consent/whatsapp", json={"status": "opted_in"}, headers=owner))
    inbound = _ok(
        api.post(
            f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": B_PHONE, "text": "hi"}, headers=owner
        ),
        202,
    )
    message = _ok(
        api.post(
            "/v1/messages", json={"channel_id": channel["id"], "to": B_PHONE, "text": {"body": "hello"}}, headers=owner
        ),
        202,
    )
    cart = {
        "catalog_id": "1",
        "product_items": [{"product_retailer_id": "b", "quantity": 1, "item_price": 2, "currency": "USD"}],
    }
    order = _ok(
        api.post(
            f"/v1/channels/{channel['id']}/sandbox/inbound", json={"from_phone": B_PHONE, "order": cart}, headers=owner
        ),
        202,
    )
    asset = _ok(api.post("/v1/media/uploads", json={"content_type": "image/png", "size": 10}, headers=owner), 201)
    _ok(api.post("/v1/users/me/blocks", json={"user_ref": owner_user_id}, headers=member), 201)
    session_id = next(s["id"] for s in _ok(api.get("/v1/settings/sessions", headers=owner)) if s["current"])
    ids = {
        "teamID": team["id"],
        "invitationID": pending["id"],
        "id": pending["id"],  # /v1/invitations/{id}/accept
        "keyID": key["id"],
        "userID": member_user_id,
        "sessionID": session_id,
        "userRef": owner_user_id,  # B's member blocked B's owner
        "channelID": channel["id"],
        "contactID": contact["id"],
        "noteID": note["id"],
        "tagID": tag["tag_id"],
        "channel": "whatsapp",  # /consent/{channel} is a channel kind; the contact is B's
        "phone": B_PHONE_DIGITS,
        "messageID": message["id"],
        "convID": inbound["conversation_id"],
        "assetID": asset["id"],
        "mediaID": asset["id"],
        "orderID": order["order_id"],
    }
    assert inbound["contact_id"] == contact["id"]
    if f"POST {WEBHOOKS}/endpoints" in ROUTE_NAMES:
        endpoint = _ok(
            api.post(f"{WEBHOOKS}/endpoints", json={"url": "https://93.184.215.14/hooks/b"}, headers=owner), 201
        )
        ids["endpointID"] = endpoint["id"]
        if f"POST {WEBHOOKS}/endpoints/{{endpointID}}/test" in ROUTE_NAMES:
            test = _ok(api.post(f"{WEBHOOKS}/endpoints/{endpoint['id']}/test", headers=owner), 202)
            ids["deliveryID"] = test["delivery_id"]
    return OrgB(org_id, owner, owner_user_id, member, member_user_id, {"X-Api-Key": key["key"]}, ids)


def snapshot_b(api: Api, b: OrgB) -> dict[str, Any]:
    """What B can see of its own data (B's owner, B's member, B's key)."""
    ids = b.ids
    ch, ct = f"/v1/channels/{ids['channelID']}", f"/v1/contacts/{ids['contactID']}"
    owner_reads = [
        "/v1/organization",
        "/v1/members",
        "/v1/invitations",
        "/v1/api-keys",
        "/v1/teams",
        f"/v1/teams/{ids['teamID']}/members",
        "/v1/channels",
        *(
            f"{ch}{sub}"
            for sub in (
                "/settings/advanced",
                "/settings/phone",
                "/settings/phone/two-step",
                "/profile",
                "/profile/business",
                "/privacy",
                "/proxy",
                "/network/proxy",
                "/blocked-contacts",
                "/logs",
            )
        ),
        "/v1/contacts",
        *(f"{ct}{sub}" for sub in ("", "/identities", "/notes", "/tags", "/consents", "/suppressions")),
        "/v1/contact-tags",
        f"/v1/conversations/{ids['convID']}",
        f"/v1/conversations/{ids['convID']}/messages",
        f"/v1/messages/{ids['messageID']}",
        "/v1/media/assets",
        "/v1/orders",
        f"/v1/orders/{ids['orderID']}",
    ]
    if "endpointID" in ids:
        owner_reads.append(f"{WEBHOOKS}/endpoints/{ids['endpointID']}")
    snap: dict[str, Any] = {}
    for path in owner_reads:
        resp = api.get(path, headers=b.owner)
        snap[path] = (resp.status_code, resp.json())
    # B's own key is used below ("key works"): when it was last used is B's bookkeeping, not data A could change.
    for key in snap["/v1/api-keys"][1].get("data") or []:
        key.pop("last_used_at", None)
    sessions = api.get("/v1/settings/sessions", headers=b.owner).json()["data"]
    snap["sessions"] = sorted(s["id"] for s in sessions)
    snap["member blocks"] = api.get("/v1/users/me/blocks", headers=b.member).json()
    snap["member me"] = api.get("/v1/auth/me", headers=b.member).json()
    snap["key works"] = api.get("/v1/organization", headers=b.key).status_code
    return snap


# Bodies valid in A's own context, so that only the path's foreign id can make the call fail. A route with a required
# body must have an entry here; placeholders "<a:...>" are A's own ids.
EXAMPLE_BODIES: dict[tuple[str, str], Any] = {
    ("PATCH", "/v1/members/{userID}"): {"role": "viewer"},
    ("PATCH", "/v1/teams/{teamID}"): {"name": "Renamed by A"},
    ("POST", "/v1/teams/{teamID}/members"): {"user_id": "<a:user>"},
    ("POST", "/v1/invitations/{id}/accept"): {"token": "a-token-of-a"},
    ("PATCH", "/v1/channels/{channelID}"): {"name": "Renamed by A"},
    ("POST", "/v1/channels/{channelID}/pairing-code"): {"phone_number": "+1 415 555 0100"},
    ("PUT", "/v1/channels/{channelID}/settings/advanced"): {"auto_read": False},
    ("PUT", "/v1/channels/{channelID}/settings/phone"): {"display_name": "A"},
    ("PUT", "/v1/channels/{channelID}/settings/phone/two-step"): {"enabled": False},
    ("POST", "/v1/channels/{channelID}/settings/phone/two-step/enable"): {"pin": "123456"},
    ("PUT", "/v1/channels/{channelID}/profile"): {"about": "A was here"},
    ("PUT", "/v1/channels/{channelID}/profile/business"): {"description": "A was here"},
    ("PUT", "/v1/channels/{channelID}/privacy"): {"last_seen": "nobody"},
    ("PUT", "/v1/channels/{channelID}/proxy"): {"host": "proxy.example.com", "port": 8080},
    ("PUT", "/v1/channels/{channelID}/network/proxy"): {"host": "proxy.example.com", "port": 8080},
    ("POST", "/v1/channels/{channelID}/blocked-contacts"): {"phone": "+1 415 555 0199"},
    ("POST", "/v1/channels/{channelID}/contacts/lookup"): {"phone": "+1 415 555 0199"},
    ("POST", "/v1/channels/{channelID}/sandbox/inbound"): {"from_phone": "+1 415 555 0199", "text": "from A"},
    ("PATCH", "/v1/contacts/{contactID}"): {"name": "Renamed by A"},
    ("POST", "/v1/contacts/{contactID}/merge"): {"from_contact_id": "<a:contact>"},
    ("POST", "/v1/contacts/{contactID}/notes"): {"body": "A's note"},
    ("PATCH", "/v1/contacts/{contactID}/notes/{noteID}"): {"body": "A's edit"},
    ("POST", "/v1/contacts/{contactID}/tags"): {"name": "a-tag"},
    ("PUT", "/v1/contacts/{contactID}/consent/{channel}"): {"status": "opted_out"},
    ("POST", "/v1/contacts/{contactID}/suppressions"): {"channel": "whatsapp", "reason": "A says so"},
    ("PATCH", "/v1/contact-tags/{tagID}"): {"name": "renamed-by-a"},
    ("POST", "/v1/conversations/{convID}/mute"): {},
    ("POST", "/v1/conversations/{convID}/assign"): {"user_id": "<a:user>"},
    ("POST", "/v1/conversations/{convID}/lock"): {"lock_owner_name": "A"},
    ("POST", "/v1/orders/{orderID}/status"): {"status": "processing"},
    ("PATCH", f"{WEBHOOKS}/endpoints/{{endpointID}}"): {"description": "A was here"},
    ("POST", f"{WEBHOOKS}/endpoints/{{endpointID}}/recover"): {"since": "2026-01-01T00:00:00.000Z"},
    ("PATCH", "/v1/cdp/custom-fields/{fieldID}"): {"label": "Renamed by A"},
    ("PATCH", "/v1/cdp/lifecycle-stages/{stageID}"): {"name": "Renamed by A"},
    ("PUT", "/v1/cdp/contacts/{contactID}/lifecycle-stage"): {"stage": None},
    ("PATCH", "/v1/cdp/object-types/{objectTypeID}"): {"name": "Renamed by A"},
    ("POST", "/v1/cdp/object-types/{objectTypeID}/fields"): {"key": "a_field", "label": "A", "type": "text"},
    ("POST", "/v1/cdp/object-types/{objectTypeID}/fields/reorder"): {"field_ids": ["ofl_a"]},
    ("PATCH", "/v1/cdp/object-types/{objectTypeID}/fields/{fieldID}"): {"label": "Renamed by A"},
    ("PATCH", "/v1/cdp/contact-objects/{objectID}"): {"display_name": "Renamed by A"},
    ("POST", "/v1/cdp/contact-objects/{objectID}/comments"): {"body": "A comment by A"},
    ("PUT", "/v1/cdp/contact-objects/{objectID}/relationships/{relatedID}"): {"label": "linked_by_a"},
    ("PATCH", "/v1/cdp/segments/{segmentID}"): {"name": "Renamed by A"},
    ("PATCH", "/v1/cdp/templates/{templateID}"): {"name": "Renamed by A"},
    ("POST", "/v1/cdp/templates/{templateID}"): {"action": "apply"},
    ("PATCH", "/v1/labels/{labelID}"): {"name": "Renamed by A"},
    ("POST", "/v1/conversations/{convID}/labels"): {"name": "a-label"},
    ("PATCH", "/v1/templates/{templateID}"): {"name": "renamed_by_a"},
    ("PATCH", "/v1/settings/billing/invoices/{invoiceID}"): {"notes": "A was here"},
    ("POST", "/v1/settings/billing/invoices/{invoiceID}/pay"): {"reference_id": "ref-a"},
    ("PATCH", "/v1/settings/integrations/{integrationID}"): {"name": "Renamed by A"},
    ("PUT", "/v1/settings/notifications/{userID}"): {"emails": {"billing": True}},
    ("POST", "/v1/templates/library/{libraryItemID}"): {"channel_id": "ch_a"},
    ("POST", "/v1/groups/{groupID}/name"): {"name": "Renamed by A"},
    ("POST", "/v1/groups/{groupID}/description"): {"description": "A was here"},
    ("POST", "/v1/groups/{groupID}/photo"): {"remove": True},
    ("POST", "/v1/groups/{groupID}/participants/actions"): {"action": "add", "participants": ["+1 415 555 0199"]},
    ("POST", "/v1/group-hubs/{hubID}/groups/add"): {"group_ids": ["grp_a"]},
    ("POST", "/v1/group-hubs/{hubID}/groups/remove"): {"group_ids": ["grp_a"]},
}
# Required query parameters (the spec's), valid in A's context, so that only the foreign id in the path can fail.
EXAMPLE_QUERIES: dict[tuple[str, str], str] = {
    ("GET", "/v1/newsletters/{newsletterJID}/messages"): "?channel_id=ch_a",
}


def _body_for(route: RouteInfo, a_ids: dict[str, str]) -> tuple[Any, str | None]:
    """(body, problem): the example body with A's ids filled in; a problem when a required body has no example."""
    key = (route.method, route.path)
    if key not in EXAMPLE_BODIES:
        if route.body == "required":
            return None, (
                f"{route.name} needs a request body and EXAMPLE_BODIES in {Path(__file__).name} has none: add a valid "
                "example (valid for organization A, so that only the foreign id in the path can make it fail)"
            )
        return ({} if route.method in BODY_METHODS else None), None
    text = json.dumps(EXAMPLE_BODIES[key])
    for name, value in a_ids.items():
        text = text.replace(f"<a:{name}>", value)
    return json.loads(text), None


def _foreign_value(name: str, b: OrgB, path: str) -> str:
    if name == "messageID" and path.startswith(f"{WEBHOOKS}/deliveries/"):
        name = "deliveryID"  # the webhook delivery id (the `webhook-id`), not a message's
    if name in b.ids:
        return b.ids[name]
    # A parameter this test does not know yet: an id that exists nowhere (still must be 404, never another answer).
    return f"x_{uuid.uuid4().hex}"


def test_another_organizations_ids_are_not_found_on_every_route(api: Api):
    b = build_org_b(api)
    a_owner_session = {**api.login(OWNER_EMAIL), "X-Organization-Id": api.org_id}
    a_ids = {
        "user": api.boot.user_id,
        "contact": _ok(api.post("/v1/contacts", json={"name": "A Contact", "email": "a@example.com"}), 201)["id"],
    }
    before = snapshot_b(api, b)
    problems: list[str] = []
    checked = 0
    for route in ROUTES:
        if not route.params:
            continue
        access = expected_access(route.method, route.path)
        if access.kind == "public":
            continue  # provider callbacks: no caller organization; the provider is checked by its signature
        body, problem = _body_for(route, a_ids)
        if problem:
            problems.append(problem)
            continue
        path = _fill(route.path, lambda name, template=route.path: _foreign_value(name, b, template))
        path += EXAMPLE_QUERIES.get((route.method, route.path), "")
        # Org routes: A's owner key and A's owner session; routes of the signed-in user: A's owner session (API keys
        # are refused there by design, with 403 "needs a signed-in user").
        callers = {"A's owner session": a_owner_session}
        if access.kind == "role":
            callers["A's owner key"] = api.owner_headers
        for who, headers in callers.items():
            resp = _call(api, route, headers, path=path, body=body)
            checked += 1
            try:
                Api.assert_error(resp, 404, "not_found")
            except AssertionError:
                problems.append(f"{route.name} as {who} with B's ids ({path}): {resp.status_code} {resp.text[:300]}")
    assert checked > 20
    after = snapshot_b(api, b)
    changed = [k for k in before if before[k] != after[k]]
    problems += [f"B's data changed: {k}: {before[k]!r} → {after[k]!r}" for k in changed]
    if after["key works"] != 200:
        problems.append(f"B's API key stopped working: {after['key works']}")
    roles = {m["user_id"]: m["role"] for m in after["/v1/members"][1]["data"]}
    if roles != {b.owner_user_id: "owner", b.member_user_id: "member"}:
        problems.append(f"B's members changed: {roles}")
    if api.get(f"/v1/contacts/{a_ids['contact']}").status_code != 200:
        problems.append("A's own contact is gone (merged into B's?)")
    assert not problems, f"{len(problems)} isolation failures:\n" + "\n".join(problems)


def test_another_organizations_ids_in_bodies_queries_and_headers_are_not_found(api: Api):
    """The organization comes from the credential: B's ids inside A's bodies, B's cursors and B's organization id in
    X-Organization-Id never reach B's data."""
    b = build_org_b(api)
    ids = b.ids
    a_channel = _ok(api.post("/v1/channels", json={"name": "A sandbox", "platform": "sandbox"}), 201)["id"]
    _ok(api.post(f"/v1/channels/{a_channel}/connect"))
    a_in = _ok(
        api.post(f"/v1/channels/{a_channel}/sandbox/inbound", json={"from_phone": "+1 212 555 0142", "text": "x"}), 202
    )
    a_team = _ok(api.post("/v1/teams", json={"name": "A team"}), 201)["id"]
    before = snapshot_b(api, b)
    not_found = {
        "send on B's channel": (
            "POST",
            "/v1/messages",
            {"channel_id": ids["channelID"], "to": "+1 212 555 0100", "text": {"body": "x"}},
        ),
        "send to B's contact": (
            "POST",
            "/v1/messages",
            {"channel_id": a_channel, "contact_id": ids["contactID"], "text": {"body": "x"}},
        ),
        "media download on B's channel": (
            "POST",
            "/v1/messages/media/download",
            {"channel_id": ids["channelID"], "media_id": "m1", "message_id": "p1", "message_payload": "{}"},
        ),
        "edit B's message": ("POST", "/v1/messages/edit", {"message_id": ids["messageID"], "text": "x"}),
        "delete B's message": ("POST", "/v1/messages/delete", {"message_id": ids["messageID"]}),
        "react to B's message": ("POST", "/v1/messages/react", {"message_id": ids["messageID"], "emoji": "👍"}),
        "mark B's message read": ("POST", "/v1/messages/read", {"message_id": ids["messageID"]}),
        "presence on B's channel": (
            "POST",
            "/v1/messages/presence",
            {"channel_id": ids["channelID"], "to": "+1 212 555 0100", "state": "typing"},
        ),
        "resolve B's contact id": (
            "POST",
            "/v1/contacts/resolve",
            {"identifiers": [{"type": "contact_id", "value": ids["contactID"]}]},
        ),
        "resolve B's phone": ("POST", "/v1/contacts/resolve", {"identifiers": [{"type": "phone", "value": B_PHONE}]}),
        "lookup B's contact id": (
            "POST",
            "/v1/contacts/lookup",
            {"identifiers": [{"type": "contact_id", "value": ids["contactID"]}]},
        ),
        "block B's contact": ("POST", "/v1/contacts/block", {"contact_id": ids["contactID"]}),
        "unblock B's contact": ("POST", "/v1/contacts/unblock", {"contact_id": ids["contactID"]}),
        "assign B's tag": ("POST", f"/v1/contacts/{a_in['contact_id']}/tags", {"tag_id": ids["tagID"]}),
        "merge B's contact into A's": (
            "POST",
            f"/v1/contacts/{a_in['contact_id']}/merge",
            {"from_contact_id": ids["contactID"]},
        ),
        "add B's member to A's team": ("POST", f"/v1/teams/{a_team}/members", {"user_id": b.member_user_id}),
        "assign to B's member": (
            "POST",
            f"/v1/conversations/{a_in['conversation_id']}/assign",
            {"user_id": b.member_user_id},
        ),
        "assign to B's team": (
            "POST",
            f"/v1/conversations/{a_in['conversation_id']}/assign",
            {"team_id": ids["teamID"]},
        ),
        "phone lookup on B's channel": (
            "POST",
            "/v1/users/lookup/info",
            {"phone": "+1 212 555 0100", "channel_id": ids["channelID"]},
        ),
    }
    problems = []
    for what, (method, path, body) in not_found.items():
        resp = api.request(method, path, json=body)
        try:
            Api.assert_error(resp, 404, "not_found")
        except AssertionError:
            problems.append(f"{what}: {method} {path}: {resp.status_code} {resp.text[:300]}")

    # Filters naming B's channel find nothing of B's.
    listed = api.get("/v1/conversations", params={"channel_id": ids["channelID"]})
    assert listed.status_code == 200 and listed.json()["data"] == [], listed.text

    # B's cursor is bound to B: in A it is refused, never a page of B's contacts.
    page = api.get("/v1/contacts", params={"limit": 1}, headers=b.owner).json()
    assert page["meta"]["has_more"] is True and page["meta"]["cursor"]
    api.assert_error(
        api.get("/v1/contacts", params={"limit": 1, "cursor": page["meta"]["cursor"]}), 400, "validation_failed"
    )

    # X-Organization-Id names the organization of a *session*; a user who is not a member of B gets no organization
    # (403), never B's; an API key's organization is its own whatever the header says.
    a_session = {**api.login(OWNER_EMAIL), "X-Organization-Id": b.org_id}
    api.assert_error(api.get("/v1/organization", headers=a_session), 403, "forbidden")
    api.assert_error(api.get(f"/v1/contacts/{ids['contactID']}", headers=a_session), 403, "forbidden")
    with_key = api.get("/v1/organization", headers={**api.owner_headers, "X-Organization-Id": b.org_id})
    assert _ok(with_key)["id"] == api.org_id
    api.assert_error(
        api.get(f"/v1/contacts/{ids['contactID']}", headers={**api.owner_headers, "X-Organization-Id": b.org_id}),
        404,
        "not_found",
    )

    after = snapshot_b(api, b)
    problems += [f"B's data changed: {k}: {before[k]!r} → {after[k]!r}" for k in before if before[k] != after[k]]
    assert not problems, f"{len(problems)} isolation failures:\n" + "\n".join(problems)
