"""The phone check (job kind `contacts.phone_check`, switchboard.jobs): which stored numbers today's rules refuse.

Numbers entering the API are validated (switchboard.contacts.identifiers: a valid number for its country, national
forms only with the organization's `default_phone_region`). Numbers stored before that rule, or reported by a
provider (read as the provider's word), may not pass it: the check lists them and changes nothing (a number is
someone's identity; guessing another country for it would merge or split people).

`POST /v1/contacts/phone-checks` starts the job (one item, one message: O(1) for the request). Each chunk reads one
page of `PAGE` contacts of the organization's contact list (`repo.walk_page`: GSI1, its legacy partition and every
shard; the checkpoint `{"cursor"}` is the walk's position), checks every `phone` / `whatsapp` / `wa_id` identity of
each and writes one finding item per refused number (BatchWriteItem, no condition: a chunk run again writes the
same items). A finding is a child of its contact, `ORG#<org>` / `CONTACT#<ct>#PHONECHECK#<job>#<type>#<value>`, so a
contact's erasure deletes it with the contact's other children (it holds the person's number); GSI1
`ORG#<org>#PHONECHECK#<job>` / `<ct>#<type>#<value>` lists a check's findings. The job's `progress` counts
`contacts`, `numbers` and `invalid`; findings and the job record expire after `jobs.JOB_RETENTION` (TTL).
`GET /v1/contacts/phone-checks/{checkID}` reads the job (another organization's is 404), and
`GET …/{checkID}/numbers` lists the findings a page at a time (cursor).
"""

from __future__ import annotations

from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.contacts import models
from switchboard.contacts import repository as repo
from switchboard.contacts.identifiers import NUMBER_TYPES, stored_number_problem
from switchboard.errors import NotFound
from switchboard.jobs import service as jobs
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.store import Store, keys

KIND = "contacts.phone_check"
PAGE = 100  # contacts per chunk: one page of the walk, at most 4 BatchWriteItems of findings
Item = dict[str, Any]


def findings_pk(org: str, check_id: str) -> str:
    """The GSI1 partition of a check's findings."""
    return f"ORG#{org}#PHONECHECK#{check_id}"


def _finding(item: Item) -> models.InvalidNumber:
    # the contact from the key: a merge moves a finding under the contact it merged into, attributes and all
    contact_id = str(item["SK"]).split("#", 2)[1]
    return models.InvalidNumber.model_validate({**item, "contact_id": contact_id})


def start(store: Store, auth: AuthContext) -> models.PhoneCheck:
    check_id = jobs.start(store, KIND, auth.org_id)
    return get(store, auth, check_id)


def _job(store: Store, auth: AuthContext, check_id: str) -> Item:
    job = jobs.get_job(store, check_id) if check_id.startswith("job_") else None
    if job is None or job.get("kind") != KIND or job.get("organization_id") != auth.org_id:
        raise NotFound("No such phone check.")
    return job


def get(store: Store, auth: AuthContext, check_id: str) -> models.PhoneCheck:
    job = _job(store, auth, check_id)
    progress = job.get("progress") or {}
    return models.PhoneCheck(
        id=job["id"],
        status=job["status"],
        contacts_checked=int(progress.get("contacts", 0)),
        numbers_checked=int(progress.get("numbers", 0)),
        invalid_numbers=int(progress.get("invalid", 0)),
        created_at=job["created_at"],
        updated_at=job["updated_at"],
        finished_at=job.get("finished_at"),
    )


def list_invalid(
    store: Store, auth: AuthContext, check_id: str, *, limit: int, cursor: str | None
) -> tuple[list[models.InvalidNumber], str | None]:
    _job(store, auth, check_id)
    fingerprint = query_fingerprint("phone-check", {"check": check_id})
    pk = findings_pk(auth.org_id, check_id)
    rows, next_cursor = cursor_page(store, auth.org_id, fingerprint, cursor, pk=pk, index="GSI1", limit=limit)
    return [_finding(r) for r in rows], next_cursor


def run_chunk(store: Store, job: Item) -> jobs.Chunk:
    org, check_id = str(job["organization_id"]), str(job["id"])
    contacts, following = repo.walk_page(store, org, (job.get("checkpoint") or {}).get("cursor"), limit=PAGE)
    ttl = clock.epoch(clock.now() + jobs.JOB_RETENTION)
    numbers, findings = 0, []
    for contact in contacts:
        for ident in contact.get("identities") or []:
            if ident.get("type") not in NUMBER_TYPES:
                continue
            numbers += 1
            value = str(ident.get("value") or "")
            problem = stored_number_problem(value)
            if problem is None:
                continue
            suffix = f"{ident['type']}#{value}"
            findings.append(
                {
                    **keys.key(keys.org_pk(org), f"CONTACT#{contact['id']}#PHONECHECK#{check_id}#{suffix}"),
                    "GSI1PK": findings_pk(org, check_id),
                    "GSI1SK": f"{contact['id']}#{suffix}",
                    "entity": "PhoneCheckFinding",
                    "contact_id": contact["id"],
                    "type": ident["type"],
                    "value": value,
                    "problem": problem,
                    "ttl": ttl,
                }
            )
    store.batch_put(findings)
    progress = {"contacts": len(contacts), "numbers": numbers, "invalid": len(findings)}
    return jobs.Chunk({"cursor": following}, progress, done=following is None)
