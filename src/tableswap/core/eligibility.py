"""Which tables tableswap may change or read, and why not: the rules every operation holds a table to,
read from its metastore description alone (pure). Each refusal is an :class:`UnsupportedTableError` (or a
:class:`PartitioningMismatchError`) that says what to change.

* :func:`check_external`: what every operation that repoints a table's locations needs (a swap, a
  rollback, a repair): a plain EXTERNAL table.
* :func:`check_target`: what a swap needs on top (its format, a location, the right partitioning);
  :func:`check_replaced_partitions`: the partitions a swap replaces.
* :func:`check_readable`: what reading a table from its locations needs (``read_as_of``).
* :func:`catalog_refusal`: a Spark session that would read another Hive catalog than tableswap writes.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping

from tableswap import errors
from tableswap.core.catalog import PURGE_PARAM, TRANSLATED_PARAM, PartitionInfo, TableInfo

SUPPORTED_FORMATS = ("parquet", "orc")
#: The Hive Metastore catalog tableswap's calls address (metastore.catalog.default on Hive 3+).
DEFAULT_CATALOG = "hive"


def check_external(table: TableInfo, *, done: str = "swapped") -> None:
    """Refuse a view, a MANAGED table, or an EXTERNAL table whose files a drop deletes: the displaced
    data must outlive every change, for readers and rollback. ``done``: what the operation would do to
    the table, for the message ("swapped", "rolled back", "repaired")."""
    if table.is_view:
        raise errors.UnsupportedTableError(f"{table.qualified_name} is a view; only EXTERNAL tables can be {done}",
                                           table=table.qualified_name)
    if not table.is_external:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} is a MANAGED table. tableswap only swaps EXTERNAL tables: the metastore "
            "deletes a managed table's (or partition's) files when they are dropped or replaced, so the old "
            "data could not be kept for readers and rollback. Convert it with "
            f"ALTER TABLE {table.qualified_name} SET TBLPROPERTIES ('EXTERNAL'='TRUE') if you own its files.",
            table=table.qualified_name
        )
    refusal = purge_refusal(table.qualified_name, table.parameters)
    if refusal is not None:
        raise errors.UnsupportedTableError(refusal, table=table.qualified_name)


def purge_refusal(qualified_name: str, parameters: Mapping[str, str]) -> str | None:
    """Why a table with these parameters must not be changed (its files go with a drop), or ``None``."""
    purge = str(parameters.get(PURGE_PARAM, "")).strip().lower() == "true"
    if not purge:
        return None
    translated = str(parameters.get(TRANSLATED_PARAM, "")).strip().lower() == "true"
    origin = (" (Hive 4 translated this MANAGED table to EXTERNAL: TRANSLATED_TO_EXTERNAL=TRUE)"
              if translated else "")
    return (
        f"{qualified_name} has external.table.purge=true{origin}: the metastore deletes its files when "
        "the table or a partition is dropped, and DROP TABLE would also delete the staged and displaced "
        "data tableswap keeps under the table root for readers and rollback. Make it a plain EXTERNAL "
        f"table to swap it: ALTER TABLE {qualified_name} SET TBLPROPERTIES ('external.table.purge'='false')"
    )


def check_target(table: TableInfo, *, partitioned: bool) -> None:
    """Refuse targets tableswap cannot swap safely, with the reason and what to do."""
    check_external(table, done="swapped")
    fmt = table.storage_format
    if fmt not in SUPPORTED_FORMATS:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} is stored as {fmt or 'an unknown format'}; tableswap supports "
            f"{' and '.join(SUPPORTED_FORMATS)} (datasource USING ... or Hive STORED AS ...)",
            table=table.qualified_name
        )
    if not table.location:
        raise errors.UnsupportedTableError(f"{table.qualified_name} has no storage location",
                                           table=table.qualified_name)
    if partitioned and not table.is_partitioned:
        raise errors.PartitioningMismatchError(
            f"{table.qualified_name} is not partitioned: use swap_table(df, {table.qualified_name!r}) to swap it whole",
            table=table.qualified_name
        )
    if not partitioned and table.is_partitioned:
        raise errors.PartitioningMismatchError(
            f"{table.qualified_name} is partitioned by ({', '.join(table.partition_key_names)}): use "
            f"swap_partitions(df, {table.qualified_name!r}) to replace the partitions present in the batch",
            table=table.qualified_name
        )


def check_readable(table: TableInfo) -> None:
    """Refuse what tableswap cannot read from locations: views and formats other than its own."""
    if table.is_view:
        raise errors.UnsupportedTableError(f"{table.qualified_name} is a view; it has no locations of its own",
                                           table=table.qualified_name)
    if table.storage_format not in SUPPORTED_FORMATS:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} is stored as {table.storage_format or 'an unknown format'}; tableswap reads "
            f"{' and '.join(SUPPORTED_FORMATS)}",
            table=table.qualified_name
        )


def check_replaced_partitions(table: TableInfo, current: Iterable[PartitionInfo]) -> None:
    """Refuse to replace a partition of a Hive-format table that has its own storage format: the
    batch is written in the table's format, which the partition's readers would not expect (a
    datasource table reads every partition with the table's format). ``current``: the existing
    partitions the batch replaces."""
    if table.provider and table.provider != "hive":
        return
    own = [p for p in current
           if (p.serde_lib and table.serde_lib and p.serde_lib != table.serde_lib)
           or (p.input_format and table.input_format and p.input_format != table.input_format)]
    if own:
        names = ", ".join(p.name(table.partition_key_names) for p in own[:5])
        raise errors.UnsupportedTableError(
            f"partition(s) {names} of {table.qualified_name} have their own storage format "
            f"({own[0].input_format or own[0].serde_lib}), not the table's ({table.input_format or table.serde_lib}); "
            "tableswap writes a batch in the table's format only. Nothing was changed: set the partition's "
            "format to the table's (ALTER TABLE ... PARTITION (...) SET FILEFORMAT in Hive) or leave these "
            "partitions out of the batch",
            table=table.qualified_name
        )


def catalog_refusal(spark_conf: Callable[[str], str | None]) -> str | None:
    """Why this Spark session would read another catalog than tableswap writes, or ``None`` (pure;
    ``spark_conf(key)`` returns a Spark configuration value or None)."""
    version = (spark_conf("spark.sql.hive.metastore.version") or "2.3").strip()
    match = re.match(r"^(\d+)", version)
    if not match or int(match.group(1)) < 3:
        return None  # a Hive 1.x/2.x client sends no catalog either
    for key in ("spark.hadoop.metastore.catalog.default", "spark.hadoop.hive.metastore.catalog.default"):
        catalog = spark_conf(key)
        if catalog and catalog.strip().lower() != DEFAULT_CATALOG:
            return (
                f"the SparkSession reads catalog {catalog.strip()!r} ({key}, Hive {version} client) but "
                "tableswap's metastore calls address the server's default catalog (metastore.catalog.default, "
                f"normally {DEFAULT_CATALOG!r}): they would not see the same table. Swap tables of the default "
                "catalog, or unset the Spark setting"
            )
    return None
