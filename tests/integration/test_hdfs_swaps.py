"""Swaps on ``hdfs://`` tables against a real NameNode and DataNode (tests/support/hdfs.py, started once per session).

Spark writes and reads through the Hadoop client in the pyspark wheel, the session's metastore (2.3, from
the same wheel's jars) creates and checks the directories on HDFS, and tableswap lists and deletes
through hdfs-native (the ``hdfs`` extra: no libhdfs, no Hadoop CLASSPATH). The janitor's trash runs against a
second NameNode with the trash on (``hdfs_trash_cluster``, started only for it). Permissions with several users:
tests/integration/test_hdfs_permissions.py; erasure coding: tests/integration/test_hdfs_erasure_coding.py; HA NameNodes:
tests/integration/test_hdfs_ha.py; YARN: tests/integration/test_yarn.py. What is not verified here yet (Kerberos): docs/hdfs.md.
"""

from __future__ import annotations

import datetime as dt
import getpass
import os
import uuid

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tableswap import (compact_partitions, errors, merge_partitions, stage_partitions, storage, swap_partitions,
                       swap_table)
from tableswap.cli import main as cli_main
from tableswap.core import locations as loc
from tableswap.core import manifest as mf
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.core.names import swap_id_time
from tableswap.journal import Journal
from tableswap.jvm.jars import wheel_versions
from tableswap.ops.janitor.run import O_DELETED, O_ERROR, O_KEPT, run_janitor
from tableswap.ops import manifests
from tableswap.ops.restore.rollback import rollback

from ..support.helpers import (SRC, batch_df, create_events, partition_locations, reader_view, release_locks_of_killed_writer,
                      spark_conf, start_crashing_writer, today, wait_or_kill)

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]

#: The tests CI also runs against Hive Metastore 4.0.1 (marker hdfs_releases): those whose metastore calls reach
#: HDFS through the server's own Hadoop client (it creates and checks the directories of tables and partitions).
hdfs_releases = pytest.mark.hdfs_releases


