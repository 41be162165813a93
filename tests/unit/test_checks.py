"""The commit protocol's compare-and-swap checks and the conflict error they raise (pure: a snapshot made
of the metastore model's dataclasses, no metastore)."""

from __future__ import annotations

import pytest

from tableswap import errors
from tableswap.core.checks import PartitionAbsent, PartitionAt, TableAt, conflicts, plan_checks, require
from tableswap.core.plan import ADD, DROP, REPLACE, UNCHANGED, PlannedChange, SwapPlan, TableChange
from tableswap.core.catalog import Column, PartitionInfo, TableInfo
from tableswap.metastore.convert import TableSnapshot

TABLE = TableInfo("db", "events", "EXTERNAL_TABLE", "file:/w/events", (Column("v", "int"),), (Column("dt", "string"),))


def snapshot(parts: dict[str, str], location: str = "file:/w/events") -> TableSnapshot:
    table = TableInfo("db", "events", "EXTERNAL_TABLE", location, TABLE.columns, TABLE.partition_keys)
    return TableSnapshot(table, {(v,): PartitionInfo((v,), loc) for v, loc in parts.items()}, None, {})


def test_each_check_holds_or_says_what_differs():
    snap = snapshot({"1": "file:/w/events/dt=1"})
    assert PartitionAbsent("dt=2", ("2",)).check(snap) is None
    assert PartitionAbsent("dt=1", ("1",)).check(snap) == "dt=1 was added meanwhile (now at file:/w/events/dt=1)"
    assert PartitionAt("dt=1", ("1",), "file:/w/events/dt=1/").check(snap) is None  # locations compared normalised
    assert PartitionAt("dt=1", ("1",), "file:/w/other").check(snap) == \
        "dt=1: expected file:/w/other, found file:/w/events/dt=1"
    assert PartitionAt("dt=2", ("2",), "file:/x").check(snap) == "dt=2: expected file:/x, found no partition"
    assert TableAt("file:/w/events").check(snap) is None
    assert TableAt("file:/w/old").check(snap) == "the table location: expected file:/w/old, found file:/w/events"


def test_a_plan_requires_adds_absent_and_the_rest_where_planned():
    actions = (PlannedChange(ADD, ("3",), "dt=3", None, "file:/n/3"),
               PlannedChange(REPLACE, ("1",), "dt=1", "file:/w/events/dt=1", "file:/n/1"),
               PlannedChange(UNCHANGED, ("4",), "dt=4", "file:/w/4", "file:/w/4"),
               PlannedChange(DROP, ("2",), "dt=2", "file:/w/events/dt=2", None))
    plan = SwapPlan("s1", "db", "events", ("dt",), actions)
    assert plan_checks(plan) == [PartitionAbsent("dt=3", ("3",)), PartitionAt("dt=1", ("1",), "file:/w/events/dt=1"),
                                 PartitionAt("dt=2", ("2",), "file:/w/events/dt=2")]
    assert conflicts(plan_checks(plan), snapshot({"1": "file:/w/events/dt=1", "2": "file:/w/events/dt=2"})) == []
    moved = snapshot({"1": "file:/elsewhere", "2": "file:/w/events/dt=2", "3": "file:/n/3"})
    assert conflicts(plan_checks(plan), moved) == ["dt=3 was added meanwhile (now at file:/n/3)",
                                                   "dt=1: expected file:/w/events/dt=1, found file:/elsewhere"]
    table_plan = SwapPlan("s2", "db", "events", (), (), TableChange("file:/w/events", "file:/n"))
    assert plan_checks(table_plan) == [TableAt("file:/w/events")]


def test_conflicts_raise_one_error_carrying_its_data():
    checks = [PartitionAt(f"dt={i}", (str(i),), f"file:/x/{i}") for i in range(8)]
    with pytest.raises(errors.SwapConflictError) as info:
        require(checks, snapshot({}), table="db.events", since="since the swap was planned", then="Rerun the swap",
                swap_id="s9")
    err = info.value
    assert str(err).startswith("db.events changed since the swap was planned; nothing was changed. Rerun the swap. "
                               "Conflicts: dt=0: expected file:/x/0, found no partition; ")
    assert str(err).endswith("dt=4: expected file:/x/4, found no partition (+3 more)")
    assert len(err.conflicts) == 8 and err.table == "db.events" and err.swap_id == "s9" and err.retryable
    assert err.to_dict() == {"error": str(err), "error_type": "SwapConflictError", "retryable": True,
                             "table": "db.events", "swap_id": "s9", "conflicts": list(err.conflicts)}
    require(checks[:0], snapshot({}), table="db.events", since="x", then="y")  # nothing to check: no error
