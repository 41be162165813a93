"""The Spark side of a swap: check the batch against the target, write it to the staging table.

Columns are matched by name (case-insensitive), reordered to the target's order, and cast only
where the cast is a lossless widening. Anything else is a :class:`SchemaMismatchError` raised
before a single file is written.
"""

from __future__ import annotations

import re
from typing import Any

from . import errors
from .metastore.model import TableInfo

IDENTIFIER = re.compile(r"^[A-Za-z0-9_]+$")
SUPPORTED_FORMATS = ("parquet", "orc")

# Lossless widenings Spark performs exactly (target type <- allowed source types).
_WIDENINGS = {
    "smallint": {"tinyint"},
    "int": {"tinyint", "smallint"},
    "bigint": {"tinyint", "smallint", "int"},
    "double": {"float", "tinyint", "smallint", "int"},
    "float": {"tinyint", "smallint"},
}


def parse_table_name(name: str, default_db: str | None = None) -> tuple[str, str]:
    """``db.table`` → ``(db, table)``, lower-cased; only Hive-safe identifiers are accepted."""
    if not isinstance(name, str):
        raise errors.InvalidInputError(f"table name must be a string like 'db.table', got {type(name).__name__}")
    parts = [p.strip().strip("`") for p in name.split(".")]
    if len(parts) == 1 and default_db:
        parts = [default_db, parts[0]]
    if len(parts) != 2 or not all(IDENTIFIER.match(p) for p in parts):
        raise errors.InvalidInputError(
            f"bad table name {name!r}: expected DB.TABLE made of letters, digits and underscores"
        )
    return parts[0].lower(), parts[1].lower()


def quoted(db: str, table: str) -> str:
    return f"`{db}`.`{table}`"


def check_target(table: TableInfo, *, partitioned: bool) -> None:
    """Refuse targets tableswap cannot swap safely, with the reason and what to do."""
    if table.is_view:
        raise errors.UnsupportedTableError(f"{table.qualified_name} is a view; only EXTERNAL tables can be swapped")
    if not table.is_external:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} is a MANAGED table. tableswap only swaps EXTERNAL tables: the metastore "
            "deletes a managed table's (or partition's) files when they are dropped or replaced, so the old "
            "data could not be kept for readers and rollback. Convert it with "
            f"ALTER TABLE {table.qualified_name} SET TBLPROPERTIES ('EXTERNAL'='TRUE') if you own its files."
        )
    if table.purges_on_drop:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} has external.table.purge=true: dropping metadata would delete data. "
            "Unset it to swap this table with tableswap."
        )
    fmt = table.storage_format
    if fmt not in SUPPORTED_FORMATS:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} is stored as {fmt or 'an unknown format'}; tableswap supports "
            f"{' and '.join(SUPPORTED_FORMATS)} (datasource USING ... or Hive STORED AS ...)"
        )
    if not table.location:
        raise errors.UnsupportedTableError(f"{table.qualified_name} has no storage location")
    if partitioned and not table.is_partitioned:
        raise errors.PartitioningMismatchError(
            f"{table.qualified_name} is not partitioned: use swap_table(df, {table.qualified_name!r}) to swap it whole"
        )
    if not partitioned and table.is_partitioned:
        raise errors.PartitioningMismatchError(
            f"{table.qualified_name} is partitioned by ({', '.join(table.partition_key_names)}): use "
            f"swap_partitions(df, {table.qualified_name!r}) to replace the partitions present in the batch"
        )


def align(df: Any, target_schema: Any, partition_keys: tuple[str, ...]) -> Any:
    """Return ``df`` with the target's columns in the target's order; raise on any mismatch."""
    from pyspark.sql import functions as F

    source = {f.name.lower(): f for f in df.schema.fields}
    if len(source) != len(df.schema.fields):
        dupes = sorted({f.name for f in df.schema.fields if [g.name.lower() for g in df.schema.fields].count(f.name.lower()) > 1})
        raise errors.SchemaMismatchError(f"the DataFrame has duplicate columns (case-insensitive): {dupes}")
    target = [(f.name.lower(), f.dataType) for f in target_schema.fields]
    problems = []
    missing = [n for n, _ in target if n not in source]
    extra = [f.name for f in df.schema.fields if f.name.lower() not in dict(target)]
    if missing:
        kinds = ["partition column" if n in partition_keys else "column" for n in missing]
        problems.append("missing " + ", ".join(f"{k} {n!r}" for k, n in zip(kinds, missing)))
    if extra:
        problems.append("not in the table: " + ", ".join(repr(n) for n in extra))
    columns = []
    for name, dtype in target:
        field = source.get(name)
        if field is None:
            continue
        have, want = field.dataType.simpleString(), dtype.simpleString()
        if have == want:
            columns.append(F.col(f"`{field.name}`").alias(name))
        elif have == "void" or have in _WIDENINGS.get(want, ()):
            columns.append(F.col(f"`{field.name}`").cast(dtype).alias(name))
        else:
            problems.append(f"column {name!r} is {have} in the DataFrame but {want} in the table")
    if problems:
        raise errors.SchemaMismatchError(
            "the DataFrame does not match the table's columns (matched by name): " + "; ".join(problems)
        )
    return df.select(*columns)


def app_id(spark: Any) -> str | None:
    try:
        return spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        try:
            return spark.conf.get("spark.app.id", None)
        except Exception:  # noqa: BLE001
            return None


def require_hive_catalog(spark: Any) -> None:
    try:
        impl = spark.conf.get("spark.sql.catalogImplementation", "hive")
    except Exception:  # noqa: BLE001
        impl = "hive"
    if impl != "hive":
        raise errors.ConfigurationError(
            "the SparkSession has no Hive support (spark.sql.catalogImplementation="
            f"{impl}); build it with SparkSession.builder.enableHiveSupport() and "
            "spark.hadoop.hive.metastore.uris pointing at your metastore"
        )


def write(df: Any, db: str, temp_table: str) -> None:
    """Append the aligned batch into the fresh, empty staging table (one write, no renames at commit
    beyond Spark's own task commit). Appending to an empty fresh location is exactly a static
    overwrite, and does not depend on the session's ``partitionOverwriteMode``."""
    df.write.insertInto(quoted(db, temp_table), overwrite=False)
