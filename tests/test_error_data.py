"""Errors carry their data (errors.py's promise): every error about one table is built with ``table=`` (and the
CLI's ``--json`` carries it), so that callers never parse a message to learn which table failed.

The rule is checked on the source itself: each construction of such an error class in ``src/tableswap`` passes
``table=``, or is listed below with the reason it cannot (no table is known where it is raised).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tableswap import errors

SRC = Path(__file__).resolve().parents[1] / "src" / "tableswap"

#: The errors that concern one table.
TABLE_ERRORS = {
    "TableNotFoundError", "UnsupportedTableError", "PartitioningMismatchError", "SchemaMismatchError",
    "EmptyBatchError", "StagingWriteError", "SwapConflictError", "LockTimeoutError", "LockLostError",
    "PastDataMissingError", "ScopeViolationError", "DuplicateKeyError",
    "CompactionMismatchError",
}
#: (file, error class): constructions where no table is known, with why.
WITHOUT_TABLE = {
    # The client errors of a catalog translated, below any one table: the caller that knows the table (a
    # table read: TableNotFoundError.of, a flip: SwapConflictError.of) builds the error users see.
    ("glue/boto.py", "TableNotFoundError"), ("glue/boto.py", "SwapConflictError"),
    ("metastore/client.py", "TableNotFoundError"),
    # The journal refusing an intent by swap id (it is handed the swap id and its items, not the table's name);
    # the error carries the swap id.
    ("journal/store.py", "SwapConflictError"),
    # A staging directory's listing, by location (the swap or publish that called it reports the table).
    ("storage.py", "StagingWriteError"),
}


def constructions() -> list[tuple[str, int, str, set[str]]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in TABLE_ERRORS:
                out.append((str(path.relative_to(SRC)), node.lineno, name, {k.arg for k in node.keywords}))
    return out


def test_the_rule_sees_the_constructions():
    found = constructions()
    assert len(found) >= 30, found  # the scan reads the source (a broken scan would pass vacuously)
    assert any(f == "core/eligibility.py" and n == "UnsupportedTableError" for f, _, n, _ in found)


def test_every_error_about_one_table_is_built_with_the_table():
    missing = [f"{f}:{line} {name}" for f, line, name, kws in constructions()
               if "table" not in kws and (f, name) not in WITHOUT_TABLE]
    assert not missing, "build these with table=...: " + "; ".join(missing)


def test_table_not_found_names_the_database_or_the_table_and_carries_it():
    no_db = errors.TableNotFoundError.of("sales", "events", database_exists=False)
    no_table = errors.TableNotFoundError.of("sales", "events")
    assert str(no_db) == "database 'sales' does not exist"
    assert str(no_table) == "table sales.events does not exist"
    assert no_db.to_dict()["table"] == no_table.to_dict()["table"] == "sales.events"


@pytest.mark.parametrize("make", [
    lambda: errors.UnsupportedTableError("x is a view", table="db.x"),
    lambda: errors.SwapConflictError.of("db.x", ["dt=1: moved"], since="since it was read", then="Rerun"),
    lambda: errors.TableNotFoundError.of("db", "x"),
])
def test_the_json_of_an_error_about_a_table_has_the_table(make):
    assert make().to_dict()["table"] == "db.x"
