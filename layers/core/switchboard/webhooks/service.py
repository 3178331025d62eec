"""The webhook management API's rules: endpoints (+ secrets), test events, alerting settings, deliveries and their
attempts, manual retry and recovery, portal access. Admin only (enforced by the routes)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from switchboard import clock, netguard, ratelimit, sealed
from switchboard.access import ROLE_RANK, AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Conflict, NotFound, RateLimited, Unauthenticated
from switchboard.events.outbox import outbox_put
from switchboard.identity import repository as identity_repository
from switchboard.ids import new_id, token_urlsafe
from switchboard.jobs.service import Chunk
from switchboard.paging import cursor_page, query_fingerprint, read_page
from switchboard.store import ConditionCheck, Delete, Put, Store, Update, keys, versioned
from switchboard.webhooks import dispatch, models, pace, signing
from switchboard.webhooks import repository as repo
from switchboard.webhooks.catalogue import EVENT_TYPES, TEST_EVENT

Item = dict[str, Any]
MAX_ENDPOINTS = 50
ROTATION_OVERLAP = timedelta(hours=24)
DEFAULT_FAILURE_THRESHOLD = 10
RECOVER_KIND = "webhooks.recover"
RECOVER_PAGE = 100  # deliveries of the endpoint evaluated per recovery chunk (one Query page)
FAILED_STATUSES = ("retrying", "exhausted", "canceled")
PORTAL_TOKEN_PREFIX = "whp_"
PORTAL_SESSION_PREFIX = "whps_"
PORTAL_SESSION_TTL = timedelta(minutes=30)


def endpoint_not_found() -> NotFound:
    return NotFound("No such webhook endpoint.")


def delivery_not_found() -> NotFound:
    return NotFound("No such webhook delivery.")


def endpoint_view(item: Item) -> models.Endpoint:
    return models.Endpoint.model_validate(item)


def delivery_view(item: Item, body: str | None = None) -> models.Delivery:
    """The delivery with its event's payload (`body`, the stored event body; a moved legacy delivery may carry its
    own)."""
    return models.Delivery.model_validate({**item, "payload": repo.payload_of(body or item.get("body"))})


def delivery_views(org: str, items: list[Item]) -> list[models.Delivery]:
    """Deliveries with their payloads: one BatchGetItem for the page's distinct events."""
    bodies = repo.event_bodies(org, list(dict.fromkeys(str(i["event_id"]) for i in items)))
    return [delivery_view(i, bodies.get(str(i["event_id"]))) for i in items]


def event_catalogue() -> list[models.EventType]:
    return [models.EventType(name=n, group=g, description=d) for n, (g, d) in EVENT_TYPES.items()]


def _checked_url(url: str, field: str = "body.url") -> str:
    return netguard.require_safe_url(url, field, allow_local=get_settings().is_local)


def _audit_view(item: Item) -> Item:
    return {k: item.get(k) for k in ("url", "description", "filter_types", "enabled")}


def _get_endpoint(store: Store, org: str, endpoint_id: str, *, consistent: bool = False) -> Item:
    item = repo.get_endpoint(store, org, endpoint_id, consistent=consistent)
    if item is None:
        raise endpoint_not_found()
    return item


def _version_condition(item: Item) -> dict[str, Any]:
    return {**versioned(item.get("version", 1)), "error": Conflict("The endpoint changed meanwhile; retry.")}


# Endpoints --------------------------------------------------------------------------------------------------------
def settings_view(store: Store, auth: AuthContext) -> models.WebhookSettings:
    endpoints = sorted(repo.list_endpoints(store, auth.org_id), key=lambda i: i["created_at"])
    return models.WebhookSettings(endpoints=[endpoint_view(i) for i in endpoints], event_types=event_catalogue())


def get_endpoint(store: Store, auth: AuthContext, endpoint_id: str) -> models.Endpoint:
    return endpoint_view(_get_endpoint(store, auth.org_id, endpoint_id))


