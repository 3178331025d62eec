"""The send path (`POST /v1/messages` to a known contact): DynamoDB and SQS calls per request against the minimum,
and handler time as a ratio to a bare Powertools route making the same calls on the same fake client.

SQS: none on this path by design — the message leaves through the outbox (stream → EventBridge → queue), so the
request itself makes no SQS call. Run: `python -m bench.send [--runs N]`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel

from bench._harness import Ctx, FakeDynamoDB, api_event, bench_env, interleaved

ORG = "org_bench"
CH, CT, CV = "ch_1", "ct_1", "cv_1"
# rate limit, channel, send window, identity sentinel, contact, (conversation key + suppression + consent),
# conversation, the write: the reads the rules need and one transaction
MINIMUM = {"UpdateItem": 2, "GetItem": 3, "BatchGetItem": 2, "TransactWriteItems": 1}
BODY = {"channel_id": CH, "to": "+1 415 555 2671", "type": "text", "text": {"body": "hello"}}


def _items() -> list[dict[str, Any]]:
    pk = f"ORG#{ORG}"
    now = "2026-11-01T00:00:00.000Z"
    return [
        {
            "PK": pk,
            "SK": f"CHANNEL#{CH}",
            "entity": "Channel",
            "id": CH,
            "organization_id": ORG,
            "name": "sbx",
            "platform": "sandbox",
            "mode": "sandbox",
            "status": "connected",
            "is_active": True,
            "phone_number": None,
            "metadata": {},
            "config": {},
            "created_at": now,
            "updated_at": now,
            "version": 2,
        },
        {"PK": pk, "SK": "IDENT#phone#14155552671", "entity": "Identity", "contact_id": CT},
        {
            "PK": pk,
            "SK": f"CONTACT#{CT}",
            "entity": "Contact",
            "id": CT,
            "organization_id": ORG,
            "phone": "14155552671",
            "identities": [{"type": "phone", "value": "14155552671", "created_at": now}],
            "attributes": {},
            "tags": [],
            "blocked": False,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        },
        {"PK": pk, "SK": f"CONVKEY#{CH}#{CT}", "entity": "ConversationKey", "conversation_id": CV},
        {
            "PK": pk,
            "SK": f"CONV#{CV}",
            "entity": "Conversation",
            "id": CV,
            "organization_id": ORG,
            "channel_id": CH,
            "contact_id": CT,
            "status": "open",
            "unread_count": 0,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        },
    ]


class Text(BaseModel):
    body: str


class Send(BaseModel):
    channel_id: str
    to: str
    type: str
    text: Text


def build_floor(fake: FakeDynamoDB) -> APIGatewayRestResolver:
    from switchboard.store.table import deserialize, serialize

    floor = APIGatewayRestResolver(enable_validation=True)

    def key(sk: str) -> dict[str, Any]:
        return serialize({"PK": f"ORG#{ORG}", "SK": sk})

    @floor.post("/v1/messages")
    def send(req: Annotated[Send, Body()]) -> tuple[dict, int]:
        fake.update_item(TableName="bench", Key=key("RATE#api"), UpdateExpression="ADD hits :one")
        channel = deserialize(fake.get_item(TableName="bench", Key=key(f"CHANNEL#{req.channel_id}"))["Item"])
        fake.update_item(TableName="bench", Key=key("RATE#send"), UpdateExpression="ADD hits :one")
        sentinel = fake.batch_get_item(RequestItems={"bench": {"Keys": [key("IDENT#phone#14155552671")]}})
        contact_id = deserialize(sentinel["Responses"]["bench"][0])["contact_id"]
        fake.get_item(TableName="bench", Key=key(f"CONTACT#{contact_id}"))
        state = fake.batch_get_item(
            RequestItems={
                "bench": {"Keys": [key(f"CONVKEY#{CH}#{contact_id}"), key(f"CONTACT#{contact_id}#SUPP#whatsapp")]}
            }
        )
        conv_id = deserialize(state["Responses"]["bench"][0])["conversation_id"]
        fake.get_item(TableName="bench", Key=key(f"CONV#{conv_id}"))
        fake.transact_write_items(TransactItems=[{"Put": {"TableName": "bench", "Item": key("MSG#x")}}])
        return {"data": {"id": "x", "channel_id": channel["id"], "status": "pending"}}, 202

    return floor


def run(runs: int) -> dict[str, Any]:
    fake = FakeDynamoDB(_items())
    with bench_env(fake):
        from functions.messaging.app import handler

        floor = build_floor(fake)
        event = api_event("POST", "/v1/messages", BODY, ORG, role="member")
        ctx = Ctx()

        def route() -> Any:
            resp = handler(event, ctx)
            assert resp["statusCode"] == 202, resp
            return resp

        def bare() -> Any:
            resp = floor.resolve(event, ctx)
            assert resp["statusCode"] == 202, resp
            return resp

        fake.calls.clear()
        route()
        calls = dict(fake.calls)
        medians = interleaved({"route": route, "floor": bare}, rounds=runs, per_round=30)
    return {
        "calls": calls,
        "minimum": MINIMUM,
        "route_us": medians["route"],
        "floor_us": medians["floor"],
        "ratio": medians["route"] / medians["floor"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.send")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--check", action="store_true")
    args, _ = parser.parse_known_args(argv)
    r = run(args.runs)
    print("POST /v1/messages (known contact, existing conversation), botocore replaced by an in-memory fake")
    print(f"  DynamoDB calls per request: {r['calls']}")
    print(f"  minimum for the same rules:  {r['minimum']}   SQS calls: 0 (the outbox queues it)")
    print(f"  handler {r['route_us']:.0f} us vs floor {r['floor_us']:.0f} us  -> {r['ratio']:.2f}x (target <= 1.3x)")
    over = r["ratio"] > 1.3 or sum(r["calls"].values()) > sum(MINIMUM.values())
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
