"""swap_partitions against the real Hive Metastore and a real SparkSession."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tableswap import SwapResult, swap_partitions
from tableswap.core.names import temp_table_name
from tableswap.ops import commit as commit_module
from tableswap.spark import api as sparkapi
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.core.catalog import SWAP_ID_PARAM

from ..support.helpers import batch_df, create_events, partition_locations, reader_view, today

pytestmark = pytest.mark.integration


def test_backfill_replaces_existing_adds_new_and_rerun_is_idempotent(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    days = [today(i) for i in range(3)]
    batch_df(spark, {(d,): 5 for d in days}, "initial").write.insertInto(table)
    old_locations = partition_locations(hms, db, "events")

    backfill = {(days[1],): 7, (today(3),): 4}
    result = swap_partitions(batch_df(spark, backfill, "backfill"), table)

    assert isinstance(result, SwapResult)
    assert [c.partition for c in result.added] == [f"dt={today(3)}"]
    assert [c.partition for c in result.replaced] == [f"dt={days[1]}"]
    assert loc.same(result.replaced[0].old_location, old_locations[(days[1],)])
    view = reader_view(spark, table)
    assert view == {
        (days[0],): (5, ("initial",)),
        (days[1],): (7, ("backfill",)),
        (days[2],): (5, ("initial",)),
        (today(3),): (4, ("backfill",)),
    }
    # The displaced directory still exists (readers that planned against it keep working).
    assert Path(loc.to_local_path(old_locations[(days[1],)])).is_dir()
    # The flipped partitions carry the swap id stamp; the untouched one does not.
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    assert parts[(days[1],)].parameters[SWAP_ID_PARAM] == result.swap_id
    assert parts[(today(3),)].parameters[SWAP_ID_PARAM] == result.swap_id
    assert SWAP_ID_PARAM not in parts[(days[0],)].parameters
    # New locations live under <root>/_tableswap/<swap id>/
    assert "/_tableswap/" + result.swap_id + "/" in parts[(days[1],)].location
    # The temporary table is gone.
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]

    # Rerun the same backfill: same table, no duplicates, one more displaced directory recorded.
    again = swap_partitions(batch_df(spark, backfill, "backfill"), table)
    assert reader_view(spark, table) == view
    assert {c.partition for c in again.replaced} == {f"dt={days[1]}", f"dt={today(3)}"}
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    queued = journal.deletions(db=db, table="events")
    assert sorted(d.location for d in queued) == sorted(
        [result.replaced[0].old_location, *[c.old_location for c in again.replaced]]
    )
    assert len({d.location for d in queued}) == len(queued) == 3
    swaps = journal.list_swaps(db, "events")
    assert [s.state for s in swaps] == ["committed", "committed"]


def test_statistics_describe_the_new_files_and_another_session_sees_new_data(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 50}, "old").write.insertInto(table)
    spark.sql(f"ANALYZE TABLE {table} PARTITION (dt) COMPUTE STATISTICS")
    spark.sql(f"ANALYZE TABLE {table} COMPUTE STATISTICS")
    before = {p.values: p for p in hms.list_partitions(db, "events")}[(today(0),)]
    assert before.parameters["spark.sql.statistics.numRows"] == "50"  # old statistics exist
    assert "spark.sql.statistics.totalSize" in hms.get_table(db, "events").parameters
    reader = spark.newSession()
    assert reader.table(table).count() == 50

    result = swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), table)

    after = {p.values: p for p in hms.list_partitions(db, "events")}[(today(0),)]
    assert not [k for k in after.parameters if k.startswith("spark.sql.statistics.") or k in ("numRows", "COLUMN_STATS_ACCURATE")]
    assert not [k for k in hms.get_table(db, "events").parameters if k.startswith("spark.sql.statistics.")]
    new_dir = Path(loc.to_local_path(result.replaced[0].new_location))
    data_files = [f for f in new_dir.iterdir() if not f.name.startswith((".", "_"))]
    assert int(after.parameters["numFiles"]) == len(data_files)
    assert int(after.parameters["totalSize"]) == sum(f.stat().st_size for f in data_files)
    # A reader in another SparkSession sees the new data without a refresh.
    assert reader.table(table).count() == 3
    assert reader_view(reader, table) == {(today(0),): (3, ("new",))}


def test_the_writers_session_sees_the_new_data_with_and_without_cached_data(spark, db, tmp_path, hms, ts_env):
    """The swap refreshes the writer's Spark cache only where some of it can be stale (spark/api.py,
    ``needs_refresh``): with no data cached the refresh is skipped and the next query still sees the new partitions
    (listed from the metastore); a table the session cached shows the swapped data at once (refreshed)."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 5, (today(1),): 5}, "old").write.insertInto(table)
    spark.catalog.clearCache()
    assert reader_view(spark, table) == {(today(0),): (5, ("old",)), (today(1),): (5, ("old",))}
    assert not sparkapi.needs_refresh(spark, table_location_changed=False)  # the refresh is skipped below

    swap_partitions(batch_df(spark, {(today(1),): 2, (today(2),): 1}, "new"), table)
    assert reader_view(spark, table) == {(today(0),): (5, ("old",)), (today(1),): (2, ("new",)),
                                         (today(2),): (1, ("new",))}

    cached = spark.table(table).cache()
    try:
        assert cached.count() == 8
        assert sparkapi.needs_refresh(spark, table_location_changed=False)
        swap_partitions(batch_df(spark, {(today(0),): 4}, "newer"), table)
        assert reader_view(spark, table) == {(today(0),): (4, ("newer",)), (today(1),): (2, ("new",)),
                                             (today(2),): (1, ("new",))}
    finally:
        cached.unpersist()


