"""Identity and access: registration and sessions, organizations, members, invitations, teams, API keys,
audit logs, security settings, sessions, and the signed-in user's own area."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard import audit, clock
from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import authenticated, requires
from switchboard.api.context import base_url, current_auth, header, source_ip
from switchboard.api.envelope import Data, ListData, Meta, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.api.pagination import query_fingerprint, read_page
from switchboard.models import BaseModel
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard import mail
    from switchboard.identity import accounts, apikeys, lifecycle, models, organizations, security, sessions, users
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    accounts = lazy_module("switchboard.identity.accounts")
    apikeys = lazy_module("switchboard.identity.apikeys")
    lifecycle = lazy_module("switchboard.identity.lifecycle")
    mail = lazy_module("switchboard.mail")
    models = lazy_module("switchboard.identity.models")
    organizations = lazy_module("switchboard.identity.organizations")
    security = lazy_module("switchboard.identity.security")
    sessions = lazy_module("switchboard.identity.sessions")
    users = lazy_module("switchboard.identity.users")

app = create_resolver()


class EventAccepted(BaseModel):
    id: str


class SessionsEnded(BaseModel):
    password_reset: bool
    sessions_ended: int


# Registration and sessions ------------------------------------------------------------------------------------
AUTH = ["auth"]


@app.post("/v1/auth/email-verification/request", middlewares=authenticated(), tags=AUTH, status_code=202)
def request_email_verification(body: Annotated[models.EmailOnly, Body()]) -> Data[models.Accepted]:
    """E-mails a 6-digit one-time code (10 minutes, 5 tries) to verify the address before registration."""
    accounts.request_email_verification(get_store(), mail.get_mail_sender(), body.email, ip=source_ip(app))
    return Data(data=models.Accepted())


@app.post("/v1/auth/email-verification/confirm", middlewares=authenticated(), tags=AUTH)
def confirm_email_verification(body: Annotated[models.EmailCode, Body()]) -> Data[models.Accepted]:
    accounts.confirm_email(get_store(), body.email, body.otp_code, ip=source_ip(app))
    return Data(data=models.Accepted())


@app.post("/v1/auth/register", middlewares=authenticated(), tags=AUTH, status_code=201)
def register(body: Annotated[models.Register, Body()]) -> Data[models.User]:
    """Registers a user whose e-mail was verified with `email-verification/confirm`."""
    return Data(data=accounts.register(get_store(), body, ip=source_ip(app)))


@app.post("/v1/auth/register/verify", middlewares=authenticated(), tags=AUTH, status_code=201)
def register_verify(body: Annotated[models.RegisterVerify, Body()]) -> Data[models.User]:
    """Verifies the one-time code and registers in one step."""
    return Data(data=accounts.register_verify(get_store(), body, ip=source_ip(app)))


@app.post("/v1/auth/login", middlewares=authenticated(), tags=AUTH)
def login(body: Annotated[models.Login, Body()]) -> Data[models.LoginResult]:
    result = accounts.login(get_store(), body, ip=source_ip(app), user_agent=header(app, "User-Agent"))
    return Data(data=result)


@app.post("/v1/auth/logout", middlewares=authenticated(), tags=AUTH, status_code=204)
def logout() -> None:
    accounts.logout(get_store(), current_auth(app))


@app.post("/v1/auth/password/reset", middlewares=authenticated(), tags=AUTH, status_code=202)
def password_reset(body: Annotated[models.EmailOnly, Body()]) -> Data[models.Accepted]:
    """E-mails a reset code when the address has an account; the answer is the same either way."""
    accounts.request_password_reset(get_store(), mail.get_mail_sender(), body.email, ip=source_ip(app))
    return Data(data=models.Accepted())


@app.post("/v1/auth/password/confirm", middlewares=authenticated(), tags=AUTH)
def password_confirm(body: Annotated[models.PasswordConfirm, Body()]) -> Data[SessionsEnded]:
    """Sets the new password; every session of the user ends."""
    ended = accounts.confirm_password_reset(get_store(), body, ip=source_ip(app))
    return Data(data=SessionsEnded(password_reset=True, sessions_ended=ended))


@app.get("/v1/auth/me", middlewares=authenticated(), tags=AUTH)
def me() -> Data[models.User]:
    auth = current_auth(app)
    return Data(data=accounts.user_view(accounts.get_user(get_store(), accounts.require_user(auth))))


@app.patch("/v1/auth/me", middlewares=authenticated(), tags=AUTH)
def update_me(body: Annotated[models.ProfileUpdate, Body()]) -> Data[models.User]:
    return Data(data=accounts.update_profile(get_store(), current_auth(app), body))


@app.get("/v1/auth/me/preferences", middlewares=authenticated(), tags=AUTH)
def get_preferences() -> Data[models.Preferences]:
    return Data(data=accounts.get_preferences(get_store(), current_auth(app)))


@app.put("/v1/auth/me/preferences", middlewares=authenticated(), tags=AUTH)
def put_preferences(body: Annotated[models.Preferences, Body()]) -> Data[models.Preferences]:
    return Data(data=accounts.put_preferences(get_store(), current_auth(app), body))


@app.get("/v1/auth/me/presence", middlewares=authenticated(), tags=AUTH)
def get_presence() -> Data[models.PresenceView]:
    return Data(data=accounts.get_presence(get_store(), current_auth(app)))


@app.put("/v1/auth/me/presence", middlewares=authenticated(), tags=AUTH)
def put_presence(body: Annotated[models.Presence, Body()]) -> Data[models.PresenceView]:
    return Data(data=accounts.put_presence(get_store(), current_auth(app), body))


@app.get("/v1/auth/onboarding", middlewares=authenticated(), tags=AUTH)
def get_onboarding() -> Data[models.Onboarding]:
    return Data(data=accounts.get_onboarding(get_store(), current_auth(app)))


@app.post("/v1/auth/onboarding", middlewares=authenticated(), tags=AUTH)
def update_onboarding(body: Annotated[models.OnboardingStep, Body()]) -> Data[models.Onboarding]:
    return Data(data=accounts.update_onboarding(get_store(), current_auth(app), body))


@app.post("/v1/auth/fingerprint-events", middlewares=authenticated(), tags=AUTH, status_code=202)
def fingerprint_event(body: Annotated[models.FingerprintEvent, Body()]) -> Data[EventAccepted]:
    return Data(data=EventAccepted(id=accounts.record_fingerprint(get_store(), current_auth(app), body)))


# Sessions and security settings --------------------------------------------------------------------------------
SETTINGS = ["settings"]


@app.get("/v1/settings/sessions", middlewares=authenticated(), tags=SETTINGS)
def list_sessions() -> ListData[models.Session]:
    auth = current_auth(app)
    rows = sessions.list_sessions(get_store(), accounts.require_user(auth))
    return whole_list(
        [
            models.Session(
                id=r["id"],
                created_at=r["created_at"],
                last_seen_at=r["last_seen_at"],
                expires_at=clock.iso(datetime.fromtimestamp(r["expires_at"], UTC)),
                ip_address=r.get("ip_address"),
                user_agent=r.get("user_agent"),
                current=r["id"] == auth.principal_id,
            )
            for r in rows
        ]
    )


@app.delete("/v1/settings/sessions/<sessionID>", middlewares=authenticated(), tags=SETTINGS, status_code=204)
def revoke_session(sessionID: str) -> None:
    auth = current_auth(app)
    sessions.revoke(get_store(), accounts.require_user(auth), sessionID)


@app.get("/v1/settings/security", middlewares=requires("admin"), tags=SETTINGS)
def get_security_settings() -> Data[models.SecuritySettings]:
    return Data(data=security.get_security(get_store(), current_auth(app).org_id))


@app.patch("/v1/settings/security", middlewares=requires("admin"), tags=SETTINGS)
def update_security_settings(body: Annotated[models.SecuritySettingsUpdate, Body()]) -> Data[models.SecuritySettings]:
    return Data(data=security.update_security(get_store(), current_auth(app), body, source_ip(app)))


# Organizations ---------------------------------------------------------------------------------------------------
ORGS = ["organizations"]


@app.get(
    "/v1/organization",
    middlewares=requires("viewer", when_pending="owner"),
    tags=ORGS,
    summary="The current organization",
)
def get_organization() -> Data[models.Organization]:
    return Data(data=organizations.get_organization(get_store(), current_auth(app)))


@app.patch("/v1/organization", middlewares=requires("admin"), tags=ORGS, summary="Rename the organization")
def update_organization(body: Annotated[models.OrganizationUpdate, Body()]) -> Data[models.Organization]:
    return Data(data=organizations.update_organization(get_store(), current_auth(app), body))


@app.delete(
    "/v1/organization",
    middlewares=requires("owner", when_pending="owner", sessions_only=True),
    tags=ORGS,
    status_code=202,
)
def delete_organization(
    body: Annotated[models.OrganizationDeletion | None, Body()] = None,
) -> Data[models.Organization]:
    """An owner's session, with `confirm` = the organization's name: the organization is `pending_deletion` for 30
    days (API keys, callbacks, webhooks and portal links stop at once; an owner can restore it), then purged."""
    return Data(data=lifecycle.delete_organization(get_store(), current_auth(app), body))


@app.post(
    "/v1/organization/restore",
    middlewares=requires("owner", when_pending="owner", sessions_only=True),
    tags=ORGS,
    summary="Restore the organization",
)
def restore_organization() -> Data[models.Organization]:
    """An owner's session, within 30 days of the deletion request: the organization and its keys act again."""
    return Data(data=lifecycle.restore_organization(get_store(), current_auth(app)))


