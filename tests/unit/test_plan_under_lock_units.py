"""Pure units: a replace scope's drops planned from the partitions listed under the lock (core/scope.py
``ScopeDrops``, core/plan.py ``under_lock``), and which files the table's columns read (core/column_types.py)."""

from __future__ import annotations

import pytest

from tableswap.core import column_types
from tableswap.core.catalog import Column, PartitionInfo
from tableswap.core.plan import WrittenPartitions, WrittenTable, under_lock
from tableswap.core.scope import ReplaceScope, ScopeDrops
from tableswap.errors import SwapConflictError

KEYS = ("dt",)
SPECS = ReplaceScope(specs=({"dt": "d1"}, {"dt": "d2"}, {"dt": "d3"}))
PREDICATE = ReplaceScope(predicate="dt >= 'd1' AND dt <= 'd3'")


def test_a_spec_scope_drops_every_listed_partition_inside_it_the_batch_has_no_rows_for():
    drops = ScopeDrops(SPECS, KEYS, "db.t")
    assert drops.drops([("d0",), ("d1",), ("d2",), ("d3",), ("d9",)], [("d1",)]) == (("d2",), ("d3",))


def test_a_predicate_scope_evaluates_only_the_partitions_it_never_classified():
    asked = []

    def classify(values):
        asked.append(list(values))
        return {v for v in values if "d1" <= v[0] <= "d3"}

    drops = ScopeDrops(PREDICATE, KEYS, "db.t", frozenset({("d1",), ("d2",)}), frozenset({("d0",), ("d9",)}),
                       classify)
    assert drops.drops([("d0",), ("d1",), ("d2",), ("d3",), ("d7",), ("d9",)], [("d1",)]) == (("d2",), ("d3",))
    assert asked == [[("d3",), ("d7",)]]


def test_a_predicate_scope_without_spark_refuses_new_partitions_and_names_them():
    drops = ScopeDrops(PREDICATE, KEYS, "db.t", frozenset({("d1",)}), frozenset({("d0",)}),
                       unavailable="Publish it with Spark")
    assert drops.drops([("d0",), ("d1",)], [("d1",)]) == ()  # nothing new: nothing to evaluate
    with pytest.raises(SwapConflictError) as info:
        drops.drops([("d0",), ("d1",), ("d2",)], [("d1",)])
    assert info.value.retryable and info.value.conflicts == ("dt=d2",)
    assert "Nothing was changed. Publish it with Spark" in str(info.value)


@pytest.mark.parametrize("scope", [SPECS, PREDICATE], ids=["specs", "predicate"])
def test_the_journaled_scope_round_trips(scope):
    drops = ScopeDrops(scope, KEYS, "db.t", frozenset({("d1",)}), frozenset({("d0",), ("d9",)}))
    back = ScopeDrops.from_json(drops.to_json(), KEYS, "db.t", [("d1",)])
    assert back.scope == scope
    assert back.outside == (drops.outside if scope.predicate else frozenset())


def test_under_lock_replans_a_scoped_batch_from_the_listing_and_leaves_other_planners_alone():
    written = (PartitionInfo(("d1",), "file:/t/_tableswap/s/dt=d1", {}),)
    batch = WrittenPartitions("s", "db", "t", written, (("d2",),), ScopeDrops(SPECS, KEYS, "db.t"))
    listed = under_lock(batch, lambda: [("d0",), ("d1",), ("d3",)])
    assert listed.reads() == [("d1",), ("d3",)] and not listed.lists_partitions

    def never():
        raise AssertionError("listed without a scope")

    plain = WrittenPartitions("s", "db", "t", written, (("d2",),))
    assert under_lock(plain, never) is plain
    table = WrittenTable("s", "db", "t", "file:/t/_tableswap/s")
    assert under_lock(table, never) is table


@pytest.mark.parametrize("old, new, readable", [
    ("int", "int", True), ("int", "bigint", True), ("tinyint", "int", True), ("bigint", "int", False),
    ("float", "double", True), ("double", "float", False), ("int", "string", False), ("string", "int", False),
    ("decimal(10,2)", "decimal(12,2)", True), ("decimal(10,2)", "decimal(10,3)", False),
    ("decimal(10,2)", "decimal(12,4)", True), ("varchar(5)", "string", True), ("varchar(5)", "varchar(3)", False),
    ("char(4)", "varchar(10)", True), ("string", "varchar(10)", False),
])
def test_which_type_changes_the_readers_read_old_files_through(old, new, readable):
    assert column_types.readable_as(old, new) is readable


def test_unreadable_columns_name_their_types_and_added_or_dropped_columns_are_fine():
    written = (Column("id", "bigint"), Column("n", "int"), Column("gone", "string"))
    now = (Column("id", "bigint"), Column("n", "string"), Column("extra", "string"))
    assert column_types.unreadable(written, now) == ["n (written as int, the table now says string)"]
    assert column_types.unreadable(written[:1], now) == []
    assert column_types.from_json(column_types.to_json(now)) == now and column_types.from_json(None) is None
