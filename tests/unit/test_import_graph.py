"""The import graph of `switchboard` and `functions`: acyclic, and the API layer on top.

Built from the source with `ast`, so an import inside a function counts as much as one at the top of a module (it
only runs later), and so does a `lazy_module("...")` / `importlib.import_module("...")` with a literal name. Imports
under `if TYPE_CHECKING:` never run: they count for the layering rule, not for cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"switchboard": ROOT / "layers" / "core" / "switchboard", "functions": ROOT / "functions"}

# Modules outside switchboard.api that may import it: the OpenAPI generator reads the API's own routes and envelope.
API_IMPORTERS_ALLOWED = {"switchboard.openapi_doc"}
DYNAMIC_IMPORTERS = {"lazy_module", "import_module"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top, base in SOURCES.items():
        for path in sorted(base.rglob("*.py")):
            parts = [top, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _target(name: str) -> str | None:
    """The deepest module of ours that `name` names (`a.b.Thing` → `a.b`), or None for a third-party name."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, runs at runtime) for every import of ours in `module`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def add(name: str, line: int, runtime: bool) -> None:
        target = _target(name)
        if target is not None and target != module:
            found.append((target, line, runtime))

    def visit(node: ast.AST, runtime: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, runtime)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, runtime)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                add(f"{base}.{alias.name}", node.lineno, runtime)
        elif (
            isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in DYNAMIC_IMPORTERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            add(node.args[0].value, node.lineno, runtime)
        for child in ast.iter_child_nodes(node):
            visit(child, runtime)

    visit(tree, True)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _find_cycle(edges: dict[str, list[str]]) -> list[str] | None:
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(edges, white)
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        colour[node] = grey
        stack.append(node)
        for nxt in edges[node]:
            if colour[nxt] == grey:
                return [*stack[stack.index(nxt) :], nxt]
            if colour[nxt] == white and (cycle := dfs(nxt)):
                return cycle
        stack.pop()
        colour[node] = black
        return None

    for start in sorted(edges):
        if colour[start] == white and (cycle := dfs(start)):
            return cycle
    return None


def test_the_graph_sees_the_layers():
    assert "switchboard.api.auth" in MODULES
    assert "functions.contacts.app" in MODULES
    assert any(target.startswith("switchboard.") for target, _, _ in GRAPH["functions.contacts.app"])


def test_the_import_graph_is_acyclic():
    edges = {module: sorted({target for target, _, runtime in imports if runtime}) for module, imports in GRAPH.items()}
    cycle = _find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_domain_never_imports_the_api_layer():
    offenders = [
        f"{module}:{line} imports {target}"
        for module, imports in GRAPH.items()
        if module.startswith("switchboard.")
        and not module.startswith("switchboard.api.")
        and module not in API_IMPORTERS_ALLOWED
        for target, line, _ in imports
        if target == "switchboard.api" or target.startswith("switchboard.api.")
    ]
    assert not offenders, "\n".join(offenders)


def test_the_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": []}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": ["b"], "b": [], "c": ["a"]}) is None