@pytest.fixture
def hdfs_root(hdfs_cluster, spark, monkeypatch) -> str:
    """A fresh directory on the session's HDFS; ``HADOOP_CONF_DIR`` names its configuration, as a user's
    environment would."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_cluster.conf_dir))
    return f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"


def _on_hdfs(location: str, hdfs_cluster) -> bool:
    return loc.is_within(location, hdfs_cluster.url + "/")


def test_tableswap_reaches_hdfs_through_hdfs_native(hdfs_root, hdfs_cluster):
    # The server is the Hadoop release of the wheel's client jars, resolved by Maven coordinates.
    hadoop = wheel_versions().hadoop
    assert f"hadoop-client-minicluster-{hadoop}.jar" in {j.name for j in hdfs_cluster.classpath}
    storage.make_dirs(loc.join(hdfs_root, "a", "b"))
    fs, path = storage.filesystem(loc.join(hdfs_root, "a"))
    assert type(fs).__module__.startswith("hdfs_native")
    assert storage.list_dirs(loc.join(hdfs_root, "a")) == ["b"]
    assert storage.remove_empty_dir(loc.join(hdfs_root, "a", "b"))
    assert storage.exists(loc.join(hdfs_root, "a")) and not storage.exists(loc.join(hdfs_root, "a", "b"))


def _child_lists(location: str, out) -> None:
    out.put(storage.list_dirs(location))


def test_a_forked_child_of_a_process_that_reached_hdfs_runs_and_reaches_it_itself(hdfs_root, hdfs_cluster):
    """A ``multiprocessing`` child forked after tableswap reached HDFS hung before running a line: fsspec clears
    its instance cache in a forked child, and freeing an hdfs-native client there waits forever for I/O threads
    the fork did not copy (the suite's pool test hung, and the moto server's port it had inherited stayed taken)."""
    import multiprocessing

    storage.make_dirs(loc.join(hdfs_root, "forked", "x"))
    assert storage.list_dirs(loc.join(hdfs_root, "forked")) == ["x"]  # this process's client, cached
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_lists, args=(loc.join(hdfs_root, "forked"), out))
    child.start()
    try:
        assert out.get(timeout=60) == ["x"]  # the child ran, with a client of its own
        child.join(60)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
    assert storage.list_dirs(loc.join(hdfs_root, "forked")) == ["x"]  # the parent's client still works


@hdfs_releases
def test_the_metastore_creates_a_partition_directory_on_hdfs(spark, db, hdfs_root, hdfs_cluster, hms):
    """The metastore server itself reaches HDFS (the pyspark wheel's Hadoop client on its class path): adding a
    partition at a missing hdfs:// directory makes the server create it."""
    table = create_events(spark, db, hdfs_root)
    where = loc.join(hdfs_root, "elsewhere", f"dt={today(5)}")
    assert not storage.exists(where)
    spark.sql(f"ALTER TABLE {table} ADD PARTITION (dt='{today(5)}') LOCATION '{where}'")
    assert storage.exists(where) and storage.list_dirs(loc.join(hdfs_root, "elsewhere")) == [f"dt={today(5)}"]
    assert _on_hdfs(hms.get_table(db, "events").location, hdfs_cluster)


@hdfs_releases
def test_swap_adds_and_replaces_partitions_on_hdfs_and_a_rerun_changes_nothing_visible(
        spark, db, hdfs_root, hdfs_cluster, hms, ts_env):
    table = create_events(spark, db, hdfs_root)
    days = [today(i) for i in range(3)]
    batch_df(spark, {(d,): 5 for d in days}, "initial").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    assert all(_on_hdfs(p, hdfs_cluster) for p in old.values())

    backfill = {(days[1],): 7, (today(3),): 4}
    result = swap_partitions(batch_df(spark, backfill, "backfill"), table)

    assert [c.partition for c in result.added] == [f"dt={today(3)}"]
    assert [c.partition for c in result.replaced] == [f"dt={days[1]}"]
    view = reader_view(spark, table)
    assert view == {(days[0],): (5, ("initial",)), (days[1],): (7, ("backfill",)),
                    (days[2],): (5, ("initial",)), (today(3),): (4, ("backfill",))}
    assert spark.newSession().table(table).count() == 5 + 7 + 5 + 4
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    staging = loc.join(hdfs_root, "events", "_tableswap", result.swap_id)
    for values in [(days[1],), (today(3),)]:
        assert loc.is_within(parts[values].location, staging)
        assert parts[values].parameters[SWAP_ID_PARAM] == result.swap_id
        assert parts[values].parameters["numFiles"] != "0"  # listed on HDFS by tableswap (hdfs-native)
    assert loc.same(parts[(days[0],)].location, old[(days[0],)])
    # The displaced directory is still on HDFS: readers that planned against it keep working.
    assert storage.has_data_files(old[(days[1],)])
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    # The recovery manifest was marked committed: its intent replaced in place (HDFS's rename does not
    # replace an existing file unless asked to).
    root = hms.get_table(db, "events").location
    assert manifests.read(mf.manifest_location(root, result.swap_id)).state == "committed"

    again = swap_partitions(batch_df(spark, backfill, "backfill"), table)
    assert reader_view(spark, table) == view
    assert {c.partition for c in again.replaced} == {f"dt={days[1]}", f"dt={today(3)}"}
    queued = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions(db=db, table="events")
    assert len({d.location for d in queued}) == len(queued) == 3
    assert all(_on_hdfs(d.location, hdfs_cluster) for d in queued)


@hdfs_releases
def test_rollback_then_the_janitor_deletes_only_the_displaced_directory_on_hdfs(
        spark, db, hdfs_root, hdfs_cluster, hms, ts_env):
    table = create_events(spark, db, hdfs_root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    v1 = partition_locations(hms, db, "events")
    first = swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table)
    second = swap_partitions(batch_df(spark, {(today(0),): 4, (today(2),): 1}, "v3"), table)
    assert reader_view(spark, table)[(today(0),)] == (4, ("v3",))

    rollback(table)  # back to the first swap's locations

    after_rollback = partition_locations(hms, db, "events")
    assert loc.same(after_rollback[(today(0),)], first.replaced[0].new_location)
    assert (today(2),) not in after_rollback
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (2, ("v1",))}

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    deleted = {o.location for o in report.deleted if o.kind == "displaced"}
    assert loc.normalize(v1[(today(0),)]) in deleted  # displaced by the first swap
    assert not storage.exists(v1[(today(0),)])
    # What the table references again after the rollback was queued by the second swap: never deleted.
    assert loc.normalize(first.replaced[0].new_location) not in deleted
    assert all(storage.has_data_files(p) for p in after_rollback.values())
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (2, ("v1",))}
    assert spark.newSession().table(table).count() == 5
    assert all(_on_hdfs(o.location, hdfs_cluster) for o in report.deleted)
    assert {c.partition for c in second.added} == {f"dt={today(2)}"}


