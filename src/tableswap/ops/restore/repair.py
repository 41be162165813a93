"""Repair: rebuild a table's partitions (or its location) after its metastore entry was lost.

    from tableswap.ops.restore.repair import repair
    planned = repair("db.events", dry_run=True)       # a dry run: a SwapResult of kind "repair" (dry_run=True)
    result = repair("db.events", dry_run=False)       # applied: the same, carried out
    repair("db.events", from_storage=True, dry_run=False)   # the journal is gone too
    plan_table_repair("db.events").describe()          # the plan alone, also one the repair would refuse

The history comes from the journal's committed swaps and rollbacks, or (``from_storage``) from the
recovery manifests under the table's root (:mod:`tableswap.core.manifest`); the plan from
:func:`tableswap.core.repair_plan.plan_repair`. Applying it is a swap of kind ``repair`` through the
one commit protocol: locked, compare-and-swap checked, journaled (so ``tableswap rollback`` reverses
it), stamped, with its own manifest. Refused, with nothing changed, where data to restore is gone,
while a swap of the table is unfinished, and for anything but a plain EXTERNAL table.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any, Sequence

from tableswap import errors, storage
from tableswap.core import eligibility, lineage
from tableswap.core import partitions as pn
from tableswap.core.manifest import landed_record
from tableswap.core.names import new_swap_id, parse_table_name
from tableswap.core.repair_plan import JOURNAL, STORAGE, RepairPlan, plan_repair
from tableswap.core.result import SwapResult, result_from_plan
from tableswap.journal.store import Journal, SwapRecord
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog import TableInfo
from tableswap.core.records import SwapKind
from tableswap.ops import manifests
from tableswap.ops.dryrun import REQUIRED, RequiredDryRun, required
from tableswap.ops.locations import LocationChecker, partition_key
from tableswap.ops.restore.rollback import (_refuse_if_unfinished, check_columns, restored_locations, restoring_swap,
                                           written_columns)
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.repair")

KIND = SwapKind.REPAIR


def _from_storage(catalog: Catalog, info: TableInfo) -> tuple[list[SwapRecord], list[str]]:
    """The manifests under the table's root as committed records, and notes on what was left out."""
    if not info.root:
        raise errors.InvalidInputError(f"{info.qualified_name} has no location: nothing to read manifests from")
    found = manifests.read_all(info.root)
    notes = [f"unreadable manifest {where}: {why}" for where, why in found.unreadable]
    mine = [m for m in found.manifests if m.qualified_name == info.qualified_name]
    others = sorted({m.qualified_name for m in found.manifests} - {info.qualified_name})
    if others:
        notes.append(f"ignored the manifests of other tables under the same root: {', '.join(others)}")
    intents = [m for m in mine if m.state != "committed"]
    stamps: dict[str, str | None] = {}
    if intents:  # an unfinished swap counts only where the metastore shows its stamp now
        if info.is_partitioned:
            keys = info.partition_key_names
            names = sorted({c.partition for m in intents for c in m.changes})
            now = catalog.get_partitions(info, [pn.values_for(keys, pn.parse_name(n)) for n in names])
            stamps = {p.name(keys): p.swap_id for p in now.values()}
        else:
            stamps = {lineage.TABLE: info.swap_id}
    records = []
    for m in mine:
        record = landed_record(m, stamps)
        if m.state != "committed":
            landed = len(record.items) if record else 0
            notes.append(f"swap {m.swap_id} never finished (manifest state {m.state}): {landed} of its "
                         f"{len(m.changes)} change(s) replayed, those its stamp shows in the metastore")
        if record is not None:
            records.append(record)
    return records, notes


def _plan(catalog: Catalog, journal: Journal, db: str, name: str, *, from_storage: bool,
          partitions: Sequence[str] | None, skip_missing: bool) -> RepairPlan:
    info = catalog.get_table(db, name)
    eligibility.check_external(info, done="repaired")
    if partitions and not info.is_partitioned:
        raise errors.InvalidInputError(f"{info.qualified_name} is not partitioned: --partition does not apply")
    _refuse_if_unfinished(journal, info)
    if from_storage:
        records, notes = _from_storage(catalog, info)
    else:
        records, notes = journal.list_swaps(db, name), []
    names = [partition_key(info, p) for p in partitions] if partitions else None
    current = {}
    count = 0
    if info.is_partitioned:
        keys = info.partition_key_names
        wanted = sorted({c.partition for r in records for c in lineage.changes(r) if c.partition})
        current = catalog.get_partitions(info, [pn.values_for(keys, pn.parse_name(n)) for n in wanted])
        count = len(catalog.list_partitions(db, name))
    checker = LocationChecker(journal.deletions_of(db, name))
    planned = plan_repair(new_swap_id(), info, records, current, checker, source=STORAGE if from_storage else JOURNAL,
                          partitions=names, skip_missing=skip_missing, partition_count=count, notes=notes,
                          spellings=storage.hdfs_names())
    # The restored partitions get the table's columns (as every repoint does): the files must still read under
    # them (a re-deployed table whose column type changed); known where a journaled swap wrote them.
    columns = written_columns(records, restored_locations(planned.plan))
    check_columns(info, columns, verb="repair")
    return replace(planned, columns=MappingProxyType(columns))


