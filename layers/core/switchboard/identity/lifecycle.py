"""Deleting and restoring an organization (CONVENTIONS "Tenant safety and data lifecycle").

`DELETE /v1/organization` (an owner's session, `{"confirm": "<name>"}`) marks the organization `pending_deletion`
with `purge_at` 30 days ahead and suspends everything that acts for it without a session: each API key's credential
gets `suspended` (the authorizer answers 401), each membership row (both copies) gets `org_status` (the authorizer
hands it to the API, where only `when_pending` routes act), and each enabled webhook endpoint is disabled with the
reason `organization_pending_deletion` (fan-out skips it, the sender cancels what was queued for it). Provider
callbacks and the webhook portal check the organization item itself (`repository.organization_active`).
`POST /v1/organization/restore` undoes exactly that within the window. Once `purge_at` has passed,
`switchboard.jobs.purge` erases the rest.

The suspension touches the organization's configuration items (keys, members, endpoints), never its data; repeating
a DELETE on a pending organization runs it again, so an interrupted request is finished by its retry.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.identity import models
from switchboard.store import Store, Update, keys
from switchboard.webhooks import repository as webhooks

PURGE_WINDOW = timedelta(days=30)
PENDING = "pending_deletion"
PURGING = "purging"
SUSPENDED_REASON = "organization_pending_deletion"
Item = dict[str, Any]


def purge_due_sk(purge_at: str, org_id: str) -> str:
    return f"{purge_at}#{org_id}"


def _view(item: Item) -> models.Organization:
    return models.Organization.model_validate(item)


def delete_organization(
    store: Store, auth: AuthContext, body: models.OrganizationDeletion | None
) -> models.Organization:
    """The route admits an owner's session only (`requires("owner", sessions_only=True)`)."""
    org_id = auth.org_id
    item = store.require(keys.organization(org_id), "The organization no longer exists.", consistent=True)
    if body is None or body.confirm != item["name"]:
        raise ValidationFailed.field("body.confirm", "must be the organization's name, exactly as shown")
    status = item.get("status", "active")
    if status == PURGING:
        raise Conflict("The organization is being purged.")
    if status != PENDING:
        now = clock.now()
        purge_at = clock.iso(now + PURGE_WINDOW)
        changes = {"status": PENDING, "purge_at": purge_at, "updated_at": clock.iso(now)}
        store.transact(
            [
                Update(
                    key=keys.organization(org_id),
                    expression="SET #status = :pending, purge_at = :purge_at, deletion_requested_by = :by,"
                    " updated_at = :now, GSI1PK = :due, GSI1SK = :due_sk ADD version :one",
                    condition="attribute_exists(PK) AND attribute_not_exists(#status)",
                    names={"#status": "status"},
                    values={
                        ":pending": PENDING,
                        ":purge_at": purge_at,
                        ":by": auth.user_id,
                        ":now": changes["updated_at"],
                        ":due": keys.PURGE_DUE,
                        ":due_sk": purge_due_sk(purge_at, org_id),
                        ":one": 1,
                    },
                    error=Conflict("The organization changed meanwhile; retry."),
                ),
                audit_put(
                    auth, "organization.deletion_requested", "organization", org_id, after={"purge_at": purge_at}
                ),
            ]
        )
        item = {**item, **changes}
    _suspend(store, org_id, suspended=True)
    return _view(item)


def restore_organization(store: Store, auth: AuthContext) -> models.Organization:
    org_id = auth.org_id
    item = store.require(keys.organization(org_id), "The organization no longer exists.", consistent=True)
    if item.get("status", "active") == "active":
        raise Conflict("The organization is not pending deletion.")
    now = clock.now_iso()
    store.transact(
        [
            Update(
                key=keys.organization(org_id),
                expression="SET updated_at = :now REMOVE #status, purge_at, deletion_requested_by, GSI1PK, GSI1SK"
                " ADD version :one",
                condition="#status = :pending AND purge_at > :now",
                names={"#status": "status"},
                values={":pending": PENDING, ":now": now, ":one": 1},
                error=Conflict("The deletion window has ended; the organization can no longer be restored."),
            ),
            audit_put(auth, "organization.restored", "organization", org_id, before={"purge_at": item.get("purge_at")}),
        ]
    )
    _suspend(store, org_id, suspended=False)
    restored = {k: v for k, v in item.items() if k not in ("status", "purge_at")}
    return _view({**restored, "updated_at": now})


def _quiet_update(store: Store, key: dict[str, str], expression: str, **kw: Any) -> None:
    """One item's suspension flag; an item removed meanwhile (a key revoked, a member gone) is simply skipped."""
    with contextlib.suppress(_Gone):
        store.update(key, expression, return_values="NONE", error=_Gone(), **kw)


class _Gone(NotFound):
    pass


def _suspend(store: Store, org_id: str, *, suspended: bool) -> None:
    for rec in store.query_all(keys.org_pk(org_id), sk_prefix="APIKEY#", consistent=True):
        _quiet_update(
            store,
            keys.credential(rec["token_hash"]),
            "SET suspended = :t" if suspended else "REMOVE suspended",
            condition="attribute_exists(PK)",
            values={":t": True} if suspended else None,
        )
    for m in store.query_all(keys.org_pk(org_id), sk_prefix="MEMBER#", consistent=True):
        for key in (
            keys.member(org_id, m["user_id"]),
            {"PK": keys.user_pk(m["user_id"]), "SK": f"MEMBERSHIP#{org_id}"},
        ):
            _quiet_update(
                store,
                key,
                "SET org_status = :s" if suspended else "REMOVE org_status",
                condition="attribute_exists(PK)",
                values={":s": PENDING} if suspended else None,
            )
    now = clock.now_iso()
    for endpoint in store.query_all(keys.org_pk(org_id), sk_prefix=webhooks.ENDPOINT_PREFIX, consistent=True):
        key = webhooks.endpoint_key(org_id, endpoint["id"])
        if suspended and endpoint.get("enabled"):
            _quiet_update(
                store,
                key,
                "SET enabled = :false, disabled_reason = :reason, disabled_at = :now ADD version :one",
                condition="enabled = :true",
                values={":false": False, ":true": True, ":reason": SUSPENDED_REASON, ":now": now, ":one": 1},
            )
        elif not suspended and endpoint.get("disabled_reason") == SUSPENDED_REASON:
            _quiet_update(
                store,
                key,
                "SET enabled = :true, updated_at = :now REMOVE disabled_reason, disabled_at ADD version :one",
                condition="disabled_reason = :reason",
                values={":true": True, ":reason": SUSPENDED_REASON, ":now": now, ":one": 1},
            )
