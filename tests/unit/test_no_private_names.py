"""No private name of a third-party package anywhere in the code base.

A private name (`_x`, not a dunder) is not part of a library's API: it changes or disappears in any release, so every
upgrade becomes a port. Every .py under layers/core, functions, local, bench and tests is parsed and refused for:
- `from <pkg> import _x`, `from <pkg>._mod import x`, `import pkg._x` for a third-party package;
- `._x` on a name bound to a third-party module or class (`import pkg` / `from pkg import Name`), or to an instance
  built by calling one (`logger = Logger()`), or to a name that holds a third-party object by convention in this code
  base (`app`, `resolver`, `route`, `logger`, `processor`, `tracer`; unless imported from our own packages);
- in a class derived from a third-party class: `self._x` / `cls._x` / `super()._x` for a name the class does not
  define itself, and a method overriding a private method of the third-party base.
The standard library is not concerned (its private names are not part of this rule).
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [ROOT / "layers" / "core", ROOT / "functions", ROOT / "local", ROOT / "bench", ROOT / "tests"]
FIRST_PARTY = {"switchboard", "functions", "local", "bench", "tests", "conftest"}
# Names that hold a third-party object (Powertools resolver, route, logger, batch processor, tracer) in this code base.
CONVENTIONAL = {"app", "resolver", "route", "logger", "processor", "tracer"}

# (path relative to the repository, line text stripped) of a use that is allowed, each with the reason in a comment.
# It stays empty: a private name that seems necessary is a hook to ask the library for, or behaviour for our own code.
ALLOWED: set[tuple[str, str]] = set()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _third_party(module: str | None) -> bool:
    if not module:
        return False
    top = module.split(".")[0]
    return top not in FIRST_PARTY and top not in sys.stdlib_module_names


def _files() -> list[Path]:
    files: list[Path] = []
    for base in SCANNED:
        files.extend(p for p in base.rglob("*.py") if ".aws-sam" not in p.parts and "__pycache__" not in p.parts)
    return sorted(files)


class _Scan(ast.NodeVisitor):
    def __init__(self, tree: ast.Module) -> None:
        self.found: list[tuple[int, str]] = []
        self.third: dict[str, str] = {}  # local name -> third-party module it comes from
        self.ours: set[str] = set()  # names imported from first-party packages
        self.instances: set[str] = set()
        self._collect_bindings(tree)

    def _collect_bindings(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    if _third_party(alias.name):
                        self.third[name] = alias.name
                    else:
                        self.ours.add(name)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                for alias in node.names:
                    name = alias.asname or alias.name
                    if _third_party(node.module):
                        self.third[name] = f"{node.module}.{alias.name}"
                    else:
                        self.ours.add(name)
            elif isinstance(node, ast.ImportFrom):
                self.ours.update(alias.asname or alias.name for alias in node.names)
        for node in ast.walk(tree):
            is_call = isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call)
            if is_call and self._is_third(node.value.func):  # type: ignore[union-attr]
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[union-attr]
                self.instances.update(t.id for t in targets if isinstance(t, ast.Name))

    def _is_third(self, node: ast.expr) -> bool:
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.third

    def _holds_third(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            if node.id in self.third or node.id in self.instances:
                return True
            return node.id in CONVENTIONAL and node.id not in self.ours
        if isinstance(node, ast.Attribute):
            return node.attr in CONVENTIONAL or self._holds_third(node.value)
        return False

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and _third_party(node.module):
            assert node.module is not None
            if any(_is_private(part) for part in node.module.split(".")):
                self.found.append((node.lineno, f"from {node.module} import ..."))
            for alias in node.names:
                if _is_private(alias.name):
                    self.found.append((node.lineno, f"from {node.module} import {alias.name}"))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _third_party(alias.name) and any(_is_private(part) for part in alias.name.split(".")):
                self.found.append((node.lineno, f"import {alias.name}"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_private(node.attr) and self._holds_third(node.value):
            self.found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [b for b in node.bases if self._is_third(b)]
        if bases:
            own = _own_names(node)
            for base in bases:
                library_class = _resolve(self.third, base)
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and _is_private(item.name)
                        and library_class is not None
                        and hasattr(library_class, item.name)
                    ):
                        self.found.append((item.lineno, f"overrides {ast.unparse(base)}.{item.name}"))
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and _is_private(sub.attr) and sub.attr not in own:
                    target = sub.value
                    is_self = isinstance(target, ast.Name) and target.id in {"self", "cls"}
                    is_super = (
                        isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "super"
                    )
                    if is_self or is_super:
                        self.found.append((sub.lineno, f"{ast.unparse(target)}.{sub.attr} ({node.name})"))
        self.generic_visit(node)


def _own_names(cls: ast.ClassDef) -> set[str]:
    """The names a class defines itself: methods, class attributes, `__slots__` and `self.x = ...` assignments."""
    own: set[str] = set()
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(item.name)
        elif isinstance(item, ast.Assign):
            own.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            own.add(item.target.id)
    for sub in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, ast.AnnAssign | ast.AugAssign):
            targets = [sub.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                own.add(target.attr)
    return own


def _resolve(third: dict[str, str], base: ast.expr) -> type | None:
    parts = ast.unparse(base).split(".")
    dotted = third.get(parts[0])
    if dotted is None:
        return None
    path = [*dotted.split("."), *parts[1:]]
    for cut in range(len(path), 0, -1):
        try:
            obj = importlib.import_module(".".join(path[:cut]))
        except ImportError:
            continue
        try:
            for attr in path[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj if isinstance(obj, type) else None
    return None


def private_uses(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    scan = _Scan(ast.parse(text, filename=str(path)))
    scan.visit(ast.parse(text, filename=str(path)))
    lines = text.splitlines()
    rel = str(path.relative_to(ROOT))
    return [
        f"{rel}:{line}: {what}"
        for line, what in sorted(set(scan.found))
        if (rel, lines[line - 1].strip()) not in ALLOWED
    ]


def test_the_allow_list_is_empty():
    assert set() == ALLOWED


def test_no_private_name_of_a_third_party_package():
    found = [use for path in _files() for use in private_uses(path)]
    assert not found, "private names of third-party packages:\n" + "\n".join(found)


def test_the_scan_finds_each_kind(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import pydantic._internal\n"
        "from aws_lambda_powertools.event_handler.api_gateway import _compile\n"
        "from aws_lambda_powertools import Logger\n"
        "from aws_lambda_powertools.event_handler import APIGatewayRestResolver\n"
        "logger = Logger()\n"
        "logger._default_log_keys\n"
        "pydantic._internal\n"
        "def f(app, route):\n"
        "    return app._static_routes, route._middleware_stack_built\n"
        "class R(APIGatewayRestResolver):\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "    def _call_route(self, route, args):\n"
        "        return self._mine, self._serializer, super()._resolve()\n",
        encoding="utf-8",
    )
    scan = _Scan(ast.parse(sample.read_text()))
    scan.visit(ast.parse(sample.read_text()))
    found = {what for _, what in scan.found}
    assert found >= {
        "import pydantic._internal",
        "from aws_lambda_powertools.event_handler.api_gateway import _compile",
        "logger._default_log_keys",
        "pydantic._internal",
        "app._static_routes",
        "route._middleware_stack_built",
        "overrides APIGatewayRestResolver._call_route",
        "self._serializer (R)",
        "super()._resolve (R)",
    }, found
    assert not any("_mine" in what for what in found)
