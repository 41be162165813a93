"""``compact_partitions``: rewrite partitions' small files into target-size files, as one swap.

Which partitions, and into how many files, comes from one storage listing per partition (no Spark:
:func:`plan_compaction`, also the CLI's dry run; the rule: :mod:`tableswap.core.compaction`). The
candidates are read at the locations the metastore gives them, under a state token taken from that same
read, laid out into ``ceil(bytes / target)`` files each (rows spread by their content hash, so a retried
Spark task writes the same files), and swapped in as one ``compact`` swap under that token, each replacing
the partition it was read from as the metastore stores it (``hour=01`` of an INT, whatever Spark calls it):
a swap of one of them committed meanwhile, or a file another writer appended into one of them in place
(the listing is compared again under the lock, before the intent and right before the flip), makes the
compaction refuse with :class:`~tableswap.errors.SwapConflictError` (nothing changed; a rerun compacts
what is there then). Before the flip, the staged files are read back and
their row count and content checksum (the sum of every row's ``xxhash64``) compared with the candidates':
a difference refuses the swap (:class:`~tableswap.errors.CompactionMismatchError`), the staged data is
discarded and nothing changes. The old files stay where they are, for rollback and the janitor.
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Sequence

from tableswap import errors
from tableswap.core import distribution, partitions as pn
from tableswap.core.catalog import PartitionInfo, TableInfo
from tableswap.core.catalog_port import Catalog
from tableswap.core.compaction import (DEFAULT_MIN_FILES, DEFAULT_TARGET_FILE_BYTES, CompactionPlan, PartitionFiles,
                                       check_min_files, parse_size, plan_compaction as plan_from)
from tableswap.core.listing import PartitionListing
from tableswap.core.merge import refuse_same_values, respelled, same_value_groups
from tableswap.core.names import parse_table_name
from tableswap.core.records import SwapKind
from tableswap.core.result import SwapResult
from tableswap.core.state import partition_state
from tableswap.logs import get_logger
from tableswap.ops.locations import partition_key
from tableswap.ops.write.listing import files_unchanged, list_files
from tableswap.ops.write.merge import resolve_target
from tableswap.ops.write.request import SwapRequest
from tableswap.ops.write.swap import run_swap
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi, merging
from tableswap.spark.reading import read_locations

log = get_logger("tableswap.compact")

SALT = "__tableswap_file"


def _refuse_layout(info: TableInfo) -> None:
    if info.bucket_spec is not None:
        raise errors.UnsupportedTableError(
            f"{info.qualified_name} is bucketed ({info.bucket_spec.describe()}): its files are its buckets, so "
            "compaction would not change their number; nothing was changed", table=info.qualified_name)


def _partitions(catalog: Catalog, info: TableInfo, partitions: Sequence[str] | None) -> list[PartitionInfo]:
    if partitions is None:
        return catalog.list_partitions(info.db, info.name)
    if isinstance(partitions, str):
        partitions = [partitions]
    keys = info.partition_key_names
    values = [pn.values_for(keys, pn.parse_name(n)) for n in sorted({partition_key(info, s) for s in partitions})]
    found = catalog.get_partitions(info, values)
    gone = [pn.partition_name(keys, v) for v in values if tuple(v) not in found]
    if gone:
        raise errors.InvalidInputError(f"{info.qualified_name} has no partition {errors.listing(gone)}; nothing was "
                                       "changed", table=info.qualified_name)
    return [found[tuple(v)] for v in values]


def _listed(info: TableInfo, parts: Sequence[PartitionInfo]) -> list[PartitionListing]:
    """Each partition's data files, one recursive listing per partition (a few at a time)."""
    keys = info.partition_key_names
    return list_files([(pn.partition_name(keys, p.values), p.values, p.location) for p in parts if p.location])


