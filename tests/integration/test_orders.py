"""Orders (CONVENTIONS "Orders"): made from a customer's cart (an inbound `order` message: Meta's webhook or the
sandbox simulator) or from an outbound `interactive` `order_details` message, moved by `order_status` messages
(`POST /v1/orders/{id}/status` sends one for a billed order) and by Meta's payment status webhooks; each change is one
`commerce.order.updated` event written with the order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from switchboard.commerce import orders
from switchboard.events.outbox import stored_events
from switchboard.messaging import messages
from switchboard.store import Store, get_store
from tests.fakes.graph_api import FakeGraphApi
from tests.integration import cloud_queue
from tests.integration.support import Api, run_jobs

CUSTOMER = "14155552671"
CART = [
    {"product_retailer_id": "di9ozbzfi4", "quantity": 2, "item_price": 30, "currency": "USD"},
    {"product_retailer_id": "nqryix03ez", "quantity": 1, "item_price": 25.5, "currency": "USD"},
]
ORDERED = [{**line, "name": None} for line in CART]  # a cart's lines, as an order shows them (no names)
ORDER_FIELDS = {
    "id",
    "order_no",
    "organization_id",
    "channel_id",
    "contact_id",
    "conversation_id",
    "reference_id",
    "catalog_id",
    "items",
    "currency",
    "total_amount",
    "status",
    "payment_status",
    "status_description",
    "status_message_id",
    "created_at",
    "updated_at",
}


# Helpers --------------------------------------------------------------------------------------------------------------
@pytest.fixture
def sandbox(api: Api) -> dict:
    ch = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox"})
    assert ch.status_code == 201, ch.text
    return api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]


@pytest.fixture
def graph():
    with FakeGraphApi(token="tok") as fake:
        yield fake


@pytest.fixture
def cloud(api: Api, graph: FakeGraphApi) -> dict:
    ch = api.post(
        "/v1/channels", json={"name": "cloud", "platform": "whatsapp_cloud", "config": graph.channel_config()}
    )
    assert ch.status_code == 201, ch.text
    connected = api.post(f"/v1/channels/{ch.json()['data']['id']}/connect").json()["data"]
    assert connected["status"] == "connected", connected
    return connected


def _cart(api: Api, channel: dict, phone: str = f"+{CUSTOMER}", items: list | None = None, **kw: Any) -> dict:
    body = {"from_phone": phone, "order": {"catalog_id": "194836987003835", "text": "", "product_items": items or CART}}
    resp = api.post(f"/v1/channels/{channel['id']}/sandbox/inbound", json=body, **kw)
    assert resp.status_code == 202, resp.text
    return resp.json()["data"]


def _bill(reference: str, lines=(("sku-1", "Bread", 1000, 1),), tax: int = 100, shipping=0, discount=0) -> dict:
    """Meta's interactive `order_details` object, its sums right (amounts in hundredths, INR)."""
    items = [
        {"retailer_id": r, "name": n, "amount": {"value": v, "offset": 100}, "quantity": q} for r, n, v, q in lines
    ]
    subtotal = sum(v * q for _, _, v, q in lines)
    order: dict[str, Any] = {
        "status": "pending",
        "items": items,
        "subtotal": {"value": subtotal, "offset": 100},
        "tax": {"value": tax, "offset": 100, "description": "GST"},
    }
    if shipping:
        order["shipping"] = {"value": shipping, "offset": 100}
    if discount:
        order["discount"] = {"value": discount, "offset": 100, "discount_program_name": "launch"}
    return {
        "type": "order_details",
        "body": {"text": "Your bill"},
        "action": {
            "name": "review_and_pay",
            "parameters": {
                "reference_id": reference,
                "type": "physical-goods",
                "payment_type": "upi",
                "payment_configuration": "razorpay-prod",
                "currency": "INR",
                "total_amount": {"value": subtotal + tax + shipping - discount, "offset": 100},
                "order": order,
            },
        },
    }


