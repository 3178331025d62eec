"""Scale: the DynamoDB items every API operation reads and writes per request, with 10^3, 10^4 and 10^5 contacts in
one organization, and how evenly a burst of sends and webhook deliveries spreads its writes over partition keys.

A request that is correct at any tenant size reads and writes the same at 10^5 contacts as at 10^3: the ratio
`items@1e5 / items@1e3` must be ≤ 1.1 for every request (`FAIL` otherwise). Jobs (work that grows with the data by
nature, e.g. a segment rebuild) print items per chunk and the number of chunks instead.

The table is `bench._fakedb.FakeDynamoDB`: the low-level DynamoDB client in memory (typed attribute values, key
conditions, the expressions the code uses, GSI1/GSI2), so the real route handlers and domain services run unchanged
through `switchboard.store.Store`. It counts items as DynamoDB bills them: a GetItem / BatchGetItem key, every item a
Query examines before its filter (within `Limit` and the 1 MB page), every Put / Update / Delete.

Seeding: two template contacts are made through the API (contact, identities, name index, tag rows, stage,
conversation, message), and their items are cloned with new ids, names, phones and e-mails until the organization
holds N contacts: most like template A (stage `lead`, tag `vip`, conversation assigned, label `hot`), a fixed
`RARE` like template B (stage `customer`, tag `rare`, conversation unassigned). Webhook deliveries are seeded the same
way: N `succeeded`, `RARE` `exhausted`. So a filtered list has a constant number of matches at any N and the rare
items are the oldest — the worst case for a filter applied while reading.

Run: `python -m bench.scale [--quick] [--sizes 1000 10000 100000] [--burst N] [--check]`. `--check` exits 1 when a
request's ratio is over 1.1 or the hottest key's share is over its limit; without it the exit code is 0 (so
`make bench` reports, and does not depend on, the current state).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bench._fakedb import FakeDynamoDB, Meter
from bench._harness import Ctx, api_event, bench_env

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)
RATIO_LIMIT = 1.1
RARE = 5  # contacts / deliveries matching the rare filters, at any N
BURST = 100_000
QUICK_BURST = 200
SHARE_FACTOR = 1.5  # hottest key's share ≤ 1 / shards x 1.5
TOP_KEYS = 6  # partition-key values listed per phase

FUNCTIONS = {
    "contacts": "functions.contacts.app",
    "cdp": "functions.cdp.app",
    "messaging": "functions.messaging.app",
    "catalog": "functions.catalog.app",
    "settings": "functions.settings.app",
    "webhooks": "functions.webhooks.app",
}
WEBHOOKS = "/v1/settings/developer/webhooks"


class FakeQueue:
    """SQS and EventBridge clients that accept every message (and count them)."""

    def __init__(self) -> None:
        self.sent = 0

    def send_message(self, **kw: Any) -> dict[str, Any]:
        self.sent += 1
        return {"MessageId": str(self.sent)}

    def send_message_batch(self, **kw: Any) -> dict[str, Any]:
        self.sent += len(kw["Entries"])
        return {"Successful": [{"Id": e["Id"]} for e in kw["Entries"]], "Failed": []}

    def change_message_visibility(self, **kw: Any) -> dict[str, Any]:
        return {}

    def put_events(self, **kw: Any) -> dict[str, Any]:
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in kw["Entries"]]}


class ApiError(AssertionError):
    pass


class Api:
    """Calls the real route handlers in-process with the authorizer's context of the organization's owner."""

    def __init__(self, org: str) -> None:
        import importlib

        self.org = org
        self.handlers = {name: importlib.import_module(mod).handler for name, mod in FUNCTIONS.items()}
        self.ctx = Ctx()

    def __call__(
        self, function: str, method: str, path: str, body: Any = None, query: dict[str, str] | None = None
    ) -> Any:
        event = api_event(method, path, body, self.org)
        if query:
            event["queryStringParameters"] = query
            event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()}
        resp = self.handlers[function](event, self.ctx)
        if resp["statusCode"] >= 300:
            raise ApiError(f"{method} {path} -> {resp['statusCode']}: {resp['body'][:500]}")
        return json.loads(resp["body"]) if resp.get("body") else None


@dataclass
class World:
    """The organization under test and the ids the operations use."""

    fake: FakeDynamoDB
    api: Api
    org: str
    user_id: str
    channel_id: str = ""
    endpoint_id: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    label_id: str = ""
    contact_ids: list[str] = field(default_factory=list)  # clones of template A, oldest first
    rare_ids: list[str] = field(default_factory=list)
    conversation_ids: list[str] = field(default_factory=list)
    segment_id: str = ""
    size: int = 0
    serial: int = 0

    def next(self) -> int:
        self.serial += 1
        return self.serial


# Seeding ----------------------------------------------------------------------------------------------------------
def _phone(n: int) -> str:
    """A distinct valid number per contact (San Francisco's 415, an exchange from 200: libphonenumber's rule for a
    valid number). Distinct for n < 8,000,000; the rare template's 9,999,999 shares contact 1,999,999's, beyond every
    size run here."""
    return f"1415{2_000_000 + n % 8_000_000:07d}"


def _contact_body(n: int, stage: str) -> dict[str, Any]:
    return {
        "first_name": "Person",
        "last_name": f"zq{n:07d}",
        "name": f"Person zq{n:07d}",
        "phone": f"+{_phone(n)}",
        "email": f"zq{n:07d}@scale.example",
        "lifecycle_stage": stage,
    }


def _captured(fake: FakeDynamoDB, tokens: Sequence[str]) -> list[dict[str, Any]]:
    """Every stored item that mentions one of `tokens`, except outbox events and audit entries (they expire)."""
    out = []
    for (_pk, sk), raw in fake.items.items():
        if sk.startswith(("EVENT#", "AUDIT#")):
            continue
        text = json.dumps(raw)
        if any(t in text for t in tokens):
            out.append(raw)
    return out


def _constant(text: str) -> Callable[[int], str]:
    return lambda _n: text


def _numbered_id(old: str) -> Callable[[int], str]:
    """Copy `n` of an id: its last ten characters replaced by `n` (same length, same prefix, unique)."""
    return lambda n: old[:-10] + f"{n:010d}"


class Cloner:
    """Copies of a set of items with every occurrence of its ids and numbers replaced for copy `n`. A copy shares
    every value that holds none of them with the template (the table never changes a stored value in place), so
    10^5 contacts fit in memory and are made quickly."""

    def __init__(self, items: list[dict[str, Any]], ids: Sequence[str], numbered: dict[str, Callable[[int], str]]):
        self.subs: dict[str, Callable[[int], str]] = {i: _numbered_id(i) for i in ids}
        self.subs.update(numbered)
        self.pattern = re.compile("|".join(re.escape(k) for k in sorted(self.subs, key=len, reverse=True)))
        self.plans = [{name: self._plan(value) for name, value in item.items()} for item in items]

    def _plan(self, value: dict[str, Any]) -> Any:
        """The value itself when it holds no token, else a function of the replacement."""
        ((tag, inner),) = value.items()
        if tag == "S":
            return (lambda sub: {"S": sub(inner)}) if self.pattern.search(inner) else value
        if tag == "M":
            parts = {k: self._plan(v) for k, v in inner.items()}
            if all(not callable(p) for p in parts.values()):
                return value
            return lambda sub: {"M": {k: p(sub) if callable(p) else p for k, p in parts.items()}}
        if tag == "L":
            elems = [self._plan(v) for v in inner]
            if all(not callable(p) for p in elems):
                return value
            return lambda sub: {"L": [p(sub) if callable(p) else p for p in elems]}
        return value

    def copy(self, n: int) -> list[dict[str, Any]]:
        cache: dict[str, str] = {}

        def replace(m: re.Match[str]) -> str:
            found = m.group(0)
            if found not in cache:
                cache[found] = self.subs[found](n)
            return cache[found]

        def sub(text: str) -> str:
            return self.pattern.sub(replace, text)

        return [_reshard({k: p(sub) if callable(p) else p for k, p in plan.items()}) for plan in self.plans]

    def new_id(self, old: str, n: int) -> str:
        return self.subs[old](n)


_SHARDED = re.compile(r"^(ORG#[^#]+)#\d+$")


def _reshard(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy's write-sharded keys (switchboard.store.shards) for its new id: table PK, conversation and contact list
    keys."""
    from switchboard.store import shards

    pk = raw["PK"]["S"]
    sk = raw["SK"]["S"]
    if sk.startswith("CONTACT#") and sk.count("#") == 1:  # a contact: its lists (GSI1, GSI2) are sharded
        lists = [a for a in ("GSI1PK", "GSI2PK") if a in raw]
        return {**raw, **{a: {"S": shards.index_pk(raw[a]["S"].rsplit("#", 1)[0], sk[8:])} for a in lists}}
    m = _SHARDED.match(pk)
    if not m:
        return raw
    kind, _, rest = sk.partition("#")
    item_id = rest if kind == "PMSG" else rest.split("#", 1)[0]
    org = shards.org_of(pk)
    out = {**raw, "PK": {"S": shards.pk(org, item_id)}}
    if kind == "CONV" and "#" not in rest:
        for attr in ("GSI1PK", "GSI2PK"):
            if attr in raw:
                base = raw[attr]["S"].rsplit("#", 1)[0]
                out[attr] = {"S": shards.index_pk(base, item_id)}
    return out


