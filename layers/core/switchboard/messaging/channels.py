"""Channels: connected messaging accounts. The provider adapter does the remote work; this module keeps the record,
its lifecycle (disconnected → pairing → connected / error), its settings documents and its log."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from switchboard import clock, sealed
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.contacts.identifiers import normalize_phone, numbers_for
from switchboard.errors import Conflict, NotFound, UnsupportedByProvider, ValidationFailed
from switchboard.ids import new_id, new_ulid
from switchboard.messaging import claims, models
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers import ProviderRejected, ProviderUnavailable, provider_for
from switchboard.providers.base import Provider, SessionStatus
from switchboard.providers.registry import adapter_class
from switchboard.store import Delete, Put, Store, TxOp, keys, versioned

Item = dict[str, Any]
_SECRET = re.compile(r"(token|secret|password|api_key|apikey|key|pin)$", re.IGNORECASE)


def channel_key(org: str, channel_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"CHANNEL#{channel_id}")


def log_prefix(channel_id: str) -> str:
    """A channel's log rows: their own prefix, so that reading the organization's channels never reads them."""
    return f"CHLOG#{channel_id}#"


def block_key(org: str, channel_id: str, phone: str) -> dict[str, str]:
    """A number blocked on a channel (its own prefix, like the log)."""
    return keys.key(keys.org_pk(org), f"CHBLOCK#{channel_id}#{phone}")


def all_items(store: Store, org: str) -> list[Item]:
    """Every channel item of the organization (one Query of `CHANNEL#`, which holds nothing else)."""
    return [i for i in store.query_all(keys.org_pk(org), sk_prefix="CHANNEL#") if i.get("entity") == "Channel"]


def pointer_key(channel_id: str) -> dict[str, str]:
    """Global: channel id → organization, for provider callbacks that arrive before any credential."""
    return keys.key(f"CHANNEL#{channel_id}", "CHANNEL")


def is_secret(key: str) -> bool:
    """A config key whose value is a credential: sealed at rest, masked in every answer."""
    return bool(_SECRET.search(key))


def _mask(value: Any) -> Any:
    """A settings document's secrets masked (only long ones show their last four characters)."""
    return sealed.mask_fields(value, is_secret, {}) if isinstance(value, dict) else value


def sealed_item(item: Item) -> Item:
    """The channel item as it is stored: every credential of its config and of its settings documents (a proxy's
    password) sealed (`switchboard.sealed`, the organization as context) with its display hint in `secret_hints`
    (settings paths prefixed `settings.`), and `verify_token_hash` (a keyed hash, for finding a channel by the verify
    token Meta presents) kept in step with `config.verify_token`. An item whose secrets are all sealed comes back
    unchanged (no cryptography on that path)."""
    config = item.get("config") or {}
    documents = item.get("settings") or {}
    token = config.get("verify_token")
    out = item
    if sealed.has_plain(config, is_secret) or sealed.has_plain(documents, is_secret):
        hints = dict(item.get("secret_hints") or {})
        org = item["organization_id"]
        out = {
            **item,
            "config": sealed.seal_fields(config, org, is_secret, hints),
            "settings": sealed.seal_fields(documents, org, is_secret, hints, "settings."),
        }
        out["secret_hints"] = hints
        if isinstance(token, str) and token and not sealed.is_sealed(token):
            out["verify_token_hash"] = sealed.lookup_hash(token)
    if not token and "verify_token_hash" in out:
        out = {k: v for k, v in out.items() if k != "verify_token_hash"}
    return out


def view(item: Item) -> models.Channel:
    """Secrets in config are never returned (only the hint of each: the last four characters of long ones)."""
    config = sealed.mask_fields(item.get("config") or {}, is_secret, item.get("secret_hints") or {})
    return models.Channel.model_validate({**item, "config": config})


def get_item(store: Store, org: str, channel_id: str, *, consistent: bool = False) -> Item:
    return store.require(channel_key(org, channel_id), "No such channel.", consistent=consistent)


