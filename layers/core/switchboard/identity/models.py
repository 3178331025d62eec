"""Identity resources as the API shows them, and the request bodies."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from switchboard.contacts.identifiers import PHONE_REGIONS
from switchboard.identity.passwords import password_problem
from switchboard.models import BaseModel, DateTimeIn, EmailStr, Name, Storable, Strict, Timestamp

RoleName = Literal["owner", "admin", "member", "viewer"]


def _phone_region(value: str) -> str:
    if value not in PHONE_REGIONS:
        raise ValueError("is not an ISO 3166-1 alpha-2 country code with a phone numbering plan, e.g. US, GB, DE")
    return value


# A country whose national number forms an organization's numbers are read in: the ISO 3166-1 alpha-2 codes that
# libphonenumber has a numbering plan for (switchboard.contacts.identifiers.PHONE_REGIONS), upper case.
PhoneRegion = Annotated[str, Field(json_schema_extra={"enum": list(PHONE_REGIONS)}), AfterValidator(_phone_region)]
Otp = Field(min_length=6, max_length=6, pattern=r"^[0-9]{6}$", description="6-digit one-time code")


# Users and accounts ---------------------------------------------------------------------------------------------
class User(BaseModel):
    """The spec's User (returned by registration)."""

    id: str = Field(description="The user's id (`usr_…`)")
    email: str = Field(description="Lower-cased e-mail address")
    email_verified: bool
    name: str = Field(description="Full name (may be empty)")
    image: str = Field(description="Avatar URL (empty when none)")
    timezone: str = Field(description="IANA time zone")
    week_start: str = Field(description="`monday`, `sunday` or `saturday`")
    created_at: Timestamp
    first_name: str
    last_name: str

    openapi_examples = (
        {
            "id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "email": "ada@example.com",
            "email_verified": True,
            "name": "Ada Lovelace",
            "image": "",
            "timezone": "Europe/London",
            "week_start": "monday",
            "created_at": "2026-11-21T09:00:00.000Z",
            "first_name": "Ada",
            "last_name": "Lovelace",
        },
    )


class EmailOnly(Strict):
    """An e-mail address (verification request, password reset)."""

    email: EmailStr = Field(min_length=1, description="The address")

    openapi_examples = ({"email": "ada@example.com"},)


class EmailCode(Strict):
    """An e-mail address and the one-time code e-mailed to it."""

    email: EmailStr = Field(min_length=1)
    otp_code: str = Otp

    openapi_examples = ({"email": "ada@example.com", "otp_code": "314159"},)


NEW_PASSWORD_RULES = (
    "At least 8 characters; not one of the most common passwords, not one or two characters repeated, not a run of "
    "consecutive characters, and not the account's e-mail."
)


def _strong_password(password: str, info: ValidationInfo) -> str:
    """A new password passes `passwords.password_problem` (400 `validation_failed` on `body.password` otherwise)."""
    problem = password_problem(password, info.data.get("email"))
    if problem is not None:
        raise PydanticCustomError("weak_password", f"The password {problem}.")
    return password


class Register(Strict):
    """Body of `POST /v1/auth/register` (after `email-verification/confirm`)."""

    email: EmailStr = Field(min_length=1)
    password: str = Field(min_length=8, max_length=256, description=NEW_PASSWORD_RULES)
    name: Name | None = Field(default=None, max_length=200, description="full name")
    telemetry_id: str | None = Field(default=None, max_length=200, description="device fingerprint id")

    _password = field_validator("password")(_strong_password)

    openapi_examples = ({"email": "ada@example.com", "password": "correct horse battery", "name": "Ada Lovelace"},)


class RegisterVerify(Register):
    """Body of `POST /v1/auth/register/verify`: registration with the e-mailed one-time code."""

    otp_code: str = Otp

    openapi_examples = (
        {"email": "ada@example.com", "password": "correct horse battery", "name": "Ada Lovelace", "otp_code": "314159"},
    )


