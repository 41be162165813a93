"""``compact_partitions`` and ``tableswap compact``: small files rewritten into few, as one swap, on the real
metastore and Spark."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import compact_partitions, errors
from tableswap.cli import main
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.ops import commit as commit_module
from tableswap.ops.inspect.history import history
from tableswap.ops.restore.rollback import rollback
from tableswap.ops.write import compact as compact_module
from tableswap.ops.write.compact import plan_compaction
from tableswap import storage
from tableswap.spark import merging

from ..support.helpers import (assert_readers_saw_whole_partitions, count_anomalies, create_events, data_files, loop_reader,
                      metastore_snapshot, partition_locations, reads_across_flips, record_flips, spark_conf, today)
from .test_concurrency import competing_writer

# release_independent: a merge or compaction flips through the swap protocol whose metastore calls the swap tests
# make against every release; what these tests assert (the merged rows, the checksum) is decided in Spark.
pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

D0, D1, D2 = today(0), today(1), today(2)
TARGET = 64 * 1024  # bytes: the 200 files (about 1 KiB each) make a few files of this size


def write_files(spark, table: str, dt: str, files: int, rows: int, start: int = 0) -> None:
    """``files`` files of ``rows / files`` rows each into partition ``dt`` (one Spark task, a file per that many
    records)."""
    df = spark.range(start, start + rows, numPartitions=1).selectExpr("id", "concat('v', id) AS value",
                                                                      "'b' AS batch", f"'{dt}' AS dt")
    with spark_conf(spark, {"spark.sql.files.maxRecordsPerFile": str(rows // files)}):
        df.write.insertInto(table)


def table_rows(spark, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(table).collect())


def files_at(location: str) -> int:
    return len(data_files(Path(loc.to_local_path(location))))


@pytest.fixture
def small_files_table(spark, db, tmp_path):
    """D0: 200 small files (compacted); D1: 3 files (below min_files, left alone)."""
    table = create_events(spark, db, tmp_path)
    write_files(spark, table, D0, 200, 6000)
    write_files(spark, table, D1, 3, 30, start=10_000)
    return table


def test_compaction_of_200_small_files_keeps_the_rows_and_rollback_restores_them(spark, db, small_files_table,
                                                                                 hms, ts_env):
    table = small_files_table
    before_rows = table_rows(spark, table)
    before = partition_locations(hms, db, "events")
    assert files_at(before[(D0,)]) == 200
    plan = plan_compaction(table, target_file_bytes=TARGET)
    assert [c.partition for c in plan.candidates] == [f"dt={D0}"]
    d0 = plan.candidates[0]
    assert d0.files == d0.small_files == 200 and 1 < d0.target_files < 20
    expected_sum = merging.checksum(spark.table(table))

    result = compact_partitions(spark, table, target_file_bytes=TARGET)
    assert result.kind == "compact" and [c.partition for c in result.replaced] == [f"dt={D0}"]
    after = partition_locations(hms, db, "events")
    assert after[(D1,)] == before[(D1,)]  # not a candidate: untouched
    assert 1 <= files_at(after[(D0,)]) <= d0.target_files
    assert table_rows(spark, table) == before_rows
    assert merging.checksum(spark.table(table)) == expected_sum
    assert history(table).entries[0].kind == "compact"
    assert files_at(before[(D0,)]) == 200  # the small files are kept for rollback and the janitor
    # Nothing left to compact: no swap, nothing journaled.
    again = compact_partitions(spark, table, target_file_bytes=TARGET)
    assert again.swap_id == "" and not again.replaced
    rollback(table)
    assert partition_locations(hms, db, "events") == before
    assert table_rows(spark, table) == before_rows


def test_a_rewrite_that_does_not_hold_the_same_rows_is_refused(spark, db, small_files_table, hms, ts_env,
                                                               monkeypatch, tmp_path):
    """Fault injection: the staged files' checksum comes out different (as if Spark wrote other rows); the swap
    is refused before the lock, the staged data is discarded, nothing changes."""
    table = small_files_table
    snapshot = metastore_snapshot(hms, db)
    real = merging.checksum
    calls = []

    def off_by_one(df):
        n, h = real(df)
        calls.append(n)
        return (n, h + 1) if len(calls) == 2 else (n, h)  # the 2nd: the staged files

    monkeypatch.setattr(compact_module.merging, "checksum", off_by_one)
    with pytest.raises(errors.CompactionMismatchError) as info:
        compact_partitions(spark, table, target_file_bytes=TARGET)
    assert info.value.table == table and info.value.swap_id and "nothing was changed" in str(info.value)
    assert calls == [6000, 6000]
    assert metastore_snapshot(hms, db) == snapshot
    staging = tmp_path / "events" / "_tableswap"
    assert not staging.exists() or not any(staging.iterdir())
    [record] = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")
    assert (record.kind, record.state) == ("compact", "failed")


def test_a_swap_committed_during_a_compaction_refuses_it_and_keeps_its_rows(spark, db, tmp_path, hms, ts_env,
                                                                           monkeypatch):
    """Another writer replaces the candidate after the compaction read it, before its lock: the compaction is
    refused by its state token (it would bring the old rows back), nothing of it changed; the other swap's
    rows are the table's."""
    table = create_events(spark, db, tmp_path)
    write_files(spark, table, D0, 12, 120)
    other = spark.createDataFrame([(1, "o", "other", D0)], "id bigint, value string, batch string, dt string")
    fired = competing_writer(monkeypatch, other, table)
    with pytest.raises(errors.SwapConflictError) as info:
        compact_partitions(spark, table, target_file_bytes=TARGET)
    assert fired[0] is not None and info.value.retryable and info.value.table == table
    assert spark.table(table).where(f"dt = '{D0}'").collect()[0]["batch"] == "other"
    assert spark.table(table).where(f"dt = '{D0}'").count() == 1
    assert partition_locations(hms, db, "events")[(D0,)] == loc.normalize(fired[0].replaced[0].new_location)


