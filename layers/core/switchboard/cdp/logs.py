"""The organization's CDP logs and the contact rows that mirror them: where a log row lives.

An activity and a stage change are each written twice, in one transaction: under the contact
(`CONTACT#<ct>#ACT#<ulid>`, `CONTACT#<ct>#STAGELOG#<ulid>` in `ORG#<org>`: the contact's timeline and stage history,
erased and merged with the contact) and in the organization's log (`CDPACT#<ulid>`, `CDPSTAGELOG#<ulid>`). The
organization writes its logs at its event rate, so a log row lives in the write shard of its ULID
(`switchboard.store.shards.pk`), and the contact's row records that partition as `log_pk`: the erasure and the merge
address the log row where it is, never a recomputed key (a raised shard count moves no row). A contact row without
`log_pk` was written before sharding: its log row is in `ORG#<org>`.
"""

from __future__ import annotations

from typing import Any

from switchboard.store import keys, shards

LOG_PREFIXES = {"ACT": "CDPACT#", "STAGELOG": "CDPSTAGELOG#"}  # a contact row's kind → its log row's SK prefix


def log_pk(org: str, ulid: str) -> str:
    """The partition a new log row with this ULID is written to."""
    return shards.pk(org, ulid)


def mirror_key(org: str, child: dict[str, Any]) -> dict[str, str] | None:
    """The key of the log row a contact's child row mirrors (`CONTACT#<ct>#ACT#<ulid>` → `CDPACT#<ulid>` in the
    child's `log_pk`, or `ORG#<org>` without it); None for a child that has no log row (a note, a tag, …)."""
    _, _, rest = str(child["SK"]).removeprefix("CONTACT#").partition("#")
    kind, _, ulid = rest.partition("#")
    prefix = LOG_PREFIXES.get(kind)
    if prefix is None or not ulid:
        return None
    return keys.key(str(child.get("log_pk") or keys.org_pk(org)), f"{prefix}{ulid}")
