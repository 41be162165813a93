"""The one commit protocol, used by swap, rollback and recover:

    lock → snapshot (read under the lock) → plan from it → checks (compare-and-swap) → the operation's
    input check → journal intent → recovery manifest (intent) → ``before_flip`` → the input check again
    → flip → journal commit → manifest committed → (unlocked) post-commit hooks

A swap plans from the snapshot (its :class:`~tableswap.core.plan.Planner` is what it staged), so swaps
of one table are serializable: each sees the table as the previous lock holder left it. A rollback's
or recovery's plan was made beforehand; its checks make a stale one fail with ``SwapConflictError``.

and the one failure mapping around it (:func:`fail`):

* the flip never started: nothing in the target changed. The operation's staged work is discarded
  (``discard``) and the journal entry marked ``failed``; the error is raised as it is. If the discard
  itself fails (the storage is down, say), the entry is left as it was for ``tableswap recover``,
  which aborts it and queues the staged data for the janitor.
* the flip started: each partition is entirely old or entirely new, but which is not known here.
  The journal entry stays ``pending`` with the error noted, and :class:`CommitStateUnknownError`
  (naming ``tableswap recover``) is raised instead.
* the flip completed but the journal commit failed (:func:`not_recorded`): every change landed; the
  entry stays ``pending`` and :class:`CommitNotRecordedError` (a ``CommitStateUnknownError``) says
  so and names ``tableswap recover``, which records the commit and cleans up.

The lock is confirmed with the server right before the flip (:meth:`CatalogLock.confirm`): a lock that
expired or was taken away meanwhile fails the operation before anything changed
(:class:`LockLostError`, retryable).

What differs between operations is the :class:`~tableswap.ops.operation.Operation` the protocol is
given: its planner, its ``before_flip`` step, its input check (``input_conflicts``: what it read that
the catalog does not show, such as a merge's or compaction's partition files), its ``discard``, how it
reports a conflict. ``recover`` resumes a commit whose intent an earlier process recorded
(``Operation.resumed``, ``resume=True``): it holds the lock already, records no intent, and on failure
leaves the journal as it was.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import NamedTuple, Sequence, TypeVar

from tableswap import errors
from tableswap.core import column_types
from tableswap.core.checks import plan_checks, require
from tableswap.faults import crash_point
from tableswap.journal.store import FAILED, PENDING, UNFINISHED, Journal
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog, Snapshot
from tableswap.core.catalog_port import CatalogLock
from tableswap.core.deprecated import warn_renamed
from tableswap.ops import manifests
from tableswap.core.catalog import ROOT_PARAM, SWAP_ID_PARAM, TableInfo
from tableswap.core.plan import SwapPlan, under_lock
from tableswap.core.result import Timer
from tableswap.ops import notify
from tableswap.ops.operation import Operation, end_heartbeat
from tableswap.runtime import Runtime

log = get_logger("tableswap.commit")
T = TypeVar("T")


def flip(catalog: Catalog, table: TableInfo, plan: SwapPlan, lock: CatalogLock,
         snapshot: Snapshot | None = None) -> int:
    """Apply a plan under a held lock: the adds, then the repoints (or one table repoint), then the drops,
    each in chunks of what the catalog takes in one call (:meth:`Capabilities.chunk`); returns the
    catalog calls made.

    The lock is checked before every chunk (a catalog without a server lock is asked before each chunk after
    the first: the protocol confirmed it right before calling this). Between
    chunks a reader sees some partitions added or repointed and the others not yet; each partition is
    always entirely old or entirely new. ``snapshot``: the state the checks verified under this same lock
    (saves re-reading it).
    """
    caps = catalog.capabilities
    stamp = {SWAP_ID_PARAM: plan.swap_id}
    # The protocol confirmed the lock right before calling flip: the first chunk goes out on that confirmation.
    fresh = [True]

    def held() -> None:
        lock.ensure_held()
        if not caps.server_lock and not fresh[0]:
            lock.confirm()  # a lease of our own: fence each further chunk on the lease store itself
        fresh[0] = False

    if plan.table_change is not None:
        held()
        catalog.alter_table_location(table, plan.table_change.old_location, plan.table_change.new_location, stamp,
                                    {ROOT_PARAM: table.root or plan.table_change.old_location or ""},
                                    snapshot=snapshot)
        crash_point("after_alter")
        return 1
    calls = 0
    for chunk in _chunks(plan.new_partitions(), caps.chunk("add", catalog.write_batch_size)):
        held()
        calls += catalog.add_partitions(table, chunk, stamp, snapshot=snapshot)
    crash_point("after_add")
    for changes in _chunks(plan.location_changes(), caps.chunk("alter", catalog.write_batch_size)):
        held()
        calls += catalog.alter_partition_locations(table, changes, stamp, snapshot=snapshot)
    crash_point("after_alter")
    calls += catalog.clear_table_statistics(table, snapshot=snapshot)
    for drops in _chunks([a.values for a in plan.drops], caps.chunk("drop", catalog.write_batch_size)):
        held()
        calls += catalog.drop_partitions_keep_data(table, drops)
    return calls


def catalog_argument(function: str, catalog: Catalog | None, client: Catalog | None) -> Catalog:
    """The ``catalog=`` of ``function``, or for one release its former name ``client=`` (with a warning)."""
    if client is not None:
        if catalog is not None:
            raise TypeError(f"{function}() takes catalog= or its former name client=, not both")
        warn_renamed(f"{function}(client=...)", f"{function}(catalog=...)", stacklevel=4)
        return client
    if catalog is None:
        raise TypeError(f"{function}() needs the operation's catalog connection: catalog=")
    return catalog


def _chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


class Committed(NamedTuple):
    plan: SwapPlan  # the plan carried out (for a swap: made under the lock)
    catalog_calls: int  # made from the lock to the journal commit


def commit(rt: Runtime, table: TableInfo, op: Operation, *, catalog: Catalog | None = None,
           lock: CatalogLock | None = None, timer: Timer | None = None, client: Catalog | None = None) -> Committed:
    """Plan ``op`` under ``table``'s lock and commit it; returns the plan carried out and the catalog calls
    made. What the operation plans from, how it reports a conflict, its ``before_flip`` step, what it
    discards on a failure before its flip, whether it resumes an earlier process's intent and what its
    commit queues for the janitor: the :class:`~tableswap.ops.operation.Operation`.

    Args:
        rt: the runtime (journal, table locks).
        op: the operation, begun (:func:`~tableswap.ops.operation.begin`) and with its planner.
        catalog: the catalog connection of this operation (the lock is taken through it); ``client=``, its
            former name, is accepted for one release with a ``DeprecationWarning``.
        lock: a lock already held by the caller (recover), else one is taken for the operation's swap id.

    Raises:
        SwapConflictError: the table is not as planned (nothing was changed).
        CommitStateUnknownError: the flip failed part way (see the module's failure mapping).
    """
    catalog = catalog_argument("commit", catalog, client)
    planner, label, resume = op.planner, op.label, op.resume
    if planner is None or planner.swap_id != op.swap_id:
        raise ValueError(f"operation {op.swap_id} has no planner of its own (its planner: "
                         f"{getattr(planner, 'swap_id', None)})")
    journal = rt.journal
    if resume:  # an earlier process began it: its lineage run starts (again) here
        notify.run_started(rt, op, table)
    calls_before = catalog.calls
    swap_id, qualified = op.swap_id, op.qualified
    bound = log.bind(swap_id=swap_id, table=qualified)
    flipping = flipped = journaled = False
    try:
        with (nullcontext(lock) if lock is not None else rt.table_lock(catalog, table.db, table.name, swap_id)) as held:
            if timer:
                timer.mark("lock")
            crash_point("after_lock")
            snap, plan = plan_under_lock(catalog, table, op)
            if timer:
                timer.mark("plan")
            held.ensure_held()  # still ours (the metastore may have restarted meanwhile)
            if not resume:
                journal.record_intent(plan.swap_id, plan.changes(), plan.sizes(),
                                      column_types.to_json(snap.table.columns))  # the columns its files carry
                bound.info(f"{label}.intent_recorded")
                crash_point("after_intent")
                intent = manifests.write_intent(snap.table, plan, op.kind, label)  # recovery from storage alone
            if op.before_flip is not None:
                op.before_flip(snap, held)
            if not plan.is_noop:
                # Again right before the flip: another writer's append into a partition takes no lock.
                require_inputs(op, snap)
                # A server round trip right before the first write of the flip, however recent the last
                # heartbeat: a lock that expired or was taken away meanwhile stops the flip here, with
                # nothing changed (another writer may hold the lock and have committed meanwhile).
                held.confirm()
            flipping = True
            if not plan.is_noop:
                flip(catalog, snap.table, plan, held, snapshot=snap)
            flipped = True
            if timer:
                timer.mark("flip")
            bound.info(f"{label}.flipped", catalog_calls=catalog.calls - calls_before)
            gone = plan.displaced() if op.displaced is None else list(op.displaced)
            journal.commit(plan.swap_id, gone)
            journaled = True
            end_heartbeat(swap_id)
            bound.info(f"{label}.committed", displaced=len(gone))
            if not plan.is_noop or resume:
                manifests.finish(snap.table.root, plan.swap_id, None if resume else intent)
            crash_point("after_commit")
    except BaseException as exc:
        if resume:
            notify.run_failed(op, exc)
            raise
        if flipped and not journaled and isinstance(exc, Exception):
            raise not_recorded(journal, op, exc) from exc
        replacement = fail(journal, op, exc, flipped=flipping)
        if replacement is not None:
            raise replacement from exc
        raise
    # After the lock: post-commit hooks and lineage never fail the commit.
    notify.committed(rt, op, plan, snap.table, None if timer is None else time.perf_counter() - timer.start)
    return Committed(plan, catalog.calls - calls_before)


def plan_under_lock(catalog: Catalog, table: TableInfo, op: Operation) -> tuple[Snapshot, SwapPlan]:
    """``op``'s read, plan and checks under its table's lock, held by the caller: a replace scope first lists the
    table's partitions (its drops are planned from them), then one snapshot, the plan made from it, the plan's
    compare-and-swap requirements and the operation's input check (:class:`SwapConflictError`, nothing
    changed). The one place :func:`commit` and a group's commit (ops/group_commit.py) plan."""
    if op.planner is None:
        raise ValueError(f"operation {op.swap_id} has no planner")
    planner = under_lock(op.planner, lambda: catalog.list_partition_values(table))
    snap = catalog.snapshot(op.db, op.table, planner.reads())
    plan = planner.plan_against(snap)
    require(plan_checks(plan), snap, table=op.qualified, since=f"since the {op.label} was planned",
            then=op.rerun, swap_id=op.swap_id)
    require_inputs(op, snap)
    return snap, plan


