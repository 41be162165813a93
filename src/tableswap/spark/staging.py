"""The Spark side of a swap: align the batch to the target, write it to the staging location, and read
back which partitions it wrote. Which targets may be swapped: :mod:`tableswap.core.eligibility`.

Columns are matched by name (case-insensitive), reordered to the target's order, and cast only
where the cast is a lossless widening. Anything else is a :class:`SchemaMismatchError` raised
before a single file is written.
"""

from __future__ import annotations

from typing import Any

from tableswap import errors, storage
from tableswap.spark.columns import matched_columns
from tableswap.core.catalog import TableInfo, storage_options
from tableswap.core.distribution import LAYOUTS, NONE, PARTITION
from tableswap.spark.api import is_connect


def needs_spark_insert(table: TableInfo) -> str | None:
    """Why the batch must be written by Spark's own insert into the staging table rather than by a
    plain file write, or None: bucketed tables (Spark lays out buckets and sort order only through a
    table that declares them) and char/varchar columns (Spark pads char values and checks lengths
    on insert)."""
    if table.bucket_spec is not None:
        return table.bucket_spec.describe()
    if any(c.type.startswith(("char(", "varchar(")) for c in table.columns):
        return "char/varchar columns"
    return None


def align(df: Any, target_schema: Any, partition_keys: tuple[str, ...], *, table: str | None = None) -> Any:
    """Return ``df`` with the target's columns in the target's order; raise on any mismatch (naming
    ``table``, ``db.table``, in the error's data). A DataFrame that already has exactly the target's column
    names, order and types is returned as it is."""
    if [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
            (f.name.lower(), f.dataType.simpleString()) for f in target_schema.fields]:
        return df
    source = {f.name.lower(): f for f in df.schema.fields}
    if len(source) != len(df.schema.fields):
        lowered = [g.name.lower() for g in df.schema.fields]
        dupes = sorted({f.name for f in df.schema.fields if lowered.count(f.name.lower()) > 1})
        raise errors.SchemaMismatchError(f"the DataFrame has duplicate columns (case-insensitive): {dupes}",
                                         table=table)
    target = [(f.name.lower(), f.dataType) for f in target_schema.fields]
    problems = []
    missing = [n for n, _ in target if n not in source]
    extra = [f.name for f in df.schema.fields if f.name.lower() not in dict(target)]
    if missing:
        kinds = ["partition column" if n in partition_keys else "column" for n in missing]
        problems.append("missing " + ", ".join(f"{k} {n!r}" for k, n in zip(kinds, missing)))
        defaults = {f.name.lower(): f.metadata.get("CURRENT_DEFAULT") for f in target_schema.fields}
        with_default = [f"{n!r} (DEFAULT {defaults[n]})" for n in missing if defaults.get(n)]
        if with_default:
            problems.append("tableswap does not fill column defaults: add " + ", ".join(with_default)
                            + " to the DataFrame")
    if extra:
        problems.append("not in the table: " + ", ".join(repr(n) for n in extra))
    columns = matched_columns(df, target, problems, what="the DataFrame")
    if problems:
        raise errors.SchemaMismatchError(
            "the DataFrame does not match the table's columns (matched by name): " + "; ".join(problems),
            table=table
        )
    return df.select(*columns)


def clustered_by_partition(df: Any, table: TableInfo) -> bool:
    """The batch is clustered by (some of) the target's partition columns already, as its plan says before
    anything runs: its physical plan's output partitioning, a hash or range partitioning by partition columns
    only (``df.repartition("dt")``, ``df.repartitionByRange("dt")``, a projection of them), so that each table
    partition's rows are in one task (or two, at a range's boundary). Planning only, no Spark job: a shuffle
    Spark adds when it prepares the plan to run (a global sort's) is not seen. False where it cannot tell: a
    Spark Connect DataFrame (its plan is on the server), an unpartitioned target."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None or not table.is_partitioned or is_connect(df.sparkSession):
        return False
    try:
        partitioning = jdf.queryExecution().sparkPlan().outputPartitioning()
        if partitioning.getClass().getSimpleName() not in ("HashPartitioning", "RangePartitioning"):
            return False
        refs = partitioning.references().toList()
        names = {refs.apply(i).name().lower() for i in range(refs.size())}
    except Exception:  # noqa: BLE001 - best effort: a plan it cannot read counts as not clustered
        return False
    return bool(names) and names <= set(table.partition_key_names)


def distributed(df: Any, table: TableInfo, distribution: str = NONE) -> tuple[Any, str]:
    """The batch as the staging write lays it out, and the distribution applied (``"none"`` or
    ``"partition"``: ``[swap] write_distribution`` as :func:`tableswap.core.distribution.choose` resolved it).

    ``"partition"`` clusters the rows of a partitioned target by its partition columns with Spark's
    rebalance hint: one shuffle, after which each table partition is written by one task (about one
    file) instead of by every task holding some of its rows. With adaptive query execution (Spark's
    default) small shuffle partitions are coalesced and a skewed one is split to
    ``spark.sql.adaptive.advisoryPartitionSizeInBytes``, so a large partition still gets several files
    of about that size. An unpartitioned target is written as it comes (nothing to cluster by)."""
    if distribution not in LAYOUTS:  # resolved by the rule already: a caller's mistake
        raise errors.ConfigurationError(f"write_distribution={distribution!r} is invalid here: it must be one of "
                                        f"{', '.join(LAYOUTS)} (\"auto\" is resolved before the write)")
    if distribution == NONE or not table.is_partitioned:
        return df, NONE
    # The hint takes names, parsed as (possibly qualified) identifiers: each one quoted, so that a column
    # named `a.b` is not read as field b of a. Strings, not column objects: Spark resolves only unresolved
    # names in a hint, and classic and Connect DataFrames both send a string as such.
    names = ["`" + name.replace("`", "``") + "`" for name in table.partition_key_names]
    return df.hint("rebalance", *names), PARTITION


def write(df: Any, table: TableInfo, location: str, *, distribution: str = NONE) -> str:
    """Write the aligned batch once into the fresh, empty staging location; the distribution applied
    (:func:`distributed`: ``distribution`` for a partitioned target, else ``"none"``).

    The files are written straight to the location (``<key>=<value>`` directories, Hive's escaping),
    with the target's format and options, in append mode: appending to an empty fresh directory is
    exactly a static overwrite, without its delete, and independent of the session's
    ``partitionOverwriteMode``. No partition is registered in the metastore for the staged data:
    :func:`written_partitions` reads them from the directory listing instead.
    """
    df, applied = distributed(df, table, distribution)
    writer = df.write.format(table.storage_format).options(**storage_options(table)).mode("append")
    if table.is_partitioned:
        writer = writer.partitionBy(*table.partition_key_names)
    writer.save(location)
    return applied


def insert(df: Any, staging_table: str) -> None:
    """Write the aligned batch by Spark's own insert into the staging table (an exact copy of the
    target at the fresh staging location), appending: used for bucketed targets, whose files Spark
    only lays out (bucket ids in the names, rows placed by the bucket hash, sorted within each
    file) when it writes through a table that declares the buckets. Spark writes a datasource
    table's buckets with its Murmur3 hash and a Hive table's with Hive's hash, as its own insert
    into the target would."""
    df.write.insertInto(staging_table, overwrite=False)


# The staging directory's listing is storage work (no Spark): a publish from another process needs it too.
written_partitions = storage.written_partitions
staged_bytes = storage.staged_bytes