@app.get("/v1/organizations", middlewares=authenticated(), tags=ORGS, summary="The caller's organizations")
def list_organizations() -> ListData[models.OrganizationWithRole]:
    return whole_list(organizations.list_my_organizations(get_store(), current_auth(app)))


@app.post("/v1/organizations", middlewares=authenticated(), tags=ORGS, status_code=201)
def create_organization(body: Annotated[models.OrganizationCreate, Body()]) -> Data[models.Organization]:
    """A signed-in user creates an organization and becomes its owner."""
    return Data(data=organizations.create_organization(get_store(), current_auth(app), body))


MEMBERS = ["members"]


@app.get("/v1/members", middlewares=requires("viewer"), tags=MEMBERS, summary="List organization members")
def list_members(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ListData[models.Member]:
    members, has_more, total = organizations.list_members(get_store(), current_auth(app), limit, offset)
    return ListData(data=members, meta=Meta(has_more=has_more, limit=limit, offset=offset, total=total))


@app.get("/v1/members/<userID>", middlewares=requires("viewer"), tags=MEMBERS)
def get_member(userID: str) -> Data[models.Member]:
    return Data(data=organizations.get_member(get_store(), current_auth(app), userID))


@app.patch("/v1/members/<userID>", middlewares=requires("admin"), tags=MEMBERS)
def update_member(userID: str, body: Annotated[models.MemberUpdate, Body()]) -> Data[models.Member]:
    return Data(data=organizations.update_member_role(get_store(), current_auth(app), userID, body))


@app.delete("/v1/members/<userID>", middlewares=requires("admin"), tags=MEMBERS, status_code=204)
def remove_member(userID: str) -> None:
    organizations.remove_member(get_store(), current_auth(app), userID)


INVITES = ["invitations"]


@app.get("/v1/invitations", middlewares=requires("admin"), tags=INVITES)
def list_invitations() -> ListData[models.Invitation]:
    return whole_list(organizations.list_invitations(get_store(), current_auth(app)))


@app.post("/v1/invitations", middlewares=requires("admin"), tags=INVITES, status_code=201)
def create_invitation(body: Annotated[models.InvitationCreate, Body()]) -> Data[models.Invitation]:
    """E-mails an invitation link; it expires after 7 days."""
    inv = organizations.create_invitation(get_store(), mail.get_mail_sender(), current_auth(app), body, base_url(app))
    return Data(data=inv)


@app.get("/v1/invitations/<invitationID>", middlewares=requires("admin"), tags=INVITES)
def get_invitation(invitationID: str) -> Data[models.Invitation]:
    return Data(data=organizations.get_invitation(get_store(), current_auth(app), invitationID))


@app.delete("/v1/invitations/<invitationID>", middlewares=requires("admin"), tags=INVITES, status_code=204)
def revoke_invitation(invitationID: str) -> None:
    organizations.revoke_invitation(get_store(), current_auth(app), invitationID)


@app.post("/v1/invitations/<id>/accept", middlewares=authenticated(), tags=INVITES)
def accept_invitation(id: str, body: Annotated[models.InvitationAccept, Body()]) -> Data[models.Invitation]:
    """The invited user (session with the invited e-mail) joins with the invited role, sending the token of the
    e-mailed link."""
    return Data(data=organizations.accept_invitation(get_store(), current_auth(app), id, body.token))


TEAMS = ["teams"]


@app.get("/v1/teams", middlewares=requires("viewer"), tags=TEAMS)
def list_teams() -> ListData[models.Team]:
    return whole_list(organizations.list_teams(get_store(), current_auth(app)))


@app.post("/v1/teams", middlewares=requires("admin"), tags=TEAMS, status_code=201)
def create_team(body: Annotated[models.TeamCreate, Body()]) -> Data[models.Team]:
    return Data(data=organizations.create_team(get_store(), current_auth(app), body))


@app.get("/v1/teams/<teamID>", middlewares=requires("viewer"), tags=TEAMS)
def get_team(teamID: str) -> Data[models.Team]:
    return Data(data=organizations.get_team(get_store(), current_auth(app), teamID))


@app.patch("/v1/teams/<teamID>", middlewares=requires("admin"), tags=TEAMS)
def update_team(teamID: str, body: Annotated[models.TeamUpdate, Body()]) -> Data[models.Team]:
    return Data(data=organizations.update_team(get_store(), current_auth(app), teamID, body))


@app.delete("/v1/teams/<teamID>", middlewares=requires("admin"), tags=TEAMS, status_code=204)
def delete_team(teamID: str) -> None:
    organizations.delete_team(get_store(), current_auth(app), teamID)


@app.get("/v1/teams/<teamID>/members", middlewares=requires("viewer"), tags=TEAMS)
def list_team_members(teamID: str) -> ListData[models.TeamMember]:
    return whole_list(organizations.list_team_members(get_store(), current_auth(app), teamID))


@app.post("/v1/teams/<teamID>/members", middlewares=requires("admin"), tags=TEAMS, status_code=201)
def add_team_member(teamID: str, body: Annotated[models.TeamMemberAdd, Body()]) -> Data[models.TeamMember]:
    return Data(data=organizations.add_team_member(get_store(), current_auth(app), teamID, body))


@app.delete("/v1/teams/<teamID>/members/<userID>", middlewares=requires("admin"), tags=TEAMS, status_code=204)
def remove_team_member(teamID: str, userID: str) -> None:
    organizations.remove_team_member(get_store(), current_auth(app), teamID, userID)


# API keys and audit logs -------------------------------------------------------------------------------------------
KEYS = ["api-keys"]


@app.get("/v1/api-keys", middlewares=requires("admin"), tags=KEYS, summary="List API keys")
def list_api_keys() -> ListData[models.ApiKey]:
    return whole_list(apikeys.list_api_keys(get_store(), current_auth(app)))


@app.post("/v1/api-keys", middlewares=requires("admin"), tags=KEYS, status_code=201, summary="Create an API key")
def create_api_key(body: Annotated[models.ApiKeyCreate, Body()]) -> Data[models.ApiKeyCreated]:
    """The plain `key` is in this response only; it is stored as a SHA-256 hash."""
    return Data(data=apikeys.create_api_key(get_store(), current_auth(app), body))


@app.get("/v1/api-keys/<keyID>", middlewares=requires("admin"), tags=KEYS)
def get_api_key(keyID: str) -> Data[models.ApiKey]:
    return Data(data=apikeys.get_api_key(get_store(), current_auth(app), keyID))


@app.delete("/v1/api-keys/<keyID>", middlewares=requires("admin"), tags=KEYS, status_code=204, summary="Revoke")
def revoke_api_key(keyID: str) -> None:
    """Takes effect on the next request made with the key."""
    apikeys.revoke_api_key(get_store(), current_auth(app), keyID)


@app.get("/v1/audit-logs", middlewares=requires("admin"), tags=["audit-logs"])
def list_audit_logs(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    since: Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}T")] = None,
    until: Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}T")] = None,
    action: Annotated[str | None, Query(max_length=100)] = None,
    actor_id: Annotated[str | None, Query(max_length=100)] = None,
    target_type: Annotated[str | None, Query(max_length=100)] = None,
    target_id: Annotated[str | None, Query(max_length=100)] = None,
) -> ListData[models.AuditEntry]:
    """Newest first; filter by time range, action, actor or target."""
    auth = current_auth(app)
    filters = {
        "since": since,
        "until": until,
        "action": action,
        "actor_id": actor_id,
        "target_type": target_type,
        "target_id": target_id,
    }
    fingerprint = query_fingerprint("audit-logs", filters)
    items, next_cursor = read_page(
        auth.org_id,
        fingerprint,
        cursor,
        lambda start: audit.list_audit(get_store(), auth.org_id, limit=limit, start_key=start, **filters),
    )
    entries = [models.AuditEntry.model_validate(i) for i in items]
    return cursor_list(entries, limit, next_cursor)