def test_the_janitor_keeps_a_staging_directory_still_being_written_on_hdfs(spark, db, hdfs_root, hms, ts_env):
    """A staging directory that no journal knows, named for a swap that started long ago, with a file written
    just now (another writer's slow staging write): its last activity is its newest file's modification time,
    read from HDFS, so the janitor keeps it for the grace period after that write, then deletes it."""
    table = create_events(spark, db, hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    swap_id = "20200101_000000_aaaa0009"
    staging = loc.join(hms.get_table(db, "events").location, "_tableswap", swap_id)
    spark.createDataFrame([(1, "v", "slow")], "id bigint, value string, batch string") \
        .write.parquet(loc.join(staging, f"dt={today(9)}"))
    written = storage.newest_mtime(staging)
    assert written is not None and written > swap_id_time(swap_id).timestamp()

    kept = run_janitor(table=table, grace="1h", dry_run=False)

    assert any(o.outcome == O_KEPT and swap_id in o.swap_ids for o in kept.outcomes), kept.outcomes
    assert storage.has_data_files(staging)

    later = dt.datetime.fromtimestamp(written, dt.timezone.utc) + dt.timedelta(hours=2)
    swept = run_janitor(table=table, grace="1h", now=later, dry_run=False)
    assert any(o.outcome == O_DELETED and swap_id in o.swap_ids for o in swept.outcomes), swept.outcomes
    assert not storage.exists(staging)
    assert reader_view(spark, table) == {(today(0),): (2, ("v1",))}


def test_without_hdfs_native_an_hdfs_location_is_a_clear_error(monkeypatch):
    """hdfs:// never falls back to fsspec's other HDFS implementation (pyarrow's, which needs libhdfs.so and
    a Hadoop CLASSPATH): without the extra, one error says what to install."""
    import sys

    monkeypatch.setitem(sys.modules, "hdfs_native", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "hdfs_native.fsspec", None)
    with pytest.raises(errors.ConfigurationError, match=r"tableswap\[hdfs\]"):
        storage.filesystem("hdfs://127.0.0.1:1/warehouse/t")


# --------------------------------------------------------------------------- the other operations on HDFS
@hdfs_releases
def test_swap_table_repoints_an_unpartitioned_table_on_hdfs(spark, db, hdfs_root, hdfs_cluster, hms, ts_env):
    table = f"{db}.dim_user"
    spark.sql(f"CREATE TABLE {table} (id bigint, name string, batch string) USING parquet "
              f"LOCATION '{loc.join(hdfs_root, 'dim_user')}'")
    rows = "id bigint, name string, batch string"
    spark.createDataFrame([(i, f"u{i}", "v1") for i in range(3)], rows).write.insertInto(table)
    old = hms.get_table(db, "dim_user").location

    result = swap_table(spark.createDataFrame([(i, f"u{i}", "v2") for i in range(5)], rows), table)

    new = hms.get_table(db, "dim_user").location
    assert _on_hdfs(new, hdfs_cluster) and loc.is_within(new, loc.join(old, "_tableswap", result.swap_id))
    assert sorted(r.batch for r in spark.table(table).collect()) == ["v2"] * 5
    assert storage.has_data_files(old)  # the old files stay for rollback and the janitor


@hdfs_releases
def test_stage_then_publish_on_hdfs(spark, db, hdfs_root, hms, ts_env):
    table = create_events(spark, db, hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)

    staged = stage_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "v2"), table)

    assert reader_view(spark, table) == {(today(0),): (2, ("v1",))}  # nothing visible yet
    assert storage.has_data_files(loc.join(hms.get_table(db, "events").location, "_tableswap", staged.swap_id))
    published = staged.publish()
    assert [c.partition for c in published.replaced] == [f"dt={today(0)}"]
    assert [c.partition for c in published.added] == [f"dt={today(1)}"]
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (1, ("v2",))}


