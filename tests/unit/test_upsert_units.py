"""Pure parts of merges and compaction (core/merge.py, core/compaction.py): no server, no Spark."""

from __future__ import annotations

import pytest

from tableswap.core.compaction import (MiB, PartitionFiles, check_min_files, parse_size, plan_compaction,
                                       sizes_below)
from tableswap.core.merge import merge_spec
from tableswap.core.records import SwapKind
from tableswap.errors import InvalidInputError

COLUMNS = ["id", "value", "dt"]


def spec(on, **kwargs):
    options = dict(when_matched="update", when_not_matched="insert", delete_when=None) | kwargs
    return merge_spec(on, COLUMNS, table="db.t", **options)


def test_merge_spec_lowers_on_and_keeps_the_options():
    s = spec(["ID", "dt"], when_matched="ignore", delete_when=" op = 'D' ")
    assert s.on == ("id", "dt") and not s.replaces_matched and s.inserts and s.delete_when == "op = 'D'"
    assert spec("id").on == ("id",)


@pytest.mark.parametrize("on, kwargs, text", [
    ([], {}, "non-empty list"),
    (None, {}, "non-empty list"),
    (["id", "nope"], {}, "'nope', not column(s) of the table (id, value, dt)"),
    (["id", "ID"], {}, "names a column twice"),
    (["id"], {"when_matched": "delete"}, "when_matched='delete', expected one of update, ignore"),
    (["id"], {"when_not_matched": "upsert"}, "when_not_matched='upsert', expected one of insert, ignore"),
    (["id"], {"delete_when": "  "}, "delete_when must be a Spark SQL condition"),
])
def test_bad_merge_options_are_refused(on, kwargs, text):
    with pytest.raises(InvalidInputError) as info:
        spec(on, **kwargs)
    assert text in str(info.value) and info.value.table == "db.t"


@pytest.mark.parametrize("text, value", [("128MiB", 128 * MiB), ("64 MB", 64_000_000), ("1GiB", 1024 * MiB),
                                         (2048, 2048), ("1.5KiB", 1536), ("4096", 4096)])
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["huge", "12XB", "100", True, "-5MiB", ""])
def test_bad_sizes(text):
    with pytest.raises(InvalidInputError):
        parse_size(text)


def test_min_files():
    assert check_min_files(2) == 2
    for bad in (1, 0, 2.5, True, "10"):
        with pytest.raises(InvalidInputError):
            check_min_files(bad)


def test_candidates_have_enough_small_files_and_fewer_files_after():
    target = 8 * MiB
    listed = [
        PartitionFiles(("a",), "file:/t/dt=a", (1000,) * 12),                   # 12 small: 1 file
        PartitionFiles(("b",), "file:/t/dt=b", (1000,) * 9),                    # below min_files
        PartitionFiles(("c",), "file:/t/dt=c", (5 * MiB,) * 3 + (1000,) * 10),  # 10 small, 15 MiB: 2 files
        PartitionFiles(("d",), "file:/t/dt=d", (8 * MiB,) * 20),                # big files only
        PartitionFiles(("e",), "file:/t/dt=e", ()),
    ]
    plan = plan_compaction("db.t", ("dt",), listed, target_file_bytes=target, min_files=10)
    assert [c.partition for c in plan.candidates] == ["dt=a", "dt=c"]
    a, c = plan.candidates
    assert (a.files, a.small_files, a.bytes, a.target_files) == (12, 12, 12_000, 1)
    assert (c.files, c.small_files, c.target_files) == (13, 10, 2)
    doc = plan.to_dict()
    assert doc["files_before"] == 25 and doc["files_after"] == 3 and doc["partitions_listed"] == 5


def test_only_data_files_count():
    sizes = {"/t/dt=a/part-0.parquet": 10, "/t/dt=a/_SUCCESS": 0, "/t/dt=a/.part-0.crc": 1,
             "/t/dt=a/_temporary/0/x.parquet": 5, "/t/dt=ab/part-0.parquet": 7}
    assert sizes_below("/t/dt=a", sizes) == (10,)


def test_merge_and_compact_are_journal_kinds_of_their_own():
    assert SwapKind("merge") is SwapKind.MERGE and SwapKind("compact") is SwapKind.COMPACT
    assert not SwapKind.MERGE.restores and not SwapKind.COMPACT.restores
    assert all(len(k.value) <= 16 for k in SwapKind)  # the journal's kind column is VARCHAR(16)
