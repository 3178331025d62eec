"""Session tokens: random, hashed at rest, sliding expiry, revocable one by one or all at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from switchboard import clock
from switchboard.identity.credentials import hash_token, new_session_token
from switchboard.ids import new_id
from switchboard.store import Delete, Put, Store, keys

SESSION_LIFETIME = timedelta(days=30)
REFRESH_EVERY = timedelta(minutes=5)


def session_key(user_id: str, session_id: str) -> dict[str, str]:
    return {"PK": keys.user_pk(user_id), "SK": f"SESSION#{session_id}"}


def create_session(store: Store, user_id: str, *, ip: str | None, user_agent: str | None) -> tuple[str, str, str]:
    """Returns (plain token, session id, expires_at ISO)."""
    token = new_session_token()
    session_id = new_id("ses")
    now = clock.now()
    expires = now + SESSION_LIFETIME
    token_hash = hash_token(token)
    common = {
        "created_at": clock.iso(now),
        "last_seen_at": clock.iso(now),
        "expires_at": clock.epoch(expires),
        "ttl": clock.epoch(expires + timedelta(days=1)),
    }
    store.transact(
        [
            Put(
                item={
                    **keys.credential(token_hash),
                    "entity": "Credential",
                    "kind": "session",
                    "credential_id": session_id,
                    "user_id": user_id,
                    **common,
                },
                condition="attribute_not_exists(PK)",
            ),
            Put(
                item={
                    **session_key(user_id, session_id),
                    "entity": "Session",
                    "id": session_id,
                    "token_hash": token_hash,
                    "ip_address": ip,
                    "user_agent": (user_agent or "")[:256] or None,
                    **common,
                },
            ),
        ]
    )
    return token, session_id, clock.iso(expires)


def touch(store: Store, cred: dict[str, Any]) -> None:
    """Sliding expiry: push expiry forward, at most once per REFRESH_EVERY (called by the authorizer)."""
    now = clock.now()
    last = clock.parse_stored(cred.get("last_seen_at"), "session last_seen_at")
    if last is not None and now - last < REFRESH_EVERY:
        return
    expires = now + SESSION_LIFETIME
    values = {":now": clock.iso(now), ":exp": clock.epoch(expires), ":ttl": clock.epoch(expires + timedelta(days=1))}
    expr = "SET last_seen_at = :now, expires_at = :exp, #ttl = :ttl"
    store.update(
        keys.credential(hash_token_of(cred)),
        expr,
        condition="attribute_exists(PK)",
        names={"#ttl": "ttl"},
        values=values,
        return_values="NONE",
    )


def hash_token_of(cred: dict[str, Any]) -> str:
    return str(cred["PK"]).removeprefix("CRED#")


def list_sessions(store: Store, user_id: str) -> list[dict[str, Any]]:
    return store.query_all(keys.user_pk(user_id), sk_prefix="SESSION#")


def revoke(store: Store, user_id: str, session_id: str) -> None:
    item = store.require(session_key(user_id, session_id), "No such session.", consistent=True)
    store.transact([Delete(key=session_key(user_id, session_id)), Delete(key=keys.credential(item["token_hash"]))])


def revoke_all(store: Store, user_id: str) -> int:
    items = list_sessions(store, user_id)
    ops: list[Delete] = []
    for item in items:
        ops += [Delete(key=session_key(user_id, item["id"])), Delete(key=keys.credential(item["token_hash"]))]
    for start in range(0, len(ops), 100):
        store.transact(ops[start : start + 100])
    return len(items)
