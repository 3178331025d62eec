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


@app.get(BASE, middlewares=ADMIN, tags=WH, summary="List webhook settings")
def webhook_settings() -> Data[models.WebhookSettings]:
    """The organization's endpoints and the catalogue of event types they can subscribe to."""
    return Data(data=service.settings_view(get_store(), current_auth(app)))


# Endpoints --------------------------------------------------------------------------------------------------------
@app.get(f"{BASE}/endpoints", middlewares=ADMIN, tags=WH, summary="List endpoints")
def list_endpoints() -> ListData[models.Endpoint]:
    endpoints = service.settings_view(get_store(), current_auth(app)).endpoints
    return whole_list(endpoints)


@app.post(f"{BASE}/endpoints", middlewares=ADMIN, tags=WH, status_code=201, summary="Create an endpoint")
def create_endpoint(body: Annotated[models.EndpointCreate, Body()]) -> Data[models.EndpointWithSecret]:
    """`url` must be https on a public address; `filter_types` empty or absent subscribes to every event. The
    response carries the signing `secret` (shown again only by rotate-secret)."""
    return Data(data=service.create_endpoint(get_store(), current_auth(app), body))


@app.get(f"{BASE}/endpoints/<endpointID>", middlewares=ADMIN, tags=WH, summary="Get an endpoint")
def get_endpoint(endpointID: str) -> Data[models.Endpoint]:
    return Data(data=service.get_endpoint(get_store(), current_auth(app), endpointID))


@app.patch(f"{BASE}/endpoints/<endpointID>", middlewares=ADMIN, tags=WH, summary="Update an endpoint")
def update_endpoint(endpointID: str, body: Annotated[models.EndpointUpdate, Body()]) -> Data[models.Endpoint]:
    """Enabling a disabled endpoint clears its failure streak."""
    return Data(data=service.update_endpoint(get_store(), current_auth(app), endpointID, body))


@app.delete(f"{BASE}/endpoints/<endpointID>", middlewares=ADMIN, tags=WH, status_code=204, summary="Delete an endpoint")
def delete_endpoint(endpointID: str) -> None:
    service.delete_endpoint(get_store(), current_auth(app), endpointID)


@app.post(
    f"{BASE}/endpoints/<endpointID>/rotate-secret", middlewares=ADMIN, tags=WH, summary="Rotate the signing secret"
)
def rotate_secret(endpointID: str) -> Data[models.EndpointWithSecret]:
    """The new secret signs from now on; the previous one keeps signing (a second `v1,` signature) for 24 h."""
    return Data(data=service.rotate_secret(get_store(), current_auth(app), endpointID))


@app.post(
    f"{BASE}/endpoints/<endpointID>/test", middlewares=ADMIN, tags=WH, status_code=202, summary="Send a test delivery"
)
def send_test(endpointID: str) -> Data[models.TestDelivery]:
    """Queues a `webhook.test` event (`{endpoint_id, sent_at}`) for this endpoint only; `delivery_id` is its
    `webhook-id`, to follow in the deliveries list and attempts."""
    return Data(data=service.send_test(get_store(), current_auth(app), endpointID))


@app.post(
    f"{BASE}/endpoints/<endpointID>/recover",
    middlewares=ADMIN,
    tags=WH,
    status_code=202,
    summary="Retry failed deliveries since a time",
)
def recover_endpoint(endpointID: str, body: Annotated[models.RecoverRequest, Body()]) -> Data[models.RecoverResult]:
    """Every `retrying`, `exhausted` or `canceled` delivery of the endpoint created since `since` is sent again
    (same ids) by a background job, page by page; the answer names the job at once."""
    return Data(data=service.recover(get_store(), current_auth(app), endpointID, body.since))


# Alerting ---------------------------------------------------------------------------------------------------------
@app.get(f"{BASE}/alerting-settings", middlewares=ADMIN, tags=WH, summary="Get the alerting settings")
def get_alerting() -> Data[models.AlertingSettings]:
    return Data(data=service.get_alerting(get_store(), current_auth(app)))


@app.put(f"{BASE}/alerting-settings", middlewares=ADMIN, tags=WH, summary="Replace the alerting settings")
def put_alerting(body: Annotated[models.AlertingSettingsUpdate, Body()]) -> Data[models.AlertingSettings]:
    """The e-mails hear when an endpoint fails `failure_threshold` attempts in a row and when it is disabled."""
    return Data(data=service.put_alerting(get_store(), current_auth(app), body))


# Deliveries -------------------------------------------------------------------------------------------------------
@app.get(f"{BASE}/deliveries", middlewares=ADMIN, tags=WH, summary="List deliveries")
def list_deliveries(
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    endpoint_id: Annotated[str | None, Query(max_length=64)] = None,
    status: Annotated[models.DeliveryStatus | None, Query()] = None,
    event_type: Annotated[str | None, Query(max_length=100)] = None,
    since: Annotated[str | None, Query(max_length=40, description="Created at or after (ISO 8601)")] = None,
) -> ListData[models.Delivery]:
    """Newest first."""
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


@app.get(f"{BASE}/deliveries/<messageID>/attempts", middlewares=ADMIN, tags=WH, summary="List a delivery's attempts")
def list_attempts(
    messageID: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> ListData[models.Attempt]:
    """Newest first."""
    items, nxt = service.list_attempts(get_store(), current_auth(app), messageID, limit=limit, cursor=cursor)
    return cursor_list(items, limit, nxt)


@app.post(
    f"{BASE}/deliveries/<messageID>/retry", middlewares=ADMIN, tags=WH, status_code=202, summary="Retry a delivery"
)
def retry_delivery(messageID: str) -> Data[models.Delivery]:
    """Sends the delivery again with the same `webhook-id` and body, on a fresh retry schedule."""
    return Data(data=service.retry_delivery(get_store(), current_auth(app), messageID))


# Portal -----------------------------------------------------------------------------------------------------------
@app.post(f"{BASE}/portal-access", middlewares=ADMIN, tags=WH, status_code=201, summary="Create a portal link")
def portal_access(
    body: Annotated[models.PortalAccessRequest | None, Body()] = None,
) -> Data[models.PortalAccess]:
    """A single-use, short-lived magic link to the webhook portal (the token is stored only as a hash)."""
    expires_in = (body or models.PortalAccessRequest()).expires_in
    return Data(data=service.create_portal_access(get_store(), current_auth(app), base_url(app), expires_in))


handler = make_handler(app)
