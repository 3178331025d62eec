"""The IAM check across the test suite (local/iam.py, local/iam_recorder.py).

- `install()` (from tests/conftest.py, before any test module is imported): an import hook that attributes the
  handler of every `functions.<dir>.app` a test imports and calls directly to its function, so that its calls, also
  those in thread pools, are checked.
- `moto_resources` (tests/integration/support.py) registers the recorder on `switchboard.aws`'s session (made there,
  after moto is imported, as moto requires) and activates the model of template.yaml with the test's resources.
- The autouse fixture of tests/conftest.py fails a test in whose course a function made a call its grants do not
  allow, naming function, action, resource and call site; the e2e fixtures do the same with the violations the
  local stack prints (`VIOLATION_MARKER` lines).

IAM_CHECK=fail (default) | report | off. With `report`, nothing fails: each violation is appended as a JSON line to
the file IAM_CHECK_REPORT (when set) and the distinct ones are listed at the end of the run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from local.iam_recorder import CHECK, FUNCTION, Violation

_seen: dict[tuple[str, str, str], Violation] = {}


def mode() -> str:
    return os.environ.get("IAM_CHECK", "fail")


def _function_of_module(fullname: str) -> str | None:
    from local.template import load_template

    global _code_dirs
    if _code_dirs is None:
        template = load_template(stage="local")
        _code_dirs = {str(spec.code_dir).rstrip("/"): spec.logical_id for spec in template.functions}
    code_dir = "/".join(fullname.split(".")[:-1])
    return _code_dirs.get(code_dir)


_code_dirs: dict[str, str] | None = None


class _AttributingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, fullname: str) -> None:
        self.loader = loader
        self.fullname = fullname

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, is_package, …: the path loader's
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        handler = getattr(module, "handler", None)
        function = _function_of_module(self.fullname)
        if callable(handler) and function is not None:
            setattr(module, "handler", _attributed(handler, function))  # noqa: B010 - any module's handler


def _attributed(handler: Any, function: str) -> Any:
    import functools

    @functools.wraps(handler)
    def attributed(*args: Any, **kwargs: Any) -> Any:
        token = FUNCTION.set(function)
        try:
            return handler(*args, **kwargs)
        finally:
            FUNCTION.reset(token)

    return attributed


class _HandlerFinder(importlib.abc.MetaPathFinder):
    """`functions.<dir>.app` imported by a test: its `handler` runs attributed to the function of `functions/<dir>/`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if len(parts) != 3 or parts[0] != "functions" or parts[2] != "app":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _AttributingLoader(spec.loader, fullname)
        return spec


def install() -> None:
    if not any(isinstance(finder, _HandlerFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _HandlerFinder())


def report(violations: list[Violation], *, check_mode: str | None = None) -> str | None:
    """What fails the test (None: nothing, or the mode — IAM_CHECK unless given — only reports)."""
    if not violations:
        return None
    if (check_mode or mode()) != "fail":
        path = os.environ.get("IAM_CHECK_REPORT")
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.writelines(v.as_json() + "\n" for v in violations)
        for v in violations:
            _seen.setdefault((v.function, v.action, v.site[0] if v.site else ""), v)
        return None
    distinct = list(dict.fromkeys(violations))
    lines = "\n".join(f"  - {v.message()}" for v in distinct[:20])
    more = f"\n  … and {len(distinct) - 20} more" if len(distinct) > 20 else ""
    return (
        f"{len(distinct)} AWS call(s) without an IAM grant (template.yaml; local/iam.py checks every call a function "
        f"makes against its expanded SAM policies):\n{lines}{more}"
    )


def take_in_process() -> list[Violation]:
    return CHECK.take()


def summary() -> list[str]:
    return [v.message() for v in _seen.values()]
