"""Segment members: a page of a 10,000-member segment, its DynamoDB reads, and its time as a ratio to reading the
same number of items directly.

The table holds SEGMENT_SIZE contacts, all members of one segment (`SEGMENT#<seg>#MEMBER#<ct>` rows, see
docs/data-model.md). A members page is GetItem (the segment) + one Query of `limit` member rows + one BatchGetItem of
their contacts, at any depth: the cursor is the last member key, so page 90 reads what page 1 reads (no scan, no
skipping). The benchmark checks that by counting calls and items read per page, on the first page and on a deep one.

Floor: a standard Powertools route (validation on, behind `bench._harness.standard_handler`: Logger context and
EMF line) that reads the same number of items directly — one Query of `limit` contact items — on the same fake
client and returns them. The route reads twice as many items (member rows, then
the contacts), so the target is ≤ 2.5x the floor. Run: `python -m bench.segment_members [--runs N]`.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from bench._harness import Ctx, FakeDynamoDB, api_event, bench_env, interleaved, standard_handler

TARGET_RATIO = 2.5
SEGMENT_SIZE = 10_000
PAGE = 100
ORG = "org_bench"
SEGMENT = "seg_bench"


class QueryableDynamoDB(FakeDynamoDB):
    """The harness fake plus `query` on the base table (key equality + begins_with, Limit, ExclusiveStartKey),
    counting the items each call reads; there is no `scan`: a scan would fail the benchmark."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__(items)
        self.order = sorted(self.items)
        self.read_items = 0

    def batch_get_item(self, **kw: Any) -> dict[str, Any]:
        """With DynamoDB's ProjectionExpression (top-level names only): the attributes asked for, nothing else."""
        resp = super().batch_get_item(**kw)
        ((table, req),) = kw["RequestItems"].items()
        if "ProjectionExpression" in req:
            names = req.get("ExpressionAttributeNames") or {}
            wanted = {names.get(p.strip(), p.strip()) for p in req["ProjectionExpression"].split(",")}
            resp["Responses"][table] = [{k: v for k, v in i.items() if k in wanted} for i in resp["Responses"][table]]
        self.read_items += sum(len(v) for v in resp["Responses"].values())
        return resp

    def query(self, **kw: Any) -> dict[str, Any]:
        self.calls["Query"] += 1
        assert "IndexName" not in kw and kw.get("ScanIndexForward", True), "the benchmark serves base-table queries"
        values = kw["ExpressionAttributeValues"]
        pk, prefix = values[":pk"]["S"], values.get(":skp", {}).get("S", "")
        start = kw.get("ExclusiveStartKey")
        low = (pk, start["SK"]["S"]) if start else (pk, prefix)
        n = bisect.bisect_right(self.order, low) if start else bisect.bisect_left(self.order, low)
        limit = kw.get("Limit") or 1_000_000
        out: list[dict[str, Any]] = []
        while n < len(self.order) and len(out) < limit:
            key = self.order[n]
            if key[0] != pk or not key[1].startswith(prefix):
                break
            out.append(self.items[key])
            n += 1
        self.read_items += len(out)
        resp: dict[str, Any] = {"Items": out, "Count": len(out), "ScannedCount": len(out)}
        more = n < len(self.order) and self.order[n][0] == pk and self.order[n][1].startswith(prefix)
        if out and more:
            resp["LastEvaluatedKey"] = {"PK": out[-1]["PK"], "SK": out[-1]["SK"]}
        return resp


def _items(size: int) -> list[dict[str, Any]]:
    pk = f"ORG#{ORG}"
    segment = {
        "PK": pk,
        "SK": f"CDPSEG#{SEGMENT}",
        "entity": "Segment",
        "id": SEGMENT,
        "name": "Everyone",
        "rules": {"field": "email", "op": "exists"},
        "member_count": size,
        "version": 1,
        "created_at": "2026-11-01T00:00:00.000Z",
        "updated_at": "2026-11-01T00:00:00.000Z",
    }
    items: list[dict[str, Any]] = [segment]
    for n in range(size):
        contact_id = f"ct_{n:06d}"
        items.append(
            {
                "PK": pk,
                "SK": f"CONTACT#{contact_id}",
                "entity": "Contact",
                "id": contact_id,
                "organization_id": ORG,
                "name": f"Contact {n}",
                "email": f"c{n}@example.com",
                "phone": f"1415555{n:04d}",
                "lifecycle_stage": "lead",
                "attributes": {"plan": "pro"},
                "version": 1,
                "created_at": "2026-11-01T00:00:00.000Z",
                "updated_at": "2026-11-01T00:00:00.000Z",
            }
        )
        items.append(
            {
                "PK": pk,
                "SK": f"SEGMENT#{SEGMENT}#MEMBER#{contact_id}",
                "entity": "SegmentMember",
                "segment_id": SEGMENT,
                "contact_id": contact_id,
                "added_at": "2026-11-01T00:00:00.000Z",
            }
        )
    return items


