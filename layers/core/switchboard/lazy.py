"""Models of another group in a function's route signatures, imported when a route first needs them.

Routes are registered with `from __future__ import annotations`: their annotations stay strings until Powertools
builds a route's dependant (on the first request to that route, or when the OpenAPI document is generated), and it
evaluates them against the route function's module globals. A `lazy_module` bound to the module's name there
resolves `group_models.Group` at that moment, so a function whose cold path never serves those routes does not pay
for creating their model classes at init.

    if TYPE_CHECKING:
        from switchboard.groups import models as group_models
    else:
        group_models = lazy_module("switchboard.groups.models")
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for a module; imports it on the first attribute read and then reads from it."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{' (imported)' if self._module is not None else ''}>"


def lazy_module(name: str) -> Any:
    return LazyModule(name)