def test_merge_then_compaction_on_hdfs(spark, db, hdfs_root, hdfs_cluster, hms, ts_env):
    table = create_events(spark, db, hdfs_root)
    spark.createDataFrame([(1, "a", "init", today(0)), (2, "b", "init", today(0)), (3, "c", "init", today(1))],
                          "id bigint, value string, batch string, dt string").write.insertInto(table)
    updates = spark.createDataFrame([(1, "A", "u", today(0), "U"), (2, "x", "u", today(0), "D"),
                                     (4, "d", "u", today(0), "I")],
                                    "id bigint, value string, batch string, dt string, op string")

    merged = merge_partitions(updates, table, on=["id"], delete_when="op = 'D'")

    assert [c.partition for c in merged.replaced] == [f"dt={today(0)}"]
    expected = [(today(0), 1, "A"), (today(0), 4, "d"), (today(1), 3, "c")]
    assert sorted((r.dt, r.id, r.value) for r in spark.table(table).collect()) == expected

    # Small files in one partition (one a row), compacted into one: the same rows.
    more = spark.range(10, 40, numPartitions=1).selectExpr("id", "concat('v', id) AS value", "'b' AS batch",
                                                          f"'{today(2)}' AS dt")
    with spark_conf(spark, {"spark.sql.files.maxRecordsPerFile": "1"}):
        more.write.insertInto(table)
    before = sorted(tuple(r) for r in spark.table(table).collect())
    compacted = compact_partitions(spark, table, min_files=10)
    assert [c.partition for c in compacted.replaced] == [f"dt={today(2)}"]
    assert sorted(tuple(r) for r in spark.table(table).collect()) == before
    [d2] = [p for p in hms.list_partitions(db, "events") if p.values == (today(2),)]
    assert _on_hdfs(d2.location, hdfs_cluster) and int(d2.parameters["numFiles"]) < 10, d2


