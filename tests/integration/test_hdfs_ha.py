"""Swaps and the janitor on an HDFS with highly available NameNodes: the nameservice ``ns1`` (tests/support/hdfs_ha.py:
``nn0`` active, ``nn1`` standby, one DataNode), failed over while a swap or a janitor run is in progress.

Every client reaches the file system by the nameservice's name, ``hdfs://ns1/...``, never by a NameNode's
address: tableswap through hdfs-native, configured from ``HADOOP_CONF_DIR`` (the cluster's client
configuration); the session's SparkSession through its Hadoop configuration (the same settings, set on it
here); the session's metastore through its ``hive-site.xml`` (it started after the HA cluster, with the
nameservice's settings: tests/conftest.py). A failover is either graceful (the active NameNode made standby,
the other made active) or the active NameNode shut down (its port refuses connections) and the other made
active, while the operation is held at a pause point (src/tableswap/faults.py) in this process.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import storage, swap_partitions
from tableswap.cli import main as cli_main
from tableswap.core import locations as loc
from tableswap.core.records import DeletionState, SwapState
from tableswap.journal import Journal
from tableswap.ops.janitor.run import O_DELETED, O_REFUSED, run_janitor

from ..support.helpers import batch_df, create_events, partition_locations, reader_view, today

pytestmark = [pytest.mark.integration, pytest.mark.hdfs, pytest.mark.hdfs_ha]


@pytest.fixture
def ha(hdfs_ha_cluster, spark, monkeypatch):
    """The HA cluster with both NameNodes running (one shut down by an earlier test restarted as standby);
    ``HADOOP_CONF_DIR`` names its client configuration, and the session's Spark knows the nameservice."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_ha_cluster.conf_dir))
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hdfs_ha_cluster.client_properties().items():
        hadoop_conf.set(key, value)
    hdfs_ha_cluster.restore()
    yield hdfs_ha_cluster
    hdfs_ha_cluster.restore()


@pytest.fixture
def ha_root(ha) -> str:
    return f"{ha.url}/warehouse/{uuid.uuid4().hex[:10]}"


def _active(states: dict[str, str]) -> str:
    [active] = [name for name, state in states.items() if state == "active"]
    return active


class Paused:
    """``target`` run in a thread of this process, held at the pause point ``point`` until :meth:`release` (None:
    held by something of the target's own that makes ``<base>.reached`` and waits for ``<base>.go``)."""

    def __init__(self, monkeypatch, tmp_path: Path, point: str | None, target) -> None:
        self.base = tmp_path / f"pause-{point or 'gate'}"
        if point is not None:
            monkeypatch.setenv("TABLESWAP_PAUSE_AT", point)
            monkeypatch.setenv("TABLESWAP_PAUSE_FILE", str(self.base))
        self.result = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(target,), daemon=True)

    def _run(self, target) -> None:
        try:
            self.result = target()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc

    def start_and_wait(self, timeout: float = 600) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not Path(f"{self.base}.reached").exists():
            assert self.thread.is_alive(), f"finished without reaching the pause point: {self.error!r}"
            assert time.monotonic() < deadline, "the pause point was not reached"
            time.sleep(0.1)

    def release(self, timeout: float = 600):
        Path(f"{self.base}.go").touch()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "still running after the release"
        if self.error is not None:
            raise self.error
        return self.result


def test_a_swap_and_the_janitor_on_a_nameservice_table(spark, db, ha, ha_root, hms, ts_env):
    """A table at hdfs://ns1/...: Spark writes there, the metastore accepts and creates its partition
    directories, tableswap lists the staged batch and the janitor deletes the displaced directory, all by the
    nameservice's name."""
    table = create_events(spark, db, ha_root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    assert all(loc.is_within(p, "hdfs://ns1/") for p in old.values()), old

    result = swap_partitions(batch_df(spark, {(today(0),): 3, (today(2),): 1}, "v2"), table)

    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (2, ("v1",)),
                                         (today(2),): (1, ("v2",))}
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    staging = loc.join(ha_root, "events", "_tableswap", result.swap_id)
    for values in [(today(0),), (today(2),)]:
        assert loc.is_within(parts[values].location, staging)
        assert parts[values].parameters["numFiles"] != "0"  # listed on ns1 by tableswap (hdfs-native)
    assert storage.has_data_files(old[(today(0),)])

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    assert {o.location for o in report.deleted} == {loc.normalize(old[(today(0),)])}, report.outcomes
    assert not storage.exists(old[(today(0),)])
    assert reader_view(spark, table)[(today(0),)] == (3, ("v2",))


