"""Single-table store: key builders, conditional writes, transactions, cursors."""

from switchboard.store.table import (
    ConditionCheck,
    Delete,
    Page,
    Put,
    Store,
    TxOp,
    Update,
    get_store,
    versioned,
)

__all__ = ["ConditionCheck", "Delete", "Page", "Put", "Store", "TxOp", "Update", "get_store", "versioned"]