def log_entry(org: str, channel_id: str, event: str, detail: dict[str, Any] | None = None) -> Put:
    ulid = new_ulid()
    return Put(
        item={
            "PK": keys.org_pk(org),
            "SK": f"{log_prefix(channel_id)}{ulid}",
            "entity": "ChannelLog",
            "id": f"log_{ulid.lower()}",
            "event": event,
            "detail": detail or {},
            "created_at": clock.now_iso(),
            "ttl": clock.epoch(clock.now()) + 90 * 86400,
        }
    )


def check_config(item: Item) -> None:
    """The channel's adapter (its platform's, its engine's) accepts its config (400 `validation_failed` otherwise;
    an unknown platform or engine too)."""
    adapter_class(item).check_config(item.get("config") or {}, local=get_settings().is_local)


def create(store: Store, auth: AuthContext, body: models.ChannelCreate) -> models.Channel:
    org, now, channel_id = auth.org_id, clock.now_iso(), new_id("ch")
    numbers = numbers_for(store, org, possible_only=True)  # the channel's own number: its provider's to vouch for
    phone = normalize_phone(body.phone_number, "body.phone_number", numbers) if body.phone_number else None
    item: Item = {
        **channel_key(org, channel_id),
        "entity": "Channel",
        "id": channel_id,
        "organization_id": org,
        "name": body.name,
        "phone_number": phone,
        "platform": body.platform,
        "mode": "sandbox" if body.platform == "sandbox" else "live",
        "status": "disconnected",
        "is_active": True,
        "last_connected_at": None,
        "last_error": None,
        "linked_channel_id": body.linked_channel_id,
        "metadata": {},
        "config": body.config,
        "settings": {},
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    check_config(item)  # the platform has an adapter, which accepts this config
    item = sealed_item(item)
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            Put(item={**pointer_key(channel_id), "entity": "ChannelPointer", "organization_id": org}),
            *claims.claim_ops(None, item),
            log_entry(org, channel_id, "created", {"platform": body.platform}),
            audit_put(
                auth, "channel.created", "channel", channel_id, after={"name": body.name, "platform": body.platform}
            ),
        ]
    )
    return view(item)


def list_channels(store: Store, auth: AuthContext, limit: int, offset: int) -> tuple[list[models.Channel], int]:
    items = all_items(store, auth.org_id)
    items.sort(key=lambda i: i["created_at"])
    return [view(i) for i in items[offset : offset + limit]], len(items)


def _save(
    store: Store,
    auth: AuthContext,
    old: Item,
    changes: Item,
    event: str,
    detail: dict[str, Any] | None = None,
    extra: list[TxOp] | None = None,
    *,
    guard: tuple[str, dict[str, Any]] | None = None,
) -> Item:
    """Write the channel's new version (conditional on the version read and, when given, on `guard`'s condition and
    values) with its log entry."""
    new = sealed_item({**old, **changes, "updated_at": clock.now_iso(), "version": int(old.get("version", 1)) + 1})
    condition, values = guard if guard else (None, None)
    store.transact(
        [
            Put(
                item=new,
                **versioned(old.get("version", 1), condition=condition, values=values),
                error=Conflict("The channel changed meanwhile; retry."),
            ),
            log_entry(auth.org_id, old["id"], event, detail),
            *(extra or []),
        ]
    )
    return new


def update(store: Store, auth: AuthContext, channel_id: str, body: models.ChannelUpdate) -> models.Channel:
    item = get_item(store, auth.org_id, channel_id, consistent=True)
    changes = body.model_dump(exclude_unset=True)
    if changes.get("phone_number"):
        numbers = numbers_for(store, auth.org_id, possible_only=True)  # as in `create`
        changes["phone_number"] = normalize_phone(changes["phone_number"], "body.phone_number", numbers)
    if "config" in changes:
        changes["config"] = {**(item.get("config") or {}), **(changes["config"] or {})}
        check_config({**item, "config": changes["config"]})
    changes = {k: v for k, v in changes.items() if item.get(k) != v}
    if not changes:
        return view(item)
    audit = audit_put(
        auth, "channel.updated", "channel", channel_id, after={k: v for k, v in changes.items() if k != "config"}
    )
    claim_writes = claims.claim_ops(item, {**item, **changes})
    return view(_save(store, auth, item, changes, "updated", {"fields": sorted(changes)}, [audit, *claim_writes]))


