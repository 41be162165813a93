"""How a swap lays out its batch before the staging write (``[swap] write_distribution``; pure: the
values, read by the settings and by the Spark write, :func:`tableswap.spark.staging.distributed`).

* ``"none"`` (the default): the batch is written as it comes. Each Spark task writes one file into every
  table partition it holds rows of: a batch spread over many tasks leaves up to (tasks x partitions) files.
* ``"partition"``: the batch is first clustered by the target's partition columns (Spark's rebalance hint,
  one shuffle), so each table partition is written by one task, or by several when adaptive query execution
  splits a skewed one to the advisory partition size. Only for a partitioned target written as plain files:
  a bucketed or char/varchar target is laid out by Spark's own insert, an unpartitioned one has nothing to
  cluster by.
"""

from __future__ import annotations

NONE = "none"
PARTITION = "partition"
WRITE_DISTRIBUTIONS = (NONE, PARTITION)

#: A swap written as it comes logs advice to cluster its batch (``swap.write_distribution_advice``, INFO) when
#: its staging write left at least this many partitions, with at least this many files per partition on
#: average, of at most this mean size. On local disk (2,000,000 rows, 2 tasks, 2026-11-28) the clustered
#: write took 0.80-0.90 of the unclustered one's time at 200 partitions and 0.55-0.57 at 2,000, but more
#: below 100 (its shuffle); large files per partition are what a large partition should have anyway.
ADVICE_MIN_PARTITIONS = 100
ADVICE_MIN_FILES_PER_PARTITION = 2
ADVICE_MAX_MEAN_FILE_BYTES = 32 * 1024 * 1024


def advice(applied: str, partitions: int, files: int, total_bytes: int) -> str | None:
    """What to tell the user of a staging write laid out as ``applied`` that left ``files`` data files of
    ``total_bytes`` in ``partitions`` table partitions: the advice to cluster the batch by partition when
    it was written as it comes, into many partitions, in several small files each; else ``None``."""
    if applied != NONE or partitions < ADVICE_MIN_PARTITIONS or files <= 0:
        return None
    if files < ADVICE_MIN_FILES_PER_PARTITION * partitions or total_bytes / files > ADVICE_MAX_MEAN_FILE_BYTES:
        return None
    return (f"the staging write left {files:,} files in {partitions:,} partitions ({files / partitions:.1f} per "
            f"partition, {total_bytes / files / 1024 / 1024:.1f} MiB each on average): write_distribution="
            f"\"{PARTITION}\" (the keyword or [swap] write_distribution) clusters the batch by partition first, "
            "about one file per partition, usually faster from about a hundred partitions "
            "(docs/configuration.md#write-distribution)")
