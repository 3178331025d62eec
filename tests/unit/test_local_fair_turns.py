"""The local stack runs one Powertools resolver at a time (local/functions.py `serialize_resolvers`); its turns go
round the waiting tenants, so one tenant's burst cannot take the stack from the others (issue 29, row 4)."""

from __future__ import annotations

import threading

from local.functions import FairTurns, tenant_of


def _queued(turns: FairTurns, tenant: str, order: list[str]) -> threading.Thread:
    def run() -> None:
        turns.acquire(tenant)
        try:
            order.append(tenant)
        finally:
            turns.release()

    thread = threading.Thread(target=run, daemon=True)
    before = turns.waiting()
    thread.start()
    while turns.waiting() == before:  # it is queued, in arrival order
        threading.Event().wait(0.001)
    return thread


def test_a_burst_of_one_tenant_does_not_go_before_another_tenants_request():
    turns = FairTurns()
    turns.acquire("org:a")  # org a's first request runs; nine more of org a queue, then one of org b
    order: list[str] = []
    threads = [_queued(turns, "org:a", order) for _ in range(9)]
    threads.append(_queued(turns, "org:b", order))
    turns.release()
    for thread in threads:
        thread.join(5)
    assert order[0] == "org:b", order  # served before the rest of org a's burst
    assert order[1:] == ["org:a"] * 9


def test_tenants_take_turns_in_round_robin_and_a_holder_may_reenter():
    turns = FairTurns()
    turns.acquire("c")
    turns.acquire("c")  # re-entrant: the same thread nests
    order: list[str] = []
    threads = [_queued(turns, t, order) for t in ("a", "a", "a", "b", "b", "b")]
    turns.release()
    assert turns.waiting() == 6  # still held once
    turns.release()
    for thread in threads:
        thread.join(5)
    assert order == ["a", "b", "a", "b", "a", "b"], order


def test_the_tenant_of_a_request_is_its_organization_else_its_address():
    authorized = {"requestContext": {"authorizer": {"organization_id": "org_1", "principal_id": "key_1"}}}
    assert tenant_of(authorized) == "organization_id:org_1"
    personal = {"requestContext": {"authorizer": {"organization_id": "", "principal_id": "sess_1"}}}
    assert tenant_of(personal) == "principal_id:sess_1"
    assert tenant_of({"requestContext": {"identity": {"sourceIp": "192.0.2.1"}}}) == "ip:192.0.2.1"