def build_floor(fake: QueryableDynamoDB) -> Any:
    from switchboard.store.table import deserialize, serialize

    floor = APIGatewayRestResolver(enable_validation=True)

    @floor.get("/v1/cdp/segments/<segmentID>/members")
    def members(segmentID: str) -> dict:
        resp = fake.query(
            TableName="bench",
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :skp)",
            ExpressionAttributeNames={"#pk": "PK", "#sk": "SK"},
            ExpressionAttributeValues=serialize({":pk": f"ORG#{ORG}", ":skp": "CONTACT#"}),
            Limit=PAGE,
        )
        return {"data": [deserialize(i) for i in resp["Items"]]}

    return floor


def _event(cursor: str | None) -> dict[str, Any]:
    event = api_event("GET", f"/v1/cdp/segments/{SEGMENT}/members", None, ORG)
    params = {"limit": str(PAGE), **({"cursor": cursor} if cursor else {})}
    event["queryStringParameters"] = params
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in params.items()}
    return event


def run(runs: int, size: int = SEGMENT_SIZE) -> dict[str, Any]:
    fake = QueryableDynamoDB(_items(size))
    with bench_env(fake):
        return _measure(fake, runs, size)


def _measure(fake: QueryableDynamoDB, runs: int, size: int) -> dict[str, Any]:
    from functions.cdp.app import handler

    ctx = Ctx()
    floor = standard_handler(build_floor(fake))
    floor_event = _event(None)

    def page(cursor: str | None) -> dict[str, Any]:
        resp = handler(_event(cursor), ctx)
        assert resp["statusCode"] == 200, resp
        return json.loads(resp["body"])  # type: ignore[no-any-return]

    # walk every page once: every member is listed exactly once, in pages of PAGE
    seen: list[str] = []
    cursors: list[str | None] = [None]
    body = page(None)
    while True:
        seen += [m["contact_id"] for m in body["data"]]
        if not body["meta"]["has_more"]:
            break
        cursors.append(body["meta"]["cursor"])
        body = page(body["meta"]["cursor"])
    assert len(seen) == len(set(seen)) == size, (len(seen), size)
    deep = cursors[int(len(cursors) * 0.9)]

    def cost(cursor: str | None) -> tuple[dict[str, int], int]:
        fake.calls.clear()
        fake.read_items = 0
        page(cursor)
        return dict(fake.calls), fake.read_items

    first_calls, first_items = cost(None)
    deep_calls, deep_items = cost(deep)
    first_event, deep_event = _event(None), _event(deep)

    def route_first() -> Any:
        return handler(first_event, ctx)

    def route_deep() -> Any:
        return handler(deep_event, ctx)

    def bare() -> Any:
        resp = floor(floor_event, ctx)
        assert resp["statusCode"] == 200, resp
        return resp

    medians = interleaved({"first": route_first, "deep": route_deep, "floor": bare}, rounds=runs, per_round=5)
    return {
        "size": size,
        "pages": len(cursors),
        "first_calls": first_calls,
        "deep_calls": deep_calls,
        "first_items": first_items,
        "deep_items": deep_items,
        "first_us": medians["first"],
        "deep_us": medians["deep"],
        "floor_us": medians["floor"],
        "ratio": medians["first"] / medians["floor"],
        "deep_ratio": medians["deep"] / medians["floor"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.segment_members")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--check", action="store_true")
    args, _ = parser.parse_known_args(argv)
    r = run(args.runs)
    print(
        f"GET /v1/cdp/segments/{{id}}/members?limit={PAGE} over a {r['size']:,}-member segment ({r['pages']} pages), "
        "botocore replaced by an in-memory fake"
    )
    print(f"  page 1:  calls {r['first_calls']}, items read {r['first_items']}")
    print(f"  page {int(r['pages'] * 0.9) + 1}: calls {r['deep_calls']}, items read {r['deep_items']}")
    print(f"  floor: one Query of {PAGE} contact items, read directly")
    for label, us, ratio in (("page 1", r["first_us"], r["ratio"]), ("deep page", r["deep_us"], r["deep_ratio"])):
        print(
            f"  {label:<9} {us:.0f} µs vs floor {r['floor_us']:.0f} µs  → {ratio:.2f}x "
            f"(target ≤ {TARGET_RATIO}x) {'PASS' if ratio <= TARGET_RATIO else 'OVER'}"
        )
    over = max(r["ratio"], r["deep_ratio"]) > TARGET_RATIO or r["deep_items"] != r["first_items"]
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