class Login(Strict):
    """Body of `POST /v1/auth/login`."""

    email: EmailStr = Field(min_length=1)
    password: str = Field(min_length=1, max_length=256, description="The account's password")

    openapi_examples = ({"email": "ada@example.com", "password": "correct horse battery"},)


class LoginResult(BaseModel):
    """A new session: send `token` as `Authorization: Bearer <token>`."""

    token: str = Field(description="The session token (shown once; stored only as a hash)")
    expires_at: Timestamp = Field(description="Sliding: each use moves it forward")
    user: User

    openapi_examples = (
        {
            "token": "sess_4f9c2a7e1b8d4c3a9e6f0b2d7a1c5e8f3b9d6a2c",
            "expires_at": "2026-12-21T09:00:00.000Z",
            "user": User.openapi_examples[0],
        },
    )


class PasswordConfirm(Strict):
    """Body of `POST /v1/auth/password/confirm`: the e-mailed code and the new password."""

    email: EmailStr = Field(min_length=1)
    otp_code: str = Otp
    password: str = Field(min_length=8, max_length=256, description=NEW_PASSWORD_RULES)

    _password = field_validator("password")(_strong_password)

    openapi_examples = ({"email": "ada@example.com", "otp_code": "271828", "password": "a new long passphrase"},)


class Accepted(BaseModel):
    """The request was taken (an e-mail may follow)."""

    accepted: bool = Field(default=True, description="Always true")

    openapi_examples = ({"accepted": True},)


class ProfileUpdate(Strict):
    """The signed-in user's profile fields to change; fields left out stay."""

    name: Name | None = Field(default=None, min_length=1, max_length=200)
    timezone: str | None = Field(default=None, min_length=1, max_length=64, description="IANA time zone")
    week_start: Literal["monday", "sunday", "saturday"] | None = None

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None:
            return value

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("unknown IANA time zone") from None
        return value

    openapi_examples = ({"name": "Ada King", "timezone": "Europe/London", "week_start": "monday"},)


PreferenceValue = str | int | float | bool | None


class Preferences(BaseModel):
    """The signed-in user's interface preferences: up to 50 keys with scalar values."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    preferences: dict[str, PreferenceValue] = Field(
        default_factory=dict, max_length=50, description="Scalar values by key (at most 50 keys)"
    )

    openapi_examples = ({"preferences": {"theme": "dark", "compact_lists": True}},)


class Presence(Strict):
    """The signed-in user's availability."""

    status: Literal["online", "away", "busy", "offline"] = Field(description="`online`, `away`, `busy` or `offline`")
    message: str | None = Field(default=None, max_length=140, description="A short status message")

    openapi_examples = ({"status": "busy", "message": "In a meeting until 3 pm"},)


class PresenceView(Presence):
    """The signed-in user's availability, with when it was set."""

    updated_at: Timestamp = Field(description="When it was set")

    openapi_examples = (
        {"status": "busy", "message": "In a meeting until 3 pm", "updated_at": "2026-11-21T10:00:00.000Z"},
    )


class OnboardingStep(Strict):
    """Body of `POST /v1/auth/onboarding`."""

    step: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$", description="The step's name")
    completed: bool = Field(default=True, description="False marks it not done again")

    openapi_examples = ({"step": "connect_channel", "completed": True},)


class Onboarding(BaseModel):
    """The signed-in user's onboarding progress."""

    completed_steps: list[str] = Field(description="Steps done (or skipped)")
    completed: bool = Field(description="Every step is done")
    updated_at: Timestamp | None = Field(default=None, description="The last step recorded")

    openapi_examples = (
        {
            "completed_steps": ["create_organization", "connect_channel"],
            "completed": False,
            "updated_at": "2026-11-21T10:00:00.000Z",
        },
    )


class FingerprintEvent(Strict):
    """Body of `POST /v1/auth/fingerprint-events`."""

    telemetry_id: str = Field(min_length=1, max_length=200, description="The device fingerprint id")
    event_type: str = Field(min_length=1, max_length=64)
    occurred_at: DateTimeIn | None = Field(default=None, description="When it happened; default: when received")
    properties: Annotated[dict[str, Any], Field(max_length=50), Storable] = Field(
        default_factory=dict, description="At most 50 keys"
    )

    openapi_examples = ({"telemetry_id": "fp_9a8b7c6d", "event_type": "login_page_view"},)


