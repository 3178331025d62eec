"""Backfills as job kinds: one-off passes over an organization's items written before a newer layout, each a chunk
function `(store, org, start) -> next start | None` of its own domain (one page read, idempotent writes), run here
by the job mechanism (switchboard.jobs.service) with the function's continuation (a page's LastEvaluatedKey, or a
walk's position over a sharded list) as the checkpoint `{"cursor"}`.

Started per organization by an operator: `python -m switchboard.jobs start <kind> <organization_id>`.

| kind | chunk function | one chunk |
|---|---|---|
| `contacts.consent_backfill` | `contacts.children.consent_backfill_chunk` | 25 contacts (GSI1, every shard) |
| `contacts.search_reindex` | `contacts.search.reindex_chunk` | 25 contacts (GSI1, every shard) |
| `conversations.assignee_reindex` | `messaging.conversations.reindex_chunk` | a page of conversations (GSI1) |
| `channels.legacy_rows` | `messaging.channels.move_legacy_rows_chunk` | a page of the `CHANNEL#` range |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from switchboard.jobs.service import Chunk
from switchboard.store import Store

Item = dict[str, Any]
Backfill = Callable[[Store, str, "dict[str, Any] | None"], "dict[str, Any] | None"]

FUNCTIONS: dict[str, str] = {
    "contacts.consent_backfill": "switchboard.contacts.children:consent_backfill_chunk",
    "contacts.search_reindex": "switchboard.contacts.search:reindex_chunk",
    "conversations.assignee_reindex": "switchboard.messaging.conversations:reindex_chunk",
    "channels.legacy_rows": "switchboard.messaging.channels:move_legacy_rows_chunk",
}


def run_chunk(store: Store, job: Item) -> Chunk:
    """One chunk of the job's backfill from its checkpoint; done when the function answers no next start."""
    module, _, name = FUNCTIONS[str(job["kind"])].partition(":")
    function: Backfill = getattr(importlib.import_module(module), name)
    following = function(store, str(job["organization_id"]), (job.get("checkpoint") or {}).get("cursor"))
    return Chunk({"cursor": following}, {"pages": 1}, done=following is None)
