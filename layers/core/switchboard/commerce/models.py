"""Orders as the API shows them, the body of their status route, and Meta's interactive `order_details` and
`order_status` objects as `POST /v1/messages` takes them (checked against Meta's documented shape before anything is
queued, so a bill Meta would refuse is a 400 here, not a failed message later)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from switchboard.models import BaseModel, Money, Strict, Timestamp

OrderStatus = Literal["pending", "processing", "partially_shipped", "shipped", "completed", "canceled"]
PaymentStatus = Literal["unpaid", "pending", "captured", "failed", "refunded"]
# Meta spells one status with a dash in `order_status` messages; the API uses the underscore throughout.
MetaOrderStatus = Literal["pending", "processing", "partially-shipped", "shipped", "completed", "canceled"]
REFERENCE_PATTERN = r"^[A-Za-z0-9_.-]{1,35}$"  # Meta: letters, digits, `_`, `-`, `.`; at most 35; case-sensitive
CURRENCY_PATTERN = r"^[A-Z]{3}$"
MAX_ITEMS = 100  # items of one order (what the order's item in the table holds comfortably)

ORDER_STATUS_NOTE = (
    "`pending`, `processing`, `partially_shipped`, `shipped`, `completed` or `canceled` (Meta's `order_status` "
    "values; Meta writes `partially-shipped`)"
)
PAYMENT_STATUS_NOTE = (
    "`unpaid` (no payment yet), `pending` (the customer started paying), `captured`, `failed` or `refunded`, "
    "from Meta's payment status webhooks"
)


class OrderItem(BaseModel):
    """One line of an order."""

    product_retailer_id: str = Field(description="The product's id in the catalogue (Meta's `retailer_id`)")
    name: str | None = Field(default=None, description="The product's name, when the order carries it")
    quantity: int = Field(description="How many")
    item_price: Money = Field(description="The price of one, in `currency` (the sale price when there is one)")
    currency: str = Field(description="ISO 4217 code")


class Order(BaseModel):
    """An order: a customer's cart sent from the catalogue (an inbound `order` message), or a bill sent with an
    `interactive` `order_details` message; its status follows `order_status` messages, its payment Meta's payment
    webhooks."""

    id: str = Field(description="The order's id (`ord_…`)")
    order_no: str = Field(description="A short number for people (digits), unique in the organization")
    organization_id: str
    channel_id: str = Field(description="The channel the order came or was sent through")
    contact_id: str | None = Field(default=None, description="The customer (null once the contact was erased)")
    conversation_id: str | None = Field(default=None, description="The conversation of the order's messages")
    reference_id: str = Field(
        description="Meta's `reference_id` of the order on its channel: the one of the `order_details` message "
        "that made it, or the order's own id for a cart (send an `order_details` message with it to bill the cart)"
    )
    catalog_id: str | None = Field(default=None, description="Meta's catalogue id, when the order names one")
    items: list[OrderItem] = Field(description="The lines of the order")
    currency: str = Field(description="ISO 4217 code of `total_amount`")
    total_amount: Money = Field(description="What the customer pays: the bill's total, or the cart's sum")
    status: OrderStatus = Field(description=ORDER_STATUS_NOTE)
    payment_status: PaymentStatus = Field(description=PAYMENT_STATUS_NOTE)
    status_description: str | None = Field(default=None, description="The text given with the latest status")
    status_message_id: str | None = Field(
        default=None, description="The `order_status` message the latest status change sent (null when it sent none)"
    )
    created_at: Timestamp
    updated_at: Timestamp

    openapi_examples = (
        {
            "id": "ord_01jd8a1b2c3d4e5f6g7h8j9kmn",
            "order_no": "1043",
            "organization_id": "org_01jd7zp1a2b3c4d5e6f7g8h9jk",
            "channel_id": "ch_01jd7zq4v6m3x8k2r5t9w1y0ab",
            "contact_id": "ct_01jd80a0z9y8x7w6v5t4s3r2qp",
            "conversation_id": "cv_01jd80a1b2c3d4e5f6g7h8j9km",
            "reference_id": "ord_01jd8a1b2c3d4e5f6g7h8j9kmn",
            "catalog_id": "194836987003835",
            "items": [
                {"product_retailer_id": "di9ozbzfi4", "quantity": 2, "item_price": 30, "currency": "USD"},
                {"product_retailer_id": "nqryix03ez", "quantity": 1, "item_price": 25.5, "currency": "USD"},
            ],
            "currency": "USD",
            "total_amount": 85.5,
            "status": "pending",
            "payment_status": "unpaid",
            "status_description": None,
            "status_message_id": None,
            "created_at": "2026-11-21T10:03:00.000Z",
            "updated_at": "2026-11-21T10:03:00.000Z",
        },
    )


class OrderStatusChange(Strict):
    """Body of `POST /v1/orders/{orderID}/status`."""

    status: OrderStatus = Field(description=ORDER_STATUS_NOTE)
    description: str | None = Field(
        default=None, min_length=1, max_length=120, description="Shown to the customer with the status (Meta's limit)"
    )

    openapi_examples = ({"status": "shipped", "description": "Your parcel left our warehouse."},)


# Meta's interactive order messages (Payments API: `order_details` "review_and_pay", `order_status` "review_order") ----
class MetaAmount(Strict):
    """Meta's amount: `value` / `offset` is the amount (`{"value": 1050, "offset": 100}` is 10.50)."""

    value: int = Field(ge=0, description="The amount times `offset`, an integer")
    offset: int = Field(ge=1, description="The divisor of `value` (100 for two decimals)")