class Session(BaseModel):
    """One of the signed-in user's sessions."""

    id: str
    created_at: Timestamp
    last_seen_at: Timestamp = Field(description="The session's last request")
    expires_at: Timestamp
    ip_address: str | None = Field(default=None, description="The address of the session's last request")
    user_agent: str | None = Field(default=None, description="The browser or client that signed in")
    current: bool = Field(default=False, description="The session making this request")

    openapi_examples = (
        {
            "id": "ses_01jd7zw1x2y3z4a5b6c7d8e9fg",
            "created_at": "2026-11-21T10:00:00.000Z",
            "last_seen_at": "2026-11-21T10:00:00.000Z",
            "expires_at": "2026-12-21T10:00:00.000Z",
            "ip_address": "203.0.113.7",
            "user_agent": "Mozilla/5.0",
            "current": True,
        },
    )


# Organizations ---------------------------------------------------------------------------------------------------
class Organization(BaseModel):
    """An organization: the tenant every resource belongs to."""

    id: str = Field(description="The organization's id (`org_…`)")
    name: str
    created_at: Timestamp
    updated_at: Timestamp
    status: Literal["active", "pending_deletion", "purging"] = Field(
        default="active", description="`pending_deletion` for 30 days after a deletion request, then `purging`"
    )
    purge_at: Timestamp | None = Field(default=None, description="When a pending deletion becomes final")
    default_phone_region: PhoneRegion | None = Field(
        default=None,
        description=(
            "ISO 3166-1 alpha-2 country in which phone numbers written in national form (no `+` or `00`: "
            "`(415) 555-2671`, `020 7946 0958`) are read; null: such numbers are refused (400 `validation_failed`)"
        ),
    )

    openapi_examples = (
        {
            "id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "name": "Acme Ltd",
            "created_at": "2026-11-21T09:05:00.000Z",
            "updated_at": "2026-11-21T09:05:00.000Z",
            "status": "active",
            "purge_at": None,
            "default_phone_region": "GB",
        },
    )


class OrganizationWithRole(Organization):
    """An organization of the caller, with the caller's role in it."""

    role: str = Field(description="The caller's role: `owner`, `admin`, `member` or `viewer`")

    openapi_examples = (
        {
            "id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "name": "Acme Ltd",
            "created_at": "2026-11-21T10:00:00.000Z",
            "updated_at": "2026-11-21T10:00:00.000Z",
            "status": "active",
            "purge_at": None,
            "default_phone_region": None,
            "role": "owner",
        },
    )


class OrganizationCreate(Strict):
    """Body of `POST /v1/organizations`."""

    name: Name = Field(min_length=1, max_length=200, description="The organization's name")

    openapi_examples = ({"name": "Acme Ltd"},)


class OrganizationUpdate(Strict):
    """Body of `PATCH /v1/organization`: fields left out stay."""

    # Absent means unchanged; an explicit null is refused (an organization keeps a name).
    name: Name = Field(default=None, min_length=1, max_length=200, description="The new name")  # type: ignore[assignment]
    default_phone_region: PhoneRegion | None = Field(
        default=None,
        description="Where numbers in national form are read (ISO 3166-1 alpha-2); null: nowhere, they are refused",
    )

    openapi_examples = ({"name": "Acme Holdings Ltd"}, {"default_phone_region": "US"})


class OrganizationDeletion(Strict):
    """Body of `DELETE /v1/organization`."""

    confirm: str = Field(max_length=200, description="The organization's name, exactly as shown.")

    openapi_examples = ({"confirm": "Acme Ltd"},)