@hdfs_releases
def test_recover_completes_a_swap_whose_writer_was_killed_after_add_on_hdfs(
        spark, db, hdfs_root, hms, ts_env, tmp_path):
    """A writer SIGKILLed between its two flip calls (the new partition added, the replaced one not yet
    repointed), its batch on HDFS: `tableswap recover` completes it and marks its manifest committed."""
    table = create_events(spark, db, hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    proc, log = start_crashing_writer(spark, hms, table, tmp_path / "writer", crash_at="after_add",
                                      rows_per_day={today(0): 3, today(1): 4}, batch="b1", env=ts_env)
    wait_or_kill(proc)
    assert proc.returncode == -9, log.read_text()[-3000:]
    release_locks_of_killed_writer(hms, db, "events", proc)

    result = CliRunner().invoke(cli_main, ["recover", "--table", table, "--stale-after", "0s", "--json"],
                                catch_exceptions=False)

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [r["outcome"] for r in report["resolutions"]] == ["completed"], report
    assert reader_view(spark, table) == {(today(0),): (3, ("b1",)), (today(1),): (4, ("b1",))}
    swap_id = report["resolutions"][0]["swap_id"]
    root = hms.get_table(db, "events").location
    assert manifests.read(mf.manifest_location(root, swap_id)).state == "committed"


# --------------------------------------------------------------------------- the janitor and HDFS's trash
def _displaced_once(spark, db: str, root: str, hms) -> tuple[str, str]:
    """A table at ``root`` whose partition a swap replaced: ``(table, the displaced location)``."""
    table = create_events(spark, db, root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    displaced = partition_locations(hms, db, "events")[(today(0),)]
    swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table)
    return table, displaced


def _in_trash(cluster, location: str) -> str:
    """Where Hadoop's TrashPolicyDefault puts ``location`` deleted by this process's HDFS user."""
    user = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    return f"{cluster.url}/user/{user}/.Trash/Current{loc.split(location)[2]}"


def test_the_janitor_moves_a_displaced_directory_into_the_users_trash(
        spark, db, hdfs_trash_cluster, hms, ts_env, monkeypatch):
    """With the trash on at the NameNode (fs.trash.interval > 0), the janitor moves a displaced directory
    into the deleting user's trash, as Hive's DROP and hdfs dfs -rm do, and says where; with trash "never"
    (--skip-trash) it deletes."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_trash_cluster.conf_dir))
    root = f"{hdfs_trash_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    table, displaced = _displaced_once(spark, db, root, hms)

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    [moved] = [o for o in report.outcomes if loc.same(o.location, displaced)]
    assert moved.outcome == O_DELETED and moved.trash == (_in_trash(hdfs_trash_cluster, displaced),), moved
    assert "moved to the trash" in moved.reason
    assert not storage.exists(displaced)
    assert storage.has_data_files(moved.trash[0])  # recoverable until the trash's checkpoint expires
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",))}

    second = partition_locations(hms, db, "events")[(today(0),)]
    swap_partitions(batch_df(spark, {(today(0),): 4}, "v3"), table)
    skipped = CliRunner().invoke(cli_main, ["janitor", "run", "--table", table, "--grace", "0", "--force-short-grace",
                                            "--skip-trash", "--json"], catch_exceptions=False)

    assert skipped.exit_code == 0, skipped.output
    [deleted] = [o for o in json.loads(skipped.stdout)["outcomes"] if loc.same(o["location"], second)]
    assert deleted["outcome"] == O_DELETED and deleted["trash"] == [], deleted
    assert not storage.exists(second) and not storage.exists(_in_trash(hdfs_trash_cluster, second))
    assert reader_view(spark, table) == {(today(0),): (4, ("v3",))}


def test_with_the_trash_off_the_janitor_deletes_and_trash_always_keeps_the_directory(
        spark, db, hdfs_root, hdfs_cluster, hms, ts_env):
    """The session's NameNode has the trash off: "auto" (the default) deletes; "always" deletes nothing and
    reports an error saying why and what to do."""
    table, displaced = _displaced_once(spark, db, hdfs_root, hms)

    refused = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False, trash="always")

    [kept] = [o for o in refused.outcomes if loc.same(o.location, displaced)]
    assert kept.outcome == O_ERROR and "trash off" in kept.reason and "--skip-trash" in kept.reason, kept
    assert storage.has_data_files(displaced)

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    [deleted] = [o for o in report.outcomes if loc.same(o.location, displaced)]
    assert deleted.outcome == O_DELETED and deleted.trash == (), deleted
    assert not storage.exists(displaced) and not storage.exists(_in_trash(hdfs_cluster, displaced))
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",))}


# --------------------------------------------------------------------------- tableswap metastore start --with-hdfs
#: The README's first example with the table on the warehouse's HDFS.
README_JOB = """
import os
from pyspark.sql import SparkSession
from tableswap import swap_partitions

spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.hadoop.hive.metastore.uris", os.environ["TABLESWAP_METASTORE_URI"])
         .config("spark.sql.warehouse.dir", os.environ["WAREHOUSE"]).enableHiveSupport().getOrCreate())
