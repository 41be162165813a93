"""The janitor's reference index, kept from the metastore's notification log (docs/janitor.md#the-reference-index).

The session's metastore when it writes a notification log (marker ``notification_log``: a 3.1.x release, whose
development metastore configures Hive's DbNotificationListener; CI's 3.1.3 run), real Thrift clients making the
changes between two janitor reads: a reference made between two runs through another client must be seen (a naive
index that does not follow the log would miss it and let the directory go). The session's metastore without a log
(2.3, 4.x: CI's other runs) shows the fallback, a full scan every run, with Spark SQL making the reference."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest

from tableswap.core import locations as loc
from tableswap.core.catalog import LocationChange, NewPartition
from tableswap.journal import Journal
from tableswap.journal.refindex import ReferenceIndexStore
from tableswap.metastore.catalog import HiveMetastoreCatalog
from tableswap.ops.janitor.refs import ReferenceScan
from tableswap.ops.janitor.run import run_janitor

from ..support.helpers import batch_df, create_events, today
from ..benchmarks.bench_references import create_database, create_table

pytestmark = pytest.mark.integration

#: The tests that need the notification log (deselected where the session's metastore writes none).
needs_the_log = pytest.mark.notification_log


@pytest.fixture
def logged(metastore_uri, hms, tmp_path):
    """A database on the session's metastore, which writes a notification log, with a table being cleaned
    (``target``, its displaced directory ``old`` on disk) and another partitioned table (``side``), a catalog
    connection and an index store."""
    db = f"jl_{uuid.uuid4().hex[:8]}"
    work = tmp_path / "w"
    old = work / "target" / "dt=a_old"
    old.mkdir(parents=True)
    with HiveMetastoreCatalog(metastore_uri) as client:
        create_database(client, db, f"file://{work}/{db}.db")
        target = create_table(client, db, "target", f"file://{work}/target")
        client.add_partitions(target, [NewPartition(("a",), f"file://{work}/target/dt=a_new")], {})
        side = create_table(client, db, "side", f"file://{work}/side")
        client.add_partitions(side, [NewPartition(("s",), f"file://{work}/side/dt=s")], {})
        assert hms.current_event_id() > 0, "the session's metastore writes no notification log"
        journal = Journal(f"sqlite:///{tmp_path / 'journal.db'}")
        store = ReferenceIndexStore(journal, f"metastore {metastore_uri}")
        yield {"db": db, "client": client, "store": store, "old": loc.normalize(f"file://{old}"),
               "target": target, "side": side, "work": work, "uri": metastore_uri}
        journal.close()


def read(env) -> ReferenceScan:
    """One janitor run's read of the references of ``target`` (as discovery does; the index saved after)."""
    refs = ReferenceScan(env["client"], index=env["store"])
    refs.set_targets([(env["db"], "target")])
    refs.ensure()
    refs.save_index()
    return refs


def owners_at(refs: ReferenceScan, env, location: str) -> list[str]:
    return [r.owner for r in refs.view(env["db"], "target").index.at(location)]


@needs_the_log
def test_a_partition_added_by_another_client_between_runs_at_a_displaced_directory_is_kept(logged):
    first = read(logged)
    assert first.source == "full scan" and first.last_event_id, first.full_scan_reason
    assert owners_at(first, logged, logged["old"]) == []

    with HiveMetastoreCatalog(logged["uri"]) as other:  # another metastore client
        other.add_partitions(logged["side"], [NewPartition(("x",), logged["old"])], {})

    second = read(logged)
    assert second.source == "index", second.full_scan_reason
    assert second.stats.events >= 1 and second.stats.partitions == 1  # the added partition, read by name
    assert owners_at(second, logged, logged["old"]) == [f"partition dt=x of table {logged['db']}.side"]
    # The index stored after the second run still has it: a third run, with nothing new, too.
    third = read(logged)
    assert third.source == "index" and third.stats.partitions == 0
    assert owners_at(third, logged, logged["old"]) == [f"partition dt=x of table {logged['db']}.side"]


@needs_the_log
def test_a_partition_repointed_by_another_client_between_runs_at_a_displaced_directory_is_kept(logged):
    read(logged)
    with HiveMetastoreCatalog(logged["uri"]) as other:
        side = other.get_table(logged["db"], "side")
        other.alter_partition_locations(
            side, [LocationChange(("s",), f"file://{logged['work']}/side/dt=s", logged["old"])], {})

    second = read(logged)
    assert second.source == "index", second.full_scan_reason
    assert owners_at(second, logged, logged["old"]) == [f"partition dt=s of table {logged['db']}.side"]

    # Pointed away again: the directory is no longer referenced (the index follows both ways).
    with HiveMetastoreCatalog(logged["uri"]) as other:
        side = other.get_table(logged["db"], "side")
        other.alter_partition_locations(
            side, [LocationChange(("s",), logged["old"], f"file://{logged['work']}/side/dt=s")], {})
    third = read(logged)
    assert third.source == "index" and owners_at(third, logged, logged["old"]) == []