class Member(BaseModel):
    """The spec's Organization member."""

    id: str = Field(description="The membership's id")
    user_id: str
    role: RoleName = Field(description="`owner` > `admin` > `member` > `viewer`")
    user_email: str = Field(description="The member's e-mail address")
    user_name: str = Field(description="The member's name")
    user_image: str = Field(description="The member's avatar URL (empty when none)")
    created_at: Timestamp = Field(description="When they joined")

    openapi_examples = (
        {
            "id": "mem_01jd7zp1a2b3c4d5e6f7g8h9jk_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "user_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "role": "admin",
            "user_email": "ada@example.com",
            "user_name": "Ada Lovelace",
            "user_image": "",
            "created_at": "2026-11-21T09:05:00.000Z",
        },
    )


class MemberUpdate(Strict):
    """Body of `PATCH /v1/members/{userID}`."""

    role: RoleName = Field(description="The new role: at most the caller's")

    openapi_examples = ({"role": "member"},)


class InvitationCreate(Strict):
    """Body of `POST /v1/invitations`."""

    email: EmailStr
    role: RoleName = Field(default="member", description="The role the invited person joins with")

    openapi_examples = ({"email": "grace@example.com", "role": "member"},)


class Invitation(BaseModel):
    """An invitation to join the organization (the e-mailed link's token is never shown)."""

    id: str
    organization_id: str
    email: str = Field(description="The invited address")
    role: RoleName = Field(description="The role the invited person joins with")
    status: Literal["pending", "accepted", "revoked", "expired"] = Field(
        description="`pending` until accepted, revoked or 7 days old"
    )
    invited_by: str | None = Field(default=None, description="The inviting user's id")
    created_at: Timestamp
    expires_at: Timestamp = Field(description="7 days after creation")
    accepted_at: Timestamp | None = Field(default=None, description="When it was accepted")

    openapi_examples = (
        {
            "id": "inv_01jd7zr1s2t3u4v5w6x7y8z9ab",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "email": "grace@example.com",
            "role": "member",
            "status": "pending",
            "invited_by": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "created_at": "2026-11-21T09:10:00.000Z",
            "expires_at": "2026-11-28T09:10:00.000Z",
            "accepted_at": None,
        },
    )


class InvitationAccept(Strict):
    """Body of `POST /v1/invitations/{id}/accept`."""

    token: str = Field(
        min_length=1, max_length=200, description="The token of the e-mailed link (after `#token=` in its URL)."
    )

    openapi_examples = ({"token": "itk_Q2xhdWRlIGludml0YXRpb24gdG9rZW4"},)


class TeamCreate(Strict):
    """Body of `POST /v1/teams`."""

    name: Name = Field(min_length=1, max_length=100, description="The team's name, unique in the organization")
    description: str | None = Field(default=None, max_length=500, description="What the team does")

    openapi_examples = ({"name": "Support", "description": "First-line customer support"},)


class TeamUpdate(Strict):
    """Body of `PATCH /v1/teams/{teamID}`: fields left out stay."""

    name: Name | None = Field(default=None, min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=500)

    openapi_examples = ({"description": "Customer support, all regions"},)


class Team(BaseModel):
    """A team of members, to assign conversations to."""

    id: str = Field(description="The team's id")
    name: str = Field(description="The team's name")
    description: str | None = None
    member_count: int = Field(default=0, description="How many members the team has")
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "team_01jd7zs1t2u3v4w5x6y7z8a9bc",
            "name": "Support",
            "description": "First-line customer support",
            "member_count": 3,
            "created_at": "2026-11-21T09:20:00.000Z",
            "updated_at": "2026-11-21T09:20:00.000Z",
        },
    )


class TeamMemberAdd(Strict):
    """Body of `POST /v1/teams/{teamID}/members`."""

    user_id: str = Field(min_length=1, max_length=64, description="A member's user id")

    openapi_examples = ({"user_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc"},)


class TeamMember(BaseModel):
    """A member of a team."""

    team_id: str
    user_id: str
    user_email: str
    user_name: str
    added_at: Timestamp = Field(description="When the member joined the team")

    openapi_examples = (
        {
            "team_id": "team_01jd7zs1t2u3v4w5x6y7z8a9bc",
            "user_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "user_email": "ada@example.com",
            "user_name": "Ada Lovelace",
            "added_at": "2026-11-21T10:00:00.000Z",
        },
    )


