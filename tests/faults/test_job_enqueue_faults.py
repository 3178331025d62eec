"""No request fails after its write committed when the job it started cannot be queued (switchboard.jobs.service,
`enqueue_committed`): with SQS refusing every SendMessage to JobsQueue, each route that starts a job — a tag rename
or delete, a contact merge (ContactsFunction), a label delete (CatalogFunction), a segment create, update or delete
(CdpFunction), a webhook recovery (WebhooksFunction) — still answers its 2xx; the job is committed and marked due,
the next sweep (`resume_stalled`, the JobsFunction schedule) sends its message, and the job runs to its end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from switchboard import clock
from switchboard.contacts import merge as merging
from switchboard.jobs import service
from switchboard.store import get_store, keys
from tests.faults.injection import aws_faults
from tests.integration.support import Api, JobsQueue, run_jobs
from tests.integration.test_metrics import emf_lines, totals

PRO = {"field": "attributes.plan", "op": "eq", "value": "pro"}


def ok(resp: httpx.Response, status: int = 200) -> Any:
    assert resp.status_code == status, resp.text
    return resp.json()["data"] if resp.content else None


def active_jobs() -> set[str]:
    return {row["id"] for row in get_store().query_all(keys.JOBS_ACTIVE, index="GSI1")}


@dataclass(frozen=True)
class Case:
    name: str
    prepare: Callable[[Api], dict[str, Any]]
    act: Callable[[Api, dict[str, Any]], httpx.Response]
    status: int
    done: Callable[[Api, dict[str, Any]], None]


def _tagged(api: Api) -> dict[str, Any]:
    person = ok(api.post("/v1/contacts", json={"name": "Tagged", "email": "tagged@example.com"}), 201)
    tag = ok(api.post(f"/v1/contacts/{person['id']}/tags", json={"name": "Gold"}), 201)
    return {"contact": person["id"], "tag": tag["tag_id"]}


def _tags(api: Api, ctx: dict[str, Any]) -> list[str]:
    return list(ok(api.get(f"/v1/contacts/{ctx['contact']}"))["tags"])


def _two_people(api: Api) -> dict[str, Any]:
    target = ok(api.post("/v1/contacts", json={"name": "Ada", "email": "ada@example.com"}), 201)
    source = ok(api.post("/v1/contacts", json={"name": "Lin", "email": "lin@example.com"}), 201)
    ok(api.post(f"/v1/contacts/{source['id']}/notes", json={"body": "a note"}), 201)
    return {"target": target["id"], "source": source["id"]}


def _merged(api: Api, ctx: dict[str, Any]) -> None:
    api.assert_error(api.get(f"/v1/contacts/{ctx['source']}"), 404, "not_found")
    notes = ok(api.get(f"/v1/contacts/{ctx['target']}/notes"))
    assert [n["body"] for n in notes] == ["a note"]


def _segment(api: Api) -> dict[str, Any]:
    seg = ok(api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}), 201)
    run_jobs(api)
    return {"segment": seg["id"]}


def _ready(api: Api, ctx: dict[str, Any]) -> None:
    assert ok(api.get(f"/v1/cdp/segments/{ctx['segment']}"))["status"] == "ready"


def _endpoint(api: Api) -> dict[str, Any]:
    endpoint = ok(api.post("/v1/settings/developer/webhooks/endpoints", json={"url": "http://127.0.0.1:9/hook"}), 201)
    return {"endpoint": endpoint["id"], "since": clock.now_iso()}


CASES = [
    Case(
        "tag rename",
        _tagged,
        lambda api, c: api.patch(f"/v1/contact-tags/{c['tag']}", json={"name": "Platinum"}),
        200,
        lambda api, c: _check(_tags(api, c) == ["Platinum"]),
    ),
    Case(
        "tag delete",
        _tagged,
        lambda api, c: api.delete(f"/v1/contact-tags/{c['tag']}"),
        204,
        lambda api, c: _check(_tags(api, c) == []),
    ),
    Case(
        "contact merge",
        _two_people,
        lambda api, c: api.post(f"/v1/contacts/{c['target']}/merge", json={"from_contact_id": c["source"]}),
        200,
        _merged,
    ),
    Case(
        "label delete",
        lambda api: {"label": ok(api.post("/v1/labels", json={"name": "VIP"}), 201)["id"]},
        lambda api, c: api.delete(f"/v1/labels/{c['label']}"),
        204,
        lambda api, c: _check(api.get(f"/v1/labels/{c['label']}").status_code == 404),
    ),
    Case(
        "segment create",
        lambda api: {},
        lambda api, c: api.post("/v1/cdp/segments", json={"name": "Pro", "rules": PRO}),
        201,
        lambda api, c: None,
    ),
    Case(
        "segment update",
        _segment,
        lambda api, c: api.patch(f"/v1/cdp/segments/{c['segment']}", json={"rules": {**PRO, "value": "max"}}),
        200,
        _ready,
    ),
    Case(
        "segment delete",
        _segment,
        lambda api, c: api.delete(f"/v1/cdp/segments/{c['segment']}"),
        204,
        lambda api, c: _check(api.get(f"/v1/cdp/segments/{c['segment']}").status_code == 404),
    ),
    Case(
        "webhook recover",
        _endpoint,
        lambda api, c: api.post(
            f"/v1/settings/developer/webhooks/endpoints/{c['endpoint']}/recover", json={"since": c["since"]}
        ),
        202,
        lambda api, c: None,
    ),
]


def _check(condition: bool) -> None:
    assert condition


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_job_whose_message_sqs_refuses_still_answers_and_runs_after_the_sweep(
    api: Api, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: Case
):
    monkeypatch.setattr(merging, "INLINE_CHUNKS", 0)  # the merge leaves all its chunks to the queue
    ctx = case.prepare(api)
    before = active_jobs()
    capsys.readouterr()
    with aws_faults(monkeypatch) as faults:
        faults.fail("sqs", "SendMessage", "InternalError", status=500)
        response = case.act(api, ctx)
        assert response.status_code == case.status, response.text
        assert faults.injected["SendMessage"] >= 1  # the send was tried (and retried) and refused
    assert totals(emf_lines(capsys.readouterr().out)).get("JobEnqueueFailures") == 1
    (job_id,) = active_jobs() - before
    job = service.get_job(get_store(), job_id)
    assert job is not None and job["status"] == "running" and job["GSI1SK"] == f"{service.DUE}#{job_id}"
    assert JobsQueue(api).receive() == []  # nothing reached the queue

    assert service.resume_stalled(get_store()) == [job_id]  # the next sweep, without waiting STALLED_AFTER
    run_jobs(api)
    finished = service.get_job(get_store(), job_id)
    assert finished is not None and finished["status"] == "completed", finished
    case.done(api, ctx)


def test_a_merge_chunk_that_fails_in_the_request_is_left_to_the_job(api: Api, monkeypatch: pytest.MonkeyPatch):
    """The merge is committed before its first chunks run in the request: a chunk failing there (the table busy)
    does not fail the request; the job runs that chunk again from the queue."""
    ctx = _two_people(api)
    original = service.run_chunk
    calls: list[int] = []

    def busy_first(store: Any, job_id: str, seq: int, *, send_next: bool = True) -> str:
        calls.append(seq)
        if len(calls) == 1:
            raise RuntimeError("the table is busy")
        return original(store, job_id, seq, send_next=send_next)

    monkeypatch.setattr(service, "run_chunk", busy_first)
    merged = api.post(f"/v1/contacts/{ctx['target']}/merge", json={"from_contact_id": ctx["source"]})
    assert merged.status_code == 200, merged.text
    assert calls == [0]
    monkeypatch.setattr(service, "run_chunk", original)
    assert run_jobs(api) >= 1
    _merged(api, ctx)