class MetaNotedAmount(MetaAmount):
    """An amount with a note (tax, shipping)."""

    description: str | None = Field(default=None, max_length=60)


class MetaDiscount(MetaNotedAmount):
    """The order's discount."""

    discount_program_name: str | None = Field(default=None, max_length=60)


class MetaImporterAddress(Strict):
    """The importer's address of an item (Meta requires it when the order names no catalogue)."""

    address_line1: str = Field(min_length=1, max_length=200)
    address_line2: str | None = Field(default=None, max_length=200)
    city: str = Field(min_length=1, max_length=100)
    zone_code: str = Field(min_length=1, max_length=20)
    postal_code: str = Field(min_length=1, max_length=20)
    country_code: str = Field(pattern=r"^[A-Z]{2}$")


class MetaOrderItem(Strict):
    """An item of a bill."""

    retailer_id: str = Field(min_length=1, max_length=100, description="The product's id in the catalogue")
    name: str = Field(min_length=1, max_length=60, description="Shown to the customer")
    amount: MetaAmount = Field(description="The price of one")
    sale_amount: MetaAmount | None = Field(default=None, description="The discounted price of one, below `amount`")
    quantity: int = Field(ge=1, description="How many (an integer)")
    country_of_origin: str | None = Field(default=None, max_length=100)
    importer_name: str | None = Field(default=None, max_length=200)
    importer_address: MetaImporterAddress | None = None


class MetaExpiration(Strict):
    """When the bill stops being payable."""

    timestamp: str = Field(pattern=r"^[0-9]{1,12}$", description="UNIX seconds")
    description: str = Field(min_length=1, max_length=120)


class MetaOrder(Strict):
    """The bill's order part."""

    status: Literal["pending"] = Field(description="Always `pending` in an `order_details` message")
    catalog_id: str | None = Field(default=None, max_length=100)
    expiration: MetaExpiration | None = None
    items: list[MetaOrderItem] = Field(min_length=1, max_length=MAX_ITEMS)
    subtotal: MetaAmount = Field(description="The sum of the items' prices times their quantities")
    tax: MetaNotedAmount
    shipping: MetaNotedAmount | None = None
    discount: MetaDiscount | None = None


class OrderDetailsParameters(Strict):
    """`action.parameters` of an `order_details` message."""

    reference_id: str = Field(pattern=REFERENCE_PATTERN, description="The order's id at the business")
    type: Literal["digital-goods", "physical-goods"]
    payment_type: str | None = Field(default=None, max_length=40, description="e.g. `upi`")
    payment_configuration: str | None = Field(default=None, max_length=100)
    payment_settings: list[dict[str, Any]] | None = Field(default=None, max_length=5)
    currency: str = Field(pattern=CURRENCY_PATTERN)
    total_amount: MetaAmount = Field(description="subtotal + tax + shipping - discount")
    order: MetaOrder


class OrderDetailsAction(Strict):
    name: Literal["review_and_pay"]
    parameters: OrderDetailsParameters


class InteractiveText(Strict):
    text: str = Field(min_length=1, max_length=1024)


class InteractiveFooter(Strict):
    text: str = Field(min_length=1, max_length=60)


class OrderDetailsInteractive(Strict):
    """Meta's interactive `order_details` object (a bill the customer can pay in WhatsApp)."""

    type: Literal["order_details"]
    header: dict[str, Any] | None = Field(default=None, description="Meta's header object (an image, …)")
    body: InteractiveText
    footer: InteractiveFooter | None = None
    action: OrderDetailsAction


class OrderStatusOrder(Strict):
    status: MetaOrderStatus
    description: str | None = Field(default=None, max_length=120)


class OrderStatusParameters(Strict):
    # the bill's reference (at most 35 characters there); longer is simply no order's (404), as in Meta's example
    reference_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,128}$", description="The `reference_id` of the order's bill")
    order: OrderStatusOrder


class OrderStatusAction(Strict):
    name: Literal["review_order"]
    parameters: OrderStatusParameters


class OrderStatusInteractive(Strict):
    """Meta's interactive `order_status` object (the order's new status, shown on its bill)."""

    type: Literal["order_status"]
    body: InteractiveText
    footer: InteractiveFooter | None = None
    action: OrderStatusAction


# The sandbox's simulated cart (Meta's inbound `order` object) ---------------------------------------------------------
class SandboxOrderItem(Strict):
    """A line of the simulated cart (Meta's `product_items[]`)."""

    product_retailer_id: str = Field(min_length=1, max_length=100)
    quantity: int = Field(ge=1, le=100_000)
    item_price: float = Field(ge=0, le=1e12)
    currency: str = Field(pattern=CURRENCY_PATTERN)


class SandboxOrder(Strict):
    """Meta's inbound `order` object: a cart sent from the catalogue."""

    catalog_id: str = Field(min_length=1, max_length=100)
    text: str | None = Field(default=None, max_length=4096, description="The customer's note")
    product_items: list[SandboxOrderItem] = Field(min_length=1, max_length=MAX_ITEMS)