def test_readers_during_a_compaction_see_whole_partitions(spark, db, tmp_path, ts_env, monkeypatch):
    """A Spark reader counts each partition's rows in a loop while three partitions of small files are
    compacted: every read sees every partition with all its rows (never a partial or doubled partition), and a
    read was in flight across the flip."""
    table = create_events(spark, db, tmp_path)
    sizes = {D0: 300, D1: 200, D2: 100}
    for i, (dt, n) in enumerate(sizes.items()):
        write_files(spark, table, dt, 12, n, start=i * 1000)
    valid = {(dt,): {(n,)} for dt, n in sizes.items()}
    reading = threading.Event()
    reads_begun = [0]

    def read():
        reads_begun[0] += 1
        reading.set()
        try:
            return {(r["dt"],): (r["n"],) for r in spark.sql(f"SELECT dt, count(*) AS n FROM {table} GROUP BY dt").collect()}
        finally:
            reading.clear()

    flips = record_flips(monkeypatch)
    recorded = commit_module.flip

    def after_a_read_began(*args, **kwargs):
        # The flip starts right after a read has begun (a Spark job: hundreds of milliseconds, against tens for
        # the flip of three partitions), not at any moment a read is running: one near its end could finish
        # before the flip does, and then no read would be in flight across it.
        began, deadline = reads_begun[0], time.time() + 60
        while not (reads_begun[0] > began and reading.is_set()) and time.time() < deadline:
            time.sleep(0.001)
        return recorded(*args, **kwargs)

    monkeypatch.setattr(commit_module, "flip", after_a_read_began)
    stop, seen = threading.Event(), []
    reader = threading.Thread(target=loop_reader, args=(read, stop, seen), daemon=True)
    reader.start()
    while not seen:
        time.sleep(0.05)
    try:
        result = compact_partitions(spark, table, target_file_bytes=TARGET)
    finally:
        time.sleep(0.5)
        stop.set()
        reader.join(timeout=120)
    assert len(result.replaced) == 3
    results = {"spark": count_anomalies(seen, valid)}
    assert_readers_saw_whole_partitions(results, {"spark": reads_across_flips(seen, flips)}, 1)


def test_compact_command_dry_run_lists_candidates_without_spark_then_compacts(spark, db, small_files_table, hms,
                                                                             ts_env):
    table = small_files_table
    before = partition_locations(hms, db, "events")
    runner = CliRunner()
    dry = runner.invoke(main, ["compact", table, "--dry-run", "--target-file-size", "64KiB", "--json"])
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.output)
    assert doc["ok"] and doc["dry_run"] and doc["plan"]["files_before"] == 200
    assert [c["partition"] for c in doc["plan"]["candidates"]] == [f"dt={D0}"]
    assert partition_locations(hms, db, "events") == before
    text = runner.invoke(main, ["compact", table, "--dry-run", "--target-file-size", "64KiB",
                                "--partition", f"dt={D1}"])
    assert text.exit_code == 0 and "nothing to compact" in text.output
    real = runner.invoke(main, ["compact", table, "--target-file-size", "64KiB", "--json"])
    assert real.exit_code == 0, real.output
    doc = json.loads(real.output)
    assert doc["result"]["kind"] == "compact"
    assert [c["partition"] for c in doc["result"]["replaced"]] == [f"dt={D0}"]
    assert partition_locations(hms, db, "events")[(D0,)] != before[(D0,)]
    bad = runner.invoke(main, ["compact", table, "--target-file-size", "huge", "--json"])
    assert bad.exit_code == 2


def data_file_count(location: str) -> int:
    """Data files at ``location`` on any store (not Spark's markers such as _SUCCESS)."""
    found = storage.survey(location)
    return 0 if found is None else sum(1 for name in found.sizes if not name.rsplit("/", 1)[-1].startswith(("_", ".")))


def test_compaction_on_s3(spark, db, s3root, hms, ts_env):
    """The candidates come from an S3 listing (s3fs, no Spark), the rewrite goes through S3A, rows and checksum
    are the same, and a rollback points the partition back at its small files, which were kept."""
    table = create_events(spark, db, s3root)
    write_files(spark, table, D0, 24, 2400)
    before_rows, before = table_rows(spark, table), partition_locations(hms, db, "events")
    assert data_file_count(before[(D0,)]) == 24
    plan = plan_compaction(table, target_file_bytes=TARGET)
    assert [(c.partition, c.files) for c in plan.candidates] == [(f"dt={D0}", 24)]
    expected_sum = merging.checksum(spark.table(table))

    result = compact_partitions(spark, table, target_file_bytes=TARGET)
    assert result.kind == "compact" and [c.partition for c in result.replaced] == [f"dt={D0}"]
    after = partition_locations(hms, db, "events")
    assert after[(D0,)].startswith("s3a://") and after[(D0,)] != before[(D0,)]
    assert 1 <= data_file_count(after[(D0,)]) <= plan.candidates[0].target_files
    assert table_rows(spark, table) == before_rows
    assert merging.checksum(spark.table(table)) == expected_sum
    assert data_file_count(before[(D0,)]) == 24  # kept for rollback and the janitor
    rollback(table)
    assert partition_locations(hms, db, "events") == before
    assert table_rows(spark, table) == before_rows
