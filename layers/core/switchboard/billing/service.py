"""Billing settings: the billing profile, the plan and currency, tax and payment terms, and this period's usage.

`ORG#<org>` / `BILLING#settings` holds the settings (absent until the first change: the defaults are the free plan
in USD, no tax, 30 days to pay). Changes are optimistic (`version`) and audited in the same transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.billing import catalogue, models, usage
from switchboard.errors import Conflict, ValidationFailed
from switchboard.store import Put, Store, keys, versioned

Item = dict[str, Any]
PROFILE_FIELDS = tuple(models.BillingProfile.model_fields)
DEFAULT_TERMS_DAYS = 30


def settings_key(org: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), "BILLING#settings")


def read_settings(store: Store, org: str, *, consistent: bool = False) -> Item:
    """The stored settings with the defaults filled in (`version` 0 when nothing was stored yet)."""
    item = store.get(settings_key(org), consistent=consistent) or {}
    return {
        "plan": item.get("plan") or catalogue.DEFAULT_PLAN,
        "currency": item.get("currency") or catalogue.DEFAULT_CURRENCY,
        "tax_rate": str(item.get("tax_rate") or "0"),
        "payment_terms_days": int(item.get("payment_terms_days", DEFAULT_TERMS_DAYS)),
        "billing_profile": {k: v for k, v in (item.get("billing_profile") or {}).items() if k in PROFILE_FIELDS},
        "version": int(item.get("version") or 0),
        "updated_at": item.get("updated_at"),
    }


# Periods -------------------------------------------------------------------------------------------------------------
def period_of(at: datetime) -> str:
    return at.strftime("%Y-%m")


def period_bounds(period: str) -> tuple[datetime, datetime]:
    """`2026-11` → [2026-11-01T00:00Z, 2026-12-01T00:00Z): the end is exclusive."""
    year, month = (int(x) for x in period.split("-"))
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def previous_period(at: datetime) -> str:
    start, _ = period_bounds(period_of(at))
    return period_of(datetime.fromtimestamp(start.timestamp() - 1, UTC))


# Views ---------------------------------------------------------------------------------------------------------------
def plan_view(plan: catalogue.Plan) -> models.PlanView:
    return models.PlanView(
        id=plan.id,
        name=plan.name,
        description=plan.description,
        included_messages=plan.included_messages,
        included_contacts=plan.included_contacts,
        prices=[
            models.PlanPrice(
                currency=currency,
                monthly_amount=price.monthly,
                per_message_amount=price.per_message,
                per_contact_amount=price.per_contact,
            )
            for currency, price in plan.prices.items()
        ],
    )


def plans() -> list[models.PlanView]:
    return [plan_view(p) for p in catalogue.PLANS.values()]


def channel_names(store: Store, org: str, channel_ids: list[str]) -> dict[str, str]:
    if not channel_ids:
        return {}
    rows = store.batch_get([keys.key(keys.org_pk(org), f"CHANNEL#{cid}") for cid in channel_ids])
    return {r["id"]: r.get("name") or r["id"] for r in rows}


def usage_of(store: Store, org: str, period: str, plan: catalogue.Plan) -> models.Usage:
    """Messages sent per channel in `period` and the contacts stored now: Query + BatchGet names + COUNT."""
    rows = usage.messages_sent(store, org, period)
    names = channel_names(store, org, [r["channel_id"] for r in rows])
    start, end = period_bounds(period)
    return models.Usage(
        period=period,
        period_start=clock.iso(start),
        period_end=clock.iso(end),
        messages_sent=sum(r["count"] for r in rows),
        included_messages=plan.included_messages,
        channels=[
            models.ChannelUsage(
                channel_id=r["channel_id"],
                channel_name=names.get(r["channel_id"]),
                platform=r["platform"],
                messages_sent=r["count"],
            )
            for r in rows
        ],
        contacts_stored=usage.contacts_stored(store, org),
        included_contacts=plan.included_contacts,
    )


def _view(store: Store, org: str, settings: Item) -> models.BillingSettings:
    plan = catalogue.PLANS[settings["plan"]]
    return models.BillingSettings(
        plan=plan_view(plan),
        currency=settings["currency"],
        tax_rate=Decimal(settings["tax_rate"]),
        payment_terms_days=settings["payment_terms_days"],
        billing_profile=models.BillingProfile.model_validate(settings["billing_profile"]),
        usage=usage_of(store, org, period_of(clock.now()), plan),
        version=settings["version"],
        updated_at=settings["updated_at"],
    )


def get(store: Store, auth: AuthContext) -> models.BillingSettings:
    return _view(store, auth.org_id, read_settings(store, auth.org_id))


def update(store: Store, auth: AuthContext, body: models.BillingUpdate) -> models.BillingSettings:
    org = auth.org_id
    current = read_settings(store, org, consistent=True)
    sent = body.model_dump(exclude_unset=True)
    for name in ("plan", "currency", "tax_rate", "payment_terms_days", "billing_profile"):
        if name in sent and sent[name] is None:
            raise ValidationFailed.field(f"body.{name}", "cannot be null")
    new = dict(current)
    if body.plan is not None:
        new["plan"] = body.plan
    if body.currency is not None:
        new["currency"] = body.currency
    if body.tax_rate is not None:
        new["tax_rate"] = format(body.tax_rate.normalize(), "f") if body.tax_rate else "0"
    if body.payment_terms_days is not None:
        new["payment_terms_days"] = body.payment_terms_days
    if body.billing_profile is not None:
        profile = dict(current["billing_profile"])
        for field, value in body.billing_profile.model_dump(exclude_unset=True).items():
            if value is None:
                profile.pop(field, None)
            else:
                profile[field] = value
        new["billing_profile"] = profile
    changed = [
        k for k in ("plan", "currency", "tax_rate", "payment_terms_days", "billing_profile") if new[k] != current[k]
    ]
    if not changed:
        return _view(store, org, current)
    new["version"] = current["version"] + 1
    new["updated_at"] = clock.now_iso()
    item = {**settings_key(org), "entity": "BillingSettings", "organization_id": org, **new}
    store.transact(
        [
            Put(
                item=item,
                **versioned(current["version"] or None),
                error=Conflict("The billing settings changed meanwhile; retry."),
            ),
            audit_put(
                auth,
                "billing.updated",
                "billing_settings",
                org,
                before={k: current[k] for k in changed},
                after={k: new[k] for k in changed},
            ),
        ]
    )
    return _view(store, org, new)
