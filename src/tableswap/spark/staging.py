"""The Spark side of a swap: check the batch against the target, write it to the staging table.

Columns are matched by name (case-insensitive), reordered to the target's order, and cast only
where the cast is a lossless widening. Anything else is a :class:`SchemaMismatchError` raised
before a single file is written.
"""

from __future__ import annotations

import json
from typing import Any

from tableswap import errors, storage
from tableswap.spark import api as sparkapi
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.metastore import compat
from tableswap.metastore.model import PartitionInfo, TableInfo

SUPPORTED_FORMATS = ("parquet", "orc")

# Lossless widenings Spark performs exactly (target type <- allowed source types).
_WIDENINGS = {
    "smallint": {"tinyint"},
    "int": {"tinyint", "smallint"},
    "bigint": {"tinyint", "smallint", "int"},
    "double": {"float", "tinyint", "smallint", "int"},
    "float": {"tinyint", "smallint"},
}


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
    refusal = compat.purge_refusal(table.qualified_name, table.parameters)
    if refusal is not None:
        raise errors.UnsupportedTableError(refusal)
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


def check_readable(table: TableInfo) -> None:
    """Refuse what tableswap cannot read from locations: views and formats other than its own."""
    if table.is_view:
        raise errors.UnsupportedTableError(f"{table.qualified_name} is a view; it has no locations of its own")
    if table.storage_format not in SUPPORTED_FORMATS:
        raise errors.UnsupportedTableError(
            f"{table.qualified_name} is stored as {table.storage_format or 'an unknown format'}; tableswap reads "
            f"{' and '.join(SUPPORTED_FORMATS)}"
        )


def check_replaced_partitions(table: TableInfo, current: Any) -> None:
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
            "partitions out of the batch"
        )


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


_SCHEMA_PARAM = "spark.sql.sources.schema"
_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"


def stored_schema(table: TableInfo) -> Any | None:
    """The Spark schema a Spark-created table stores in its parameters (the JSON Spark itself reads
    the table's schema from), or None when it is absent, unreadable, or disagrees with the
    metastore's own columns (e.g. columns changed by Hive afterwards; Spark then falls back to the
    metastore's columns too). Saves asking Spark to resolve the table."""
    params = table.parameters
    text = params.get(_SCHEMA_PARAM)
    if text is None and f"{_SCHEMA_PARAM}.numParts" in params:  # written in parts (older Spark, long schemas)
        try:
            text = "".join(params[f"{_SCHEMA_PARAM}.part.{i}"] for i in range(int(params[f"{_SCHEMA_PARAM}.numParts"])))
        except (KeyError, ValueError):
            return None
    if not text:
        return None
    from pyspark.sql.types import StructType

    try:
        schema = StructType.fromJson(json.loads(text))
    except Exception:  # noqa: BLE001 - unreadable: let Spark resolve the table instead
        return None
    hive = [*table.columns, *table.partition_keys]
    if len(schema.fields) != len(hive):
        return None
    for field, column in zip(schema.fields, hive):
        spark_type = field.metadata.get(_CHAR_VARCHAR) or field.dataType.simpleString()
        if (field.name.lower() != column.name.lower()
                or spark_type.replace(" ", "").lower() != column.type.replace(" ", "").lower()):
            return None
    return schema


def align(df: Any, target_schema: Any, partition_keys: tuple[str, ...]) -> Any:
    """Return ``df`` with the target's columns in the target's order; raise on any mismatch.
    A DataFrame that already has exactly the target's column names, order and types is returned
    as it is."""
    if [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
            (f.name.lower(), f.dataType.simpleString()) for f in target_schema.fields]:
        return df
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
        defaults = {f.name.lower(): f.metadata.get("CURRENT_DEFAULT") for f in target_schema.fields}
        with_default = [f"{n!r} (DEFAULT {defaults[n]})" for n in missing if defaults.get(n)]
        if with_default:
            problems.append("tableswap does not fill column defaults: add " + ", ".join(with_default)
                            + " to the DataFrame")
    if extra:
        problems.append("not in the table: " + ", ".join(repr(n) for n in extra))
    columns = []
    for name, dtype in target:
        field = source.get(name)
        if field is None:
            continue
        have, want = field.dataType.simpleString(), dtype.simpleString()
        if have == want:
            columns.append(sparkapi.column(df, field.name).alias(name))
        elif have == "void" or have in _WIDENINGS.get(want, ()):
            columns.append(sparkapi.column(df, field.name).cast(dtype).alias(name))
        else:
            problems.append(f"column {name!r} is {have} in the DataFrame but {want} in the table")
    if problems:
        raise errors.SchemaMismatchError(
            "the DataFrame does not match the table's columns (matched by name): " + "; ".join(problems)
        )
    return df.select(*columns)


def require_hive_catalog(spark: Any) -> None:
    impl = sparkapi.conf_get(spark, "spark.sql.catalogImplementation", "hive")
    if impl != "hive":
        where = "the Spark Connect server" if sparkapi.is_connect(spark) else "the SparkSession"
        raise errors.ConfigurationError(
            f"{where} has no Hive support (spark.sql.catalogImplementation="
            f"{impl}); build it with SparkSession.builder.enableHiveSupport() (Spark Connect: start the server "
            "with --conf spark.sql.catalogImplementation=hive) and spark.hadoop.hive.metastore.uris pointing at "
            "your metastore"
        )

    def conf(key: str) -> str | None:
        try:
            return spark.conf.get(key, None)
        except Exception:  # noqa: BLE001
            return None

    refusal = compat.catalog_refusal(conf)
    if refusal is not None:
        raise errors.ConfigurationError(refusal)


