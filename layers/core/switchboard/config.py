"""One settings model of the environment, validated at cold start (first use in a container).

A plain pydantic model filled from `os.environ` the way pydantic-settings' `BaseSettings` fills it for these fields
(variable = field name or its `validation_alias`, matched case-insensitively; keyword arguments win), without
importing pydantic-settings: it was the largest single import of every function's cold start. Fields are scalars
(strings, numbers, literals, secrets); a list or dict field would need the JSON decoding pydantic-settings does.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

Stage = Literal["dev", "staging", "prod", "local", "test"]


class Settings(BaseModel):
    """Every variable the functions read. Required ones have no default: a missing one fails loudly."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)

    stage: Stage
    table_name: str = Field(min_length=3)
    # Webhook deliveries, their attempts and the events' payloads (webhooks.repository): a table of their own, with
    # TTL, its list keys spread over `webhook_delivery_shards` partition-key values per list (stack parameter; only
    # ever raised: a list reads shards 0 … n-1).
    deliveries_table_name: str = Field(min_length=3)
    webhook_delivery_shards: int = Field(default=16, ge=1, le=64)
    # Deliveries per second one organization's fan-out hands to the sender (Svix-style per-tenant budget: the rest
    # wait with DelaySeconds, so one tenant's burst cannot fill the queue all tenants share); stack parameter.
    webhook_tenant_rate: int = Field(default=100, ge=1)
    event_bus_name: str = Field(min_length=1)
    media_bucket: str = Field(min_length=3)
    webhook_events_queue_url: str = Field(min_length=1)
    webhook_deliveries_queue_url: str = Field(min_length=1)
    outbound_messages_queue_url: str = Field(min_length=1)
    jobs_queue_url: str = Field(min_length=1)  # background jobs (switchboard.jobs): one message per chunk
    cloud_webhook_queue_url: str = Field(min_length=1)  # Meta's verified webhook changes, one message per change
    # The platform secret (switchboard.platform_secret): a deployed stage names its Secrets Manager secret, read at run
    # time; the local and test stages may give the value itself instead.
    cursor_secret_arn: str | None = Field(default=None, min_length=1)
    cursor_secret: SecretStr | None = Field(default=None, min_length=16)
    api_key_mode: Literal["test", "live"]
    mail_sender: str = Field(min_length=3)
    sandbox_status_delay: float = Field(default=1.0, ge=0)
    local_time_scale: float = Field(default=1.0, gt=0)
    # Connect, write and read timeouts of a webhook delivery (CONVENTIONS: 15 s); only the webhook fault test
    # shortens them, together with its compressed clock (LOCAL_TIME_SCALE).
    webhook_timeout_seconds: float = Field(default=15.0, gt=0, le=15)
    rate_limit_per_minute: int = Field(default=1200, ge=1)
    # Every caller's limits (CONVENTIONS "Tenant safety"), set per stage through these variables; the test and local
    # stacks raise the per-IP and per-e-mail ones, which their suites share one address for.
    rate_limit_credential_per_minute: int = Field(default=600, ge=1)  # per API key or session
    auth_ip_limit: int = Field(default=60, ge=1)  # pre-session auth requests per client IP per auth window
    auth_email_limit: int = Field(default=20, ge=1)  # pre-session auth requests per e-mail per auth window
    auth_window_seconds: int = Field(default=15 * 60, ge=1)
    login_failures_before_delay: int = Field(default=5, ge=1)  # per (e-mail, client IP)
    login_delay_base_seconds: int = Field(default=2, ge=1)  # doubled on every further failure
    login_delay_max_seconds: int = Field(default=15 * 60, ge=1)
    organizations_per_user_per_day: int = Field(default=10, ge=1)
    callbacks_per_channel_per_minute: int = Field(default=1200, ge=1)  # verified callbacks (and handshakes)
    callback_failures_per_channel_per_minute: int = Field(default=300, ge=1)  # refused ones, counted apart
    portal_failures_per_ip: int = Field(default=20, ge=1)  # wrong portal tokens per client IP per auth window
    portal_failures_per_token_prefix: int = Field(default=5, ge=1)  # wrong tokens per link prefix per auth window
    # Partition-key shards of an organization's hot items (switchboard.store.shards): a power of two, only ever
    # raised (stack parameter TenantShards).
    tenant_shards: int = Field(default=16, ge=1, le=64)
    git_commit: str = "unknown"
    # Business-account onboarding (/v1/waba): the Graph API base URL and the platform's Meta app (a flow may bring
    # its own app id and secret instead; see switchboard/waba).
    # Meta's Graph API version every whatsapp_cloud request uses (stack parameter GraphApiVersion).
    graph_api_version: str = Field(default="v23.0", pattern=r"^v[0-9]+\.[0-9]+$")
    graph_api_base_url: str | None = Field(default=None, min_length=8)
    meta_app_id: str | None = None
    meta_app_secret: SecretStr | None = None
    meta_config_id: str | None = None
    # Where engines reach this stack (linked-device channels' webhooks): the stack parameter PublicBaseUrl; the local
    # stack sets its own URL.
    public_base_url: str | None = None
    aws_region: str = Field(default="us-east-1", validation_alias="AWS_REGION")

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**_from_environ(type(self)), **values})

    @field_validator("tenant_shards")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError("must be a power of two (1, 2, 4, ..., 64)")
        return value

    @model_validator(mode="after")
    def _platform_secret(self) -> Settings:
        if self.cursor_secret_arn is None and (self.cursor_secret is None or not self.is_local):
            raise ValueError(
                "CURSOR_SECRET_ARN is required (the platform secret's Secrets Manager ARN); only the local and test "
                "stages may give CURSOR_SECRET itself"
            )
        return self

    @property
    def is_local(self) -> bool:
        return self.stage in ("local", "test")

    @property
    def graph_root(self) -> str:
        """Meta's Graph API with the pinned version (`GRAPH_API_BASE_URL` replaces it, e.g. a local fake)."""
        return (self.graph_api_base_url or f"https://graph.facebook.com/{self.graph_api_version}").rstrip("/")


def _from_environ(model: type[BaseModel]) -> dict[str, str]:
    env = {name.lower(): value for name, value in os.environ.items()}
    values: dict[str, str] = {}
    for name, field in model.model_fields.items():
        key = field.validation_alias if isinstance(field.validation_alias, str) else name
        if key.lower() in env:
            values[key] = env[key.lower()]
    return values


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def reset_settings() -> None:
    """Forget the cached settings (tests and the local stack change the environment)."""
    get_settings.cache_clear()
