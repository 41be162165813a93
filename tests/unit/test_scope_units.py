"""Pure parts of the replace scope and backfill units (no Spark, no metastore)."""

from __future__ import annotations

import datetime as dt

import pytest

from tableswap import errors
from tableswap.core.backfill import unit_name, unit_values
from tableswap.core.plan import plan_partitions
from tableswap.core.scope import scope_from, split
from tableswap.core.catalog import Column, PartitionInfo, TableInfo

KEYS = ("dt", "country")


def test_specs_name_subsets_of_the_partition_columns_in_table_order():
    scope = scope_from(["country=DE/dt=2026-06-01", {"dt": dt.date(2026, 6, 2)}, "2026-06-03"], KEYS, "db.t")
    assert scope.describe() == "dt=2026-06-01/country=DE OR dt=2026-06-02 OR dt=2026-06-03"
    assert scope.matches_spec(KEYS, ("2026-06-02", "FR")) and scope.matches_spec(KEYS, ("2026-06-01", "DE"))
    assert not scope.matches_spec(KEYS, ("2026-06-01", "FR"))
    assert unit_name(unit_values(dt.date(2026, 6, 1), KEYS)) == "dt=2026-06-01"
    for bad, match in [(["hour=1"], "not a partition column"), ([], "empty list"), ("  ", "is empty"),
                       (42, "must be a Spark SQL predicate"), ([dt.datetime(2026, 6, 1)], "not a date-time")]:
        with pytest.raises(errors.InvalidInputError, match=match):
            scope_from(bad, KEYS, "db.t")
    with pytest.raises(errors.InvalidInputError, match="not partitioned"):
        scope_from("x = 1", (), "db.t")


def test_split_refuses_rows_outside_and_finds_what_to_empty():
    scope = scope_from(["dt=1", "dt=2", "dt=3"], ("dt",), "db.t")
    inside = {("1",), ("2",), ("3",)}
    assert split(("dt",), [("1",)], [("1",), ("2",), ("4",)], inside, "db.t", scope) == [("2",)]
    with pytest.raises(errors.ScopeViolationError) as caught:
        split(("dt",), [("1",), ("5",)], [], inside, "db.t", scope)
    assert caught.value.outside == ("dt=5",) and "dt=5" in str(caught.value)


def test_plan_drops_what_the_scope_owns_without_rows():
    table = TableInfo(db="db", name="t", table_type="EXTERNAL_TABLE", location="/r", columns=(),
                      partition_keys=(Column("dt", "string"),))
    current = {("1",): PartitionInfo(("1",), "/r/dt=1"), ("2",): PartitionInfo(("2",), "/r/dt=2")}
    plan = plan_partitions("s", table, [PartitionInfo(("1",), "/r/_tableswap/s/dt=1")], current, [("2",), ("9",)])
    assert [(a.action, a.name, a.old_location) for a in plan.actions] == [
        ("replace", "dt=1", "/r/dt=1"), ("drop", "dt=2", "/r/dt=2")]  # dt=9 is gone already: nothing to drop
    assert plan.displaced() == [("dt=1", "/r/dt=1"), ("dt=2", "/r/dt=2")]
    assert "drop     dt=2 (was /r/dt=2)" in plan.describe()
