"""Audit log entries: who did what, when, with which credential; written in the transaction of the change.

An entry `AUDIT#<ulid>` lives in the write shard of its ULID (`ORG#<org>#<n>`, switchboard.store.shards): an
organization writes them at the rate of its changes. The audit log is an ordered merge of every shard and the legacy
partition `ORG#<org>` (entries written before sharding)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.ids import new_ulid, ulid_range
from switchboard.store import Put, shards

AUDIT_RETENTION = timedelta(days=400)


def audit_put(
    auth: AuthContext,
    action: str,
    target_type: str,
    target_id: str,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    org_id: str | None = None,
    shard_count: int | None = None,
) -> Put:
    """The entry's Put for the change's transaction; `shard_count`: the stage's `TenantShards` when written from
    outside the functions (an operator's tool), which read it from their settings."""
    ulid = new_ulid()
    now = clock.now()
    organization_id = org_id or auth.org_id
    return Put(
        item={
            "PK": shards.pk(organization_id, ulid, shard_count),
            "SK": f"AUDIT#{ulid}",
            "entity": "AuditLog",
            "id": f"aud_{ulid.lower()}",
            "organization_id": organization_id,
            "action": action,
            "target_type": target_type,
            "target_id": target_id,
            "actor_type": auth.principal_type,
            "actor_id": auth.principal_id,
            "actor_user_id": auth.user_id,
            "before": before,
            "after": after,
            "created_at": clock.iso(now),
            "ttl": clock.epoch(now + AUDIT_RETENTION),
        },
        condition="attribute_not_exists(PK)",
    )


def list_audit(
    store: Any,
    org_id: str,
    *,
    limit: int,
    state: dict[str, Any] | None,
    since: str | None = None,
    until: str | None = None,
    action: str | None = None,
    actor_id: str | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Newest first, from the position `state` (what a cursor carries; None: the start), and the next position. The
    time range is the key range of every partition (ULIDs sort by time); the other filters are applied while
    merging (`shards.merged_state_page`)."""
    filters = {"action": action, "actor_id": actor_id, "target_type": target_type, "target_id": target_id}
    wanted = {k: v for k, v in filters.items() if v}

    def keep(entry: dict[str, Any]) -> bool:
        return all(entry.get(k) == v for k, v in wanted.items())

    return shards.merged_state_page(
        store,
        state,
        pks=shards.all_pks(org_id),
        index=None,
        within=ulid_range("AUDIT#", since, until),
        forward=False,
        limit=limit,
        keep=keep if wanted else None,
    )