def _template_contact(w: World, n: int, stage: str, tag: str, *, assign: bool, label: bool) -> tuple[str, str]:
    """One contact with a conversation, made through the API; its contact id and conversation id."""
    api = w.api
    contact = api("contacts", "POST", "/v1/contacts", _contact_body(n, stage))["data"]
    api("contacts", "POST", f"/v1/contacts/{contact['id']}/tags", {"tag_id": w.tags[tag]})
    msg = api(
        "messaging", "POST", "/v1/messages", {"channel_id": w.channel_id, "to": f"+{_phone(n)}", "text": {"body": "hi"}}
    )["data"]
    from switchboard.store import shards

    conv_id = w.fake.items[(shards.pk(w.org, msg["id"]), f"MSG#{msg['id']}")]["conversation_id"]["S"]
    if assign:
        api("messaging", "POST", f"/v1/conversations/{conv_id}/assign", {"user_id": w.user_id})
    if label:
        api("messaging", "POST", f"/v1/conversations/{conv_id}/labels", {"label_id": w.label_id})
    return contact["id"], conv_id


def _seed_contacts(w: World, size: int) -> None:
    """`size` contacts: `RARE` like template B, the rest like template A (numbers 1..size, B first: the oldest)."""
    templates = {}
    for kind, n, stage, tag, assign, label in (  # B first: its copies carry the older times
        ("B", -1, "customer", "rare", False, False),
        ("A", 0, "lead", "vip", True, True),
    ):
        number = 9_999_999 if n < 0 else n
        ct, cv = _template_contact(w, number, stage, tag, assign=assign, label=label)
        items = _captured(w.fake, [ct, cv])
        msg_ids = sorted({i["SK"]["S"].split("#")[1] for i in items if i["SK"]["S"].startswith("MSG#")})
        ids = [ct, cv, *msg_ids]
        token = f"zq{number:07d}"
        numbered = {token: lambda k: f"zq{k:07d}", _phone(number): _phone}
        templates[kind] = (Cloner(items, ids, numbered), ct, cv)
        for raw in items:  # the template itself is replaced by its copies
            w.fake.drop(raw["PK"]["S"], raw["SK"]["S"])
    counter_key = (f"ORG#{w.org}", "COUNTER#CONTACTS")
    with w.fake.bulk():
        for n in range(1, size + 1):
            kind = "B" if n <= RARE else "A"
            cloner, ct, cv = templates[kind]
            for raw in cloner.copy(n):
                w.fake.load(raw)
            (w.rare_ids if kind == "B" else w.contact_ids).append(cloner.new_id(ct, n))
            if kind == "A":
                w.conversation_ids.append(cloner.new_id(cv, n))
    # An organization whose contacts predate counting from the stream: its older counter holds the count, and its
    # first contacts read starts the seed job (contacts.counter).
    org_key = (f"ORG#{w.org}", "ORG")
    organization = dict(w.fake.items[org_key])
    organization.pop("contact_counts", None)
    w.fake.load(organization)
    w.fake.load({"PK": {"S": counter_key[0]}, "SK": {"S": counter_key[1]}, "contacts": {"N": str(size)}})


