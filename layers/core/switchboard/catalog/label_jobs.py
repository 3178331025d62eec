"""Detaching a deleted label everywhere (job kind `label.detach`, switchboard.jobs).

`DELETE /v1/labels/{id}` deletes the catalogue item and its name pointer, writes the audit record (`label.deleted`,
with the job id) and starts this job, in one transaction; from then on no attach can succeed (attaching checks that
the label exists). Checkpoint `{"label_id", "phase": "conversations" | "messages"}`; each chunk takes one consistent
page of `PAGE` link rows, `LBLCONV#<label>#<conv>` then `LBLMSG#<label>#<msg>`, and detaches each: the conversation's
`labels` list (one `conversation.updated` per conversation, optimistic on its `version`) or the message's `labels`
set, deleting the link row in the same transaction; then the page's rows are deleted (a conversation or message
that is gone, or no longer carrying the label, leaves only its link row).
Rows done are gone, so each chunk starts from the first remaining row and a repeated chunk finds nothing to do.
"""

from __future__ import annotations

from typing import Any

from switchboard.access import AuthContext
from switchboard.catalog import labels
from switchboard.errors import NotFound
from switchboard.jobs.service import Chunk
from switchboard.store import Store, keys

KIND = labels.DETACH_JOB
PAGE = 25  # link rows per chunk: one transaction each
Item = dict[str, Any]


def run_chunk(store: Store, job: Item) -> Chunk:
    org = str(job["organization_id"])
    checkpoint = dict(job.get("checkpoint") or {})
    label = {"id": str(checkpoint["label_id"])}
    auth = AuthContext("system", "system", None, org, "owner", "system")
    conversations = checkpoint.get("phase", "conversations") == "conversations"
    prefix = f"{'LBLCONV' if conversations else 'LBLMSG'}#{label['id']}#"
    page = store.query(keys.org_pk(org), sk_prefix=prefix, limit=PAGE, consistent=True)
    for row in page.items:
        try:
            if conversations:
                labels.detach_conversation(store, auth, row["conversation_id"], label)
            else:
                labels.detach_message(store, auth, row["message_id"], label)
        except NotFound:  # the conversation or message is gone: only its link row is left
            pass
    # every row of the page is done: delete them all (a stale row whose target no longer had the label too)
    store.batch_delete([keys.key(row["PK"], row["SK"]) for row in page.items])
    progress = {"conversations" if conversations else "messages": len(page.items)}
    if len(page.items) == PAGE:
        return Chunk(checkpoint, progress)
    if conversations:
        return Chunk({**checkpoint, "phase": "messages"}, progress)
    return Chunk({**checkpoint, "phase": "done"}, progress, done=True)
