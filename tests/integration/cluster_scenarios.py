"""What a cluster adds: executors in JVMs of their own write the batch, tasks are retried, the driver dies.

These tests need the suite's ``spark`` fixture to run on a standalone cluster (``$TABLESWAP_TEST_SPARK_MASTER``,
speculation on: tests/support/cluster.py). tests/integration/test_cluster.py starts the cluster and runs this file (and the
behaviour tests it lists) in a pytest process of its own, because one Python process holds one SparkContext
and the rest of the suite runs ``local[2]``. Run by hand against a running cluster::

    TABLESWAP_TEST_SPARK_MASTER=spark://127.0.0.1:7077 python3 -m pytest tests/integration/cluster_scenarios.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions

from tableswap import swap_partitions

from ..support import cluster
from ..support.helpers import SRC, batch_df, create_events, data_files, reader_view, today

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SLICES = 8  # tasks of a batch's write
DAYS = 4  # partitions of a batch


@pytest.fixture(autouse=True)
def _on_a_cluster(spark):
    """A cluster session with an executor on each worker (after a killed executor, its replacement)."""
    if not spark.sparkContext.master.startswith("spark://"):
        pytest.skip(f"needs the suite's SparkSession on a standalone cluster (${cluster.MASTER_ENV}): "
                    "run tests/integration/test_cluster.py, which starts one")
    deadline = time.monotonic() + 180
    while len(live_executors(spark)) < cluster.WORKERS:
        assert time.monotonic() < deadline, f"executors registered: {live_executors(spark)}"
        time.sleep(0.5)


def live_executors(spark) -> list[str]:
    """The ids of the executors registered with the driver."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return sorted(ids.apply(i) for i in range(ids.size()))


def slow_batch(spark, batch: str, *, sleep_ms_per_row: int, slow_slices: str = "true"):
    """``SLICES`` tasks of ``250`` rows each over ``DAYS`` days (every task writes a file into every
    day); the rows of the tasks matching ``slow_slices`` (SQL on ``spark_partition_id()``) take
    ``sleep_ms_per_row`` each to compute, in the executor (``reflect`` calls ``Thread.sleep``)."""
    sleep = (f"CASE WHEN {slow_slices} THEN reflect('java.lang.Thread', 'sleep', "
             f"CAST({sleep_ms_per_row} AS bigint)) ELSE '' END")
    return spark.range(0, SLICES * 250, 1, SLICES).selectExpr(
        "id", f"concat('v', CAST(id AS string), {sleep}) AS value", f"'{batch}' AS batch",
        f"CAST(date_add(DATE'2026-06-01', CAST(id % {DAYS} AS int)) AS string) AS dt")


