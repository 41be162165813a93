"""Another writer appends into a partition's current directory (Spark SQL ``INSERT INTO ... PARTITION``, as Spark,
Hive and Trino append) while a compaction or a merge of that partition is paused after its staging write: the
appended rows are never lost. A compaction is refused with ``SwapConflictError`` (nothing changed); a merge reads
again and retries. On the real metastore and Spark, the writer paused at the ``after_staging_write`` point."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tableswap import compact_partitions, errors, merge_partitions
from tableswap.journal import Journal

from ..support.helpers import (SRC, assert_documented, create_events, documented_error, metastore_snapshot, today,
                      wait_or_kill)
from .test_compact import TARGET, write_files

pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

D0, D1 = today(0), today(1)


@contextlib.contextmanager
def paused_at(point: str, monkeypatch, tmp_path: Path, run: Callable[[], Any]) -> Iterator[dict]:
    """Run ``run`` in a thread, held at its fault point ``point`` while the block runs, released when the block
    ends; yields ``{"result": ...}`` or ``{"error": ...}``, filled once the thread is done."""
    pause = tmp_path / f"pause-{point}"
    monkeypatch.setenv("TABLESWAP_PAUSE_AT", point)
    monkeypatch.setenv("TABLESWAP_PAUSE_FILE", str(pause))
    outcome: dict = {}

    def body() -> None:
        try:
            outcome["result"] = run()
        except Exception as exc:  # noqa: BLE001 - asserted by the test
            outcome["error"] = exc

    thread = threading.Thread(target=body, name="paused-writer")
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while not Path(f"{pause}.reached").exists():
            assert thread.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.05)
        monkeypatch.delenv("TABLESWAP_PAUSE_AT")  # a merge's retry must not pause again
        yield outcome
    finally:
        Path(f"{pause}.go").touch()
        thread.join(timeout=300)
    assert not thread.is_alive()


def tables(hms, db: str) -> dict:
    return {name: state for name, state in metastore_snapshot(hms, db).items() if "__tswap_" not in name}


def append_in_place(spark, table: str, dt: str, start: int, rows: int) -> None:
    """What another writer does: Spark SQL's ``INSERT INTO ... PARTITION``, appending files into the partition's
    current directory."""
    spark.sql(f"INSERT INTO {table} PARTITION (dt='{dt}') "
              f"SELECT id, concat('appended', id) AS value, 'appended' AS batch FROM range({start}, {start + rows})")


@pytest.mark.hostile
def test_rows_appended_during_a_compaction_refuse_it_and_stay(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """400 rows in 40 files, compacted; 50 rows appended in place while the compaction waits after its staging
    write: it is refused (the partition's files changed since it read them), nothing changed, the table has all
    450 rows and nothing of that partition is queued for the janitor. A rerun then compacts all 450."""
    table = create_events(spark, db, tmp_path)
    write_files(spark, table, D0, 40, 400)
    with paused_at("after_staging_write", monkeypatch, tmp_path,
                   lambda: compact_partitions(spark, table, target_file_bytes=TARGET)) as outcome:
        append_in_place(spark, table, D0, 10_000, 50)
        snapshot = tables(hms, db)  # the compaction's temporary table left out: it drops it when refused
    error = outcome.get("error")
    assert isinstance(error, errors.SwapConflictError), outcome
    assert error.retryable and error.table == table and "nothing was changed" in str(error)
    assert f"dt={D0}" in str(error) and "files appeared" in str(error)
    documented = documented_error("error: sales.events changed since it was read")[len("error: "):]
    assert_documented(str(error), documented, ["sales.events", "s3a://lake/sales/events/dt=2026-06-01",
                                               "part-00000-9a1e7756-....c000.snappy.parquet",
                                               "part-00001-9a1e7756-....c000.snappy.parquet"])
    assert spark.table(table).count() == 450
    assert metastore_snapshot(hms, db) == snapshot
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.deletions_of(db, "events") == []
    [record] = journal.list_swaps(db, "events")
    assert (record.kind, record.state) == ("compact", "failed")
    # Rerun: the compaction reads what is there now.
    result = compact_partitions(spark, table, target_file_bytes=TARGET)
    assert [c.partition for c in result.replaced] == [f"dt={D0}"]
    assert spark.table(table).count() == 450
    assert spark.table(table).where("batch = 'appended'").count() == 50


@pytest.mark.hostile
def test_rows_appended_after_the_intent_refuse_the_compaction_before_its_flip(spark, db, tmp_path, hms, ts_env,
                                                                             monkeypatch):
    """The append lands after the check before the intent (the compaction paused with its intent journaled, under
    the lock, which an append does not take): the files are listed again right before the flip, the compaction
    is refused, its intent marked failed, nothing changed or queued."""
    table = create_events(spark, db, tmp_path)
    write_files(spark, table, D0, 40, 400)
    with paused_at("after_intent", monkeypatch, tmp_path,
                   lambda: compact_partitions(spark, table, target_file_bytes=TARGET)) as outcome:
        append_in_place(spark, table, D0, 10_000, 50)
        snapshot = tables(hms, db)
    error = outcome.get("error")
    assert isinstance(error, errors.SwapConflictError), outcome
    assert "files appeared" in str(error) and "nothing was changed" in str(error)
    assert spark.table(table).count() == 450
    assert metastore_snapshot(hms, db) == snapshot
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.deletions_of(db, "events") == []
    [record] = journal.list_swaps(db, "events")
    assert (record.kind, record.state) == ("compact", "failed")
    assert hms.lock_holders(db, "events") == []


def test_rows_appended_during_a_merge_make_it_read_again(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """A merge of D0 waits after its staging write while another writer appends 50 rows into D0 in place: the
    merge's first attempt is refused by the changed files and its retry reads the partition again: the table
    holds the appended rows and the merge's changes."""
    table = create_events(spark, db, tmp_path)
    write_files(spark, table, D0, 4, 40)
    write_files(spark, table, D1, 2, 20, start=1_000)
    updates = spark.createDataFrame([(1, "U1", "merge", D0), (2, "U2", "merge", D0), (500, "N500", "merge", D0)],
                                    "id bigint, value string, batch string, dt string")
    with paused_at("after_staging_write", monkeypatch, tmp_path,
                   lambda: merge_partitions(updates, table, on=["id"])) as outcome:
        append_in_place(spark, table, D0, 10_000, 50)
    assert "result" in outcome, outcome
    got = {r["id"]: (r["value"], r["batch"], r["dt"]) for r in spark.table(table).collect()}
    assert len(got) == 40 + 20 + 50 + 1 == spark.table(table).count()
    assert got[1] == ("U1", "merge", D0) and got[2] == ("U2", "merge", D0) and got[500] == ("N500", "merge", D0)
    assert sum(1 for v in got.values() if v[1] == "appended") == 50
    kinds = sorted((s.kind, s.state) for s in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events"))
    assert kinds == [("merge", "committed"), ("merge", "failed")]


@pytest.mark.hostile
@pytest.mark.spark_processes
def test_a_writer_appending_during_a_compaction_in_another_process_loses_nothing(spark, db, tmp_path, hms, ts_env,
                                                                                  metastore_uri):
    """Two Spark applications: a compaction in a process of its own, paused after its staging write
    (TABLESWAP_PAUSE_AT), and this one appending 50 rows into the partition with ``INSERT INTO ... PARTITION``
    meanwhile. Released, the compaction process ends with ``SwapConflictError`` and the table has all 450
    rows; nothing is queued for the janitor."""
    table = create_events(spark, db, tmp_path)
    write_files(spark, table, D0, 40, 400)
    work = tmp_path / "compactor"
    work.mkdir()
    pause = work / "pause"
    config = work / "config.json"
    config.write_text(json.dumps({"metastore_uri": metastore_uri, "table": table, "target_file_bytes": TARGET,
                                  "dir": str(work)}))
    env = {**os.environ, **ts_env, "TABLESWAP_PAUSE_AT": "after_staging_write", "TABLESWAP_PAUSE_FILE": str(pause),
           "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    log = work / "output.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.compact_process", str(config)], cwd=Path(SRC).parent,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while not Path(f"{pause}.reached").exists():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        append_in_place(spark, table, D0, 10_000, 50)
    finally:
        Path(f"{pause}.go").touch()
        code = wait_or_kill(proc, 600)
    assert code == 0, log.read_text()[-3000:]
    outcome = json.loads((work / "outcome.json").read_text())
    assert outcome.get("error") == "SwapConflictError" and outcome["retryable"], outcome
    assert any(f"dt={D0}" in c and "files appeared" in c for c in outcome["conflicts"]), outcome
    assert spark.table(table).count() == 450
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.deletions_of(db, "events") == []
    [record] = journal.list_swaps(db, "events")
    assert (record.kind, record.state) == ("compact", "failed")
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
