"""Request and resource models of business-account onboarding (`/v1/waba`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator

from switchboard.models import BaseModel, Name, Strict, Timestamp


def _graph_id() -> Any:
    return Field(default=None, pattern=r"^[0-9]{1,32}$", description="a Graph object id (digits)")


def _progress_id() -> Any:
    return Field(min_length=4, max_length=64, pattern=r"^wbp_[0-9a-z]+$", description="from oauth/start")


StepName = Literal["oauth_start", "signup_event", "exchange_code", "register_phone", "subscribe_webhook", "sync_meta"]
StepStatus = Literal["pending", "done", "skipped", "failed"]
FlowStatus = Literal["started", "in_progress", "completed", "canceled", "failed"]
SignupEventName = Literal["FINISH", "FINISH_ONLY_WABA", "CANCEL", "ERROR"]


# Requests ------------------------------------------------------------------------------------------------------------
class OAuthStart(Strict):
    redirect_uri: str | None = Field(
        default=None,
        min_length=8,
        max_length=2048,
        description="Where Meta's OAuth dialog sends the browser back (https; http only for localhost). Leave it "
        "out when the embedded signup runs through the JavaScript SDK (FB.login).",
    )
    app_id: str | None = Field(default=None, pattern=r"^[0-9]{1,32}$", description="defaults to META_APP_ID")
    app_secret: SecretStr | None = Field(
        default=None, min_length=8, max_length=256, description="with app_id only; stored sealed, never returned"
    )
    config_id: str | None = Field(
        default=None, pattern=r"^[0-9]{1,32}$", description="the embedded signup configuration (META_CONFIG_ID)"
    )
    graph_base_url: str | None = Field(
        default=None, min_length=8, max_length=300, description="local and test stages only (a fake Graph API)"
    )
    channel_name: Name | None = Field(default=None, min_length=1, max_length=100)


class SignupEventData(Strict):
    waba_id: str | None = _graph_id()
    phone_number_id: str | None = _graph_id()
    business_id: str | None = _graph_id()
    current_step: str | None = Field(default=None, max_length=100)
    error_message: str | None = Field(default=None, max_length=1000)
    error_id: str | None = Field(default=None, max_length=64)
    session_id: str | None = Field(default=None, max_length=128)
    timestamp: str | int | None = None


class SignupEvent(Strict):
    """The `message` event the embedded signup posts to the page (`type: WA_EMBEDDED_SIGNUP`), forwarded as is."""

    progress_id: str = _progress_id()
    type: Literal["WA_EMBEDDED_SIGNUP"] = "WA_EMBEDDED_SIGNUP"
    event: SignupEventName
    data: SignupEventData = Field(default_factory=SignupEventData)
    version: str | int | None = None


class ExchangeCode(Strict):
    progress_id: str = _progress_id()
    code: SecretStr = Field(min_length=8, max_length=2048, description="the code from FB.login or the OAuth redirect")
    state: SecretStr = Field(min_length=8, max_length=128, description="the state oauth/start returned")


class RegisterPhone(Strict):
    progress_id: str = _progress_id()
    pin: SecretStr = Field(
        min_length=6,
        max_length=6,
        description="six digits: the number's two-step verification PIN (set to this value when it has none yet)",
        json_schema_extra={"pattern": "^[0-9]{6}$"},  # what `_digits` checks, stated in the document
    )
    phone_number_id: str | None = Field(
        default=None, pattern=r"^[0-9]{1,32}$", description="needed when the WABA has several numbers"
    )

    @field_validator("pin")
    @classmethod
    def _digits(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().isdigit() or not value.get_secret_value().isascii():
            raise ValueError("must be six digits")
        return value


class ProgressStep(Strict):
    progress_id: str = _progress_id()


# Resources -----------------------------------------------------------------------------------------------------------
class Step(BaseModel):
    name: StepName
    status: StepStatus
    completed_at: Timestamp | None = None
    error: str | None = None


class StepError(BaseModel):
    step: str
    code: str
    message: str
    provider_code: int | None = None
    provider_subcode: int | None = None
    support_label: str | None = None
    at: str


class SignupEventRecord(BaseModel):
    event: str
    received_at: Timestamp
    current_step: str | None = None
    error_message: str | None = None


class PhoneNumberInfo(BaseModel):
    id: str
    display_phone_number: str | None = None
    verified_name: str | None = None
    quality_rating: str | None = None
    code_verification_status: str | None = None


class TemplateSummary(BaseModel):
    count: int
    by_status: dict[str, int]
    has_more: bool = False


class Progress(BaseModel):
    """One onboarding flow. The access token is never part of it (`token_obtained` says whether there is one)."""

    id: str
    organization_id: str
    status: FlowStatus
    next_step: StepName | None
    steps: list[Step]
    app_id: str
    config_id: str | None = None
    redirect_uri: str | None = None
    channel_name: str | None = None
    business_id: str | None = None
    waba_id: str | None = None
    phone_number_id: str | None = None
    phone_numbers: list[PhoneNumberInfo] = []
    granted_scopes: list[str] = []
    token_obtained: bool = False
    token_expires_at: Timestamp | None = None
    waba: dict[str, Any] | None = None
    phone: dict[str, Any] | None = None
    templates: TemplateSummary | None = None
    channel_id: str | None = None
    last_error: StepError | None = None
    events: list[SignupEventRecord] = []
    created_at: Timestamp
    updated_at: Timestamp
    expires_at: Timestamp
    completed_at: Timestamp | None = None
    version: int


class OAuthStarted(Progress):
    state: str = Field(description="shown once: pass it back to exchange-code (and it comes back on the redirect)")
    authorize_url: str = Field(description="Meta's OAuth dialog for this flow (the redirect flow)")


class OnboardingError(BaseModel):
    id: str
    progress_id: str
    step: str
    code: str = Field(description="the error code the step answered with (provider_rejected, …) or signup_error")
    message: str = Field(description="the provider's own message")
    http_status: int | None = None
    provider_code: int | None = None
    provider_subcode: int | None = None
    provider_type: str | None = None
    fbtrace_id: str | None = None
    support_label: str | None = Field(default=None, description="key of the /v1/waba/labels/support entry")
    error_id: str | None = Field(default=None, description="ERROR events: the embedded signup's error id")
    session_id: str | None = Field(default=None, description="ERROR events: the embedded signup's session id")
    created_at: Timestamp


class GraphCode(BaseModel):
    code: int
    subcode: int | None = None
    title: str


class SupportLabel(BaseModel):
    key: str
    name: str
    description: str
    action: str = Field(description="what the business or the operator does about it")
    retryable: bool
    steps: list[StepName]
    graph_codes: list[GraphCode]
