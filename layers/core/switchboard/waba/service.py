"""Business-account onboarding: the WhatsApp Business Platform embedded signup, step by step, ending with a connected
`whatsapp_cloud` channel.

Steps (the progress record `WABAFLOW#<wbp_id>` holds each one's status):

1. `oauth_start` — a flow with its Meta app (META_APP_ID/SECRET or the caller's), configuration id, redirect URI and
   a `state` token (shown once, kept as SHA-256).
2. `signup_event` — what the embedded signup posts to the page: FINISH (waba_id + phone_number_id), FINISH_ONLY_WABA,
   CANCEL (the flow ends `canceled`) or ERROR (ends `failed`, recorded). Optional: when it never comes, the code
   exchange finds the WABA in the token's granular scopes (it is `skipped` then); a late FINISH can still name the
   phone number until the number is registered.
3. `exchange_code` — code → business token (`/oauth/access_token`), checked with `/debug_token` (our app, the
   whatsapp_business_management scope, the WABA among its targets); the WABA's numbers are listed. The token is
   sealed (AES-256-GCM, `switchboard.sealed`) before it is stored and is never returned or logged.
4. `register_phone` — `POST /{phone_number_id}/register` with the 6-digit PIN (the PIN is not stored).
5. `subscribe_webhook` — `POST /{waba_id}/subscribed_apps`, then checked with a GET that lists our app.
6. `sync_meta` — WABA, number and template details; the channel is created with the sealed token and connected;
   the flow ends `completed` with the channel id.

A step that is done is never run again (409 `conflict`), nor one whose predecessor is not done, nor any step of a
flow that ended (completed, canceled, failed) or expired (24 h). A step that failed at Graph can be retried; each
failure is recorded as an onboarding error (`WABAERR#<ulid>`) with Graph's code, message and trace id, and the
request answers with the provider's message in the error envelope. Concurrent requests: a step first claims the flow
(a lease written with the record's `version` as condition), so Graph is called by one request at a time per flow.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from switchboard import clock, sealed
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.config import get_settings
from switchboard.errors import Conflict, DomainError, ValidationFailed
from switchboard.events.outbox import outbox_put
from switchboard.ids import new_id, new_ulid
from switchboard.messaging import claims
from switchboard.paging import cursor_page, query_fingerprint
from switchboard.providers.base import ProviderRejected, ProviderUnavailable
from switchboard.store import Put, Store, TxOp, keys, versioned
from switchboard.waba import models, support
from switchboard.waba.graph import MANAGEMENT, Graph

Item = dict[str, Any]
FLOW_LIFETIME = timedelta(hours=24)
ABANDONED_TTL = timedelta(days=30)  # an unfinished flow's item is removed by DynamoDB's TTL a month later
ERROR_TTL = timedelta(days=90)
LEASE = timedelta(seconds=60)
MAX_EVENTS = 20
STEPS: tuple[models.StepName, ...] = (
    "oauth_start",
    "signup_event",
    "exchange_code",
    "register_phone",
    "subscribe_webhook",
    "sync_meta",
)
PREVIOUS: dict[str, str] = {
    "register_phone": "exchange_code",
    "subscribe_webhook": "register_phone",
    "sync_meta": "subscribe_webhook",
}
TERMINAL = ("completed", "canceled", "failed")
DIALOG = "https://www.facebook.com/{version}/dialog/oauth"


# Keys -----------------------------------------------------------------------------------------------------------------
def flow_key(org: str, progress_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"WABAFLOW#{progress_id}")


def _state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


# Views ----------------------------------------------------------------------------------------------------------------
def next_step(item: Item) -> models.StepName | None:
    if item["status"] in TERMINAL:
        return None
    steps = item["steps"]
    if steps["exchange_code"]["status"] != "done":
        return "signup_event" if steps["signup_event"]["status"] in ("pending", "failed") else "exchange_code"
    for name in ("register_phone", "subscribe_webhook", "sync_meta"):
        if steps[name]["status"] != "done":
            return name  # type: ignore[return-value]
    return None


def view(item: Item) -> models.Progress:
    return models.Progress.model_validate(_view_fields(item))


def _view_fields(item: Item) -> dict[str, Any]:
    hidden = {"PK", "SK", "entity", "state_hash", "token_sealed", "app_secret_sealed", "graph_base_url", "ttl"}
    fields = {k: v for k, v in item.items() if k not in hidden and not k.startswith("lease_")}
    fields["steps"] = [{"name": name, **item["steps"][name]} for name in STEPS]
    fields["next_step"] = next_step(item)
    fields["token_obtained"] = bool(item.get("token_sealed"))
    return fields


def get_item(store: Store, org: str, progress_id: str, *, consistent: bool = False) -> Item:
    return store.require(flow_key(org, progress_id), "No such onboarding in this organization.", consistent=consistent)


def get(store: Store, auth: AuthContext, progress_id: str) -> models.Progress:
    return view(get_item(store, auth.org_id, progress_id))


# oauth/start ----------------------------------------------------------------------------------------------------------
def _check_redirect(uri: str) -> str:
    parts = urlsplit(uri)
    local = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.username or parts.password:
        raise ValidationFailed.field("body.redirect_uri", "must be an absolute https URL")
    if parts.scheme == "http" and not local:
        raise ValidationFailed.field("body.redirect_uri", "must use https (http only for localhost)")
    if parts.fragment:
        raise ValidationFailed.field("body.redirect_uri", "must not have a fragment")
    return uri


def _base_url(body: models.OAuthStart) -> str:
    settings = get_settings()
    if body.graph_base_url is None:
        return settings.graph_root
    if not settings.is_local:
        raise ValidationFailed.field("body.graph_base_url", "can only be set on the local and test stages")
    parts = urlsplit(body.graph_base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed.field("body.graph_base_url", "must be an absolute http(s) URL")
    return body.graph_base_url.rstrip("/")


def _app_credentials(org: str, body: models.OAuthStart) -> tuple[str, str | None]:
    """The app id and, when the flow brings its own app, its secret sealed for the record."""
    settings = get_settings()
    if body.app_secret and not body.app_id:
        raise ValidationFailed.field("body.app_secret", "needs app_id: a secret belongs to one app")
    app_id = body.app_id or settings.meta_app_id
    if not app_id:
        raise ValidationFailed.field("body.app_id", "is required: this stage has no META_APP_ID")
    if body.app_secret:
        return app_id, sealed.seal(body.app_secret.get_secret_value(), org)
    if settings.meta_app_secret is None or app_id != settings.meta_app_id:
        raise ValidationFailed.field("body.app_secret", "is required for an app other than this stage's META_APP_ID")
    return app_id, None


def _authorize_url(base_url: str, app_id: str, config_id: str | None, redirect_uri: str | None, state: str) -> str:
    version = base_url.rsplit("/", 1)[-1]
    if not re.fullmatch(r"v[0-9]+\.[0-9]+", version):
        version = get_settings().graph_api_version
    params = {"client_id": app_id, "state": state, "response_type": "code", "override_default_response_type": "true"}
    if redirect_uri:
        params["redirect_uri"] = redirect_uri
    if config_id:
        params["config_id"] = config_id
    params["extras"] = json.dumps({"setup": {}, "featureType": "", "sessionInfoVersion": "3"}, separators=(",", ":"))
    return DIALOG.format(version=version) + "?" + urlencode(params)


def start(store: Store, auth: AuthContext, body: models.OAuthStart) -> models.OAuthStarted:
    org = auth.org_id
    redirect_uri = _check_redirect(body.redirect_uri) if body.redirect_uri else None
    base_url = _base_url(body)
    app_id, app_secret_sealed = _app_credentials(org, body)
    config_id = body.config_id or get_settings().meta_config_id
    now = clock.now()
    progress_id, state = new_id("wbp"), secrets.token_urlsafe(32)
    steps = {name: {"status": "pending", "completed_at": None, "error": None} for name in STEPS}
    steps["oauth_start"] = {"status": "done", "completed_at": clock.iso(now), "error": None}
    item: Item = {
        **flow_key(org, progress_id),
        "entity": "WabaProgress",
        "id": progress_id,
        "organization_id": org,
        "status": "started",
        "steps": steps,
        "app_id": app_id,
        "app_secret_sealed": app_secret_sealed,
        "config_id": config_id,
        "redirect_uri": redirect_uri,
        "graph_base_url": base_url,
        "channel_name": body.channel_name,
        "state_hash": _state_hash(state),
        "phone_numbers": [],
        "granted_scopes": [],
        "granted_waba_ids": [],
        "events": [],
        "created_by": auth.principal_id,
        "created_at": clock.iso(now),
        "updated_at": clock.iso(now),
        "expires_at": clock.iso(now + FLOW_LIFETIME),
        "version": 1,
        "ttl": clock.epoch(now + ABANDONED_TTL),
    }
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(auth, "waba.onboarding_started", "waba_onboarding", progress_id, after={"app_id": app_id}),
        ]
    )
    url = _authorize_url(base_url, app_id, config_id, redirect_uri, state)
    return models.OAuthStarted.model_validate({**_view_fields(item), "state": state, "authorize_url": url})


# Step rules -----------------------------------------------------------------------------------------------------------
def _check_open(item: Item) -> None:
    if item["status"] in TERMINAL:
        raise Conflict(
            f"This onboarding is {item['status']}; start a new one with /v1/waba/oauth/start.",
            details=[{"progress_id": item["id"], "status": item["status"]}],
        )
    expires = clock.parse_stored(item.get("expires_at"), "onboarding expires_at")
    if expires is None or expires <= clock.now():  # unreadable: expired
        raise Conflict(
            "This onboarding expired; start a new one with /v1/waba/oauth/start.",
            details=[{"progress_id": item["id"], "expires_at": item["expires_at"]}],
        )
    until = item.get("lease_until")
    leased = clock.parse_stored(until, "onboarding lease_until")
    if leased is not None and leased > clock.now():
        raise Conflict(
            f"Another request is running {item.get('lease_step')} for this onboarding; retry shortly.",
            details=[{"progress_id": item["id"], "step": item.get("lease_step")}],
        )


def _out_of_order(item: Item, step: str, why: str) -> Conflict:
    return Conflict(
        f"{step} {why}.",
        details=[{"progress_id": item["id"], "step": step, "next_step": next_step(item), "status": item["status"]}],
    )


def _check_step(item: Item, step: str) -> None:
    _check_open(item)
    if item["steps"][step]["status"] == "done":
        raise _out_of_order(item, step, "is already done for this onboarding")
    previous = PREVIOUS.get(step)
    if previous and item["steps"][previous]["status"] != "done":
        raise _out_of_order(item, step, f"needs {previous} first")


def _put_flow(old: Item, new: Item, extra: list[TxOp] | None = None) -> list[TxOp]:
    return [
        Put(
            item=new,
            **versioned(old["version"]),
            error=Conflict("The onboarding changed meanwhile; read its progress and retry."),
        ),
        *(extra or []),
    ]


def _next_version(item: Item, changes: Item) -> Item:
    return {**item, **changes, "updated_at": clock.now_iso(), "version": int(item["version"]) + 1}


def _claim(store: Store, item: Item, step: str) -> Item:
    """Only the request that wins this conditional write calls Graph for the step."""
    until = clock.iso(clock.now() + LEASE)
    claimed = _next_version(item, {"lease_step": step, "lease_until": until})
    store.transact(_put_flow(item, claimed))
    return claimed


def _done(item: Item, step: str, changes: Item) -> Item:
    steps = {**item["steps"], step: {"status": "done", "completed_at": clock.now_iso(), "error": None}}
    new = _next_version(item, {**changes, "steps": steps, "last_error": None})
    new.pop("lease_step", None)
    new.pop("lease_until", None)
    if new["status"] == "started":
        new["status"] = "in_progress"
    return new


# Errors ---------------------------------------------------------------------------------------------------------------
def _provider_fields(err: Exception) -> dict[str, Any]:
    """What a Graph failure said: the envelope code, the provider's message, Graph's code, subcode and trace id."""
    if isinstance(err, ProviderRejected):
        detail = err.details[0] if err.details else {}
        code = detail.get("provider_code")
        return {
            "code": err.code,
            "message": err.message,
            "http_status": detail.get("http_status"),
            "provider_code": int(code) if isinstance(code, int) else None,
            "provider_subcode": detail.get("provider_error_subcode"),
            "provider_type": detail.get("provider_type"),
            "fbtrace_id": detail.get("provider_fbtrace_id"),
        }
    message = str(err) or "Meta's Graph API is unavailable."
    found = re.search(r"\(#([0-9]+)\)", message)  # throttling codes arrive as "retry later" with Graph's message
    return {
        "code": "service_unavailable",
        "message": message,
        "http_status": None,
        "provider_code": int(found.group(1)) if found else None,
        "provider_subcode": None,
        "provider_type": None,
        "fbtrace_id": None,
    }


def _error_put(org: str, progress_id: str, step: str, fields: dict[str, Any], label: str | None = None) -> Put:
    ulid, now = new_ulid(), clock.now()
    record = {
        "PK": keys.org_pk(org),
        "SK": f"WABAERR#{ulid}",
        "entity": "WabaError",
        "id": f"wbe_{ulid.lower()}",
        "organization_id": org,
        "progress_id": progress_id,
        "step": step,
        **fields,
        "support_label": label or support.label_for(fields.get("provider_code"), fields.get("provider_subcode")),
        "created_at": clock.iso(now),
        "ttl": clock.epoch(now + ERROR_TTL),
    }
    return Put(item=record, condition="attribute_not_exists(PK)")


def _last_error(step: str, error: Put) -> dict[str, Any]:
    record = error.item
    return {
        "step": step,
        "code": record["code"],
        "message": record["message"],
        "provider_code": record.get("provider_code"),
        "provider_subcode": record.get("provider_subcode"),
        "support_label": record.get("support_label"),
        "at": record["created_at"],
    }


def _record_failure(store: Store, item: Item, step: str, err: Exception) -> None:
    """The failed step and its error, in one transaction; the flow stays open so the step can be retried."""
    error = _error_put(item["organization_id"], item["id"], step, _provider_fields(err))
    steps = {**item["steps"], step: {"status": "failed", "completed_at": None, "error": error.item["message"]}}
    new = _next_version(item, {"steps": steps, "last_error": _last_error(step, error)})
    new.pop("lease_step", None)
    new.pop("lease_until", None)
    with contextlib.suppress(DomainError):  # the caller gets Graph's error either way
        store.transact(_put_flow(item, new, [error]))


def _graph(item: Item, *, token: bool = True) -> Graph:
    if not token:
        return Graph(item["graph_base_url"])
    return Graph(item["graph_base_url"], sealed.unseal(item["token_sealed"], item["organization_id"]))


# signup-event ---------------------------------------------------------------------------------------------------------
def signup_event(store: Store, auth: AuthContext, body: models.SignupEvent) -> models.Progress:
    org = auth.org_id
    item = get_item(store, org, body.progress_id, consistent=True)
    _check_open(item)
    data = body.data
    signup = item["steps"]["signup_event"]["status"]
    record = {
        "event": body.event,
        "received_at": clock.now_iso(),
        "current_step": data.current_step,
        "error_message": data.error_message,
    }
    events = [*item.get("events", []), record][-MAX_EVENTS:]
    if body.event in ("FINISH", "FINISH_ONLY_WABA"):
        new = _finish_event(item, body, events)
        extra: list[TxOp] = [
            audit_put(auth, "waba.signup_finished", "waba_onboarding", item["id"], after={"waba_id": data.waba_id})
        ]
    else:
        if signup == "done" or item["steps"]["exchange_code"]["status"] == "done":
            raise _out_of_order(item, "signup_event", f"{body.event} cannot follow a finished signup")
        ending = "canceled" if body.event == "CANCEL" else "failed"
        message = (
            f"The business canceled the embedded signup at {data.current_step or 'an unknown step'}."
            if ending == "canceled"
            else data.error_message or "The embedded signup reported an error."
        )
        steps = {**item["steps"], "signup_event": {"status": "failed", "completed_at": None, "error": message}}
        new = _next_version(item, {"status": ending, "steps": steps, "events": events})
        extra = [
            outbox_put(
                org, f"waba.onboarding.{ending}", {"progress_id": item["id"], "status": ending, "organization_id": org}
            )
        ]
        if ending == "failed":
            error = _error_put(
                org,
                item["id"],
                "signup_event",
                {
                    "code": "signup_error",
                    "message": message,
                    "http_status": None,
                    "provider_code": None,
                    "provider_subcode": None,
                    "provider_type": None,
                    "fbtrace_id": None,
                    "error_id": data.error_id,
                    "session_id": data.session_id,
                },
                label="signup_flow",
            )
            new["last_error"] = _last_error("signup_event", error)
            extra.append(error)
    store.transact(_put_flow(item, new, extra))
    return view(new)


def _finish_event(item: Item, body: models.SignupEvent, events: list[dict[str, Any]]) -> Item:
    data = body.data
    if not data.waba_id:
        raise ValidationFailed.field("body.data.waba_id", f"is required for {body.event}")
    if body.event == "FINISH" and not data.phone_number_id:
        raise ValidationFailed.field("body.data.phone_number_id", "is required for FINISH")
    if item["steps"]["signup_event"]["status"] == "done":
        raise _out_of_order(item, "signup_event", "is already done for this onboarding")
    if item["steps"]["register_phone"]["status"] == "done":
        raise _out_of_order(item, "signup_event", "comes too late: the phone number is already registered")
    granted = item.get("granted_waba_ids") or []
    if (granted and data.waba_id not in granted) or (item.get("waba_id") and item["waba_id"] != data.waba_id):
        raise Conflict(
            "The signup names another WhatsApp Business Account than the one the access token grants.",
            details=[{"progress_id": item["id"], "waba_id": data.waba_id}],
        )
    known = [p["id"] for p in item.get("phone_numbers") or []]
    if data.phone_number_id and known and data.phone_number_id not in known:
        raise Conflict(
            "The phone number is not one of the business account's numbers.",
            details=[{"progress_id": item["id"], "phone_number_id": data.phone_number_id}],
        )
    changes: Item = {"waba_id": data.waba_id, "events": events}
    if data.phone_number_id:
        changes["phone_number_id"] = data.phone_number_id
    if data.business_id:
        changes["business_id"] = data.business_id
    return _done(item, "signup_event", changes)


# exchange-code --------------------------------------------------------------------------------------------------------
def _app_secret(item: Item) -> str:
    if item.get("app_secret_sealed"):
        return sealed.unseal(item["app_secret_sealed"], item["organization_id"])

    secret = get_settings().meta_app_secret
    if secret is None:
        raise Conflict("This stage no longer has META_APP_SECRET; start a new onboarding.")
    return secret.get_secret_value()


def exchange_code(store: Store, auth: AuthContext, body: models.ExchangeCode) -> models.Progress:
    item = get_item(store, auth.org_id, body.progress_id, consistent=True)
    _check_step(item, "exchange_code")
    if not hmac.compare_digest(_state_hash(body.state.get_secret_value()), item["state_hash"]):
        raise ValidationFailed.field("body.state", "does not match the state oauth/start returned for this onboarding")
    item = _claim(store, item, "exchange_code")
    org, app_id = item["organization_id"], item["app_id"]
    try:
        app_secret = _app_secret(item)
        graph = _graph(item, token=False)
        code = body.code.get_secret_value()
        token, expires_in = graph.exchange_code(app_id, app_secret, code, item.get("redirect_uri"))
        info = graph.debug_token(app_id, app_secret, token)
        if MANAGEMENT not in info.scopes:
            raise ProviderRejected(f"The business did not grant {MANAGEMENT}; run the embedded signup again.")
        waba_id = item.get("waba_id") or (info.waba_ids[0] if info.waba_ids else None)
        if not waba_id or (info.waba_ids and waba_id not in info.waba_ids):
            raise ProviderRejected("The access token does not grant access to the WhatsApp Business Account.")
        numbers = Graph(item["graph_base_url"], token).phone_numbers(waba_id)
    except (ProviderRejected, ProviderUnavailable) as err:
        _record_failure(store, item, "exchange_code", err)
        raise
    phone_id = item.get("phone_number_id") or (numbers[0]["id"] if len(numbers) == 1 else None)
    expires_at = info.expires_at or (clock.epoch(clock.now()) + expires_in if expires_in else 0)
    changes: Item = {
        "token_sealed": sealed.seal(token, org),
        "token_expires_at": clock.iso(datetime.fromtimestamp(expires_at, UTC)) if expires_at else None,
        "granted_scopes": info.scopes,
        "granted_waba_ids": info.waba_ids,
        "waba_id": waba_id,
        "phone_number_id": phone_id,
        "phone_numbers": [_phone_info(n) for n in numbers],
    }
    new = _done(item, "exchange_code", changes)
    if new["steps"]["signup_event"]["status"] == "pending":
        new["steps"]["signup_event"] = {"status": "skipped", "completed_at": None, "error": None}
    audit = audit_put(auth, "waba.token_obtained", "waba_onboarding", item["id"], after={"waba_id": waba_id})
    store.transact(_put_flow(item, new, [audit]))
    return view(new)


def _phone_info(row: dict[str, Any]) -> dict[str, Any]:
    fields = ("id", "display_phone_number", "verified_name", "quality_rating", "code_verification_status")
    return {k: str(row[k]) for k in fields if row.get(k) is not None}


# register-phone -------------------------------------------------------------------------------------------------------
def register_phone(store: Store, auth: AuthContext, body: models.RegisterPhone) -> models.Progress:
    item = get_item(store, auth.org_id, body.progress_id, consistent=True)
    _check_step(item, "register_phone")
    phone_id = item.get("phone_number_id")
    known = [p["id"] for p in item.get("phone_numbers") or []]
    if body.phone_number_id:
        if phone_id and body.phone_number_id != phone_id:
            raise ValidationFailed.field("body.phone_number_id", f"this onboarding is for number {phone_id}")
        if known and body.phone_number_id not in known:
            raise ValidationFailed.field("body.phone_number_id", "is not a number of the business account")
        phone_id = body.phone_number_id
    if not phone_id:
        raise ValidationFailed.field(
            "body.phone_number_id", "is required: the business account has several numbers (see phone_numbers)"
        )
    item = _claim(store, item, "register_phone")
    try:
        _graph(item).register(phone_id, body.pin.get_secret_value())
    except (ProviderRejected, ProviderUnavailable) as err:
        _record_failure(store, item, "register_phone", err)
        raise
    new = _done(item, "register_phone", {"phone_number_id": phone_id})
    audit = audit_put(auth, "waba.phone_registered", "waba_onboarding", item["id"], after={"phone_number_id": phone_id})
    store.transact(_put_flow(item, new, [audit]))
    return view(new)


# subscribe-webhook ----------------------------------------------------------------------------------------------------
def subscribe_webhook(
    store: Store, auth: AuthContext, body: models.ProgressStep, callback_url: str | None = None
) -> models.Progress:
    """Subscribes the app to the business account; with `callback_url` (the app-level whatsapp_cloud webhook of
    this deployment) Meta sends the account's traffic there, checked with a fresh verify token. The token is stored
    sealed on the flow (then in the channel's config), and indexed by its hash first, so Meta's handshake during
    the subscription finds it (`messaging.cloud_webhook.subscription`)."""
    org = auth.org_id
    item = get_item(store, org, body.progress_id, consistent=True)
    _check_step(item, "subscribe_webhook")
    item = _claim(store, item, "subscribe_webhook")
    token = secrets.token_urlsafe(32) if callback_url else None
    if token:
        saved = _next_version(item, {"verify_token_sealed": sealed.seal(token, org)})
        store.transact([*_put_flow(item, saved), claims.flow_token_put(org, item["id"], token)])
        item = saved
    try:
        graph = _graph(item)
        graph.subscribe(item["waba_id"], callback_url, token)
        if item["app_id"] not in graph.subscribed_app_ids(item["waba_id"]):
            raise ProviderRejected("Meta does not list this app among the business account's subscribed apps.")
    except (ProviderRejected, ProviderUnavailable) as err:
        _record_failure(store, item, "subscribe_webhook", err)
        raise
    new = _done(item, "subscribe_webhook", {"callback_url": callback_url} if callback_url else {})
    audit = audit_put(auth, "waba.webhook_subscribed", "waba_onboarding", item["id"], after={"app_id": item["app_id"]})
    store.transact(_put_flow(item, new, [audit]))
    return view(new)


# sync-meta ------------------------------------------------------------------------------------------------------------
def sync_meta(store: Store, auth: AuthContext, body: models.ProgressStep) -> models.Progress:
    # on first use: keeps switchboard.messaging.channels off the cold start
    from switchboard.messaging import channels

    org = auth.org_id
    item = get_item(store, org, body.progress_id, consistent=True)
    _check_step(item, "sync_meta")
    item = _claim(store, item, "sync_meta")
    try:
        graph = _graph(item)
        waba = graph.waba(item["waba_id"])
        phone = graph.phone(item["phone_number_id"])
        rows, more = graph.templates(item["waba_id"])
        by_status: dict[str, int] = {}
        for row in rows:
            status = str(row.get("status") or "UNKNOWN")
            by_status[status] = by_status.get(status, 0) + 1
        meta = {
            "waba": {k: v for k, v in waba.items() if v is not None},
            "phone": {k: v for k, v in phone.items() if v is not None},
            "templates": {"count": len(rows), "by_status": by_status, "has_more": more},
        }
        if not item.get("channel_id"):
            channel = channels.create(store, auth, _channel_request(item, phone))
            # Remembered at once: a retry after a failure below reuses this channel instead of making another.
            saved = _next_version(item, {"channel_id": channel.id})
            store.transact(_put_flow(item, saved))
            item = saved
        connected = channels.connect(store, auth, item["channel_id"])
        if connected.status != "connected":
            raise ProviderRejected(f"The channel did not connect: {connected.last_error or connected.status}")
    except (ProviderRejected, ProviderUnavailable) as err:
        _record_failure(store, item, "sync_meta", err)
        raise
    new = _done(item, "sync_meta", {**meta, "status": "completed", "completed_at": clock.now_iso()})
    new.pop("ttl", None)
    payload = {
        "progress_id": item["id"],
        "status": "completed",
        "channel_id": item["channel_id"],
        "waba_id": item["waba_id"],
        "phone_number_id": item["phone_number_id"],
        "organization_id": org,
    }
    extra: list[TxOp] = [
        outbox_put(org, "waba.onboarding.completed", payload),
        audit_put(auth, "waba.onboarding_completed", "waba_onboarding", item["id"], after=payload),
    ]
    store.transact(_put_flow(item, new, extra))
    return view(new)


def _channel_request(item: Item, phone: dict[str, Any]) -> Any:
    # on first use: keeps switchboard.contacts.identifiers off the cold start
    from switchboard.contacts.identifiers import TRUSTED, normalize_phone

    # on first use: keeps switchboard.messaging.models off the cold start
    from switchboard.messaging import models as messaging_models

    org = item["organization_id"]
    number: str | None = None
    with contextlib.suppress(DomainError):
        number = normalize_phone(str(phone.get("display_phone_number") or ""), "phone", TRUSTED)  # Meta's word
    app_secret = item.get("app_secret_sealed") or sealed.seal(_app_secret(item), org)
    name = item.get("channel_name") or phone.get("verified_name") or f"WhatsApp {item['phone_number_id']}"
    return messaging_models.ChannelCreate.model_validate(
        {
            "name": str(name)[:100],
            "platform": "whatsapp_cloud",
            "phone_number": number,
            "config": {
                "base_url": item["graph_base_url"],
                "access_token": item["token_sealed"],
                "app_secret": app_secret,
                "phone_number_id": item["phone_number_id"],
                "waba_id": item["waba_id"],
                "onboarding_id": item["id"],
                **({"verify_token": item["verify_token_sealed"]} if item.get("verify_token_sealed") else {}),
            },
        }
    )


# errors ---------------------------------------------------------------------------------------------------------------
def list_errors(
    store: Store, auth: AuthContext, limit: int, cursor: str | None, progress_id: str | None
) -> tuple[list[models.OnboardingError], str | None]:
    """Newest first; `progress_id` filters the range (at most 10 reads fill a page)."""
    org = auth.org_id
    fingerprint = query_fingerprint("waba-errors", {"progress_id": progress_id})
    found, nxt = cursor_page(
        store,
        org,
        fingerprint,
        cursor,
        limit=limit,
        sk_prefix="WABAERR#",
        forward=False,
        filters={"progress_id": progress_id},
    )
    return [models.OnboardingError.model_validate(i) for i in found], nxt
