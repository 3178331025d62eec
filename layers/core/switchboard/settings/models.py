"""Integrations and notification preferences as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from switchboard.models import BaseModel, Name, Storable, Strict, Timestamp

TOPICS = ("invitations", "webhook_failures", "billing", "weekly_digest")


# Integrations --------------------------------------------------------------------------------------------------------
class IntegrationField(BaseModel):
    name: str
    required: bool
    secret: bool
    description: str


class IntegrationType(BaseModel):
    type: str
    name: str
    description: str
    fields: list[IntegrationField]


class Integration(BaseModel):
    id: str
    organization_id: str
    type: str
    name: str
    enabled: bool
    config: dict[str, Any]
    secrets: dict[str, str] = Field(description="secret fields, masked (`••••` and at most the last four characters)")
    created_at: Timestamp
    updated_at: Timestamp
    version: int


class IntegrationCreate(Strict):
    type: str = Field(min_length=1, max_length=32, description="a type of `GET /v1/settings/integrations/catalog`")
    name: Name = Field(min_length=1, max_length=100)
    enabled: bool = True
    config: Annotated[dict[str, Any], Storable] = Field(default_factory=dict)
    secrets: Annotated[dict[str, Any], Storable] = Field(
        default_factory=dict, description="write-only: never returned in plain text"
    )


class IntegrationUpdate(Strict):
    """`config` keys sent replace the stored ones (`null` removes an optional one); `secrets` likewise."""

    name: Name | None = Field(default=None, min_length=1, max_length=100)
    enabled: bool | None = None
    config: Annotated[dict[str, Any], Storable] | None = None
    secrets: Annotated[dict[str, Any], Storable] | None = None


# Notifications -------------------------------------------------------------------------------------------------------
class EmailTopics(BaseModel):
    invitations: bool = Field(description="invitations sent and accepted")
    webhook_failures: bool = Field(description="webhook endpoints failing or disabled")
    billing: bool = Field(description="invoices issued")
    weekly_digest: bool = Field(description="a weekly summary of the organization's messaging")


class EmailTopicsUpdate(Strict):
    invitations: bool | None = None
    webhook_failures: bool | None = None
    billing: bool | None = None
    weekly_digest: bool | None = None


class NotificationPreferences(BaseModel):
    user_id: str
    user_email: str
    role: str
    emails: EmailTopics
    customized: bool = Field(description="false while the member has the defaults of their role")
    updated_at: Timestamp | None = None
    version: int


class NotificationPreferencesPut(Strict):
    """Replaces the member's preferences: topics left out go back to the defaults of the member's role."""

    emails: EmailTopicsUpdate