def create_endpoint(store: Store, auth: AuthContext, body: models.EndpointCreate) -> models.EndpointWithSecret:
    org = auth.org_id
    url = _checked_url(body.url)
    if len(repo.list_endpoints(store, org)) >= MAX_ENDPOINTS:
        raise Conflict(f"An organization has at most {MAX_ENDPOINTS} webhook endpoints.")
    endpoint_id, now, secret = new_id("whe"), clock.now_iso(), signing.generate_secret()
    item: Item = {
        **repo.endpoint_key(org, endpoint_id),
        "entity": "WebhookEndpoint",
        "id": endpoint_id,
        "organization_id": org,
        "url": url,
        "description": body.description,
        "filter_types": body.filter_types,
        "enabled": body.enabled,
        "disabled_reason": None if body.enabled else "manual",
        "disabled_at": None if body.enabled else now,
        "secret": sealed.seal(secret, org),
        "consecutive_failures": 0,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            identity_repository.organization_active_check(auth.org_id),
            audit_put(auth, "webhook_endpoint.created", "webhook_endpoint", endpoint_id, after=_audit_view(item)),
        ]
    )
    return models.EndpointWithSecret.model_validate({**item, "secret": secret})


SECRET_ATTRIBUTES = ("secret", "previous_secret")


def plain_secrets(item: Item) -> dict[str, str]:
    """The endpoint's signing secrets still stored in plain text (written before sealing), sealed: the attributes an
    update of the item also sets, so that any write of the endpoint seals them."""
    org = item["organization_id"]
    return {
        k: sealed.seal(item[k], org)
        for k in SECRET_ATTRIBUTES
        if isinstance(item.get(k), str) and item[k] and not sealed.is_sealed(item[k])
    }


def update_endpoint(store: Store, auth: AuthContext, endpoint_id: str, body: models.EndpointUpdate) -> models.Endpoint:
    org = auth.org_id
    item = _get_endpoint(store, org, endpoint_id, consistent=True)
    given = body.model_fields_set
    sets: dict[str, Any] = {}
    removes: list[str] = []
    if body.url is not None and body.url.strip() != item["url"]:
        sets["url"] = _checked_url(body.url)
    if "description" in given:
        if body.description is None:
            removes.append("description")
        else:
            sets["description"] = body.description
    if body.filter_types is not None:
        sets["filter_types"] = body.filter_types
    now = clock.now_iso()
    if body.enabled is not None and body.enabled != item["enabled"]:
        sets["enabled"] = body.enabled
        if body.enabled:
            sets["consecutive_failures"] = 0
            removes += ["disabled_reason", "disabled_at", "failing_since"]
        else:
            sets.update(disabled_reason="manual", disabled_at=now)
    if not sets and not removes:
        return endpoint_view(item)
    sets.update(plain_secrets(item))
    sets.update(updated_at=now, version=item.get("version", 1) + 1)
    names = {f"#{k}": k for k in [*sets, *removes]}
    expression = "SET " + ", ".join(f"#{k} = :{k}" for k in sets)
    if removes:
        expression += " REMOVE " + ", ".join(f"#{k}" for k in removes)
    guard = _version_condition(item)
    new = {**{k: v for k, v in item.items() if k not in removes}, **sets}
    store.transact(
        [
            _update(
                repo.endpoint_key(org, endpoint_id),
                expression,
                guard,
                names=names,
                values={f":{k}": v for k, v in sets.items()},
            ),
            audit_put(
                auth,
                "webhook_endpoint.updated",
                "webhook_endpoint",
                endpoint_id,
                before=_audit_view(item),
                after=_audit_view(new),
            ),
        ]
    )
    return endpoint_view(new)


def _update(key: dict[str, str], expression: str, guard: dict[str, Any], *, names: dict, values: dict) -> Update:
    return Update(
        key=key,
        expression=expression,
        condition=guard["condition"],
        names={**names, **guard["names"]},
        values={**values, **guard["values"]},
        error=guard["error"],
    )


def delete_endpoint(store: Store, auth: AuthContext, endpoint_id: str) -> None:
    """Deletes the endpoint; its deliveries stay listable (30 days) and pending ones are canceled when due."""
    org = auth.org_id
    item = _get_endpoint(store, org, endpoint_id, consistent=True)
    store.transact(
        [
            Delete(
                key=repo.endpoint_key(org, endpoint_id), condition="attribute_exists(PK)", error=endpoint_not_found()
            ),
            audit_put(auth, "webhook_endpoint.deleted", "webhook_endpoint", endpoint_id, before=_audit_view(item)),
        ]
    )