def plan_table_repair(table: str, *, from_storage: bool = False, partitions: Sequence[str] | None = None,
                      skip_missing: bool = False, metastore_uri: str | None = None, journal_url: str | None = None,
                      runtime: Runtime | None = None, **options: Any) -> RepairPlan:
    """Plan the repair of ``table`` (``db.table``); nothing is changed.

    Args:
        from_storage: replay the recovery manifests under the table's root instead of the journal.
        partitions: only these partitions (specs like ``dt=2026-06-03``).
        skip_missing: leave partitions whose data is gone as they are, instead of refusing.

    Raises:
        NotFoundError: the history has no committed swap of the table.
        UnsupportedTableError: not a plain EXTERNAL table.
        SwapConflictError: a swap of the table is unfinished (run ``tableswap recover``).
    """
    db, name = parse_table_name(table)
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        return _plan(catalog, journal, db, name, from_storage=from_storage, partitions=partitions,
                     skip_missing=skip_missing)


def planned_result(planned: RepairPlan, *, dry_run: bool = True) -> SwapResult:
    """What a repair returns without a flip (a dry run, or a plan with nothing to do): the plan's
    :class:`SwapResult`, carrying ``planned`` (:attr:`SwapResult.repair`)."""
    result = result_from_plan(planned.plan, KIND, staging_location=None, timings={}, calls=0, dry_run=dry_run)
    return replace(result, repair=planned)


def execute_repair(planned: RepairPlan, *, metastore_uri: str | None = None, journal_url: str | None = None,
                   runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Apply a planned repair: locked, compare-and-swap checked against the plan, journaled, stamped. Returns
    a :class:`SwapResult` of kind ``repair`` carrying ``planned`` (:attr:`SwapResult.repair`).

    Raises:
        UnsafeOperationError: data to restore is gone (:meth:`RepairPlan.refusal`); nothing was changed.
        SwapConflictError: the table changed since the plan (plan again); nothing was changed.
    """
    refusal = planned.refusal()
    if refusal is not None:
        raise refusal
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        result = restoring_swap(rt, planned.plan, KIND, rerun="Plan the repair again", verb="repair",
                                then="Repair only the other partitions (--skip-missing)", columns=planned.columns)
    return replace(result, repair=planned)


def repair(table: str, *, from_storage: bool = False, partitions: Sequence[str] | None = None,
           skip_missing: bool = False, dry_run: bool | RequiredDryRun = REQUIRED, metastore_uri: str | None = None,
           journal_url: str | None = None, runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Rebuild ``table``'s partitions (or location) from tableswap's history; returns a :class:`SwapResult` of
    kind ``repair`` (reversible with ``tableswap rollback``) whose :attr:`~SwapResult.repair` is the plan: each
    partition's action, location and whether its data exists. See :func:`plan_table_repair` for the options.

    Args:
        dry_run: required in this release (its default was ``True``; it becomes ``False``, as every other
            call's): ``True`` plans exactly as the real run does and changes nothing (the result is marked
            ``dry_run``), ``False`` applies the plan.

    Raises:
        ConfigurationError: ``dry_run`` was not given; nothing was changed.
        UnsafeOperationError: data to restore is gone (also in a dry run, as the real run would refuse;
            :func:`plan_table_repair` returns such a plan); nothing was changed.
        SwapConflictError: the table changed since the plan, or a swap of it is unfinished; nothing was changed.
    """
    dry = required(dry_run, "repair")
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        planned = plan_table_repair(table, from_storage=from_storage, partitions=partitions,
                                    skip_missing=skip_missing, runtime=rt)
        if dry:
            refusal = planned.refusal()
            if refusal is not None:
                raise refusal
            return planned_result(planned)
        return execute_repair(planned, runtime=rt)


__all__ = ["RepairPlan", "plan_table_repair", "planned_result", "execute_repair", "repair"]
