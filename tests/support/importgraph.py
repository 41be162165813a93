"""The package's import graph, read from the source with ``ast`` (no module is imported).

Every ``import`` / ``from ... import`` in ``src/tableswap`` counts, at the top of a module, inside a
function or under ``if TYPE_CHECKING:``: a lazy import that hides a cycle is still a cycle, and a
type-only import is still a dependency a reader follows. ``from X import name`` is an edge to the module
``X.name`` when it is one, else to ``X``. Importing a submodule runs its parent packages' ``__init__``
first; that implicit edge is left out (every module would otherwise depend on the package's face).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tableswap"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imports_of(path: Path, modules=None) -> set[str]:
    """The tableswap modules (keys of ``modules``) that the file ``path`` imports."""
    modules = MODULES if modules is None else modules
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:  # import a.b.c: the deepest module named
                    target = target.rpartition(".")[0]
                if target:
                    out.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    return {m for m in out if m in modules and m != name}


def module_graph() -> dict[str, set[str]]:
    return {name: imports_of(path) for name, path in MODULES.items()}


#: Modules that are a unit of their own inside a package grouped by concern, because they sit in a lower
#: layer than the rest of it: the one importer of prometheus-client, used by the swaps' hook, below the
#: janitor's metrics that read the operations' reports.
OWN_UNITS = ("tableswap.metrics.prometheus",)


def unit(module: str) -> str:
    """The package-level unit of a module: ``tableswap.core.plan`` → ``tableswap.core``,
    ``tableswap.config`` → itself, the package's face ``tableswap`` → itself; a module of
    :data:`OWN_UNITS` → itself."""
    for own in OWN_UNITS:
        if module == own or module.startswith(own + "."):
            return own
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {unit(m): set() for m in graph}
    for module, targets in graph.items():
        out[unit(module)].update(unit(t) for t in targets if unit(t) != unit(module))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted: the cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
