"""Billing as the API shows it (the spec's Billing invoice, every field) and the request bodies."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, field_validator

from switchboard.errors import ValidationFailed
from switchboard.models import BaseModel, DateTimeIn, EmailStr, Money, Name, Strict, Timestamp

InvoiceStatus = Literal["draft", "open", "paid", "void", "uncollectible"]
CurrencyCode = Literal["USD", "EUR", "GBP", "JPY"]
PlanId = Literal["free", "starter", "growth"]
PERIOD = r"^(19[7-9]\d|2\d{3})-(0[1-9]|1[0-2])$"  # 1970-01 to 2999-12: a billing period, not any year


# Billing profile -----------------------------------------------------------------------------------------------------
class BillingProfile(BaseModel):
    """The organization's billing identity, printed on invoices."""

    legal_name: str | None = Field(default=None, description="The organization's legal name")
    billing_email: str | None = Field(default=None, description="Where invoices are e-mailed")
    billing_phone: str | None = Field(default=None, description="digits with country code, no plus sign")
    address_line_1: str | None = Field(default=None, description="Street address")
    address_line_2: str | None = Field(default=None, description="Apartment, suite, floor…")
    city: str | None = Field(default=None, description="City")
    state_or_province: str | None = Field(default=None, description="State or province")
    postal_code: str | None = Field(default=None, description="Postal code")
    country_code: str | None = Field(default=None, description="ISO 3166-1 alpha-2")
    tax_id: str | None = Field(default=None, description="Tax or VAT number")
    tax_name: str | None = Field(default=None, description="name of the tax on invoices, e.g. VAT")

    openapi_examples = (
        {
            "legal_name": "Acme Ltd",
            "billing_email": "billing@acme.example",
            "billing_phone": "442079460000",
            "address_line_1": "1 Example Street",
            "address_line_2": None,
            "city": "London",
            "state_or_province": None,
            "postal_code": "EC1A 1AA",
            "country_code": "GB",
            "tax_id": "GB123456789",
            "tax_name": "VAT",
        },
    )


class BillingProfileUpdate(Strict):
    """Fields sent replace the stored ones; `null` clears one; fields left out are kept."""

    legal_name: Name | None = Field(
        default=None, min_length=1, max_length=200, description="The organization's legal name"
    )
    billing_email: EmailStr | None = Field(default=None, description="Where invoices are e-mailed")
    billing_phone: str | None = Field(default=None, min_length=4, max_length=32, description="any international form")
    address_line_1: str | None = Field(default=None, min_length=1, max_length=200, description="Street address")
    address_line_2: str | None = Field(
        default=None, min_length=1, max_length=200, description="Apartment, suite, floor…"
    )
    city: str | None = Field(default=None, min_length=1, max_length=100, description="City")
    state_or_province: str | None = Field(default=None, min_length=1, max_length=100, description="State or province")
    postal_code: str | None = Field(
        default=None, min_length=1, max_length=20, pattern=r"^[A-Za-z0-9 \-]+$", description="Postal code"
    )
    country_code: str | None = Field(default=None, min_length=2, max_length=2, description="ISO 3166-1 alpha-2")
    tax_id: str | None = Field(
        default=None, min_length=2, max_length=32, pattern=r"^[A-Za-z0-9.\- ]+$", description="Tax or VAT number"
    )
    tax_name: str | None = Field(
        default=None, min_length=1, max_length=32, description="Name of the tax on invoices, e.g. VAT"
    )

    @field_validator("country_code")
    @classmethod
    def _country(cls, value: str | None) -> str | None:
        # on first use: keeps switchboard.billing.catalogue off the cold start
        from switchboard.billing.catalogue import COUNTRIES

        if value is None:
            return None
        code = value.upper()
        if code not in COUNTRIES:
            raise ValueError("is not an ISO 3166-1 alpha-2 country code")
        return code

    @field_validator("billing_phone")
    @classmethod
    def _phone(cls, value: str | None) -> str | None:
        # on first use: keeps switchboard.contacts.identifiers off the cold start
        from switchboard.contacts.identifiers import normalize_phone

        if value is None:
            return None
        try:
            return normalize_phone(value, "billing_phone")
        except ValidationFailed as err:
            raise ValueError(err.details[0]["message"]) from None


# Plans and usage -----------------------------------------------------------------------------------------------------
class PlanPrice(BaseModel):
    """A plan's prices in one currency."""

    currency: str = Field(description="ISO 4217 code")
    monthly_amount: Money = Field(description="The plan's price per month")
    per_message_amount: Money = Field(description="Each message sent beyond the included ones")
    per_contact_amount: Money = Field(description="Each contact stored beyond the included ones")


