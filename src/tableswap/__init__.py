"""tableswap: safe Spark table overwrites by repointing Hive Metastore locations.

    from tableswap import swap_partitions, swap_table
    result = swap_partitions(df, "db.events")
"""

from .errors import TableSwapError
from .result import PartitionChange, SwapResult
from .swap import swap_partitions, swap_table

__all__ = ["swap_partitions", "swap_table", "SwapResult", "PartitionChange", "TableSwapError"]
__version__ = "0.1.0"
