"""Global secondary indexes that lag their table, as on AWS (moto's are updated in the same call as the table).

DynamoDB propagates a write to the table's GSIs asynchronously: a Query on an index can miss an item written a
moment earlier, or still show one just deleted or changed, and `ConsistentRead` is refused on a GSI. moto answers
index reads from the table itself, so code that checks an index and then acts on the answer ("no records of this
type: delete it") looks right on moto and is wrong on AWS. `IndexLag` makes moto's indexes lag:

- `IndexLag()` (tests): every Query and Scan on a global secondary index sees the table as it was at the last
  `settle()` (or when the mode was installed); reads of the table itself are unchanged. A test writes, then acts
  before settling, exactly as a request can on AWS.
- `IndexLag(lag_ms=N)` (the local stack, `LOCAL_INDEX_LAG_MS`): the same, settled by itself whenever its view is more
  than N ms old, so an index read may miss what was written in the last N ms.

It patches moto's `Table.query` / `Table.scan` in this process (the integration tests' in-process moto and the local
stack's moto server both run here); DynamoDB requests are serialized in both, so swapping the items a read sees for
the duration of the read is safe.
"""

from __future__ import annotations

import copy
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

_lock = threading.RLock()
_active: IndexLag | None = None
_originals: dict[str, Callable[..., Any]] = {}


class IndexLag:
    def __init__(self, lag_ms: float | None = None) -> None:
        self.lag_ms = lag_ms
        self._views: dict[str, Any] = {}  # table name → its items as of the last settle
        self._settled_at = time.monotonic()

    # Control -------------------------------------------------------------------------------------------------------
    def install(self) -> IndexLag:
        """Make every GSI read lag from now on (one instance at a time); the view starts as the tables are now."""
        global _active
        with _lock:
            if _active is not None:
                raise RuntimeError("an IndexLag is installed already")
            _patch()
            _active = self
            self.settle()
        return self

    def uninstall(self) -> None:
        global _active
        with _lock:
            if _active is self:
                _active = None
                _unpatch()

    def __enter__(self) -> IndexLag:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def settle(self) -> None:
        """The indexes catch up: from now on they show every table as it is now (until the next write)."""
        with _lock:
            self._views = {name: copy.deepcopy(table.items) for name, table in _tables()}
            self._settled_at = time.monotonic()

    # What an index read sees -----------------------------------------------------------------------------------------
    def view_of(self, table: Any) -> Any:
        with _lock:
            if self.lag_ms is not None and (time.monotonic() - self._settled_at) * 1000 > self.lag_ms:
                self.settle()
            if table.name not in self._views:  # created since the last settle: its index is still empty
                self._views[table.name] = type(table.items)(dict)
            return self._views[table.name]


def _tables() -> list[tuple[str, Any]]:
    from moto.dynamodb.models import dynamodb_backends

    found: list[tuple[str, Any]] = []
    for regions in dynamodb_backends.values():
        for backend in regions.values():
            found.extend(backend.tables.items())
    return found


def _is_gsi(table: Any, index_name: str | None) -> bool:
    return bool(index_name) and any(i.name == index_name for i in table.global_indexes or [])


def _lagging(method: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        lag = _active
        if lag is None:
            return original(self, *args, **kwargs)
        index_name = signature.bind_partial(self, *args, **kwargs).arguments.get("index_name")
        if not _is_gsi(self, index_name):
            return original(self, *args, **kwargs)
        with _lock:
            current = self.items
            self.items = lag.view_of(self)
            try:
                return original(self, *args, **kwargs)
            finally:
                self.items = current

    read.__name__ = method
    return read


def _patch() -> None:
    from moto.dynamodb.models.table import Table

    if _originals:
        return
    for method in ("query", "scan"):
        _originals[method] = getattr(Table, method)
        setattr(Table, method, _lagging(method, _originals[method]))


def _unpatch() -> None:
    from moto.dynamodb.models.table import Table

    for method, original in _originals.items():
        setattr(Table, method, original)
    _originals.clear()