# The signed-in user's own area ------------------------------------------------------------------------------------
USERS = ["users"]


@app.get("/v1/users/me/profile", middlewares=authenticated(), tags=USERS)
def get_profile() -> Data[models.User]:
    return me()


@app.patch("/v1/users/me/profile", middlewares=authenticated(), tags=USERS)
def update_profile(body: Annotated[models.ProfileUpdate, Body()]) -> Data[models.User]:
    return Data(data=accounts.update_profile(get_store(), current_auth(app), body))


@app.post("/v1/users/me/avatar", middlewares=authenticated(), tags=USERS)
def upload_avatar(body: Annotated[users.AvatarUpload, Body()]) -> Data[users.AvatarUploadTicket]:
    """A presigned S3 PUT for the new avatar (PNG, JPEG or WebP, up to 5 MiB)."""
    return Data(data=users.avatar_upload(get_store(), current_auth(app), body))


@app.get("/v1/users/me/avatar", middlewares=authenticated(), tags=USERS)
def get_avatar() -> Data[users.AvatarLink]:
    return Data(data=users.avatar_link(get_store(), current_auth(app)))


@app.get("/v1/users/me/privacy", middlewares=authenticated(), tags=USERS)
def get_privacy() -> Data[users.Privacy]:
    return Data(data=users.get_privacy(get_store(), current_auth(app)))