spark.sql("CREATE DATABASE IF NOT EXISTS sales")
spark.sql(f\"\"\"CREATE TABLE IF NOT EXISTS sales.events (id BIGINT, amount DOUBLE, dt STRING)
    USING parquet PARTITIONED BY (dt) LOCATION '{os.environ["WAREHOUSE"]}/sales/events'\"\"\")
day = spark.createDataFrame([(1, 9.5, "2026-06-03"), (2, 3.0, "2026-06-03"), (3, 7.25, "2026-06-04")],
                            "id BIGINT, amount DOUBLE, dt STRING")
print(swap_partitions(day, "sales.events").summary())
print(swap_partitions(day, "sales.events").summary())
print("rows", spark.table("sales.events").count())
spark.stop()
"""


@pytest.mark.default_metastore
@pytest.mark.spark_processes  # the README's example runs as a Spark job of its own
def test_metastore_start_with_hdfs_puts_the_warehouse_on_a_local_hdfs(tmp_path, monkeypatch, hdfs_cluster):
    """`tableswap metastore start --with-hdfs` starts a local HDFS beside the development metastore, prints its
    HADOOP_CONF_DIR and makes the warehouse an hdfs:// one: a database created without a location gets its
    directory there, created by the server on HDFS; `stop` stops both. (``hdfs_cluster``: the jars are
    resolved and the session's HDFS starts before, so that this one's start is not the first.)"""
    from hmsclient.genthrift.hive_metastore import ttypes

    from tableswap.devmetastore import DevMetastore, process

    from ..support.helpers import raw_hms

    state = tmp_path / "ms"
    started = CliRunner().invoke(cli_main, ["metastore", "start", "--with-hdfs", "--state-dir", str(state)],
                                 catch_exceptions=False)
    dev = DevMetastore(state_dir=state)
    try:
        assert started.exit_code == 0, started.output
        status = dev.status()
        assert status.running and status.hdfs_url and status.hadoop_conf_dir == state / "hdfs" / "conf"
        assert f"export HADOOP_CONF_DIR={status.hadoop_conf_dir}" in started.output.splitlines()
        assert f"warehouse: {status.hdfs_url}/warehouse" in started.output
        shown = CliRunner().invoke(cli_main, ["metastore", "status", "--json", "--state-dir", str(state)])
        assert json.loads(shown.stdout)["warehouse_uri"] == f"{status.hdfs_url}/warehouse"

        monkeypatch.setenv("HADOOP_CONF_DIR", str(status.hadoop_conf_dir))
        with raw_hms(status.port) as client:
            client.create_database(ttypes.Database(name="on_hdfs", description="", locationUri=None, parameters={}))
            where = client.get_database("on_hdfs").locationUri
        assert loc.is_within(where, f"{status.hdfs_url}/warehouse"), where
        assert storage.exists(where)  # made by the server, on the local HDFS
        hdfs_pid = dev.local_hdfs.pid_file.read_text().strip()

        # The README's example, on HDFS: a Spark job of its own (its session's metastore is this one) swaps one
        # day in, then again.
        env = {**os.environ, "TABLESWAP_METASTORE_URI": status.uri, "HADOOP_CONF_DIR": str(status.hadoop_conf_dir),
               "TABLESWAP_JOURNAL_URL": f"sqlite:///{tmp_path / 'journal.db'}", "WAREHOUSE": status.warehouse_uri,
               "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
        job = subprocess.run([sys.executable, "-c", README_JOB], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-3000:]
        assert job.stdout.splitlines()[-1] == "rows 3"
        swapped = [p for p in storage.children(f"{status.warehouse_uri}/sales/events/_tableswap") if p[1]]
        assert len(swapped) == 2, swapped  # the two swaps' staging directories, on HDFS
    finally:
        stopped = CliRunner().invoke(cli_main, ["metastore", "stop", "--state-dir", str(state)])
    assert stopped.exit_code == 0, stopped.output
    assert dev.status().hdfs_url is None and not dev.status().running
    assert not process.pid_alive(int(hdfs_pid))
