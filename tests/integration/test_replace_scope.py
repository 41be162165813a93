"""``swap_partitions(..., replace_where=...)``: an explicit replace scope, against the real metastore
and SparkSession. Days inside the scope without batch rows are emptied (dropped, data kept for
rollback and the janitor); bad predicates and rows outside the scope change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import backfill, swap_partitions
from tableswap import errors
from tableswap.cli import main
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.ops.restore.rollback import execute_rollback, plan_rollback

from ..support.helpers import batch_df, create_events, metastore_snapshot, partition_locations, reader_view, today

pytestmark = pytest.mark.integration


def week(spark, db, tmp_path) -> str:
    """Days 0-4 and day 9 exist, 5 rows each, batch 'old'."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 5 for i in (0, 1, 2, 3, 4, 9)}, "old").write.insertInto(table)
    return table


SCOPE = f"dt >= '{today(1)}' AND dt <= '{today(5)}'"


def test_a_range_with_replaced_new_and_emptied_days_rerun_and_rollback(spark, db, tmp_path, hms, ts_env):
    table = week(spark, db, tmp_path)
    before_view = reader_view(spark, table)
    before = partition_locations(hms, db, "events")
    batch = batch_df(spark, {(today(1),): 2, (today(3),): 3, (today(5),): 4}, "fix")

    dry = swap_partitions(batch, table, replace_where=SCOPE, dry_run=True)
    assert [c.partition for c in dry.dropped] == [f"dt={today(2)}", f"dt={today(4)}"]
    assert partition_locations(hms, db, "events") == before

    first = swap_partitions(batch, table, replace_where=SCOPE)
    assert [c.partition for c in first.replaced] == [f"dt={today(1)}", f"dt={today(3)}"]
    assert [c.partition for c in first.added] == [f"dt={today(5)}"]
    assert [(c.partition, loc.normalize(c.old_location)) for c in first.dropped] == [
        (f"dt={today(i)}", before[(today(i),)]) for i in (2, 4)]
    after = {(today(0),): (5, ("old",)), (today(1),): (2, ("fix",)), (today(3),): (3, ("fix",)),
             (today(5),): (4, ("fix",)), (today(9),): (5, ("old",))}
    assert reader_view(spark, table) == after
    for i in (2, 4):  # the emptied days' data is kept, queued for the janitor
        assert Path(loc.to_local_path(before[(today(i),)])).is_dir()
    queued = {loc.normalize(d.location) for d in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions(db=db, table="events")}
    assert queued == {before[(today(i),)] for i in (1, 2, 3, 4)}
    record = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).get_swap(first.swap_id)
    assert sorted((i.partition_name, i.action) for i in record.items if i.action == "drop") == [
        (f"dt={today(2)}", "drop"), (f"dt={today(4)}", "drop")]
    history = json.loads(CliRunner().invoke(main, ["history", table, "--json"]).stdout)
    assert (history["swaps"][0]["swap_id"], history["swaps"][0]["dropped"]) == (first.swap_id, 2)

    # The same backfill again: the same table; nothing left to empty.
    again = swap_partitions(batch, table, replace_where=SCOPE)
    assert reader_view(spark, table) == after
    assert len(again.replaced) == 3 and not again.dropped and not again.added

    # Rolling back to before the scoped swap restores the emptied days (and drops the added one).
    execute_rollback(plan_rollback(table, to=first.swap_id))
    assert reader_view(spark, table) == before_view
    assert partition_locations(hms, db, "events") == before


