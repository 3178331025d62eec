"""Orders (CONVENTIONS "Orders"): the rules, the transaction operations the messaging code adds to its own writes,
and the reads.

Where an order comes from:
- a customer's `order` message (a cart sent from the channel's catalogue: Meta's inbound `order` object, or the
  sandbox's simulated one): made in the message's own transaction (`inbound_ops`), `pending` and `unpaid`, its own id
  as its `reference_id` (so an `order_details` message with that reference bills the cart);
- an outbound `interactive` `order_details` message (a bill): made, or refreshed when its `reference_id` already
  names an order of the channel, in the send's own transaction (`outbound_ops`).
What moves it:
- an outbound `order_status` message (`POST /v1/messages`, or `POST /v1/orders/{id}/status`, which sends one for a
  billed order): `status`, by `NEXT_STATUS`; a refused move is 409 before anything is written or queued;
- Meta's payment status webhooks: `payment_status`, by `NEXT_PAYMENT` (a late, repeated or out-of-order one changes
  nothing, so the payment never moves back).
Every change is one transaction: the order (conditional on its `version`) and one `commerce.order.updated` event
through the outbox.

Items (docs/data-model.md, "Orders"): the order `ORG#<org>#<shard(ord)>` / `ORDER#<ord>`, listed on GSI1
`ORG#<org>#ORDERS#<shard>`, by status on GSI2 `ORG#<org>#ORDERS#S#<status>#<shard>` and by contact on GSI3
`ORG#<org>#CONTACTORDERS#<ct>`, each sorted by the id (a ULID: newest last); the reference pointer
`ORG#<org>#<shard(ch#ref)>` / `ORDERREF#<ch>#<ref>` (one order per reference and channel); the order-number counters
`ORG#<org>` / `ORDERSEQ#<k>`, k < 8: an order takes k = a hash of its id mod 8 and the number 8 * n + k, n its
counter after `ADD 1`. Numbers are unique by construction, no counter is shared by every order, and none is inside a
transaction (a failed write leaves a gap).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.commerce import models
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id
from switchboard.paging import cursor_page, query_fingerprint, read_page
from switchboard.providers.base import PaymentStatus
from switchboard.store import Put, Store, TxOp, keys, shards, versioned

Item = dict[str, Any]
EVENT = "commerce.order.updated"
SEQ_SHARDS = 8  # fixed for good: a number is 8 * n + k, so changing it would repeat numbers

# Meta's order flow: pending → processing / partially shipped / shipped → completed or canceled. A status never
# returns, and completed and canceled are final.
NEXT_STATUS: dict[str, frozenset[str]] = {
    "pending": frozenset({"processing", "partially_shipped", "shipped", "completed", "canceled"}),
    "processing": frozenset({"partially_shipped", "shipped", "completed", "canceled"}),
    "partially_shipped": frozenset({"shipped", "completed", "canceled"}),
    "shipped": frozenset({"completed", "canceled"}),
    "completed": frozenset(),
    "canceled": frozenset(),
}
# A payment moves forward only: a failed attempt may be followed by another one; a captured one only by its refund.
NEXT_PAYMENT: dict[str, frozenset[str]] = {
    "unpaid": frozenset({"pending", "captured", "failed"}),
    "pending": frozenset({"captured", "failed"}),
    "failed": frozenset({"pending", "captured"}),
    "captured": frozenset({"refunded"}),
    "refunded": frozenset(),
}
# Meta refuses to cancel an order with a successful or pending payment; a bill is sent again only while unpaid.
BLOCKS_CANCEL = frozenset({"pending", "captured"})
REBILLABLE = frozenset({"unpaid", "failed"})
TO_META = {"partially_shipped": "partially-shipped"}
FROM_META = {meta: ours for ours, meta in TO_META.items()}
STATUS_TEXT = {
    "pending": "pending",
    "processing": "being processed",
    "partially_shipped": "partially shipped",
    "shipped": "shipped",
    "completed": "completed",
    "canceled": "canceled",
}
INDEX_ATTRIBUTES = ("GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK")
REFERENCE_FIELD = "body.interactive.action.parameters.reference_id"


# Keys -----------------------------------------------------------------------------------------------------------------
def order_key(org: str, order_id: str) -> dict[str, str]:
    """Where a new order is written: its id's shard (a stored one is changed at its own key, `shards.key_of`)."""
    return keys.key(shards.pk(org, order_id), f"ORDER#{order_id}")


