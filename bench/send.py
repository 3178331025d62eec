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

from bench._harness import (
    CREDENTIAL,
    Ctx,
    FakeDynamoDB,
    across_processes,
    api_event,
    bench_env,
    paired,
    rate_limit_request,
    shape,
    spread,
    standard_handler,
)

ORG = "org_bench"
CH, CT, CV = "ch_1", "ct_1", "cv_1"
# rate limit, channel, send window, identity sentinel, contact, (conversation key + suppression + consent),
# conversation, the write: the reads the rules need and one transaction
MINIMUM = {"UpdateItem": 2, "GetItem": 3, "BatchGetItem": 2, "TransactWriteItems": 1}
BODY = {"channel_id": CH, "to": "+1 415 555 2671", "type": "text", "text": {"body": "hello"}}


def shard_of(item_id: str, shards: int = 16) -> int:
    """switchboard.store.shards.shard_of at the default count, as a floor spells it by hand."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(item_id.encode(), digest_size=8).digest(), "big") % shards


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
            "PK": f"{pk}#{shard_of(CV)}",  # its write shard (switchboard.store.shards)
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
    """The same DynamoDB requests as the route, written out by hand: the two rate-limit updates, the reads the rules
    need, and the one transaction with the same five items (message, conversation, its `conversation.updated` event,
    status history, the `message.queued` event), the same conditions and the same kinds of ids and timestamps; the
    same response body. No models, no authentication, no middleware (`same_calls` checks the requests' shape against
    the route's)."""
    import hashlib
    from datetime import UTC, datetime

    from ulid import ULID
    from uuid6 import uuid7

    from switchboard.store.table import deserialize, serialize

    floor = APIGatewayRestResolver(enable_validation=True)
    pk = f"ORG#{ORG}"
    # the send window is spread over 16 counters (`ratelimit.hit_spread`): the floor hits one of them
    rate_pks = [f"RATE#{hashlib.sha256(b.encode()).hexdigest()[:32]}" for b in (f"api:{ORG}", f"send:{ORG}#3")]

    def key(sk: str) -> dict[str, Any]:
        return {"PK": {"S": pk}, "SK": {"S": sk}}

    @floor.post("/v1/messages")
    def send(req: Annotated[Send, Body()]) -> tuple[dict, int]:
        at = datetime.now(UTC)
        epoch = int(at.timestamp())
        now = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        rate_limit_request(fake, rate_pks[0], epoch, credential=CREDENTIAL)
        channel = deserialize(
            fake.get_item(TableName="bench", Key=key(f"CHANNEL#{req.channel_id}"), ConsistentRead=False)["Item"]
        )
        rate_limit_request(fake, rate_pks[1], epoch)
        phone = "".join(c for c in req.to if c.isdigit())
        found = fake.batch_get_item(
            RequestItems={"bench": {"Keys": [key(f"IDENT#phone#{phone}")], "ConsistentRead": False}}
        )
        contact_id = found["Responses"]["bench"][0]["contact_id"]["S"]
        contact = deserialize(
            fake.get_item(TableName="bench", Key=key(f"CONTACT#{contact_id}"), ConsistentRead=True)["Item"]
        )
        state_keys = [
            key(f"CONVKEY#{channel['id']}#{contact_id}"),
            key(f"CONTACT#{contact_id}#SUPP#whatsapp"),
            key(f"CONTACT#{contact_id}#CONSENT#whatsapp"),
        ]
        state = fake.batch_get_item(RequestItems={"bench": {"Keys": state_keys, "ConsistentRead": True}})
        conv_id = state["Responses"]["bench"][0]["conversation_id"]["S"]
        conv_key = {"PK": {"S": f"{pk}#{shard_of(conv_id)}"}, "SK": {"S": f"CONV#{conv_id}"}}
        conv = deserialize(fake.get_item(TableName="bench", Key=conv_key, ConsistentRead=True)["Item"])
        message_id = str(uuid7())
        message = {
            "PK": f"{pk}#{shard_of(message_id)}",
            "SK": f"MSG#{message_id}",
            "entity": "Message",
            "id": message_id,
            "organization_id": ORG,
            "channel_id": channel["id"],
            "conversation_id": conv_id,
            "contact_id": contact["id"],
            "direction": "outbound",
            "to_phone": phone,
            "type": req.type,
            "text": req.text.body,
            "status": "pending",
            "created_at": now,
            "updated_at": now,
            "sent_by": "key_b",
            "GSI2PK": f"{pk}#CONV#{conv_id}",
            "GSI2SK": message_id,
        }
        version = conv["version"]
        conversation = {
            **conv,
            "version": version + 1,
            "updated_at": now,
            "last_message_at": now,
            "last_message_preview": req.text.body,
            "GSI1PK": f"{pk}#CONVS#{shard_of(conv_id)}",
            "GSI1SK": f"{now}#{conv_id}",
            "GSI2PK": f"{pk}#CONVS#A#{(conv.get('assignee') or {}).get('id') or 'none'}#{shard_of(conv_id)}",
            "GSI2SK": f"{now}#{conv_id}",
        }
        history = {
            "PK": message["PK"],
            "SK": f"MSG#{message_id}#STATUS#{ULID()}",
            "entity": "MessageStatus",
            "status": "pending",
            "applied": True,
            "at": now,
        }
        updated_ulid = str(ULID())
        updated = {
            "PK": f"{pk}#{shard_of(updated_ulid)}",
            "SK": f"EVENT#{updated_ulid}",
            "entity": "Event",
            "event_id": f"evt_{updated_ulid.lower()}",
            "event_type": "conversation.updated",
            "organization_id": ORG,
            "occurred_at": now,
            "payload": {
                "conversation_id": conv_id,
                "status": conv["status"],
                "organization_id": ORG,
                "changes": ["preview"],
            },
            "ttl": epoch + 86400,
        }
        event_ulid = str(ULID())
        event = {
            "PK": f"{pk}#{shard_of(event_ulid)}",
            "SK": f"EVENT#{event_ulid}",
            "entity": "Event",
            "event_id": f"evt_{event_ulid.lower()}",
            "event_type": "message.queued",
            "organization_id": ORG,
            "occurred_at": now,
            "payload": {"message_id": message_id, "organization_id": ORG, "channel_id": channel["id"]},
            "ttl": epoch + 86400,
        }
        new = "attribute_not_exists(PK)"
        fake.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "bench", "Item": serialize(message), "ConditionExpression": new}},
                {
                    "Put": {
                        "TableName": "bench",
                        "Item": serialize(conversation),
                        "ConditionExpression": "#v = :v",
                        "ExpressionAttributeNames": {"#v": "version"},
                        "ExpressionAttributeValues": {":v": {"N": str(version)}},
                    }
                },
                {"Put": {"TableName": "bench", "Item": serialize(updated), "ConditionExpression": new}},
                {"Put": {"TableName": "bench", "Item": serialize(history)}},
                {"Put": {"TableName": "bench", "Item": serialize(event), "ConditionExpression": new}},
            ]
        )
        view = {
            "id": message_id,
            "channel_id": channel["id"],
            "to_phone": phone,
            "type": req.type,
            "status": "pending",
            "provider_message_id": None,
            "created_at": now,
            "updated_at": now,
            "last_error": None,
        }
        return {"data": view}, 202

    return floor