def _seed_deliveries(w: World, size: int) -> None:
    """`size` webhook deliveries of the endpoint: `RARE` exhausted (the oldest), the rest succeeded."""
    from switchboard import clock
    from switchboard.store import get_store
    from switchboard.webhooks.fanout import fan_out

    store = get_store()
    endpoints = store.query_all(f"ORG#{w.org}", sk_prefix="WHEP#")
    templates = {}
    for hours_ago, status in ((2, "exhausted"), (1, "succeeded")):
        detail = {
            "event_id": f"evt_template_{status}",
            "event_type": "message.sent",
            "organization_id": w.org,
            "occurred_at": "2026-11-01T00:00:00.000Z",
            "data": {"id": "ct_x"},
        }
        (delivery_id,) = fan_out(store, detail, endpoints) or ()
        raw = dict(w.fake.drop(f"ORG#{w.org}#DLV#{delivery_id}", "DLV"))
        raw["status"] = {"S": status}
        raw["GSI3PK"] = {"S": raw["GSI3PK"]["S"].replace("#pending#", f"#{status}#")}
        made = clock.iso(clock.now() - timedelta(hours=hours_ago))  # the exhausted ones are older, whatever the ms
        templates[status] = Cloner([raw], [delivery_id], {raw["created_at"]["S"]: _constant(made)})
    with w.fake.bulk():
        for n in range(1, size + 1):
            for raw in templates["exhausted" if n <= RARE else "succeeded"].copy(n):
                w.fake.load(raw)


def build_world(size: int) -> World:
    """An organization with `size` contacts (and conversations, tag rows, webhook deliveries) on a fresh table."""
    from switchboard.identity.bootstrap import bootstrap_organization
    from switchboard.store import get_store

    fake = FakeDynamoDB()
    from switchboard import aws

    aws._clients["dynamodb"] = fake
    boot = bootstrap_organization(
        get_store(),
        org_name="Scale",
        owner_email="owner@scale.example",
        owner_password="correct horse battery",
        api_key=None,
        key_mode="test",
    )
    w = World(fake=fake, api=Api(boot.organization_id), org=boot.organization_id, user_id=boot.user_id)
    api = w.api
    ch = api("messaging", "POST", "/v1/channels", {"name": "sbx", "platform": "sandbox", "config": {}})["data"]
    api("messaging", "POST", f"/v1/channels/{ch['id']}/connect")
    w.channel_id = ch["id"]
    for key, name in (("lead", "Lead"), ("customer", "Customer")):
        api("cdp", "POST", "/v1/cdp/lifecycle-stages", {"key": key, "name": name})
    for tag in ("vip", "rare", "spare"):
        w.tags[tag] = api("contacts", "POST", "/v1/contact-tags", {"name": tag})["data"]["id"]
    w.label_id = api("catalog", "POST", "/v1/labels", {"name": "hot"})["data"]["id"]
    w.endpoint_id = api("webhooks", "POST", f"{WEBHOOKS}/endpoints", {"url": "https://93.184.216.34/in"})["data"]["id"]
    w.size = size
    _seed_contacts(w, size)
    _seed_deliveries(w, size)
    return w


# Operations -------------------------------------------------------------------------------------------------------
@dataclass
class Operation:
    name: str  # the API request, as in docs/data-model.md
    pattern: str  # the access pattern's number there
    run: Callable[[World], Any]
    rows: int | None = None  # a list's expected page: every match, up to its limit (fewer is a short page: FAIL)


def _new_contact(w: World) -> Any:
    n = 8_000_000 + w.next()
    return w.api("contacts", "POST", "/v1/contacts", _contact_body(n, "lead"))


