"""Integrations: the third-party services an organization connected (a type from `CATALOG`), with the type's
configuration validated field by field and its secrets write-only.

Secrets are sealed at rest (`switchboard.sealed`, the organization as context; `secret_hints` keeps what the view
shows), never returned (only `••••` and, for long ones, their last four characters), never written to audit
entries (which record only *which* secrets changed) and never logged. `ORG#<org>` / `INTEG#<int_id>` holds one
integration with `version`; an organization has at most `MAX_PER_ORG`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from switchboard import clock, sealed
from switchboard.access import AuthContext
from switchboard.audit import audit_put
from switchboard.errors import Conflict, NotFound, ValidationFailed
from switchboard.ids import new_id
from switchboard.models import _valid_email
from switchboard.settings import models
from switchboard.store import Delete, Put, Store, keys, versioned

Item = dict[str, Any]
MAX_PER_ORG = 50
_HOST = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


def _text(pattern: str, hint: str, *, lower: bool = False) -> Callable[[Any], Any]:
    compiled = re.compile(pattern)

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("must be a string")
        value = value.strip().lower() if lower else value.strip()
        if not compiled.fullmatch(value):
            raise ValueError(hint)
        return value

    return check


def _https_url(host_suffix: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, str) or len(value) > 2048:
            raise ValueError("must be a URL")
        parts = urlsplit(value.strip())
        host = (parts.hostname or "").lower()
        if parts.scheme != "https" or not (host == host_suffix or host.endswith("." + host_suffix)):
            raise ValueError(f"must be an https URL on {host_suffix}")
        return value.strip()

    return check


def _hostname(value: Any) -> Any:
    if not isinstance(value, str) or not _HOST.fullmatch(value.strip().lower()):
        raise ValueError("must be a host name")
    return value.strip().lower()


def _port(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError("must be an integer from 1 to 65535")
    return value


def _bool(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _email(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("must be an e-mail address")
    return _valid_email(value.strip())


@dataclass(frozen=True)
class FieldSpec:
    name: str
    check: Callable[[Any], Any]
    description: str
    required: bool = False
    secret: bool = False


@dataclass(frozen=True)
class TypeSpec:
    type: str
    name: str
    description: str
    fields: tuple[FieldSpec, ...]


CATALOG: dict[str, TypeSpec] = {
    spec.type: spec
    for spec in (
        TypeSpec(
            "slack",
            "Slack",
            "Posts notifications to a Slack channel through an incoming webhook.",
            (
                FieldSpec("webhook_url", _https_url("hooks.slack.com"), "incoming webhook URL", True, True),
                FieldSpec("channel", _text(r"#?[a-z0-9_-]{1,80}", "must be a Slack channel name"), "channel name"),
            ),
        ),
        TypeSpec(
            "hubspot",
            "HubSpot",
            "Keeps contacts in sync with a HubSpot portal.",
            (
                FieldSpec("portal_id", _text(r"\d{1,12}", "must be the portal's numeric id"), "portal (hub) id", True),
                FieldSpec(
                    "access_token",
                    _text(r"[A-Za-z0-9_-]{20,512}", "must be a private app access token"),
                    "private app access token",
                    True,
                    True,
                ),
            ),
        ),
        TypeSpec(
            "shopify",
            "Shopify",
            "Brings a Shopify store's customers and order updates in.",
            (
                FieldSpec(
                    "shop_domain",
                    _text(r"[a-z0-9][a-z0-9-]{0,60}\.myshopify\.com", "must be <shop>.myshopify.com", lower=True),
                    "the shop's myshopify.com domain",
                    True,
                ),
                FieldSpec(
                    "access_token",
                    _text(r"shpat_[A-Za-z0-9]{16,128}", "must be an Admin API access token (shpat_…)"),
                    "Admin API access token",
                    True,
                    True,
                ),
            ),
        ),
        TypeSpec(
            "smtp",
            "SMTP relay",
            "Sends the organization's notification e-mails through its own mail server.",
            (
                FieldSpec("host", _hostname, "server host name", True),
                FieldSpec("port", _port, "server port", True),
                FieldSpec("from_email", _email, "sender address", True),
                FieldSpec("username", _text(r"[^\s]{1,256}", "must be a user name without spaces"), "user name"),
                FieldSpec("use_tls", _bool, "STARTTLS or implicit TLS (default true)"),
                FieldSpec("password", _text(r".{1,256}", "must be 1 to 256 characters"), "password", secret=True),
            ),
        ),
    )
}


def catalog() -> list[models.IntegrationType]:
    return [
        models.IntegrationType(
            type=spec.type,
            name=spec.name,
            description=spec.description,
            fields=[
                models.IntegrationField(name=f.name, required=f.required, secret=f.secret, description=f.description)
                for f in spec.fields
            ],
        )
        for spec in CATALOG.values()
    ]


def _every_key(_: str) -> bool:
    return True  # every value of an integration's `secrets` map is a secret


def sealed_item(item: Item) -> Item:
    """The integration as it is stored: every secret sealed, its display hint in `secret_hints` (an item whose
    secrets are all sealed comes back unchanged)."""
    secrets = item.get("secrets") or {}
    if not sealed.has_plain(secrets, _every_key):
        return item
    hints = dict(item.get("secret_hints") or {})
    out = {**item, "secrets": sealed.seal_fields(secrets, item["organization_id"], _every_key, hints)}
    return {**out, "secret_hints": {k: v for k, v in hints.items() if k in out["secrets"]}}


def integration_key(org: str, integration_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org), f"INTEG#{integration_id}")


def view(item: Item) -> models.Integration:
    hints = item.get("secret_hints") or {}
    secrets = item.get("secrets") or {}
    return models.Integration.model_validate(
        {
            **item,
            "secrets": {
                k: hints.get(k, sealed.MASK) if sealed.is_sealed(v) else sealed.hint(str(v)) for k, v in secrets.items()
            },
        }
    )


def _spec(type_name: str) -> TypeSpec:
    spec = CATALOG.get(type_name)
    if spec is None:
        raise ValidationFailed.field("body.type", f"must be one of {', '.join(sorted(CATALOG))}")
    return spec


def _validate(spec: TypeSpec, config: Item, secrets: Item) -> tuple[Item, Item]:
    """Every field checked and normalised; unknown, missing and invalid fields are all reported at once."""
    details: list[dict[str, str]] = []
    out: dict[str, Item] = {"config": {}, "secrets": {}}
    by_name = {f.name: f for f in spec.fields}
    for part, values in (("config", config), ("secrets", secrets)):
        for name, value in values.items():
            field = by_name.get(name)
            if part == "secrets" and field is not None and field.secret and sealed.is_sealed(value):
                out[part][name] = value  # stored sealed, checked when it was written
                continue
            if field is None or field.secret != (part == "secrets"):
                where = "secrets" if field and field.secret else "config" if field else None
                hint = f"belongs in {where}" if where else f"is not a field of {spec.type}"
                details.append({"field": f"body.{part}.{name}", "message": hint})
                continue
            try:
                out[part][name] = field.check(value)
            except ValueError as err:
                details.append({"field": f"body.{part}.{name}", "message": str(err)})
    for field in spec.fields:
        part = "secrets" if field.secret else "config"
        if (
            field.required
            and field.name not in out[part]
            and not any(d["field"] == f"body.{part}.{field.name}" for d in details)
        ):
            details.append({"field": f"body.{part}.{field.name}", "message": "is required"})
    if details:
        message = "; ".join(f"{d['field']}: {d['message']}" for d in details[:3])
        raise ValidationFailed(message, details=details)
    return out["config"], out["secrets"]


def get_item(store: Store, org: str, integration_id: str, *, consistent: bool = False) -> Item:
    return store.require(integration_key(org, integration_id), "No such integration.", consistent=consistent)


def list_integrations(store: Store, auth: AuthContext) -> list[models.Integration]:
    return [view(i) for i in store.query_all(keys.org_pk(auth.org_id), sk_prefix="INTEG#")]


def get(store: Store, auth: AuthContext, integration_id: str) -> models.Integration:
    return view(get_item(store, auth.org_id, integration_id))


def _summary(item: Item, secrets_changed: list[str]) -> Item:
    """What an audit entry may hold: never a secret's value."""
    return {
        "type": item["type"],
        "name": item["name"],
        "enabled": item["enabled"],
        "config": item["config"],
        "secrets_changed": secrets_changed,
    }