def _plan(catalog: Any, info: TableInfo, partitions: Sequence[str] | None, target_file_bytes: int,
          min_files: int) -> tuple[CompactionPlan, dict[tuple[str, ...], PartitionInfo],
                                   dict[tuple[str, ...], PartitionListing]]:
    """The plan, and the partitions and file listings it was made from (by values)."""
    parts = _partitions(catalog, info, partitions)
    listed = _listed(info, parts)
    files = [PartitionFiles(p.values, p.location, tuple(size for _, size in sorted(p.files.items())))
             for p in listed]
    plan = plan_from(info.qualified_name, info.partition_key_names, files, target_file_bytes=target_file_bytes,
                     min_files=min_files)
    return plan, {p.values: p for p in parts}, {p.values: p for p in listed}


def _check_table(info: TableInfo) -> None:
    if not info.is_partitioned:
        raise errors.PartitioningMismatchError(
            f"{info.qualified_name} is not partitioned: compact_partitions compacts partitions",
            table=info.qualified_name)
    _refuse_layout(info)


def plan_compaction(table: str, *, partitions: Sequence[str] | None = None,
                    target_file_bytes: Any = DEFAULT_TARGET_FILE_BYTES, min_files: int = DEFAULT_MIN_FILES,
                    metastore_uri: str | None = None, runtime: Runtime | None = None,
                    **options: Any) -> CompactionPlan:
    """What :func:`compact_partitions` would rewrite, from the metastore and storage listings only (no
    Spark, nothing changed): each partition's files, small files and bytes, the candidates marked."""
    target, min_files = parse_size(target_file_bytes), check_min_files(min_files)
    db, name = parse_table_name(table)
    with use(runtime, metastore_uri=metastore_uri, **options) as rt, rt.catalog() as catalog:
        info = catalog.get_table(db, name)
        _check_table(info)
        return _plan(catalog, info, partitions, target, min_files)[0]


