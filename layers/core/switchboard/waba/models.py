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
    """Body of `POST /v1/waba/oauth/start`: how the embedded signup runs (every field is optional)."""

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
    channel_name: Name | None = Field(
        default=None, min_length=1, max_length=100, description="The name of the channel it creates"
    )

    openapi_examples = (
        {"redirect_uri": "https://app.example.com/whatsapp/callback", "channel_name": "WhatsApp (Cloud API)"},
    )


class SignupEventData(Strict):
    """The `data` of an embedded signup event: the ids Meta reports, or the error."""

    waba_id: str | None = _graph_id()
    phone_number_id: str | None = _graph_id()
    business_id: str | None = _graph_id()
    current_step: str | None = Field(
        default=None, max_length=100, description="The signup's step when it was cancelled or failed"
    )
    error_message: str | None = Field(default=None, max_length=1000, description="The signup's error text")
    error_id: str | None = Field(default=None, max_length=64, description="The signup's error id (ERROR)")
    session_id: str | None = Field(default=None, max_length=128, description="The signup's session id (ERROR)")
    timestamp: str | int | None = Field(default=None, description="When the signup posted it")


class SignupEvent(Strict):
    """The `message` event the embedded signup posts to the page (`type: WA_EMBEDDED_SIGNUP`), forwarded as is."""

    progress_id: str = _progress_id()
    type: Literal["WA_EMBEDDED_SIGNUP"] = Field(default="WA_EMBEDDED_SIGNUP", description="Always `WA_EMBEDDED_SIGNUP`")
    event: SignupEventName = Field(description="What the signup reports")
    data: SignupEventData = Field(default_factory=SignupEventData, description="The event's data")
    version: str | int | None = Field(default=None, description="The event's version")

    openapi_examples = (
        {
            "progress_id": "wbp_01jd85h1j2k3l4m5n6p7q8r9st",
            "type": "WA_EMBEDDED_SIGNUP",
            "event": "FINISH",
            "data": {
                "waba_id": "102290129340398",
                "phone_number_id": "106540352242922",
                "business_id": "987654321098765",
            },
        },
    )


class ExchangeCode(Strict):
    """Body of `POST /v1/waba/exchange-code`: the signup's code and the flow's `state`."""

    progress_id: str = _progress_id()
    code: SecretStr = Field(min_length=8, max_length=2048, description="the code from FB.login or the OAuth redirect")
    state: SecretStr = Field(min_length=8, max_length=128, description="the state oauth/start returned")

    openapi_examples = (
        {
            "progress_id": "wbp_01jd85h1j2k3l4m5n6p7q8r9st",
            "code": "AQBx7f3k9LmN2pQ4rS6tU8vW0yZ",
            "state": "st_5b1e9c7a3d2f4e6a",
        },
    )


class RegisterPhone(Strict):
    """Body of `POST /v1/waba/register-phone`."""

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

    openapi_examples = ({"progress_id": "wbp_01jd85h1j2k3l4m5n6p7q8r9st", "pin": "482915"},)


class ProgressStep(Strict):
    """Body of the steps that need only the flow (`subscribe-webhook`, `sync-meta`)."""

    progress_id: str = _progress_id()

    openapi_examples = ({"progress_id": "wbp_01jd85h1j2k3l4m5n6p7q8r9st"},)


# Resources -----------------------------------------------------------------------------------------------------------
class Step(BaseModel):
    """One step of an onboarding flow and how it went."""

    name: StepName = Field(description="The step")
    status: StepStatus = Field(description="`pending`, `done`, `skipped` or `failed`")
    completed_at: Timestamp | None = Field(default=None, description="When it was done")
    error: str | None = Field(default=None, description="Why it failed")


class StepError(BaseModel):
    """The last error of a flow: the step, the code answered, and Graph's own codes."""

    step: str = Field(description="The step that failed")
    code: str = Field(description="The error code the step answered with")
    message: str = Field(description="What went wrong")
    provider_code: int | None = Field(default=None, description="Graph's error code")
    provider_subcode: int | None = Field(default=None, description="Graph's error subcode")
    support_label: str | None = Field(default=None, description="key of the /v1/waba/labels/support entry")
    at: str = Field(description="When it happened")