def reference_key(org: str, channel_id: str, reference_id: str) -> dict[str, str]:
    ref = f"{channel_id}#{reference_id}"
    return keys.key(shards.pk(org, ref), f"ORDERREF#{ref}")


def sequence_key(org: str, k: int) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"ORDERSEQ#{k}")


def list_pk(org: str) -> str:
    """The organization's orders (GSI1), one partition per shard."""
    return f"ORG#{org}#ORDERS"


def status_pk(org: str, status: str) -> str:
    """The organization's orders in one status (GSI2), one partition per shard."""
    return f"ORG#{org}#ORDERS#S#{status}"


def contact_pk(org: str, contact_id: str) -> str:
    """A contact's orders (GSI3)."""
    return f"ORG#{org}#CONTACTORDERS#{contact_id}"


def index_attributes(org: str, order: Item) -> Item:
    """The order's lists: everyone's, its status's (both in the id's shard) and its contact's."""
    order_id = order["id"]
    attrs = {
        "GSI1PK": shards.index_pk(list_pk(org), order_id),
        "GSI1SK": order_id,
        "GSI2PK": shards.index_pk(status_pk(org, order["status"]), order_id),
        "GSI2SK": order_id,
    }
    if order.get("contact_id"):
        attrs |= {"GSI3PK": contact_pk(org, order["contact_id"]), "GSI3SK": order_id}
    return attrs


# Reads ----------------------------------------------------------------------------------------------------------------
def view(item: Item) -> models.Order:
    return models.Order.model_validate(item)


def get_item(store: Store, org: str, order_id: str, *, consistent: bool = False) -> Item:
    item = shards.get(store, org, order_id, f"ORDER#{order_id}", consistent=consistent)
    if item is None:
        raise NotFound("No such order.")
    return item


def get(store: Store, auth: AuthContext, order_id: str) -> models.Order:
    return view(get_item(store, auth.org_id, order_id))


def _by_reference(store: Store, org: str, channel_id: str, reference_id: str) -> Item | None:
    """The order a channel's reference names, or None."""
    ref = f"{channel_id}#{reference_id}"
    pointer = shards.get(store, org, ref, f"ORDERREF#{ref}", consistent=True, often_absent=True)
    if pointer is None:
        return None
    return shards.get(store, org, pointer["order_id"], f"ORDER#{pointer['order_id']}", consistent=True)


def list_orders(
    store: Store, auth: AuthContext, *, limit: int, cursor: str | None, status: str | None, contact_id: str | None
) -> tuple[list[models.Order], str | None]:
    """Newest first. Each filter reads its own list: a contact's orders (GSI3; a status then filters that contact's
    few), or one status's (GSI2), or everyone's (GSI1); the sharded lists are an ordered merge of their shards."""
    org = auth.org_id
    fingerprint = query_fingerprint("orders", {"status": status, "contact_id": contact_id})
    if contact_id:
        items, nxt = cursor_page(
            store,
            org,
            fingerprint,
            cursor,
            limit=limit,
            pk=contact_pk(org, contact_id),
            index="GSI3",
            forward=False,
            filters={"status": status},
        )
    else:
        index, base = ("GSI2", status_pk(org, status)) if status else ("GSI1", list_pk(org))
        items, nxt = read_page(
            org,
            fingerprint,
            cursor,
            lambda state: shards.merged_state_page(
                store, state, pks=shards.index_pks(base, legacy=False), index=index, limit=limit, forward=False
            ),
        )
    return [view(i) for i in items], nxt


