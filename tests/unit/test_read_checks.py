"""Pure parts of a merge's and a compaction's checks: typed partition values (core/partitions.py), the stored
partitions they replace (core/merge.py), and the file listing compared under the lock (core/listing.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tableswap import errors
from tableswap.core import partitions as pn
from tableswap.core.checks import conflicts
from tableswap.core.listing import FilesAsRead, PartitionListing, files_differ, relative_files
from tableswap.core.merge import refuse_same_values, respelled, same_value_groups, stored_spellings

D = pn.DEFAULT_PARTITION


@pytest.mark.parametrize("column_type, a, b", [
    ("int", "01", "1"), ("bigint", "-007", "-7"), ("tinyint", "+3", "3"),
    ("decimal(5,1)", "1.50", "1.5"), ("decimal(10,2)", "1", "1.00"), ("double", "2.50", "2.5"),
    ("date", "2026-6-1", "2026-06-01"), ("boolean", "TRUE", "true"),
    ("int", "", D), ("string", "", D), ("decimal(5,1)", None, D),
])
def test_one_value_spelled_two_ways(column_type, a, b):
    assert pn.value_key(column_type, a) == pn.value_key(column_type, b)
    assert hash(pn.value_key(column_type, a)) == hash(pn.value_key(column_type, b))


@pytest.mark.parametrize("column_type, a, b", [
    ("string", "01", "1"), ("varchar(8)", "a ", "a"), ("int", "1", "2"), ("int", "1_0", "10"),
    ("decimal(5,1)", "1.5", "1.51"), ("date", "2026-02-30", "2026-03-02"), ("int", "x", "1"), ("int", "0", D),
    ("timestamp", "2026-06-01 00:00:00", "2026-06-01 00:00:00.0"),
])
def test_two_values(column_type, a, b):
    assert pn.value_key(column_type, a) != pn.value_key(column_type, b)


def test_one_spelling_is_the_strings_only():
    assert [t for t in ("string", "varchar(10)", "CHAR(3)", "int", "date", "decimal(5,1)") if pn.one_spelling(t)] == [
        "string", "varchar(10)", "CHAR(3)"]


def test_stored_spellings_name_each_partition_as_stored_and_refuse_two_spellings_of_one_value():
    keys, types = ("dt", "hour"), ("string", "int")
    stored = [("d1", "01"), ("d1", "2"), ("d2", "01"), ("d3", "1"), ("d3", "01")]
    found = stored_spellings("db.t", keys, types, [("d1", "1"), ("d1", "2"), ("d1", "3"), ("d2", "1")], stored, "merge")
    assert found == {("d1", "1"): ("d1", "01"), ("d1", "2"): ("d1", "2"), ("d2", "1"): ("d2", "01")}
    with pytest.raises(errors.UnsupportedTableError) as info:
        stored_spellings("db.t", keys, types, [("d3", "1")], stored, "merge")
    assert "dt=d3/hour=01 and dt=d3/hour=1" in str(info.value) and "nothing was changed" in str(info.value).lower()
    assert same_value_groups(keys, types, stored) == [(("d3", "01"), ("d3", "1"))]
    refuse_same_values("db.t", keys, [], "compaction")  # none: nothing to refuse
    as_stored = respelled(types, [("d1", "01"), ("d2", "01")])
    assert as_stored(("d1", "1")) == ("d1", "01") and as_stored(("d4", "1")) == ("d4", "1")
    assert respelled(["date"], [("2026-6-1",)])(("2026-06-01",)) == ("2026-6-1",)
    assert respelled(["decimal(5,1)"], [("1.50",)])(("1.5",)) == ("1.50",)
    assert pn.value_key("date", "2026-6-1") == dt.date(2026, 6, 1) and pn.value_key("decimal(3,1)", "1.5") == Decimal("1.5")


def test_files_differ_names_what_appeared_changed_and_vanished():
    before = {"a.parquet": 10, "b.parquet": 20, "sub/c.parquet": 30}
    assert files_differ(before, dict(before)) is None
    now = {"a.parquet": 10, "b.parquet": 21, "d.parquet": 5, "e.parquet": 5, "f.parquet": 5, "g.parquet": 5}
    assert files_differ(before, now) == ("4 files appeared (d.parquet, e.parquet, f.parquet and 1 more); "
                                         "1 file changed size (b.parquet); 1 file vanished (sub/c.parquet)")


def test_files_as_read_compares_location_and_files():
    read = PartitionListing("dt=d1", ("d1",), "file:/t/dt=d1", {"a": 1})
    checks = [FilesAsRead(read, "compaction")]
    assert conflicts(checks, {("d1",): PartitionListing("dt=d1", ("d1",), "file:///t/dt=d1", {"a": 1})}) == []
    [moved] = conflicts(checks, {("d1",): PartitionListing("dt=d1", ("d1",), "file:/t/other", {"a": 1})})
    assert moved == "dt=d1 moved since the compaction read it (now at file:/t/other)"
    assert conflicts(checks, {}) == ["dt=d1 was dropped since the compaction read it"]
    [appended] = conflicts(checks, {("d1",): PartitionListing("dt=d1", ("d1",), "file:/t/dt=d1", {"a": 1, "b": 2})})
    assert appended.startswith("dt=d1: its files at file:/t/dt=d1 changed since the compaction read them")
    assert appended.endswith("1 file appeared (b)")


def test_relative_files_leave_out_what_readers_leave_out():
    sizes = {"/t/dt=d1/a.parquet": 1, "/t/dt=d1/_SUCCESS": 0, "/t/dt=d1/.a.parquet.crc": 1,
             "/t/dt=d1/_temporary/0/b.parquet": 2, "/t/dt=d1/sub/c.parquet": 3, "/t/dt=d10/x.parquet": 4}
    assert relative_files("/t/dt=d1", sizes) == {"a.parquet": 1, "sub/c.parquet": 3}