def delete(store: Store, auth: AuthContext, channel_id: str) -> None:
    item = get_item(store, auth.org_id, channel_id, consistent=True)
    # The channel goes anyway; a remote session that cannot be logged out now expires on its own.
    with contextlib.suppress(ProviderUnavailable, ProviderRejected, UnsupportedByProvider):
        provider_for(item).disconnect()
    store.transact(
        [
            Delete(key=channel_key(auth.org_id, channel_id), condition="attribute_exists(PK)", error=NotFound()),
            Delete(key=pointer_key(channel_id)),
            *claims.claim_ops(item, None),
            audit_put(auth, "channel.deleted", "channel", channel_id, before={"name": item["name"]}),
        ]
    )


def provider(store: Store, auth: AuthContext, channel_id: str) -> tuple[Item, Provider]:
    item = get_item(store, auth.org_id, channel_id)
    return item, provider_for(item)


def pairing_code(store: Store, auth: AuthContext, channel_id: str, phone_number: str) -> models.PairingCode:
    """A code to link the device of `phone_number`, the channel's own number (read as in `create`)."""
    item, adapter = provider(store, auth, channel_id)
    number = normalize_phone(phone_number, "body.phone_number", numbers_for(store, auth.org_id, possible_only=True))
    return models.PairingCode(channel_id=item["id"], code=adapter.pairing_code(number)["code"])


def lookup_contact(store: Store, auth: AuthContext, channel_id: str, phone: str) -> dict[str, Any]:
    """The provider's profile of a customer's number."""
    _, adapter = provider(store, auth, channel_id)
    return adapter.lookup_contact(normalize_phone(phone, "body.phone", numbers_for(store, auth.org_id)))


def connect(
    store: Store, auth: AuthContext, channel_id: str, *, force: bool = False, rotate: bool = False
) -> models.Channel:
    """Connect (or, `force`, reconnect) the channel at its provider. `rotate` (a reconnect): a linked-device channel
    is handed a new callback key (`_rotated_key`), the engine's webhook is set with it and the old key stops
    working."""
    item = get_item(store, auth.org_id, channel_id, consistent=True)
    if item["status"] == "connected" and not force:
        return view(item)
    rotated = _rotated_key(item) if rotate else {}
    adapter = provider_for({**item, **rotated})
    if force:
        with contextlib.suppress(ProviderUnavailable, ProviderRejected):
            adapter.disconnect()
    try:
        result = adapter.connect()
    except ProviderRejected as err:
        refused = {"status": "error", "last_error": err.message, **rotated}
        return view(_save(store, auth, item, refused, "error", {"error": err.message}))
    except ProviderUnavailable as err:
        down = {"status": "error", "last_error": str(err) or "provider unavailable", **rotated}
        return view(_save(store, auth, item, down, "error", {"error": str(err)}))
    error = None
    if result.status == "error":
        error = str(result.metadata.get("gateway_error") or result.metadata.get("error") or "The provider refused.")
    changes: Item = {
        "status": result.status,
        "last_error": error,
        "metadata": {**(item.get("metadata") or {}), **result.metadata},
        **rotated,
    }
    if result.status == "connected":
        changes["last_connected_at"] = clock.now_iso()
    return view(_save(store, auth, item, changes, "reconnected" if force else result.status))


def _rotated_key(item: Item) -> Item:
    """The change that moves a linked-device channel to its next callback key generation (the engine may have been
    handed the new key whatever the connect's outcome, so it is saved with every outcome); none for other
    platforms, whose callbacks are signed with their provider's own secret."""
    if item.get("platform") != "whatsapp_web":
        return {}
    return {"callback_key_generation": int(item.get("callback_key_generation") or 0) + 1}