class SignupEventRecord(BaseModel):
    """An embedded signup event received for the flow."""

    event: str = Field(description="FINISH, FINISH_ONLY_WABA, CANCEL or ERROR")
    received_at: Timestamp = Field(description="When it was received")
    current_step: str | None = Field(default=None, description="The signup's step when it was cancelled or failed")
    error_message: str | None = Field(default=None, description="The signup's error text")


class PhoneNumberInfo(BaseModel):
    """A phone number of the business account, as Graph reports it."""

    id: str = Field(description="The phone number id (Graph)")
    display_phone_number: str | None = Field(default=None, description="The number as Meta shows it")
    verified_name: str | None = Field(default=None, description="The display name Meta verified")
    quality_rating: str | None = Field(default=None, description="Meta's quality rating")
    code_verification_status: str | None = Field(default=None, description="Whether the number was verified")


class TemplateSummary(BaseModel):
    """The business account's message templates, counted by status."""

    count: int = Field(description="Templates found")
    by_status: dict[str, int] = Field(description="Templates by approval status")
    has_more: bool = Field(default=False, description="More than the count read")


class Progress(BaseModel):
    """One onboarding flow. The access token is never part of it (`token_obtained` says whether there is one)."""

    id: str
    organization_id: str
    status: FlowStatus = Field(description="`started`, `in_progress`, `completed`, `canceled` or `failed`")
    next_step: StepName | None = Field(description="The step to call next; null when it ended")
    steps: list[Step] = Field(description="Every step and how it went")
    app_id: str = Field(description="The Meta app")
    config_id: str | None = Field(default=None, description="The embedded signup configuration")
    redirect_uri: str | None = Field(default=None, description="Where Meta's dialog returns (redirect flow)")
    channel_name: str | None = Field(default=None, description="The name of the channel it creates")
    business_id: str | None = Field(default=None, description="The Meta business (Graph id)")
    waba_id: str | None = Field(default=None, description="The WhatsApp Business Account (Graph id)")
    phone_number_id: str | None = Field(default=None, description="The phone number (Graph id)")
    phone_numbers: list[PhoneNumberInfo] = Field(default=[], description="The account's numbers")
    granted_scopes: list[str] = Field(default=[], description="Permissions the business granted")
    token_obtained: bool = Field(default=False, description="Whether the business token is stored (never shown)")
    token_expires_at: Timestamp | None = Field(
        default=None, description="When the business token expires; null when it does not"
    )
    waba: dict[str, Any] | None = Field(default=None, description="The account's details from Graph")
    phone: dict[str, Any] | None = Field(default=None, description="The number's details from Graph")
    templates: TemplateSummary | None = Field(default=None, description="The account's message templates, counted")
    channel_id: str | None = Field(default=None, description="The channel it created, once completed")
    last_error: StepError | None = Field(default=None, description="The last error of the flow")
    events: list[SignupEventRecord] = Field(default=[], description="Embedded signup events received")
    created_at: Timestamp
    updated_at: Timestamp
    expires_at: Timestamp = Field(description="An unfinished flow ends then")
    completed_at: Timestamp | None = Field(default=None, description="When it completed")
    version: int

    openapi_examples = (
        {
            "id": "wbp_01jd85h1j2k3l4m5n6p7q8r9st",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "status": "in_progress",
            "next_step": "register_phone",
            "steps": [
                {"name": "oauth_start", "status": "done", "completed_at": "2026-11-21T11:00:00.000Z"},
                {"name": "signup_event", "status": "done", "completed_at": "2026-11-21T11:02:00.000Z"},
                {"name": "exchange_code", "status": "done", "completed_at": "2026-11-21T11:02:05.000Z"},
                {"name": "register_phone", "status": "pending"},
                {"name": "subscribe_webhook", "status": "pending"},
                {"name": "sync_meta", "status": "pending"},
            ],
            "app_id": "1234567890123456",
            "business_id": "987654321098765",
            "waba_id": "102290129340398",
            "phone_number_id": "106540352242922",
            "granted_scopes": ["whatsapp_business_management", "whatsapp_business_messaging"],
            "token_obtained": True,
            "created_at": "2026-11-21T11:00:00.000Z",
            "updated_at": "2026-11-21T11:02:05.000Z",
            "expires_at": "2026-11-22T11:00:00.000Z",
            "version": 3,
        },
    )


