"""Seal the secrets of items written before they were sealed at rest, and move sealed values to the current version
of the platform secret after a rotation; page by page, resumable.

Items written since sealing existed are sealed on write, and a plain value still reads as itself, so this can run at
any time while the stage serves traffic. Each page is one `Scan` of at most `--page-size` items (filtered to the
entities that hold sealed secrets: `Channel`, `WebhookEndpoint`, `Integration`, `WabaProgress`); each item is
rewritten when:
- it has a plain secret: through the same function its domain uses on write (`channels.sealed_item`,
  `integrations.sealed_item`, the endpoint's `plain_secrets`);
- a sealed value of it opens only under the previous version of the platform secret (after a rotation,
  `switchboard.platform_secret`): it is sealed again under the current one (`sealed.rekey`), and a channel's
  `verify_token_hash` is computed again under it.
Each write is conditioned on the `version` the item was read at, so a concurrent change is never overwritten (the
item is then read again once). After each page the checkpoint (the scan's last key) is printed; pass it back with
`--start` to continue after an interruption.

    PYTHONPATH=layers/core python -m switchboard.reseal [--start <checkpoint>] [--page-size 100] [--dry-run]

It ends with `done` and the counts; running it again finds nothing to do (a `--dry-run` that reports 0 is the check
that a rotation is complete: docs/operations.md "Platform secret").
"""

from __future__ import annotations

import argparse
import base64
import json
from dataclasses import dataclass
from typing import Any

from switchboard import sealed
from switchboard.errors import Conflict
from switchboard.store import Store, get_store, versioned
from switchboard.store.table import deserialize, serialize_key

Item = dict[str, Any]
ENTITIES = ("Channel", "WebhookEndpoint", "Integration", "WabaProgress")
PAGE_SIZE = 100


@dataclass
class Page:
    scanned: int = 0
    resealed: int = 0
    checkpoint: str | None = None  # None: the table is done


def resealed(item: Item) -> Item | None:
    """The item with its plain secrets sealed and every sealed value under the current platform secret, or None when
    there is nothing to do."""
    new = _plain_sealed(item)
    new = _rekeyed(new)
    return None if new == item else new


def _plain_sealed(item: Item) -> Item:
    entity = item.get("entity")
    if entity == "Channel":
        # on first use: keeps switchboard.messaging.channels off the cold start
        from switchboard.messaging.channels import sealed_item as seal_channel

        new = seal_channel(item)
    elif entity == "Integration":
        # on first use: keeps switchboard.settings.integrations off the cold start
        from switchboard.settings.integrations import sealed_item as seal_integration

        new = seal_integration(item)
    elif entity == "WebhookEndpoint":
        # on first use: keeps switchboard.webhooks.service off the cold start
        from switchboard.webhooks.service import plain_secrets

        new = {**item, **plain_secrets(item)}
    else:
        return item
    return new


def _rekeyed(item: Item) -> Item:
    """Every sealed value of the item (at any depth) that opens only under the previous platform secret, sealed again
    under the current one; a channel's `verify_token_hash` computed under the current one."""
    context = str(item.get("organization_id") or str(item.get("PK", "")).removeprefix("ORG#"))
    out = _rekey_value(item, context)
    if out.get("entity") == "Channel" and out.get("verify_token_hash"):
        token = (out.get("config") or {}).get("verify_token")
        try:
            plain = sealed.open_if_sealed(token, context) if isinstance(token, str) else None
        except ValueError:
            plain = None
        if plain and out["verify_token_hash"] != sealed.lookup_hash(plain):
            out = {**out, "verify_token_hash": sealed.lookup_hash(plain)}
    return out  # type: ignore[no-any-return]


def _rekey_value(value: Any, context: str) -> Any:
    if isinstance(value, dict):
        return {k: _rekey_value(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_rekey_value(v, context) for v in value]
    if sealed.is_sealed(value):
        return sealed.rekey(value, context) or value
    return value


def _write(store: Store, item: Item) -> bool:
    """Reseal one item (conditioned on its version; read again once after a concurrent change)."""
    for _ in range(2):
        new = resealed(item)
        if new is None:
            return False
        try:
            store.put(
                new,
                **versioned(item.get("version")),
                error=Conflict("changed meanwhile"),
            )
            return True
        except Conflict:
            fresh = store.get({"PK": item["PK"], "SK": item["SK"]}, consistent=True)
            if fresh is None:
                return False
            item = fresh
    return False


def encode_checkpoint(key: dict[str, Any] | None) -> str | None:
    return None if key is None else base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


def decode_checkpoint(text: str | None) -> dict[str, Any] | None:
    return None if not text else dict(json.loads(base64.urlsafe_b64decode(text.encode())))


def reseal_page(
    store: Store, checkpoint: str | None = None, *, page_size: int = PAGE_SIZE, dry_run: bool = False
) -> Page:
    """One page of the migration: scan `page_size` items from `checkpoint`, reseal those with plain secrets or values
    sealed under the previous platform secret."""
    params: dict[str, Any] = {
        "TableName": store.table_name,
        "Limit": page_size,
        "FilterExpression": "#e IN (" + ", ".join(f":e{i}" for i in range(len(ENTITIES))) + ")",
        "ExpressionAttributeNames": {"#e": "entity"},
        "ExpressionAttributeValues": {f":e{i}": {"S": e} for i, e in enumerate(ENTITIES)},
    }
    start = decode_checkpoint(checkpoint)
    if start is not None:
        params["ExclusiveStartKey"] = serialize_key(start)
    resp = store.client.scan(**params)
    page = Page(scanned=int(resp.get("ScannedCount", 0)))
    for raw in resp.get("Items", []):
        item = deserialize(raw)
        if dry_run:
            page.resealed += resealed(item) is not None
        else:
            page.resealed += _write(store, item)
    last = resp.get("LastEvaluatedKey")
    page.checkpoint = encode_checkpoint({k: v["S"] for k, v in last.items()}) if last else None
    return page


def run(store: Store, checkpoint: str | None = None, *, page_size: int = PAGE_SIZE, dry_run: bool = False) -> int:
    """Every page from `checkpoint` to the end; prints each page's checkpoint. Returns the number resealed."""
    total = 0
    while True:
        page = reseal_page(store, checkpoint, page_size=page_size, dry_run=dry_run)
        total += page.resealed
        checkpoint = page.checkpoint
        print(f"scanned={page.scanned} resealed={page.resealed} checkpoint={checkpoint or '-'}", flush=True)
        if checkpoint is None:
            print(f"done: {'would reseal' if dry_run else 'resealed'} {total} item(s)", flush=True)
            return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", help="the checkpoint printed by an interrupted run")
    parser.add_argument("--page-size", type=int, default=PAGE_SIZE)
    parser.add_argument("--dry-run", action="store_true", help="count what would be resealed, write nothing")
    args = parser.parse_args(argv)
    run(get_store(), args.start, page_size=args.page_size, dry_run=args.dry_run)


if __name__ == "__main__":  # pragma: no cover
    main()
