"""Organization security settings and their enforcement data.

The authorizer must not pay an extra read per request for settings, so the values it enforces are copied onto the
items it already reads: `api_key_allowed_cidrs` onto each API key's credential, `session_idle_timeout_minutes` onto
each member row and its mirror. A settings change rewrites those copies (idempotently) after the settings item.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from switchboard import clock
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict
from switchboard.identity import models
from switchboard.store import Put, Store, keys


def _settings_key(org_id: str) -> dict[str, str]:
    return {"PK": keys.org_pk(org_id), "SK": "SETTINGS#security"}


def get_security(store: Store, org_id: str) -> models.SecuritySettings:
    item = store.get(_settings_key(org_id))
    return models.SecuritySettings.model_validate(item) if item else models.SecuritySettings()


def update_security(
    store: Store, auth: AuthContext, body: models.SecuritySettingsUpdate, source_ip: str | None = None
) -> models.SecuritySettings:
    org_id = auth.org_id
    if (
        auth.principal_type == "api_key"
        and body.api_key_allowed_cidrs
        and not ip_allowed(source_ip, body.api_key_allowed_cidrs)
    ):
        raise Conflict(
            "These ranges would lock out the API key making this request; call from an allowed address or "
            "use a session.",
            details=[{"field": "body.api_key_allowed_cidrs", "source_ip": source_ip}],
        )
    current = get_security(store, org_id)
    changes = body.model_dump(exclude_none=True)
    updated = current.model_copy(update={**changes, "updated_at": clock.now_iso()})
    store.transact(
        [
            Put(item={**_settings_key(org_id), "entity": "SecuritySettings", **updated.model_dump()}),
            audit_put(
                auth,
                "settings.security_updated",
                "organization",
                org_id,
                before=current.model_dump(exclude={"updated_at"}),
                after=updated.model_dump(exclude={"updated_at"}),
            ),
        ]
    )
    if "api_key_allowed_cidrs" in changes:
        for rec in store.query_all(keys.org_pk(org_id), sk_prefix="APIKEY#"):
            cidrs = updated.api_key_allowed_cidrs
            store.update(
                keys.credential(rec["token_hash"]),
                "SET allowed_cidrs = :c" if cidrs else "REMOVE allowed_cidrs",
                condition="attribute_exists(PK)",
                values={":c": cidrs} if cidrs else None,
                return_values="NONE",
            )
    if "session_idle_timeout_minutes" in changes:
        for m in store.query_all(keys.org_pk(org_id), sk_prefix="MEMBER#"):
            for key in (
                keys.member(org_id, m["user_id"]),
                {"PK": keys.user_pk(m["user_id"]), "SK": f"MEMBERSHIP#{org_id}"},
            ):
                store.update(
                    key,
                    "SET session_idle_timeout_minutes = :t",
                    condition="attribute_exists(PK)",
                    values={":t": updated.session_idle_timeout_minutes},
                    return_values="NONE",
                )
    return updated


def ip_allowed(source_ip: str | None, cidrs: list[str] | None) -> bool:
    if not cidrs:
        return True
    if not source_ip:
        return False
    try:
        ip = ipaddress.ip_address(source_ip)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(c, strict=False) for c in cidrs)


def session_idle(cred: dict[str, Any], timeout_minutes: int | None) -> bool:
    """True when the session was unused for longer than the organization allows."""
    if not timeout_minutes or not cred.get("last_seen_at"):
        return False
    seen = clock.parse_stored(cred["last_seen_at"], "session last_seen_at")
    if seen is None:  # unreadable: the session ends, as an idle one would (fail closed)
        return True
    return (clock.now() - seen).total_seconds() > timeout_minutes * 60
