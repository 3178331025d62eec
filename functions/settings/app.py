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
@app.get(
    "/v1/settings/billing",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Get billing settings",
    description=(
        "Billing profile, plan, currency, tax rate, payment terms, and this month's usage (messages sent "
        "per channel, contacts stored).\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_billing() -> Data[billing_models.BillingSettings]:
    return Data(data=billing.get(get_store(), current_auth(app)))


@app.patch(
    "/v1/settings/billing",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Update billing settings",
    description=(
        "`billing_profile` fields sent replace the stored ones (`null` clears one). Plan, currency and "
        "tax rate apply to invoices generated from now on.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_billing(body: Annotated[billing_models.BillingUpdate, Body()]) -> Data[billing_models.BillingSettings]:
    return Data(data=billing.update(get_store(), current_auth(app), body))


@app.get(
    "/v1/settings/billing/plans",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="List plans",
    description=(
        "The plans an organization can choose, with their prices.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_plans() -> ListData[billing_models.PlanView]:
    items = billing.plans()
    return whole_list(items)


@app.get(
    INVOICES,
    middlewares=requires("owner"),
    tags=BILLING,
    summary="List invoices",
    description=(
        "The organization's invoices, newest first, a page at a time (`limit` 1-100, `cursor`); filter by "
        "`status` (`draft`, `open`, `paid`, `void`, `uncollectible`).\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_invoices(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
    status: Annotated[billing_models.InvoiceStatus | None, Query(description="Only invoices in this status")] = None,
) -> ListData[billing_models.Invoice]:
    items, nxt = invoices.list_invoices(get_store(), current_auth(app), limit, cursor, status)
    return cursor_list(items, limit, nxt)


@app.post(
    INVOICES,
    middlewares=requires("owner"),
    tags=BILLING,
    status_code=201,
    responses={200: {"description": "The period already has an invoice: that invoice"}},
    summary="Generate an invoice",
    description=(
        "Builds the `draft` invoice of a calendar month (`period`, the previous month by default) from "
        "its metered usage (201). One invoice per period: asking again answers the existing one with 200 "
        "(until it is voided).\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def generate_invoice(
    body: Annotated[billing_models.InvoiceGenerate | None, Body()] = None,
) -> Response[Data[billing_models.Invoice]]:
    invoice, created = invoices.generate(get_store(), current_auth(app), body or billing_models.InvoiceGenerate())
    return Response(
        status_code=201 if created else 200,
        content_type="application/json",
        body=Data(data=invoice).model_dump(mode="json"),
    )


@app.get(
    f"{INVOICES}/<invoiceID>",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Get an invoice",
    description=(
        "One invoice with its lines and totals; 404 `not_found`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_invoice(invoiceID: str) -> Data[billing_models.Invoice]:
    return Data(data=invoices.get(get_store(), current_auth(app), invoiceID))


@app.patch(
    f"{INVOICES}/<invoiceID>",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Update a draft invoice",
    description=(
        "Changes the memo, lines or due date of a `draft`; any other status is 409 `conflict`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_invoice(
    invoiceID: str, body: Annotated[billing_models.InvoiceUpdate, Body()]
) -> Data[billing_models.Invoice]:
    return Data(data=invoices.update(get_store(), current_auth(app), invoiceID, body))


@app.post(
    f"{INVOICES}/<invoiceID>/finalize",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Finalize an invoice",
    description=(
        "`draft → open`: issued now, due after the payment terms, with the current billing profile (which "
        "must have legal name, billing e-mail, address and country, else 400 `validation_failed`); "
        "e-mailed to the billing e-mail and members who want billing e-mails. Another status is 409 "
        "`conflict`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def finalize_invoice(invoiceID: str) -> Data[billing_models.Invoice]:
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "open"))


@app.post(
    f"{INVOICES}/<invoiceID>/checkout",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Open a payment session",
    description=(
        "Opens a payment session for an `open` or `uncollectible` invoice (`latest_reference_id`, "
        "`latest_session_status: open`); another status is 409 `conflict`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def checkout_invoice(invoiceID: str) -> Data[billing_models.Invoice]:
    return Data(data=invoices.checkout(get_store(), current_auth(app), invoiceID))


@app.post(
    f"{INVOICES}/<invoiceID>/pay",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Mark an invoice paid",
    description=(
        "`open | uncollectible → paid`, recording the payment's reference; another status is 409 "
        "`conflict`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def pay_invoice(invoiceID: str, body: Annotated[billing_models.InvoicePay, Body()]) -> Data[billing_models.Invoice]:
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "paid", body))


@app.post(
    f"{INVOICES}/<invoiceID>/void",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Void an invoice",
    description=(
        "`draft | open | uncollectible → void`; the period is free again for a corrected invoice. A paid "
        "or void invoice is 409 `conflict`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def void_invoice(
    invoiceID: str, body: Annotated[billing_models.InvoiceReason | None, Body()] = None
) -> Data[billing_models.Invoice]:
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "void", body))


@app.post(
    f"{INVOICES}/<invoiceID>/mark-uncollectible",
    middlewares=requires("owner"),
    tags=BILLING,
    summary="Mark an invoice uncollectible",
    description=(
        "`open → uncollectible` (it can still be paid or voided); another status is 409 `conflict`.\n\n"
        "Who may call: the `owner` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def mark_invoice_uncollectible(
    invoiceID: str, body: Annotated[billing_models.InvoiceReason | None, Body()] = None
) -> Data[billing_models.Invoice]:
    return Data(data=invoices.transition(get_store(), current_auth(app), invoiceID, "uncollectible", body))


# Integrations -------------------------------------------------------------------------------------------------------
@app.get(
    "/v1/settings/integrations",
    middlewares=requires("admin"),
    tags=INTEGRATIONS,
    summary="List integrations",
    description=(
        "The organization's integrations; secrets are masked.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_integrations() -> ListData[settings_models.Integration]:
    items = integrations.list_integrations(get_store(), current_auth(app))
    return ListData(data=items, meta=Meta(has_more=False, limit=integrations.MAX_PER_ORG, total=len(items)))


@app.get(
    "/v1/settings/integrations/catalog",
    middlewares=requires("admin"),
    tags=INTEGRATIONS,
    summary="List integration types",
    description=(
        "The integration types and their fields (which are required, which are secret).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def integration_catalog() -> ListData[settings_models.IntegrationType]:
    items = integrations.catalog()
    return whole_list(items)


@app.post(
    "/v1/settings/integrations",
    middlewares=requires("admin"),
    tags=INTEGRATIONS,
    status_code=201,
    summary="Create an integration",
    description=(
        "`config` and `secrets` are checked against the type's fields (400 `validation_failed`); secrets "
        "are sealed and write-only. 409 `conflict` past the per-organization limit.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_integration(
    body: Annotated[settings_models.IntegrationCreate, Body()],
) -> Data[settings_models.Integration]:
    return Data(data=integrations.create(get_store(), current_auth(app), body))


@app.get(
    "/v1/settings/integrations/<integrationID>",
    middlewares=requires("admin"),
    tags=INTEGRATIONS,
    summary="Get an integration",
    description=(
        "One integration, secrets masked; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_integration(integrationID: str) -> Data[settings_models.Integration]:
    return Data(data=integrations.get(get_store(), current_auth(app), integrationID))


@app.patch(
    "/v1/settings/integrations/<integrationID>",
    middlewares=requires("admin"),
    tags=INTEGRATIONS,
    summary="Update an integration",
    description=(
        "Changes the fields sent, checked against the type; secrets sent replace the stored ones.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_integration(
    integrationID: str, body: Annotated[settings_models.IntegrationUpdate, Body()]
) -> Data[settings_models.Integration]:
    return Data(data=integrations.update(get_store(), current_auth(app), integrationID, body))


@app.delete(
    "/v1/settings/integrations/<integrationID>",
    middlewares=requires("admin"),
    tags=INTEGRATIONS,
    status_code=204,
    summary="Delete an integration",
    description=(
        "Deletes the integration and its secrets; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def delete_integration(integrationID: str) -> None:
    integrations.delete(get_store(), current_auth(app), integrationID)


# Notifications ------------------------------------------------------------------------------------------------------
@app.get(
    "/v1/settings/notifications",
    middlewares=requires("admin"),
    tags=NOTIFICATIONS,
    summary="List notification preferences",
    description=(
        "Every member's e-mail preferences (the defaults of their role where they set nothing).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_notification_preferences() -> ListData[settings_models.NotificationPreferences]:
    items = notifications.list_preferences(get_store(), current_auth(app))
    return whole_list(items)


@app.get(
    "/v1/settings/notifications/<userID>",
    middlewares=requires("admin"),
    tags=NOTIFICATIONS,
    summary="Get a member's notification preferences",
    description=(
        "`userID` is a member's user id, or `me` for the signed-in user; 404 `not_found` for a "
        "non-member.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_notification_preferences(userID: str) -> Data[settings_models.NotificationPreferences]:
    return Data(data=notifications.get(get_store(), current_auth(app), userID))


@app.put(
    "/v1/settings/notifications/<userID>",
    middlewares=requires("admin"),
    tags=NOTIFICATIONS,
    summary="Replace a member's notification preferences",
    description=(
        "Replaces the member's preferences; topics left out follow the member's role again.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def put_notification_preferences(
    userID: str, body: Annotated[settings_models.NotificationPreferencesPut, Body()]
) -> Data[settings_models.NotificationPreferences]:
    return Data(data=notifications.put(get_store(), current_auth(app), userID, body))


handler = make_handler(app)
