"""Webhook items and keys (all tenant items under `ORG#<org_id>`).

WHEP#<whe_id>                     endpoint: url, filter, enabled, sealed secret (+ previous one for 24 h), failures
DLV#<msg_id>                      delivery: one event for one endpoint; the id is deterministic (event, endpoint)
                                  GSI1 `ORG#<org>#WHDLV` / `<created_at>#<msg_id>`           deliveries, newest first
                                  GSI2 `ORG#<org>#WHEP#<whe_id>#DLV` / `<created_at>#<msg_id>`  one endpoint's
                                  GSI3 `ORG#<org>#WHDLV#<status>` / `<created_at>#<msg_id>`    by status
                                  (`status_index`: set in the same write as every status change)
DLV#<msg_id>#ATT#<ulid>           one attempt (status code, duration, error, response excerpt)
WHSET#alerting                    alerting settings (e-mails, failure threshold)
WHPORTAL#<sha256(token)> / WHPORTAL   a portal magic-link token (global partition: the token is all a visitor has)
WHPSESS#<sha256(session)> / WHPSESS   a portal session (organization, CSRF token, 30 min), made by using a link once
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from switchboard.store import Store, keys

Item = dict[str, Any]
DELIVERY_RETENTION = timedelta(days=30)


# Keys -------------------------------------------------------------------------------------------------------------
def endpoint_key(org_id: str, endpoint_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"WHEP#{endpoint_id}")


ENDPOINT_PREFIX = "WHEP#"


def delivery_key(org_id: str, delivery_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"DLV#{delivery_id}")


def attempt_prefix(delivery_id: str) -> str:
    return f"DLV#{delivery_id}#ATT#"


def attempt_key(org_id: str, delivery_id: str, ulid: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), attempt_prefix(delivery_id) + ulid)


def alerting_key(org_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), "WHSET#alerting")


def portal_key(token_hash: str) -> dict[str, str]:
    return keys.key(f"WHPORTAL#{token_hash}", "WHPORTAL")


def portal_session_key(session_hash: str) -> dict[str, str]:
    return keys.key(f"WHPSESS#{session_hash}", "WHPSESS")


def deliveries_pk(org_id: str) -> str:
    """GSI1 partition: every delivery of the organization, sorted by creation."""
    return f"ORG#{org_id}#WHDLV"


def endpoint_deliveries_pk(org_id: str, endpoint_id: str) -> str:
    """GSI2 partition: the deliveries of one endpoint, sorted by creation."""
    return f"ORG#{org_id}#WHEP#{endpoint_id}#DLV"


def delivery_id(event_id: str, endpoint_id: str) -> str:
    """Deterministic: a redelivered event maps to the same delivery, so a conditional put deduplicates it."""
    return "msg_" + hashlib.sha256(f"{event_id}:{endpoint_id}".encode()).hexdigest()[:32]


def delivery_index(org_id: str, endpoint_id: str, created_at: str, msg_id: str) -> Item:
    sort = f"{created_at}#{msg_id}"
    return {
        "GSI1PK": deliveries_pk(org_id),
        "GSI1SK": sort,
        "GSI2PK": endpoint_deliveries_pk(org_id, endpoint_id),
        "GSI2SK": sort,
    }


def status_deliveries_pk(org_id: str, status: str) -> str:
    """GSI3 partition: the organization's deliveries in one status, sorted by creation."""
    return f"{deliveries_pk(org_id)}#{status}"


def status_index(delivery: Item, status: str) -> Item:
    """The GSI3 keys of `delivery` (an item with organization_id, created_at, id) once in `status`: every write that
    sets a delivery's status sets these attributes in the same request."""
    org = str(delivery["organization_id"])
    return {"GSI3PK": status_deliveries_pk(org, status), "GSI3SK": f"{delivery['created_at']}#{delivery['id']}"}


STATUS_INDEX_ATTRIBUTES = ("GSI3PK", "GSI3SK")


def status_index_update(delivery: Item, status: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """`SET` clauses, names and values that move `delivery` into `status`'s lists (appended to an update that
    sets `#status`)."""
    attributes = status_index(delivery, status)
    clauses = ", ".join(f"#{a} = :{a}" for a in attributes)
    return clauses, {f"#{a}": a for a in attributes}, {f":{a}": v for a, v in attributes.items()}


def page_key(item: Item, index: str) -> dict[str, str]:
    """The continuation key of a GSI query that stopped after `item`."""
    return {"PK": item["PK"], "SK": item["SK"], f"{index}PK": item[f"{index}PK"], f"{index}SK": item[f"{index}SK"]}


def payload_of(item: Item) -> dict[str, Any]:
    body = item.get("body")
    return json.loads(body) if isinstance(body, str) and body else {}


# Reads ------------------------------------------------------------------------------------------------------------
def list_endpoints(store: Store, org_id: str, *, consistent: bool = False) -> list[Item]:
    return store.query_all(keys.org_pk(org_id), sk_prefix=ENDPOINT_PREFIX, consistent=consistent)


def get_endpoint(store: Store, org_id: str, endpoint_id: str, *, consistent: bool = False) -> Item | None:
    return store.get(endpoint_key(org_id, endpoint_id), consistent=consistent)


def get_delivery(store: Store, org_id: str, msg_id: str, *, consistent: bool = False) -> Item | None:
    return store.get(delivery_key(org_id, msg_id), consistent=consistent)


def get_alerting(store: Store, org_id: str) -> Item | None:
    return store.get(alerting_key(org_id))
