"""Tag cascades (job kind `tag.cascade`, switchboard.jobs): what a tag rename or delete changes on every contact.

Contacts carry their tags' names (`tags`, and search rows per tag word, written by `write_contact`), and each
assignment row `CONTACT#<ct>#TAG#<tag>` records the name the contact carries for it. The request does the O(1) part
(rename: the catalogue item and its name pointer; delete: the catalogue item and its name pointer, so the tag can no
longer be assigned) and starts this job in the same transaction. Checkpoint `{"tag_id", "action": "rename" |
"delete", "cursor"}`; each chunk takes one consistent page of `PAGE` reverse rows `CTAG#<tag>#<ct>`:
- `rename`: per contact whose assignment row still holds another name than the tag's current one, one `write_contact`
  transaction replaces that name in `tags` (search rows follow) and sets the row's name (condition: the row still
  holds the name read). Reading the current name at each chunk makes two renames in a row converge on the last; a
  repeated chunk finds nothing left to change. The cursor is the page's LastEvaluatedKey.
- `delete`: per contact, one transaction removes the name from `tags` and deletes the assignment and reverse rows (a
  contact that is gone: only the rows). Rows done are gone, so each chunk starts from the first remaining row.
"""

from __future__ import annotations

from typing import Any

from switchboard.access import AuthContext
from switchboard.contacts import repository as repo
from switchboard.errors import Conflict
from switchboard.jobs.service import Chunk
from switchboard.store import Delete, Store, TxOp, Update, keys

KIND = "tag.cascade"
PAGE = 25  # contacts per chunk: one write_contact transaction each
Item = dict[str, Any]


def system_auth(org: str) -> AuthContext:
    return AuthContext("system", "system", None, org, "owner", "system")


def run_chunk(store: Store, job: Item) -> Chunk:
    org = str(job["organization_id"])
    checkpoint = dict(job.get("checkpoint") or {})
    tag_id = str(checkpoint["tag_id"])
    if checkpoint["action"] == "rename":
        tag = store.get(repo.tag_key(org, tag_id), consistent=True)
        if tag is None:
            return Chunk({**checkpoint, "cursor": None}, {}, done=True)  # deleted meanwhile: its delete job cleans up
        page = store.query(
            keys.org_pk(org),
            sk_prefix=f"CTAG#{tag_id}#",
            limit=PAGE,
            start_key=checkpoint.get("cursor"),
            consistent=True,
        )
        changed = sum(_rename_on(store, org, tag_id, row["contact_id"], tag["name"]) for row in page.items)
        progress = {"contacts": len(page.items), "changed": changed}
        return Chunk({**checkpoint, "cursor": page.last_key}, progress, done=page.last_key is None)
    page = store.query(keys.org_pk(org), sk_prefix=f"CTAG#{tag_id}#", limit=PAGE, consistent=True)
    for row in page.items:
        _remove_from(store, org, tag_id, row["contact_id"])
    return Chunk({**checkpoint, "cursor": None}, {"contacts": len(page.items)}, done=len(page.items) < PAGE)


def _rename_on(store: Store, org: str, tag_id: str, contact_id: str, name: str) -> int:
    """→ 1 when the contact's tag name was changed to `name`."""
    # on first use: keeps switchboard.contacts.service off the cold start
    from switchboard.contacts.service import write_contact

    for _ in range(3):
        contact = store.get(repo.contact_key(org, contact_id), consistent=True)
        row = store.get(repo.child_key(org, contact_id, "TAG", tag_id), consistent=True)
        if contact is None or row is None or row.get("name") == name:
            return 0
        tags = [t for t in contact.get("tags", []) if t != row["name"]]
        tags += [name] if name not in tags else []
        rename_row = Update(
            key=repo.child_key(org, contact_id, "TAG", tag_id),
            expression="SET #n = :new",
            condition="#n = :old",
            names={"#n": "name"},
            values={":new": name, ":old": row["name"]},
            error=Conflict(),
        )
        try:
            write_contact(store, system_auth(org), contact, {**contact, "tags": tags}, [rename_row], ["tags"], "tagged")
            return 1
        except Conflict:
            continue  # the contact or the row changed meanwhile: read again
    raise Conflict("The contact kept changing; the chunk is retried.")


def _remove_from(store: Store, org: str, tag_id: str, contact_id: str) -> None:
    # on first use: keeps switchboard.contacts.service off the cold start
    from switchboard.contacts.service import write_contact

    rows: list[TxOp] = [
        Delete(key=repo.tag_reverse_key(org, tag_id, contact_id)),
        Delete(key=repo.child_key(org, contact_id, "TAG", tag_id)),
    ]
    for _ in range(3):
        contact = store.get(repo.contact_key(org, contact_id), consistent=True)
        row = store.get(repo.child_key(org, contact_id, "TAG", tag_id), consistent=True)
        if contact is None or row is None:
            store.transact(rows)
            return
        tags = [t for t in contact.get("tags", []) if t != row["name"]]
        try:
            write_contact(store, system_auth(org), contact, {**contact, "tags": tags}, rows, ["tags"], "untagged")
            return
        except Conflict:
            continue
    raise Conflict("The contact kept changing; the chunk is retried.")
