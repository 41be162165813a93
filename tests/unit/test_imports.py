"""No import cycles in ``src/tableswap``, between modules or between packages (pure: reads the source).

A cycle makes the order of imports matter and hides which layer depends on which; imports inside
functions and type-only imports count (see ``tests/support/importgraph.py``).
"""

from __future__ import annotations

from ..support.importgraph import cycles, module_graph, package_graph

GRAPH = module_graph()


def test_the_graph_sees_every_kind_of_import():
    # a top-level import, a lazy import inside a function (its only import of hooks), a relative import
    assert "tableswap.core.plan" in GRAPH["tableswap.ops.commit"]
    assert "tableswap.hooks" in GRAPH["tableswap.ops.inspect.doctor_checks"]
    assert "tableswap.jvm.maven" in GRAPH["tableswap.jvm.jars"]


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    found = cycles(GRAPH)
    assert not found, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_package_imports_itself_back():
    found = cycles(package_graph(GRAPH))
    assert not found, "import cycles between packages:\n" + "\n".join(" <-> ".join(c) for c in found)
