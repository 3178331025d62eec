"""Webhook management: endpoints and their secrets, test deliveries, alerting settings, deliveries and attempts,
manual retry and recovery, portal access. Admin only (CONVENTIONS: admin manages webhooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from switchboard.api.app import create_resolver, make_handler
from switchboard.api.auth import requires
from switchboard.api.context import base_url, current_auth
from switchboard.api.envelope import Data, ListData, cursor_list, whole_list
from switchboard.api.lazy import lazy_module
from switchboard.models import DateTimeIn
from switchboard.store import get_store

if TYPE_CHECKING:
    from switchboard.webhooks import models, service
else:  # the models when a route's dependant is first built, the rules when a route first runs (not at init)
    models = lazy_module("switchboard.webhooks.models")
    service = lazy_module("switchboard.webhooks.service")

app = create_resolver()
WH = ["webhooks"]
BASE = "/v1/settings/developer/webhooks"
ADMIN = requires("admin")


@app.get(
    BASE,
    middlewares=ADMIN,
    tags=WH,
    summary="Get webhook settings",
    description=(
        "The organization's endpoints and the catalogue of event types they can subscribe to.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def webhook_settings() -> Data[models.WebhookSettings]:
    return Data(data=service.settings_view(get_store(), current_auth(app)))


# Endpoints --------------------------------------------------------------------------------------------------------
@app.get(
    f"{BASE}/endpoints",
    middlewares=ADMIN,
    tags=WH,
    summary="List webhook endpoints",
    description=(
        "The organization's endpoints (secrets are never listed).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_endpoints() -> ListData[models.Endpoint]:
    endpoints = service.settings_view(get_store(), current_auth(app)).endpoints
    return whole_list(endpoints)


@app.post(
    f"{BASE}/endpoints",
    middlewares=ADMIN,
    tags=WH,
    status_code=201,
    summary="Create a webhook endpoint",
    description=(
        "`url` must be https on a public address (loopback, private, link-local and metadata addresses "
        "are 400 `validation_failed`); `filter_types` empty or absent subscribes to every event. The "
        "response carries the signing `secret` (`whsec_…`), shown again only by rotate-secret.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def create_endpoint(body: Annotated[models.EndpointCreate, Body()]) -> Data[models.EndpointWithSecret]:
    return Data(data=service.create_endpoint(get_store(), current_auth(app), body))


@app.get(
    f"{BASE}/endpoints/<endpointID>",
    middlewares=ADMIN,
    tags=WH,
    summary="Get a webhook endpoint",
    description=(
        "One endpoint, without its secret; 404 `not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_endpoint(endpointID: str) -> Data[models.Endpoint]:
    return Data(data=service.get_endpoint(get_store(), current_auth(app), endpointID))


@app.patch(
    f"{BASE}/endpoints/<endpointID>",
    middlewares=ADMIN,
    tags=WH,
    summary="Update a webhook endpoint",
    description=(
        "Changes the fields sent; a new `url` is checked like at creation. Enabling a disabled endpoint "
        "clears its failure streak.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def update_endpoint(endpointID: str, body: Annotated[models.EndpointUpdate, Body()]) -> Data[models.Endpoint]:
    return Data(data=service.update_endpoint(get_store(), current_auth(app), endpointID, body))


@app.delete(
    f"{BASE}/endpoints/<endpointID>",
    middlewares=ADMIN,
    tags=WH,
    status_code=204,
    summary="Delete a webhook endpoint",
    description=(
        "Deletes the endpoint; pending deliveries to it stop.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def delete_endpoint(endpointID: str) -> None:
    service.delete_endpoint(get_store(), current_auth(app), endpointID)


@app.post(
    f"{BASE}/endpoints/<endpointID>/rotate-secret",
    middlewares=ADMIN,
    tags=WH,
    summary="Rotate the signing secret",
    description=(
        "The new secret signs from now on and is in this response only; the previous one keeps signing (a "
        "second `v1,` signature) for 24 h.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def rotate_secret(endpointID: str) -> Data[models.EndpointWithSecret]:
    return Data(data=service.rotate_secret(get_store(), current_auth(app), endpointID))


@app.post(
    f"{BASE}/endpoints/<endpointID>/test",
    middlewares=ADMIN,
    tags=WH,
    status_code=202,
    summary="Send a test delivery",
    description=(
        "Queues a `webhook.test` event (`{endpoint_id, sent_at}`) for this endpoint only; `delivery_id` "
        "is its `webhook-id`, to follow in the deliveries list and attempts.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def send_test(endpointID: str) -> Data[models.TestDelivery]:
    return Data(data=service.send_test(get_store(), current_auth(app), endpointID))


@app.post(
    f"{BASE}/endpoints/<endpointID>/recover",
    middlewares=ADMIN,
    tags=WH,
    status_code=202,
    summary="Retry failed deliveries since a time",
    description=(
        "Every `retrying`, `exhausted` or `canceled` delivery of the endpoint created since `since` is "
        "sent again (same ids) by a background job, page by page; the answer names the job at once.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def recover_endpoint(endpointID: str, body: Annotated[models.RecoverRequest, Body()]) -> Data[models.RecoverResult]:
    return Data(data=service.recover(get_store(), current_auth(app), endpointID, body.since))


# Alerting ---------------------------------------------------------------------------------------------------------
@app.get(
    f"{BASE}/alerting-settings",
    middlewares=ADMIN,
    tags=WH,
    summary="Get the alerting settings",
    description=(
        "Who is e-mailed when an endpoint keeps failing or is disabled, and after how many failures.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def get_alerting() -> Data[models.AlertingSettings]:
    return Data(data=service.get_alerting(get_store(), current_auth(app)))


@app.put(
    f"{BASE}/alerting-settings",
    middlewares=ADMIN,
    tags=WH,
    summary="Replace the alerting settings",
    description=(
        "The e-mails hear when an endpoint fails `failure_threshold` attempts in a row and when it is "
        "disabled.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def put_alerting(body: Annotated[models.AlertingSettingsUpdate, Body()]) -> Data[models.AlertingSettings]:
    return Data(data=service.put_alerting(get_store(), current_auth(app), body))


# Deliveries -------------------------------------------------------------------------------------------------------
@app.get(
    f"{BASE}/deliveries",
    middlewares=ADMIN,
    tags=WH,
    summary="List webhook deliveries",
    description=(
        "Deliveries, newest first, a page at a time (`limit` 1-100, `cursor`). Filters: `endpoint_id`, "
        "`status` (`pending`, `succeeded`, `retrying`, `exhausted`, `canceled`), `event_type`, `since` "
        "(ISO 8601).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_deliveries(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
    endpoint_id: Annotated[str | None, Query(max_length=64)] = None,
    status: Annotated[models.DeliveryStatus | None, Query()] = None,
    event_type: Annotated[str | None, Query(max_length=100)] = None,
    since: Annotated[DateTimeIn | None, Query(description="Created at or after this time (RFC 3339)")] = None,
) -> ListData[models.Delivery]:
    items, nxt = service.list_deliveries(
        get_store(),
        current_auth(app),
        limit=limit,
        cursor=cursor,
        endpoint_id=endpoint_id,
        status=status,
        event_type=event_type,
        since=since,
    )
    return cursor_list(items, limit, nxt)


@app.get(
    f"{BASE}/deliveries/<messageID>/attempts",
    middlewares=ADMIN,
    tags=WH,
    summary="List a delivery's attempts",
    description=(
        "Each HTTP attempt of the delivery with its status code and duration, newest first (`limit`, "
        "`cursor`); 404 `not_found` for an unknown delivery.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def list_attempts(
    messageID: str,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 20,
    cursor: Annotated[str | None, Query(max_length=2048, description="`meta.cursor` of the previous page")] = None,
) -> ListData[models.Attempt]:
    items, nxt = service.list_attempts(get_store(), current_auth(app), messageID, limit=limit, cursor=cursor)
    return cursor_list(items, limit, nxt)


@app.post(
    f"{BASE}/deliveries/<messageID>/retry",
    middlewares=ADMIN,
    tags=WH,
    status_code=202,
    summary="Retry a delivery",
    description=(
        "Sends the delivery again with the same `webhook-id` and body, on a fresh retry schedule; 404 "
        "`not_found`.\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def retry_delivery(messageID: str) -> Data[models.Delivery]:
    return Data(data=service.retry_delivery(get_store(), current_auth(app), messageID))


# Portal -----------------------------------------------------------------------------------------------------------
@app.post(
    f"{BASE}/portal-access",
    middlewares=ADMIN,
    tags=WH,
    status_code=201,
    summary="Create a webhook portal link",
    description=(
        "A single-use, short-lived magic link to the webhook portal (`expires_in` seconds; the token is "
        "stored only as a hash).\n\n"
        "Who may call: the `admin` role or higher (API key or session); a lower role gets 403 "
        "`forbidden`."
    ),
)
def portal_access(
    body: Annotated[models.PortalAccessRequest | None, Body()] = None,
) -> Data[models.PortalAccess]:
    expires_in = (body or models.PortalAccessRequest()).expires_in
    return Data(data=service.create_portal_access(get_store(), current_auth(app), base_url(app), expires_in))


handler = make_handler(app)