def test_the_temporary_table_is_dropped_during_the_flip(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """From its journaled intent on, a swap drops its temporary table on its side connection while it flips
    (ops/write/finish.py, ``TempTableDrop``): the drop is under way before the flip's first write (here the flip
    waits until it landed) and the swap ends with the table gone and its journal record finished."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3}, "old").write.insertInto(table)
    real_flip = commit_module.flip
    present_at_flip: list[bool] = []

    def flip_once_the_drop_landed(catalog, info, plan, lock, snapshot=None):
        temp = temp_table_name("events", plan.swap_id)
        deadline = time.monotonic() + 20  # a drop never started would keep it there
        while hms.table_exists(db, temp) and time.monotonic() < deadline:
            time.sleep(0.05)
        present_at_flip.append(hms.table_exists(db, temp))
        return real_flip(catalog, info, plan, lock, snapshot=snapshot)

    monkeypatch.setattr(commit_module, "flip", flip_once_the_drop_landed)
    result = swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 1}, "new"), table)

    assert present_at_flip == [False]
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    record = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).get_swap(result.swap_id)
    assert record.state == "committed" and record.finished_at is not None
    assert reader_view(spark, table) == {(today(0),): (2, ("new",)), (today(1),): (1, ("new",))}


def test_dry_run_plans_and_changes_nothing(spark, db, tmp_path, hms, ts_env):
    from ..support.helpers import file_tree, metastore_snapshot

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    snap, files = metastore_snapshot(hms, db), file_tree(tmp_path)
    result = swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), table, dry_run=True)
    assert result.dry_run and result.summary().startswith("dry run")
    assert [c.partition for c in result.replaced] == [f"dt={today(0)}"]
    assert [c.partition for c in result.added] == [f"dt={today(1)}"]
    assert metastore_snapshot(hms, db) == snap
    assert file_tree(tmp_path) == files
    assert reader_view(spark, table) == {(today(0),): (2, ("old",))}


def test_lock_is_heartbeated_while_held(hms, metastore_uri, db, spark):
    import time

    from tableswap.metastore.lock import TableLock

    spark.sql(f"CREATE TABLE {db}.locked (id bigint) USING parquet")
    with TableLock(hms, db, "locked", swap_id="hb", heartbeat_s=0.5) as lock:
        time.sleep(2.2)
        holders = hms.lock_holders(db, "locked")
        assert [h.state for h in holders] == ["ACQUIRED"]
        assert "swap=hb" in holders[0].agent_info
        assert lock.heartbeats >= 2
        lock.ensure_held()
    assert hms.lock_holders(db, "locked") == []


def test_a_lock_lost_while_heartbeats_failed_is_detected_before_the_next_write(hms, metastore_uri, db, spark):
    """The heartbeat thread cannot reach the metastore (as during a metastore restart) and the server
    drops the lock meanwhile: ensure_held() confirms the overdue lock itself and refuses to go on."""
    import socket
    import time

    from hmsclient.genthrift.hive_metastore import ttypes  # a raw call, as another client would make it

    from tableswap import errors
    from tableswap.metastore.client import MetastoreClient
    from tableswap.metastore.lock import TableLock

    spark.sql(f"CREATE TABLE {db}.lost (id bigint) USING parquet")
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    unreachable = f"thrift://127.0.0.1:{dead.getsockname()[1]}"  # bound, not listening: refused
    lock = TableLock(hms, db, "lost", swap_id="lost", heartbeat_s=0.3,
                     client_factory=lambda: MetastoreClient(unreachable, connect_attempts=1))
    with lock:
        lock.ensure_held()  # fresh: no extra call
        with MetastoreClient(metastore_uri) as other:  # the server forgets the lock
            other.read("unlock", lambda c: c.unlock(ttypes.UnlockRequest(lockid=lock.lock_id)))
        time.sleep(0.8)
        assert lock.lost is None  # the heartbeat thread could not tell
        with pytest.raises(errors.LockTimeoutError, match="was lost"):
            lock.ensure_held()
    dead.close()
    assert hms.lock_holders(db, "lost") == []


def test_commit_catalog_calls_do_not_grow_with_the_number_of_partitions(spark, db, tmp_path, ts_env):
    """The commit (lock → CAS read → add → alter → stats → unlock) is a fixed number of metastore
    calls, whatever the batch size: every partition goes into the same batch calls."""
    calls = {}
    for k in (2, 40):
        table = create_events(spark, db, tmp_path / f"k{k}", name=f"events_{k}")
        batch_df(spark, {(today(i),): 1 for i in range(k // 2)}, "initial").write.insertInto(table)
        # Half the batch replaces existing partitions, half adds new ones.
        result = swap_partitions(batch_df(spark, {(today(i),): 2 for i in range(k)}, "b"), table)
        assert (len(result.added), len(result.replaced)) == (k // 2, k // 2)
        calls[k] = result.commit_catalog_calls
    assert calls[2] == calls[40]
    # lock, table + partitions read, add, alter, table statistics (only if any), unlock
    assert 5 <= calls[40] <= 7


def test_the_staging_directory_exists_before_the_temporary_table_is_created(spark, db, tmp_path, hms, ts_env,
                                                                           monkeypatch):
    """tableswap makes the staging directory itself, so the metastore's create_table finds it
    there instead of making it (through Hadoop, several times the create's own cost)."""
    from tableswap.metastore.client import MetastoreClient

    seen = []
    real_create = MetastoreClient.create_staging_table

    def create(self, source, name, location, parameters, **kw):
        seen.append(Path(loc.to_local_path(location)).is_dir())
        return real_create(self, source, name, location, parameters, **kw)

    monkeypatch.setattr(MetastoreClient, "create_staging_table", create)
    table = create_events(spark, db, tmp_path)
    result = swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), table)
    assert seen == [True]
    assert reader_view(spark, table) == {(today(0),): (3, ("new",))}
    assert Path(loc.to_local_path(result.staging_location)).is_dir()


def test_a_staging_directory_that_cannot_be_made_is_a_staging_error_and_changes_nothing(
        spark, db, tmp_path, hms, ts_env, monkeypatch):
    from tableswap import errors, storage

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    before = partition_locations(hms, db, "events")

    def refuse(location):
        raise PermissionError(13, "Permission denied", location)

    monkeypatch.setattr(storage, "make_dirs", refuse)
    with pytest.raises(errors.StagingWriteError, match="Permission denied"):
        swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), table)
    assert partition_locations(hms, db, "events") == before
    assert reader_view(spark, table) == {(today(0),): (2, ("old",))}
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    assert not (tmp_path / "events" / "_tableswap").exists() or not any((tmp_path / "events" / "_tableswap").iterdir())
    [record] = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")
    assert record.state == "failed" and "Permission denied" in (record.error or "")
