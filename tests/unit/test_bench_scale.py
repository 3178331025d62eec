"""The scale benchmark's machinery: its in-memory table answers the Store as DynamoDB (moto) does, counts what a
request reads and writes, and the report says FAIL for a request that grows with the tenant (no ratio of the current
operations is asserted: those are the benchmark's output, not its machinery)."""

from __future__ import annotations

import re
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench import scale
from bench.__main__ import benchmark_modules
from bench._fakedb import FakeDynamoDB
from switchboard.errors import Conflict, NotFound
from switchboard.store import Delete, Put, Store, Update

PK = "ORG#o1"


def _moto_client(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("dynamodb", region_name="us-east-1")
    attrs = ["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"]
    client.create_table(
        TableName="t",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in attrs],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": name,
                "KeySchema": [
                    {"AttributeName": f"{name}PK", "KeyType": "HASH"},
                    {"AttributeName": f"{name}SK", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for name in ("GSI1", "GSI2")
        ],
    )
    return client


def _script(store: Store) -> list[Any]:
    """A representative run of the requests the domain code makes; every answer (or error) in order."""
    out: list[Any] = []

    def attempt(fn: Any) -> None:
        try:
            out.append(fn())
        except (Conflict, NotFound) as err:
            out.append(type(err).__name__)

    for n in range(30):
        store.put(
            {
                "PK": PK,
                "SK": f"CONTACT#ct{n:03d}",
                "entity": "Contact",
                "name": f"c{n}",
                "stage": "lead" if n % 3 else "customer",
                "score": n,
                "tags": ["a", "b"],
                "meta": {"plan": "pro", "seats": n},
                "GSI1PK": f"{PK}#CONTACTS",
                "GSI1SK": f"2026-11-{n % 7 + 1:02d}#ct{n:03d}",
            },
            condition="attribute_not_exists(PK)",
        )
    store.put({"PK": PK, "SK": "TAG#t1", "entity": "Tag", "name": "vip"})
    attempt(lambda: store.put({"PK": PK, "SK": "TAG#t1", "name": "dup"}, condition="attribute_not_exists(PK)"))
    out.append(store.get({"PK": PK, "SK": "CONTACT#ct007"}))
    out.append(store.get({"PK": PK, "SK": "CONTACT#nope"}))
    out.append(
        store.update(
            {"PK": PK, "SK": "CONTACT#ct001"},
            "SET #n = :n, meta.seats = meta.seats + :one, tags = list_append(tags, :more), "
            "seen = if_not_exists(seen, :now) ADD version :one REMOVE stage",
            condition="attribute_exists(PK) AND score < :max",
            names={"#n": "name"},
            values={":n": "renamed", ":one": 1, ":more": ["c"], ":now": "t0", ":max": 5},
        )
    )
    attempt(
        lambda: store.update(
            {"PK": PK, "SK": "CONTACT#ct002"}, "SET score = :s", condition="score > :s", values={":s": 50}
        )
    )
    out.append(store.update({"PK": PK, "SK": "COUNTER"}, "ADD hits :n, labels :l", values={":n": 3, ":l": {"x", "y"}}))
    out.append(store.update({"PK": PK, "SK": "COUNTER"}, "DELETE labels :l", values={":l": {"x"}}))
    out.append(store.add_hits({"PK": "RATE#1", "SK": "60"}, 1, ttl=200))
    out.append(store.add_hits({"PK": "RATE#1", "SK": "60"}, 1, ttl=300))
    out.append(
        store.delete(
            {"PK": PK, "SK": "CONTACT#ct029"},
            condition="#s IN (:a, :b)",
            names={"#s": "stage"},
            values={":a": "lead", ":b": "x"},
        )
    )
    attempt(
        lambda: store.delete(
            {"PK": PK, "SK": "CONTACT#ct028"}, condition="NOT (#s = :a)", names={"#s": "stage"}, values={":a": "lead"}
        )
    )
    attempt(
        lambda: store.transact(
            [
                Put(item={"PK": PK, "SK": "X#1", "v": 1}, condition="attribute_not_exists(PK)"),
                Update(key={"PK": PK, "SK": "CONTACT#ct003"}, expression="SET score = :z", values={":z": 0}),
                Delete(
                    key={"PK": PK, "SK": "TAG#t1"},
                    condition="#n = :n",
                    names={"#n": "name"},
                    values={":n": "no"},
                    error=NotFound("tag"),
                ),
            ]
        )
    )
    out.append(store.get({"PK": PK, "SK": "X#1"}))  # the cancelled transaction wrote nothing
    store.transact(
        [
            Put(item={"PK": PK, "SK": "X#2", "v": 2}, condition="attribute_not_exists(PK)"),
            Update(key={"PK": PK, "SK": "CONTACT#ct004"}, expression="SET score = :z", values={":z": 0}),
        ]
    )
    out.append([store.get({"PK": PK, "SK": "X#2"}), store.get({"PK": PK, "SK": "CONTACT#ct004"})])
    page = store.query(PK, sk_prefix="CONTACT#", limit=7)
    out.append(page.items)
    out.append(store.query(PK, sk_prefix="CONTACT#", limit=7, start_key=page.last_key).items)
    out.append(store.query(PK, sk_between=("CONTACT#ct010", "CONTACT#ct015"), forward=False).items)
    out.append(store.query(f"{PK}#CONTACTS", index="GSI1", forward=False, limit=5).items)
    back = store.query(f"{PK}#CONTACTS", index="GSI1", forward=False, limit=6)
    out.append(store.query(f"{PK}#CONTACTS", index="GSI1", forward=False, limit=6, start_key=back.last_key).items)
    tail = store.query(PK, sk_prefix="CONTACT#", forward=False, limit=4)
    out.append(store.query(PK, sk_prefix="CONTACT#", forward=False, limit=4, start_key=tail.last_key).items)
    gpage = store.query(f"{PK}#CONTACTS", index="GSI1", sk_between=("2026-11-02", "2026-11-05~"), limit=4)
    out.append(
        [
            gpage.items,
            store.query(
                f"{PK}#CONTACTS",
                index="GSI1",
                sk_between=("2026-11-02", "2026-11-05~"),
                limit=4,
                start_key=gpage.last_key,
            ).items,
        ]
    )
    out.append(store.filtered_page(PK, limit=4, start_key=None, filters={"stage": "customer"}, sk_prefix="CONTACT#"))
    out.append(
        store.query(
            PK,
            sk_prefix="CONTACT#",
            filter_expression="begins_with(#n, :p) OR (contains(tags, :t) AND meta.seats >= :s) OR size(tags) > :three",
            names={"#n": "name"},
            values={":p": "c1", ":t": "c", ":s": 20, ":three": 3},
        ).items
    )
    out.append(
        store.count(
            PK, sk_prefix="CONTACT#", filter_expression="#e = :e", names={"#e": "entity"}, values={":e": "Contact"}
        )
    )
    got = store.batch_get([{"PK": PK, "SK": f"CONTACT#ct{n:03d}"} for n in (5, 6, 99)], projection=["name", "score"])
    out.append(sorted(got, key=lambda i: i["name"]))
    return out


def test_fake_table_answers_the_store_like_dynamodb(monkeypatch):
    with mock_aws():
        expected = _script(Store("t", _moto_client(monkeypatch)))
    assert _script(Store("t", FakeDynamoDB())) == expected


def test_fake_table_counts_items_as_dynamodb_bills_them():
    fake = FakeDynamoDB()
    store = Store("t", fake)
    with fake.bulk():
        for n in range(300):
            fake.load({"PK": {"S": PK}, "SK": {"S": f"CONTACT#{n:04d}"}, "blob": {"S": "x" * 6000}})
    with fake.metered() as meter:
        page = store.query(PK, sk_prefix="CONTACT#", limit=25, filter_expression="blob = :no", values={":no": "y"})
    assert (page.items, meter.reads, meter.writes) == ([], 25, 0)  # examined before the filter, within Limit
    with fake.metered() as meter:
        assert store.count(PK, sk_prefix="CONTACT#") == 300
    assert meter.reads == 300 and meter.calls["Query"] == 2  # 300 items of ~4 KB: two 1 MB pages
    with fake.metered() as meter:
        store.transact([Put(item={"PK": PK, "SK": "A"}), Delete(key={"PK": PK, "SK": "CONTACT#0001"})])
        store.batch_get([{"PK": PK, "SK": "A"}, {"PK": PK, "SK": "B"}])
    assert (meter.reads, meter.writes, meter.keys[PK]) == (2, 2, 2)
    with pytest.raises(AssertionError):
        fake.scan(TableName="t")


def _cost(reads: int, writes: int = 1, **kw: Any) -> scale.Cost:
    return scale.Cost(reads=reads, writes=writes, **kw)


def test_report_prints_each_request_its_ratio_and_fail_over_the_limit():
    names = [op.name for op in scale.OPERATIONS[:3]]
    results = {
        1_000: {names[0]: _cost(2), names[1]: _cost(20), names[2]: _cost(5)},
        100_000: {names[0]: _cost(2), names[1]: _cost(21, rows=20), names[2]: _cost(500, extrapolated=True)},
    }
    lines: list[str] = []
    worst = scale.report(results, lines.append)
    assert worst == 100.0
    header = "operation | pattern | reads@1e3 | reads@1e5 | writes@1e3 | writes@1e5 | ratio 1e5/1e3 | result | rows@1e5"
    assert lines[0] == header
    assert lines[1].endswith("| 2 | 2 | 1 | 1 | 1.00 | PASS | -")
    assert lines[2].endswith("| 20 | 21 | 1 | 1 | 1.05 | PASS | 20")
    assert lines[3].endswith("| 5 | ~500 | 1 | ~1 | 100.00 | FAIL (O(N), extrapolated) | -")


def test_report_fails_a_filtered_page_that_answers_short():
    op = next(o for o in scale.OPERATIONS if o.name == "GET /v1/conversations?assignee=none")
    results = {1_000: {op.name: _cost(500, rows=scale.RARE)}, 100_000: {op.name: _cost(500, rows=0)}}
    lines: list[str] = []
    assert scale.report(results, lines.append) == 1.0
    assert lines[1].endswith(f"| 500 | 500 | 1 | 1 | 1.00 | FAIL (short page: 0 of {scale.RARE} matches) | 0")


def test_quick_run_measures_the_operations_and_ends_with_the_worst_ratio(capsys):
    only = ["GET /v1/contacts/{id}", "POST /v1/contacts"]
    assert scale.main(["--quick", "--burst", "20", "--only", *only]) == 0  # no --check: never fails make bench
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"scale: worst request ratio \d+\.\d\d", out[-1])
    rows = {line.split(" | ")[0]: line.split(" | ") for line in out if line.count(" | ") == 8}
    assert rows["GET /v1/contacts/{id}"][2:4] == ["1", "1"]  # one GetItem at 100 and at 1,000 contacts
    assert rows["POST /v1/contacts"][-2:] == ["PASS", "-"]
    spread = [line for line in out if line.startswith("sends (messages.send) |")]
    assert len(spread) == 1 and spread[0].split(" | ")[1] != "0"


def test_python_m_bench_runs_the_scale_module_and_not_its_table():
    modules = benchmark_modules()
    assert "bench.scale" in modules and "bench._fakedb" not in modules


def test_seeded_organization_holds_its_contacts_and_rare_items():
    with scale._environment():
        world = scale.build_world(50)
        api = world.api
        assert len(world.contact_ids) + len(world.rare_ids) == 50 and len(world.rare_ids) == scale.RARE
        contact = api("contacts", "GET", f"/v1/contacts/{world.contact_ids[10]}")["data"]
        n = scale.RARE + 1 + 10
        assert contact["phone"] == scale._phone(n) and contact["name"] == f"Person zq{n:07d}"
        resolved = api(
            "contacts",
            "POST",
            "/v1/contacts/resolve",
            {"identifiers": [{"type": "phone", "value": "+" + contact["phone"]}]},
        )["data"]
        assert resolved["id"] == contact["id"]
        customers = api("contacts", "GET", "/v1/contacts", query={"lifecycle_stage": "customer", "limit": "100"})[
            "data"
        ]
        assert sorted(c["id"] for c in customers) == sorted(world.rare_ids)
        listed = api("contacts", "GET", "/v1/contacts", query={"limit": "100"})
        assert len(listed["data"]) == 50