def tasks(spark, job_group: str) -> list:
    """Every attempt of every task of the jobs of ``job_group``, from the driver's status store."""
    tracker = spark.sparkContext.statusTracker()
    store = spark.sparkContext._jsc.sc().statusStore()
    out = []
    for job in tracker.getJobIdsForGroup(job_group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            for attempt in range(stage_info.currentAttemptId + 1 if stage_info else 1):
                try:
                    seq = store.taskList(stage, attempt, 100_000)
                except Exception:  # noqa: BLE001 - a stage that never ran has no entry
                    continue
                out.extend(seq.apply(i) for i in range(seq.size()))
    return out


def exactly_the_batch(spark, table: str, batch: str, location_of: dict) -> None:
    """Each partition of the batch holds exactly one file per task (no second file from a killed or
    speculative attempt, no leftover of the commit protocol) and exactly the batch's rows."""
    assert reader_view(spark, table) == {(today(d),): (SLICES * 250 // DAYS, (batch,)) for d in range(DAYS)}
    rows = spark.table(table).select("id").collect()
    assert sorted(r.id for r in rows) == list(range(SLICES * 250))
    for values, location in location_of.items():
        directory = Path(location.removeprefix("file:"))
        files = data_files(directory)
        task_numbers = Counter(f.name.split("-")[1] for f in files)  # part-<task>-<job uuid>.c000...
        assert len(files) == SLICES and set(task_numbers.values()) == {1}, (values, [f.name for f in files])
        everything = {p.name for p in directory.iterdir()}
        assert not {n for n in everything if n.startswith("_temporary")}, everything


def locations(hms, db: str, table: str = "events") -> dict:
    return {p.values: p.location for p in hms.list_partitions(db, table)}


def test_the_driver_enumerates_exactly_what_the_executors_wrote(spark, db, tmp_path, hms, ts_env):
    """Executors on two workers write the staging data; the swap's listing on the driver finds every
    partition they wrote (new and replaced), no more."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    spark.sparkContext.setJobGroup("enumerate", "staging write on the cluster")
    try:
        result = swap_partitions(slow_batch(spark, "new", sleep_ms_per_row=0), table)
    finally:
        spark.sparkContext.setJobGroup("", "")
    assert sorted(c.partition for c in result.replaced) == [f"dt={today(0)}", f"dt={today(1)}"]
    assert sorted(c.partition for c in result.added) == [
        f"dt={today(2)}", f"dt={today(3)}"]
    done = [t for t in tasks(spark, "enumerate") if t.status() == "SUCCESS"]
    assert len({t.executorId() for t in done}) == 2 and "driver" not in {t.executorId() for t in done}
    exactly_the_batch(spark, table, "new", locations(hms, db))


def test_an_executor_killed_during_the_staging_write_leaves_no_extra_file(spark, db, tmp_path, hms, ts_env):
    """SIGKILL an executor JVM while it writes the batch: its tasks are retried elsewhere and the swap
    completes with exactly one file per task in every partition."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    app = spark.sparkContext.applicationId
    killed: list[tuple[str, int]] = []

    def kill_a_writer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            running = [t for t in tasks(spark, "kill") if t.status() == "RUNNING"]
            pids = cluster.executors()
            if running:
                time.sleep(0.8)  # well into the task: files are open in its attempt directory
                executor = running[0].executorId()
                pid = pids[(app, executor)]
                os.kill(pid, signal.SIGKILL)
                killed.append((executor, pid))
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_writer, daemon=True)
    spark.sparkContext.setJobGroup("kill", "staging write losing an executor")
    killer.start()
    try:
        swap_partitions(slow_batch(spark, "new", sleep_ms_per_row=8), table)
    finally:
        spark.sparkContext.setJobGroup("", "")
        killer.join(timeout=10)
    assert killed, "no task of the staging write was seen running"
    attempts = tasks(spark, "kill")
    lost = [t for t in attempts if t.executorId() == killed[0][0] and t.status() != "SUCCESS"]
    assert lost, [(t.index(), t.attempt(), t.executorId(), t.status()) for t in attempts]
    retried = {t.index() for t in lost}
    assert all(any(t.index() == i and t.status() == "SUCCESS" and t.executorId() != killed[0][0]
                   for t in attempts) for i in retried)
    exactly_the_batch(spark, table, "new", locations(hms, db))


def test_a_speculative_copy_of_a_slow_task_leaves_no_extra_file(spark, db, tmp_path, hms, ts_env):
    """With ``spark.speculation`` on, the slow task of the staging write (15 s, the others well under 1 s)
    gets a second attempt on the other executor; one attempt's files are committed, the other attempt is
    killed while it writes, whichever finishes first."""
    table = create_events(spark, db, tmp_path)
    spark.sparkContext.setJobGroup("speculate", "staging write with a straggler")
    try:
        swap_partitions(slow_batch(spark, "new", sleep_ms_per_row=60, slow_slices="spark_partition_id() = 0"),
                        table)
    finally:
        spark.sparkContext.setJobGroup("", "")
    attempts = tasks(spark, "speculate")
    straggler = [t for t in attempts if t.index() == 0]
    assert any(t.speculative() for t in straggler), [(t.attempt(), t.status(), t.speculative()) for t in straggler]
    assert [t.status() for t in straggler].count("SUCCESS") == 1
    exactly_the_batch(spark, table, "new", locations(hms, db))


def test_a_write_failing_on_every_attempt_changes_nothing(spark, db, tmp_path, hms, ts_env):
    """One task of the staging write fails on every attempt (``spark.task.maxFailures``): the swap fails, the
    table and its files are as before, and the executors' partial staging output is gone."""
    from tableswap import TableSwapError

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    before = reader_view(spark, table), locations(hms, db), sorted(p.relative_to(tmp_path) for p in
                                                                    data_files(tmp_path / "events"))
    failing = slow_batch(spark, "new", sleep_ms_per_row=0).withColumn(
        "value", functions.expr("CASE WHEN spark_partition_id() = 3 THEN raise_error('a broken row') ELSE value END"))
    with pytest.raises(TableSwapError, match="a broken row"):
        swap_partitions(failing, table)
    assert (reader_view(spark, table), locations(hms, db),
            sorted(p.relative_to(tmp_path) for p in data_files(tmp_path / "events"))) == before
    assert not (tmp_path / "events" / "_tableswap").exists() or not any((tmp_path / "events" / "_tableswap").iterdir())
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]


def run_cli(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tableswap", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def spark_submit(args: list[str], env: dict, cwd: Path, log: Path) -> subprocess.CompletedProcess:
    """``spark-submit --master <this cluster> <tableswap's __main__.py> ARGS``, the documented entry file (docs/sql.md),
    a client-mode driver of its own on the cluster; its stderr (Spark's log) into ``log``."""
    import tableswap

    entry = Path(tableswap.__file__).with_name("__main__.py")
    conf = {**cluster.client_conf(speculation=False), "spark.app.name": "tableswap-sql-script",
            "spark.pyspark.driver.python": sys.executable}
    submit = [str(cluster.spark_home() / "bin" / "spark-submit"), "--master", env[cluster.MASTER_ENV],
              *(a for key, value in conf.items() for a in ("--conf", f"{key}={value}")), str(entry), *args]
    with open(log, "a") as err:
        return subprocess.run(submit, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=600)


def test_spark_submit_runs_a_sql_script_and_a_crash_mid_script_is_recovered(spark, db, tmp_path, hms, ts_env,
                                                                          pg_journal_url):
    """``spark-submit .../tableswap/__main__.py sql -f daily.sql`` on the cluster: a SET, a temporary view, two INSERT
    OVERWRITEs of two tables and a query, with a PostgreSQL journal. First run: the driver is SIGKILLed between the
    second overwrite's intent and its flip (the second time it reaches ``after_intent``; its executors go with it):
    the first table's swap is committed, the second's is pending, its table unchanged; ``tableswap recover``, run by
    another process in another working directory with the same journal, undoes it; the rerun of the same script
    converges to the tables one clean run gives, each swap journaled with the cluster's application id. (Until
    2026-11-29 a second test killed a driver of the Python API after its intent the same way: one driver process
    fewer.)"""
    events = create_events(spark, db, tmp_path)
    daily = create_events(spark, db, tmp_path, name="daily")
    for table in (events, daily):
        batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    before = reader_view(spark, daily)
    script = tmp_path / "daily.sql"
    script.write_text(
        "SET spark.sql.sources.partitionOverwriteMode=dynamic;\n"
        "CREATE TEMPORARY VIEW batch AS SELECT id, concat('v', id) AS value, 'new' AS batch,\n"
        "  CAST(date_add(DATE'${first_day}', CAST(id % 2 AS int) + 1) AS string) AS dt FROM range(0, 40, 1, 4);\n"
        f"INSERT OVERWRITE TABLE {events} PARTITION (dt) SELECT * FROM batch;\n"
        f"INSERT OVERWRITE TABLE {daily} PARTITION (dt) SELECT id, value, 'new', dt FROM batch WHERE id < 10;\n"
        f"SELECT dt, count(*) FROM {events} GROUP BY dt;\n")
    expected_events = {(today(0),): (3, ("old",)), (today(1),): (20, ("new",)), (today(2),): (20, ("new",))}
    expected_daily = {(today(0),): (3, ("old",)), (today(1),): (5, ("new",)), (today(2),): (5, ("new",))}
    env = {**cluster._env(), **ts_env, "TABLESWAP_JOURNAL_URL": pg_journal_url,
           cluster.MASTER_ENV: spark.sparkContext.master, "PYTHONPATH": os.pathsep.join([SRC, str(Path(SRC).parent)])}
    # spark-submit's Python runner copies the Python process's stderr into its own stdout: warnings off, so that
    # stdout is the one JSON document of --json.
    args = ["--log-level", "error", "sql", "-f", str(script), "-d", f"first_day={today(0)}", "--json"]
    log = tmp_path / "spark-submit.log"

    ours = {key for key in cluster.executors() if key[0] == spark.sparkContext.applicationId}
    crashed = spark_submit(args, {**env, "TABLESWAP_CRASH_AT": "after_intent", "TABLESWAP_CRASH_NTH": "2"},
                           tmp_path, log)
    assert crashed.returncode != 0 and not crashed.stdout.strip(), log.read_text()[-3000:]
    # The dead driver's application is gone from the cluster: its executors exit with it.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and set(cluster.executors()) - ours:
        time.sleep(0.5)
    assert not set(cluster.executors()) - ours
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events) == expected_events  # the first overwrite's swap committed
    assert reader_view(spark, daily) == before  # the second's intent recorded, nothing flipped
    for table, unfinished in ((events, 0), (daily, 1)):
        shown = json.loads(run_cli(["show", table, "--json"], env, tmp_path).stdout)
        assert len(shown["unfinished_swaps"]) == unfinished, (table, shown["unfinished_swaps"])

    elsewhere = tmp_path / "another-host"
    elsewhere.mkdir()
    recovered = run_cli(["recover", "--json"], env, elsewhere)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert [(r["table"], r["outcome"]) for r in json.loads(recovered.stdout)["resolutions"]] == [(daily, "aborted")]
    assert reader_view(spark, daily) == before
    assert json.loads(run_cli(["show", daily, "--json"], env, tmp_path).stdout)["unfinished_swaps"] == []

    rerun = spark_submit(args, env, tmp_path, log)
    assert rerun.returncode == 0, log.read_text()[-3000:]
    actions = [s["action"] for s in json.loads(rerun.stdout)["statements"]]
    assert actions == ["ran", "ran", "swap_partitions", "swap_partitions", "ran"]
    spark.catalog.refreshTable(events)
    spark.catalog.refreshTable(daily)
    assert reader_view(spark, events) == expected_events
    assert reader_view(spark, daily) == expected_daily
    for table in (events, daily):
        entries = json.loads(run_cli(["history", table, "--json"], env, tmp_path).stdout)["swaps"]
        committed = [e for e in entries if e["state"] == "committed"]
        assert committed and all(e["app_id"].startswith("app-") for e in committed), entries  # on the cluster
