"""Webhook resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from switchboard import clock
from switchboard.models import BaseModel, EmailStr, Strict, Timestamp
from switchboard.webhooks.catalogue import EVENT_TYPES

DeliveryStatus = Literal["pending", "retrying", "succeeded", "exhausted", "canceled"]
MAX_FILTER_TYPES = len(EVENT_TYPES)
# An event type name, documented with its values (the validator below says which one is unknown, by name).
FilterType = Annotated[str, Field(json_schema_extra={"enum": list(EVENT_TYPES)})]


def _known_types(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    unknown = [t for t in value if t not in EVENT_TYPES]
    if unknown:
        raise ValueError(
            f"unknown event type(s): {', '.join(unknown)}; see event_types of GET /v1/settings/developer/webhooks"
        )
    return list(dict.fromkeys(value))


def _iso(value: str) -> str:
    try:
        return clock.iso(clock.parse_iso(value))
    except ValueError:
        raise ValueError("must be an ISO 8601 timestamp such as 2026-11-21T10:00:00Z") from None


class EventType(BaseModel):
    name: str
    group: str
    description: str


class Endpoint(BaseModel):
    """A webhook endpoint. The signing secret is shown only when created and when rotated."""

    id: str
    organization_id: str
    url: str
    description: str | None = None
    filter_types: list[str] = Field(default_factory=list, description="Subscribed event types; empty = every event")
    enabled: bool
    disabled_reason: str | None = Field(default=None, description="gone (410), failing (5 days) or manual")
    disabled_at: Timestamp | None = None
    secret_rotated_at: Timestamp | None = None
    last_success_at: Timestamp | None = None
    failing_since: str | None = None
    consecutive_failures: int = 0
    created_at: Timestamp
    updated_at: Timestamp


class EndpointWithSecret(Endpoint):
    secret: str = Field(description="whsec_… signing secret; shown only at creation and rotation")


class WebhookSettings(BaseModel):
    endpoints: list[Endpoint]
    event_types: list[EventType]


class EndpointCreate(Strict):
    url: str = Field(min_length=1, max_length=2048, description="https URL (public addresses only)")
    description: str | None = Field(default=None, max_length=500)
    filter_types: list[FilterType] = Field(default_factory=list, max_length=MAX_FILTER_TYPES)
    enabled: bool = True

    _types = field_validator("filter_types")(_known_types)


class EndpointUpdate(Strict):
    url: str | None = Field(default=None, min_length=1, max_length=2048)
    description: str | None = Field(default=None, max_length=500)
    filter_types: list[FilterType] | None = Field(default=None, max_length=MAX_FILTER_TYPES)
    enabled: bool | None = None

    _types = field_validator("filter_types")(_known_types)


class TestDelivery(BaseModel):
    """The queued `webhook.test` event and the id its delivery will carry (`webhook-id`)."""

    event_id: str
    event_type: str
    endpoint_id: str
    delivery_id: str
    sent_at: Timestamp


class AlertingSettings(BaseModel):
    emails: list[str] = Field(default_factory=list)
    failure_threshold: int = Field(description="Consecutive failed attempts of an endpoint before the e-mails go out")
    updated_at: Timestamp | None = None


class AlertingSettingsUpdate(Strict):
    emails: list[EmailStr] = Field(default_factory=list, max_length=10)
    failure_threshold: int = Field(default=10, ge=1, le=1000)


class Delivery(BaseModel):
    """One event for one endpoint; its id is the `webhook-id` of every attempt."""

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: DeliveryStatus
    attempt_count: int = 0
    next_attempt_at: Timestamp | None = None
    last_attempt_at: Timestamp | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict, description="The flat event body")
    created_at: Timestamp
    updated_at: Timestamp


class Attempt(BaseModel):
    id: str
    delivery_id: str
    endpoint_id: str
    attempt: int
    status: Literal["succeeded", "failed"]
    trigger: Literal["scheduled", "manual"]
    url: str
    status_code: int | None = None
    duration_ms: int
    error: str | None = None
    response: str | None = Field(default=None, description="The first KiB of the response body")
    created_at: Timestamp


class RecoverRequest(Strict):
    since: str = Field(min_length=1, max_length=40, description="Retry failed deliveries created at or after this")

    _since = field_validator("since")(_iso)


class RecoverResult(BaseModel):
    endpoint_id: str
    since: str
    job_id: str = Field(description="The background job that requeues the deliveries, page by page")
    status: str = Field(description="The job's status: `running` when answered")
    requeued: int = Field(description="Deliveries requeued when answered (the job's progress counts the rest)")
    has_more: bool = Field(description="Always false: the job goes through every failed delivery")


class PortalAccessRequest(Strict):
    expires_in: int = Field(default=600, ge=60, le=3600, description="Seconds the link stays valid")


class PortalAccess(BaseModel):
    url: str = Field(description="Single-use link; the token is in the fragment, so it never reaches server logs")
    expires_at: Timestamp
