"""The test tree's own rules, checked on its source. Its layout: ``unit/`` (no server, no process of its own),
``integration/`` (real servers or processes), ``campaign/`` (the long guarantee campaign), ``benchmarks/``
(figures, not tests), ``support/`` (helpers, server launchers, the processes tests start), ``data/``; at the
top only ``conftest.py``. A fixture name means one thing in the whole suite (a reader who meets ``events`` in a
test finds one definition), but for the overrides listed below, which narrow conftest's fixture of the same name
for one file."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

#: (file, fixture): a file's override of a conftest fixture, the same concept narrowed for that file.
OVERRIDES = {
    # the journal of this file's tests is PostgreSQL's (conftest's ts_env and the CLI read journal_url)
    ("integration/test_pg_journal_cli.py", "journal_url"),
}


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
