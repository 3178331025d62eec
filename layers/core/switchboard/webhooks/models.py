"""Webhook resources as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from switchboard.models import BaseModel, DateTimeIn, EmailStr, Strict, Timestamp
from switchboard.webhooks.catalogue import EVENT_TYPES

DeliveryStatus = Literal["pending", "retrying", "succeeded", "exhausted", "canceled"]
MAX_FILTER_TYPES = len(EVENT_TYPES)
# An event type name, documented with its values (the validator below says which one is unknown, by name).
FilterType = Annotated[str, Field(json_schema_extra={"enum": list(EVENT_TYPES)})]
# What `netguard` enforces of an endpoint URL in production, stated in the document (the local stack also takes
# `http://127.0.0.1`, which the document does not promise): https, case-insensitive, after the trimmed whitespace.
HTTPS_URL: dict[str, Any] = {"pattern": r"^\s*[Hh][Tt][Tt][Pp][Ss]://"}


def _known_types(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    unknown = [t for t in value if t not in EVENT_TYPES]
    if unknown:
        raise ValueError(
            f"unknown event type(s): {', '.join(unknown)}; see event_types of GET /v1/settings/developer/webhooks"
        )
    return list(dict.fromkeys(value))


class EventType(BaseModel):
    """An event type an endpoint can subscribe to."""

    name: str = Field(description="The event's name (`message.sent`, …): `filter_types` values")
    group: str = Field(description="The family it belongs to (messages, contacts, CRM, …)")
    description: str

    openapi_examples = (
        {"name": "message.sent", "group": "messages", "description": "A message was handed to the provider."},
    )


class Endpoint(BaseModel):
    """A webhook endpoint. The signing secret is shown only when created and when rotated."""

    id: str = Field(description="The endpoint's id")
    organization_id: str
    url: str = Field(description="Where deliveries are POSTed (https, public address)")
    description: str | None = None
    filter_types: list[str] = Field(default_factory=list, description="Subscribed event types; empty = every event")
    enabled: bool
    disabled_reason: str | None = Field(default=None, description="gone (410), failing (5 days) or manual")
    disabled_at: Timestamp | None = Field(default=None, description="When it was disabled")
    secret_rotated_at: Timestamp | None = Field(default=None, description="When the secret was last rotated")
    last_success_at: Timestamp | None = Field(default=None, description="The last delivery it answered with 2xx")
    failing_since: str | None = Field(default=None, description="The first failure of the current failure streak")
    consecutive_failures: int = Field(default=0, description="Failed attempts in a row")
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "whe_01jd82c1d2e3f4g5h6j7k8l9mn",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "url": "https://hooks.example.com/switchboard",
            "description": "Order system",
            "filter_types": ["message.sent", "message.status_update"],
            "enabled": True,
            "disabled_reason": None,
            "disabled_at": None,
            "secret_rotated_at": None,
            "last_success_at": "2026-11-21T10:01:02.000Z",
            "failing_since": None,
            "consecutive_failures": 0,
            "created_at": "2026-11-21T09:40:00.000Z",
            "updated_at": "2026-11-21T09:40:00.000Z",
        },
    )


class EndpointWithSecret(Endpoint):
    """An endpoint with its signing secret (creation and rotation only)."""

    secret: str = Field(description="whsec_… signing secret; shown only at creation and rotation")

    openapi_examples = (
        {**Endpoint.openapi_examples[0], "secret": "whsec_MfKQ9r8GKYqXdYdMfhOq3Q1Y0mxxRvlmW0ucQ7PnxUs="},
    )


class WebhookSettings(BaseModel):
    """The organization's endpoints and the event types they can subscribe to."""

    endpoints: list[Endpoint] = Field(description="The organization's endpoints")
    event_types: list[EventType] = Field(description="Every event type an endpoint can subscribe to")

    openapi_examples = (
        {"endpoints": list(Endpoint.openapi_examples), "event_types": list(EventType.openapi_examples)},
    )


