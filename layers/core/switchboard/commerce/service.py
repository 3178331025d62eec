"""The orders routes' service: reads, and a status change that tells the customer.

`POST /v1/orders/{id}/status` moves a billed order (one an `order_details` message was sent for) by sending Meta's
`order_status` message through the ordinary send (`messages.send`): the message, the order's new status and its event
are one transaction, and the message is queued like any other (409 when the channel is not connected or the
recipient may not be written to; nothing moves then). Meta takes `order_status` only for the reference of an
`order_details` message, so an order that was never billed (a cart) moves without a message.
"""

from __future__ import annotations

from switchboard.access import AuthContext
from switchboard.commerce import models, orders
from switchboard.messaging import messages
from switchboard.messaging import models as messaging_models
from switchboard.store import Store


def get(store: Store, auth: AuthContext, order_id: str) -> models.Order:
    return orders.get(store, auth, order_id)


def list_orders(
    store: Store, auth: AuthContext, *, limit: int, cursor: str | None, status: str | None, contact_id: str | None
) -> tuple[list[models.Order], str | None]:
    return orders.list_orders(store, auth, limit=limit, cursor=cursor, status=status, contact_id=contact_id)


def set_status(store: Store, auth: AuthContext, order_id: str, body: models.OrderStatusChange) -> models.Order:
    """Move the order to `body.status` (409 `invalid_order_transition` / `order_has_payment` when refused), sending
    the `order_status` message when the order was billed."""
    org = auth.org_id
    order = orders.get_item(store, org, order_id, consistent=True)
    orders.check_status(order, body.status)  # refused before anything is sent
    if order.get("details_message_id") and order.get("contact_id"):
        send = messaging_models.SendMessage.model_validate(
            {
                "channel_id": order["channel_id"],
                "contact_id": order["contact_id"],
                "type": "interactive",
                "interactive": orders.status_interactive(order, body.status, body.description),
            }
        )
        messages.send(store, auth, send)  # moves the order in the message's own transaction
    else:
        orders.apply_status(store, org, order, body.status, body.description)
    return orders.view(orders.get_item(store, org, order_id, consistent=True))
