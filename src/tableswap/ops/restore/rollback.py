"""Rollback: restore previous locations. A rollback is itself a swap (kind ``rollback``).

plan (journal + metastore reads, nothing changed) → lock → compare-and-swap → journal intent →
mark the restored locations ``restored`` in the deletion queue → flip (stamped with the rollback's
own swap id) → journal commit, queuing what the rollback displaces. Another rollback reverses it.

Refused, with nothing changed, when a location to restore was deleted by the janitor, the janitor began
deleting it (part of it may be gone: :class:`~tableswap.ops.locations.LocationChecker`) or it no longer
exists, when the table changed outside tableswap since the journal's last record of it
(:class:`SwapConflictError`), while a swap of the table is unfinished, or when the files to restore carry a
column whose type the table changed since in a way readers cannot read them as (:class:`SchemaMismatchError`).

A restored partition gets the table's current columns (as every repoint does): its files carry the columns of
their time, recorded by the swap that wrote them (journal version 13); a column added since reads NULL. Files
no journaled swap wrote, or one recorded before version 13, are restored under the table's columns unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from tableswap import errors
from tableswap.core import column_types, eligibility, lineage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.checks import Check, PartitionAbsent, PartitionAt, TableAt, require
from tableswap.ops import manifests, notify
from tableswap.ops.commit import commit
from tableswap.ops.operation import Operation, begin
from tableswap.ops.locations import LocationChecker, partition_key
from tableswap.journal.store import PENDING, Journal, SwapRecord
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog, Snapshot
from tableswap.core.catalog_port import CatalogLock
from tableswap.core.catalog import Column, TableInfo
from tableswap.core.names import new_swap_id, parse_table_name
from tableswap.core.plan import PlannedSwap, SwapPlan, TableChange, plan_restore
from tableswap.core.result import SwapResult, Timer, result_from_plan
from tableswap.core.records import SwapKind
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.rollback")

KIND = SwapKind.ROLLBACK


@dataclass(frozen=True)
class RollbackPlan(PlannedSwap):
    """A planned rollback: the swap plan plus what it undoes. Execute it with :func:`execute_rollback`;
    the flip re-checks every location the plan expects (compare-and-swap)."""

    plan: SwapPlan
    rollback_of: str
    undone: tuple[tuple[str, str], ...]
    restores: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    #: Partition (``''``: the table) → the columns the files it restores carry, where the journal knows them.
    columns: Mapping[str, tuple[Column, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def describe(self) -> str:
        return (f"rollback of {self.rollback_of} on {self.table} (as swap {self.swap_id}):\n"
                + "\n".join(self.plan.describe().splitlines()[1:]))

    def to_result(self, *, dry_run: bool) -> SwapResult:
        return result_from_plan(self.plan, KIND, staging_location=None, timings={}, calls=0, dry_run=dry_run)


def _refuse_if_unfinished(journal: Journal, table: TableInfo) -> None:
    unfinished = [r for r in journal.list_swaps(table.db, table.name, states=[PENDING])]
    if unfinished:
        ids = ", ".join(r.swap_id for r in unfinished)
        raise errors.SwapConflictError(
            f"swap {ids} of {table.qualified_name} is unfinished (journal state pending): wait for it to "
            "finish, or if its process died run `tableswap recover` first; nothing was changed",
            table=table.qualified_name
        )


def _check_restorable(table: TableInfo, targets: Mapping[str, str | None], checker: LocationChecker, *,
                      verb: str = "roll back",
                      then: str = "Roll back only other partitions (--partition) or restore the data from a backup",
                      ) -> None:
    problems = []
    for name, location in sorted(targets.items()):
        if location is None:
            continue
        status = checker(location)
        what = f"partition {name}" if name else "the table"
        if not status.restorable and status.problem:
            problems.append(f"{what}: {location} {status.problem}")
    if problems:
        raise errors.UnsafeOperationError(
            f"cannot {verb} {table.qualified_name}: the data to restore is gone or incomplete, so the "
            f"{verb.split()[0]} would point readers at missing files. Nothing was changed. "
            f"{errors.listing(problems)}. {then}."
        )


#: The kinds of swap that write the files they point the table at (a restore points at files others wrote).
WRITERS = (SwapKind.PARTITIONS, SwapKind.TABLE, SwapKind.MERGE, SwapKind.COMPACT)


def written_columns(records: Sequence[SwapRecord], targets: Mapping[str, str | None]) -> dict[str, tuple[Column, ...]]:
    """Partition (``''``: the table) → the columns the files at its target location carry: those the swap that
    wrote them recorded; a partition whose files no journaled swap wrote (or one recorded before journal version
    13) is left out."""
    wrote: dict[str, tuple[Column, ...]] = {}
    for record in records:
        columns = column_types.from_json(record.table_columns) if SwapKind(record.kind) in WRITERS else None
        if columns is None:
            continue
        for item in record.items:
            if item.new_location and item.action != "drop":
                wrote.setdefault(loc.key(item.new_location), columns)
    out = {}
    for name, location in targets.items():
        known = wrote.get(loc.key(location)) if location else None
        if known is not None:
            out[name] = known
    return out


def check_columns(table: TableInfo, columns: Mapping[str, tuple[Column, ...]], *, verb: str = "roll back") -> None:
    """Refuse (:class:`SchemaMismatchError`, nothing changed) restoring files that carry a column the table's
    columns now do not read (a type changed since in a way readers cannot convert:
    :mod:`tableswap.core.column_types`)."""
    problems = []
    for name, written in sorted(columns.items()):
        bad = column_types.unreadable(written, table.columns)
        if bad:
            problems.append(f"{f'partition {name}' if name else 'the table'}: {', '.join(bad)}")
    if problems:
        raise errors.SchemaMismatchError(
            f"cannot {verb} {table.qualified_name}: the files to restore carry columns of a type the table no longer "
            f"reads them as (Spark's Parquet reader fails on them, Trino refuses the partition). Nothing was changed. "
            f"{errors.listing(problems)}. Change the column's type back, or restore the data by rewriting it with "
            "the table's current columns", table=table.qualified_name)


def journaled_state(table: TableInfo, expected: Mapping[str, str | None]) -> list[Check]:
    """Checks that the table is where the journal's records leave it: each partition at its last
    journaled location (or absent), an unpartitioned table at its last journaled location."""
    out: list[Check] = []
    for name, want in sorted(expected.items()):
        if name == lineage.TABLE:
            out.append(TableAt(want))
            continue
        values = pn.values_for(table.partition_key_names, pn.parse_name(name))
        out.append(PartitionAbsent(name, values) if want is None else PartitionAt(name, values, want))
    return out


def build_plan(snapshot: Snapshot, records: Sequence[SwapRecord], checker: LocationChecker,
               *, partitions: Sequence[str] | None, to: str | None, swap_id: str) -> RollbackPlan:
    """Decide the rollback from the journal records and the metastore's current state (``snapshot``:
    the table and the partitions the rollback concerns)."""
    table = snapshot.table
    spec = lineage.restore_spec(records, partitions=partitions, to=to)
    require(journaled_state(table, spec.expected), snapshot, table=table.qualified_name,
            since="outside tableswap (or by a swap not in this journal) since its last recorded swap",
            then=f"Check `tableswap show {table.qualified_name}`")
    _check_restorable(table, spec.targets, checker)
    columns = written_columns(records, spec.targets)
    check_columns(table, columns)
    if table.is_partitioned:
        keys = table.partition_key_names
        targets = {pn.values_for(keys, pn.parse_name(name)): location for name, location in spec.targets.items()}
        plan = plan_restore(swap_id, table, targets, snapshot.partitions)
    else:
        want = spec.targets.get(lineage.TABLE)
        if want is None:
            raise errors.InvalidInputError(f"{table.qualified_name}: the journal has no previous table location")
        change = None if loc.same(table.location, want) else TableChange(table.location, want)
        plan = SwapPlan(swap_id, table.db, table.name, (), (), change)
    return RollbackPlan(plan, spec.rollback_of, spec.undone, MappingProxyType(dict(spec.targets)),
                        MappingProxyType(columns))


def plan_rollback(table: str, partitions: Sequence[str] | None = None, to: str | None = None, *,
                  metastore_uri: str | None = None, journal_url: str | None = None, runtime: Runtime | None = None,
                  **options: Any) -> RollbackPlan:
    """Plan a rollback of ``table`` (``db.table``) without changing anything.

    ``partitions``: specs like ``dt=2026-06-03`` or ``a=1/b=x``. See :func:`lineage.restore_spec`
    for what is restored.
    """
    db, name = parse_table_name(table)
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        return _plan(catalog, journal, db, name, partitions, to)


def _plan(catalog: Catalog, journal: Journal, db: str, name: str, partitions: Sequence[str] | None,
          to: str | None, swap_id: str | None = None) -> RollbackPlan:
    info = catalog.get_table(db, name)
    if partitions and not info.is_partitioned:
        raise errors.InvalidInputError(f"{info.qualified_name} is not partitioned: --partition does not apply")
    eligibility.check_external(info, done="rolled back")
    _refuse_if_unfinished(journal, info)
    records = journal.list_swaps(db, name)
    names = [partition_key(info, p) for p in partitions] if partitions else None
    checker = LocationChecker(journal.deletions_of(db, name))
    values: list[tuple[str, ...]] = []
    if info.is_partitioned:
        spec = lineage.restore_spec(records, partitions=names, to=to)
        keys = info.partition_key_names
        values = [pn.values_for(keys, pn.parse_name(n)) for n in sorted(set(spec.targets) | set(spec.expected))]
    snapshot = catalog.snapshot(db, name, values)
    return build_plan(snapshot, records, checker, partitions=names, to=to, swap_id=swap_id or new_swap_id())


def execute_rollback(planned: RollbackPlan, *, metastore_uri: str | None = None, journal_url: str | None = None,
                     runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Carry out a planned rollback: locked, compare-and-swap checked against the plan, journaled."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        return restoring_swap(rt, planned.plan, KIND, rollback_of=planned.rollback_of or None,
                              undone=planned.undone, rerun="Plan the rollback again", columns=planned.columns)


def restoring_swap(rt: Runtime, plan: SwapPlan, kind: SwapKind, *, rerun: str, rollback_of: str | None = None,
                   undone: Sequence[tuple[str, str]] = (), verb: str = "roll back",
                   then: str | None = None, columns: Mapping[str, tuple[Column, ...]] | None = None) -> SwapResult:
    """Carry out a swap that points partitions at existing data again (a rollback, a repair) through the
    commit protocol, as a journaled swap of ``kind``; see :func:`restore_guard` for its extra step."""
    timer = Timer()
    bound = log.bind(swap_id=plan.swap_id, table=f"{plan.db}.{plan.table}")
    if plan.is_noop:
        return result_from_plan(plan, kind, staging_location=None, timings=timer.done(), calls=0)
    with rt.session() as (catalog, journal):
        table = catalog.get_table(plan.db, plan.table)
        _refuse_if_unfinished(journal, table)
        guard = restore_guard(journal, plan, undone=undone, verb=verb, then=then, columns=columns)
        op = Operation(kind, plan.swap_id, plan.db, plan.table, table.root or "", plan, label=kind, rerun=rerun,
                       rollback_of=rollback_of, before_flip=guard,
                       discard=lambda: undo_restore(journal, table, plan.swap_id))
        begin(journal, op, heartbeat_s=rt.settings.heartbeat_s)
        notify.run_started(rt, op, table)  # lineage START (a no-op unless OpenLineage is configured)
        bound.info(f"{kind}.start", rollback_of=rollback_of)
        commit(rt, table, op, catalog=catalog, timer=timer)
        journal.finish(plan.swap_id)
        result = result_from_plan(plan, kind, staging_location=None, timings=timer.done(), calls=catalog.calls)
        bound.info(f"{kind}.done", restored=len(restored_locations(plan)), displaced=len(result.displaced))
        return result


def undo_restore(journal: Journal, table: TableInfo, swap_id: str) -> None:
    """The ``discard`` of a restoring swap that failed before its flip: its locations go back to
    pending deletion and its intent manifest is removed."""
    journal.unmark_restored(swap_id)
    manifests.discard(table.root, swap_id)


def restored_locations(plan: SwapPlan) -> dict[str, str]:
    """Partition (``''``: the table) → the existing location a restoring plan points it at again."""
    restored = {a.name: a.new_location for a in plan.adds + plan.replaces if a.new_location}
    if plan.table_change is not None:
        restored[lineage.TABLE] = plan.table_change.new_location
    return restored


def restore_guard(journal: Journal, plan: SwapPlan, *, undone: Sequence[tuple[str, str]] = (),
                  verb: str = "roll back", then: str | None = None,
                  columns: Mapping[str, tuple[Column, ...]] | None = None) -> Callable[[Snapshot, CatalogLock], None]:
    """The ``before_flip`` step of a swap that points partitions at existing data again (a rollback,
    a repair): check the table's columns (read under the lock) still read the restored files (``columns``:
    those they carry, where known), record what it undoes, take those locations out of the janitor's queue,
    make sure no janitor is deleting one right now, and check again (now that the janitor skips them) that
    they exist."""
    restored = restored_locations(plan)
    table_name = f"{plan.db}.{plan.table}"

    def before_flip(snapshot: Snapshot, lock: CatalogLock) -> None:
        if columns:
            check_columns(snapshot.table, columns, verb=verb)
        if undone:
            journal.record_undone(plan.swap_id, undone)
        journal.mark_restored(plan.swap_id, plan.db, plan.table, list(restored.values()))
        # A janitor that claimed one of them before it was marked may be deleting it now.
        claimed = journal.janitor_claims_on(restored.values())
        if claimed:
            raise errors.SwapConflictError(
                f"the janitor is deleting {', '.join(claimed[:3])} right now; nothing was changed. "
                f"Retry in a minute: if the deletion went through, the {verb.split()[0]} is refused as unsafe.",
                table=table_name, swap_id=plan.swap_id)
        checker = LocationChecker(journal.deletions_of(plan.db, plan.table))
        if then is None:
            _check_restorable(snapshot.table, restored, checker, verb=verb)
        else:
            _check_restorable(snapshot.table, restored, checker, verb=verb, then=then)

    return before_flip


def rollback(table: str, partitions: Sequence[str] | None = None, to: str | None = None, *,
             dry_run: bool = False, metastore_uri: str | None = None, journal_url: str | None = None,
             runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Restore previous locations of ``table``; returns the rollback's :class:`SwapResult`.

    Default: every partition the last committed swap changed. ``partitions``: only these, each to its
    location before the last swap that changed it. ``to``: the state just before swap ``to``.
    """
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        planned = plan_rollback(table, partitions, to, runtime=rt)
        if dry_run:
            return planned.to_result(dry_run=True)
        return execute_rollback(planned, runtime=rt)


__all__ = ["RollbackPlan", "plan_rollback", "execute_rollback", "rollback"]