def _order_status(reference: str, status: str, description: str | None = None) -> dict:
    order = {"status": status, **({"description": description} if description else {})}
    return {
        "type": "order_status",
        "body": {"text": "Update"},
        "action": {"name": "review_order", "parameters": {"reference_id": reference, "order": order}},
    }


def _send(api: Api, channel: dict, interactive: dict, to: str = f"+{CUSTOMER}", **kw: Any):
    body = {"channel_id": channel["id"], "to": to, "type": "interactive", "interactive": interactive}
    return api.post("/v1/messages", json=body, **kw)


def _order(api: Api, order_id: str, **kw: Any) -> dict:
    resp = api.get(f"/v1/orders/{order_id}", **kw)
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def _events(api: Api, order_id: str | None = None, org: str | None = None) -> list[dict]:
    rows = stored_events(get_store(), org or api.org_id)
    return [
        e["payload"]
        for e in rows
        if e["event_type"] == "commerce.order.updated" and (order_id is None or e["payload"]["order_id"] == order_id)
    ]


def _thread(api: Api, conversation_id: str) -> list[dict]:
    return api.get(f"/v1/conversations/{conversation_id}/messages", params={"limit": 100}).json()["data"]


def _callback(api: Api, graph: FakeGraphApi, channel: dict, value: dict):
    body = graph.webhook(value)
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": graph.signature(body)}
    return cloud_queue.post(api, f"/v1/providers/{channel['id']}/callback", body, headers)


def _meta_cart(graph: FakeGraphApi, wamid: str, rows: list[dict] | None = None) -> dict:
    """Meta's inbound `order` message (the document's "Order Message" example, for our number)."""
    rows = rows if rows is not None else CART
    return {
        "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": CUSTOMER}],
        "messages": [
            {
                "from": CUSTOMER,
                "id": wamid,
                "timestamp": "1750096325",
                "type": "order",
                "order": {"catalog_id": "194836987003835", "text": "", "product_items": rows},
            }
        ],
    }


# Carts ----------------------------------------------------------------------------------------------------------------
def test_a_sandbox_cart_makes_one_pending_unpaid_order_with_one_event(api: Api, sandbox: dict):
    accepted = _cart(api, sandbox)
    order = _order(api, accepted["order_id"])
    assert set(order) == ORDER_FIELDS
    assert order["id"].startswith("ord_") and order["reference_id"] == order["id"]
    assert order["order_no"].isdigit()
    assert (order["contact_id"], order["conversation_id"]) == (accepted["contact_id"], accepted["conversation_id"])
    assert order["channel_id"] == sandbox["id"] and order["organization_id"] == api.org_id
    assert order["catalog_id"] == "194836987003835"
    assert order["items"] == ORDERED
    assert (order["currency"], order["total_amount"]) == ("USD", 85.5)
    assert (order["status"], order["payment_status"]) == ("pending", "unpaid")
    assert order["status_message_id"] is None
    [event] = _events(api, order["id"])
    assert event == {
        "order_id": order["id"],
        "order_no": order["order_no"],
        "status": "pending",
        "payment_status": "unpaid",
        "organization_id": api.org_id,
        "contact_id": order["contact_id"],
        "channel_id": sandbox["id"],
        "reference_id": order["id"],
        "changes": ["created"],
    }
    [message] = _thread(api, accepted["conversation_id"])
    assert message["type"] == "order" and message["media"]["product_items"] == CART
    assert api.get("/v1/orders").json()["data"] == [order]


