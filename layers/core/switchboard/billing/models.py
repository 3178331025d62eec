"""Billing as the API shows it (the spec's Billing invoice, every field) and the request bodies."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import Field, PlainSerializer, field_validator

from switchboard.errors import ValidationFailed
from switchboard.models import BaseModel, EmailStr, Name, Strict


def _number(value: Decimal) -> int | float:
    """Amounts are JSON numbers: integral amounts as integers, others with their exact decimal digits."""
    return int(value) if value == value.to_integral_value() else float(value)


Money = Annotated[Decimal, PlainSerializer(_number, return_type=float, when_used="always")]
InvoiceStatus = Literal["draft", "open", "paid", "void", "uncollectible"]
CurrencyCode = Literal["USD", "EUR", "GBP", "JPY"]
PlanId = Literal["free", "starter", "growth"]
PERIOD = r"^(19[7-9]\d|2\d{3})-(0[1-9]|1[0-2])$"  # 1970-01 to 2999-12: a billing period, not any year


# Billing profile -----------------------------------------------------------------------------------------------------
class BillingProfile(BaseModel):
    legal_name: str | None = None
    billing_email: str | None = None
    billing_phone: str | None = Field(default=None, description="digits with country code, no plus sign")
    address_line_1: str | None = None
    address_line_2: str | None = None
    city: str | None = None
    state_or_province: str | None = None
    postal_code: str | None = None
    country_code: str | None = Field(default=None, description="ISO 3166-1 alpha-2")
    tax_id: str | None = None
    tax_name: str | None = Field(default=None, description="name of the tax on invoices, e.g. VAT")


class BillingProfileUpdate(Strict):
    """Fields sent replace the stored ones; `null` clears one; fields left out are kept."""

    legal_name: Name | None = Field(default=None, min_length=1, max_length=200)
    billing_email: EmailStr | None = None
    billing_phone: str | None = Field(default=None, min_length=4, max_length=32, description="any international form")
    address_line_1: str | None = Field(default=None, min_length=1, max_length=200)
    address_line_2: str | None = Field(default=None, min_length=1, max_length=200)
    city: str | None = Field(default=None, min_length=1, max_length=100)
    state_or_province: str | None = Field(default=None, min_length=1, max_length=100)
    postal_code: str | None = Field(default=None, min_length=1, max_length=20, pattern=r"^[A-Za-z0-9 \-]+$")
    country_code: str | None = Field(default=None, min_length=2, max_length=2, description="ISO 3166-1 alpha-2")
    tax_id: str | None = Field(default=None, min_length=2, max_length=32, pattern=r"^[A-Za-z0-9.\- ]+$")
    tax_name: str | None = Field(default=None, min_length=1, max_length=32)

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
    currency: str
    monthly_amount: Money
    per_message_amount: Money
    per_contact_amount: Money


class PlanView(BaseModel):
    id: str
    name: str
    description: str
    included_messages: int
    included_contacts: int
    prices: list[PlanPrice]


class ChannelUsage(BaseModel):
    channel_id: str
    channel_name: str | None = None
    platform: str
    messages_sent: int


class Usage(BaseModel):
    period: str = Field(description="calendar month (UTC), `YYYY-MM`")
    period_start: str
    period_end: str
    messages_sent: int
    included_messages: int
    channels: list[ChannelUsage]
    contacts_stored: int
    included_contacts: int


class BillingSettings(BaseModel):
    plan: PlanView
    currency: str
    tax_rate: Money = Field(description="percent applied to the subtotal of new invoices")
    payment_terms_days: int
    billing_profile: BillingProfile
    usage: Usage
    version: int
    updated_at: str | None = None


class BillingUpdate(Strict):
    plan: PlanId | None = Field(default=None, description="applies to invoices generated from now on")
    currency: CurrencyCode | None = None
    tax_rate: Decimal | None = Field(default=None, ge=0, le=100, max_digits=6, decimal_places=3)
    payment_terms_days: int | None = Field(default=None, ge=0, le=120)
    billing_profile: BillingProfileUpdate | None = None


# Invoices ------------------------------------------------------------------------------------------------------------
class InvoiceLine(BaseModel):
    description: str
    line_type: str = Field(description="subscription, usage, credit")
    position: int
    quantity: Money
    unit_amount: Money
    line_total: Money


class Invoice(BaseModel):
    id: str
    invoice_number: str
    status: InvoiceStatus
    currency: str
    subtotal_amount: Money
    tax_amount: Money
    total_amount: Money
    issued_at: str | None = None
    due_at: str | None = None
    paid_at: str | None = None
    period_start: str = Field(description="first instant of the billed calendar month (UTC)")
    period_end: str = Field(description="first instant after it (exclusive end)")
    target_plan: str = Field(description="the plan billed (the organization's plan when the invoice was generated)")
    latest_reference_id: str | None = None
    latest_session_status: str | None = None
    notes: str | None = None
    billing_profile: BillingProfile
    lines: list[InvoiceLine]
    organization_id: str
    period: str
    created_at: str
    updated_at: str
    version: int


class InvoiceGenerate(Strict):
    period: str | None = Field(
        default=None, pattern=PERIOD, description="calendar month `YYYY-MM` (UTC); the previous month when absent"
    )
    notes: str | None = Field(default=None, max_length=2000)


class InvoiceUpdate(Strict):
    notes: str | None = Field(default=None, max_length=2000)


class InvoicePay(Strict):
    reference_id: str = Field(min_length=1, max_length=128, description="the payment's reference (transfer, charge)")
    paid_at: str | None = Field(default=None, max_length=40, description="ISO 8601; now when absent")


class InvoiceReason(Strict):
    reason: str | None = Field(default=None, max_length=500)
