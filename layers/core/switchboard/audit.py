"""Audit log entries: who did what, when, with which credential; written in the transaction of the change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.ids import new_ulid, ulid_bound
from switchboard.store import Put, keys

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
) -> Put:
    ulid = new_ulid()
    now = clock.now()
    organization_id = org_id or auth.org_id
    return Put(
        item={
            "PK": keys.org_pk(organization_id),
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
    start_key: dict[str, Any] | None,
    since: str | None = None,
    until: str | None = None,
    action: str | None = None,
    actor_id: str | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Newest first. The time range is a key condition (ULIDs sort by time); the other filters filter that range."""
    low = "AUDIT#" + (ulid_bound(clock.parse_iso_input(since, "query.since"), high=False) if since else "")
    high = "AUDIT#" + (ulid_bound(clock.parse_iso_input(until, "query.until"), high=True) if until else "~")
    filters = {"action": action, "actor_id": actor_id, "target_type": target_type, "target_id": target_id}
    return store.filtered_page(  # type: ignore[no-any-return]
        keys.org_pk(org_id),
        sk_between=(low, high),
        forward=False,
        limit=limit,
        start_key=start_key,
        filters={k: v or None for k, v in filters.items()},
    )