def _mid(ids: list[str]) -> str:
    return ids[len(ids) // 2]


OPERATIONS: list[Operation] = [
    Operation("POST /v1/contacts", "C3", _new_contact),
    Operation("GET /v1/contacts/{id}", "C1", lambda w: w.api("contacts", "GET", f"/v1/contacts/{_mid(w.contact_ids)}")),
    Operation(
        "POST /v1/contacts/resolve (phone)",
        "C1",
        lambda w: w.api(
            "contacts",
            "POST",
            "/v1/contacts/resolve",
            {"identifiers": [{"type": "phone", "value": f"+{_phone(w.size // 2)}"}]},
        ),
    ),
    Operation(
        "GET /v1/contacts/phone/{phone}",
        "C2",
        lambda w: w.api("contacts", "GET", f"/v1/contacts/phone/{_phone(w.size // 3)}"),
    ),
    Operation(
        "GET /v1/contacts?limit=20",
        "C5",
        lambda w: w.api("contacts", "GET", "/v1/contacts", query={"limit": "20"}),
        rows=20,
    ),
    Operation(
        "GET /v1/contacts?q=<1 match>",
        "C8",
        lambda w: w.api("contacts", "GET", "/v1/contacts", query={"q": "Person zq0000042", "limit": "20"}),
        rows=1,
    ),
    Operation(
        "GET /v1/contacts?q=<all match>",
        "C8",
        lambda w: w.api("contacts", "GET", "/v1/contacts", query={"q": "person", "limit": "20"}),
        rows=20,
    ),
    Operation(
        "GET /v1/contacts?lifecycle_stage=<rare>",
        "C6",
        lambda w: w.api("contacts", "GET", "/v1/contacts", query={"lifecycle_stage": "customer", "limit": "20"}),
        rows=RARE,
    ),
    Operation(
        "GET /v1/contacts?tag=<rare>",
        "C7",
        lambda w: w.api("contacts", "GET", "/v1/contacts", query={"tag": w.tags["rare"], "limit": "20"}),
        rows=RARE,
    ),
    Operation(
        "PATCH /v1/contacts/{id}",
        "C9",
        lambda w: w.api("contacts", "PATCH", f"/v1/contacts/{w.contact_ids[-2]}", {"company": f"Acme {w.next()}"}),
    ),
    Operation(
        "PUT /v1/cdp/contacts/{id}/lifecycle-stage",
        "D3",
        lambda w: w.api("cdp", "PUT", f"/v1/cdp/contacts/{w.contact_ids[-3]}/lifecycle-stage", {"stage": "customer"}),
    ),
    Operation(
        "GET /v1/cdp/lifecycle-stages/metrics", "D4", lambda w: w.api("cdp", "GET", "/v1/cdp/lifecycle-stages/metrics")
    ),
    Operation(
        "POST /v1/messages",
        "M1",
        lambda w: w.api(
            "messaging",
            "POST",
            "/v1/messages",
            {"channel_id": w.channel_id, "to": f"+{_phone(len(w.contact_ids) // 3)}", "text": {"body": "hello"}},
        ),
    ),
    Operation(
        "GET /v1/conversations?limit=20",
        "M7",
        lambda w: w.api("messaging", "GET", "/v1/conversations", query={"limit": "20"}),
        rows=20,
    ),
    Operation(
        "GET /v1/conversations?assignee=none",
        "M7",
        lambda w: w.api("messaging", "GET", "/v1/conversations", query={"assignee": "none", "limit": "20"}),
        rows=RARE,
    ),
    Operation(
        "GET /v1/channels/{id}/contacts",
        "M10",
        lambda w: w.api("messaging", "GET", f"/v1/channels/{w.channel_id}/contacts", query={"limit": "20"}),
    ),
    Operation(
        "GET /v1/settings/billing (first read: starts the count's seed job)",
        "B3",
        lambda w: w.api("settings", "GET", "/v1/settings/billing"),
    ),
    Operation("GET /v1/settings/billing (usage)", "B3", lambda w: w.api("settings", "GET", "/v1/settings/billing")),
    Operation(
        f"GET {WEBHOOKS}/deliveries?status=exhausted",
        "W8a",
        lambda w: w.api("webhooks", "GET", f"{WEBHOOKS}/deliveries", query={"status": "exhausted", "limit": "20"}),
        rows=RARE,
    ),
    Operation(
        f"POST {WEBHOOKS}/endpoints/{{id}}/recover",
        "W12",
        lambda w: w.api(
            "webhooks", "POST", f"{WEBHOOKS}/endpoints/{w.endpoint_id}/recover", {"since": "2026-01-01T00:00:00Z"}
        ),
    ),
    Operation(
        "POST /v1/contacts/{id}/merge",
        "C14",
        lambda w: w.api(
            "contacts", "POST", f"/v1/contacts/{w.contact_ids[-4]}/merge", {"from_contact_id": w.contact_ids[-5]}
        ),
    ),
    Operation(
        "DELETE /v1/contacts/{id}", "C10", lambda w: w.api("contacts", "DELETE", f"/v1/contacts/{w.contact_ids[-6]}")
    ),
    Operation(
        "PATCH /v1/contact-tags/{id} (rename, on every contact)",
        "C12",
        lambda w: w.api("contacts", "PATCH", f"/v1/contact-tags/{w.tags['vip']}", {"name": "vip2"}),
    ),
    Operation(
        "POST /v1/cdp/segments",
        "D9",
        lambda w: _create_segment(w),
    ),
    Operation(
        "PATCH /v1/cdp/segments/{id}",
        "D9",
        lambda w: w.api("cdp", "PATCH", f"/v1/cdp/segments/{w.segment_id}", {"name": f"rare {w.next()}"}),
    ),
    Operation(
        "GET /v1/cdp/segments/{id}/members",
        "D10",
        lambda w: w.api("cdp", "GET", f"/v1/cdp/segments/{w.segment_id}/members", query={"limit": "20"}),
    ),
    Operation("cdp_segments: one contact.updated event", "D11", lambda w: _segment_event(w)),
    Operation(
        "POST /v1/contacts/{id}/tags",
        "C12",
        lambda w: w.api("contacts", "POST", f"/v1/contacts/{w.contact_ids[-7]}/tags", {"tag_id": w.tags["spare"]}),
    ),
    Operation(
        "GET /v1/conversations/{id}/messages",
        "M6",
        lambda w: w.api("messaging", "GET", f"/v1/conversations/{_mid(w.conversation_ids)}/messages"),
    ),
    Operation(
        "DELETE /v1/labels/{id} (on every conversation)",
        "L5",
        lambda w: w.api("catalog", "DELETE", f"/v1/labels/{w.label_id}"),
    ),
    Operation(
        "DELETE /v1/contact-tags/{id} (on every contact)",
        "C12",
        lambda w: w.api("contacts", "DELETE", f"/v1/contact-tags/{w.tags['vip']}"),
    ),
]


def _segment_event(w: World) -> Any:
    """functions/cdp_segments' handler given one `contact.updated` event (the incremental membership)."""
    import importlib

    detail = {"organization_id": w.org, "event_type": "contact.updated", "data": {"contact_id": w.contact_ids[-3]}}
    record = {"messageId": "m1", "body": json.dumps({"detail": detail})}
    resp = importlib.import_module("functions.cdp_segments.app").handler({"Records": [record]}, w.api.ctx)
    if resp["batchItemFailures"]:
        raise ApiError(f"cdp_segments failed the record: {resp}")
    return resp


def _create_segment(w: World) -> Any:
    body = {"name": "customers", "rules": {"field": "lifecycle_stage", "op": "eq", "value": "customer"}}
    seg = w.api("cdp", "POST", "/v1/cdp/segments", body)
    w.segment_id = seg["data"]["id"]
    return seg


# Measuring --------------------------------------------------------------------------------------------------------
CAP_SECONDS = 20.0  # an operation predicted to take longer on the fake is extrapolated, not run
# The prediction is the previous size's time scaled linearly, times this: work that grows with the data costs the fake
# more than linearly (every write into a partition of 10^6 keys moves its sorted key list).
CAP_GROWTH = 3.0


@dataclass
class Cost:
    reads: int = 0
    writes: int = 0
    calls: int = 0
    error: str = ""
    seconds: float = 0.0
    extrapolated: bool = False
    rows: int | None = None  # items a list answered (its `data`)


def _extrapolate(size: int, earlier: list[tuple[int, Cost]]) -> Cost:
    """A straight line through the two largest earlier sizes (or through the origin and one)."""
    (n1, c1), (n2, c2) = ((0, Cost()), earlier[-1]) if len(earlier) < 2 else (earlier[-2], earlier[-1])

    def line(a: int, b: int) -> int:
        return round(b + (b - a) * (size - n2) / (n2 - n1))

    return Cost(
        reads=line(c1.reads, c2.reads),
        writes=line(c1.writes, c2.writes),
        calls=line(c1.calls, c2.calls),
        seconds=c2.seconds * size / n2,
        extrapolated=True,
    )


def measure(
    size: int,
    only: Sequence[str] = (),
    earlier: dict[int, dict[str, Cost]] | None = None,
    jobs: dict[int, dict[str, JobCost]] | None = None,
) -> dict[str, Cost]:
    """Every operation once against an organization of `size` contacts: its items read and written. An operation
    that `earlier` results predict to take over CAP_SECONDS here is extrapolated from them instead. With `jobs`, the
    jobs of JOBS are then run over the same organization (`jobs[size]`)."""
    out: dict[str, Cost] = {}
    earlier = earlier or {}
    with _environment():
        world = build_world(size)
        for op in OPERATIONS:
            if only and not any(o in op.name for o in only):
                continue
            before = [(n, r[op.name]) for n, r in sorted(earlier.items()) if op.name in r and not r[op.name].error]
            if before and before[-1][1].seconds * size / before[-1][0] * CAP_GROWTH > CAP_SECONDS:
                out[op.name] = _extrapolate(size, before)
                continue
            cost = Cost()
            start = time.perf_counter()
            with world.fake.metered() as meter:
                try:
                    answer = op.run(world)
                    if isinstance(answer, dict) and isinstance(answer.get("data"), list):
                        cost.rows = len(answer["data"])
                except ApiError as err:
                    cost.error = str(err)
            cost.seconds = time.perf_counter() - start
            cost.reads, cost.writes, cost.calls = meter.reads, meter.writes, sum(meter.calls.values())
            out[op.name] = cost
        if jobs is not None:
            jobs[size] = measure_jobs(world, size, jobs)
    return out


# Jobs: items per chunk and chunks, per organization size -----------------------------------------------------------
JOB_CAP_SECONDS = 60.0  # a job predicted to run longer on the fake is extrapolated from the previous size


@dataclass
class JobCost:
    chunks: int = 0
    reads: int = 0  # the most items one chunk read
    writes: int = 0  # the most items one chunk wrote
    error: str = ""
    seconds: float = 0.0
    extrapolated: bool = False


@dataclass
class Job:
    kind: str  # the job kind, as in docs/data-model.md "Jobs"
    pattern: str
    start: Callable[[World], str]  # starts it over the world's data → the job id


def _started(kind: str) -> Callable[[World], str]:
    def start(w: World) -> str:
        from switchboard.jobs import service
        from switchboard.store import get_store

        return service.start(get_store(), kind, w.org)

    return start


def _segment_build(w: World) -> str:
    body = {"name": "leads", "rules": {"field": "lifecycle_stage", "op": "eq", "value": "lead"}}
    return str(w.api("cdp", "POST", "/v1/cdp/segments", body)["data"]["job_id"])


JOBS = [
    Job("segment.build", "D9a", _segment_build),
    Job("contacts.search_reindex", "C8a", _started("contacts.search_reindex")),
    Job("contacts.consent_backfill", "C13a", _started("contacts.consent_backfill")),
    Job("conversations.assignee_reindex", "M7a", _started("conversations.assignee_reindex")),
]


def measure_jobs(w: World, size: int, earlier: dict[int, dict[str, JobCost]]) -> dict[str, JobCost]:
    """Every job of JOBS run to its end over the world's data, one chunk at a time (the consumer's `run_chunk`):
    the items its costliest chunk read and wrote, and its number of chunks. A job that `earlier` results predict to
    take over JOB_CAP_SECONDS is extrapolated (chunks in proportion to the size, the same cost per chunk)."""
    from switchboard.jobs import service
    from switchboard.store import get_store

    out: dict[str, JobCost] = {}
    for job in JOBS:
        before = [(n, r[job.kind]) for n, r in sorted(earlier.items()) if job.kind in r and not r[job.kind].error]
        if before and before[-1][1].seconds * size / before[-1][0] * CAP_GROWTH > JOB_CAP_SECONDS:
            n, last = before[-1]
            chunks, seconds = round(last.chunks * size / n), last.seconds * size / n
            out[job.kind] = JobCost(chunks, last.reads, last.writes, seconds=seconds, extrapolated=True)
            continue
        cost, start, outcome = JobCost(), time.perf_counter(), ""
        try:
            job_id = job.start(w)
            for seq in range(10 * size + 100):
                with w.fake.metered() as meter:
                    outcome = service.run_chunk(get_store(), job_id, seq, send_next=False)
                cost.chunks += 1
                cost.reads, cost.writes = max(cost.reads, meter.reads), max(cost.writes, meter.writes)
                if outcome != "chunk":
                    break
            if outcome != "completed":
                cost.error = f"ended {outcome!r}"
        except ApiError as err:
            cost.error = str(err)
        cost.seconds = time.perf_counter() - start
        out[job.kind] = cost
    return out


def report_jobs(results: dict[int, dict[str, JobCost]], out: Callable[[str], None] = print) -> None:
    """The jobs' table: chunks at each size (they grow with the data) and the most items one chunk read and wrote
    (flat: `FAIL` when the largest size's chunk costs more than RATIO_LIMIT times the smallest's)."""
    sizes = sorted(results)
    if not sizes or not results[sizes[0]]:
        return
    lo, top = _exp(sizes[0]), _exp(sizes[-1])
    chunks = " | ".join(f"chunks@{_exp(s)}" for s in sizes)
    out(f"job | pattern | {chunks} | reads/chunk@{lo} | reads/chunk@{top} | writes/chunk@{lo} | writes/chunk@{top} "
        f"| ratio per chunk | result")  # fmt: skip
    for job in JOBS:
        costs = [results[s].get(job.kind) for s in sizes]
        if any(c is None for c in costs):
            continue
        first, last = costs[0], costs[-1]
        assert first is not None and last is not None
        errors = [c.error for c in costs if c and c.error]
        r = max(ratio(first.reads, last.reads), ratio(first.writes, last.writes))
        verdict = "ERROR" if errors else ("PASS" if r <= RATIO_LIMIT else "FAIL")
        cells = " | ".join(f"~{c.chunks}" if c and c.extrapolated else str(c.chunks if c else "") for c in costs)
        out(f"{job.kind} | {job.pattern} | {cells} | {first.reads} | {last.reads} | {first.writes} | {last.writes} "
            f"| {r:.2f} | {verdict}")  # fmt: skip
        for e in dict.fromkeys(errors):
            out(f"  error: {e}")


@contextmanager
def _environment() -> Iterator[None]:
    """The functions' environment on a fresh fake table, with SQS and EventBridge accepting everything."""
    queue = FakeQueue()
    with bench_env(FakeDynamoDB()):
        from switchboard import aws

        for name in ("sqs", "events"):
            aws._clients[name] = queue
        yield


def ratio(small: int, large: int) -> float:
    return large / small if small else (1.0 if not large else float(large))


def _cell(cost: Cost, attr: str) -> str:
    value = getattr(cost, attr)
    return f"~{value}" if cost.extrapolated else str(value)


def report(results: dict[int, dict[str, Cost]], out: Callable[[str], None] = print) -> float:
    """The table (`|`-separated; `~n` = extrapolated; `rows` = the items a list answered at the largest size, so a
    filtered page that stops at its read budget shows as a short page); the worst request ratio (reads or writes,
    largest size over smallest). Every request over RATIO_LIMIT is a `FAIL` line, one that errs an `ERROR` line."""
    sizes = sorted(results)
    lo = sizes[0]
    heads = " | ".join(f"reads@{_exp(s)}" for s in sizes)
    wheads = " | ".join(f"writes@{_exp(s)}" for s in sizes)
    top = _exp(sizes[-1])
    out(f"operation | pattern | {heads} | {wheads} | ratio {top}/{_exp(lo)} | result | rows@{top}")
    worst = 0.0
    for op in OPERATIONS:
        if op.name not in results[lo]:
            continue
        costs = [results[s][op.name] for s in sizes]
        errors = [c.error for c in costs if c.error]
        r = max(ratio(costs[0].reads, costs[-1].reads), ratio(costs[0].writes, costs[-1].writes))
        if not errors:
            worst = max(worst, r)
        short = [c.rows for c in costs if op.rows is not None and c.rows is not None and c.rows < op.rows]
        verdict = "ERROR" if errors else ("PASS" if r <= RATIO_LIMIT and not short else "FAIL")
        if short and not errors:
            verdict += f" (short page: {min(short)} of {op.rows} matches)"
        if any(c.extrapolated for c in costs) and not errors:
            verdict += " (O(N), extrapolated)"
        reads = " | ".join(_cell(c, "reads") for c in costs)
        writes = " | ".join(_cell(c, "writes") for c in costs)
        rows = "-" if costs[-1].rows is None else str(costs[-1].rows)
        out(f"{op.name} | {op.pattern} | {reads} | {writes} | {r:.2f} | {verdict} | {rows}")
        for e in dict.fromkeys(errors):
            out(f"  error: {e}")
    return worst


def _exp(size: int) -> str:
    """1000 → 1e3; other sizes as they are."""
    text = f"{size:.0e}".replace("e+0", "e").replace("e+", "e")
    return text if float(text) == size else str(size)


# Key distribution -------------------------------------------------------------------------------------------------
@dataclass
class Spread:
    phase: str
    writes: int
    keys: int
    hottest: str
    share: float
    top: list[tuple[str, int]] = field(default_factory=list)  # the hottest partition-key values and their writes


def _shape(key: str, org: str) -> str:
    """A partition-key value with the organization's id written `<org>` (ids of other items kept)."""
    return key.replace(org, "<org>")


def key_distribution(burst: int, size: int) -> list[Spread]:
    """The writes per partition-key value (table PK and index PKs) of three phases: `burst` sends (`messages.send`,
    the service of POST /v1/messages, to `size` contacts in turn, with the organization's send window raised: the
    check is where writes land, not how fast they come), their deliveries (message_sender's `deliver`, then the
    usage meter's `count_record` on each usage record) and `burst` webhook deliveries (fan-out of `burst` events to
    one endpoint)."""
    from switchboard.billing.usage import count_record
    from switchboard.messaging import messages
    from switchboard.store import get_store

    out: list[Spread] = []
    with _environment():
        w = build_world(size)
        store = get_store()
        org_pk = f"ORG#{w.org}"
        from switchboard.api.auth import AuthContext
        from switchboard.messaging.models import SendMessage

        auth = AuthContext("api_key", "key_b", None, w.org, "owner", "key_b")
        sent: list[str] = []
        window, messages.SENDS_PER_MINUTE = messages.SENDS_PER_MINUTE, 2 * burst + 10  # where writes land, not how fast
        with w.fake.metered() as meter:
            for n in range(burst):
                to = f"+{_phone(RARE + 1 + n % len(w.contact_ids))}"
                body = SendMessage.model_validate({"channel_id": w.channel_id, "to": to, "text": {"body": f"m{n}"}})
                sent.append(messages.send(store, auth, body).id)
        messages.SENDS_PER_MINUTE = window
        out.append(_spread("sends (messages.send)", meter, w.org))
        with w.fake.metered() as meter:
            for message_id in sent:
                messages.deliver(store, w.org, message_id)
            for (pk, sk), raw in list(w.fake.items.items()):
                if pk.startswith(f"{org_pk}#") and sk.startswith("USAGEREC#"):
                    from switchboard.store.table import deserialize

                    count_record(store, deserialize(raw))
        out.append(_spread("message deliveries (deliver + usage meter)", meter, w.org))
    return out


def _spread(phase: str, meter: Meter, org: str) -> Spread:
    writes = sum(v for k, v in meter.keys.items() if ":" not in k.split("#")[0])  # table writes (index keys aside)
    hottest, count = max(meter.keys.items(), key=lambda kv: kv[1]) if meter.keys else ("-", 0)
    top = [(_shape(k, org), n) for k, n in meter.keys.most_common(TOP_KEYS)]
    return Spread(phase, writes, len(meter.keys), _shape(hottest, org), count / writes if writes else 0.0, top)


def shard_count() -> int:
    from switchboard.store import shards

    with _environment():
        return shards.count()


def report_spread(spreads: list[Spread], burst: int, out: Callable[[str], None] = print) -> float:
    """The key-distribution lines; the worst hottest-key share."""
    shards = shard_count()
    limit = SHARE_FACTOR / shards
    out(
        f"key distribution: burst of {burst:,}; limit = 1 / {shards} shards x {SHARE_FACTOR} = {limit:.3f} of a "
        "phase's writes on one partition-key value (table PK or index PK)"
    )
    out("phase | writes | distinct keys | hottest key | share | result")
    for s in spreads:
        verdict = "PASS" if s.share <= limit else "FAIL"
        out(f"{s.phase} | {s.writes} | {s.keys} | {s.hottest} | {s.share:.3f} | {verdict}")
    for s in spreads:
        writes = max(s.writes, 1)
        counts = ", ".join(f"{k} {n} ({n / writes:.3f})" for k, n in s.top)
        out(f"  {s.phase}, writes per partition-key value: {counts}")
    return max((s.share for s in spreads), default=0.0)


# Key distribution of webhook deliveries ---------------------------------------------------------------------------
DELIVERY_ENDPOINTS = 4  # a burst of `burst` deliveries: burst / 4 events to 4 endpoints


def delivery_distribution(burst: int, size: int) -> tuple[Spread, int]:
    """Writes per partition-key value (DeliveriesTable's PK and its index PKs, the pacing item) of `burst` webhook
    deliveries: the real fan-out handler (`webhook_fanout`, batches of 10 events) over `burst / 4` events to 4
    endpoints, then one sender attempt of each delivery (`webhook_sender`, a 200 answer), which moves it from the
    pending to the succeeded status list and writes its attempt."""
    import os

    from functions.webhook_fanout.app import handler as fanout_handler
    from functions.webhook_sender.app import handler as sender_handler
    from switchboard.config import reset_settings
    from switchboard.webhooks import delivery as sender
    from switchboard.webhooks import repository

    with _environment():
        # Where writes land, not how fast they come: the organization's pace raised so every delivery is due at once.
        os.environ["WEBHOOK_TENANT_RATE"] = str(10 * burst + 10)
        reset_settings()
        shards = repository.shards()
        w = build_world(size)
        for n in range(DELIVERY_ENDPOINTS - 1):
            api_url = {"url": f"https://93.184.216.34/in/{n}"}
            w.api("webhooks", "POST", f"{WEBHOOKS}/endpoints", api_url)
        queued: list[dict[str, Any]] = []

        class Capture(FakeQueue):
            def send_message_batch(self, **kw: Any) -> dict[str, Any]:
                queued.extend(kw["Entries"])
                return super().send_message_batch(**kw)

        from switchboard import aws

        aws._clients["sqs"] = Capture()
        real_post = sender.post
        sender.post = lambda *a, **k: sender.HttpResult(200, 1)  # type: ignore[assignment]
        sender_checked = sender.netguard.checked_address
        sender.netguard.checked_address = lambda target, allow_local=False: "93.184.216.34"  # type: ignore[assignment]
        try:
            with w.fake.metered() as meter:
                events = [
                    {
                        "body": json.dumps(
                            {
                                "detail": {
                                    "event_id": f"evt_burst_{n}",
                                    "event_type": "message.sent",
                                    "organization_id": w.org,
                                    "occurred_at": "2026-11-01T00:00:00.000Z",
                                    "data": {"id": f"m{n}"},
                                }
                            }
                        ),
                        "messageId": f"e{n}",
                    }
                    for n in range(burst // DELIVERY_ENDPOINTS)
                ]
                for start in range(0, len(events), 10):
                    assert fanout_handler({"Records": events[start : start + 10]}, Ctx())["batchItemFailures"] == []
                records = [
                    {"body": e["MessageBody"], "messageId": f"d{n}", "receiptHandle": f"r{n}"}
                    for n, e in enumerate(queued)
                ]
                for start in range(0, len(records), 10):
                    assert sender_handler({"Records": records[start : start + 10]}, Ctx())["batchItemFailures"] == []
        finally:
            sender.post = real_post  # type: ignore[assignment]
            sender.netguard.checked_address = sender_checked  # type: ignore[assignment]
            os.environ.pop("WEBHOOK_TENANT_RATE", None)
            reset_settings()
    return _spread(f"webhook deliveries (fan-out + one attempt, {len(queued):,})", meter, w.org), shards


def report_delivery_spread(spread: Spread, shards: int, out: Callable[[str], None] = print) -> float:
    """The delivery key-distribution lines; the hottest key's share over its limit (> 1 fails)."""
    limit = SHARE_FACTOR / shards
    verdict = "PASS" if spread.share <= limit else "FAIL"
    out(
        f"delivery key distribution: limit = 1 / {shards} shards (WEBHOOK_DELIVERY_SHARDS) x {SHARE_FACTOR} = "
        f"{limit:.3f} of the writes on one partition-key value (table PK or index PK)"
    )
    out("phase | writes | distinct keys | hottest key | share | result")
    out(f"{spread.phase} | {spread.writes} | {spread.keys} | {spread.hottest} | {spread.share:.3f} | {verdict}")
    return spread.share / limit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.scale")
    parser.add_argument("--runs", type=int, default=1, help="ignored: counts do not vary between runs")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, burst {QUICK_BURST}")
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--only", nargs="+", default=[], help="operations whose name contains one of these")
    parser.add_argument("--burst", type=int, help=f"sends and deliveries of the key-distribution check ({BURST:,})")
    parser.add_argument("--no-jobs", action="store_true", help="skip the jobs' chunks table")
    args, _ = parser.parse_known_args(argv)
    sizes = sorted(args.sizes or (QUICK_SIZES if args.quick else SIZES))
    burst = args.burst if args.burst is not None else (QUICK_BURST if args.quick else BURST)
    results: dict[int, dict[str, Cost]] = {}
    jobs: dict[int, dict[str, JobCost]] | None = None if args.no_jobs or args.only else {}
    for size in sizes:
        start = time.perf_counter()
        results[size] = measure(size, args.only, results, jobs)
        print(f"# {size:,} contacts measured in {time.perf_counter() - start:.1f} s", flush=True)
    hottest, delivery_over = 0.0, False
    if burst:
        start = time.perf_counter()
        spreads = key_distribution(burst, sizes[0])
        print(f"# key distribution measured in {time.perf_counter() - start:.1f} s", flush=True)
        hottest = report_spread(spreads, burst)
        start = time.perf_counter()
        delivery_spread, delivery_shards = delivery_distribution(burst, sizes[0])
        print(f"# delivery key distribution measured in {time.perf_counter() - start:.1f} s", flush=True)
        delivery_over = report_delivery_spread(delivery_spread, delivery_shards) > 1
    lines: list[str] = []

    def show(line: str) -> None:
        print(line)
        lines.append(line)

    if jobs:
        report_jobs(jobs, show)
    worst = report(results, show)
    print(f"scale: worst request ratio {worst:.2f}")
    failed = any(" | FAIL" in line or " | ERROR" in line for line in lines)
    over = failed or worst > RATIO_LIMIT or hottest > SHARE_FACTOR / shard_count() or delivery_over
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