class PlanView(BaseModel):
    """A plan an organization can choose."""

    id: str = Field(description="`free`, `starter` or `growth`")
    name: str = Field(description="The plan's name")
    description: str = Field(description="What the plan is for")
    included_messages: int = Field(description="Messages sent per month included in the monthly amount")
    included_contacts: int
    prices: list[PlanPrice] = Field(description="The plan's prices, one per currency")

    openapi_examples = (
        {
            "id": "starter",
            "name": "Starter",
            "description": "For small teams",
            "included_messages": 1000,
            "included_contacts": 1000,
            "prices": [
                {"currency": "USD", "monthly_amount": 49, "per_message_amount": 0.01, "per_contact_amount": 0.005}
            ],
        },
    )


class ChannelUsage(BaseModel):
    """Messages sent this month on one channel."""

    channel_id: str
    channel_name: str | None = Field(default=None, description="The channel's name (null when deleted)")
    platform: str = Field(description="The channel's platform")
    messages_sent: int = Field(description="Messages sent on the channel this period")


class Usage(BaseModel):
    """This month's metered usage."""

    period: str = Field(description="calendar month (UTC), `YYYY-MM`")
    period_start: str = Field(description="First instant of the month (UTC)")
    period_end: str = Field(description="First instant after it")
    messages_sent: int = Field(description="Messages sent this period")
    included_messages: int = Field(description="Messages the plan includes")
    channels: list[ChannelUsage] = Field(description="Messages sent per channel")
    contacts_stored: int = Field(description="Contacts stored now")
    included_contacts: int = Field(description="Contacts the plan includes")


class BillingSettings(BaseModel):
    """Plan, currency, tax rate, payment terms, billing profile and this month's usage."""

    plan: PlanView = Field(description="The current plan")
    currency: str = Field(description="ISO 4217 code of new invoices")
    tax_rate: Money = Field(description="percent applied to the subtotal of new invoices")
    payment_terms_days: int = Field(description="Days between an invoice's issue and its due date")
    billing_profile: BillingProfile = Field(description="Printed on invoices")
    usage: Usage = Field(description="This month's metered usage")
    version: int = Field(description="Increases with every change")
    updated_at: Timestamp | None = Field(default=None, description="When the settings last changed")

    openapi_examples = (
        {
            "plan": PlanView.openapi_examples[0],
            "currency": "USD",
            "tax_rate": 20,
            "payment_terms_days": 14,
            "billing_profile": BillingProfile.openapi_examples[0],
            "usage": {
                "period": "2026-11",
                "period_start": "2026-11-01T00:00:00.000Z",
                "period_end": "2026-12-01T00:00:00.000Z",
                "messages_sent": 412,
                "included_messages": 1000,
                "channels": [
                    {
                        "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
                        "channel_name": "Support line",
                        "platform": "sandbox",
                        "messages_sent": 412,
                    }
                ],
                "contacts_stored": 230,
                "included_contacts": 1000,
            },
            "version": 4,
            "updated_at": "2026-11-21T09:00:00.000Z",
        },
    )


class BillingUpdate(Strict):
    """Body of `PATCH /v1/settings/billing`: fields left out stay."""

    plan: PlanId | None = Field(default=None, description="applies to invoices generated from now on")
    currency: CurrencyCode | None = Field(default=None, description="ISO 4217 code of new invoices")
    tax_rate: Decimal | None = Field(default=None, ge=0, le=100, max_digits=6, decimal_places=3, description="percent")
    payment_terms_days: int | None = Field(default=None, ge=0, le=120, description="Days from issue to due date")
    billing_profile: BillingProfileUpdate | None = Field(
        default=None, description="Fields to change in the billing profile"
    )

    openapi_examples = (
        {
            "plan": "starter",
            "currency": "GBP",
            "tax_rate": 20,
            "payment_terms_days": 14,
            "billing_profile": {
                "legal_name": "Acme Ltd",
                "billing_email": "billing@acme.example",
                "country_code": "GB",
            },
        },
    )


# Invoices ------------------------------------------------------------------------------------------------------------
class InvoiceLine(BaseModel):
    """One line of an invoice."""

    description: str = Field(description="What the line bills")
    line_type: str = Field(description="subscription, usage, credit")
    position: int = Field(description="The line's order on the invoice")
    quantity: Money = Field(description="How many units")
    unit_amount: Money = Field(description="Price of one unit")
    line_total: Money = Field(description="quantity times unit_amount")