def rotate_secret(store: Store, auth: AuthContext, endpoint_id: str) -> models.EndpointWithSecret:
    """A new secret signs from now on; the previous one keeps signing (a second `v1,` signature) for 24 h."""
    org = auth.org_id
    item = _get_endpoint(store, org, endpoint_id, consistent=True)
    now = clock.now()
    secret = signing.generate_secret()
    sets = {
        "secret": sealed.seal(secret, org),
        "previous_secret": plain_secrets(item).get("secret", item["secret"]),
        "previous_secret_expires_at": clock.iso(now + ROTATION_OVERLAP),
        "secret_rotated_at": clock.iso(now),
        "updated_at": clock.iso(now),
        "version": item.get("version", 1) + 1,
    }
    store.transact(
        [
            _update(
                repo.endpoint_key(org, endpoint_id),
                "SET " + ", ".join(f"#{k} = :{k}" for k in sets),
                _version_condition(item),
                names={f"#{k}": k for k in sets},
                values={f":{k}": v for k, v in sets.items()},
            ),
            audit_put(auth, "webhook_endpoint.secret_rotated", "webhook_endpoint", endpoint_id),
        ]
    )
    return models.EndpointWithSecret.model_validate({**item, **sets, "secret": secret})


def signing_secrets(endpoint: Item, now_iso: str) -> list[str]:
    """The current secret, and the previous one while its 24 h overlap lasts, opened (a plain one, stored before
    sealing, is used as it is)."""
    org = endpoint["organization_id"]
    out = [sealed.opened(endpoint["secret"], org)]
    previous, until = endpoint.get("previous_secret"), endpoint.get("previous_secret_expires_at")
    if previous and until and until > now_iso:
        out.append(sealed.opened(previous, org))
    return out


def send_test(store: Store, auth: AuthContext, endpoint_id: str) -> models.TestDelivery:
    """Writes a `webhook.test` event to the outbox: it travels the real pipeline (stream, bus, fan-out, sender)."""
    org = auth.org_id
    item = _get_endpoint(store, org, endpoint_id)
    if not item["enabled"]:
        raise Conflict("The endpoint is disabled; enable it before sending a test.")
    sent_at = clock.now_iso()
    event = outbox_put(org, TEST_EVENT, {"endpoint_id": endpoint_id, "sent_at": sent_at})
    store.transact(
        [
            ConditionCheck(
                key=repo.endpoint_key(org, endpoint_id), condition="attribute_exists(PK)", error=endpoint_not_found()
            ),
            event,
        ]
    )
    event_id = event.item["event_id"]
    return models.TestDelivery(
        event_id=event_id,
        event_type=TEST_EVENT,
        endpoint_id=endpoint_id,
        delivery_id=repo.delivery_id(event_id, endpoint_id),
        sent_at=sent_at,
    )


# Alerting ---------------------------------------------------------------------------------------------------------
def alerting_of(item: Item | None) -> models.AlertingSettings:
    if item is None:
        return models.AlertingSettings(emails=[], failure_threshold=DEFAULT_FAILURE_THRESHOLD)
    return models.AlertingSettings.model_validate(item)


def get_alerting(store: Store, auth: AuthContext) -> models.AlertingSettings:
    return alerting_of(repo.get_alerting(store, auth.org_id))


def put_alerting(store: Store, auth: AuthContext, body: models.AlertingSettingsUpdate) -> models.AlertingSettings:
    org = auth.org_id
    emails = list(dict.fromkeys(e.lower() for e in body.emails))
    item = {
        **repo.alerting_key(org),
        "entity": "WebhookAlerting",
        "emails": emails,
        "failure_threshold": body.failure_threshold,
        "updated_at": clock.now_iso(),
    }
    after = {"emails": emails, "failure_threshold": body.failure_threshold}
    store.transact([Put(item=item), audit_put(auth, "webhook_alerting.updated", "webhook_alerting", org, after=after)])
    return alerting_of(item)


# Deliveries -------------------------------------------------------------------------------------------------------
def _since(value: str | None, field: str) -> str | None:
    return clock.iso(clock.parse_iso_input(value, field)) if value else None