class EndpointCreate(Strict):
    """Body of `POST /v1/settings/developer/webhooks/endpoints`."""

    url: str = Field(
        min_length=1, max_length=2048, description="https URL (public addresses only)", json_schema_extra=HTTPS_URL
    )
    description: str | None = Field(default=None, max_length=500)
    filter_types: list[FilterType] = Field(
        default_factory=list, max_length=MAX_FILTER_TYPES, description="Event types to deliver; empty: every event"
    )
    enabled: bool = True

    _types = field_validator("filter_types")(_known_types)

    openapi_examples = (
        {
            "url": "https://hooks.example.com/switchboard",
            "description": "Order system",
            "filter_types": ["message.sent", "message.status_update"],
        },
    )


class EndpointUpdate(Strict):
    """Body of `PATCH /v1/settings/developer/webhooks/endpoints/{endpointID}`: fields left out stay."""

    url: Annotated[str, Field(min_length=1, max_length=2048, json_schema_extra=HTTPS_URL)] | None = Field(
        default=None, description="https URL (public addresses only)"
    )
    description: str | None = Field(default=None, max_length=500)
    filter_types: list[FilterType] | None = Field(default=None, max_length=MAX_FILTER_TYPES)
    enabled: bool | None = Field(default=None, description="True also clears a disabled endpoint's failure streak")

    _types = field_validator("filter_types")(_known_types)

    openapi_examples = ({"enabled": True}, {"url": "https://hooks.example.com/v2/switchboard", "filter_types": []})


class TestDelivery(BaseModel):
    """The queued `webhook.test` event and the id its delivery will carry (`webhook-id`)."""

    event_id: str
    event_type: str
    endpoint_id: str
    delivery_id: str
    sent_at: Timestamp = Field(description="When the test event was queued")

    openapi_examples = (
        {
            "event_id": "evt_01jd82d1e2f3g4h5j6k7l8m9np",
            "event_type": "webhook.test",
            "endpoint_id": "whe_01jd82c1d2e3f4g5h6j7k8l9mn",
            "delivery_id": "msg_5f0c3e9a1b7d4c2e8a6f0b3d9c1e7a4b",
            "sent_at": "2026-11-21T09:41:00.000Z",
        },
    )


class AlertingSettings(BaseModel):
    """Who hears about failing and disabled endpoints."""

    emails: list[str] = Field(default_factory=list, description="Addresses e-mailed about failing endpoints")
    failure_threshold: int = Field(description="Consecutive failed attempts of an endpoint before the e-mails go out")
    updated_at: Timestamp | None = Field(
        default=None, description="When the settings were last changed; null while they are the defaults"
    )

    openapi_examples = (
        {"emails": ["oncall@example.com"], "failure_threshold": 10, "updated_at": "2026-11-21T09:45:00.000Z"},
    )


class AlertingSettingsUpdate(Strict):
    """Body of `PUT /v1/settings/developer/webhooks/alerting-settings`."""

    emails: list[EmailStr] = Field(default_factory=list, max_length=10, description="At most 10 addresses")
    failure_threshold: int = Field(default=10, ge=1, le=1000)

    openapi_examples = ({"emails": ["oncall@example.com"], "failure_threshold": 10},)


class Delivery(BaseModel):
    """One event for one endpoint; its id is the `webhook-id` of every attempt."""

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: DeliveryStatus = Field(
        description="`pending` (queued), `retrying` (failed, another attempt is scheduled), `succeeded`, "
        "`exhausted` (every attempt failed; retry by API) or `canceled`"
    )
    attempt_count: int = Field(default=0, description="Attempts made so far")
    next_attempt_at: Timestamp | None = Field(
        default=None, description="When the next attempt is due; null when none is"
    )
    last_attempt_at: Timestamp | None = Field(default=None, description="When the last attempt was made")
    last_status_code: int | None = Field(default=None, description="The receiver's status code at the last attempt")
    last_error: str | None = Field(
        default=None, description="Why the last attempt failed (timeout, connection error, …)"
    )
    payload: dict[str, Any] = Field(default_factory=dict, description="The flat event body")
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "msg_5f0c3e9a1b7d4c2e8a6f0b3d9c1e7a4b",
            "endpoint_id": "whe_01jd82c1d2e3f4g5h6j7k8l9mn",
            "event_id": "evt_01jd82d1e2f3g4h5j6k7l8m9np",
            "event_type": "message.sent",
            "status": "succeeded",
            "attempt_count": 1,
            "next_attempt_at": None,
            "last_attempt_at": "2026-11-21T10:01:02.000Z",
            "last_status_code": 200,
            "last_error": None,
            "payload": {
                "message_id": "0193a1f2-7c4e-7b21-9d3a-5f6e7a8b9c0d",
                "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
                "status": "sent",
            },
            "created_at": "2026-11-21T10:01:01.000Z",
            "updated_at": "2026-11-21T10:01:02.000Z",
        },
    )