def test_sandbox_inbound_takes_a_text_or_an_order_and_refuses_a_bad_cart(api: Api, sandbox: dict):
    url = f"/v1/channels/{sandbox['id']}/sandbox/inbound"
    text = api.post(url, json={"from_phone": f"+{CUSTOMER}", "text": "hello"})
    assert text.status_code == 202 and text.json()["data"]["order_id"] is None
    both = {"from_phone": f"+{CUSTOMER}", "text": "hi", "order": {"catalog_id": "1", "product_items": CART}}
    api.assert_error(api.post(url, json=both), 400, "validation_failed")
    api.assert_error(api.post(url, json={"from_phone": f"+{CUSTOMER}"}), 400, "validation_failed")
    mixed = [CART[0], {**CART[1], "currency": "EUR"}]
    error = api.assert_error(
        api.post(url, json={"from_phone": f"+{CUSTOMER}", "order": {"catalog_id": "1", "product_items": mixed}}),
        400,
        "validation_failed",
    )
    assert error["details"][0]["field"] == "body.order.product_items"
    for bad in ({**CART[0], "quantity": 0}, {**CART[0], "quantity": 1.5}, {**CART[0], "currency": "usd"}):
        body = {"from_phone": f"+{CUSTOMER}", "order": {"catalog_id": "1", "product_items": [bad]}}
        api.assert_error(api.post(url, json=body), 400, "validation_failed")
    api.assert_error(
        api.post(url, json={"from_phone": f"+{CUSTOMER}", "order": {"catalog_id": "1", "product_items": []}}),
        400,
        "validation_failed",
    )
    assert api.get("/v1/orders").json()["data"] == [] and _events(api) == []


def test_metas_order_webhook_makes_the_order_once_and_a_cart_meta_could_not_send_is_refused(
    api: Api, graph: FakeGraphApi, cloud: dict
):
    wamid = graph.inbound_message(CUSTOMER)
    answer, done = _callback(api, graph, cloud, _meta_cart(graph, wamid))
    assert answer.status_code == 200 and done == {"received": 1, "statuses_applied": 0}
    [order] = api.get("/v1/orders").json()["data"]
    assert order["channel_id"] == cloud["id"] and order["items"] == ORDERED and order["total_amount"] == 85.5
    assert (order["status"], order["payment_status"]) == ("pending", "unpaid")
    # Meta's retry of the same webhook, and the same message in another delivery: still one order, one event
    assert _callback(api, graph, cloud, _meta_cart(graph, wamid))[0].status_code == 200
    again = {**_meta_cart(graph, wamid), "statuses": []}
    assert _callback(api, graph, cloud, again)[1] == {"received": 1, "statuses_applied": 0}
    assert [o["id"] for o in api.get("/v1/orders").json()["data"]] == [order["id"]]
    assert len(_events(api, order["id"])) == 1
    # a cart Meta's document does not allow is 400 before anything is queued
    for rows in ([], [{**CART[0], "quantity": "2"}], [{"product_retailer_id": "x", "quantity": 1, "currency": "USD"}]):
        bad = _meta_cart(graph, graph.inbound_message(CUSTOMER), rows)
        api.assert_error(_callback(api, graph, cloud, bad)[0], 400, "validation_failed")
    assert len(api.get("/v1/orders").json()["data"]) == 1