def create(store: Store, auth: AuthContext, body: models.IntegrationCreate) -> models.Integration:
    org = auth.org_id
    spec = _spec(body.type)
    config, secrets = _validate(spec, body.config, body.secrets)
    existing = store.query(keys.org_pk(org), sk_prefix="INTEG#", limit=MAX_PER_ORG)
    if len(existing.items) >= MAX_PER_ORG:
        raise Conflict(f"An organization can have at most {MAX_PER_ORG} integrations.")
    now, integration_id = clock.now_iso(), new_id("int")
    item: Item = {
        **integration_key(org, integration_id),
        "entity": "Integration",
        "id": integration_id,
        "organization_id": org,
        "type": spec.type,
        "name": body.name,
        "enabled": body.enabled,
        "config": config,
        "secrets": secrets,
        "created_at": now,
        "updated_at": now,
        "version": 1,
    }
    item = sealed_item(item)
    store.transact(
        [
            Put(item=item, condition="attribute_not_exists(PK)"),
            audit_put(
                auth, "integration.created", "integration", integration_id, after=_summary(item, sorted(secrets))
            ),
        ]
    )
    return view(item)


def _merge(current: Item, changes: Item | None) -> Item:
    merged = dict(current)
    for name, value in (changes or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def update(store: Store, auth: AuthContext, integration_id: str, body: models.IntegrationUpdate) -> models.Integration:
    org = auth.org_id
    item = get_item(store, org, integration_id, consistent=True)
    for name in ("name", "enabled"):
        if name in body.model_fields_set and getattr(body, name) is None:
            raise ValidationFailed.field(f"body.{name}", "cannot be null")
    config, secrets = _validate(
        CATALOG[item["type"]], _merge(item["config"], body.config), _merge(item.get("secrets") or {}, body.secrets)
    )
    old_secrets = item.get("secrets") or {}
    given = {k for k, v in (body.secrets or {}).items() if v is not None}
    secrets_changed = sorted(
        k for k in set(secrets) | set(old_secrets) if k in given or secrets.get(k) != old_secrets.get(k)
    )
    new = {
        **item,
        "name": body.name if body.name is not None else item["name"],
        "enabled": body.enabled if body.enabled is not None else item["enabled"],
        "config": config,
        "secrets": secrets,
    }
    if all(new[k] == item[k] for k in ("name", "enabled", "config")) and not secrets_changed:
        return view(item)
    new = sealed_item(new | {"updated_at": clock.now_iso(), "version": int(item["version"]) + 1})
    store.transact(
        [
            Put(
                item=new,
                **versioned(item["version"]),
                error=Conflict("The integration changed meanwhile; retry."),
            ),
            audit_put(
                auth,
                "integration.updated",
                "integration",
                integration_id,
                before=_summary(item, []),
                after=_summary(new, secrets_changed),
            ),
        ]
    )
    return view(new)


def delete(store: Store, auth: AuthContext, integration_id: str) -> None:
    org = auth.org_id
    item = get_item(store, org, integration_id, consistent=True)
    store.transact(
        [
            Delete(
                key=integration_key(org, integration_id),
                condition="attribute_exists(PK)",
                error=NotFound("No such integration."),
            ),
            audit_put(auth, "integration.deleted", "integration", integration_id, before=_summary(item, [])),
        ]
    )