def list_deliveries(
    store: Store,
    auth: AuthContext,
    *,
    limit: int,
    cursor: str | None,
    endpoint_id: str | None,
    status: str | None,
    event_type: str | None,
    since: str | None,
) -> tuple[list[models.Delivery], str | None]:
    """Newest first, merged over the list's shards (`repository.merged_page`). A status reads only that status's
    deliveries (GSI3; an endpoint then filters them while reading); without one, the endpoint's come from GSI2, all
    of them from GSI1. `since` is a key condition, the event type filters the range (a thin page keeps reading, at
    most 10 queries per shard). The cursor carries every shard's position."""
    org = auth.org_id
    low = _since(since, "query.since") or "0"
    params = {"endpoint_id": endpoint_id, "status": status, "event_type": event_type, "since": low}
    fingerprint = query_fingerprint("webhook-deliveries-by-status" if status else "webhook-deliveries", params)
    if status:
        index, pks = "GSI3", repo.shard_pks(lambda n: repo.status_deliveries_pk(org, status, n))
    elif endpoint_id:
        index, pks = "GSI2", repo.shard_pks(lambda n: repo.endpoint_deliveries_pk(org, endpoint_id, n))
    else:
        index, pks = "GSI1", repo.shard_pks(lambda n: repo.deliveries_pk(org, n))
    items, next_cursor = read_page(
        org,
        fingerprint,
        cursor,
        lambda positions: repo.merged_page(
            repo.deliveries_store(),
            org,
            pks,
            index,
            limit=limit,
            positions=positions,
            low=low,
            filters={"event_type": event_type or None, "endpoint_id": endpoint_id if status else None},
        ),
    )
    return delivery_views(org, items), next_cursor


def _get_delivery(store: Store, org: str, msg_id: str, *, consistent: bool = False) -> Item:
    item = repo.get_delivery(org, msg_id, consistent=consistent)
    if item is None or item.get("entity") != "WebhookDelivery":
        raise delivery_not_found()
    return item


def get_delivery(store: Store, auth: AuthContext, msg_id: str) -> models.Delivery:
    return delivery_views(auth.org_id, [_get_delivery(store, auth.org_id, msg_id)])[0]


def list_attempts(
    store: Store, auth: AuthContext, msg_id: str, *, limit: int, cursor: str | None
) -> tuple[list[models.Attempt], str | None]:
    """Newest first."""
    org = auth.org_id
    _get_delivery(store, org, msg_id)
    fingerprint = query_fingerprint(f"webhook-attempts:{msg_id}", {})
    rows, next_cursor = cursor_page(
        repo.deliveries_store(),
        org,
        fingerprint,
        cursor,
        pk=repo.delivery_pk(org, msg_id),
        sk_prefix=repo.ATTEMPT_PREFIX,
        forward=False,
        limit=limit,
    )
    return [models.Attempt.model_validate(i) for i in rows], next_cursor


def _deliverable_endpoint(store: Store, org: str, endpoint_id: str) -> Item:
    endpoint = repo.get_endpoint(store, org, endpoint_id)
    if endpoint is None:
        raise Conflict("The delivery's endpoint was deleted.")
    if not endpoint["enabled"]:
        raise Conflict("The endpoint is disabled; enable it before retrying its deliveries.")
    return endpoint


def requeue(store: Store, org: str, delivery: Item, *, job_id: str | None = None) -> Item:
    """Make a delivery due now with a fresh schedule (same id, same body) and a new `generation`, so a message still
    queued for it (a `retrying` delivery's next attempt) is dropped and only the caller's new message, queued with
    that generation, drives it; refused while an attempt runs. A recovery job passes its id: the delivery is marked
    `recovered_by` it, and refused when this job requeued it already."""
    now = clock.now()
    values: dict[str, Any] = {
        ":pending": "pending",
        ":now": clock.iso(now),
        ":zero": 0,
        ":one": 1,
        ":true": True,
        ":now_ms": int(now.timestamp() * 1000),
    }
    msg_id = str(delivery["id"])
    index, index_names, index_values = repo.status_index_update(delivery, "pending")
    values |= index_values
    expression = (
        "SET #status = :pending, next_attempt_at = :now, run_attempts = :zero, manual = :true, updated_at = :now, "
        + index
    )
    condition = "attribute_exists(PK) AND (attribute_not_exists(lease_until) OR lease_until < :now_ms)"
    if job_id is not None:
        values[":job"] = job_id
        expression += ", recovered_by = :job"
        condition += " AND (attribute_not_exists(recovered_by) OR recovered_by <> :job)"
    return repo.deliveries_store().update(  # type: ignore[return-value]
        repo.delivery_key(org, msg_id),
        expression + " REMOVE #owner, lease_until ADD generation :one",
        condition=condition,
        names={"#status": "status", "#owner": "owner", **index_names},
        values=values,
        error=Conflict("An attempt of this delivery is in progress; retry shortly."),
    )