# Bills and status messages ------------------------------------------------------------------------------------------
def test_a_bill_for_a_cart_refreshes_it_and_the_status_route_tells_the_customer_on_the_wire(
    api: Api, graph: FakeGraphApi, cloud: dict
):
    _callback(api, graph, cloud, _meta_cart(graph, graph.inbound_message(CUSTOMER)))
    [cart] = api.get("/v1/orders").json()["data"]
    bill = _bill(cart["id"], lines=(("di9ozbzfi4", "Mug", 3000, 2), ("nqryix03ez", "Tea", 2550, 1)), shipping=500)
    sent = _send(api, cloud, bill)
    assert sent.status_code == 202, sent.text
    billed = _order(api, cart["id"])
    assert billed["currency"] == "INR" and billed["total_amount"] == 91.5  # 85.50 + 1.00 tax + 5.00 shipping
    assert billed["items"][0] == {
        "product_retailer_id": "di9ozbzfi4",
        "name": "Mug",
        "quantity": 2,
        "item_price": 30,
        "currency": "INR",
    }
    assert (billed["id"], billed["order_no"], billed["status"]) == (cart["id"], cart["order_no"], "pending")
    assert [e["changes"] for e in _events(api, cart["id"])] == [["created"], ["currency", "items", "total_amount"]]
    assert messages.deliver(get_store(), api.org_id, sent.json()["data"]["id"]) == "sent"
    wire = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1].json
    assert wire["type"] == "interactive" and wire["interactive"]["type"] == "order_details"
    assert wire["interactive"]["action"]["parameters"]["reference_id"] == cart["id"]

    moved = api.post(f"/v1/orders/{cart['id']}/status", json={"status": "partially_shipped", "description": "Mugs"})
    assert moved.status_code == 200, moved.text
    order = moved.json()["data"]
    assert (order["status"], order["status_description"]) == ("partially_shipped", "Mugs")
    assert order["status_message_id"]
    message = api.get(f"/v1/messages/{order['status_message_id']}").json()["data"]
    assert message["type"] == "interactive" and message["status"] == "pending"
    assert messages.deliver(get_store(), api.org_id, order["status_message_id"]) == "sent"
    wire = graph.requests_to("POST", f"/v23.0/{graph.phone_number_id}/messages")[-1].json
    assert wire["to"] == CUSTOMER and wire["interactive"]["type"] == "order_status"
    assert wire["interactive"]["action"] == {
        "name": "review_order",
        "parameters": {"reference_id": cart["id"], "order": {"status": "partially-shipped", "description": "Mugs"}},
    }
    assert graph.violations == []  # both messages validate against Meta's document (repair 8)
    assert _events(api, cart["id"])[-1] == {
        "order_id": cart["id"],
        "order_no": cart["order_no"],
        "status": "partially_shipped",
        "payment_status": "unpaid",
        "organization_id": api.org_id,
        "contact_id": cart["contact_id"],
        "channel_id": cloud["id"],
        "reference_id": cart["id"],
        "changes": ["status"],
    }
    # a status that cannot follow is refused before anything is sent or written
    refused = api.post(f"/v1/orders/{cart['id']}/status", json={"status": "processing"})
    error = api.assert_error(refused, 409, "invalid_order_transition")
    assert error["details"][0]["allowed"] == ["canceled", "completed", "shipped"]
    assert len(_thread(api, cart["conversation_id"])) == 3  # the cart, the bill, one status message
    assert len(_events(api, cart["id"])) == 3


def test_an_order_details_message_makes_an_order_by_its_reference_and_a_repeat_refreshes_it(api: Api, sandbox: dict):
    sent = _send(api, sandbox, _bill("INV-2026.001"))
    assert sent.status_code == 202, sent.text
    [order] = api.get("/v1/orders").json()["data"]
    assert order["reference_id"] == "INV-2026.001" and order["total_amount"] == 11
    assert order["conversation_id"] and order["contact_id"]
    assert (order["status"], order["payment_status"]) == ("pending", "unpaid")
    assert _send(api, sandbox, _bill("INV-2026.001")).status_code == 202  # the same bill again: no change
    assert len(_events(api, order["id"])) == 1
    rebill = _bill("INV-2026.001", lines=(("sku-1", "Bread", 1000, 2),), discount=50)
    assert _send(api, sandbox, rebill).status_code == 202
    refreshed = _order(api, order["id"])
    assert refreshed["total_amount"] == 20.5 and refreshed["items"][0]["quantity"] == 2
    assert [e["changes"] for e in _events(api, order["id"])] == [["created"], ["items", "total_amount"]]
    # another reference is another order; references are the business's, case-sensitive
    assert _send(api, sandbox, _bill("inv-2026.001")).status_code == 202
    assert len(api.get("/v1/orders").json()["data"]) == 2
    # an order_status message moves the order it names, and the order's new status is in the same write
    moved = _send(api, sandbox, _order_status("INV-2026.001", "processing", "Packing"))
    assert moved.status_code == 202, moved.text
    order = _order(api, order["id"])
    assert (order["status"], order["status_message_id"]) == ("processing", moved.json()["data"]["id"])
    # once it moved on, a bill cannot refresh it
    api.assert_error(_send(api, sandbox, rebill), 409, "invalid_order_transition")


