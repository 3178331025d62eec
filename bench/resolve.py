"""Contact resolution: DynamoDB calls per request and handler time as a ratio to its floor.

Floor: a bare Powertools route (validation on) that parses the same body and makes the same DynamoDB calls the
route needs at minimum — the rate-limit UpdateItem, one BatchGetItem for every identifier, one GetItem for the
owner — on the same fake client, and returns the item. Target: ≤ 1.3x the floor, ≤ 2 calls for the resolution.
Run: `python -m bench.resolve [--runs N]`.
"""

from __future__ import annotations

import argparse
import json
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

TARGET_RATIO = 1.3
TARGET_CALLS = 2
ORG = "org_bench"


def _items() -> list[dict[str, Any]]:
    contact = {
        "PK": f"ORG#{ORG}",
        "SK": "CONTACT#ct_1",
        "entity": "Contact",
        "id": "ct_1",
        "organization_id": ORG,
        "name": "Ada Lovelace",
        "first_name": "Ada",
        "last_name": "Lovelace",
        "phone": "14155552671",
        "email": "ada@example.com",
        "attributes": {"tier": "gold"},
        "tags": ["vip"],
        "blocked": False,
        "identities": [
            {"type": "phone", "value": "14155552671", "created_at": "2026-11-01T00:00:00.000Z"},
            {"type": "email", "value": "ada@example.com", "created_at": "2026-11-01T00:00:00.000Z"},
        ],
        "version": 3,
        "created_at": "2026-11-01T00:00:00.000Z",
        "updated_at": "2026-11-02T00:00:00.000Z",
    }
    sentinels = [
        {"PK": f"ORG#{ORG}", "SK": sk, "entity": "Identity", "contact_id": "ct_1"}
        for sk in ("IDENT#phone#14155552671", "IDENT#email#ada@example.com")
    ]
    return [contact, *sentinels]


BODY = {"identifiers": [{"type": "phone", "value": "+1 415 555 2671"}, {"type": "email", "value": "ada@example.com"}]}


class Ident(BaseModel):
    type: str
    value: str


class Req(BaseModel):
    identifiers: list[Ident]


CONTACT_FIELDS = [
    "id",
    "organization_id",
    "name",
    "first_name",
    "last_name",
    "email",
    "phone",
    "avatar_url",
    "company",
    "lifecycle_stage",
    "attributes",
    "tags",
    "identities",
    "blocked",
    "version",
    "created_at",
    "updated_at",
]
IDENTITY_FIELDS = ("type", "value", "source", "channel_id", "created_at")


def build_floor(fake: FakeDynamoDB) -> Any:
    """The same DynamoDB requests as the route, written out by hand (the rate-limit update, one BatchGetItem of the
    identifiers' sentinels, one GetItem of their owner) and the same response body; no models, no authentication,
    no middleware (`shape` checks the requests against the route's)."""
    import hashlib
    import time

    from switchboard.store.table import deserialize

    floor = APIGatewayRestResolver(enable_validation=True)
    pk = f"ORG#{ORG}"
    rate_pk = f"RATE#{hashlib.sha256(f'api:{ORG}'.encode()).hexdigest()[:32]}"

    def key(sk: str) -> dict[str, Any]:
        return {"PK": {"S": pk}, "SK": {"S": sk}}

    @floor.post("/v1/contacts/resolve")
    def resolve(req: Annotated[Req, Body()]) -> dict:
        rate_limit_request(fake, rate_pk, int(time.time()), credential=CREDENTIAL)
        sentinels = []
        for ident in req.identifiers:
            value = "".join(c for c in ident.value if c.isdigit()) if ident.type == "phone" else ident.value.lower()
            sentinels.append(key(f"IDENT#{ident.type}#{value}"))
        found = fake.batch_get_item(RequestItems={"bench": {"Keys": sentinels, "ConsistentRead": False}})
        owner = found["Responses"]["bench"][0]["contact_id"]["S"]
        item = deserialize(fake.get_item(TableName="bench", Key=key(f"CONTACT#{owner}"), ConsistentRead=False)["Item"])
        contact = {name: item.get(name) for name in CONTACT_FIELDS}
        contact["identities"] = [{name: i.get(name) for name in IDENTITY_FIELDS} for i in item["identities"]]
        return {"data": contact}

    return floor


def run(runs: int) -> dict[str, Any]:
    fake = FakeDynamoDB(_items())
    with bench_env(fake):
        return _measure(fake, runs)


def _measure(fake: FakeDynamoDB, runs: int) -> dict[str, Any]:
    from functions.contacts.app import handler

    floor = standard_handler(build_floor(fake))
    event = api_event("POST", "/v1/contacts/resolve", BODY, ORG)
    ctx = Ctx()

    def route() -> Any:
        resp = handler(event, ctx)
        assert resp["statusCode"] == 200, resp
        return resp

    def bare() -> Any:
        resp = floor(event, ctx)
        assert resp["statusCode"] == 200, resp
        return resp

    fake.log = []
    route_body = json.loads(route()["body"])
    route_requests, fake.log = fake.log, []
    floor_body = json.loads(bare()["body"])
    floor_requests, fake.log = fake.log, None
    assert route_body == floor_body and route_body["data"]["id"] == "ct_1", (route_body, floor_body)
    same_calls = shape(route_requests) == shape(floor_requests)
    fake.calls.clear()
    route()
    calls = dict(fake.calls)
    route_us, floor_us, ratio = paired(route, bare, rounds=runs, per_round=50)
    resolution_calls = calls.get("BatchGetItem", 0) + calls.get("GetItem", 0)
    return {
        "calls": calls,
        "resolution_calls": resolution_calls,
        "same_calls": same_calls,
        "route_us": route_us,
        "floor_us": floor_us,
        "ratio": ratio,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.resolve")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--processes", type=int, default=5, help="fresh interpreters to take the median of")
    args, _ = parser.parse_known_args(argv)
    r = run(args.runs) if args.processes <= 1 else across_processes("bench.resolve", args.runs, args.processes)
    print("POST /v1/contacts/resolve (2 identifiers, one owner), botocore replaced by an in-memory fake")
    print(f"  DynamoDB calls per request: {r['calls']}  → resolution {r['resolution_calls']} (target ≤ {TARGET_CALLS})")
    print(f"  floor makes the same requests (operations, keys, items' attributes, expressions): {r['same_calls']}")
    print(
        f"  handler {r['route_us']:.0f} µs vs floor {r['floor_us']:.0f} µs  → {r['ratio']:.2f}x "
        f"(target ≤ {TARGET_RATIO}x) {'PASS' if r['ratio'] <= TARGET_RATIO else 'OVER'}{spread(r)}"
    )
    over = r["ratio"] > TARGET_RATIO or r["resolution_calls"] > TARGET_CALLS or not r["same_calls"]
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