class OAuthStarted(Progress):
    """A new onboarding flow with Meta's OAuth dialog URL and its `state` (shown only here)."""

    state: str = Field(description="shown once: pass it back to exchange-code (and it comes back on the redirect)")
    authorize_url: str = Field(description="Meta's OAuth dialog for this flow (the redirect flow)")

    openapi_examples = (
        {
            **Progress.openapi_examples[0],
            "status": "started",
            "next_step": "exchange_code",
            "state": "st_5b1e9c7a3d2f4e6a",
            "authorize_url": "https://www.facebook.com/v23.0/dialog/oauth?client_id=1234567890123456&state=st_5b1e9c7a3d2f4e6a",
        },
    )


class OnboardingError(BaseModel):
    """An error an onboarding step met (Graph's code, message and trace id, and what to do about it)."""

    id: str
    progress_id: str
    step: str = Field(description="The step that met it")
    code: str = Field(description="the error code the step answered with (provider_rejected, …) or signup_error")
    message: str = Field(description="the provider's own message")
    http_status: int | None = Field(default=None, description="Graph's HTTP status")
    provider_code: int | None = Field(default=None, description="Graph's error code")
    provider_subcode: int | None = Field(default=None, description="Graph's error subcode")
    provider_type: str | None = Field(default=None, description="Graph's error type")
    fbtrace_id: str | None = Field(default=None, description="Graph's trace id, for Meta support")
    support_label: str | None = Field(default=None, description="key of the /v1/waba/labels/support entry")
    error_id: str | None = Field(default=None, description="ERROR events: the embedded signup's error id")
    session_id: str | None = Field(default=None, description="ERROR events: the embedded signup's session id")
    created_at: Timestamp

    openapi_examples = (
        {
            "id": "wbe_01jd85j1k2l3m4n5p6q7r8s9tu",
            "progress_id": "wbp_01jd85h1j2k3l4m5n6p7q8r9st",
            "step": "register_phone",
            "code": "provider_rejected",
            "message": "(#133005) Two step verification PIN Mismatch",
            "http_status": 400,
            "provider_code": 133005,
            "provider_type": "OAuthException",
            "fbtrace_id": "AbCdEfGhIjK",
            "support_label": "two_step_pin",
            "created_at": "2026-11-21T11:03:00.000Z",
        },
    )


class GraphCode(BaseModel):
    """A Graph API error code (and subcode) a support label covers."""

    code: int = Field(description="Graph's error code")
    subcode: int | None = Field(default=None, description="Graph's error subcode; null: every subcode")
    title: str = Field(description="What Graph means by it")


class SupportLabel(BaseModel):
    """A kind of onboarding error, what it means and what to do about it."""

    key: str = Field(description="The label's key (`support_label` of errors)")
    name: str = Field(description="A short title")
    description: str = Field(description="What happened")
    action: str = Field(description="what the business or the operator does about it")
    retryable: bool = Field(description="Whether trying again can work")
    steps: list[StepName] = Field(description="The steps it can happen at")
    graph_codes: list[GraphCode] = Field(description="The Graph errors it covers")

    openapi_examples = (
        {
            "key": "two_step_pin",
            "name": "Two-step verification PIN",
            "description": "The PIN does not match the number's two-step verification PIN.",
            "action": "Enter the number's current PIN, or reset it in WhatsApp Manager.",
            "retryable": True,
            "steps": ["register_phone"],
            "graph_codes": [{"code": 133005, "subcode": None, "title": "Two step verification PIN mismatch"}],
        },
    )