def test_order_messages_are_checked_against_metas_objects_and_refused_whole(api: Api, sandbox: dict):
    def refused(interactive: dict, status: int, code: str, to: str = f"+{CUSTOMER}") -> dict:
        return api.assert_error(_send(api, sandbox, interactive, to=to), status, code)

    bill = _bill("B-1", shipping=100)
    bad_total = json.loads(json.dumps(bill))
    bad_total["action"]["parameters"]["total_amount"]["value"] += 1
    error = refused(bad_total, 400, "validation_failed")
    assert error["details"][0]["field"] == "body.interactive.action.parameters.total_amount"
    bad_subtotal = json.loads(json.dumps(bill))
    bad_subtotal["action"]["parameters"]["order"]["subtotal"]["value"] = 1
    assert refused(bad_subtotal, 400, "validation_failed")["details"][0]["field"].endswith("order.subtotal")
    no_reference = json.loads(json.dumps(bill))
    del no_reference["action"]["parameters"]["reference_id"]
    fields = [d["field"] for d in refused(no_reference, 400, "validation_failed")["details"]]
    assert fields == ["body.interactive.action.parameters.reference_id"]
    for path, value in (
        (("action", "parameters", "reference_id"), "has space"),
        (("action", "parameters", "reference_id"), "x" * 36),
        (("action", "parameters", "type"), "services"),
        (("action", "parameters", "order", "status"), "processing"),
        (("action", "parameters", "order", "items", 0, "quantity"), 0),
        (("action", "parameters", "order", "items", 0, "amount", "value"), "1000"),
        (("action", "name"), "review_order"),
        (("action", "parameters", "surprise"), 1),
    ):
        broken = json.loads(json.dumps(bill))
        node = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        refused(broken, 400, "validation_failed")
    refused(_order_status("B-1", "shipped_maybe"), 400, "validation_failed")
    refused(_order_status("B-1", "partially_shipped"), 400, "validation_failed")  # Meta's spelling has a dash
    refused(_order_status("B-1", "shipped"), 404, "not_found")  # no order has that reference yet
    assert _send(api, sandbox, bill).status_code == 202
    refused(_order_status("B-1", "shipped"), 409, "conflict", to="+14155550123")  # another contact's order
    refused(_bill("B-1"), 409, "conflict", to="+14155550123")
    stored = [m for c in api.get("/v1/conversations").json()["data"] for m in _thread(api, c["id"])]
    assert len(stored) == 1  # only the accepted bill was stored: every refusal wrote no message
    assert len(_events(api)) == 1


def test_status_moves_follow_metas_order_flow_and_an_unbilled_cart_moves_without_a_message(api: Api, sandbox: dict):
    first = _cart(api, sandbox)
    order_id = first["order_id"]
    for target in ("processing", "partially_shipped", "shipped", "completed"):
        resp = api.post(f"/v1/orders/{order_id}/status", json={"status": target})
        assert resp.status_code == 200, resp.text
        assert resp.json()["data"]["status"] == target
        assert resp.json()["data"]["status_message_id"] is None  # never billed: Meta would refuse order_status
    for target in ("pending", "processing", "partially_shipped", "shipped", "completed", "canceled"):
        api.assert_error(
            api.post(f"/v1/orders/{order_id}/status", json={"status": target}), 409, "invalid_order_transition"
        )
    assert [e["status"] for e in _events(api, order_id)] == [
        "pending",
        "processing",
        "partially_shipped",
        "shipped",
        "completed",
    ]
    assert len(_thread(api, first["conversation_id"])) == 1  # the cart only: no status message was sent
    other = _cart(api, sandbox)["order_id"]
    canceled = api.post(f"/v1/orders/{other}/status", json={"status": "canceled", "description": "Out of stock"})
    assert canceled.json()["data"]["status"] == "canceled"
    api.assert_error(
        api.post(f"/v1/orders/{other}/status", json={"status": "shipped"}), 409, "invalid_order_transition"
    )
    api.assert_error(api.post(f"/v1/orders/{other}/status", json={"status": "dispatched"}), 400, "validation_failed")
    api.assert_error(
        api.post(f"/v1/orders/{other}/status", json={"status": "shipped", "description": "x" * 121}),
        400,
        "validation_failed",
    )


