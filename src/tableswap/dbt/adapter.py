"""The ``tableswap`` dbt adapter: dbt-spark's adapter, its ``session`` method only, and one method the
plugin's ``incremental`` materialization calls for ``incremental_strategy='tableswap'`` (docs/sql.md#dbt).

dbt-spark's ``session`` method runs every statement with ``spark.sql()`` in the dbt process's own SparkSession
(``dbt.adapters.spark.session``). The materialization builds the model's rows as dbt-spark does (a temporary
view) and hands its ``INSERT OVERWRITE`` to :meth:`TableswapAdapter.tableswap_sql`, which runs it through
:func:`tableswap.sql` in that same SparkSession: a swap replacing exactly the partitions Spark's own statement
would. Every other statement of the run, and every other strategy, is dbt-spark's, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dbt.adapters.base import available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkConnectionManager, SparkConnectionMethod, SparkCredentials
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtRuntimeError

import tableswap
from tableswap.errors import TableSwapError

logger = AdapterLogger("tableswap")

#: The setting the materialization's script sets (dynamic for a partitioned incremental run, else static);
#: restored after the script, as the rest of the dbt run may rely on the session's own value.
OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"


@dataclass
class TableswapCredentials(SparkCredentials):
    """dbt-spark's credentials, ``method: session`` only; ``metastore_uri`` and ``journal_url`` are tableswap's
    (else ``$TABLESWAP_METASTORE_URI`` or the session's ``spark.hadoop.hive.metastore.uris``, and
    ``$TABLESWAP_JOURNAL_URL`` or the config file)."""

    metastore_uri: Optional[str] = None
    journal_url: Optional[str] = None

    @property
    def type(self) -> str:
        return "tableswap"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method != SparkConnectionMethod.SESSION:
            raise DbtRuntimeError(
                f"the tableswap adapter runs with `method: session` only (not {self.method}): its swaps run in "
                "the dbt process's own SparkSession. With a Spark Thrift Server the SQL runs in the server's "
                "JVM, which tableswap cannot reach (docs/sql.md#dbt); use `type: spark` there")

    def _connection_keys(self) -> tuple[str, ...]:
        # (the journal URL may carry a password: `dbt debug` shows only whether the metastore is set)
        return (*super()._connection_keys(), "metastore_uri")


class TableswapConnectionManager(SparkConnectionManager):
    TYPE = "tableswap"


class TableswapAdapter(SparkAdapter):
    ConnectionManager = TableswapConnectionManager

    def valid_incremental_strategies(self) -> list[str]:
        return [*super().valid_incremental_strategies(), "tableswap"]

    @available
    def tableswap_sql(self, script: str) -> AdapterResponse:
        """Run ``script`` (a ``SET`` of the overwrite mode and one ``INSERT OVERWRITE``) with
        :func:`tableswap.sql` in this process's SparkSession; the response of the model's ``main`` statement
        (its message the swaps, its ``query_id`` their swap ids). A tableswap error is the model's error, with
        tableswap's message (what happened, that nothing changed, what to do)."""
        from pyspark.sql import SparkSession

        creds: TableswapCredentials = self.config.credentials
        builder = SparkSession.builder.enableHiveSupport()
        for key, value in creds.server_side_parameters.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()  # the session dbt-spark's cursor runs every other statement in
        logger.debug(f"tableswap: running\n{script}")
        before = spark.conf.get(OVERWRITE_MODE, None)
        try:
            results = tableswap.sql(spark, script, metastore_uri=creds.metastore_uri, journal_url=creds.journal_url)
        except TableSwapError as exc:
            raise DbtRuntimeError(f"tableswap: {exc}") from exc
        finally:
            if before is None:
                spark.conf.unset(OVERWRITE_MODE)
            else:
                spark.conf.set(OVERWRITE_MODE, before)
        swaps = [r for r in results if r.action != "ran"]
        for r in swaps:
            logger.info(f"tableswap: {r.summary()}")
        message = "; ".join(r.summary().split(": ", 1)[1] for r in swaps) or "nothing swapped"
        return AdapterResponse(_message=f"tableswap {message}", code="TABLESWAP",
                               query_id=",".join(r.swap_id for r in swaps if r.swap_id) or None)

