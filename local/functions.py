"""Function runtimes: each function's handler, imported several times so that each copy acts as one Lambda container.

A Powertools resolver (the module-level `app`) keeps per-request state, so one module instance must never serve
two requests at once. `FunctionPool` keeps up to `size` independently imported copies of `functions/<x>/app.py`
(distinct module names; the `switchboard` package itself is shared), hands each to one invocation at a time, and
imports a new copy only when every existing one is busy.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import queue
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from local.iam_recorder import FUNCTION
from local.template import FunctionSpec

log = logging.getLogger("local.functions")

_import_lock = threading.Lock()
_instance_counter = 0


class FairTurns:
    """One resolver invocation at a time, the turns handed out fairly: while several wait, the next turn goes to the
    tenant served least recently (`tenant_of`: the organization, else the caller's address), so a tenant's burst
    queues behind itself instead of in front of every other tenant. Re-entrant for the thread holding the turn."""

    MEMORY = 4096  # tenants whose last turn is remembered (the oldest are forgotten beyond it)

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holder: int | None = None
        self._depth = 0
        self._waiting: dict[str, deque[int]] = {}  # tenant → waiting threads, in arrival order
        self._served: dict[str, int] = {}  # tenant → when it last had a turn (a counter)
        self._ticks = itertools.count()

    def acquire(self, tenant: str) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._holder == me:
                self._depth += 1
                return
            if self._holder is None and not self._waiting:
                self._grant(me, tenant)
                return
            self._waiting.setdefault(tenant, deque()).append(me)
            while self._holder != me:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth:
                return
            self._holder = None
            if self._waiting:
                tenant = min(self._waiting, key=lambda t: self._served.get(t, -1))
                waiting = self._waiting[tenant]
                following = waiting.popleft()
                if not waiting:
                    del self._waiting[tenant]
                self._grant(following, tenant)
                self._cond.notify_all()

    def waiting(self) -> int:
        """How many invocations wait for a turn."""
        with self._cond:
            return sum(len(q) for q in self._waiting.values())

    def _grant(self, thread: int, tenant: str) -> None:
        self._holder, self._depth = thread, 1
        self._served.pop(tenant, None)
        self._served[tenant] = next(self._ticks)
        while len(self._served) > self.MEMORY:
            del self._served[next(iter(self._served))]


def tenant_of(event: Any) -> str:
    """Whose request an API event is: the organization the authorizer found, else the credential's principal, else
    the caller's address."""
    context = (event.get("requestContext") or {}) if isinstance(event, dict) else {}
    authorizer = context.get("authorizer") or {}
    for key in ("organization_id", "principal_id"):
        if authorizer.get(key):
            return f"{key}:{authorizer[key]}"
    return f"ip:{(context.get('identity') or {}).get('sourceIp') or '-'}"


_turns = FairTurns()


def serialize_resolvers() -> None:
    """Run one Powertools resolver invocation at a time in this process (idempotent), in fair turns per tenant.

    Powertools keeps the current request on the `BaseRouter` *class* (`BaseRouter.current_event`), so two resolvers
    — even separately imported copies of different functions — running at once in one process would read each
    other's event. In Lambda a container serves one request at a time, so this never happens there; here every
    function shares the process. Plain handlers (authorizer, stream and queue consumers) are not resolvers and stay
    parallel, and DynamoDB requests of concurrent API calls still interleave, so races are still exercised. The turns
    go round the waiting tenants (`FairTurns`): one organization's burst costs another organization's request at most
    one turn per other tenant waiting, not the whole burst.
    """
    from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver

    current = ApiGatewayResolver.resolve
    if getattr(current, "_local_serialized", False):
        return

    def resolve(self: Any, event: Any, context: Any) -> Any:
        _turns.acquire(tenant_of(event))
        try:
            return current(self, event, context)
        finally:
            _turns.release()

    resolve._local_serialized = True  # type: ignore[attr-defined]
    ApiGatewayResolver.resolve = resolve  # type: ignore[method-assign]


@dataclass
class LambdaContext:
    """What the Lambda runtime passes as `context` (the attributes Powertools and the handlers read)."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    timeout_seconds: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = "local"
    identity: Any = None
    client_context: Any = None
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"
        self._deadline = time.monotonic() + self.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class FunctionPool:
    """Up to `size` imported copies of one function; `invoke` runs the handler on a free copy (blocking)."""

    def __init__(
        self,
        spec: FunctionSpec,
        *,
        root: Path,
        size: int,
        function_name: str,
        function_arn: str,
    ) -> None:
        self.spec = spec
        self.root = root
        self.size = max(1, size)
        self.function_name = function_name
        self.function_arn = function_arn
        self._free: queue.LifoQueue[ModuleType] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()

    @property
    def instances(self) -> int:
        return self._created

    def warm(self, count: int = 1) -> None:
        """Import up to `count` copies now (startup), so that import errors surface before the first request."""
        while self._created < min(count, self.size):
            with self._lock:
                self._created += 1
            try:
                self._free.put(self._import())
            except BaseException:
                with self._lock:
                    self._created -= 1
                raise

    def _import(self) -> ModuleType:
        global _instance_counter
        path = self.root / self.spec.app_file
        with _import_lock:
            _instance_counter += 1
            package, _, leaf = self.spec.module.rpartition(".")
            name = f"{package}.{leaf}__local{_instance_counter}" if package else f"{leaf}__local{_instance_counter}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module  # pydantic and typing resolve annotations through sys.modules
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
        if not callable(getattr(module, self.spec.handler, None)):
            raise ImportError(f"{path} has no callable {self.spec.handler!r}")
        log.debug("imported %s as %s", path, name)
        return module

    def _acquire(self) -> ModuleType:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            grow = self._created < self.size
            if grow:
                self._created += 1
        if grow:
            try:
                return self._import()
            except BaseException:
                with self._lock:
                    self._created -= 1
                raise
        return self._free.get()

    def context(self) -> LambdaContext:
        return LambdaContext(
            function_name=self.function_name,
            memory_limit_in_mb=self.spec.memory,
            invoked_function_arn=self.function_arn,
            timeout_seconds=self.spec.timeout,
        )

    def invoke(
        self,
        event: dict[str, Any],
        context: LambdaContext | None = None,
        *,
        on_start: Callable[[], None] | None = None,
    ) -> Any:
        """Run the handler with `event` on a free copy; exceptions propagate (as a Lambda function error).
        `on_start` is called once a copy is ready, right before the handler runs (where Lambda's timeout starts).
        Its AWS calls are attributed to the function (local.iam_recorder checks them against its IAM grants)."""
        module = self._acquire()
        token = FUNCTION.set(self.spec.logical_id)
        try:
            handler: Callable[[dict[str, Any], Any], Any] = getattr(module, self.spec.handler)
            if on_start is not None:
                on_start()
            return handler(event, context or self.context())
        finally:
            FUNCTION.reset(token)
            self._free.put(module)


class FunctionRegistry:
    """Every function of the template, by logical id."""

    def __init__(self, pools: dict[str, FunctionPool]) -> None:
        self.pools = pools

    def __getitem__(self, logical_id: str) -> FunctionPool:
        return self.pools[logical_id]

    def __contains__(self, logical_id: object) -> bool:
        return logical_id in self.pools

    def warm(self) -> None:
        for pool in self.pools.values():
            pool.warm(1)