@needs_the_log
def test_a_table_created_over_a_displaced_directory_between_runs_is_kept_and_a_dropped_one_lets_it_go(logged):
    read(logged)
    with HiveMetastoreCatalog(logged["uri"]) as other:
        create_table(other, logged["db"], "archive", logged["old"])
    second = read(logged)
    assert second.source == "index"
    assert owners_at(second, logged, logged["old"]) == [f"table {logged['db']}.archive"]

    logged["client"].write("drop_table", lambda c: c.drop_table(logged["db"], "archive", False))
    third = read(logged)
    assert third.source == "index" and owners_at(third, logged, logged["old"]) == []


@needs_the_log
def test_a_lost_event_or_a_reset_log_means_a_full_scan(logged):
    read(logged)
    state = logged["store"].state()
    assert state is not None and state.last_event_id > 0
    with HiveMetastoreCatalog(logged["uri"]) as other:
        other.add_partitions(logged["side"], [NewPartition(("y",), logged["old"])], {})

    # The log no longer holds the event after the one the index applied last (as when events expired).
    logged["store"].save(type(state)(state.roots, 0 - 5, state.full_scan_at), [], replace_all=False)
    expired = read(logged)
    assert expired.source == "full scan" and "no event -4" in (expired.full_scan_reason or "")
    assert owners_at(expired, logged, logged["old"]) == [f"partition dt=y of table {logged['db']}.side"]

    # The index is ahead of the log (a log reset, another metastore's database).
    state = logged["store"].state()
    assert state is not None
    logged["store"].save(type(state)(state.roots, state.last_event_id + 1000, state.full_scan_at), [],
                         replace_all=False)
    reset = read(logged)
    assert reset.source == "full scan" and "older than the last applied" in (reset.full_scan_reason or "")

    # The last full scan is older than full_scan_every.
    refs = ReferenceScan(logged["client"], index=logged["store"], full_scan_every=dt.timedelta(seconds=0))
    refs.set_targets([(logged["db"], "target")])
    refs.ensure()
    assert refs.source == "full scan" and "full_scan_every" in (refs.full_scan_reason or "")


@needs_the_log
def test_a_table_being_cleaned_that_the_index_does_not_cover_means_a_full_scan(logged):
    read(logged)
    with HiveMetastoreCatalog(logged["uri"]) as other:
        create_table(other, logged["db"], "newcomer", f"file://{logged['work']}/newcomer")
        other.add_partitions(other.get_table(logged["db"], "side"),
                             [NewPartition(("n",), f"file://{logged['work']}/newcomer/dt=old")], {})
    refs = ReferenceScan(logged["client"], index=logged["store"])
    refs.set_targets([(logged["db"], "target"), (logged["db"], "newcomer")])
    refs.ensure()
    assert refs.source == "full scan" and "storage root" in (refs.full_scan_reason or "")
    assert [r.owner for r in refs.view(logged["db"], "newcomer").index.at(
        f"file://{logged['work']}/newcomer/dt=old")] == [f"partition dt=n of table {logged['db']}.side"]


# ------------------------------------------------------- a metastore without a notification log (2.3, 4.x)
def test_without_a_notification_log_every_run_is_a_full_scan_and_a_spark_partition_made_between_runs_is_kept(
        spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "b0").write.insertInto(table)
    from tableswap import swap_partitions

    old = swap_partitions(batch_df(spark, {(today(0),): 3}, "b1"), table).replaced[0].old_location
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=3)
    if hms.current_event_id() != 0:
        pytest.skip("the session's metastore keeps a notification log")
    first = run_janitor(table=table, grace="2d", dry_run=False, now=dt.datetime.now(dt.timezone.utc))
    assert first.reference_source == "full scan"
    side = create_events(spark, db, tmp_path / "elsewhere", name="side")
    spark.sql(f"ALTER TABLE {side} ADD PARTITION (dt='x') LOCATION '{old}'")

    second = run_janitor(table=table, grace="2d", dry_run=False, now=later)
    assert second.reference_source == "full scan" and "no notification log" in (second.full_scan_reason or "")
    assert loc.normalize(old) in {o.location for o in second.refused}
    assert Path(loc.to_local_path(old)).is_dir()


@needs_the_log
def test_a_partition_of_another_table_repointed_after_discovery_is_seen_before_deleting(logged):
    """Within one run: the re-read before a batch follows the log, so an existing partition of another table
    pointed at a displaced directory after discovery is seen (listing names again cannot see it)."""
    refs = ReferenceScan(logged["client"])  # no stored index: the run's own reads
    refs.set_targets([(logged["db"], "target")])
    refs.ensure()
    assert owners_at(refs, logged, logged["old"]) == []
    with HiveMetastoreCatalog(logged["uri"]) as other:
        side = other.get_table(logged["db"], "side")
        other.alter_partition_locations(
            side, [LocationChange(("s",), f"file://{logged['work']}/side/dt=s", logged["old"])], {})
    refs.ensure()  # what the executor does before each batch
    assert owners_at(refs, logged, logged["old"]) == [f"partition dt=s of table {logged['db']}.side"]
