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


def walk_pks(org_id: str) -> list[str]:
    """The partitions of the organization's contact list (GSI1) a walk over every contact reads: the legacy
    unsharded one first, then the shards. A contact only ever leaves the legacy partition (its next write puts it
    in its shard) and keeps its shard, so a walk in this order meets every contact that exists throughout it."""
    *sharded, legacy = shards.index_pks(list_pk(org_id))
    return [legacy, *sharded]


def walk_page(
    store: Store, org_id: str, checkpoint: dict[str, Any] | None, *, limit: int
) -> tuple[list[Item], dict[str, Any] | None]:
    """One page of a job's walk over every contact of the organization (`shards.scan_page` over `walk_pks`, the
    partitions one after the other), and the checkpoint to continue from: None only when the walk is done. The page
    goes on into the next partitions while it has fewer than `limit` contacts: it reads at most `limit` items, in
    at most one Query per partition (a page may still be short or empty). A checkpoint without `part` is a
    LastEvaluatedKey of the unsharded list, written before the list was sharded: the walk resumes there and then
    reads the shards."""
    if checkpoint is not None and "part" not in checkpoint:
        checkpoint = {"part": 0, "cursor": checkpoint}
    pks = walk_pks(org_id)
    out: list[Item] = []
    for _ in pks:
        items, checkpoint = shards.scan_page(store, pks, checkpoint, limit=limit - len(out), index="GSI1")
        out += items
        if checkpoint is None or len(out) >= limit:
            break
    return out, checkpoint


def stage_in_use(store: Store, org_id: str, stage: str) -> bool:
    """Whether any contact holds the lifecycle stage: one round of short Queries, every shard of the stage's
    list and its legacy partition side by side (`shards.merged_page`)."""
    found, _ = shards.merged_page(store, shards.index_pks(stage_pk(org_id, stage)), None, index="GSI2", limit=1)
    return bool(found)