def run(runs: int) -> dict[str, Any]:
    fake = FakeDynamoDB(_items())
    with bench_env(fake):
        from functions.messaging.app import handler

        floor = standard_handler(build_floor(fake))
        event = api_event("POST", "/v1/messages", BODY, ORG, role="member")
        ctx = Ctx()

        def route() -> Any:
            resp = handler(event, ctx)
            assert resp["statusCode"] == 202, resp
            return resp

        def bare() -> Any:
            resp = floor(event, ctx)
            assert resp["statusCode"] == 202, resp
            return resp

        fake.calls.clear()
        fake.log = []
        route()
        route_requests = fake.log
        calls = dict(fake.calls)
        fake.log = []
        bare()
        floor_requests, fake.log = fake.log, None
        same_calls = shape(route_requests) == shape(floor_requests)
        route_us, floor_us, ratio = paired(route, bare, rounds=runs, per_round=30)
    return {
        "calls": calls,
        "minimum": MINIMUM,
        "same_calls": same_calls,
        "route_us": route_us,
        "floor_us": floor_us,
        "ratio": ratio,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.send")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--processes", type=int, default=5, help="fresh interpreters to take the median of")
    args, _ = parser.parse_known_args(argv)
    r = run(args.runs) if args.processes <= 1 else across_processes("bench.send", args.runs, args.processes)
    print("POST /v1/messages (known contact, existing conversation), botocore replaced by an in-memory fake")
    print(f"  DynamoDB calls per request: {r['calls']}")
    print(f"  minimum for the same rules:  {r['minimum']}   SQS calls: 0 (the outbox queues it)")
    print(f"  floor makes the same requests (operations, keys, items' attributes, expressions): {r['same_calls']}")
    print(
        f"  handler {r['route_us']:.0f} us vs floor {r['floor_us']:.0f} us  -> {r['ratio']:.2f}x (target <= 1.3x)"
        + spread(r)
    )
    over = r["ratio"] > 1.3 or sum(r["calls"].values()) > sum(MINIMUM.values()) or not r["same_calls"]
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