class Attempt(BaseModel):
    """One HTTP attempt of a delivery."""

    id: str
    delivery_id: str
    endpoint_id: str
    attempt: int = Field(description="1 for the first attempt")
    status: Literal["succeeded", "failed"] = Field(description="`succeeded` on a 2xx")
    trigger: Literal["scheduled", "manual"] = Field(description="`manual`: a retry asked for by API")
    url: str = Field(description="The URL the attempt was sent to")
    status_code: int | None = Field(default=None, description="The receiver's HTTP status; null on no answer")
    duration_ms: int = Field(description="How long the receiver took to answer")
    error: str | None = Field(
        default=None, description="Why it failed, when there was no answer (timeout, connection error, …)"
    )
    response: str | None = Field(default=None, description="The first KiB of the response body")
    created_at: Timestamp

    openapi_examples = (
        {
            "id": "att_01jd82e1f2g3h4j5k6l7m8n9pq",
            "delivery_id": "msg_5f0c3e9a1b7d4c2e8a6f0b3d9c1e7a4b",
            "endpoint_id": "whe_01jd82c1d2e3f4g5h6j7k8l9mn",
            "attempt": 1,
            "status": "succeeded",
            "trigger": "scheduled",
            "url": "https://hooks.example.com/switchboard",
            "status_code": 200,
            "duration_ms": 143,
            "error": None,
            "response": "ok",
            "created_at": "2026-11-21T10:01:02.000Z",
        },
    )


class RecoverRequest(Strict):
    """Body of `POST .../endpoints/{endpointID}/recover`."""

    since: DateTimeIn = Field(description="Retry failed deliveries created at or after this")

    openapi_examples = ({"since": "2026-11-20T00:00:00Z"},)


class RecoverResult(BaseModel):
    """The background job that re-sends an endpoint's failed deliveries."""

    endpoint_id: str
    since: Timestamp = Field(description="Deliveries created at or after this are retried")
    job_id: str = Field(description="The background job that requeues the deliveries, page by page")
    status: str = Field(description="The job's status: `running` when answered")
    requeued: int = Field(description="Deliveries requeued when answered (the job's progress counts the rest)")
    has_more: bool = Field(description="Always false: the job goes through every failed delivery")

    openapi_examples = (
        {
            "endpoint_id": "whe_01jd82c1d2e3f4g5h6j7k8l9mn",
            "since": "2026-11-20T00:00:00.000Z",
            "job_id": "job_01jd86d1e2f3g4h5j6k7m8n9pq",
            "status": "running",
            "requeued": 0,
            "has_more": False,
        },
    )


class PortalAccessRequest(Strict):
    """Body of `POST .../portal-access` (optional)."""

    expires_in: int = Field(default=600, ge=60, le=3600, description="Seconds the link stays valid")

    openapi_examples = ({"expires_in": 900},)


class PortalAccess(BaseModel):
    """A single-use link to the webhook portal."""

    url: str = Field(description="Single-use link; the token is in the fragment, so it never reaches server logs")
    expires_at: Timestamp

    openapi_examples = (
        {
            "url": "https://api.example.com/portal/webhooks#token=pt_9f8e7d6c5b4a",
            "expires_at": "2026-11-21T10:10:00.000Z",
        },
    )