def test_a_billed_orders_status_change_and_its_message_are_one_write(api: Api, sandbox: dict):
    cart = _cart(api, sandbox)
    assert _send(api, sandbox, _bill(cart["order_id"])).status_code == 202
    api.post(f"/v1/channels/{sandbox['id']}/disconnect")
    refused = api.post(f"/v1/orders/{cart['order_id']}/status", json={"status": "shipped"})
    api.assert_error(refused, 409, "conflict")  # the message cannot be sent: the order does not move either
    assert _order(api, cart["order_id"])["status"] == "pending"
    assert [e["changes"] for e in _events(api, cart["order_id"])] == [
        ["created"],
        ["currency", "items", "total_amount"],
    ]
    api.post(f"/v1/channels/{sandbox['id']}/connect")
    moved = api.post(f"/v1/orders/{cart['order_id']}/status", json={"status": "shipped"}).json()["data"]
    thread = _thread(api, cart["conversation_id"])
    assert thread[0]["id"] == moved["status_message_id"]  # newest first
    assert thread[0]["media"]["interactive"]["action"]["parameters"]["order"]["status"] == "shipped"
    assert thread[0]["text"] == f"Order {moved['order_no']}: shipped."


# Payments -------------------------------------------------------------------------------------------------------------
def test_payment_webhooks_move_the_payment_forward_only_and_emit_once_per_change(
    api: Api, graph: FakeGraphApi, cloud: dict
):
    assert _send(api, cloud, _bill("PAY-1")).status_code == 202
    [order] = api.get("/v1/orders").json()["data"]

    def pay(status: str, **kw: Any) -> dict[str, int]:
        return _callback(api, graph, cloud, {"statuses": [graph.payment_status("PAY-1", status, to=CUSTOMER, **kw)]})[1]

    assert pay("pending") == {"received": 0, "statuses_applied": 1}
    assert _order(api, order["id"])["payment_status"] == "pending"
    api.assert_error(
        api.post(f"/v1/orders/{order['id']}/status", json={"status": "canceled"}), 409, "order_has_payment"
    )
    assert pay("captured", amount=(1100, 100))["statuses_applied"] == 1
    assert pay("pending")["statuses_applied"] == 0  # late: a captured payment never goes back
    assert pay("failed")["statuses_applied"] == 0
    api.assert_error(_send(api, cloud, _bill("PAY-1")), 409, "order_has_payment")  # paid: not billed again
    assert _order(api, order["id"])["payment_status"] == "captured"
    unknown = _callback(api, graph, cloud, {"statuses": [graph.payment_status("NOPE", "captured", to=CUSTOMER)]})
    assert unknown[1]["statuses_applied"] == 0
    partial = [{"id": "rfnd_1", "amount": {"value": 500, "offset": 100}, "status": "completed"}]
    assert pay("captured", amount=(1100, 100), refunds=partial)["statuses_applied"] == 0  # part of it: still captured
    whole = [*partial, {"id": "rfnd_2", "amount": {"value": 600, "offset": 100}, "status": "completed"}]
    assert pay("captured", amount=(1100, 100), refunds=whole)["statuses_applied"] == 1
    final = _order(api, order["id"])
    assert final["payment_status"] == "refunded" and final["status"] == "pending"
    assert [(e["payment_status"], e["changes"]) for e in _events(api, order["id"])] == [
        ("unpaid", ["created"]),
        ("pending", ["payment_status"]),
        ("captured", ["payment_status"]),
        ("refunded", ["payment_status"]),
    ]
    canceled = api.post(f"/v1/orders/{order['id']}/status", json={"status": "canceled"})
    assert canceled.status_code == 200 and canceled.json()["data"]["status"] == "canceled"


