"""The Spark side of a swap: align the batch to the target, write it to the staging location, and read
back which partitions it wrote. Which targets may be swapped: :mod:`tableswap.core.eligibility`.

Columns are matched by name (case-insensitive), reordered to the target's order, and cast only
where the cast is a lossless widening. Anything else is a :class:`SchemaMismatchError` raised
before a single file is written.
"""

from __future__ import annotations

from typing import Any

from tableswap import errors, storage
from tableswap.spark import api as sparkapi
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.catalog import PartitionInfo, TableInfo, storage_options

# Lossless widenings Spark performs exactly (target type <- allowed source types).
_WIDENINGS = {
    "smallint": {"tinyint"},
    "int": {"tinyint", "smallint"},
    "bigint": {"tinyint", "smallint", "int"},
    "double": {"float", "tinyint", "smallint", "int"},
    "float": {"tinyint", "smallint"},
}


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
        dupes = sorted({f.name for f in df.schema.fields if [g.name.lower() for g in df.schema.fields].count(f.name.lower()) > 1})
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
            "the DataFrame does not match the table's columns (matched by name): " + "; ".join(problems),
            table=table
        )
    return df.select(*columns)


def write(df: Any, table: TableInfo, location: str) -> None:
    """Write the aligned batch once into the fresh, empty staging location.

    The files are written straight to the location (``<key>=<value>`` directories, Hive's escaping),
    with the target's format and options, in append mode: appending to an empty fresh directory is
    exactly a static overwrite, without its delete, and independent of the session's
    ``partitionOverwriteMode``. No partition is registered in the metastore for the staged data:
    :func:`written_partitions` reads them from the directory listing instead.
    """
    writer = df.write.format(table.storage_format).options(**storage_options(table)).mode("append")
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
    partition; directory markers and empty directories are ignored). Any other directory holding a file
    is refused. The listing is :func:`tableswap.storage.survey`'s."""
    try:
        found = storage.survey(location)
    except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
        raise errors.StorageError(f"cannot list the staging location {location}: {type(exc).__name__}: {exc}") from exc
    if found is None:
        return []
    prefix = found.path.rstrip("/") + "/"
    written: dict[tuple[str, ...], list[int]] = {}
    for name, size in found.sizes.items():
        relative = name[len(prefix):] if name.startswith(prefix) else ""
        if not relative:
            continue
        parts = relative.split("/")
        dirs = parts[:-1]
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
        if len(dirs) == len(keys) and not pn.is_hidden(parts[-1]):
            written.setdefault(tuple(dirs), []).append(size)
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