def require_inputs(op: Operation, snapshot: Snapshot) -> None:
    """:class:`SwapConflictError` (nothing changed) when what ``op`` read and the catalog does not show has
    changed since (``Operation.input_conflicts``: a merge's or compaction's partition files)."""
    if op.input_conflicts is None:
        return
    found = list(op.input_conflicts(snapshot))
    if found:
        raise errors.SwapConflictError.of(op.qualified, found, since="since it was read", then=op.rerun,
                                          swap_id=op.swap_id)


def not_recorded(journal: Journal, op: Operation, exc: Exception) -> errors.CommitNotRecordedError:
    """The flip completed but its journal commit failed (the journal unwritable, its connection lost):
    the error to raise. The entry stays ``pending`` (its error noted if the journal takes it) for
    ``tableswap recover``, which finds every change landed, commits it, queues the displaced data once
    and drops the temporary table."""
    swap_id, table, label = op.swap_id, op.qualified, op.label
    error = f"{type(exc).__name__}: {exc}"
    end_heartbeat(swap_id)
    notify.run_failed(op, exc)
    log.error(f"{label}.commit_not_recorded", swap_id=swap_id, table=table, error=str(exc), raised=True,
              error_type=type(exc).__name__)
    try:
        journal.finish(swap_id, error=f"flipped, journal commit failed: {error}")
    except Exception as note_exc:  # noqa: BLE001 - the journal is failing: the error below says what to do
        log.warning(f"{label}.journal_note_failed", swap_id=swap_id, error=str(note_exc))
    return errors.CommitNotRecordedError(
        f"{label} {swap_id} of {table} flipped: every partition it changes now shows the new data, but the "
        f"journal could not record its commit ({error}). Its displaced data is not yet queued for the janitor. "
        f"Run `tableswap recover --table {table}` (once the journal "
        "is writable again): it records the commit and cleans up. Do not roll back or rerun before that",
        table=table, swap_id=swap_id)