@pytest.mark.parametrize("how", ["kill-active", "failover"])
def test_a_failover_after_the_staging_write_and_the_swap_commits(
        spark, db, ha, ha_root, hms, ts_env, monkeypatch, tmp_path, how):
    """The active NameNode fails over (shut down, or made standby) once the batch is written, before tableswap
    lists it and the metastore adds and repoints the partitions: every client fails over to the other NameNode
    and the swap commits, whole; the journal says committed and queues the displaced directory, which is
    still on HDFS."""
    table = create_events(spark, db, ha_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    swap = Paused(monkeypatch, tmp_path, "after_staging_write",
                  lambda: swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 4}, "v2"), table))
    swap.start_and_wait()
    before = _active(ha.state())

    after = ha.kill_active() if how == "kill-active" else ha.failover()

    assert _active(after) != before and after[before] == ("down" if how == "kill-active" else "standby"), after
    result = swap.release()
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (4, ("v2",))}
    assert spark.newSession().table(table).count() == 7
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.get_swap(result.swap_id).state == SwapState.COMMITTED
    [queued] = journal.deletions(db=db, table="events")
    assert loc.same(queued.location, old[(today(0),)]) and storage.has_data_files(old[(today(0),)])


def _gated_batch(spark, base: Path, days: tuple[str, str], rows: int, hold_at: int):
    """``rows`` rows of batch ``v2``, half on each day, in four Spark partitions (four write tasks), whose
    ``value`` (200 bytes) goes through a Python function that, at row ``hold_at`` (in the middle of the first task),
    makes ``<base>.reached`` and waits for ``<base>.go``: that write task holds with the rows before it handed to
    its Parquet writers, while the other running task writes its files."""
    from pyspark.sql import functions as sf

    reached, go = f"{base}.reached", f"{base}.go"

    def hold(row_id: int, value: str) -> str:
        import os
        import time

        if row_id == hold_at:
            open(reached, "w").close()
            deadline = time.monotonic() + 600
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.1)
        return value

    held = sf.udf(hold, "string", useArrow=False)  # a row at a time; no pyarrow needed
    return (spark.range(0, rows, numPartitions=4)
            .select(sf.col("id"), held(sf.col("id"), sf.lpad(sf.col("id").cast("string"), 200, "v")).alias("value"),
                    sf.lit("v2").alias("batch"),
                    sf.when(sf.col("id") % 2 == 0, days[0]).otherwise(days[1]).alias("dt")))


