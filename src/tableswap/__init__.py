"""tableswap: safe Spark table overwrites by repointing Hive Metastore locations.

    from tableswap import swap_partitions, swap_table
    result = swap_partitions(df, "db.events")
"""

from tableswap.errors import AuditFailedError, TableSwapError
from tableswap.core.records import PartitionChange
from tableswap.core.result import SwapResult
from tableswap.core.group import GroupResult
from tableswap.core.security import MetastoreSecurity
from tableswap.ops.write.state import table_state
from tableswap.ops.write.swap import stage_partitions, stage_table, swap_partitions, swap_table
from tableswap.ops.write.staged import StagedSwap
from tableswap.ops.inspect.asof import read_as_of
from tableswap.ops.write.backfill import backfill
from tableswap.ops.write.compact import compact_partitions
from tableswap.ops.write.merge import merge_partitions
from tableswap.ops.write.group import discard_group, publish_group, stage_group, swap_group
from tableswap.ops.write.sql import StatementResult, sql

__all__ = ["MetastoreSecurity", "swap_partitions", "swap_table", "stage_partitions", "stage_table", "StagedSwap",
           "merge_partitions", "compact_partitions", "sql", "StatementResult", "table_state", "read_as_of", "backfill",
           "SwapResult", "PartitionChange", "TableSwapError", "AuditFailedError", "swap_group", "stage_group",
           "publish_group", "discard_group", "GroupResult"]
__version__ = "0.1.0"
