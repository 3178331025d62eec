"""Settings routes: billing (owner) — profile, plan, usage, invoices and their states; integrations and
notification preferences (admin). Rules in `switchboard.billing` and `switchboard.settings`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import current_auth
from switchboard.api.envelope import Data, ListData, Meta, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.billing import invoices
    from switchboard.billing import models as billing_models
    from switchboard.billing import service as billing
    from switchboard.settings import integrations, notifications
    from switchboard.settings import models as settings_models
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    billing = lazy_module("switchboard.billing.service")
    billing_models = lazy_module("switchboard.billing.models")
    integrations = lazy_module("switchboard.settings.integrations")
    invoices = lazy_module("switchboard.billing.invoices")
    notifications = lazy_module("switchboard.settings.notifications")
    settings_models = lazy_module("switchboard.settings.models")

app = create_resolver()
BILLING = ["billing"]
INTEGRATIONS = ["integrations"]
NOTIFICATIONS = ["notifications"]
INVOICES = "/v1/settings/billing/invoices"


# Billing ------------------------------------------------------------------------------------------------------------
@app.get("/v1/settings/billing", middlewares=requires("owner"), tags=BILLING)
def get_billing() -> Data[billing_models.BillingSettings]:
    """Billing profile, plan, currency, tax rate, payment terms, and this month's usage (messages sent per channel,
    contacts stored)."""
    return Data(data=billing.get(get_store(), current_auth(app)))


@app.patch("/v1/settings/billing", middlewares=requires("owner"), tags=BILLING)
def update_billing(body: Annotated[billing_models.BillingUpdate, Body()]) -> Data[billing_models.BillingSettings]:
    """`billing_profile` fields sent replace the stored ones (`null` clears one). Plan, currency and tax rate apply
    to invoices generated from now on."""
    return Data(data=billing.update(get_store(), current_auth(app), body))


@app.get("/v1/settings/billing/plans", middlewares=requires("owner"), tags=BILLING)
def list_plans() -> ListData[billing_models.PlanView]:
    items = billing.plans()
    return whole_list(items)


@app.get(INVOICES, middlewares=requires("owner"), tags=BILLING)
def list_invoices(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    status: Annotated[str | None, Query(pattern="^(draft|open|paid|void|uncollectible)$")] = None,
) -> ListData[billing_models.Invoice]:
    """Newest first."""
    items, nxt = invoices.list_invoices(get_store(), current_auth(app), limit, cursor, status)
    return cursor_list(items, limit, nxt)


@app.post(
    INVOICES,
    middlewares=requires("owner"),
    tags=BILLING,
    status_code=201,
    responses={200: {"description": "The period already has an invoice: that invoice"}},
)
def generate_invoice(
    body: Annotated[billing_models.InvoiceGenerate | None, Body()] = None,
) -> Response[Data[billing_models.Invoice]]:
    """Builds the `draft` invoice of a calendar month (`period`, the previous month by default) from its metered
    usage. One invoice per period: asking again answers the existing one with 200 (until it is voided)."""
    invoice, created = invoices.generate(get_store(), current_auth(app), body or billing_models.InvoiceGenerate())
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=invoice).model_dump(mode="json"),
    )


@app.get(f"{INVOICES}/<invoiceID>", middlewares=requires("owner"), tags=BILLING)
def get_invoice(invoiceID: str) -> Data[billing_models.Invoice]:
    return Data(data=invoices.get(get_store(), current_auth(app), invoiceID))


@app.patch(f"{INVOICES}/<invoiceID>", middlewares=requires("owner"), tags=BILLING)
def update_invoice(
    invoiceID: str, body: Annotated[billing_models.InvoiceUpdate, Body()]
) -> Data[billing_models.Invoice]:
    """Only drafts can be edited (409 `conflict` otherwise)."""
    return Data(data=invoices.update(get_store(), current_auth(app), invoiceID, body))


@app.post(f"{INVOICES}/<invoiceID>/finalize", middlewares=requires("owner"), tags=BILLING)
def finalize_invoice(invoiceID: str) -> Data[billing_models.Invoice]:
    """`draft → open`: issued now, due after the payment terms, with the current billing profile (which must have
    legal name, billing e-mail, address and country); e-mailed to the billing e-mail and members who want billing
    e-mails."""
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "open"))


@app.post(f"{INVOICES}/<invoiceID>/checkout", middlewares=requires("owner"), tags=BILLING)
def checkout_invoice(invoiceID: str) -> Data[billing_models.Invoice]:
    """Opens a payment session for an `open` or `uncollectible` invoice (`latest_reference_id`,
    `latest_session_status: open`)."""
    return Data(data=invoices.checkout(get_store(), current_auth(app), invoiceID))


@app.post(f"{INVOICES}/<invoiceID>/pay", middlewares=requires("owner"), tags=BILLING)
def pay_invoice(invoiceID: str, body: Annotated[billing_models.InvoicePay, Body()]) -> Data[billing_models.Invoice]:
    """`open | uncollectible → paid`, recording the payment's reference."""
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "paid", body))


