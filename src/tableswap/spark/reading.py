"""Reading a table's data from explicit locations (the table as it was: :mod:`tableswap.ops.inspect.asof`), and
the table's schema as Spark reads it.

Each location is read with the table's format, options and data schema; a partition's values are
added as columns of the table's partition-column types, as Spark's own reader of the table would.
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Sequence

from tableswap.core import partitions as pn
from tableswap.core.catalog import TableInfo, storage_options, stored_spark_schema
from tableswap.spark import api as sparkapi


def stored_schema(table: TableInfo) -> Any | None:
    """The Spark schema (a ``StructType``) a Spark-created table stores in its parameters, when it agrees
    with the metastore's columns (:func:`tableswap.core.catalog.stored_spark_schema`), else None: then
    ask Spark (``spark.table(...).schema``)."""
    stored = stored_spark_schema(table)
    if stored is None:
        return None
    from pyspark.sql.types import StructType

    try:
        return StructType.fromJson(stored)
    except Exception:  # noqa: BLE001 - unreadable by this Spark: let Spark resolve the table instead
        return None


def catalog_schema(spark: Any, table: TableInfo) -> Any:
    """The Spark schema of ``table``'s columns as the catalog declares them (partition columns last), for a
    table Spark does not read through its own catalog (a Glue table written by a session without Glue as
    its catalog): Hive's type names are Spark DDL types (``decimal(10,2)``, ``array<string>``,
    ``struct<a:int>``). A type Spark cannot parse is an :class:`UnsupportedTableError` naming it."""
    from tableswap import errors

    columns = [*table.columns, *table.partition_keys]
    ddl = ", ".join("`" + c.name.replace("`", "``") + "` " + c.type for c in columns)
    try:
        return spark.createDataFrame([], ddl).schema
    except Exception as exc:  # noqa: BLE001 - Spark's parse errors (classic and Connect) differ in type
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise errors.UnsupportedTableError(
            f"{table.qualified_name}: Spark cannot read the catalog's column types ({ddl}): {first}",
            table=table.qualified_name) from None


def read_locations(spark: Any, table: TableInfo, schema: Any,
                   parts: Sequence[tuple[tuple[str, ...], str]]) -> Any:
    """One DataFrame of the data at each ``(partition values, location)`` of ``table``, with the
    table's columns in its order (``schema``: the table's Spark schema, partition columns last).
    An unpartitioned table: one part with values ``()``."""
    from pyspark.sql.types import StructType

    keys = table.partition_key_names
    data_schema = StructType([f for f in schema.fields if f.name.lower() not in keys])
    types = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    reader = spark.read.format(table.storage_format).options(**storage_options(table)).schema(data_schema)
    frames = []
    for values, location in parts:
        df = reader.load(location)
        if keys:
            # Column objects, never SQL text: Spark would substitute ${...} in a value (${env:HOME}).
            df = df.select(*(sparkapi.column(df, f.name) for f in data_schema.fields),
                           *(sparkapi.literal(spark, None if v == pn.DEFAULT_PARTITION else v, types[k]).alias(k)
                             for k, v in zip(keys, values)))
        frames.append(df)
    if not frames:
        return spark.createDataFrame([], schema)
    return reduce(lambda a, b: a.unionByName(b), frames)