def fail(journal: Journal, op: Operation, exc: BaseException, *, flipped: bool) -> errors.TableSwapError | None:
    """Map a failure of ``op`` onto the journal (see the module's docstring), discarding what it staged
    when its flip never started; returns the error to raise instead of ``exc``, if any."""
    swap_id, table, label, discard = op.swap_id, op.qualified, op.label, op.discard
    end_heartbeat(swap_id)  # the operation has ended, whatever the journal says next
    record = journal.get_swap(swap_id)
    state = record.state if record else None
    error = f"{type(exc).__name__}: {exc}"
    log.error(f"{label}.failed", swap_id=swap_id, table=table, error=str(exc), raised=True,
              error_type=type(exc).__name__,
              state=state)
    notify.run_failed(op, exc)
    if state not in UNFINISHED:  # committed, or finished by a failure handled already
        return None
    if not flipped:
        try:
            if discard is not None:
                discard()
        except Exception as cleanup_exc:  # noqa: BLE001 - the first error is the one to report
            log.warning(f"{label}.cleanup_failed", swap_id=swap_id, error=str(cleanup_exc))
            if state == PENDING:
                # Its intent is journaled: `tableswap recover` decides from the metastore's stamps.
                return None
            # Still staging: nothing refers to what it staged, and only this process would finish it
            # (recover leaves a young staging swap alone, as it may be a live writer). Failed; the
            # janitor drops a temporary table left behind and sweeps unreferenced staged data.
        journal.finish(swap_id, state=FAILED, error=error)
        return None
    journal.finish(swap_id, error=error)  # stays pending: `tableswap recover` decides from the stamps
    if isinstance(exc, Exception) and not isinstance(exc, errors.CommitStateUnknownError):
        return errors.CommitStateUnknownError(
            f"{label} {swap_id} of {table} failed during its flip ({type(exc).__name__}: {exc}). Some partitions "
            "may already show the new data, the others the old; none is partial. Run "
            f"`tableswap recover --table {table}` to finish or undo it, or rerun the same {label}",
            table=table, swap_id=swap_id)
    return None