def compact_partitions(spark: Any, table: str, *, partitions: Sequence[str] | None = None,
                       target_file_bytes: Any = DEFAULT_TARGET_FILE_BYTES, min_files: int = DEFAULT_MIN_FILES,
                       metastore_uri: str | None = None, journal_url: str | None = None, dry_run: bool = False,
                       runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Rewrite the partitions of ``table`` that have at least ``min_files`` files smaller than half of
    ``target_file_bytes`` into files of about that size, as one swap (kind ``compact``).

    The same rows (row count and a content checksum are compared before the flip), the same format,
    options and schema; the old files are kept for rollback and the janitor. Readers see each partition
    entirely before or entirely after.

    Args:
        spark: the SparkSession to read and write with (classic or Spark Connect).
        table: ``db.table``, partitioned, EXTERNAL, not bucketed.
        partitions: only these partitions (specs like ``dt=2026-06-03``); default every partition.
        target_file_bytes: the target file size (bytes, or text like ``"128MiB"``); default 128 MiB.
        min_files: compact a partition when it has at least this many small files (default 10).
        dry_run: read, rewrite and plan; change nothing (:func:`plan_compaction` lists the candidates
            without Spark).

    Returns:
        The compaction's :class:`SwapResult` (kind ``compact``; the compacted partitions in ``replaced``).
        With no candidate, nothing is journaled: a result with an empty ``swap_id`` and no change.

    Raises:
        CompactionMismatchError: the rewritten files do not hold the same rows; nothing was changed.
        SwapConflictError: a candidate was swapped since it was read, or another writer appended into it (or
            rewrote a file of it) in place; nothing was changed (rerun).
        UnsupportedTableError, PartitioningMismatchError: a table compaction does not apply to, or two
            candidates that hold one value under different spellings (``hour=01`` and ``hour=1``).
    """
    target, min_files = parse_size(target_file_bytes), check_min_files(min_files)
    with use(runtime, spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        info, schema = resolve_target(spark, table, rt)
        _refuse_layout(info)
        qualified, keys = info.qualified_name, info.partition_key_names
        with rt.catalog() as catalog:
            plan, current, listed = _plan(catalog, info, partitions, target, min_files)
        chosen = plan.candidates
        log.info("compact.plan", table=qualified, listed=len(plan.partitions), candidates=len(chosen),
                 files_before=sum(c.files for c in chosen), files_after=sum(c.target_files for c in chosen))
        if not chosen:
            return SwapResult(swap_id="", table=qualified, kind=SwapKind.COMPACT, dry_run=dry_run)
        # Spark writes each partition under its own spelling of the value (``hour=1`` for one stored as
        # ``hour=01``): each is swapped back in as the candidate it was read from, two candidates of one
        # value are refused.
        types = [c.type for c in info.partition_keys]
        refuse_same_values(qualified, keys, same_value_groups(keys, types, [c.values for c in chosen]), "compaction")
        token = partition_state(qualified, ((c.partition, current[c.values]) for c in chosen),
                                complete=False).encode()
        sources = [(c.values, c.location) for c in chosen]
        expected = merging.checksum(read_locations(spark, info, schema, sources))
        frames = [merging.spread(read_locations(spark, info, schema, [(c.values, c.location)]), c.target_files, SALT)
                  for c in chosen]
        source = reduce(lambda a, b: a.unionByName(b), frames)
        layout = source.repartition(sum(c.target_files for c in chosen),
                                    *(sparkapi.column(source, k) for k in keys), sparkapi.column(source, SALT))
        layout = layout.drop(SALT)

        def verify(batch: Any) -> None:
            strays = sorted({p.values for p in batch.written} ^ {c.values for c in chosen})
            if strays:
                raise errors.CompactionMismatchError(
                    f"the compacted files of {qualified} are not in the partitions they replace (written or "
                    f"missing: {errors.listing(pn.names(keys, strays))}); nothing was changed",
                    table=qualified, swap_id=batch.swap_id)
            staged = [(p.values, p.location) for p in batch.written]
            got = merging.checksum(read_locations(spark, info, schema, staged))
            if got != expected:
                raise errors.CompactionMismatchError(
                    f"the compacted files of {qualified} do not hold the rows they replace ({got[0]} rows, checksum "
                    f"{got[1]}; expected {expected[0]} rows, checksum {expected[1]}); nothing was changed",
                    table=qualified, swap_id=batch.swap_id)
            log.info("compact.verified", table=qualified, rows=got[0], swap_id=batch.swap_id)

        # The layout above is the plan's (its number of files per partition): written as it is, whatever
        # [swap] write_distribution says.
        # The candidates' files, as listed for the plan (before Spark read them), are listed again under the
        # lock: a file another writer appended in place meanwhile refuses the compaction.
        request = SwapRequest(qualified, if_unchanged_since=token, dry_run=dry_run, kind=SwapKind.COMPACT,
                              verify=verify, write_distribution=distribution.NONE,
                              input_conflicts=files_unchanged([listed[c.values] for c in chosen], "compaction"),
                              stored_values=respelled(types, [c.values for c in chosen]))
        return run_swap(layout, request, rt)


def cli_session(rt: Runtime, conf: Sequence[tuple[str, str]] = ()) -> tuple[Any, bool]:
    """The SparkSession ``tableswap compact`` runs with, and whether it made it (then it stops it): the
    active one if the process has one, else a new one, ``local[*]`` unless ``conf`` names a master or the
    process runs under spark-submit (its master then, ``sparkapi.submitted_with_master``), with ``conf`` applied
    and, for a Hive Metastore, Hive support on the runtime's metastore (``spark.hadoop.hive.metastore.uris``)."""
    active = sparkapi.active_session()
    if active is not None:
        return active, False
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("tableswap compact")
    settings = dict(conf)
    if "spark.master" not in settings and not sparkapi.submitted_with_master():
        builder = builder.master("local[*]")
    for key, value in settings.items():
        builder = builder.config(key, value)
    if rt.capabilities.spark_catalog:
        uris = rt.settings.metastore_uri
        builder = builder.config("spark.hadoop.hive.metastore.uris", uris).enableHiveSupport()
    return builder.getOrCreate(), True