def test_a_failover_in_the_middle_of_sparks_staging_write_commits_whole_or_changes_nothing(
        spark, db, ha, ha_root, hms, ts_env, monkeypatch, tmp_path):
    """The active NameNode is shut down while Spark writes the batch into the swap's staging directory: a write
    task holds in the middle of its rows (its Parquet files created through the active NameNode and still open),
    another task may have finished; then every client fails over to the other NameNode. The swap either commits
    with every row of the batch or fails with nothing changed, and a rerun then commits it; either way Spark and
    the metastore show the same rows, the journal holds no unfinished swap and ``recover`` finds nothing to do."""
    from tableswap.ops.restore.recover import recover
    from tableswap.errors import TableSwapError

    days = (today(0), today(1))
    table = create_events(spark, db, ha_root)
    batch_df(spark, {(days[0],): 2, (days[1],): 2}, "v1").write.insertInto(table)
    before = reader_view(spark, table)
    rows = 20_000
    swap = Paused(monkeypatch, tmp_path, None, lambda: swap_partitions(batch, table))
    batch = _gated_batch(spark, swap.base, days, rows, hold_at=rows // 8)
    swap.start_and_wait()
    fs, staging = storage.filesystem(loc.join(ha_root, "events", loc.STAGING_DIR))
    deadline = time.monotonic() + 300
    while not [f for f in fs.find(staging) if "/_temporary/" in f]:  # the other running task's first files
        assert time.monotonic() < deadline, fs.find(staging, withdirs=True)
        time.sleep(0.2)
    active = _active(ha.state())

    after = ha.kill_active()

    assert _active(after) != active and after[active] == "down", after
    try:
        result = swap.release()
    except TableSwapError as exc:  # failed whole: nothing changed; the same batch again commits
        assert reader_view(spark, table) == before, exc
        [failed] = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db=db, table="events")
        assert failed.state == SwapState.FAILED, failed
        result = swap_partitions(batch, table)  # the held row no longer holds: <base>.go exists
    expected = {(days[0],): (rows // 2, ("v2",)), (days[1],): (rows // 2, ("v2",))}
    assert reader_view(spark, table) == expected
    assert spark.newSession().table(table).count() == rows
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.get_swap(result.swap_id).state == SwapState.COMMITTED
    assert not journal.list_swaps(db=db, table="events", states=(SwapState.STAGING, SwapState.PENDING))
    staged_at = loc.join(ha_root, "events", loc.STAGING_DIR, result.swap_id)
    for p in hms.list_partitions(db, "events"):
        assert loc.is_within(p.location, staged_at) and p.parameters["numFiles"] != "0", p
    assert not recover(table=table).resolutions


def test_a_failover_during_a_janitor_run_deletes_each_directory_once(
        spark, db, ha, ha_root, hms, ts_env, monkeypatch, tmp_path):
    """The janitor deletes two displaced directories in two batches; the active NameNode is shut down between
    them (after the first batch's delete, before it is recorded). The first is recorded as deleted, the second
    deleted through the other NameNode; nothing is left queued, no error, and a second run finds nothing to do."""
    table = create_events(spark, db, ha_root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 3}, "v2"), table)
    live = partition_locations(hms, db, "events")
    run = Paused(monkeypatch, tmp_path, "janitor_mid_batch",
                 lambda: run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False, batch_size=1))
    run.start_and_wait()

    ha.kill_active()

    report = run.release()
    assert not report.errors, report.outcomes
    deleted = [o.location for o in report.outcomes if o.outcome == O_DELETED]
    assert sorted(deleted) == sorted(loc.normalize(p) for p in old.values()), report.outcomes
    assert not any(storage.exists(p) for p in old.values())
    assert all(storage.has_data_files(p) for p in live.values())
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.deletions(db=db, table="events") == []
    done = journal.deletions(db=db, table="events", states=(DeletionState.DELETED,))
    assert sorted(d.location for d in done) == sorted(deleted)

    again = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
    assert not again.errors and not again.deleted, again.outcomes
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}


