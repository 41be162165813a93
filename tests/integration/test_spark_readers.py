"""A Spark reader during swaps, in the default run (the campaign, tests/campaign/test_readers_writers.py, runs
50 swaps and compares with Spark's dynamic partition overwrite).

A separate Spark process (tests/campaign/reader.py, its own session) queries the table in a loop while swaps
replace every partition, batch after batch. Every read must see each partition entirely as one batch wrote it
(its row count and checksum), never a missing partition, never an error; and the reads must really have
overlapped the flips (timed in the writer): a read in flight across a flip, and none of the flips outside the
reader's activity, so that the test cannot pass without readers meeting swaps.
"""

from __future__ import annotations

import pytest

import tableswap
from tableswap import swap_partitions

from ..campaign.reading import batch_frame, create_table, run_with_reader, valid_reads
from ..support.helpers import count_anomalies, reads_across_flips, record_flips
from ..support.report import REPORT

pytestmark = [pytest.mark.integration, pytest.mark.spark_processes]

SWAPS = 10


def _sql_overwrite(spark, table: str, batch) -> None:
    """``tableswap.sql`` of Spark's dynamic ``INSERT OVERWRITE ... PARTITION (dt)`` from the batch's rows."""
    batch.createOrReplaceTempView("reader_batch")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        tableswap.sql(spark, f"INSERT OVERWRITE TABLE {table} PARTITION (dt) SELECT * FROM reader_batch")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")


@pytest.mark.parametrize("writer", ["swap_partitions", "sql"])
def test_a_spark_reader_sees_each_partition_whole_while_swaps_flip_it(spark, db, tmp_path, metastore_uri, ts_env,
                                                                      monkeypatch, writer):
    """``writer``: swap_partitions, or an INSERT OVERWRITE script run by ``tableswap.sql`` (docs/sql.md), whose
    readers Spark's own statement would show partial partitions (the campaign measures that for Spark's
    dynamic overwrite)."""
    table = create_table(spark, db, tmp_path, "events")
    batches = {b: batch_frame(spark, b) for b in range(1, SWAPS + 1)}
    flips = record_flips(monkeypatch)
    write = ((lambda b: swap_partitions(batches[b], table)) if writer == "swap_partitions"
             else (lambda b: _sql_overwrite(spark, table, batches[b])))
    observations, _ = run_with_reader(metastore_uri, table, tmp_path, write, SWAPS)

    valid = valid_reads(range(0, SWAPS + 1))
    seen = count_anomalies(observations, valid)
    assert seen["mixed_or_partial"] == seen["missing_partition"] == seen["errors"] == 0, seen
    overlap = reads_across_flips(observations, flips)
    REPORT.append({"campaign": "concurrent readers", "case": f"tableswap ({writer}), Spark reader (default run)",
                   "trials": f"{SWAPS} swaps, {seen['observations']} reads",
                   "result": f"{seen['mixed_or_partial'] + seen['missing_partition'] + seen['errors']} anomalies",
                   "details": f"reads in flight across {overlap['in_flight']} of {overlap['flips']} flips"})
    assert overlap["flips"] == SWAPS and overlap["unwatched"] == [] and overlap["in_flight"] >= 1, overlap
    # The reader saw the table before the swaps and saw it change.
    before = valid_reads(range(0, 1))
    assert all(tuple(v) in before[p] for p, v in observations[0]["parts"].items())
    assert any(tuple(v) not in before[p] for obs in observations for p, v in obs["parts"].items())