# Writes ---------------------------------------------------------------------------------------------------------------
def _amount_text(amount: Decimal) -> str:
    """An amount as the table keeps it: an exact decimal string without an exponent or trailing zeros."""
    text = format(amount.normalize(), "f")
    return "0" if text in ("-0", "") else text


def next_order_no(store: Store, org: str, order_id: str) -> str:
    """A new order's number: 8 * n + k, where k (a hash of the id, mod 8) picks one of 8 counters and n is that
    counter after `ADD 1` (one UpdateItem, outside the order's transaction: a failed write leaves a gap)."""
    k = shards.shard_of(order_id, SEQ_SHARDS)
    row = store.update(
        sequence_key(org, k),
        "ADD #n :one SET entity = :entity",
        names={"#n": "n"},
        values={":one": 1, ":entity": "OrderSequence"},
    )
    return str(int((row or {})["n"]) * SEQ_SHARDS + k)


def _event(org: str, order: Item, changes: list[str], moment: datetime) -> Put:
    return outbox_put(
        org,
        EVENT,
        {
            "order_id": order["id"],
            "order_no": order["order_no"],
            "status": order["status"],
            "payment_status": order["payment_status"],
            "organization_id": org,
            "contact_id": order.get("contact_id"),
            "channel_id": order["channel_id"],
            "reference_id": order["reference_id"],
            "changes": sorted(changes),
        },
        occurred=moment,
    )


def _rewrite(org: str, order: Item, changes: Item, moment: datetime) -> Item:
    """The order with `changes`, a new `version` and `updated_at`, and its list keys recomputed."""
    new = {k: v for k, v in order.items() if k not in INDEX_ATTRIBUTES}
    new |= changes | {"updated_at": clock.iso(moment), "version": int(order.get("version", 1)) + 1}
    return new | index_attributes(org, new)


def _write_ops(org: str, order: Item, new: Item, changes: list[str], moment: datetime) -> list[TxOp]:
    """The order's conditional rewrite and, when something a client sees changed, its one event."""
    ops: list[TxOp] = [
        Put(item=new, **versioned(order.get("version", 1)), error=Conflict("The order changed meanwhile; retry."))
    ]
    if changes:
        ops.append(_event(org, new, changes, moment))
    return ops


def _new_order(store: Store, org: str, fields: Item, moment: datetime) -> Item:
    order_id = new_id("ord")
    now = clock.iso(moment)
    item: Item = {
        **order_key(org, order_id),
        "entity": "Order",
        "id": order_id,
        "order_no": next_order_no(store, org, order_id),
        "organization_id": org,
        "reference_id": order_id,
        "status": "pending",
        "payment_status": "unpaid",
        "created_at": now,
        "updated_at": now,
        "version": 1,
        **fields,
    }
    return item | index_attributes(org, item)


def _create_ops(org: str, order: Item, moment: datetime) -> list[TxOp]:
    """A new order: the item, its reference pointer (one order per reference and channel) and its event."""
    pointer = {
        **reference_key(org, order["channel_id"], order["reference_id"]),
        "entity": "OrderReference",
        "order_id": order["id"],
    }
    return [
        Put(item=order, condition="attribute_not_exists(PK)"),
        Put(
            item=pointer,
            condition="attribute_not_exists(PK)",
            error=Conflict("An order with this reference_id was made meanwhile; retry."),
        ),
        _event(org, order, ["created"], moment),
    ]


