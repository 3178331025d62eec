"""Shared memory between the emulator tests and the throwaway handlers they write (which import this module)."""

from __future__ import annotations

import threading
from typing import Any

lock = threading.Lock()
calls: list[tuple[str, Any]] = []
state: dict[str, Any] = {}


def record(kind: str, value: Any) -> None:
    with lock:
        calls.append((kind, value))


def of(kind: str) -> list[Any]:
    with lock:
        return [value for k, value in calls if k == kind]


def reset() -> None:
    with lock:
        calls.clear()
        state.clear()