SESSION_GUARD = "(attribute_not_exists(session_event_at) OR session_event_at <= :at)"


def record_session_status(store: Store, channel: Item, event: SessionStatus) -> Item:
    """An engine's callback says the linked-device session changed state: the channel's status follows it (a
    callback that changes nothing writes nothing). Engines post their callbacks concurrently and retry them, so an
    event carrying the engine's own time (`event_at`) is ordered by it: the channel keeps the time of the event that
    set its state (`session_event_at`), an older event changes nothing, and every write is conditional on no newer
    one having landed meanwhile. Retried once when the channel changed meanwhile."""
    org = channel["organization_id"]
    auth = AuthContext("system", "system", None, org, "owner", "system")
    item, at = channel, event.event_at
    for attempt in range(2):
        stored_at = item.get("session_event_at")
        if at is not None and stored_at is not None and at < int(stored_at):
            return item  # a late delivery of an older state
        metadata = {**(item.get("metadata") or {}), **event.metadata}
        changes: Item = {"status": event.status, "metadata": metadata}
        if event.status == "connected":
            changes["last_error"] = None
            if item.get("status") != "connected":
                changes["last_connected_at"] = clock.now_iso()
        elif event.status == "error":
            changes["last_error"] = f"The engine reports the session as {event.engine_status}."
        guard = (SESSION_GUARD, {":at": at}) if at is not None else None
        try:
            if all(item.get(k) == v for k, v in changes.items() if k != "last_connected_at"):
                if at is None or stored_at == at:
                    return item
                return _stamp_session(store, item, at)  # the state stands; the newer time that confirms it is kept
            if at is not None:
                changes["session_event_at"] = at
            return _save(store, auth, item, changes, "session_status", {"engine_status": event.engine_status},
                         guard=guard)  # fmt: skip
        except Conflict:
            if attempt:
                raise
            item = get_item(store, org, channel["id"], consistent=True)
    return item


def _stamp_session(store: Store, item: Item, at: int) -> Item:
    """Record that the engine confirmed the channel's session state at `at` (so an older state arriving later is
    refused); the version moves so a concurrent whole-item write cannot put an older time back."""
    version = int(item.get("version", 1))
    store.update(
        {"PK": item["PK"], "SK": item["SK"]},
        "SET session_event_at = :at, #v = :next",
        **versioned(version, condition=SESSION_GUARD, values={":at": at, ":next": version + 1}),
        error=Conflict("The channel changed meanwhile; retry."),
        return_values="NONE",
    )
    return {**item, "session_event_at": at, "version": version + 1}


def disconnect(store: Store, auth: AuthContext, channel_id: str) -> models.Channel:
    item = get_item(store, auth.org_id, channel_id, consistent=True)
    try:
        provider_for(item).disconnect()
    except ProviderUnavailable as err:
        raise Conflict(f"The provider could not be reached to disconnect: {err}") from None
    if item["status"] == "disconnected":
        return view(item)
    return view(_save(store, auth, item, {"status": "disconnected"}, "disconnected"))


def reconnect(store: Store, auth: AuthContext, channel_id: str, *, force: bool) -> models.Channel:
    """A reconnect that reaches the provider (always when `force`, else when the channel is not connected) also
    rotates a linked-device channel's callback key."""
    if force:
        return connect(store, auth, channel_id, force=True, rotate=True)
    return _reconnect_soft(store, auth, channel_id)


def _reconnect_soft(store: Store, auth: AuthContext, channel_id: str) -> models.Channel:
    item = get_item(store, auth.org_id, channel_id, consistent=True)
    if item["status"] == "connected":
        return view(item)
    return connect(store, auth, channel_id, rotate=True)