def test_bad_scopes_and_rows_outside_the_scope_change_nothing(spark, db, tmp_path, hms, ts_env):
    table = week(spark, db, tmp_path)
    snapshot = metastore_snapshot(hms, db)
    view = reader_view(spark, table)
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    batch = batch_df(spark, {(today(1),): 2}, "fix")

    with pytest.raises(errors.InvalidInputError, match="'value', which is not a partition column"):
        swap_partitions(batch, table, replace_where="value = 'v1'")
    with pytest.raises(errors.InvalidInputError, match="not a valid Spark SQL condition"):
        swap_partitions(batch, table, replace_where="dt >= ")
    with pytest.raises(errors.InvalidInputError, match="not a valid Spark SQL condition"):
        swap_partitions(batch, table, replace_where="dt")  # not a boolean
    with pytest.raises(errors.InvalidInputError, match="not a partition column"):
        swap_partitions(batch, table, replace_where=["country=DE"])
    assert journal.list_swaps(db, "events") == []  # refused before anything was journaled or written

    outside = batch_df(spark, {(today(1),): 2, (today(7),): 1, (today(8),): 1}, "fix")
    with pytest.raises(errors.ScopeViolationError) as caught:
        swap_partitions(outside, table, replace_where=SCOPE)
    assert caught.value.outside == (f"dt={today(7)}", f"dt={today(8)}")
    assert f"dt={today(7)}" in str(caught.value) and "Nothing was changed" in str(caught.value)
    with pytest.raises(errors.ScopeViolationError, match=f"dt={today(7)}"):
        swap_partitions(outside, table, replace_where=[f"dt={today(1)}", f"dt={today(8)}"])
    empty = batch_df(spark, {}, "none")
    with pytest.raises(errors.EmptyBatchError, match="allow_empty=True"):
        swap_partitions(empty, table, replace_where=SCOPE)
    with pytest.raises(errors.InvalidInputError, match="needs replace_where"):
        swap_partitions(batch, table, allow_empty=True)

    assert metastore_snapshot(hms, db) == snapshot and reader_view(spark, table) == view
    assert {s.state for s in journal.list_swaps(db, "events")} == {"failed"}
    staged = tmp_path / "events" / "_tableswap"
    assert not staged.exists() or not list(staged.iterdir())  # the failed swaps' staged data is gone

    # On purpose: an empty batch empties its scope (a list of specs here).
    emptied = swap_partitions(empty, table, replace_where=[f"dt={today(3)}", {"dt": today(4)}], allow_empty=True)
    assert [c.partition for c in emptied.dropped] == [f"dt={today(3)}", f"dt={today(4)}"] and not emptied.added
    assert sorted(reader_view(spark, table)) == [(today(i),) for i in (0, 1, 2, 9)]


def test_backfill_units_are_scoped_and_an_empty_unit_empties_only_itself(spark, db, tmp_path, ts_env):
    table = week(spark, db, tmp_path)

    def build(day):
        rows = {} if day == today(2) else {(day,): 1}
        return batch_df(spark, rows, f"bf-{day}")

    backfill(table, [today(1), today(2), today(6)], build, name=f"{db}-scoped", parallelism=2,
             allow_empty=True, progress=False)
    assert reader_view(spark, table) == {
        (today(0),): (5, ("old",)), (today(1),): (1, (f"bf-{today(1)}",)), (today(3),): (5, ("old",)),
        (today(4),): (5, ("old",)), (today(6),): (1, (f"bf-{today(6)}",)), (today(9),): (5, ("old",))}

    # A unit whose DataFrame strays outside it fails alone; the others commit.
    def stray(day):
        return batch_df(spark, {(day,): 2, (today(8),): 1} if day == today(3) else {(day,): 2}, "stray")

    with pytest.raises(errors.BackfillFailedError, match=f"dt={today(3)}.*outside replace_where"):
        backfill(table, [today(3), today(4)], stray, name=f"{db}-stray", progress=False)
    view = reader_view(spark, table)
    assert view[(today(3),)] == (5, ("old",)) and view[(today(4),)] == (2, ("stray",))
    assert (today(8),) not in view


def test_a_drop_interrupted_by_a_failure_is_completed_by_recover(spark, db, tmp_path, hms, ts_env, monkeypatch):
    from tableswap.metastore.client import MetastoreClient as Client
    from tableswap.ops.restore.recover import recover

    table = week(spark, db, tmp_path)
    before = partition_locations(hms, db, "events")
    real_drop = Client.drop_partitions_keep_data

    def broken_drop(self, *args, **kwargs):
        raise errors.CatalogError("drop_partitions: metastore error: injected failure")

    monkeypatch.setattr(Client, "drop_partitions_keep_data", broken_drop)
    with pytest.raises(errors.CommitStateUnknownError) as info:
        swap_partitions(batch_df(spark, {(today(1),): 2}, "fix"), table, replace_where=[today(1), today(2)])
    swap_id = info.value.args[0].split()[1]
    assert (today(2),) in partition_locations(hms, db, "events")  # the drop did not land
    monkeypatch.setattr(Client, "drop_partitions_keep_data", real_drop)
    report = recover(table)
    assert [(r.swap_id, r.outcome) for r in report.resolutions] == [(swap_id, "completed")]
    view = reader_view(spark, table)
    assert view[(today(1),)] == (2, ("fix",)) and (today(2),) not in view
    queued = {loc.normalize(d.location) for d in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions(db=db, table="events")}
    assert before[(today(2),)] in queued
