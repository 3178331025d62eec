"""The order rules on their own: which status may follow which (Meta's order flow), when a cancellation is refused,
and that a payment only moves forward. Through the API these are exercised in tests/integration/test_orders.py."""

from __future__ import annotations

import itertools

import pytest

from switchboard.commerce import orders
from switchboard.errors import Conflict

STATUSES = ("pending", "processing", "partially_shipped", "shipped", "completed", "canceled")
PAYMENTS = ("unpaid", "pending", "captured", "failed", "refunded")
# Meta's flow: pending → processing / partially shipped / shipped → completed or canceled, never back.
ALLOWED = {
    ("pending", "processing"),
    ("pending", "partially_shipped"),
    ("pending", "shipped"),
    ("pending", "completed"),
    ("pending", "canceled"),
    ("processing", "partially_shipped"),
    ("processing", "shipped"),
    ("processing", "completed"),
    ("processing", "canceled"),
    ("partially_shipped", "shipped"),
    ("partially_shipped", "completed"),
    ("partially_shipped", "canceled"),
    ("shipped", "completed"),
    ("shipped", "canceled"),
}


def _order(status: str, payment: str = "unpaid") -> dict[str, str]:
    return {"id": "ord_x", "status": status, "payment_status": payment}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(STATUSES, STATUSES)))
def test_every_status_move_is_allowed_or_refused_as_metas_flow_says(current: str, target: str):
    if (current, target) in ALLOWED:
        orders.check_status(_order(current), target)
        return
    with pytest.raises(Conflict) as refused:
        orders.check_status(_order(current), target)
    assert refused.value.code == "invalid_order_transition"
    assert refused.value.details[0]["allowed"] == sorted(t for c, t in ALLOWED if c == current)


@pytest.mark.parametrize("payment", PAYMENTS)
def test_a_cancellation_is_refused_while_a_payment_is_pending_or_captured(payment: str):
    if payment in ("pending", "captured"):
        with pytest.raises(Conflict) as refused:
            orders.check_status(_order("processing", payment), "canceled")
        assert refused.value.code == "order_has_payment"
    else:
        orders.check_status(_order("processing", payment), "canceled")
    orders.check_status(_order("processing", payment), "shipped")  # only cancelling depends on the payment


def _reachable(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in orders.NEXT_PAYMENT[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_a_payment_moves_forward_only():
    """Nothing returns to unpaid, no status repeats itself, the only way back is a failed attempt tried again
    (failed → pending), and a captured payment leads only to its refund, which is final."""
    for current, nexts in orders.NEXT_PAYMENT.items():
        assert "unpaid" not in nexts and current not in nexts
    assert _reachable("captured") == {"refunded"} and _reachable("refunded") == set()
    assert _reachable("pending") == {"captured", "failed", "refunded", "pending"}  # through a failed attempt
    assert _reachable("unpaid") == set(PAYMENTS) - {"unpaid"}


def test_the_status_message_speaks_metas_spelling():
    order = {"order_no": "1043", "reference_id": "ord_x"}
    message = orders.status_interactive(order, "partially_shipped", None)
    assert message["action"]["parameters"] == {"reference_id": "ord_x", "order": {"status": "partially-shipped"}}
    assert message["body"]["text"] == "Order 1043: partially shipped."
    parsed = orders.parse_interactive(message)
    assert parsed is not None and parsed.status == "partially_shipped" and parsed.interactive == message