def status(store: Store, auth: AuthContext, channel_id: str) -> models.ChannelStatusView:
    """The provider's live state; a linked-device engine that disagrees with the record corrects it."""
    item, adapter = provider(store, auth, channel_id)
    live = adapter.status()
    if item["platform"] == "whatsapp_web" and live != item["status"]:
        item = record_session_status(store, item, SessionStatus(live, live.upper()))
    return models.ChannelStatusView.model_validate(  # `status` is one of ChannelStatus, checked here
        {
            "channel_id": item["id"],
            "status": live,
            "is_active": item["is_active"],
            "last_connected_at": item.get("last_connected_at"),
            "last_error": item.get("last_error"),
        }
    )


def logs(
    store: Store, auth: AuthContext, channel_id: str, limit: int, cursor: str | None
) -> tuple[list[models.ChannelLog], str | None]:
    org = auth.org_id
    get_item(store, org, channel_id)
    fingerprint = query_fingerprint(f"channel-logs:{channel_id}", {})
    rows, next_cursor = cursor_page(
        store, org, fingerprint, cursor, sk_prefix=log_prefix(channel_id), forward=False, limit=limit
    )
    return [models.ChannelLog.model_validate(i) for i in rows], next_cursor


# Settings documents: stored on the channel, applied through the provider where it has the notion -------------------
DOCUMENTS = ("advanced", "phone", "two_step", "proxy", "network_proxy")


def get_document(store: Store, auth: AuthContext, channel_id: str, name: str) -> dict[str, Any]:
    item = get_item(store, auth.org_id, channel_id)
    doc = (item.get("settings") or {}).get(name) or {}
    return sealed.mask_fields(doc, is_secret, item.get("secret_hints") or {}, f"settings.{name}.")


def put_document(store: Store, auth: AuthContext, channel_id: str, name: str, doc: dict[str, Any]) -> dict[str, Any]:
    if len(str(doc)) > 16_384:
        raise ValidationFailed.field("body", "settings documents are limited to 16 KiB")
    item = get_item(store, auth.org_id, channel_id, consistent=True)
    settings = {**(item.get("settings") or {}), name: doc}
    _save(
        store,
        auth,
        item,
        {"settings": settings},
        "settings_changed",
        {"document": name},
        [audit_put(auth, "channel.settings_changed", "channel", channel_id, after={"document": name})],
    )
    return _mask(doc)  # type: ignore[no-any-return]


def account_document(
    store: Store, auth: AuthContext, channel_id: str, name: str, changes: dict[str, Any] | None
) -> dict[str, Any]:
    """Profile, business profile and privacy live at the provider; the last known copy is kept in metadata."""
    item, adapter = provider(store, auth, channel_id)
    call = adapter.privacy if name == "privacy" else adapter.profile
    result = call(changes) if name != "business_profile" else call({**(changes or {}), "business": True})
    if changes:
        item = get_item(store, auth.org_id, channel_id, consistent=True)
        metadata = {**(item.get("metadata") or {}), name: result}
        _save(store, auth, item, {"metadata": metadata}, "settings_changed", {"document": name})
    return result


MOVE_CHUNK = 100


def move_legacy_rows_chunk(store: Store, org: str, start: dict[str, Any] | None) -> dict[str, Any] | None:
    """One resumable chunk of moving log and block rows written under `CHANNEL#<id>#LOG#` / `#BLOCK#` (before they
    had their own prefixes) to `CHLOG#` / `CHBLOCK#`: a page of `CHANNEL#`, each such row put under its new key and
    deleted from the old one in one transaction (a chunk run twice moves nothing twice). The checkpoint to continue
    from, None when done."""
    page = store.query(keys.org_pk(org), sk_prefix="CHANNEL#", limit=MOVE_CHUNK, start_key=start)
    for row in page.items:
        if row.get("entity") not in ("ChannelLog", "ChannelBlock"):
            continue
        channel_id, kind, rest = row["SK"].removeprefix("CHANNEL#").split("#", 2)
        new_sk = f"{log_prefix(channel_id)}{rest}" if kind == "LOG" else block_key(org, channel_id, rest)["SK"]
        store.transact(
            [
                Put(item={**row, "SK": new_sk}),
                Delete(key={"PK": row["PK"], "SK": row["SK"]}),
            ]
        )
    return page.last_key