# --------------------------------------------------------------------------- a NameNode that does not answer
def _closed_ports(n: int) -> list[int]:
    """``n`` loopback ports nothing listens on (bound, then closed: connections to them are refused)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_a_nameservice_whose_namenodes_refuse_connections_is_one_error_and_changes_nothing(
        spark, db, ha, ha_root, hms, ts_env, monkeypatch, tmp_path):
    """tableswap's own client configuration names ``ns1``'s NameNodes at two ports nothing listens on (the
    metastore and Spark keep the real ones). ``janitor run``, ``janitor status --measure`` and ``repair
    --from-storage`` each give up after ``[hdfs] connect_timeout_s`` (2 s here; hdfs-native alone retries for
    minutes) with one error naming the nameservice, both addresses and the setting; nothing is deleted and the
    displaced directory stays queued as it was."""
    table = create_events(spark, db, ha_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table)
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    queued = journal.deletions(db=db, table="events")
    assert [loc.normalize(q.location) for q in queued] == [loc.normalize(old[(today(0),)])]
    closed = _closed_ports(2)
    conf = tmp_path / "closed-conf"
    shutil.copytree(ha.conf_dir, conf)
    site = (conf / "hdfs-site.xml").read_text()
    for address, port in zip(sorted(ha.namenodes.values()), closed):
        site = site.replace(address, f"127.0.0.1:{port}")
    (conf / "hdfs-site.xml").write_text(site)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.setenv("TABLESWAP_HDFS_CONNECT_TIMEOUT_S", "2")
    monkeypatch.setattr(storage, "_CONNECT_TIMEOUT_S", {"value": 30.0}, raising=False)  # restored after
    monkeypatch.setattr(storage, "_UNREACHABLE", {}, raising=False)

    janitor = CliRunner().invoke(cli_main, ["--json", "janitor", "run", "--table", table, "--grace", "0",
                                            "--force-short-grace"])
    status = CliRunner().invoke(cli_main, ["--json", "janitor", "status", "--table", table, "--measure"])
    repair = CliRunner().invoke(cli_main, ["--json", "repair", table, "--from-storage", "--dry-run"])

    for name, result in [("janitor run", janitor), ("repair", repair)]:
        assert result.exit_code == 1, (name, result.output)
        error = json.loads(result.stdout)["error"]
        assert "nameservice ns1" in error and all(f"127.0.0.1:{p}" in error for p in closed), (name, error)
        assert "connect_timeout_s" in error and "nothing was read, deleted or changed" in error, (name, error)
    measured = json.loads(status.stdout)
    assert status.exit_code == 0 and "connect_timeout_s" in json.dumps(measured), status.output
    monkeypatch.setenv("HADOOP_CONF_DIR", str(ha.conf_dir))
    assert storage.has_data_files(old[(today(0),)])
    assert journal.deletions(db=db, table="events") == queued  # still queued, as it was: nothing marked
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",))}


# --------------------------------------------------------------------------- one HDFS, many spellings
def test_two_tables_referencing_one_directory_through_two_spellings_keep_it(spark, db, ha, ha_root, hms, ts_env):
    """Table ``events`` at hdfs://ns1/... has its partitions replaced; another table's partitions point at two of
    the displaced directories, one through the active NameNode's host:port (a spelling HADOOP_CONF_DIR makes the
    nameservice) and one through ``localhost:PORT`` (a spelling it does not place). The janitor keeps both, each
    with its reason, and deletes the third displaced directory, which nothing references."""
    table = create_events(spark, db, ha_root)
    days = [today(i) for i in range(3)]
    batch_df(spark, {(d,): 1 for d in days}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(d,): 2 for d in days}, "v2"), table)
    address = ha.namenodes[_active(ha.state())]  # 127.0.0.1:PORT
    by_namenode = old[(days[0],)].replace("hdfs://ns1/", f"hdfs://{address}/")
    by_alias = old[(days[1],)].replace("hdfs://ns1/", f"hdfs://localhost:{address.rpartition(':')[2]}/")
    spark.sql(f"CREATE TABLE {db}.other (id bigint, value string, batch string) USING parquet "
              f"PARTITIONED BY (dt string) LOCATION '{ha_root}/other'")
    spark.sql(f"ALTER TABLE {db}.other ADD PARTITION (dt='{days[0]}') LOCATION '{by_namenode}' "
              f"PARTITION (dt='{days[1]}') LOCATION '{by_alias}'")
    assert spark.table(f"{db}.other").count() == 2  # the same files, read through the other spellings

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    outcome = {o.location: o for o in report.outcomes}
    kept_by_namenode = outcome[loc.normalize(old[(days[0],)])]
    assert kept_by_namenode.outcome == O_REFUSED and "still referenced" in kept_by_namenode.reason, kept_by_namenode
    assert f"{db}.other" in kept_by_namenode.reason
    kept_by_alias = outcome[loc.normalize(old[(days[1],)])]
    assert kept_by_alias.outcome == O_REFUSED and "HADOOP_CONF_DIR" in kept_by_alias.reason, kept_by_alias
    assert outcome[loc.normalize(old[(days[2],)])].outcome == O_DELETED
    assert storage.has_data_files(old[(days[0],)]) and storage.has_data_files(old[(days[1],)])
    assert not storage.exists(old[(days[2],)])
    assert spark.table(f"{db}.other").count() == 2
