"""The shape of the operations, checked on the source (no services):

* an object's attributes are set in its ``__init__``: a class of ``ops/`` or ``core/`` whose methods set an
  attribute first elsewhere works only when they are called in one order (the swap's stage set a dozen of them
  on ``self`` for its commit to read; it now returns a value, ``Staged``, that its later steps take);
* the swaps of their own kind (a merge, a compaction, a SQL script's overwrite, a group's member) go through the
  write front end's public entry points (``run_swap``, ``run_stage``, ``stage_member``) with a request, a
  ``SwapRequest``, never a private name of another module of ``ops/write/``.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from tableswap import errors
from tableswap.core.records import SwapKind
from tableswap.ops.write.request import SwapRequest, checks_of

SRC = Path(__file__).resolve().parents[2] / "src" / "tableswap"
#: The parts whose classes set their attributes in ``__init__`` only.
INIT_ONLY = ("ops", "core")


def set_outside_init(source: str) -> dict[str, dict[str, str]]:
    """Per class of ``source``: each attribute of ``self`` assigned in a method but never in ``__init__``, with
    the first method that assigns it."""
    out: dict[str, dict[str, str]] = {}
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        in_init: set[str] = set()
        elsewhere: dict[str, str] = {}
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(method):
                if isinstance(node, ast.Assign):
                    targets = list(node.targets)
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                    targets = [node.target]
                else:
                    continue
                flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
                for t in flat:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        if method.name == "__init__":
                            in_init.add(t.attr)
                        else:
                            elsewhere.setdefault(t.attr, method.name)
        late = {a: m for a, m in elsewhere.items() if a not in in_init}
        if late:
            out[cls.name] = late
    return out


def modules(*parts: str) -> list[Path]:
    return sorted(p for part in parts for p in (SRC / part).rglob("*.py"))


def test_the_scan_finds_an_attribute_set_late_and_reads_the_tree():
    sample = ("class Run:\n"
              "    def __init__(self):\n        self.a = 1\n"
              "    def stage(self):\n        self.a, self.location = 2, 'x'\n"
              "    def commit(self):\n        self.calls: int = 0\n        return self.location\n")
    assert set_outside_init(sample) == {"Run": {"location": "stage", "calls": "commit"}}
    files = modules(*INIT_ONLY)
    assert len(files) > 60 and SRC / "ops" / "write" / "swap.py" in files, files


def test_no_class_of_ops_or_core_sets_an_attribute_outside_its_init():
    late = {f"{path.relative_to(SRC)}:{cls}": attrs for path in modules(*INIT_ONLY)
            for cls, attrs in set_outside_init(path.read_text()).items()}
    assert not late, f"set these in __init__ (or hand them on as values): {late}"


def test_the_write_front_ends_import_no_private_name_of_each_other():
    private = []
    for path in modules("ops/write"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tableswap."):
                private += [f"{path.relative_to(SRC)}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private, private


def test_a_request_is_one_frozen_value():
    request = SwapRequest("db.events", replace_where=["dt=2026-06-01"], allow_empty=True,
                          checks=checks_of(lambda df: True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.dry_run = True
    assert request.swap_kind == SwapKind.PARTITIONS and len(request.checks) == 1
    assert SwapRequest("db.t", partitioned=False).swap_kind == SwapKind.TABLE
    assert SwapRequest("db.events", kind=SwapKind.MERGE).swap_kind == SwapKind.MERGE


def test_a_request_refuses_an_empty_scope_with_no_scope():
    with pytest.raises(errors.InvalidInputError, match="allow_empty=True needs replace_where"):
        SwapRequest("db.events", allow_empty=True)
    assert SwapRequest("db.t", partitioned=False, allow_empty=True).allow_empty  # a table's: emptied on purpose
    with pytest.raises(errors.InvalidInputError, match="audit= takes a callable"):
        checks_of(["not a check"])
