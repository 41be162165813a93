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

SRC = Path(__file__).resolve().parents[2] / "src" / "tableswap"

#: The errors that concern one table.
TABLE_ERRORS = {
    "TableNotFoundError", "UnsupportedTableError", "PartitioningMismatchError", "SchemaMismatchError",
    "EmptyBatchError", "StagingWriteError", "SwapConflictError", "LockTimeoutError", "LockLostError",
    "PastDataMissingError", "ScopeViolationError", "DuplicateKeyError",
    "CompactionMismatchError",
}
#: (file or file:function, error class): constructions where no table is known, with why.
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
    # A swap group's own refusals, about the group as a whole (its id is in the message): no staged table, or an
    # intent refused by group id.
    ("journal/groups.py", "SwapConflictError"), ("ops/write/group.py", "EmptyBatchError"),
    # A Spark Connect session refused before any statement of a script is read: no table is known yet.
    ("spark/sqlscript.py:require_classic", "UnsupportedTableError"),
}


def constructions() -> list[tuple[str, int, str, set[str], str]]:
    """(file, line, error class, keywords, the enclosing function) of each construction of a table error."""
    out = []

    def visit(node: ast.AST, rel: str, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in TABLE_ERRORS:
                out.append((rel, node.lineno, name, {k.arg for k in node.keywords}, function))
        for child in ast.iter_child_nodes(node):
            visit(child, rel, function)

    for path in sorted(SRC.rglob("*.py")):
        visit(ast.parse(path.read_text()), str(path.relative_to(SRC)), "")
    return out


def test_the_rule_sees_the_constructions():
    found = constructions()
    assert len(found) >= 30, found  # the scan reads the source (a broken scan would pass vacuously)
    assert any(f == "core/eligibility.py" and n == "UnsupportedTableError" for f, _, n, _, _ in found)
    assert ("spark/sqlscript.py", "require_classic") in {(f, fn) for f, _, _, _, fn in found}


def test_every_error_about_one_table_is_built_with_the_table():
    missing = [f"{f}:{line} {name}" for f, line, name, kws, function in constructions()
               if "table" not in kws and (f, name) not in WITHOUT_TABLE and (f"{f}:{function}", name) not in WITHOUT_TABLE]
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


def test_hdfs_native_kerberos_failures_are_told_by_reason_with_mit_kerberos_own_words():
    """hdfs-native raises a GSSAPI failure (libgssapi_krb5's) as a RuntimeError carrying its major code and MIT
    Kerberos' message; storage.kerberos_failure tells the reason and keeps the message; anything else is not one."""
    from tableswap import storage

    no_cred = RuntimeError('GSSAPIError(GssMajorCodes { raw: "0x00070000", calling_error: "none", routine_error: '
                           '"GSS_S_NO_CRED", supplementary_info: "0x0000" }, 2529639053, "No credentials were supplied, '
                           'or the credentials were unavailable or inaccessible: No Kerberos credentials available '
                           '(default cache: FILE:/tmp/x.ccache)")')
    expired = RuntimeError('GSSAPIError(GssMajorCodes { raw: "0x000d0000", calling_error: "none", routine_error: '
                           '"GSS_S_FAILURE", supplementary_info: "0x0000" }, 2529638944, "Unspecified GSS failure.  '
                           'Minor code may provide more information: Ticket expired")')
    other = RuntimeError('GSSAPIError(GssMajorCodes { raw: "0x000d0000", calling_error: "none", routine_error: '
                         '"GSS_S_FAILURE", supplementary_info: "0x0000" }, 2529638919, "Unspecified GSS failure.  '
                         'Minor code may provide more information: Server not found in Kerberos database")')
    assert storage.kerberos_failure(no_cred) == (
        "no_ticket", "No credentials were supplied, or the credentials were unavailable or inaccessible: No "
        "Kerberos credentials available (default cache: FILE:/tmp/x.ccache)")
    assert storage.kerberos_failure(expired)[0] == "expired_ticket"
    assert storage.kerberos_failure(other) == (
        "rejected", "Unspecified GSS failure.  Minor code may provide more information: Server not found in "
        "Kerberos database")
    assert storage.kerberos_failure(RuntimeError('RPCError("x", "y")')) is None
    assert storage.kerberos_failure(OSError("GSSAPIError(...)")) is None


def test_a_storage_authentication_error_carries_its_reason_principal_and_location():
    from tableswap import errors

    exc = errors.StorageAuthenticationError("no ticket", reason="no_ticket", location="hdfs://nn:8020")
    assert isinstance(exc, errors.TerminalError) and not exc.retryable
    assert exc.to_dict() == {"error": "no ticket", "error_type": "StorageAuthenticationError", "retryable": False,
                             "reason": "no_ticket", "location": "hdfs://nn:8020"}
