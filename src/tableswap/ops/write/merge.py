"""``merge_partitions``: row-level upserts (and deletes) on a plain partitioned table, as one swap.

The partitions the updates touch are named as the metastore stores them (an INT partition stored as
``hour=01`` is the one Spark calls ``hour=1``; ``''`` is the default partition, as Spark writes it) and read at
the locations the metastore gives them, under a state token taken from that same read, their data files
listed first; the merged rows (:func:`tableswap.spark.merging.merged`, what each option means:
:mod:`tableswap.core.merge`) are swapped in as one ``merge`` swap whose replace scope is exactly those
partitions (a partition the merge empties is dropped, its data kept for rollback), whose
``if_unchanged_since`` is that token, and whose input check lists those files again under the lock
(:mod:`tableswap.ops.write.listing`). A swap of the same partitions committed between the read and the
flip, or another writer's append into one of them, makes the swap refuse (nothing changed); the merge then
reads again and retries, at most ``merge_retries`` times (setting, default 3), before raising
:class:`~tableswap.errors.SwapConflictError`. Partitions the updates do not touch are neither read nor
rewritten.
"""

from __future__ import annotations

from typing import Any

from tableswap import errors
from tableswap.core import eligibility, partitions as pn
from tableswap.core.catalog import TableInfo
from tableswap.core.merge import merge_spec, respelled, stored_spellings
from tableswap.core.names import parse_table_name, quoted
from tableswap.core.records import SwapKind
from tableswap.core.result import SwapResult
from tableswap.core.state import partition_state
from tableswap.logs import get_logger
from tableswap.ops.write.listing import files_unchanged, list_files
from tableswap.ops.write.request import SwapRequest
from tableswap.ops.write.swap import run_swap
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi, merging
from tableswap.spark.columns import matched_columns
from tableswap.spark.reading import catalog_schema, read_locations, stored_schema

log = get_logger("tableswap.merge")


def table_schema(spark: Any, info: TableInfo, *, spark_catalog: bool) -> Any:
    """The table's Spark schema (partition columns last), as a swap resolves it."""
    schema = stored_schema(info)
    if schema is not None:
        return schema
    if spark_catalog:
        return spark.table(quoted(info.db, info.name)).schema
    return catalog_schema(spark, info)


def resolve_target(spark: Any, table: str, rt: Runtime) -> tuple[TableInfo, Any]:
    """The partitioned table ``table`` names (checked as a swap checks its target) and its Spark schema."""
    spark_catalog = rt.capabilities.spark_catalog
    if spark_catalog:
        sparkapi.require_hive_catalog(spark)
    current_db = None
    if not isinstance(table, str) or "." not in table:
        try:
            current_db = spark.catalog.currentDatabase()
        except Exception:  # noqa: BLE001 - a session that cannot say: the name must then be qualified
            current_db = None
    db, name = parse_table_name(table, current_db)
    with rt.catalog() as catalog:
        info = catalog.get_table(db, name)
    eligibility.check_target(info, partitioned=True)
    return info, table_schema(spark, info, spark_catalog=spark_catalog)


def _aligned(updates: Any, schema: Any, table: str) -> Any:
    """The updates with the table's columns in its order (by name, case-insensitive; a lossless widening
    cast), then the columns the table does not have (for ``delete_when``; never written);
    :class:`SchemaMismatchError` otherwise, before anything is read."""
    source = {f.name.lower(): f for f in updates.schema.fields}
    problems = []
    wanted = [(f.name.lower(), f.dataType) for f in schema.fields]
    missing = [n for n, _ in wanted if n not in source]
    extra = [f.name for f in updates.schema.fields if f.name.lower() not in dict(wanted)]
    if len(source) != len(updates.schema.fields):
        problems.append("duplicate columns (case-insensitive)")
    if missing:
        problems.append("missing " + ", ".join(map(repr, missing)))
    cols = matched_columns(updates, wanted, problems, what="the updates")
    if problems:
        raise errors.SchemaMismatchError(
            f"the updates do not match the columns of {table} (matched by name): " + "; ".join(problems)
            + "; nothing was changed", table=table)
    return updates.select(*cols, *(sparkapi.column(updates, n) for n in extra))