def retry_delivery(store: Store, auth: AuthContext, msg_id: str) -> models.Delivery:
    """Send the delivery again (same `webhook-id`, same body), starting a fresh retry schedule."""
    org = auth.org_id
    item = _get_delivery(store, org, msg_id, consistent=True)
    _deliverable_endpoint(store, org, item["endpoint_id"])
    updated = requeue(store, org, item)
    dispatch.enqueue(org, [msg_id], {msg_id: int(updated["generation"])})
    return delivery_views(org, [updated])[0]


def recover(store: Store, auth: AuthContext, endpoint_id: str, since: str) -> models.RecoverResult:
    """Start the job that retries every failed (retrying, exhausted or canceled) delivery of the endpoint created
    since `since` (job kind `RECOVER_KIND`, `recover_chunk`); answers at once."""
    # on first use: keeps switchboard.jobs.service off the cold start
    from switchboard.jobs import service as jobs

    org = auth.org_id
    if not _get_endpoint(store, org, endpoint_id)["enabled"]:
        raise Conflict("The endpoint is disabled; enable it before recovering its deliveries.")
    job = jobs.start_op(RECOVER_KIND, org, checkpoint={"endpoint_id": endpoint_id, "since": since})
    store.transact(
        [job, audit_put(auth, "webhook_endpoint.recovered", "webhook_endpoint", endpoint_id, after={"since": since})]
    )
    jobs.enqueue_committed(store, job.item["id"])
    return models.RecoverResult(
        endpoint_id=endpoint_id, since=since, job_id=job.item["id"], status=jobs.RUNNING, requeued=0, has_more=False
    )


def recover_chunk(store: Store, job: Item) -> Any:
    """One chunk of a recovery: up to `RECOVER_PAGE` failed deliveries of the endpoint (GSI2, shard after shard from
    the checkpoint's `position`, `repository.shard_walk`) and, for each, `requeue` marked with the job's id plus its
    delivery message.

    Safe to run twice: the requeue's condition refuses a delivery this job requeued already (`recovered_by`), so a
    redelivered chunk never sends a delivery a second time; one it requeued whose message may have been lost (a
    crash between the write and the send) is still `pending` with the job's mark and gets the message again, with
    the same generation (the sender's claim makes two messages of one generation one attempt)."""
    # on first use: keeps switchboard.jobs.service off the cold start
    org, cp = str(job["organization_id"]), dict(job.get("checkpoint") or {})
    job_id, endpoint_id = str(job["id"]), str(cp["endpoint_id"])
    values: dict[str, Any] = {f":s{n}": s for n, s in enumerate(FAILED_STATUSES)} | {":job": job_id, ":p": "pending"}
    found, after = repo.shard_walk(
        repo.deliveries_store(),
        lambda n: repo.endpoint_deliveries_pk(org, endpoint_id, n),
        index="GSI2",
        position=cp.get("position"),
        budget=RECOVER_PAGE,
        sk_between=(str(cp["since"]), "~"),
        filter_expression=f"#status IN ({', '.join(v for v in values if v.startswith(':s'))})"
        " OR (recovered_by = :job AND #status = :p)",
        names={"#status": "status"},
        values=values,
    )
    ids: list[str] = []
    generations: dict[str, int] = {}
    for item in found:
        if item.get("recovered_by") == job_id:
            generations[item["id"]] = int(item.get("generation") or 0)  # requeued by this job: its message again
            ids.append(item["id"])
            continue
        try:
            generations[item["id"]] = int(requeue(store, org, item, job_id=job_id)["generation"])
        except Conflict:
            continue  # an attempt is running right now (it is being delivered anyway), or this job requeued it
        ids.append(item["id"])
    dispatch.enqueue(org, ids, generations)
    return Chunk({**cp, "position": after}, {"requeued": len(ids)}, done=after is None)


