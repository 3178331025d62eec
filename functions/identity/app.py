"""Identity and access: registration and sessions, organizations, members, invitations, teams, API keys,
audit logs, security settings, sessions, and the signed-in user's own area."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from pydantic import Field

from switchboard import audit, clock
from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import authenticated, requires
from switchboard.api.context import base_url, current_auth, header, source_ip
from switchboard.api.envelope import Data, ListData, Meta, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.api.pagination import query_fingerprint, read_page
from switchboard.models import BaseModel, DateTimeIn
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.identity import accounts, apikeys, lifecycle, models, organizations, security, sessions, users
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    accounts = lazy_module("switchboard.identity.accounts")
    apikeys = lazy_module("switchboard.identity.apikeys")
    lifecycle = lazy_module("switchboard.identity.lifecycle")
    models = lazy_module("switchboard.identity.models")
    organizations = lazy_module("switchboard.identity.organizations")
    security = lazy_module("switchboard.identity.security")
    sessions = lazy_module("switchboard.identity.sessions")
    users = lazy_module("switchboard.identity.users")

app = create_resolver()


class EventAccepted(BaseModel):
    """The id of the recorded event."""

    id: str = Field(description="The recorded event's id")

    openapi_examples = ({"id": "fpe_01jd86b1c2d3e4f5g6h7j8k9mn"},)


class SessionsEnded(BaseModel):
    """The new password is set; how many sessions it ended."""

    password_reset: bool = Field(description="Always true")
    sessions_ended: int = Field(description="How many of the user's sessions ended")

    openapi_examples = ({"password_reset": True, "sessions_ended": 2},)


# Registration and sessions ------------------------------------------------------------------------------------
AUTH = ["auth"]


@app.post(
    "/v1/auth/email-verification/request",
    middlewares=authenticated(),
    tags=AUTH,
    status_code=202,
    summary="Request an e-mail verification code",
    description=(
        "E-mails a 6-digit one-time code (valid 10 minutes, 5 tries) to verify the address before "
        "registration. Always 202, whether or not the address has an account. 429 `rate_limited` per "
        "e-mail and per IP.\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def request_email_verification(body: Annotated[models.EmailOnly, Body()]) -> Data[models.Accepted]:
    accounts.request_email_verification(get_store(), body.email, ip=source_ip(app))
    return Data(data=models.Accepted())


@app.post(
    "/v1/auth/email-verification/confirm",
    middlewares=authenticated(),
    tags=AUTH,
    summary="Confirm an e-mail address",
    description=(
        "Checks the one-time code; `register` may follow. A wrong or expired code is 400 `invalid_otp`.\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def confirm_email_verification(body: Annotated[models.EmailCode, Body()]) -> Data[models.Accepted]:
    accounts.confirm_email(get_store(), body.email, body.otp_code, ip=source_ip(app))
    return Data(data=models.Accepted())


@app.post(
    "/v1/auth/register",
    middlewares=authenticated(),
    tags=AUTH,
    status_code=201,
    summary="Register a user",
    description=(
        "Registers a user whose e-mail was verified with `email-verification/confirm`. Without a verified "
        "code, 400 `email_not_verified`; after one, an already registered e-mail is 409 `conflict`.\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def register(body: Annotated[models.Register, Body()]) -> Data[models.User]:
    return Data(data=accounts.register(get_store(), body, ip=source_ip(app)))


@app.post(
    "/v1/auth/register/verify",
    middlewares=authenticated(),
    tags=AUTH,
    status_code=201,
    summary="Verify and register",
    description=(
        "Verifies the one-time code and registers in one step; a wrong or expired code is 400 "
        "`invalid_otp`, an already registered e-mail 409 `conflict`.\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def register_verify(body: Annotated[models.RegisterVerify, Body()]) -> Data[models.User]:
    return Data(data=accounts.register_verify(get_store(), body, ip=source_ip(app)))


@app.post(
    "/v1/auth/login",
    middlewares=authenticated(),
    tags=AUTH,
    summary="Sign in",
    description=(
        "Exchanges e-mail and password for a session token (`expires_at`, sliding). Wrong credentials are "
        "401 `unauthenticated`; repeated failures slow down per e-mail and IP (429 `rate_limited`).\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def login(body: Annotated[models.Login, Body()]) -> Data[models.LoginResult]:
    result = accounts.login(get_store(), body, ip=source_ip(app), user_agent=header(app, "User-Agent"))
    return Data(data=result)


@app.post(
    "/v1/auth/logout",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    status_code=204,
    summary="Sign out",
    description=(
        "Ends the calling session at once.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def logout() -> None:
    accounts.logout(get_store(), current_auth(app))


@app.post(
    "/v1/auth/password/reset",
    middlewares=authenticated(),
    tags=AUTH,
    status_code=202,
    summary="Request a password reset",
    description=(
        "E-mails a reset code when the address has an account; the answer is the same either way.\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def password_reset(body: Annotated[models.EmailOnly, Body()]) -> Data[models.Accepted]:
    accounts.request_password_reset(get_store(), body.email, ip=source_ip(app))
    return Data(data=models.Accepted())


@app.post(
    "/v1/auth/password/confirm",
    middlewares=authenticated(),
    tags=AUTH,
    summary="Set a new password",
    description=(
        "Sets the new password with the e-mailed code; every session of the user ends. A wrong or expired "
        "code is 400 `invalid_otp`.\n\n"
        "Who may call: the calling app, with any valid API key of the platform in `X-Api-Key` (no session "
        "yet); 429 `rate_limited` per client IP and per e-mail."
    ),
)
def password_confirm(body: Annotated[models.PasswordConfirm, Body()]) -> Data[SessionsEnded]:
    ended = accounts.confirm_password_reset(get_store(), body, ip=source_ip(app))
    return Data(data=SessionsEnded(password_reset=True, sessions_ended=ended))


@app.get(
    "/v1/auth/me",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Get the signed-in user",
    description=(
        "The signed-in user's account.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def me() -> Data[models.User]:
    auth = current_auth(app)
    return Data(data=accounts.user_view(accounts.get_user(get_store(), accounts.require_user(auth))))


@app.patch(
    "/v1/auth/me",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Update the signed-in user",
    description=(
        "Changes the signed-in user's name and profile fields.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def update_me(body: Annotated[models.ProfileUpdate, Body()]) -> Data[models.User]:
    return Data(data=accounts.update_profile(get_store(), current_auth(app), body))


@app.get(
    "/v1/auth/me/preferences",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Get user preferences",
    description=(
        "The signed-in user's interface preferences.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_preferences() -> Data[models.Preferences]:
    return Data(data=accounts.get_preferences(get_store(), current_auth(app)))


@app.put(
    "/v1/auth/me/preferences",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Replace user preferences",
    description=(
        "Replaces the signed-in user's interface preferences.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def put_preferences(body: Annotated[models.Preferences, Body()]) -> Data[models.Preferences]:
    return Data(data=accounts.put_preferences(get_store(), current_auth(app), body))


@app.get(
    "/v1/auth/me/presence",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Get the user's presence",
    description=(
        "The signed-in user's availability (online, away, busy…).\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_presence() -> Data[models.PresenceView]:
    return Data(data=accounts.get_presence(get_store(), current_auth(app)))


@app.put(
    "/v1/auth/me/presence",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Set the user's presence",
    description=(
        "Sets the signed-in user's availability.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def put_presence(body: Annotated[models.Presence, Body()]) -> Data[models.PresenceView]:
    return Data(data=accounts.put_presence(get_store(), current_auth(app), body))


@app.get(
    "/v1/auth/onboarding",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Get onboarding progress",
    description=(
        "The signed-in user's onboarding steps and which are done.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_onboarding() -> Data[models.Onboarding]:
    return Data(data=accounts.get_onboarding(get_store(), current_auth(app)))


@app.post(
    "/v1/auth/onboarding",
    middlewares=authenticated(sessions_only=True),
    tags=AUTH,
    summary="Record an onboarding step",
    description=(
        "Marks an onboarding step done (or skipped).\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def update_onboarding(body: Annotated[models.OnboardingStep, Body()]) -> Data[models.Onboarding]:
    return Data(data=accounts.update_onboarding(get_store(), current_auth(app), body))


@app.post(
    "/v1/auth/fingerprint-events",
    middlewares=authenticated(),
    tags=AUTH,
    status_code=202,
    summary="Record a fingerprint event",
    description=(
        "Stores a client fingerprint event (device and browser signals) for fraud checks.\n\n"
        "Who may call: any valid credential (API key or session), with or without an organization."
    ),
)
def fingerprint_event(body: Annotated[models.FingerprintEvent, Body()]) -> Data[EventAccepted]:
    return Data(data=EventAccepted(id=accounts.record_fingerprint(get_store(), current_auth(app), body)))


# Sessions and security settings --------------------------------------------------------------------------------
SETTINGS = ["settings"]


@app.get(
    "/v1/settings/sessions",
    middlewares=authenticated(sessions_only=True),
    tags=SETTINGS,
    summary="List the user's sessions",
    description=(
        "The signed-in user's active sessions (`current` marks the caller's), with IP and user agent.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
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


@app.delete(
    "/v1/settings/sessions/<sessionID>",
    middlewares=authenticated(sessions_only=True),
    tags=SETTINGS,
    status_code=204,
    summary="Revoke a session",
    description=(
        "Ends one of the signed-in user's sessions; the next request with it is 401. 404 `not_found` for "
        "another user's session.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def revoke_session(sessionID: str) -> None:
    auth = current_auth(app)
    sessions.revoke(get_store(), accounts.require_user(auth), sessionID)


@app.get(
    "/v1/settings/security",
    middlewares=requires("admin"),
    tags=SETTINGS,
    summary="Get security settings",
    description=(
        "The organization's security settings (such as the address ranges API keys may call from).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_security_settings() -> Data[models.SecuritySettings]:
    return Data(data=security.get_security(get_store(), current_auth(app).org_id))


@app.patch(
    "/v1/settings/security",
    middlewares=requires("admin"),
    tags=SETTINGS,
    summary="Update security settings",
    description=(
        "Changes the fields sent; an API key may not set `api_key_allowed_cidrs` that would exclude its "
        "own address (409 `conflict`).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_security_settings(body: Annotated[models.SecuritySettingsUpdate, Body()]) -> Data[models.SecuritySettings]:
    return Data(data=security.update_security(get_store(), current_auth(app), body, source_ip(app)))


# Organizations ---------------------------------------------------------------------------------------------------
ORGS = ["organizations"]


@app.get(
    "/v1/organization",
    middlewares=requires("viewer", when_pending="owner"),
    tags=ORGS,
    summary="Get the current organization",
    description=(
        "The organization the request acts in. While it is `pending_deletion`, only an owner can read it "
        "(`purge_at` says when it is erased).\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`. While the organization is pending deletion, only an owner."
    ),
)
def get_organization() -> Data[models.Organization]:
    return Data(data=organizations.get_organization(get_store(), current_auth(app)))


@app.patch(
    "/v1/organization",
    middlewares=requires("admin"),
    tags=ORGS,
    summary="Update the organization",
    description=(
        "Changes the organization's `name` and its `default_phone_region`, the ISO 3166-1 alpha-2 country in which "
        "phone numbers written in national form (no `+` or `00`, e.g. `(415) 555-2671`) are read everywhere a "
        "number enters (contacts, resolution, sends, CDP events and imports); `null` removes it, and such numbers "
        "are refused again (400 `validation_failed`). Fields left out stay.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_organization(body: Annotated[models.OrganizationUpdate, Body()]) -> Data[models.Organization]:
    return Data(data=organizations.update_organization(get_store(), current_auth(app), body))


@app.delete(
    "/v1/organization",
    middlewares=requires("owner", when_pending="owner", sessions_only=True),
    tags=ORGS,
    status_code=202,
    summary="Delete the organization",
    description=(
        "Needs `confirm` = the organization's name (400 `validation_failed` otherwise). The organization "
        "is `pending_deletion` for 30 days: API keys, channel callbacks, webhooks and portal links stop "
        "at once; an owner can restore it; then every item is purged. Answers 202 with the organization.\n\n"
        "Who may call: a signed-in `owner`'s session only (an API key gets 403 `forbidden`); it also "
        "serves an organization pending deletion."
    ),
)
def delete_organization(
    body: Annotated[models.OrganizationDeletion | None, Body()] = None,
) -> Data[models.Organization]:
    return Data(data=lifecycle.delete_organization(get_store(), current_auth(app), body))


@app.post(
    "/v1/organization/restore",
    middlewares=requires("owner", when_pending="owner", sessions_only=True),
    tags=ORGS,
    summary="Restore the organization",
    description=(
        "Within 30 days of the deletion request: the organization and its suspended keys act again. 409 "
        "`conflict` when it is not pending deletion.\n\n"
        "Who may call: a signed-in `owner`'s session only (an API key gets 403 `forbidden`); it also "
        "serves an organization pending deletion."
    ),
)
def restore_organization() -> Data[models.Organization]:
    return Data(data=lifecycle.restore_organization(get_store(), current_auth(app)))


@app.get(
    "/v1/organizations",
    middlewares=authenticated(),
    tags=ORGS,
    summary="List the caller's organizations",
    description=(
        "A session sees every organization the user belongs to, with their role; an API key sees its own.\n\n"
        "Who may call: any valid credential (API key or session), with or without an organization."
    ),
)
def list_organizations() -> ListData[models.OrganizationWithRole]:
    return whole_list(organizations.list_my_organizations(get_store(), current_auth(app)))


@app.post(
    "/v1/organizations",
    middlewares=authenticated(sessions_only=True),
    tags=ORGS,
    status_code=201,
    summary="Create an organization",
    description=(
        "A signed-in user creates an organization and becomes its `owner`; later requests select it with "
        "`X-Organization-Id`. 429 `rate_limited` past the daily limit per user.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def create_organization(body: Annotated[models.OrganizationCreate, Body()]) -> Data[models.Organization]:
    return Data(data=organizations.create_organization(get_store(), current_auth(app), body))


MEMBERS = ["members"]


@app.get(
    "/v1/members",
    middlewares=requires("viewer"),
    tags=MEMBERS,
    summary="List organization members",
    description=(
        "Members with their role, a page at a time: `limit` (1-100, default 50) and `offset`; "
        "`meta.total` counts them all.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_members(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 50,
    offset: Annotated[int, Query(ge=0, description="Items to skip")] = 0,
) -> ListData[models.Member]:
    members, has_more, total = organizations.list_members(get_store(), current_auth(app), limit, offset)
    return ListData(data=members, meta=Meta(has_more=has_more, limit=limit, offset=offset, total=total))


@app.get(
    "/v1/members/<userID>",
    middlewares=requires("viewer"),
    tags=MEMBERS,
    summary="Get a member",
    description=(
        "One member of the organization; 404 `not_found`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_member(userID: str) -> Data[models.Member]:
    return Data(data=organizations.get_member(get_store(), current_auth(app), userID))


@app.patch(
    "/v1/members/<userID>",
    middlewares=requires("admin"),
    tags=MEMBERS,
    summary="Change a member's role",
    description=(
        "Sets the member's role; their API keys are capped at the new role from the next request. "
        "Granting or managing a role above the caller's is 403 `forbidden`; the last owner cannot be "
        "demoted (409 `conflict`).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_member(userID: str, body: Annotated[models.MemberUpdate, Body()]) -> Data[models.Member]:
    return Data(data=organizations.update_member_role(get_store(), current_auth(app), userID, body))


@app.delete(
    "/v1/members/<userID>",
    middlewares=requires("admin"),
    tags=MEMBERS,
    status_code=204,
    summary="Remove a member",
    description=(
        "Removes the member and, in the same transaction, revokes the API keys they created. The last "
        "owner cannot be removed (409 `conflict`).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def remove_member(userID: str) -> None:
    organizations.remove_member(get_store(), current_auth(app), userID)


INVITES = ["invitations"]


@app.get(
    "/v1/invitations",
    middlewares=requires("admin"),
    tags=INVITES,
    summary="List invitations",
    description=(
        "The organization's invitations with their `status`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_invitations() -> ListData[models.Invitation]:
    return whole_list(organizations.list_invitations(get_store(), current_auth(app)))


@app.post(
    "/v1/invitations",
    middlewares=requires("admin"),
    tags=INVITES,
    status_code=201,
    summary="Invite someone",
    description=(
        "E-mails an invitation link with the role to join as; it expires after 7 days. 409 `conflict` "
        "when the person is already a member; inviting above the caller's role is 403 `forbidden`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_invitation(body: Annotated[models.InvitationCreate, Body()]) -> Data[models.Invitation]:
    inv = organizations.create_invitation(get_store(), current_auth(app), body, base_url(app))
    return Data(data=inv)


@app.get(
    "/v1/invitations/<invitationID>",
    middlewares=requires("admin"),
    tags=INVITES,
    summary="Get an invitation",
    description=(
        "One invitation; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_invitation(invitationID: str) -> Data[models.Invitation]:
    return Data(data=organizations.get_invitation(get_store(), current_auth(app), invitationID))


@app.delete(
    "/v1/invitations/<invitationID>",
    middlewares=requires("admin"),
    tags=INVITES,
    status_code=204,
    summary="Revoke an invitation",
    description=(
        "The link stops working at once; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def revoke_invitation(invitationID: str) -> None:
    organizations.revoke_invitation(get_store(), current_auth(app), invitationID)


@app.post(
    "/v1/invitations/<id>/accept",
    middlewares=authenticated(sessions_only=True),
    tags=INVITES,
    summary="Accept an invitation",
    description=(
        "The invited user (a session with the invited e-mail) joins with the invited role, sending the "
        "token of the e-mailed link. Another user's invitation is 404 `not_found`, a wrong token 400 "
        "`validation_failed`, an expired, revoked or accepted one 409 `conflict`.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def accept_invitation(id: str, body: Annotated[models.InvitationAccept, Body()]) -> Data[models.Invitation]:
    return Data(data=organizations.accept_invitation(get_store(), current_auth(app), id, body.token))


TEAMS = ["teams"]


@app.get(
    "/v1/teams",
    middlewares=requires("viewer"),
    tags=TEAMS,
    summary="List teams",
    description=(
        "The organization's teams.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_teams() -> ListData[models.Team]:
    return whole_list(organizations.list_teams(get_store(), current_auth(app)))


@app.post(
    "/v1/teams",
    middlewares=requires("admin"),
    tags=TEAMS,
    status_code=201,
    summary="Create a team",
    description=(
        "Creates a team of the organization.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_team(body: Annotated[models.TeamCreate, Body()]) -> Data[models.Team]:
    return Data(data=organizations.create_team(get_store(), current_auth(app), body))


@app.get(
    "/v1/teams/<teamID>",
    middlewares=requires("viewer"),
    tags=TEAMS,
    summary="Get a team",
    description=(
        "One team; 404 `not_found`.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_team(teamID: str) -> Data[models.Team]:
    return Data(data=organizations.get_team(get_store(), current_auth(app), teamID))


@app.patch(
    "/v1/teams/<teamID>",
    middlewares=requires("admin"),
    tags=TEAMS,
    summary="Update a team",
    description=(
        "Changes the fields sent; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_team(teamID: str, body: Annotated[models.TeamUpdate, Body()]) -> Data[models.Team]:
    return Data(data=organizations.update_team(get_store(), current_auth(app), teamID, body))


@app.delete(
    "/v1/teams/<teamID>",
    middlewares=requires("admin"),
    tags=TEAMS,
    status_code=204,
    summary="Delete a team",
    description=(
        "Deletes the team and its memberships; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def delete_team(teamID: str) -> None:
    organizations.delete_team(get_store(), current_auth(app), teamID)


@app.get(
    "/v1/teams/<teamID>/members",
    middlewares=requires("viewer"),
    tags=TEAMS,
    summary="List a team's members",
    description=(
        "The members of the team.\n\n"
        "Who may call: the `viewer` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_team_members(teamID: str) -> ListData[models.TeamMember]:
    return whole_list(organizations.list_team_members(get_store(), current_auth(app), teamID))


@app.post(
    "/v1/teams/<teamID>/members",
    middlewares=requires("admin"),
    tags=TEAMS,
    status_code=201,
    summary="Add a team member",
    description=(
        "Adds an organization member to the team; 404 `not_found` for an unknown member or team.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def add_team_member(teamID: str, body: Annotated[models.TeamMemberAdd, Body()]) -> Data[models.TeamMember]:
    return Data(data=organizations.add_team_member(get_store(), current_auth(app), teamID, body))


@app.delete(
    "/v1/teams/<teamID>/members/<userID>",
    middlewares=requires("admin"),
    tags=TEAMS,
    status_code=204,
    summary="Remove a team member",
    description=(
        "Removes the member from the team; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def remove_team_member(teamID: str, userID: str) -> None:
    organizations.remove_team_member(get_store(), current_auth(app), teamID, userID)


# API keys and audit logs -------------------------------------------------------------------------------------------
KEYS = ["api-keys"]


@app.get(
    "/v1/api-keys",
    middlewares=requires("admin"),
    tags=KEYS,
    summary="List API keys",
    description=(
        "The organization's active keys, without the secret `key`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_api_keys() -> ListData[models.ApiKey]:
    return whole_list(apikeys.list_api_keys(get_store(), current_auth(app)))


@app.post(
    "/v1/api-keys",
    middlewares=requires("admin"),
    tags=KEYS,
    status_code=201,
    summary="Create an API key",
    description=(
        "Creates a key with a role no higher than the caller's (403 `forbidden` otherwise; 409 `conflict` "
        "past the keys a member may hold). The plain `key` is in this response only; it is stored as a "
        "SHA-256 hash.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_api_key(body: Annotated[models.ApiKeyCreate, Body()]) -> Data[models.ApiKeyCreated]:
    return Data(data=apikeys.create_api_key(get_store(), current_auth(app), body))


@app.get(
    "/v1/api-keys/<keyID>",
    middlewares=requires("admin"),
    tags=KEYS,
    summary="Get an API key",
    description=(
        "One key, without the secret; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_api_key(keyID: str) -> Data[models.ApiKey]:
    return Data(data=apikeys.get_api_key(get_store(), current_auth(app), keyID))


@app.delete(
    "/v1/api-keys/<keyID>",
    middlewares=requires("admin"),
    tags=KEYS,
    status_code=204,
    summary="Revoke an API key",
    description=(
        "Takes effect on the next request made with the key (401). 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def revoke_api_key(keyID: str) -> None:
    apikeys.revoke_api_key(get_store(), current_auth(app), keyID)


@app.get(
    "/v1/audit-logs",
    middlewares=requires("admin"),
    tags=["audit-logs"],
    summary="List audit log entries",
    description=(
        "Who did what in the organization, newest first, a page at a time (`limit` 1-100, `cursor`). "
        "Filters: `since` and `until` (ISO 8601; `since` after `until` is 400 `validation_failed`), `action`, "
        "`actor_id`, `target_type`, `target_id`; a cursor only continues the filters it was made with (400 "
        "`validation_failed` otherwise).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_audit_logs(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
    since: Annotated[DateTimeIn | None, Query(description="entries at or after this time (RFC 3339)")] = None,
    until: Annotated[DateTimeIn | None, Query(description="entries at or before this time (RFC 3339)")] = None,
    action: Annotated[str | None, Query(max_length=100)] = None,
    actor_id: Annotated[str | None, Query(max_length=100)] = None,
    target_type: Annotated[str | None, Query(max_length=100)] = None,
    target_id: Annotated[str | None, Query(max_length=100)] = None,
) -> ListData[models.AuditEntry]:
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
        lambda state: audit.list_audit(get_store(), auth.org_id, limit=limit, state=state, **filters),
    )
    entries = [models.AuditEntry.model_validate(i) for i in items]
    return cursor_list(entries, limit, next_cursor)


# The signed-in user's own area ------------------------------------------------------------------------------------
USERS = ["users"]


@app.get(
    "/v1/users/me/profile",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Get my profile",
    description=(
        "The signed-in user's profile (same as `GET /v1/auth/me`).\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_profile() -> Data[models.User]:
    return me()


@app.patch(
    "/v1/users/me/profile",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Update my profile",
    description=(
        "Changes the signed-in user's profile fields sent.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def update_profile(body: Annotated[models.ProfileUpdate, Body()]) -> Data[models.User]:
    return Data(data=accounts.update_profile(get_store(), current_auth(app), body))


@app.post(
    "/v1/users/me/avatar",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Upload a new avatar",
    description=(
        "A presigned S3 PUT for the new avatar (PNG, JPEG or WebP, up to 5 MiB).\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def upload_avatar(body: Annotated[users.AvatarUpload, Body()]) -> Data[users.AvatarUploadTicket]:
    return Data(data=users.avatar_upload(get_store(), current_auth(app), body))


@app.get(
    "/v1/users/me/avatar",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Get my avatar",
    description=(
        "A short-lived link to the signed-in user's avatar.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_avatar() -> Data[users.AvatarLink]:
    return Data(data=users.avatar_link(get_store(), current_auth(app)))


@app.get(
    "/v1/users/me/privacy",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Get my privacy settings",
    description=(
        "Who may see the signed-in user's presence and profile.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_privacy() -> Data[users.Privacy]:
    return Data(data=users.get_privacy(get_store(), current_auth(app)))


@app.put(
    "/v1/users/me/privacy",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Replace my privacy settings",
    description=(
        "Replaces the signed-in user's privacy settings.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def put_privacy(body: Annotated[users.Privacy, Body()]) -> Data[users.Privacy]:
    return Data(data=users.put_privacy(get_store(), current_auth(app), body))


@app.get(
    "/v1/users/me/blocklist",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="Get my blocklist",
    description=(
        "Users the signed-in user has blocked (same as `GET .../blocks`).\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def get_blocklist() -> ListData[users.BlockedUser]:
    return whole_list(users.blocklist(get_store(), current_auth(app)))


@app.get(
    "/v1/users/me/blocks",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="List my blocked users",
    description=(
        "Users the signed-in user has blocked.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def list_blocks() -> ListData[users.BlockedUser]:
    return whole_list(users.blocklist(get_store(), current_auth(app)))


@app.post(
    "/v1/users/me/blocks",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    status_code=201,
    summary="Block a user",
    description=(
        "Blocks a user for the signed-in user; 404 `not_found` for an unknown user.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def block_user(body: Annotated[users.BlockCreate, Body()]) -> Data[users.BlockedUser]:
    return Data(data=users.block(get_store(), current_auth(app), body))


@app.delete(
    "/v1/users/me/blocks/<userRef>",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    status_code=204,
    summary="Unblock a user",
    description=(
        "Removes a user from the signed-in user's blocklist.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def unblock_user(userRef: str) -> None:
    users.unblock(get_store(), current_auth(app), userRef)


@app.get(
    "/v1/users/me/contacts",
    middlewares=authenticated(sessions_only=True),
    tags=USERS,
    summary="List my contacts",
    description=(
        "The other members of the signed-in user's organizations.\n\n"
        "Who may call: a signed-in user's session only; an API key gets 403 `forbidden`."
    ),
)
def my_contacts() -> ListData[users.UserContact]:
    return whole_list(users.contacts(get_store(), current_auth(app)))


@app.post(
    "/v1/users/lookup/check",
    middlewares=requires("member"),
    tags=USERS,
    summary="Check whether a user exists",
    description=(
        "`{email}` or `{phone}` (exactly one): whether the e-mail is a member of the caller's "
        "organization (accounts elsewhere are not revealed) or the phone an account on the channel's "
        "network.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def lookup_check(body: Annotated[users.LookupRequest, Body()]) -> Data[users.LookupCheck]:
    found = users.lookup(get_store(), current_auth(app), body)
    return Data(data=users.LookupCheck(exists=found.exists))


@app.post(
    "/v1/users/lookup/info",
    middlewares=requires("member"),
    tags=USERS,
    summary="Look up a user",
    description=(
        "Like `lookup/check`, with the member's public profile when found.\n\n"
        "Who may call: the `member` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def lookup_info(body: Annotated[users.LookupRequest, Body()]) -> Data[users.LookupInfo]:
    return Data(data=users.lookup(get_store(), current_auth(app), body))


handler = make_handler(app)
