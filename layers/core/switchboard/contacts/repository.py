"""Contact items and keys.

CONTACT#<id>                       the contact (GSI1: org's contacts by updated_at; GSI2: by lifecycle stage; both
                                   lists write-sharded by contact id: `walk_page`, `stage_in_use`, the list route)
CONTACT#<id>#NOTE#<ulid>           notes
CONTACT#<id>#TAG#<tag_id>          assigned tags        CTAG#<tag_id>#<contact_id>   reverse, for tag filters
CONTACT#<id>#CONSENT#<channel>     current consent      CONTACT#<id>#CONSENTLOG#<ulid>  history
CONTACT#<id>#SUPP#<channel>        suppressions
IDENT#<space>#<value>              identity sentinel → contact_id (uniqueness per organization)
CSRCH#<token>#<contact_id>         search rows (switchboard.contacts.search)
CSTAGE#<stage>#<contact_id>        the contact's lifecycle stage entry (`stage_entry_ops`, `stage_in_use`)
TAG#<tag_id> / TAGNAME#<lower>     tag catalogue and its unique names
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from switchboard.store import Delete, Put, Store, TxOp, keys, shards

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


def _stage_prefix(stage: str) -> str:
    return f"CSTAGE#{quote(stage, safe='')}#"  # quoted: a key holding `#` never prefixes another's entries


def stage_entry_key(org_id: str, stage: str, contact_id: str) -> dict[str, str]:
    return keys.key(keys.org_pk(org_id), f"{_stage_prefix(stage)}{contact_id}")


def stage_entry_ops(org_id: str, old: Item | None, new: Item | None) -> list[TxOp]:
    """The contact's stage entry moved along when it goes from `old` to `new` (None: absent), in the contact's own
    transaction: the base-table record of "this contact holds this stage" that `stage_in_use` reads consistently."""
    before, after = (old or {}).get("lifecycle_stage"), (new or {}).get("lifecycle_stage")
    contact_id = str((new or old or {}).get("id", ""))
    ops: list[TxOp] = []
    if before and before != after:
        ops.append(Delete(key=stage_entry_key(org_id, before, contact_id)))
    if after and (after != before or old is None):
        entry = {"entity": "ContactStageEntry", "contact_id": contact_id, "stage": after}
        ops.append(Put(item={**stage_entry_key(org_id, after, contact_id), **entry}))
    return ops


STAGE_LEGACY_PAGE = 25


def stage_in_use(store: Store, org_id: str, stage: str) -> bool:
    """Whether any contact holds the lifecycle stage, never from an index alone (a GSI lags its table: a contact that
    entered the stage a moment ago may be missing there, one that left it still listed): a consistent Query of the
    stage's entries (one item); then, for contacts last written before entries existed, the stage's lists (every
    shard and the legacy partition side by side, `shards.merged_page`) with each contact found confirmed by a
    consistent read."""
    entries = store.query(keys.org_pk(org_id), sk_prefix=_stage_prefix(stage), limit=1, consistent=True)
    if entries.items:
        return True
    position = None
    while True:
        found, position = shards.merged_page(
            store, shards.index_pks(stage_pk(org_id, stage)), position, index="GSI2", limit=STAGE_LEGACY_PAGE
        )
        if found:
            held = store.batch_get([contact_key(org_id, c["id"]) for c in found], consistent=True)
            if any(c.get("lifecycle_stage") == stage for c in held):
                return True
        if position is None:
            return False