MOVE_KIND = "webhooks.move_legacy"
MOVE_PAGE = 25  # legacy deliveries moved per chunk (each with its attempts and its event's payload)


def move_legacy_chunk(store: Store, job: Item) -> Any:
    """Job `MOVE_KIND`: the organization's deliveries still in the single table, moved chunk by chunk
    (`move_legacy_deliveries_chunk`); checkpoint `{"cursor"}`."""
    from switchboard.jobs.service import Chunk

    org, cp = str(job["organization_id"]), dict(job.get("checkpoint") or {})
    cursor, moved = move_legacy_deliveries_chunk(store, org, cp.get("cursor"))
    return Chunk({"cursor": cursor}, {"moved": moved}, done=cursor is None)


def move_legacy_deliveries_chunk(
    store: Store, org: str, cursor: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, int]:
    """Move one page (`MOVE_PAGE`) of the deliveries written in the single table before DeliveriesTable (GSI1
    `ORG#<org>#WHDLV`) into DeliveriesTable: the delivery with its new keys and its status's GSI3 keys (what the
    former status-index backfill gave it), its attempts, its event's payload; then the legacy items are deleted.
    A delivery still pending or retrying is requeued (a new generation and its message: the sender finds a
    message of the old layout's delivery nowhere and drops it). Safe to run again from any cursor: a delivery
    already moved is not written again (condition), only its legacy items deleted. Answers (next cursor or None,
    deliveries moved)."""
    dstore = repo.deliveries_store()
    page = store.query(repo.legacy_deliveries_pk(org), index="GSI1", start_key=cursor, limit=MOVE_PAGE)
    doomed: list[dict[str, str]] = []
    requeued: dict[str, int] = {}
    moved = 0
    for old in page.items:
        msg_id, status = str(old["id"]), str(old.get("status") or "pending")
        attempts = store.query_all(keys.org_pk(org), sk_prefix=repo.legacy_attempt_prefix(msg_id))
        doomed += [repo.legacy_delivery_key(org, msg_id), *({"PK": a["PK"], "SK": a["SK"]} for a in attempts)]
        kept = {k: v for k, v in old.items() if k not in ("PK", "SK", "body") and not k.startswith("GSI")}
        new: Item = {**kept, **repo.delivery_key(org, msg_id)}
        new |= repo.delivery_index(org, str(old["endpoint_id"]), str(old["created_at"]), msg_id)
        new |= repo.status_index(new, status)
        active = status in ("pending", "retrying") and not old.get("lease_until")
        if active:
            new = {k: v for k, v in new.items() if k != "owner"}
            new["generation"] = int(old.get("generation") or 0) + 1
        payload = repo.event_item(
            org,
            {"event_id": old["event_id"], "event_type": old["event_type"], "occurred_at": old.get("occurred_at")},
            str(old["created_at"]),
            int(old.get("ttl") or 0) + 86400,
        ) | {"body": str(old.get("body") or "{}")}
        moved_attempts = [
            {k: v for k, v in a.items() if k not in ("PK", "SK")}
            | repo.attempt_key(org, msg_id, str(a["SK"]).rsplit("#", 1)[1])
            for a in attempts
        ]
        dstore.batch_put([payload, *moved_attempts])  # first: rewriting them after a crash is harmless
        try:
            dstore.put(new, condition="attribute_not_exists(PK)", error=Conflict())
        except Conflict:
            continue  # moved by an earlier run: only its legacy items are left to delete
        moved += 1
        if active:
            requeued[msg_id] = int(new["generation"])
    dispatch.enqueue(org, list(requeued), requeued)
    store.batch_delete(doomed)
    return page.last_key, moved


PURGE_PAGE = 25  # deliveries (each with its attempts) or event payloads per purge chunk
PURGE_LISTS = ("deliveries", "events")


