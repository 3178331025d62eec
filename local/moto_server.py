"""moto's threaded server, made safe for a multi-threaded API in front of it.

Two moto 5 behaviours break the local stack under concurrency, so this module changes them while the stack runs:

1. moto's server handles requests on concurrent threads without any lock around DynamoDB, so a conditional write
   (`attribute_not_exists`) or a transaction is not atomic against a concurrent one: two racing "create unique"
   transactions could both succeed. `LocalMotoServer` runs DynamoDB and DynamoDB Streams requests one at a time
   (DynamoDB's own guarantee); other services stay concurrent.
2. `transact_write_items` backs up the whole table with `copy.deepcopy` before every operation, and on a cancelled
   transaction replaces the table object with that copy. Each transaction therefore costs O(table + stream) and, worse,
   a cancelled one detaches the table from every open DynamoDB stream iterator: the stream poller would never see
   another record. `patch_transactions()` replaces it with an undo log of the touched items plus a truncation of the
   stream shard back to where the transaction began: same results, cost O(items touched), table object kept.

And one limit AWS enforces and moto does not, so that the local stack and the tests fail where AWS would:
`patch_limits()` makes EventBridge's `PutEvents` refuse a request whose entries exceed 256 KiB together (one entry
over it included), as EventBridge does (ValidationException), sizing entries as EventBridge does
(switchboard.events.limits). moto already refuses more than 10 entries.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer

_patch_lock = threading.Lock()
_patch_users = 0
_original_transact: Any = None
_limit_users = 0
_original_put_events: Any = None


class _SerializedDynamoDB:
    """WSGI middleware: DynamoDB (and Streams) requests run one at a time, their response read inside the lock."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.RLock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB"):
            return self.app(environ, start_response)
        with self.lock:
            result = self.app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]


class LocalMotoServer:
    """moto's server app (the one `ThreadedMotoServer` runs) on a werkzeug server thread of our own, with serialized
    DynamoDB requests and cheap, table-preserving transactions. Same interface: `start`, `get_host_and_port`,
    `stop`."""

    def __init__(self, ip_address: str = "127.0.0.1", port: int = 0) -> None:
        self.ip_address = ip_address
        self.port = port
        self.server: BaseWSGIServer | None = None
        self.thread: threading.Thread | None = None
        self.patched = False

    def start(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        patch_transactions()
        patch_limits()
        self.patched = True
        app = DomainDispatcherApplication(create_backend_app)
        self.server = make_server(
            self.ip_address, self.port, _SerializedDynamoDB(app), True, request_handler=MotoRequestHandler
        )
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        assert self.server is not None, "start() first"
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        try:
            if self.server is not None:
                self.server.shutdown()
            if self.thread is not None:
                self.thread.join()
        finally:
            if self.patched:
                self.patched = False
                unpatch_transactions()
                unpatch_limits()


def patch_transactions() -> None:
    """Install the undo-log `transact_write_items` (reference counted; `unpatch_transactions` restores moto's)."""
    global _patch_users, _original_transact
    from moto.dynamodb.models import DynamoDBBackend

    with _patch_lock:
        if _patch_users == 0:
            _original_transact = DynamoDBBackend.transact_write_items
            DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
        _patch_users += 1


def unpatch_transactions() -> None:
    global _patch_users, _original_transact
    from moto.dynamodb.models import DynamoDBBackend

    with _patch_lock:
        _patch_users = max(0, _patch_users - 1)
        if _patch_users == 0 and _original_transact is not None:
            DynamoDBBackend.transact_write_items = _original_transact  # type: ignore[method-assign]
            _original_transact = None


def patch_limits() -> None:
    """EventBridge's PutEvents size limit on moto's events backend (reference counted; `unpatch_limits` undoes it)."""
    global _limit_users, _original_put_events
    from moto.events.models import EventsBackend

    with _patch_lock:
        if _limit_users == 0:
            _original_put_events = EventsBackend.put_events
            EventsBackend.put_events = _put_events_within_limits  # type: ignore[method-assign]
        _limit_users += 1


def unpatch_limits() -> None:
    global _limit_users, _original_put_events
    from moto.events.models import EventsBackend

    with _patch_lock:
        _limit_users = max(0, _limit_users - 1)
        if _limit_users == 0 and _original_put_events is not None:
            EventsBackend.put_events = _original_put_events  # type: ignore[method-assign]
            _original_put_events = None


def _put_events_within_limits(self: Any, events: list[dict[str, Any]]) -> Any:
    from moto.events.exceptions import ValidationException

    from switchboard.events.limits import MAX_REQUEST_BYTES, entry_size

    if sum(entry_size(entry) for entry in events) > MAX_REQUEST_BYTES:
        raise ValidationException("Total size of the entries in the request is over the limit.")
    return _original_put_events(self, events)


def _key_values(table: Any, op_type: str, op: dict[str, Any]) -> tuple[Any, Any]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    source = op["Item"] if op_type == "Put" else op["Key"]
    hash_value = DynamoType(source[table.hash_key_attr])
    range_value = DynamoType(source[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def _restore(table: Any, hash_value: Any, range_value: Any, snapshot: Any) -> None:
    """Put an item back as it was (or remove it), without a stream record."""
    if range_value is not None:
        if snapshot is None:
            table.items.get(hash_value, {}).pop(range_value, None)
        else:
            table.items[hash_value][range_value] = snapshot
    elif snapshot is None:
        table.items.pop(hash_value, None)
    else:
        table.items[hash_value] = snapshot


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto 5.2's `transact_write_items`, with an undo log instead of whole-table deep copies."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()

    stream_marks: dict[str, tuple[Any, int]] = {}
    for item in transact_items:
        _, op = next(iter(item.items()))
        table_name = op.get("TableName")
        if table_name and table_name in self.tables and table_name not in stream_marks:
            shard = self.tables[table_name].stream_shard
            stream_marks[table_name] = (shard, len(shard.items) if shard is not None else 0)
    undo: list[tuple[Any, Any, Any, Any]] = []

    def rollback() -> None:
        for table, hash_value, range_value, snapshot in reversed(undo):
            _restore(table, hash_value, range_value, snapshot)
        for shard, length in stream_marks.values():
            if shard is not None:
                del shard.items[length:]

    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        marker = (str(table_name), str(dict(sorted(key.items()))))
        if marker in target_items:
            raise MultipleTransactionsException()
        target_items.add(marker)

    errors: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            return_on_failure = op.get("ReturnValuesOnConditionCheckFailure")

            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            check_unicity(table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(condition_expression, names, values)
                if not condition_op.expr(current):
                    if return_on_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type != "ConditionCheck":
                table = self.get_table(table_name)
                hash_value, range_value = _key_values(table, op_type, op)
                undo.append((table, hash_value, range_value, copy.deepcopy(current)))

            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            rollback()
            raise
        except ConditionalCheckFailed as err:
            errors.append(("ConditionalCheckFailed", str(err.message), original_item))
        except Exception as err:
            errors.append((type(err).__name__, str(err), original_item))

    if any(code is not None for code, _, _ in errors):
        rollback()
        raise TransactionCanceledException(errors)