class Invoice(BaseModel):
    """The spec's Billing invoice: one per calendar month, `draft → open → paid` (or `void` / `uncollectible`)."""

    id: str
    invoice_number: str = Field(description="The printed number, sequential per organization")
    status: InvoiceStatus = Field(
        description="`draft` (editable), `open` (issued, awaiting payment), `paid`, `void` or `uncollectible`"
    )
    currency: str = Field(description="ISO 4217 code")
    subtotal_amount: Money = Field(description="Sum of the lines")
    tax_amount: Money = Field(description="The tax on the subtotal")
    total_amount: Money = Field(description="Subtotal plus tax")
    issued_at: Timestamp | None = Field(default=None, description="Set when finalized")
    due_at: Timestamp | None = Field(default=None, description="When payment is due")
    paid_at: Timestamp | None = Field(default=None, description="When it was paid")
    period_start: str = Field(description="first instant of the billed calendar month (UTC)")
    period_end: str = Field(description="first instant after it (exclusive end)")
    target_plan: str = Field(description="the plan billed (the organization's plan when the invoice was generated)")
    latest_reference_id: str | None = Field(default=None, description="The latest payment session or payment")
    latest_session_status: str | None = Field(default=None, description="The latest payment session's status")
    notes: str | None = Field(default=None, description="Free text printed on the invoice")
    billing_profile: BillingProfile = Field(description="As it was when the invoice was finalized (or now, a draft)")
    lines: list[InvoiceLine] = Field(description="The invoice's lines")
    organization_id: str
    period: str = Field(description="calendar month `YYYY-MM` (UTC)")
    created_at: Timestamp
    updated_at: Timestamp
    version: int

    openapi_examples = (
        {
            "id": "inv_01jd83f1g2h3j4k5l6m7n8p9qr",
            "invoice_number": "INV-H9JK00-00001",
            "status": "open",
            "currency": "GBP",
            "subtotal_amount": 49,
            "tax_amount": 9.8,
            "total_amount": 58.8,
            "issued_at": "2026-11-01T09:00:00.000Z",
            "due_at": "2026-11-15T09:00:00.000Z",
            "paid_at": None,
            "period_start": "2026-10-01T00:00:00.000Z",
            "period_end": "2026-11-01T00:00:00.000Z",
            "target_plan": "starter",
            "latest_reference_id": None,
            "latest_session_status": None,
            "notes": None,
            "billing_profile": BillingProfile.openapi_examples[0],
            "lines": [
                {
                    "description": "Starter plan, October 2026",
                    "line_type": "subscription",
                    "position": 1,
                    "quantity": 1,
                    "unit_amount": 49,
                    "line_total": 49,
                }
            ],
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "period": "2026-10",
            "created_at": "2026-11-01T08:00:00.000Z",
            "updated_at": "2026-11-01T09:00:00.000Z",
            "version": 2,
        },
    )


class InvoiceGenerate(Strict):
    """Body of `POST /v1/settings/billing/invoices` (optional)."""

    period: str | None = Field(
        default=None, pattern=PERIOD, description="calendar month `YYYY-MM` (UTC); the previous month when absent"
    )
    notes: str | None = Field(default=None, max_length=2000, description="Free text printed on the invoice")

    openapi_examples = ({"period": "2026-10", "notes": "PO 4471"},)


class InvoiceUpdate(Strict):
    """Body of `PATCH /v1/settings/billing/invoices/{invoiceID}` (drafts only)."""

    notes: str | None = Field(default=None, max_length=2000, description="Free text printed on the invoice")

    openapi_examples = ({"notes": "PO 4471, attention of accounts payable"},)


class InvoicePay(Strict):
    """Body of `POST .../invoices/{invoiceID}/pay`."""

    reference_id: str = Field(min_length=1, max_length=128, description="the payment's reference (transfer, charge)")
    paid_at: DateTimeIn | None = Field(default=None, description="now when absent")

    openapi_examples = ({"reference_id": "BACS-20261110-8842", "paid_at": "2026-11-10T12:00:00Z"},)


class InvoiceReason(Strict):
    """Body of `void` and `mark-uncollectible` (optional)."""

    reason: str | None = Field(default=None, max_length=500, description="Why (kept in the audit log)")

    openapi_examples = ({"reason": "Issued with the wrong billing address"},)