def purge_deliveries_chunk(org: str, checkpoint: dict[str, Any]) -> tuple[dict[str, Any] | None, int]:
    """One chunk of an organization's purge in DeliveriesTable: up to `PURGE_PAGE` of its deliveries (GSI1, shard
    after shard, each deleted with its attempts: one Query of its partition), then of its event payloads; the last
    chunk deletes the pacing item. Answers the next checkpoint (`{"list", "position"}`; None when done) and the
    items deleted. Safe to run again from any checkpoint (deleting a missing item is no error)."""
    dstore = repo.deliveries_store()
    which = str(checkpoint.get("list") or PURGE_LISTS[0])
    pk_of = (lambda n: repo.deliveries_pk(org, n)) if which == "deliveries" else (lambda n: repo.events_pk(org, n))
    found, after = repo.shard_walk(dstore, pk_of, index="GSI1", position=checkpoint.get("position"), budget=PURGE_PAGE)
    doomed: list[dict[str, str]] = []
    for item in found:
        doomed.append({"PK": item["PK"], "SK": item["SK"]})
        if which == "deliveries":
            doomed += [{"PK": a["PK"], "SK": a["SK"]} for a in dstore.query_all(item["PK"], consistent=True)]
    deleted = dstore.batch_delete(doomed)
    if after is not None:
        return {"list": which, "position": after}, deleted
    later = PURGE_LISTS.index(which) + 1
    if later < len(PURGE_LISTS):
        return {"list": PURGE_LISTS[later]}, deleted
    return None, deleted + dstore.batch_delete([pace.pace_key(org)])


# Portal access ----------------------------------------------------------------------------------------------------
def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _creator(auth: AuthContext) -> Item:
    """Who minted a portal link, as every use of the link and of its sessions checks again (`_creator_may_act`):
    the member behind the credential and, when an API key minted it, that key."""
    fields: Item = {"created_by": auth.principal_id, "creator_user_id": auth.user_id}
    if auth.principal_type == "api_key":
        fields["creator_key_id"] = auth.credential_id or auth.principal_id
    return fields


ADMIN = ROLE_RANK["admin"]


def _creator_may_act(store: Store, item: Item) -> bool:
    """A portal link or session acts only while its creator could mint it now: the organization is active, the
    member who minted it is still in it with the admin role or higher, and the API key that minted it (if a key did)
    is not revoked and is admin or higher — the checks the authorizer makes on every API request, here in one
    consistent BatchGetItem. An item that names no creator is refused."""
    org = str(item["organization_id"])
    user, key = item.get("creator_user_id"), item.get("creator_key_id")
    if not user and not key:
        return False
    wanted = [keys.organization(org)]
    if user:
        wanted.append(keys.member(org, str(user)))
    if key:
        wanted.append(keys.api_key_record(org, str(key)))
    found = {str(i["SK"]): i for i in store.batch_get(wanted, consistent=True)}
    organization = found.get(keys.organization(org)["SK"])
    if organization is None or organization.get("status", "active") != "active":
        return False
    for needed in wanted[1:]:
        holder = found.get(needed["SK"])
        if holder is None or ROLE_RANK.get(str(holder.get("role")), 0) < ADMIN:
            return False
    return True


def create_portal_access(store: Store, auth: AuthContext, base_url: str, expires_in: int) -> models.PortalAccess:
    """A single-use magic link to the webhook portal, stored only as its SHA-256. It names its creator: the link,
    and the portal sessions it opens, stop (401) as soon as the creator could no longer mint it."""
    org = auth.org_id
    token = PORTAL_TOKEN_PREFIX + token_urlsafe(32)
    digest = _token_hash(token)
    now = clock.now()
    expires = now + timedelta(seconds=expires_in)
    item: Item = {
        **repo.portal_key(digest),
        "entity": "WebhookPortalToken",
        "organization_id": org,
        **_creator(auth),
        "created_at": clock.iso(now),
        "expires_at": clock.iso(expires),
        "ttl": clock.epoch(expires) + 3600,
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(
                auth,
                "webhook_portal_access.created",
                "webhook_portal",
                digest[:16],
                after={"expires_at": item["expires_at"]},
            ),
        ]
    )
    return models.PortalAccess(url=f"{base_url}/portal/webhooks#token={token}", expires_at=item["expires_at"])