class ApiKey(BaseModel):
    """An API key, without its secret."""

    id: str
    name: str = Field(description="A label for the key")
    role: RoleName = Field(description="The key acts with this role (at most its creator's current role)")
    prefix: str = Field(description="The start of the key, to recognise it")
    created_at: Timestamp
    created_by: str | None = Field(default=None, description="The user who created it")
    last_used_at: Timestamp | None = Field(default=None, description="Updated at most once a minute")

    openapi_examples = (
        {
            "id": "key_01jd7zt1u2v3w4x5y6z7a8b9cd",
            "name": "CRM sync",
            "role": "member",
            "prefix": "sk_live_Xa1b",
            "created_at": "2026-11-21T09:30:00.000Z",
            "created_by": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "last_used_at": None,
        },
    )


class ApiKeyCreated(ApiKey):
    """A new API key with its plain `key`."""

    key: str = Field(description="The plain key. Shown only in this response.")

    openapi_examples = ({**ApiKey.openapi_examples[0], "key": "sk_live_Xa1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tU1v"},)


class ApiKeyCreate(Strict):
    """Body of `POST /v1/api-keys`."""

    name: Name = Field(min_length=1, max_length=100, description="A label for the key")
    role: RoleName = Field(default="member", description="At most the caller's role")

    openapi_examples = ({"name": "CRM sync", "role": "member"},)


class AuditEntry(BaseModel):
    """One recorded change: who did what to which resource, with before and after."""

    id: str
    action: str = Field(description="What happened, `<resource>.<verb>` (`channel.created`, `member.removed`, …)")
    target_type: str = Field(description="The kind of resource changed (`channel`, `member`, …)")
    target_id: str = Field(description="The resource changed")
    actor_type: str = Field(description="`session` (a signed-in user) or `api_key`")
    actor_id: str = Field(description="The session's user or the API key that acted")
    actor_user_id: str | None = Field(default=None, description="The user behind the actor (a key's creator)")
    before: dict[str, Any] | None = Field(default=None, description="The changed fields before")
    after: dict[str, Any] | None = Field(default=None, description="The changed fields after")
    created_at: Timestamp

    openapi_examples = (
        {
            "id": "aud_01jd7zv1w2x3y4z5a6b7c8d9ef",
            "action": "channel.created",
            "target_type": "channel",
            "target_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "actor_type": "session",
            "actor_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "actor_user_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "before": None,
            "after": {"name": "Support line"},
            "created_at": "2026-11-21T10:00:00.000Z",
        },
    )


class SecuritySettings(BaseModel):
    """The organization's security settings."""

    session_idle_timeout_minutes: int = Field(
        default=43200, ge=5, le=129600, description="Sessions end after this idle time"
    )
    api_key_allowed_cidrs: list[str] = Field(
        default_factory=list, max_length=50, description="API keys work only from these ranges; empty: from anywhere"
    )
    updated_at: Timestamp | None = None

    openapi_examples = (
        {"session_idle_timeout_minutes": 43200, "api_key_allowed_cidrs": ["203.0.113.0/24"], "updated_at": None},
    )


class SecuritySettingsUpdate(Strict):
    """Body of `PATCH /v1/settings/security`: fields left out stay."""

    session_idle_timeout_minutes: int | None = Field(default=None, ge=5, le=129600)
    api_key_allowed_cidrs: list[str] | None = Field(default=None, max_length=50, description="IP ranges (CIDR)")

    @field_validator("api_key_allowed_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        try:
            return [str(ipaddress.ip_network(v.strip(), strict=False)) for v in value]
        except ValueError as err:
            raise ValueError(f"not an IP range: {err}") from None

    openapi_examples = ({"api_key_allowed_cidrs": ["203.0.113.0/24", "2001:db8::/32"]},)