def test_a_failed_payment_may_be_tried_again(api: Api, graph: FakeGraphApi, cloud: dict):
    assert _send(api, cloud, _bill("PAY-2")).status_code == 202
    [order] = api.get("/v1/orders").json()["data"]
    for status in ("failed", "pending", "captured"):
        value = {"statuses": [graph.payment_status("PAY-2", status, to=CUSTOMER)]}
        assert _callback(api, graph, cloud, value)[1]["statuses_applied"] == 1
    assert _order(api, order["id"])["payment_status"] == "captured"


# Access, tenancy and lists --------------------------------------------------------------------------------------------
def _key(api: Api, role: str) -> dict[str, str]:
    resp = api.post("/v1/api-keys", json={"name": f"{role} key", "role": role})
    assert resp.status_code == 201, resp.text
    return {"X-Api-Key": resp.json()["data"]["key"]}


def test_viewers_read_members_move_and_other_organizations_see_nothing(api: Api, sandbox: dict):
    order_id = _cart(api, sandbox)["order_id"]
    viewer, member = _key(api, "viewer"), _key(api, "member")
    assert _order(api, order_id, headers=viewer)["id"] == order_id
    assert api.get("/v1/orders", headers=viewer).status_code == 200
    api.assert_error(
        api.post(f"/v1/orders/{order_id}/status", json={"status": "processing"}, headers=viewer), 403, "forbidden"
    )
    assert _order(api, order_id)["status"] == "pending"
    moved = api.post(f"/v1/orders/{order_id}/status", json={"status": "processing"}, headers=member)
    assert moved.status_code == 200, moved.text
    other_org, session = api.new_org("rival@example.com")
    api.assert_error(api.get(f"/v1/orders/{order_id}", headers=session), 404, "not_found")
    api.assert_error(
        api.post(f"/v1/orders/{order_id}/status", json={"status": "shipped"}, headers=session), 404, "not_found"
    )
    assert api.get("/v1/orders", headers=session).json()["data"] == []
    contact_id = _order(api, order_id)["contact_id"]
    assert api.get("/v1/orders", params={"contact_id": contact_id}, headers=session).json()["data"] == []
    assert _order(api, order_id)["status"] == "processing"
    assert _events(api, org=other_org) == []
    api.assert_error(api.get("/v1/orders/ord_nonexistent"), 404, "not_found")


def test_lists_read_one_list_per_filter_and_page_with_cursors(api: Api, sandbox: dict):
    ada = [_cart(api, sandbox, "+14155552671")["order_id"] for _ in range(3)]
    bob = [_cart(api, sandbox, "+14155552672")["order_id"] for _ in range(4)]
    for order_id in (ada[0], bob[1], bob[3]):
        assert api.post(f"/v1/orders/{order_id}/status", json={"status": "shipped"}).status_code == 200
    newest_first = list(reversed(ada + bob))
    assert [i for page in api.pages("/v1/orders", 2) for i in page] == newest_first
    assert [i for page in api.pages("/v1/orders", 2, status="shipped") for i in page] == [bob[3], bob[1], ada[0]]
    assert [i for page in api.pages("/v1/orders", 2, status="pending") for i in page] == [
        bob[2],
        bob[0],
        ada[2],
        ada[1],
    ]
    bob_contact = _order(api, bob[0])["contact_id"]
    assert [i for page in api.pages("/v1/orders", 3, contact_id=bob_contact) for i in page] == list(reversed(bob))
    assert [i for page in api.pages("/v1/orders", 1, contact_id=bob_contact, status="shipped") for i in page] == [
        bob[3],
        bob[1],
    ]
    first = api.get("/v1/orders", params={"limit": 2}).json()
    api.assert_error(
        api.get("/v1/orders", params={"limit": 2, "status": "shipped", "cursor": first["meta"]["cursor"]}),
        400,
        "validation_failed",
    )
    api.assert_error(api.get("/v1/orders", params={"status": "lost"}), 400, "validation_failed")
    numbers = [_order(api, i)["order_no"] for i in ada + bob]
    assert len(set(numbers)) == len(numbers)
    for order_id, number in zip(ada + bob, numbers, strict=True):  # 8n + k, k picked by the id
        assert int(number) % orders.SEQ_SHARDS == orders.shards.shard_of(order_id, orders.SEQ_SHARDS)


