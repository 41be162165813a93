"""The Spark side of ``merge_partitions`` and ``compact_partitions``: the merged rows of the partitions
the updates touch (:func:`merged`), the updates' duplicate keys and partitions, and the content checksum
a compaction compares before its flip (:func:`checksum`). What each merge option means:
:mod:`tableswap.core.merge`.

Everything is built from DataFrame operations and the session's own column functions (classic or Spark
Connect, :func:`functions`); user text reaches Spark only as ``delete_when``, a condition the caller
wrote, never data spliced into SQL.
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Sequence

from tableswap import errors
from tableswap.core import partitions as pn
from tableswap.core.merge import SHOWN_KEYS, MergeSpec, describe_key
from tableswap.spark import api as sparkapi

_DELETE = "__tableswap_delete"
_KEY = "__tableswap_key_"


def functions(spark: Any) -> Any:
    """``pyspark.sql.functions`` of the session's kind: the Connect module for a Connect session, else
    the classic implementations (the public names dispatch on the process's mode, see
    :mod:`tableswap.spark.api`)."""
    if sparkapi.is_connect(spark):
        from pyspark.sql.connect import functions as cf

        return cf
    from pyspark.sql import functions as f

    class _Classic:
        def __getattr__(self, name: str) -> Any:
            fn = getattr(f, name)
            return getattr(fn, "__wrapped__", fn)

    return _Classic()


def duplicate_keys(updates: Any, on: Sequence[str]) -> list[str]:
    """Up to :data:`SHOWN_KEYS` keys occurring more than once in ``updates`` (described), and how many."""
    f = functions(updates.sparkSession)
    counted = updates.groupBy(*(sparkapi.column(updates, c) for c in on)).count()
    dupes = counted.filter(counted["count"] > 1)
    rows = dupes.limit(SHOWN_KEYS).collect()
    if not rows:
        return []
    total = dupes.agg(f.count(f.lit(1)).alias("n")).collect()[0]["n"]
    shown = [describe_key(on, [r[c] for c in on]) + f" ({r['count']} rows)" for r in rows]
    return shown + ([f"... {total - len(shown)} more"] if total > len(shown) else [])


def touched_partitions(updates: Any, keys: Sequence[str]) -> list[tuple[str, ...]]:
    """The partitions the updates have rows for, their values as Spark names the directories it writes: NULL
    and ``''`` are the default partition (the metastore's own spelling of a value may differ:
    :func:`tableswap.core.merge.stored_spellings`)."""
    cols = [sparkapi.column(updates, k).cast("string").alias(k) for k in keys]
    rows = updates.select(*cols).distinct().collect()
    return sorted({tuple(pn.stored_value(r[k]) for k in keys) for r in rows})


def _matches(left: Any, right: Any, on: Sequence[str]) -> Any:
    """``left`` row's key equals ``right``'s renamed key (NULL equal to NULL: a rerun matches what it inserted)."""
    return reduce(lambda a, b: a & b, [sparkapi.column(left, c).eqNullSafe(sparkapi.column(right, _KEY + str(i)))
                                       for i, c in enumerate(on)])


def merged(existing: Any, updates: Any, spec: MergeSpec, *, table: str) -> Any:
    """The merged rows of the touched partitions: ``existing`` (their current rows) and ``updates`` (aligned
    to the table's columns, no duplicate key). Columns in the table's order."""
    spark = updates.sparkSession
    f = functions(spark)
    columns = [f_.name for f_ in existing.schema.fields]
    if spec.delete_when is not None:
        try:
            condition = f.expr(spec.delete_when)
            dtype = updates.select(condition.alias(_DELETE)).schema.fields[0].dataType.simpleString()
        except Exception as exc:  # noqa: BLE001 - Spark's parse and analysis errors differ by mode
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise errors.InvalidInputError(
                f"merge into {table}: delete_when {spec.delete_when!r} is not a condition on the updates' columns: "
                f"{first}; nothing was changed", table=table) from None
        if dtype not in ("boolean", "void"):
            raise errors.InvalidInputError(f"merge into {table}: delete_when {spec.delete_when!r} is not a condition "
                                           f"(it is {dtype}, not boolean); nothing was changed", table=table)
        flagged = updates.withColumn(_DELETE, f.coalesce(condition.cast("boolean"), f.lit(False)))
    else:
        flagged = updates.withColumn(_DELETE, f.lit(False))
    keys = flagged.select(*(sparkapi.column(flagged, c).alias(_KEY + str(i)) for i, c in enumerate(spec.on)),
                          sparkapi.column(flagged, _DELETE))
    # Existing rows leave when their key is updated (update) or deleted (any).
    removing = keys if spec.replaces_matched else keys.filter(sparkapi.column(keys, _DELETE))
    kept = existing.join(removing, _matches(existing, removing, spec.on), "left_anti")
    # Updates come in when they replace a match or insert a new key, never when they are deletes.
    live = flagged.filter(~sparkapi.column(flagged, _DELETE)).drop(_DELETE)
    existing_keys = existing.select(*(sparkapi.column(existing, c).alias(_KEY + str(i))
                                      for i, c in enumerate(spec.on)))
    if spec.replaces_matched and spec.inserts:
        incoming = live
    elif spec.replaces_matched:
        incoming = live.join(existing_keys, _matches(live, existing_keys, spec.on), "left_semi")
    elif spec.inserts:
        incoming = live.join(existing_keys, _matches(live, existing_keys, spec.on), "left_anti")
    else:
        return kept.select(*columns)
    return kept.select(*columns).unionByName(incoming.select(*columns))


def content_hash(df: Any) -> Any:
    """One row's hash column: ``xxhash64`` of every column (maps, which Spark does not hash, as JSON)."""
    f = functions(df.sparkSession)
    cols = []
    for field in df.schema.fields:
        col = sparkapi.column(df, field.name)
        cols.append(f.to_json(f.struct(col)) if "map<" in field.dataType.simpleString() else col)
    return f.xxhash64(*cols)


def checksum(df: Any) -> tuple[int, int]:
    """``(rows, sum of each row's content hash)``: equal for two DataFrames holding the same rows, whatever
    their order or files (the sum in decimal(38,0): no overflow)."""
    f = functions(df.sparkSession)
    row = df.agg(f.count(f.lit(1)).alias("n"),
                 f.sum(content_hash(df).cast("decimal(38,0)")).alias("h")).collect()[0]
    return int(row["n"]), int(row["h"] or 0)


def spread(df: Any, files: int, salt: str) -> Any:
    """``df`` with a ``salt`` column in ``[0, files)`` from its rows' content hash (deterministic: a retried
    task writes the same rows), to lay a partition's rows out into at most ``files`` files."""
    f = functions(df.sparkSession)
    return df.withColumn(salt, f.pmod(content_hash(df), f.lit(max(1, files))))
