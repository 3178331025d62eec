"""Write sharding of an organization's hot items (switchboard.store.shards): where sends, deliveries and
conversations land, the ordered merge of the sharded conversation lists and its cursor, items written before
sharding (the legacy partition `ORG#<org>`) and a raised shard count."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from switchboard import clock
from switchboard.billing import usage
from switchboard.config import get_settings, reset_settings
from switchboard.events.outbox import stored_events
from switchboard.messaging import conversations, messages, status
from switchboard.store import get_store, keys, shards
from tests.integration.support import Api

Item = dict[str, Any]


@pytest.fixture
def channel(api: Api) -> dict:
    ch = api.post("/v1/channels", json={"name": "sbx", "platform": "sandbox", "config": {}}).json()["data"]
    return api.post(f"/v1/channels/{ch['id']}/connect").json()["data"]


def _send(api: Api, channel: dict, n: int) -> dict:
    body = {"channel_id": channel["id"], "to": f"+1415555{n:03d}7", "text": {"body": f"m{n}"}}
    resp = api.post("/v1/messages", json=body)
    assert resp.status_code == 202, resp.text
    message = resp.json()["data"]
    stored = status.get_message(get_store(), api.org_id, message["id"], consistent=True) or {}
    return {**message, "conversation_id": stored["conversation_id"]}


def _partition_items(org: str) -> list[Item]:
    store = get_store()
    return [i for pk in shards.all_pks(org) for i in store.query_all(pk, consistent=True)]


def test_sends_and_their_deliveries_land_on_many_shards_never_on_the_organization_key(api: Api, channel: dict):
    assert get_settings().tenant_shards == 16
    sent = [_send(api, channel, n) for n in range(40)]
    store = get_store()
    for message in sent[:10]:
        assert messages.deliver(store, api.org_id, message["id"]) == "sent"
    legacy = keys.org_pk(api.org_id)
    items = _partition_items(api.org_id)
    hot = ("MSG#", "EVENT#", "CONV#", "USAGEREC#", "PMSG#")
    assert not [i["SK"] for i in items if i["PK"] == legacy and i["SK"].startswith(hot)]
    by_kind = {kind: Counter(i["PK"] for i in items if i["SK"].startswith(kind)) for kind in hot}
    assert len(by_kind["MSG#"]) >= 8 and len(by_kind["EVENT#"]) >= 8 and len(by_kind["CONV#"]) >= 8
    assert len(by_kind["USAGEREC#"]) >= 4 and len(by_kind["PMSG#"]) >= 4
    for message in sent:  # each at its id's shard, found by id through the API
        assert shards.pk(api.org_id, message["id"]) == status.message_key(api.org_id, message["id"])["PK"]
        assert api.get(f"/v1/messages/{message['id']}").json()["data"]["id"] == message["id"]
    history = api.get(f"/v1/messages/{sent[0]['id']}/status").json()["data"]["history"]
    assert [h["status"] for h in history] == ["pending", "sent"]
    conv = api.get(f"/v1/conversations/{sent[0]['conversation_id']}").json()["data"]
    assert conv["id"] == sent[0]["conversation_id"]
    # every outbox event is still one stream INSERT with an `EVENT#` sort key: the publisher's filter is unchanged
    assert len([e for e in stored_events(store, api.org_id) if e["event_type"] == "message.queued"]) == 40
    # the meter counts each record in the message's shard; the month's usage sums every shard's counter
    records = [i for i in items if i["SK"].startswith("USAGEREC#")]
    assert all(usage.count_record(store, r) for r in records)
    counters = [i for i in _partition_items(api.org_id) if i["SK"].startswith("USAGE#")]
    assert len({c["PK"] for c in counters}) >= 4
    month = records[0]["day"][:7]
    assert usage.messages_sent(store, api.org_id, month) == [
        {"channel_id": channel["id"], "platform": "sandbox", "count": 10}
    ]


def _seed_conversations(api: Api, channel: dict, n: int) -> list[Item]:
    store = get_store()
    return [conversations.get_or_create(store, api.org_id, channel["id"], f"ct_seed{k:05d}") for k in range(n)]


def _pages(api: Api, limit: int, **params: str) -> list[list[str]]:
    return api.pages("/v1/conversations", limit, **params)


def test_a_sharded_list_is_one_order_and_its_cursor_resumes_without_gaps_or_duplicates(api: Api, channel: dict):
    made = _seed_conversations(api, channel, 250)
    assert len({c["GSI1PK"] for c in made}) >= 12  # spread over the shards of the organization's list
    expected = [c["id"] for c in sorted(made, key=lambda c: c["GSI1SK"], reverse=True)]
    pages = _pages(api, 100)
    assert [len(p) for p in pages] == [100, 100, 50]
    assert [i for p in pages for i in p] == expected  # newest first across shard boundaries, each once
    # a filter read while merging (status) keeps the order and the cursor
    store = get_store()
    closed = set(expected[::7])
    for conv_id in closed:
        api.post(f"/v1/conversations/{conv_id}/close")
    order = {
        c["id"]: c["GSI1SK"]
        for pk in shards.index_pks(conversations.list_pk(api.org_id))
        for c in store.query_all(pk, index="GSI1")
    }
    want = sorted(closed, key=lambda i: order[i], reverse=True)
    assert [i for p in _pages(api, 10, status="closed") for i in p] == want
    # a cursor of another query is refused
    cursor = api.get("/v1/conversations", params={"limit": "5"}).json()["meta"]["cursor"]
    api.assert_error(
        api.get("/v1/conversations", params={"cursor": cursor, "status": "open"}), 400, "validation_failed"
    )


def _to_legacy(item: Item) -> Item:
    """The item as written before sharding: in `ORG#<org>`, a conversation on the unsharded lists."""
    store = get_store()
    store.client.delete_item(TableName=store.table_name, Key={"PK": {"S": item["PK"]}, "SK": {"S": item["SK"]}})
    old = {**item, "PK": keys.org_pk(item["organization_id"])}
    if item.get("entity") == "Conversation":
        old |= {"GSI1PK": item["GSI1PK"].rsplit("#", 1)[0], "GSI2PK": item["GSI2PK"].rsplit("#", 1)[0]}
    store.put(old)
    return old


def test_items_written_before_sharding_are_found_listed_and_changed_where_they_are(api: Api, channel: dict):
    store = get_store()
    first = _send(api, channel, 1)
    message = _to_legacy(status.get_message(store, api.org_id, first["id"], consistent=True) or {})
    conv = _to_legacy(conversations.get_item(store, api.org_id, first["conversation_id"], consistent=True))
    _seed_conversations(api, channel, 30)
    # found by id, listed (the legacy list is merged with the shards)
    assert api.get(f"/v1/messages/{first['id']}").json()["data"]["status"] == "pending"
    assert api.get(f"/v1/conversations/{conv['id']}").json()["data"]["id"] == conv["id"]
    listed = [i for p in _pages(api, 7) for i in p]
    assert conv["id"] in listed and len(listed) == len(set(listed)) == 31
    # the sender claims and sends the pending legacy message in place
    assert messages.deliver(store, api.org_id, first["id"]) == "sent"
    after = store.get({"PK": message["PK"], "SK": message["SK"]}, consistent=True)
    assert after is not None and after["status"] == "sent"
    assert store.get(status.message_key(api.org_id, first["id"]), consistent=True) is None
    history = api.get(f"/v1/messages/{first['id']}/status").json()["data"]["history"]
    assert [h["status"] for h in history] == ["pending", "sent"]
    # a new message to the same contact touches the legacy conversation in place and moves it onto a shard's list
    second = _send(api, channel, 1)
    assert second["conversation_id"] == conv["id"]
    touched = store.get({"PK": conv["PK"], "SK": conv["SK"]}, consistent=True)
    assert touched is not None and touched["GSI1PK"] == shards.index_pk(conversations.list_pk(api.org_id), conv["id"])
    assert _pages(api, 1)[0] == [conv["id"]]
    # a provider status callback reaches the legacy message through a legacy pointer too
    pointer = store.get(messages.provider_key(api.org_id, channel["id"], after["provider_message_id"]), consistent=True)
    assert pointer is not None
    _to_legacy({**pointer, "organization_id": api.org_id})
    assert messages.get_pointer(store, api.org_id, channel["id"], after["provider_message_id"]) is not None


def test_a_raised_shard_count_still_finds_and_lists_what_the_smaller_one_wrote(
    api: Api, channel: dict, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TENANT_SHARDS", "4")
    reset_settings()
    small = [_send(api, channel, n) for n in range(12)]
    assert {status.message_key(api.org_id, m["id"])["PK"] for m in small} <= set(shards.all_pks(api.org_id)[:4])
    first = api.get("/v1/conversations", params={"limit": "5"}).json()
    monkeypatch.setenv("TENANT_SHARDS", "16")
    reset_settings()
    rest = api.get("/v1/conversations", params={"limit": "100", "cursor": first["meta"]["cursor"]}).json()["data"]
    resumed = [c["id"] for c in first["data"]] + [c["id"] for c in rest]  # a cursor from before the change continues
    assert sorted(resumed) == sorted({m["conversation_id"] for m in small}) and len(resumed) == 12
    moved = [
        m for m in small if shards.pk(api.org_id, m["id"]) != shards.pk_at(api.org_id, shards.shard_of(m["id"], 4))
    ]
    assert moved  # some ids have another shard at 16
    for m in small:
        assert api.get(f"/v1/messages/{m['id']}").json()["data"]["id"] == m["id"]
        assert messages.deliver(get_store(), api.org_id, m["id"]) == "sent"
    listed = [i for p in _pages(api, 5) for i in p]
    assert sorted(listed) == sorted({m["conversation_id"] for m in small})


def test_the_shard_count_is_a_power_of_two(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TENANT_SHARDS", "12")
    reset_settings()
    with pytest.raises(ValueError, match="power of two"):
        get_settings()
    monkeypatch.setenv("TENANT_SHARDS", "16")
    reset_settings()


def test_the_send_window_is_spread_over_counters_and_still_refuses_past_its_limit(
    api: Api, channel: dict, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(messages, "SENDS_PER_MINUTE", 32)
    minute = clock.epoch_now() // 60 * 60 + 10
    monkeypatch.setattr(clock, "epoch_now", lambda: minute)  # one window, whatever the test's duration
    codes = []
    for n in range(40):
        body = {"channel_id": channel["id"], "to": f"+1415556{n:03d}7", "text": {"body": "hi"}}
        resp = api.post("/v1/messages", json=body)
        codes.append(resp.status_code)
        if resp.status_code == 429:
            assert resp.json()["error"]["code"] == "rate_limited" and int(resp.headers["Retry-After"]) >= 1
    accepted = codes.count(202)
    # 16 counters of 2 each: never more than the limit; two random choices fill them nearly evenly first
    assert 20 <= accepted <= 32 and codes.count(429) == 40 - accepted
    store = get_store()
    windows = [i for i in store.client.scan(TableName=store.table_name)["Items"] if i["PK"]["S"].startswith("RATE#")]
    assert len({i["PK"]["S"] for i in windows}) >= 12  # the organization's window and ≥ 11 of the send counters


@pytest.mark.parametrize("forward", [False, True])
def test_a_rare_filter_over_shards_pages_short_and_resumes_to_every_match(aws_resources, forward: bool):
    store = get_store()
    pks = [f"ORG#o_rare#T#{k}" for k in range(5)]
    for n in range(300):
        item_id = f"it{n:04d}"
        store.put(
            {
                "PK": f"ORG#o_rare#{n % 3}",
                "SK": f"T#{item_id}",
                "GSI1PK": pks[shards.shard_of(item_id, 5)],
                "GSI1SK": f"2026-11-{1 + n // 20:02d}T00:00:00.000Z#{item_id}",
                "rare": n % 37 == 0,
            }
        )
    want = sorted((f"it{n:04d}" for n in range(300) if n % 37 == 0), reverse=not forward)
    got, position, pages = [], None, 0
    while True:
        items, position = shards.merged_page(
            store, pks, position, index="GSI1", limit=3, forward=forward, keep=lambda i: i["rare"], max_reads=7
        )
        got += [i["SK"].removeprefix("T#") for i in items]
        pages += 1
        assert pages < 200
        if position is None:
            break
    assert got == want  # in order, each once, short pages included
    assert pages > len(want) // 3 + 1  # the budget ended some pages short


def test_a_merge_reads_the_shards_of_a_round_side_by_side(api: Api, monkeypatch):
    """A page's first round queries every partition at once: each Query waits at a barrier that only opens when
    every partition's Query is in flight together (read one after another, the first would wait alone and fail)."""
    import threading

    store = get_store()
    pks = shards.index_pks(conversations.list_pk(api.org_id))
    barrier = threading.Barrier(len(pks), timeout=30)
    original = store.query

    def query(pk: str, **kw: Any) -> Any:
        barrier.wait()
        return original(pk, **kw)

    monkeypatch.setattr(store, "query", query)  # undone after the test: the store outlives it
    items, position = shards.merged_page(store, pks, None, index="GSI1", limit=20, forward=False)
    assert items == [] and position is None
    assert barrier.n_waiting == 0 and not barrier.broken
    # and the reads of a key over every partition (shards.query_all)
    barrier.reset()
    rows = shards.query_all(store, pks, sk_prefix="NOTHING#")
    assert rows == [] and not barrier.broken
