"""Contact items and keys.

CONTACT#<id>                       the contact (GSI1: org's contacts by updated_at; GSI2: by lifecycle stage; both
                                   lists write-sharded by contact id: `walk_page`, `stage_in_use`, the list route)
CONTACT#<id>#NOTE#<ulid>           notes
CONTACT#<id>#TAG#<tag_id>          assigned tags        CTAG#<tag_id>#<contact_id>   reverse, for tag filters
CONTACT#<id>#CONSENT#<channel>     current consent      CONTACT#<id>#CONSENTLOG#<ulid>  history
CONTACT#<id>#SUPP#<channel>        suppressions
IDENT#<space>#<value>              identity sentinel → contact_id (uniqueness per organization)
CSRCH#<token>#<contact_id>         search rows (switchboard.contacts.search)
TAG#<tag_id> / TAGNAME#<lower>     tag catalogue and its unique names
"""

from __future__ import annotations

from typing import Any

from switchboard.store import Store, keys, shards

Item = dict[str, Any]


def contact_key(org_id: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"CONTACT#{contact_id}")


def child_prefix(contact_id: str, kind: str = "") -> str:
    return f"CONTACT#{contact_id}#{kind}"


def child_key(org_id: str, contact_id: str, kind: str, child: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"CONTACT#{contact_id}#{kind}#{child}")


def sentinel_key(org_id: str, sentinel_sk: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), sentinel_sk)


def tag_key(org_id: str, tag_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"TAG#{tag_id}")


def tag_name_key(org_id: str, name: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"TAGNAME#{name.strip().lower()}")


def tag_reverse_key(org_id: str, tag_id: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"CTAG#{tag_id}#{contact_id}")


def merged_key(org_id: str, source_id: str) -> dict[str, str]:
    """The pointer a merge leaves from the merged-away contact to the one it went into (switchboard.contacts.merge)."""
    return keys.key(keys.org_pk(org_id), f"MERGED#CONTACT#{source_id}")


def list_pk(org_id: str) -> str:
    return f"ORG#{org_id}#CONTACTS"


def stage_pk(org_id: str, stage: str) -> str:
    return f"ORG#{org_id}#STAGE#{stage}"


def index_attributes(org_id: str, item: Item) -> Item:
    """GSI keys of a contact: every contact by recency; by lifecycle stage when it has one. Both lists are
    write-sharded by the contact id (`ORG#<org>#CONTACTS#<shard>`, `ORG#<org>#STAGE#<stage>#<shard>`,
    switchboard.store.shards); a contact written before keeps its unsharded partition until its next write."""
    order = f"{item['updated_at']}#{item['id']}"
    out: Item = {"GSI1PK": shards.index_pk(list_pk(org_id), item["id"]), "GSI1SK": order}
    if item.get("lifecycle_stage"):
        out |= {"GSI2PK": shards.index_pk(stage_pk(org_id, item["lifecycle_stage"]), item["id"]), "GSI2SK": order}
    return out


def walk_page(
    store: Store, org_id: str, checkpoint: dict[str, Any] | None, *, limit: int
) -> tuple[list[Item], dict[str, Any] | None]:
    """One page of a job's walk over every contact of the organization: `shards.walk_page` over the contact list
    (GSI1; its legacy partition first, then the shards). None only when the walk is done."""
    return shards.walk_page(store, list_pk(org_id), checkpoint, index="GSI1", limit=limit)


def stage_in_use(store: Store, org_id: str, stage: str) -> bool:
    """Whether any contact holds the lifecycle stage: one round of short Queries, every shard of the stage's
    list and its legacy partition side by side (`shards.merged_page`)."""
    found, _ = shards.merged_page(store, shards.index_pks(stage_pk(org_id, stage)), None, index="GSI2", limit=1)
    return bool(found)
