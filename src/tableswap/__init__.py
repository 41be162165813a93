"""tableswap: safe Spark table overwrites by repointing Hive Metastore locations.

    from tableswap import swap_partitions, swap_table
    result = swap_partitions(df, "db.events")
"""

from tableswap.errors import TableSwapError
from tableswap.core.result import PartitionChange, SwapResult
from tableswap.ops.write.state import table_state
from tableswap.ops.write.swap import swap_partitions, swap_table
from tableswap.ops.inspect.asof import read_as_of
from tableswap.ops.write.backfill import backfill
from tableswap.ops.write.compact import compact_partitions
from tableswap.ops.write.merge import merge_partitions

__all__ = ["swap_partitions", "swap_table", "merge_partitions", "compact_partitions", "table_state", "read_as_of",
           "backfill", "SwapResult", "PartitionChange", "TableSwapError"]
__version__ = "0.1.0"
