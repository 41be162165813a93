"""One name per concept (issue 54), and the old public names kept for one release: importable, the same
object (so ``except`` and ``isinstance`` keep working), each use of one warning ``DeprecationWarning`` with
the new name; ``--json`` documents carrying the new field and the old one."""

from __future__ import annotations

import importlib
import io
import json
import re
import tokenize
import warnings
from pathlib import Path

import pytest

import tableswap
import tableswap.errors as errors
from tableswap.core.records import Action, PartitionChange
from tableswap.core.result import SwapResult


def _old(module: str, name: str):
    """``from module import name``, asserting it warns once and names the new name."""
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(importlib.import_module(module), name)
    assert len(caught) == 1 and name in str(caught[0].message)
    return value


@pytest.mark.parametrize("old, new", [("MetastoreError", "CatalogError"),
                                      ("MetastoreUnavailableError", "CatalogUnavailableError")])
def test_old_error_names_are_the_new_classes_and_warn(old, new):
    cls = _old("tableswap.errors", old)
    assert cls is getattr(errors, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        raised = getattr(errors, new)("the catalog refused it")
    try:
        raise raised
    except cls as caught:  # what callers wrote before the rename still catches what is raised now
        assert caught is raised
    assert cls.__name__ == new


def test_old_error_names_import_with_from():
    with pytest.warns(DeprecationWarning, match="CatalogError"):
        from tableswap.errors import MetastoreError  # noqa: F401 - the import is what is tested
    assert MetastoreError is errors.CatalogError


def test_hive_only_errors_stay_catalog_errors():
    """The errors only the Hive Metastore adapter raises keep their names, under the catalog's root."""
    assert issubclass(errors.UnsupportedMetastoreError, errors.CatalogError)
    assert issubclass(errors.CatalogUnavailableError, errors.TransientError)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        errors.NoSuchError  # noqa: B018 - the lookup is what is tested


def test_error_json_names_the_new_class_and_the_old_one():
    doc = errors.CatalogUnavailableError("cannot reach the catalog").to_dict()
    assert doc["error_type"] == "CatalogUnavailableError"
    assert doc["deprecated_error_type"] == "MetastoreUnavailableError"
    assert "deprecated_error_type" not in errors.StorageError("x").to_dict()


def _result() -> SwapResult:
    return SwapResult(swap_id="s1", table="d.t", kind="partitions",
                      added=(PartitionChange("dt=1", Action.ADD, None, "file:/n/1"),),
                      catalog_calls=7, commit_catalog_calls=5)


def test_result_old_call_counts_read_the_new_ones_and_warn():
    result = _result()
    with pytest.warns(DeprecationWarning, match="catalog_calls"):
        assert result.metastore_calls == 7
    with pytest.warns(DeprecationWarning, match="commit_catalog_calls"):
        assert result.commit_metastore_calls == 5


def test_result_json_carries_the_new_and_the_old_call_counts():
    doc = json.loads(json.dumps(_result().to_dict()))
    assert (doc["catalog_calls"], doc["commit_catalog_calls"]) == (7, 5)
    assert (doc["metastore_calls"], doc["commit_metastore_calls"]) == (7, 5)


@pytest.mark.parametrize("module", ["tableswap.core.records", "tableswap.journal.store", "tableswap.journal"])
def test_swap_item_is_partition_change(module):
    assert _old(module, "SwapItem") is PartitionChange


def test_partition_action_is_planned_change():
    from tableswap.core.plan import PlannedChange
    assert _old("tableswap.core.plan", "PartitionAction") is PlannedChange


def test_operation_what_reads_label():
    from tableswap.core.records import SwapKind
    from tableswap.ops.operation import Operation
    op = Operation(SwapKind.PARTITIONS, "s1", "d", "t", "", label="publish")
    with pytest.warns(DeprecationWarning, match="label"):
        assert op.what == "publish"


def test_commit_takes_its_catalog_by_its_former_keyword_too():
    from tableswap.ops.commit import catalog_argument
    catalog = object()
    with pytest.warns(DeprecationWarning, match=r"commit\(catalog=\.\.\.\)"):
        assert catalog_argument("commit", None, catalog) is catalog
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert catalog_argument("commit", catalog, None) is catalog
    with pytest.raises(TypeError):
        catalog_argument("commit", catalog, catalog)


OLD_NAMES = {"MetastoreError", "MetastoreUnavailableError", "SwapItem", "PartitionAction", "metastore_calls",
             "commit_metastore_calls"}
#: The lines that keep an old name working: an alias for the type checker, an old attribute's property.
SHIMS = re.compile(r"^\s*(\w+ = \w+|def \w+\(self\)( -> .*)?:)\s*$")


def test_the_package_itself_uses_no_old_name():
    """Outside the lines that keep an old name working, the code uses the new names (so that only a
    caller's use of an old name warns): no old name as a name in the code (strings and comments may say
    it), and no operation's ``.what``."""
    src = Path(tableswap.__file__).parent
    uses = []
    for path in sorted(src.rglob("*.py")):
        lines = path.read_text().splitlines()
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
        for before, token in zip([None] + tokens, tokens):
            if token.type != tokenize.NAME:
                continue
            line = lines[token.start[0] - 1]
            old = (
                token.string in OLD_NAMES
                or (token.string == "what" and before is not None and before.string == "." and "op." in line))
            if old and not SHIMS.match(line):
                uses.append(f"{path.relative_to(src)}:{token.start[0]}: {line.strip()}")
    assert uses == []


def test_runtime_hands_out_catalogs_and_its_former_method_names_warn_and_do_the_same(tmp_path):
    """``Runtime.client()`` / ``new_client()`` / ``probe_client()`` are ``catalog()`` / ``new_catalog()`` /
    ``probe_catalog()`` for one release (a subclass overriding the new name is what the old one reaches)."""
    from tableswap.runtime import Runtime

    made = []

    class Counting(Runtime):
        def new_catalog(self):
            made.append(super().new_catalog())
            return made[-1]

    rt = Counting.from_options(metastore_uri="thrift://127.0.0.1:1", journal_url=f"sqlite:///{tmp_path}/j.db")
    with pytest.warns(DeprecationWarning, match=r"Runtime.new_client\(\) is deprecated: it is Runtime.new_catalog"):
        old = rt.new_client()
    assert old is made[-1] and type(old) is type(rt.new_catalog())
    with pytest.warns(DeprecationWarning, match=r"Runtime.probe_client\(\)"):
        assert type(rt.probe_client(timeout_s=1)) is type(rt.probe_catalog(timeout_s=1))
    with pytest.warns(DeprecationWarning, match=r"Runtime.client\(\)"):
        rt.client(ping=False)  # a context manager, not entered: no connection made