def consume_portal_token(store: Store, token: str) -> Item:
    """Exchange a portal token once (conditional delete): the organization it opens; 401 when used, expired, or
    when its creator could no longer mint it."""
    deleted = store.delete(
        repo.portal_key(_token_hash(token)),
        condition="attribute_exists(PK) AND expires_at > :now",
        values={":now": clock.now_iso()},
        error=Unauthenticated("The portal link is invalid, used or expired."),
    )
    if deleted is None or not _creator_may_act(store, deleted):
        raise Unauthenticated("The portal link is invalid, used or expired.")
    return deleted


PORTAL_TOKEN_BUCKET_CHARS = 12  # `whp_` and 8 random characters: the part of a link its failures are counted under


def open_portal_session(store: Store, token: str, *, ip: str | None = None) -> tuple[str, Item]:
    """Exchange a portal link's token (once) for a session of its organization: (the cookie value, the session).

    The session is stored only as the SHA-256 of its value, lasts `PORTAL_SESSION_TTL` from the exchange (never
    extended), carries the CSRF token its forms must send back and the link's creator (checked again on every
    request). Wrong tokens are counted twice, apart: per client IP (`portal_failures_per_ip`) and per token prefix
    (`portal_failures_per_token_prefix`, the link's first characters). A prefix whose budget is spent is refused
    (429) before its tokens are looked up; an IP's spent budget turns its wrong tokens into 429, but a valid link
    is checked first and opens, so nobody's failures lock other people's links out."""
    settings = get_settings()
    window = settings.auth_window_seconds
    prefix_bucket = f"portal-token:{token[:PORTAL_TOKEN_BUCKET_CHARS]}"
    ratelimit.peek(store, prefix_bucket, limit=settings.portal_failures_per_token_prefix, window_seconds=window)
    try:
        link = consume_portal_token(store, token)
    except Unauthenticated:
        budgets = [(prefix_bucket, settings.portal_failures_per_token_prefix)]
        if ip:
            budgets.append((f"portal:{ip}", settings.portal_failures_per_ip))
        spent: RateLimited | None = None
        for bucket, limit in budgets:
            try:
                ratelimit.hit(store, bucket, limit=limit, window_seconds=window)
            except RateLimited as err:
                spent = spent or err
        if spent is not None:
            raise spent from None
        raise
    value = PORTAL_SESSION_PREFIX + token_urlsafe(32)
    now = clock.now()
    expires = now + PORTAL_SESSION_TTL
    session: Item = {
        **repo.portal_session_key(_token_hash(value)),
        "entity": "WebhookPortalSession",
        "organization_id": link["organization_id"],
        **{k: link.get(k) for k in ("created_by", "creator_user_id", "creator_key_id") if link.get(k)},
        "csrf_token": token_urlsafe(32),
        "created_at": clock.iso(now),
        "expires_at": clock.iso(expires),
        "ttl": clock.epoch(expires) + 3600,
    }
    store.put(session, condition="attribute_not_exists(PK)")
    return value, session


def portal_session(store: Store, value: str) -> Item | None:
    """The live session a portal cookie names, or None (unknown, malformed, expired, its organization not active, or
    its link's creator no longer able to mint it: removed, demoted below admin, or the minting key revoked)."""
    if not value.startswith(PORTAL_SESSION_PREFIX) or len(value) > 100:
        return None
    item = store.get(repo.portal_session_key(_token_hash(value)), consistent=True)
    if item is None or item.get("expires_at", "") <= clock.now_iso():
        return None
    if not _creator_may_act(store, item):
        return None  # the portal stops at once, like the creator's own credentials
    return item


def close_portal_session(store: Store, value: str) -> None:
    store.delete(repo.portal_session_key(_token_hash(value)))


def portal_auth(session: Item) -> AuthContext:
    """Who acts in the portal: the session (audited as `portal`), with the admin rights the link was issued under."""
    session_id = "whps_" + str(session["PK"]).removeprefix("WHPSESS#")[:16]
    return AuthContext("portal", session_id, None, session["organization_id"], "admin", session_id)
