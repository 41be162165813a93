"""The layer contract, checked on the source: which package may import which (docs: CONTRIBUTING.md, Layout).

Every ``import`` / ``from ... import`` in ``src/tableswap`` (top level or inside functions) is resolved
to a module of the package and held to the rules below. Pure: reads files, imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tableswap"

# Infrastructure every layer may use.
BASE = ("tableswap.errors", "tableswap.logs", "tableswap.faults", "tableswap.config", "tableswap.config_file",
        "tableswap.redact")
# What each layer may import from tableswap (prefixes), besides itself and BASE.
ALLOWED = {
    # Pure: no I/O, no adapters; the metastore's data model (plain dataclasses) is part of the vocabulary.
    "tableswap.core": ("tableswap.core.catalog",),
    "tableswap.metastore": ("tableswap.core",),
    "tableswap.journal": ("tableswap.core",),
    "tableswap.storage": ("tableswap.core",),
    "tableswap.hooks": ("tableswap.core",),
    "tableswap.runtime": ("tableswap.core", "tableswap.metastore", "tableswap.journal", "tableswap.hooks"),
    "tableswap.spark": ("tableswap.core", "tableswap.metastore", "tableswap.storage"),
    "tableswap.ops": ("tableswap.core", "tableswap.metastore", "tableswap.journal", "tableswap.storage",
                      "tableswap.runtime", "tableswap.spark", "tableswap.hooks"),
}
# Spark stays at the edge: only the Spark front end imports the spark package ...
SPARK_USERS = ("tableswap.ops.swap", "tableswap.ops.asof", "tableswap.ops.state")
# ... and nothing imports the front end but the package's face.
SWAP_USERS = ("tableswap", "tableswap.ops.backfill")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """The tableswap modules ``path`` imports (``from X import name`` counts as X and X.name)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return {m for m in out if m == "tableswap" or m.startswith("tableswap.")}


def existing(modules: set[str]) -> set[str]:
    """Keep names that are modules or packages (``from x import function`` adds ``x.function``)."""
    def is_module(m: str) -> bool:
        rel = Path(*m.split(".")[1:]) if "." in m else Path()
        return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()
    return {m for m in modules if is_module(m)}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


SOURCES = sorted(p for p in SRC.rglob("*.py") if "devmetastore" not in p.parts)
GRAPH = {module_name(p): existing(imports(p)) for p in SOURCES}


def test_the_walk_sees_the_package():
    assert "tableswap.ops.commit" in GRAPH and "tableswap.core.plan" in GRAPH["tableswap.ops.commit"]
    assert "tableswap.spark.staging" in GRAPH["tableswap.ops.swap"]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer):
    bad = []
    for module, targets in GRAPH.items():
        if not within(module, layer):
            continue
        for target in targets:
            if target == "tableswap" or within(target, layer) or any(within(target, b) for b in BASE):
                continue
            if not any(within(target, allowed) for allowed in ALLOWED[layer]):
                bad.append(f"{module} imports {target}")
    assert not bad, "layer contract broken:\n" + "\n".join(sorted(bad))


def test_spark_stays_at_the_edge():
    users = {m for m, targets in GRAPH.items() if not within(m, "tableswap.spark")
             and any(within(t, "tableswap.spark") for t in targets)}
    assert users <= set(SPARK_USERS), f"only {SPARK_USERS} may import tableswap.spark; also: {users - set(SPARK_USERS)}"
    swap_users = {m for m, targets in GRAPH.items() if "tableswap.ops.swap" in targets}
    assert swap_users <= set(SWAP_USERS), f"only the package's face imports ops.swap; also: {swap_users}"


def test_nothing_below_the_cli_imports_it():
    users = {m for m, targets in GRAPH.items() if not within(m, "tableswap.cli")
             and any(within(t, "tableswap.cli") for t in targets)}
    assert users <= {"tableswap.__main__"}, users