@app.post(f"{INVOICES}/<invoiceID>/void", middlewares=requires("owner"), tags=BILLING)
def void_invoice(
    invoiceID: str, body: Annotated[billing_models.InvoiceReason | None, Body()] = None
) -> Data[billing_models.Invoice]:
    """`draft | open | uncollectible → void`; the period is free again for a corrected invoice."""
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "void", body))


@app.post(f"{INVOICES}/<invoiceID>/mark-uncollectible", middlewares=requires("owner"), tags=BILLING)
def mark_invoice_uncollectible(
    invoiceID: str, body: Annotated[billing_models.InvoiceReason | None, Body()] = None
) -> Data[billing_models.Invoice]:
    """`open → uncollectible` (it can still be paid or voided)."""
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "uncollectible", body))


# Integrations -------------------------------------------------------------------------------------------------------
@app.get("/v1/settings/integrations", middlewares=requires("admin"), tags=INTEGRATIONS)
def list_integrations() -> ListData[settings_models.Integration]:
    """Secrets are masked."""
    items = integrations.list_integrations(get_store(), current_auth(app))
    return ListData(data=items, meta=Meta(has_more=False, limit=integrations.MAX_PER_ORG, total=len(items)))


@app.get("/v1/settings/integrations/catalog", middlewares=requires("admin"), tags=INTEGRATIONS)
def integration_catalog() -> ListData[settings_models.IntegrationType]:
    """The integration types and their fields (which are required, which are secret)."""
    items = integrations.catalog()
    return whole_list(items)


@app.post("/v1/settings/integrations", middlewares=requires("admin"), tags=INTEGRATIONS, status_code=201)
def create_integration(
    body: Annotated[settings_models.IntegrationCreate, Body()],
) -> Data[settings_models.Integration]:
    """`config` and `secrets` are checked against the type's fields; secrets are write-only."""
    return Data(data=integrations.create(get_store(), current_auth(app), body))


@app.get("/v1/settings/integrations/<integrationID>", middlewares=requires("admin"), tags=INTEGRATIONS)
def get_integration(integrationID: str) -> Data[settings_models.Integration]:
    return Data(data=integrations.get(get_store(), current_auth(app), integrationID))


@app.patch("/v1/settings/integrations/<integrationID>", middlewares=requires("admin"), tags=INTEGRATIONS)
def update_integration(
    integrationID: str, body: Annotated[settings_models.IntegrationUpdate, Body()]
) -> Data[settings_models.Integration]:
    return Data(data=integrations.update(get_store(), current_auth(app), integrationID, body))


@app.delete(
    "/v1/settings/integrations/<integrationID>", middlewares=requires("admin"), tags=INTEGRATIONS, status_code=204
)
def delete_integration(integrationID: str) -> None:
    integrations.delete(get_store(), current_auth(app), integrationID)


# Notifications ------------------------------------------------------------------------------------------------------
@app.get("/v1/settings/notifications", middlewares=requires("admin"), tags=NOTIFICATIONS)
def list_notification_preferences() -> ListData[settings_models.NotificationPreferences]:
    """Every member's e-mail preferences (the defaults of their role where they set nothing)."""
    items = notifications.list_preferences(get_store(), current_auth(app))
    return whole_list(items)


@app.get("/v1/settings/notifications/<userID>", middlewares=requires("admin"), tags=NOTIFICATIONS)
def get_notification_preferences(userID: str) -> Data[settings_models.NotificationPreferences]:
    """`userID` is a member's user id, or `me` for the signed-in user."""
    return Data(data=notifications.get(get_store(), current_auth(app), userID))


@app.put("/v1/settings/notifications/<userID>", middlewares=requires("admin"), tags=NOTIFICATIONS)
def put_notification_preferences(
    userID: str, body: Annotated[settings_models.NotificationPreferencesPut, Body()]
) -> Data[settings_models.NotificationPreferences]:
    """Replaces the member's preferences; topics left out follow the member's role again."""
    return Data(data=notifications.put(get_store(), current_auth(app), userID, body))


handler = make_handler(app)