@app.put("/v1/users/me/privacy", middlewares=authenticated(), tags=USERS)
def put_privacy(body: Annotated[users.Privacy, Body()]) -> Data[users.Privacy]:
    return Data(data=users.put_privacy(get_store(), current_auth(app), body))


@app.get("/v1/users/me/blocklist", middlewares=authenticated(), tags=USERS)
def get_blocklist() -> ListData[users.BlockedUser]:
    return whole_list(users.blocklist(get_store(), current_auth(app)))


@app.get("/v1/users/me/blocks", middlewares=authenticated(), tags=USERS)
def list_blocks() -> ListData[users.BlockedUser]:
    return whole_list(users.blocklist(get_store(), current_auth(app)))


@app.post("/v1/users/me/blocks", middlewares=authenticated(), tags=USERS, status_code=201)
def block_user(body: Annotated[users.BlockCreate, Body()]) -> Data[users.BlockedUser]:
    return Data(data=users.block(get_store(), current_auth(app), body))


@app.delete("/v1/users/me/blocks/<userRef>", middlewares=authenticated(), tags=USERS, status_code=204)
def unblock_user(userRef: str) -> None:
    users.unblock(get_store(), current_auth(app), userRef)


@app.get("/v1/users/me/contacts", middlewares=authenticated(), tags=USERS)
def my_contacts() -> ListData[users.Contact]:
    return whole_list(users.contacts(get_store(), current_auth(app)))


@app.post("/v1/users/lookup/check", middlewares=requires("member"), tags=USERS)
def lookup_check(body: Annotated[users.LookupRequest, Body()]) -> Data[users.LookupCheck]:
    found = users.lookup(get_store(), current_auth(app), body)
    return Data(data=users.LookupCheck(exists=found.exists))


@app.post("/v1/users/lookup/info", middlewares=requires("member"), tags=USERS)
def lookup_info(body: Annotated[users.LookupRequest, Body()]) -> Data[users.LookupInfo]:
    return Data(data=users.lookup(get_store(), current_auth(app), body))


handler = make_handler(app)
