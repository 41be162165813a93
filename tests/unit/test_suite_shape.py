"""The test tree's own rules, checked on its source. Its layout: ``unit/`` (no server, no process of its own),
``integration/`` (real servers or processes), ``campaign/`` (the long guarantee campaign), ``benchmarks/``
(figures, not tests), ``support/`` (helpers, server launchers, the processes tests start), ``data/``; at the
top only ``conftest.py``. A fixture name means one thing in the whole suite (a reader who meets ``events`` in a
test finds one definition), but for the overrides listed below, which narrow conftest's fixture of the same name
for one file. Each operation has one file a reader opens first: ``test_<operation>.py``, or the file listed in
:data:`TESTED_IN`, whose docstring names the command; a docstring that indexes tests elsewhere
(``tests/...py::test_name``, tests/integration/test_recover.py) names tests that exist."""

from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

from tableswap.cli import main

TESTS = Path(__file__).resolve().parents[1]

#: (file, fixture): a file's override of a conftest fixture, the same concept narrowed for that file.
OVERRIDES = {
    # the journal of this file's tests is PostgreSQL's (conftest's ts_env and the CLI read journal_url)
    ("integration/test_pg_journal_cli.py", "journal_url"),
}


#: The operations of the library that are no command of their own, each with a file named after it.
LIBRARY_OPERATIONS = {"swap_partitions", "swap_table", "merge", "read_as_of", "groups"}
#: Commands whose tests live in a file named otherwise: the file a reader opens (its docstring names the command).
TESTED_IN = {
    "backfill": "integration/test_parallel_backfill.py",
    "diff": "integration/test_staged.py",
    "discard": "integration/test_staged.py",
    "publish": "integration/test_staged.py",
    "history": "integration/test_admin_cli.py",
    "rollback": "integration/test_admin_cli.py",
    "show": "integration/test_admin_cli.py",
    "jars": "integration/test_jvmjars.py",
    "metastore": "integration/test_devmetastore.py",
}
#: ``tests/<folder>/test_<name>.py::test_<name>`` in a docstring.
_REFERENCE = re.compile(r"tests/((?:unit|integration|campaign)/test_\w+\.py)::(test_\w+)")


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def fixture_definitions() -> dict[str, list[str]]:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(_is_fixture(d) for d in node.decorator_list):
                found[node.name].append(str(path.relative_to(TESTS)))
    return found


def test_the_rule_sees_the_fixtures():
    found = fixture_definitions()
    assert len(found) >= 50 and "conftest.py" in found["spark"], len(found)


def test_each_fixture_name_is_defined_once():
    twice = {name: files for name, files in fixture_definitions().items()
             if len([f for f in files if (f, name) not in OVERRIDES]) > 1}
    assert not twice, f"fixture names defined in more than one file (give each its own name): {twice}"


def test_the_tree_keeps_tests_support_and_fixtures_apart():
    top = sorted(p.name for p in TESTS.glob("*.py"))
    assert top == ["__init__.py", "conftest.py"], f"only conftest.py at the top of tests/: move {top} into a folder"
    assert not list((TESTS / "support").glob("test_*.py")), "support/ holds no tests"
    folders = {p.parent.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")}
    assert folders <= {"unit", "integration", "campaign"}, folders
    assert {"unit", "integration"} <= folders


def _docstring(relative: str) -> str:
    return ast.get_docstring(ast.parse((TESTS / relative).read_text())) or ""


def test_each_operation_has_a_test_file_a_reader_finds():
    """``tableswap COMMAND`` (and each library operation): tests/unit or tests/integration has ``test_COMMAND.py``,
    or :data:`TESTED_IN` names the file whose docstring says it holds them."""
    own = {p.stem[len("test_"):] for folder in ("unit", "integration") for p in (TESTS / folder).glob("test_*.py")}
    missing, unnamed = [], []
    for name in sorted(set(main.commands) | LIBRARY_OPERATIONS):
        if name in own:
            assert name not in TESTED_IN, f"{name} has test_{name}.py: take it out of TESTED_IN"
        elif name not in TESTED_IN:
            missing.append(name)
        elif f"tableswap {name}" not in _docstring(TESTED_IN[name]):
            unnamed.append(f"{TESTED_IN[name]} (tableswap {name})")
    assert not missing, f"give these a test file named after them, or list where they are tested in TESTED_IN: {missing}"
    assert not unnamed, f"these files' docstrings do not name the command they are listed for: {unnamed}"


def test_every_test_a_docstring_indexes_exists():
    """A docstring that says where something is tested (``tests/integration/test_x.py::test_y``) names a test
    function that is there: an index a reader follows never leads nowhere."""
    references, broken = 0, []
    for path in sorted(TESTS.rglob("test_*.py")):
        for relative, name in _REFERENCE.findall(_docstring(str(path.relative_to(TESTS)))):
            references += 1
            target = TESTS / relative
            defined = target.exists() and any(isinstance(n, ast.FunctionDef) and n.name == name
                                              for n in ast.walk(ast.parse(target.read_text())))
            if not defined:
                broken.append(f"{path.relative_to(TESTS)}: tests/{relative}::{name}")
    assert references >= 30, references  # test_recover.py's index at least
    assert not broken, f"these indexed tests do not exist (renamed or moved?): {broken}"