def merge_partitions(updates_df: Any, table: str, *, on: Any, when_matched: str = "update",
                     when_not_matched: str = "insert", delete_when: str | None = None,
                     metastore_uri: str | None = None, journal_url: str | None = None, dry_run: bool = False,
                     runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Merge ``updates_df`` into the partitioned table ``table`` by key, as one swap (kind ``merge``).

    Only the partitions the updates have rows for are read, merged and swapped in: in each, an existing
    row whose ``on`` key matches an update is replaced by it (or kept: ``when_matched="ignore"``) or
    deleted when ``delete_when`` holds on the update; an update matching no row is inserted (or left out:
    ``when_not_matched="ignore"``), unless ``delete_when`` holds on it. Keys compare NULL equal to NULL,
    within the touched partitions. A partition left with no row is dropped (its data kept for rollback).
    Rerunning the same merge gives the same table.

    Args:
        updates_df: the updates: a Spark DataFrame with the table's columns (partition columns included);
            other columns (an operation code for ``delete_when``, say) are allowed and not written.
        table: ``db.table`` (or a table of the session's current database), partitioned, EXTERNAL.
        on: the key columns (a name or a list of names).
        when_matched: ``"update"`` (default) or ``"ignore"``.
        when_not_matched: ``"insert"`` (default) or ``"ignore"``.
        delete_when: a Spark SQL condition on the update's columns (``"op = 'D'"``): a matched row is
            deleted, and the update is not inserted, where it holds.
        dry_run: read, merge, stage and plan; change nothing.
        options: connection and swap options (``merge_retries``: reruns after a conflicting swap, default 3).

    Returns:
        The :class:`SwapResult` of the merge's swap (kind ``merge``).

    Raises:
        DuplicateKeyError: a key occurs more than once in the updates (a few are named); nothing was changed.
        SchemaMismatchError: the updates' columns do not match the table's.
        InvalidInputError: bad ``on``, ``when_matched``, ``when_not_matched`` or ``delete_when``.
        EmptyBatchError: the updates have no rows.
        SwapConflictError: swaps of the same partitions (or appends into them) kept committing between the
            merge's read and its flip, ``merge_retries`` reruns in a row; nothing was changed by the merge.
        UnsupportedTableError: partitions the updates touch are stored twice under different spellings of one
            value (``hour=01`` and ``hour=1`` of an INT); nothing was changed.
    """
    spark = sparkapi.session_of(updates_df)
    with use(runtime, spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        info, schema = resolve_target(spark, table, rt)
        qualified, keys = info.qualified_name, info.partition_key_names
        spec = merge_spec(on, [f.name.lower() for f in schema.fields], when_matched=when_matched,
                          when_not_matched=when_not_matched, delete_when=delete_when, table=qualified)
        updates = _aligned(updates_df, schema, qualified)
        dupes = merging.duplicate_keys(updates, spec.on)
        if dupes:
            raise errors.DuplicateKeyError(
                f"the updates for {qualified} hold a key ({', '.join(spec.on)}) more than once, so which row wins "
                f"would be arbitrary; nothing was changed. Duplicate keys: {errors.listing(dupes)}",
                table=qualified, keys=dupes)
        touched = merging.touched_partitions(updates, keys)
        if not touched:
            raise errors.EmptyBatchError(f"the updates for {qualified} have no rows; nothing was changed",
                                         table=qualified)
        retries = rt.settings.merge_retries
        for attempt in range(retries + 1):
            try:
                return _merge_once(spark, rt, info, schema, updates, spec, touched, dry_run)
            except errors.SwapConflictError as exc:
                if attempt >= retries:
                    raise
                log.info("merge.retry", table=qualified, attempt=attempt + 1, retries=retries,
                         conflicts=len(exc.conflicts), swap_id=exc.swap_id)
        raise AssertionError("unreachable")  # pragma: no cover


def _stored(catalog: Any, info: TableInfo, touched: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The partitions the updates touch (values as Spark spells them), named as the metastore stores them: an
    INT partition stored as ``hour=01`` for Spark's ``hour=1``, a DECIMAL's ``1.50`` for ``1.5`` (one listing
    of the table's partition names, only for a table with a partition column of such a type); a new
    partition as Spark spells it."""
    keys, types = info.partition_key_names, [c.type for c in info.partition_keys]
    if all(pn.one_spelling(t) for t in types):
        return touched
    found = stored_spellings(info.qualified_name, keys, types, touched, catalog.list_partition_values(info), "merge")
    return sorted({found.get(v, v) for v in touched})


def _merge_once(spark: Any, rt: Runtime, info: TableInfo, schema: Any, updates: Any, spec: Any,
                touched: list[tuple[str, ...]], dry_run: bool) -> SwapResult:
    """One read of the touched partitions (their token and their files listed first), merged and swapped in
    under that token, the files compared again under the lock."""
    keys, qualified = info.partition_key_names, info.qualified_name
    with rt.catalog() as catalog:
        wanted = _stored(catalog, info, touched)
        current = catalog.get_partitions(info, wanted)
    token = partition_state(qualified, ((pn.partition_name(keys, v), current.get(tuple(v))) for v in wanted),
                            complete=False).encode()
    parts = [(v, location) for v in wanted if v in current and (location := current[v].location)]
    # Listed before Spark reads them: a file appended after this listing is a conflict under the lock.
    listed = list_files([(pn.partition_name(keys, v), v, location) for v, location in parts])
    log.info("merge.read", table=qualified, touched=len(wanted), existing=len(parts))
    existing = read_locations(spark, info, schema, parts)
    rows = merging.merged(existing, updates, spec, table=qualified)
    scope = [dict(zip(keys, v)) for v in wanted]
    request = SwapRequest(qualified, replace_where=scope, allow_empty=True, if_unchanged_since=token, dry_run=dry_run,
                          kind=SwapKind.MERGE, input_conflicts=files_unchanged(listed, "merge"),
                          stored_values=respelled([c.type for c in info.partition_keys], [v for v, _ in parts]))
    return run_swap(rows, request, rt)