def inbound_ops(
    store: Store,
    org: str,
    channel_id: str,
    contact_id: str,
    conversation_id: str,
    message_id: str,
    cart: Item,
    moment: datetime,
) -> tuple[str | None, list[TxOp]]:
    """The order a customer's cart makes (Meta's inbound `order`: `catalog_id`, `product_items` as the adapter
    normalised them: one currency, whole quantities, prices as numbers), to write with the message: its id and the
    operations (none for a cart without items)."""
    lines = [p for p in cart.get("product_items") or [] if isinstance(p, dict)]
    if not lines:
        return None, []
    items: list[Item] = [
        {
            "product_retailer_id": str(p["product_retailer_id"]),
            "quantity": int(p["quantity"]),
            "item_price": _amount_text(Decimal(str(p["item_price"]))),
            "currency": str(p["currency"]),
        }
        for p in lines
    ]
    total = sum((Decimal(i["item_price"]) * int(i["quantity"]) for i in items), Decimal(0))
    fields = {
        "channel_id": channel_id,
        "contact_id": contact_id,
        "conversation_id": conversation_id,
        "catalog_id": cart.get("catalog_id"),
        "items": items,
        "currency": items[0]["currency"],
        "total_amount": _amount_text(total),
        "source": "order_message",
        "source_message_id": message_id,
    }
    order = _new_order(store, org, fields, moment)
    return order["id"], _create_ops(org, order, moment)


# Outbound order messages ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrderMessage:
    """An outbound `order_details` or `order_status` message, checked: `interactive` is Meta's object as it is sent
    (strings trimmed), `status` the API's spelling of an `order_status` message's status."""

    kind: str
    reference_id: str
    interactive: Item
    details: models.OrderDetailsInteractive | None = None
    status: str | None = None
    description: str | None = None


def _invalid(kind: str, err: ValidationError) -> ValidationFailed:
    details = [
        {"field": ".".join(["body.interactive", *(str(p) for p in e["loc"])]), "message": str(e["msg"])}
        for e in err.errors()
    ]
    first = details[0] if details else {"field": "body.interactive", "message": "is not valid"}
    return ValidationFailed(f"{first['field']}: {first['message']} (Meta's {kind} object)", details=details)


def _amount(amount: models.MetaAmount) -> Decimal:
    return Decimal(amount.value) / Decimal(amount.offset)


def _check_totals(details: models.OrderDetailsInteractive) -> None:
    """Meta's sums: the subtotal is the items' (sale) prices times their quantities, the total is subtotal + tax +
    shipping - discount."""
    params = details.action.parameters
    order = params.order
    items = sum((_amount(i.sale_amount or i.amount) * i.quantity for i in order.items), Decimal(0))
    base = "body.interactive.action.parameters"
    if items != _amount(order.subtotal):
        raise ValidationFailed.field(f"{base}.order.subtotal", f"must be the items' sum, {_amount_text(items)}")
    total = _amount(order.subtotal) + _amount(order.tax)
    total += _amount(order.shipping) if order.shipping else Decimal(0)
    total -= _amount(order.discount) if order.discount else Decimal(0)
    if total != _amount(params.total_amount):
        raise ValidationFailed.field(
            f"{base}.total_amount", f"must be subtotal + tax + shipping - discount, {_amount_text(total)}"
        )


def parse_interactive(interactive: Item | None) -> OrderMessage | None:
    """An `order_details` or `order_status` interactive object checked against Meta's documented shape (400 naming
    the field otherwise); None for every other interactive type."""
    kind = interactive.get("type") if isinstance(interactive, dict) else None
    if kind not in ("order_details", "order_status"):
        return None
    try:
        if kind == "order_details":
            details = models.OrderDetailsInteractive.model_validate(interactive)
            _check_totals(details)
            return OrderMessage(
                kind,
                details.action.parameters.reference_id,
                details.model_dump(exclude_none=True),
                details=details,
            )
        status = models.OrderStatusInteractive.model_validate(interactive)
    except ValidationError as err:
        raise _invalid(str(kind), err) from None
    order = status.action.parameters.order
    return OrderMessage(
        kind,
        status.action.parameters.reference_id,
        status.model_dump(exclude_none=True),
        status=FROM_META.get(order.status, order.status),
        description=order.description,
    )