_COMPRESSION_PARAMS = {"parquet.compression": "compression", "orc.compress": "compression"}


def write_options(table: TableInfo) -> dict[str, str]:
    """The target's own write options (datasource OPTIONS, Hive compression properties)."""
    opts = {k: v for k, v in table.serde_parameters.items() if k not in ("path", "serialization.format")}
    for param, option in _COMPRESSION_PARAMS.items():
        if param in table.parameters:
            opts.setdefault(option, table.parameters[param])
    return opts


def write(df: Any, table: TableInfo, location: str) -> None:
    """Write the aligned batch once into the fresh, empty staging location.

    The files are written straight to the location (``<key>=<value>`` directories, Hive's escaping),
    with the target's format and options, in append mode: appending to an empty fresh directory is
    exactly a static overwrite, without its delete, and independent of the session's
    ``partitionOverwriteMode``. No partition is registered in the metastore for the staged data:
    :func:`written_partitions` reads them from the directory listing instead.
    """
    writer = df.write.format(table.storage_format).options(**write_options(table)).mode("append")
    if table.is_partitioned:
        writer = writer.partitionBy(*table.partition_key_names)
    writer.save(location)


def insert(df: Any, staging_table: str) -> None:
    """Write the aligned batch by Spark's own insert into the staging table (an exact copy of the
    target at the fresh staging location), appending: used for bucketed targets, whose files Spark
    only lays out (bucket ids in the names, rows placed by the bucket hash, sorted within each
    file) when it writes through a table that declares the buckets. Spark writes a datasource
    table's buckets with its Murmur3 hash and a Hive table's with Hive's hash, as its own insert
    into the target would."""
    df.write.insertInto(staging_table, overwrite=False)


def written_partitions(location: str, keys: tuple[str, ...]) -> list[PartitionInfo]:
    """The partitions a staging write produced, from one recursive listing of its directory tree (on an
    object store one paged LIST of the prefix, not one per directory), each with ``numFiles``/``totalSize``
    of its data files (names starting with ``_`` or ``.`` are not data, nor is anything under such a
    directory unless it is a partition directory, ``<key>=<value>`` of the table's next partition column,
    which a column named ``_p`` has; a partition directory without a data file is not a written
    partition; directory markers are ignored). Any other directory is refused."""
    fs, root = storage.filesystem(location)
    prefix = root.rstrip("/") + "/"
    try:
        found = fs.find(root, withdirs=True, detail=True)
    except FileNotFoundError:
        found = {}
    except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
        raise errors.StorageError(f"cannot list the staging location {location}: {type(exc).__name__}: {exc}") from exc
    written: dict[tuple[str, ...], list[int]] = {}
    for name, info in found.items():
        relative = name[len(prefix):].rstrip("/") if name.startswith(prefix) else ""
        if not relative:
            continue  # the location itself (or its directory marker)
        parts = relative.split("/")
        is_file = info.get("type") == "file" and not storage.is_marker(name)
        dirs = parts[:-1] if is_file else parts
        partition_dirs = dirs[:len(keys)]
        # A partition directory is <key>=<value> of the next partition column, whatever its first
        # character (a column may be named _p); only another hidden name is a committer's or
        # tableswap's own directory (_temporary, _tableswap), not the table's.
        hidden = False
        for depth, name_ in enumerate(partition_dirs):
            if pn.is_partition_dir(name_, keys[depth]):
                continue
            if pn.is_hidden(name_):
                hidden = True
                break
            raise errors.StagingWriteError(
                f"unexpected directory {name_!r} in the staging location {location} (expected {keys[depth]}=...)"
            )
        if hidden:
            continue
        if is_file and len(dirs) == len(keys) and not pn.is_hidden(parts[-1]):
            written.setdefault(tuple(dirs), []).append(int(info.get("size") or 0))
    return [PartitionInfo(tuple(pn.unescape(d.partition("=")[2]) for d in dirs), loc.join(location, *dirs),
                          {"numFiles": str(len(sizes)), "totalSize": str(sum(sizes))})
            for dirs, sizes in sorted(written.items())]


def staged_bytes(location: str) -> int | None:
    """The bytes of the data files a staging write left at ``location`` (an unpartitioned table's), from
    one recursive listing, with :func:`written_partitions`' rule for what is data (no name starting with
    ``_`` or ``.`` on the way, no directory marker); None when the listing fails (the size is then
    unknown: nothing depends on it but ``tableswap janitor status``)."""
    fs, root = storage.filesystem(location)
    prefix = root.rstrip("/") + "/"
    try:
        found = fs.find(root, withdirs=False, detail=True)
    except FileNotFoundError:
        return 0
    except Exception:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
        return None
    total = 0
    for name, info in found.items():
        relative = name[len(prefix):] if name.startswith(prefix) else ""
        if not relative or storage.is_marker(name) or any(pn.is_hidden(p) for p in relative.split("/")):
            continue
        total += int(info.get("size") or 0)
    return total