def test_a_merged_contacts_orders_follow_it_into_the_contact_it_joined(api: Api, sandbox: dict):
    mine = _cart(api, sandbox, "+14155552671")
    theirs = [_cart(api, sandbox, "+14155552672")["order_id"] for _ in range(2)]
    source = _order(api, theirs[0])["contact_id"]
    merged = api.post(f"/v1/contacts/{mine['contact_id']}/merge", json={"from_contact_id": source})
    assert merged.status_code == 200, merged.text
    run_jobs(api)  # whatever the request's own chunks left
    listed = api.get("/v1/orders", params={"contact_id": mine["contact_id"]}).json()["data"]
    assert [o["id"] for o in listed] == [*reversed(theirs), mine["order_id"]]
    assert all(o["contact_id"] == mine["contact_id"] for o in listed)
    assert api.get("/v1/orders", params={"contact_id": source}).json()["data"] == []
    # a merged order moves like any other: its version went up with the merge, its event names the new contact
    moved = api.post(f"/v1/orders/{theirs[0]}/status", json={"status": "processing"})
    assert moved.status_code == 200, moved.text
    assert _events(api, theirs[0])[-1]["contact_id"] == mine["contact_id"]


def test_a_filtered_page_reads_its_own_list_only_whatever_the_other_orders(
    api: Api, sandbox: dict, monkeypatch: pytest.MonkeyPatch
):
    ids = [_cart(api, sandbox, f"+1415555{2670 + n % 3}")["order_id"] for n in range(12)]
    assert api.post(f"/v1/orders/{ids[4]}/status", json={"status": "shipped"}).status_code == 200
    reads: list[tuple[str, str | None, str | None, int]] = []
    real = Store.query

    def spy(self: Store, pk: str, **kw: Any) -> Any:
        page = real(self, pk, **kw)
        reads.append((pk, kw.get("index"), kw.get("filter_expression"), len(page.items)))
        return page

    monkeypatch.setattr(Store, "query", spy)
    page = api.get("/v1/orders", params={"status": "shipped", "limit": 5}).json()
    assert [o["id"] for o in page["data"]] == [ids[4]] and page["meta"]["has_more"] is False
    orders_read = [r for r in reads if "#ORDERS" in r[0]]
    # one Query per shard of the shipped list, no filter expression, one item read in all: the 11 pending orders
    # are never read
    assert len(orders_read) == orders.shards.count()
    assert all(r[1] == "GSI2" and r[2] is None and "#ORDERS#S#shipped#" in r[0] for r in orders_read)
    assert sum(r[3] for r in orders_read) == 1
    reads.clear()
    contact_id = _order(api, ids[4])["contact_id"]
    mine = api.get("/v1/orders", params={"contact_id": contact_id, "limit": 10}).json()["data"]
    assert [o["id"] for o in mine] == [ids[n] for n in (10, 7, 4, 1)]
    assert [(r[1], r[3]) for r in reads if "CONTACTORDERS" in r[0]] == [("GSI3", 4)]  # that contact's, nobody else's