def _bill_fields(details: models.OrderDetailsInteractive) -> Item:
    params = details.action.parameters
    items = [
        {
            "product_retailer_id": i.retailer_id,
            "name": i.name,
            "quantity": i.quantity,
            "item_price": _amount_text(_amount(i.sale_amount or i.amount)),
            "currency": params.currency,
        }
        for i in params.order.items
    ]
    fields: Item = {
        "items": items,
        "currency": params.currency,
        "total_amount": _amount_text(_amount(params.total_amount)),
    }
    if params.order.catalog_id:  # a bill without one keeps the catalogue of the cart it bills
        fields["catalog_id"] = params.order.catalog_id
    return fields


def _same_contact(order: Item, contact_id: str) -> None:
    if order.get("contact_id") != contact_id:
        raise Conflict(
            "The order with this reference_id belongs to another contact.",
            details=[{"field": REFERENCE_FIELD, "order_id": order["id"]}],
        )


def check_status(order: Item, target: str) -> None:
    """409 unless `target` follows the order's status (`NEXT_STATUS`) and, for a cancellation, no payment is pending
    or captured (Meta refuses that one)."""
    current = str(order["status"])
    if target not in NEXT_STATUS.get(current, frozenset()):
        allowed = sorted(NEXT_STATUS.get(current, frozenset()))
        raise Conflict(
            f"The order is {current}; it can move to {', '.join(allowed) or 'no other status'}, not {target}.",
            code="invalid_order_transition",
            details=[{"order_id": order["id"], "status": current, "requested": target, "allowed": allowed}],
        )
    if target == "canceled" and order["payment_status"] in BLOCKS_CANCEL:
        raise Conflict(
            f"The order's payment is {order['payment_status']}: an order with a pending or captured payment cannot "
            "be canceled (refund it first).",
            code="order_has_payment",
            details=[{"order_id": order["id"], "payment_status": order["payment_status"]}],
        )


def status_ops(
    org: str, order: Item, target: str, description: str | None, message_id: str | None, moment: datetime
) -> list[TxOp]:
    """The order moved to `target` (checked), with the text given and the `order_status` message that said so."""
    check_status(order, target)
    changes = {"status": target, "status_description": description, "status_message_id": message_id}
    return _write_ops(org, order, _rewrite(org, order, changes, moment), ["status"], moment)


def outbound_ops(
    store: Store,
    org: str,
    channel_id: str,
    contact_id: str,
    conversation_id: str,
    message_id: str,
    message: OrderMessage,
    moment: datetime,
) -> list[TxOp]:
    """What an outbound order message does to its order, to write with the message: an `order_status` moves the order
    its reference names (404 when there is none on the channel, 409 when the move is refused); an `order_details`
    makes the order of a new reference, or refreshes the pending, unpaid order it names (409 otherwise)."""
    order = _by_reference(store, org, channel_id, message.reference_id)
    if message.kind == "order_status":
        if order is None:
            raise NotFound(
                f"No order with reference_id {message.reference_id!r} on this channel.",
                details=[{"field": REFERENCE_FIELD, "message": "names no order of the channel"}],
            )
        _same_contact(order, contact_id)
        return status_ops(org, order, str(message.status), message.description, message_id, moment)
    assert message.details is not None
    fields = _bill_fields(message.details)
    if order is None:
        new = _new_order(
            store,
            org,
            {
                **fields,
                "channel_id": channel_id,
                "contact_id": contact_id,
                "conversation_id": conversation_id,
                "reference_id": message.reference_id,
                "source": "order_details",
                "source_message_id": message_id,
                "details_message_id": message_id,
            },
            moment,
        )
        return _create_ops(org, new, moment)
    _same_contact(order, contact_id)
    if order["status"] != "pending":
        raise Conflict(
            f"The order is {order['status']}: an order_details message bills only a pending order.",
            code="invalid_order_transition",
            details=[{"order_id": order["id"], "status": order["status"], "requested": "pending", "allowed": []}],
        )
    if order["payment_status"] not in REBILLABLE:
        raise Conflict(
            f"The order's payment is {order['payment_status']}: it cannot be billed again.",
            code="order_has_payment",
            details=[{"order_id": order["id"], "payment_status": order["payment_status"]}],
        )
    changed = sorted(k for k, v in fields.items() if order.get(k) != v)
    extra = {"details_message_id": message_id, "conversation_id": order.get("conversation_id") or conversation_id}
    return _write_ops(org, order, _rewrite(org, order, {**fields, **extra}, moment), changed, moment)


