"""Integrations and notification preferences as the API shows them, and the request bodies."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from switchboard.models import BaseModel, Name, Storable, Strict, Timestamp

TOPICS = ("invitations", "webhook_failures", "billing", "weekly_digest")


# Integrations --------------------------------------------------------------------------------------------------------
class IntegrationField(BaseModel):
    """A field of an integration type's `config` or `secrets`."""

    name: str = Field(description="The field's key")
    required: bool = Field(description="Whether creating one needs it")
    secret: bool = Field(description="True: it goes in `secrets` (write-only), else in `config`")
    description: str = Field(description="What the field holds")


class IntegrationType(BaseModel):
    """A kind of integration and the fields it takes."""

    type: str = Field(description="The value of `type` when creating one")
    name: str = Field(description="The type's display name")
    description: str = Field(description="What the integration does")
    fields: list[IntegrationField] = Field(description="The fields it takes")

    openapi_examples = (
        {
            "type": "slack",
            "name": "Slack",
            "description": "Posts notifications to a Slack channel through an incoming webhook.",
            "fields": [
                {"name": "webhook_url", "required": True, "secret": True, "description": "incoming webhook URL"},
                {"name": "channel", "required": False, "secret": False, "description": "channel name"},
            ],
        },
    )


class Integration(BaseModel):
    """A configured integration; its secrets are masked."""

    id: str
    organization_id: str
    type: str = Field(description="The integration type (see the catalog)")
    name: str = Field(description="A label for it")
    enabled: bool = Field(description="Whether it is used")
    config: dict[str, Any] = Field(description="The plain fields")
    secrets: dict[str, str] = Field(description="secret fields, masked (`••••` and at most the last four characters)")
    created_at: Timestamp
    updated_at: Timestamp
    version: int = Field(description="Increases with every change")

    openapi_examples = (
        {
            "id": "int_01jd84g1h2j3k4l5m6n7p8q9rs",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "type": "slack",
            "name": "Support alerts",
            "enabled": True,
            "config": {"channel": "#support"},
            "secrets": {"webhook_url": "••••a1B2"},
            "created_at": "2026-11-21T09:50:00.000Z",
            "updated_at": "2026-11-21T09:50:00.000Z",
            "version": 1,
        },
    )


class IntegrationCreate(Strict):
    """Body of `POST /v1/settings/integrations`: `config` and `secrets` as the type's fields say."""

    type: str = Field(min_length=1, max_length=32, description="a type of `GET /v1/settings/integrations/catalog`")
    name: Name = Field(min_length=1, max_length=100, description="A label for it")
    enabled: bool = Field(default=True, description="Whether it is used")
    config: Annotated[dict[str, Any], Storable] = Field(default_factory=dict, description="The type's plain fields")
    secrets: Annotated[dict[str, Any], Storable] = Field(
        default_factory=dict, description="write-only: never returned in plain text"
    )

    openapi_examples = (
        {
            "type": "slack",
            "name": "Support alerts",
            "config": {"channel": "#support"},
            "secrets": {"webhook_url": "https://hooks.slack.com/services/T000/B000/XXXXa1B2"},
        },
    )


class IntegrationUpdate(Strict):
    """`config` keys sent replace the stored ones (`null` removes an optional one); `secrets` likewise."""

    name: Name | None = Field(default=None, min_length=1, max_length=100, description="A label for it")
    enabled: bool | None = Field(default=None, description="Whether it is used")
    config: Annotated[dict[str, Any], Storable] | None = Field(default=None, description="Plain fields to change")
    secrets: Annotated[dict[str, Any], Storable] | None = Field(
        default=None, description="Secret fields to change (write-only)"
    )

    openapi_examples = ({"enabled": False}, {"config": {"channel": "#support-eu"}})


# Notifications -------------------------------------------------------------------------------------------------------
class EmailTopics(BaseModel):
    """Which e-mails a member gets."""

    invitations: bool = Field(description="invitations sent and accepted")
    webhook_failures: bool = Field(description="webhook endpoints failing or disabled")
    billing: bool = Field(description="invoices issued")
    weekly_digest: bool = Field(description="a weekly summary of the organization's messaging")


class EmailTopicsUpdate(Strict):
    """E-mail topics to set; topics left out follow the member's role."""

    invitations: bool | None = Field(default=None, description="invitations sent and accepted")
    webhook_failures: bool | None = Field(default=None, description="webhook endpoints failing or disabled")
    billing: bool | None = Field(default=None, description="invoices issued")
    weekly_digest: bool | None = Field(default=None, description="a weekly summary of the organization's messaging")


class NotificationPreferences(BaseModel):
    """A member's e-mail notification preferences."""

    user_id: str
    user_email: str = Field(description="The member's e-mail address")
    role: str = Field(description="The member's role, whose defaults apply to topics not set")
    emails: EmailTopics = Field(description="Which e-mails the member gets")
    customized: bool = Field(description="false while the member has the defaults of their role")
    updated_at: Timestamp | None = Field(default=None, description="When the member's preferences last changed")
    version: int

    openapi_examples = (
        {
            "user_id": "usr_01jd7zn5m4l3k2j1h0g9f8e7dc",
            "user_email": "ada@example.com",
            "role": "owner",
            "emails": {"invitations": True, "webhook_failures": True, "billing": True, "weekly_digest": False},
            "customized": True,
            "updated_at": "2026-11-21T09:55:00.000Z",
            "version": 2,
        },
    )


class NotificationPreferencesPut(Strict):
    """Replaces the member's preferences: topics left out go back to the defaults of the member's role."""

    emails: EmailTopicsUpdate = Field(description="Topics to set; left out: the role's default")

    openapi_examples = ({"emails": {"weekly_digest": False, "billing": True}},)
