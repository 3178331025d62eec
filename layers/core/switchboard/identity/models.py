"""Identity resources as the API shows them, and the request bodies."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from switchboard.identity.passwords import password_problem
from switchboard.models import BaseModel, EmailStr, Name, Storable, Strict

RoleName = Literal["owner", "admin", "member", "viewer"]
Otp = Field(min_length=6, max_length=6, pattern=r"^[0-9]{6}$", description="6-digit one-time code")


# Users and accounts ---------------------------------------------------------------------------------------------
class User(BaseModel):
    """The spec's User (returned by registration)."""

    id: str
    email: str
    email_verified: bool
    name: str
    image: str
    timezone: str
    week_start: str
    created_at: str
    first_name: str
    last_name: str


class EmailOnly(Strict):
    email: EmailStr = Field(min_length=1)


class EmailCode(Strict):
    email: EmailStr = Field(min_length=1)
    otp_code: str = Otp


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
    email: EmailStr = Field(min_length=1)
    password: str = Field(min_length=8, max_length=256, description=NEW_PASSWORD_RULES)
    name: Name | None = Field(default=None, max_length=200, description="full name")
    telemetry_id: str | None = Field(default=None, max_length=200, description="device fingerprint id")

    _password = field_validator("password")(_strong_password)


class RegisterVerify(Register):
    otp_code: str = Otp


class Login(Strict):
    email: EmailStr = Field(min_length=1)
    password: str = Field(min_length=1, max_length=256)


class LoginResult(BaseModel):
    token: str
    expires_at: str
    user: User


class PasswordConfirm(Strict):
    email: EmailStr = Field(min_length=1)
    otp_code: str = Otp
    password: str = Field(min_length=8, max_length=256, description=NEW_PASSWORD_RULES)

    _password = field_validator("password")(_strong_password)


class Accepted(BaseModel):
    accepted: bool = True


class ProfileUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=200)
    timezone: str | None = Field(default=None, min_length=1, max_length=64)
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


PreferenceValue = str | int | float | bool | None


class Preferences(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    preferences: dict[str, PreferenceValue] = Field(default_factory=dict, max_length=50)


class Presence(Strict):
    status: Literal["online", "away", "busy", "offline"]
    message: str | None = Field(default=None, max_length=140)


class PresenceView(Presence):
    updated_at: str


class OnboardingStep(Strict):
    step: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")
    completed: bool = True


class Onboarding(BaseModel):
    completed_steps: list[str]
    completed: bool
    updated_at: str | None = None


class FingerprintEvent(Strict):
    telemetry_id: str = Field(min_length=1, max_length=200)
    event_type: str = Field(min_length=1, max_length=64)
    occurred_at: str | None = None
    properties: Annotated[dict[str, Any], Storable] = Field(default_factory=dict, max_length=50)


class Session(BaseModel):
    id: str
    created_at: str
    last_seen_at: str
    expires_at: str
    ip_address: str | None = None
    user_agent: str | None = None
    current: bool = False


# Organizations ---------------------------------------------------------------------------------------------------
class Organization(BaseModel):
    id: str
    name: str
    created_at: str
    updated_at: str
    status: Literal["active", "pending_deletion", "purging"] = "active"
    purge_at: str | None = None  # when a pending deletion becomes final (30 days after the request)


class OrganizationWithRole(Organization):
    role: str


class OrganizationCreate(Strict):
    name: Name = Field(min_length=1, max_length=200)


class OrganizationUpdate(Strict):
    name: Name = Field(min_length=1, max_length=200)


class OrganizationDeletion(Strict):
    confirm: str = Field(max_length=200, description="The organization's name, exactly as shown.")


class Member(BaseModel):
    """The spec's Organization member."""

    id: str
    user_id: str
    role: str
    user_email: str
    user_name: str
    user_image: str
    created_at: str


class MemberUpdate(Strict):
    role: RoleName


class InvitationCreate(Strict):
    email: EmailStr
    role: RoleName = "member"


class Invitation(BaseModel):
    id: str
    organization_id: str
    email: str
    role: str
    status: Literal["pending", "accepted", "revoked", "expired"]
    invited_by: str | None = None
    created_at: str
    expires_at: str
    accepted_at: str | None = None


class InvitationAccept(Strict):
    token: str = Field(
        min_length=1, max_length=200, description="The token of the e-mailed link (after `#token=` in its URL)."
    )


class TeamCreate(Strict):
    name: Name = Field(min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=500)


class TeamUpdate(Strict):
    name: Name | None = Field(default=None, min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=500)


class Team(BaseModel):
    id: str
    name: str
    description: str | None = None
    member_count: int = 0
    created_at: str
    updated_at: str


class TeamMemberAdd(Strict):
    user_id: str = Field(min_length=1, max_length=64)


class TeamMember(BaseModel):
    team_id: str
    user_id: str
    user_email: str
    user_name: str
    added_at: str


class ApiKey(BaseModel):
    id: str
    name: str
    role: str
    prefix: str
    created_at: str
    created_by: str | None = None
    last_used_at: str | None = None


class ApiKeyCreated(ApiKey):
    key: str = Field(description="The plain key. Shown only in this response.")


class ApiKeyCreate(Strict):
    name: Name = Field(min_length=1, max_length=100)
    role: RoleName = "member"


class AuditEntry(BaseModel):
    id: str
    action: str
    target_type: str
    target_id: str
    actor_type: str
    actor_id: str
    actor_user_id: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    created_at: str


class SecuritySettings(BaseModel):
    session_idle_timeout_minutes: int = Field(default=43200, ge=5, le=129600)
    api_key_allowed_cidrs: list[str] = Field(default_factory=list, max_length=50)
    updated_at: str | None = None


class SecuritySettingsUpdate(Strict):
    session_idle_timeout_minutes: int | None = Field(default=None, ge=5, le=129600)
    api_key_allowed_cidrs: list[str] | None = Field(default=None, max_length=50)

    @field_validator("api_key_allowed_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return value
        try:
            return [str(ipaddress.ip_network(v.strip(), strict=False)) for v in value]
        except ValueError as err:
            raise ValueError(f"not an IP range: {err}") from None