def status_interactive(order: Item, target: str, description: str | None) -> Item:
    """The `order_status` message telling the customer of the order's new status (Meta's object)."""
    said = {"description": description} if description else {}
    return {
        "type": "order_status",
        "body": {"text": description or f"Order {order['order_no']}: {STATUS_TEXT[target]}."},
        "action": {
            "name": "review_order",
            "parameters": {
                "reference_id": order["reference_id"],
                "order": {"status": TO_META.get(target, target), **said},
            },
        },
    }


def apply_status(store: Store, org: str, order: Item, target: str, description: str | None) -> None:
    """A status change that sends no message (the order was never billed, so Meta has no `order_details` message for
    an `order_status` to refer to)."""
    store.transact(status_ops(org, order, target, description, None, clock.now()))


# Payments ---------------------------------------------------------------------------------------------------------
PAYMENT_ATTEMPTS = 3


def apply_payment(store: Store, org: str, channel_id: str, event: PaymentStatus) -> bool:
    """A payment status of a bill of the channel: `payment_status` moves when `NEXT_PAYMENT` allows it (an unknown
    reference, a repeat or a late status changes nothing). True when the order changed."""
    for _ in range(PAYMENT_ATTEMPTS):
        order = _by_reference(store, org, channel_id, event.reference_id)
        if order is None or event.status not in NEXT_PAYMENT.get(str(order["payment_status"]), frozenset()):
            return False
        moment = clock.now()
        changes: Item = {"payment_status": event.status}
        if event.transaction_id:
            changes["payment_transaction_id"] = event.transaction_id
        try:
            store.transact(_write_ops(org, order, _rewrite(org, order, changes, moment), ["payment_status"], moment))
            return True
        except Conflict:  # the order changed meanwhile: judge the payment against what it is now
            continue
    raise Conflict("The order kept changing while a payment status was applied; retry.")


# A contact erased or merged --------------------------------------------------------------------------------------
CONTACT_PAGE = 25


def move_contact_page(store: Store, org: str, contact_id: str, to: str | None, cursor: Any = None) -> Any:
    """One page of a contact's orders (GSI3, from `cursor`) given to the contact `to` (a merge) or, with None, made
    anonymous (an erasure: no `contact_id`; the orders stay, with their items and totals, for the business's books).
    Each leaves the contact's list and its `version` goes up, so that a change read before cannot bring the old
    contact back. → the cursor of the next page, None after the last: the list is walked with a cursor, since the
    index may still show orders moved a moment ago (re-reading its head could then never end)."""
    page = store.query(contact_pk(org, contact_id), index="GSI3", limit=CONTACT_PAGE, start_key=cursor)
    for order in page.items:
        if to:
            expression = "SET contact_id = :to, GSI3PK = :list, updated_at = :now ADD version :one"
            values = {":to": to, ":list": contact_pk(org, to), ":now": clock.now_iso(), ":one": 1}
        else:
            expression = "SET contact_id = :none, updated_at = :now ADD version :one REMOVE GSI3PK, GSI3SK"
            values = {":none": None, ":now": clock.now_iso(), ":one": 1}
        with contextlib.suppress(Conflict):  # deleted meanwhile (the organization's purge): nothing left to change
            store.update(
                shards.key_of(order),
                expression,
                condition="attribute_exists(PK) AND contact_id = :from",
                values={**values, ":from": contact_id},
                return_values="NONE",
            )
    return page.last_key
