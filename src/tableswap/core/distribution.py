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
