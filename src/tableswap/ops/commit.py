"""The one commit protocol, used by swap, rollback and recover:

    lock → snapshot (read under the lock) → plan from it → checks (compare-and-swap) → journal intent
    → recovery manifest (intent) → ``before_flip`` → flip → journal commit → manifest committed
    → (unlocked) post-commit hooks

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

``recover`` resumes a commit whose intent an earlier process recorded (``resume=True``): it holds
the lock already, records no intent, and on failure leaves the journal as it was.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, NamedTuple, Sequence, TypeVar

from tableswap import errors
from tableswap.core.checks import plan_checks, require
from tableswap.faults import crash_point
from tableswap.journal.store import FAILED, PENDING, UNFINISHED, Journal
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog, Snapshot
from tableswap.core.catalog_port import CatalogLock
from tableswap.ops import manifests
from tableswap.core.catalog import ROOT_PARAM, SWAP_ID_PARAM, TableInfo
from tableswap.core.plan import Planner, SwapPlan
from tableswap.core.result import Timer
from tableswap.ops.notify import notify_readers
from tableswap.runtime import Runtime

log = get_logger("tableswap.commit")
T = TypeVar("T")


def flip(client: Catalog, table: TableInfo, plan: SwapPlan, lock: CatalogLock,
         snapshot: Snapshot | None = None) -> int:
    """Apply a plan under a held lock: the adds, then the repoints (or one table repoint), then the drops,
    each in chunks of what the catalog takes in one call (:meth:`Capabilities.chunk`); returns the
    catalog calls made.

    The lock is checked before every chunk (a catalog without a server lock is asked each time). Between
    chunks a reader sees some partitions added or repointed and the others not yet; each partition is
    always entirely old or entirely new. ``snapshot``: the state the checks verified under this same lock
    (saves re-reading it).
    """
    caps = client.capabilities
    stamp = {SWAP_ID_PARAM: plan.swap_id}

    def held() -> None:
        lock.ensure_held()
        if not caps.server_lock:
            lock.confirm()  # a lease of our own: fence each chunk on the lease store itself

    if plan.table_change is not None:
        held()
        client.alter_table_location(table, plan.table_change.old_location, plan.table_change.new_location, stamp,
                                    {ROOT_PARAM: table.root or plan.table_change.old_location or ""},
                                    snapshot=snapshot)
        crash_point("after_alter")
        return 1
    calls = 0
    for chunk in _chunks(plan.new_partitions(), caps.chunk("add", client.write_batch_size)):
        held()
        calls += client.add_partitions(table, chunk, stamp, snapshot=snapshot)
    crash_point("after_add")
    for chunk in _chunks(plan.location_changes(), caps.chunk("alter", client.write_batch_size)):
        held()
        calls += client.alter_partition_locations(table, chunk, stamp, snapshot=snapshot)
    crash_point("after_alter")
    calls += client.clear_table_statistics(table, snapshot=snapshot)
    for chunk in _chunks([a.values for a in plan.drops], caps.chunk("drop", client.write_batch_size)):
        held()
        calls += client.drop_partitions_keep_data(table, chunk)
    return calls


def _chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


class Committed(NamedTuple):
    plan: SwapPlan  # the plan carried out (for a swap: made under the lock)
    metastore_calls: int  # made from the lock to the journal commit


def commit(rt: Runtime, table: TableInfo, planner: Planner, *, client: Catalog, what: str = "swap",
           rerun: str = "Rerun the swap", before_flip: Callable[[Snapshot, CatalogLock], None] | None = None,
           discard: Callable[[], None] | None = None, lock: CatalogLock | None = None, resume: bool = False,
           displaced: Sequence[tuple[str, str]] | None = None, timer: Timer | None = None) -> Committed:
    """Plan under ``table``'s lock and commit; returns the plan carried out and the metastore calls made.

    Args:
        rt: the runtime (journal, table locks).
        planner: what to plan from the snapshot read under the lock (a swap's staged batch), or a
            :class:`SwapPlan` made beforehand (rollback, recover), checked against that snapshot.
        client: the metastore connection of this operation (the lock is taken through it).
        what, rerun: how a conflict is reported ("<table> changed since the <what> was planned ...
            <rerun>. Conflicts: ...").
        before_flip: steps of the operation between the journaled intent and the flip, called with the
            snapshot and the held lock (a rollback marks the locations it restores).
        discard: undo what the operation staged, when it fails before its flip.
        lock: a lock already held by the caller (recover), else one is taken for ``plan.swap_id``.
        resume: the intent was recorded by an earlier process (recover): none is recorded, and a
            failure leaves the journal as it is.
        displaced: what the journal commit queues for the janitor (default: what the plan displaces).

    Raises:
        SwapConflictError: the table is not as planned (nothing was changed).
        CommitStateUnknownError: the flip failed part way (see the module's failure mapping).
    """
    journal = rt.journal
    calls_before = client.calls
    swap_id, qualified = planner.swap_id, f"{planner.db}.{planner.table}"
    bound = log.bind(swap_id=swap_id, table=qualified)
    flipping = flipped = journaled = False
    try:
        with (nullcontext(lock) if lock is not None else rt.table_lock(client, table.db, table.name, swap_id)) as held:
            if timer:
                timer.mark("lock")
            crash_point("after_lock")
            snap = client.snapshot(planner.db, planner.table, planner.reads())
            plan = planner.plan_against(snap)
            require(plan_checks(plan), snap, table=qualified, since=f"since the {what} was planned",
                    then=rerun, swap_id=swap_id)
            if timer:
                timer.mark("plan")
            held.ensure_held()  # still ours (the metastore may have restarted meanwhile)
            if not resume:
                journal.record_intent(plan.swap_id, plan.changes(), plan.sizes())
                bound.info(f"{what}.intent_recorded")
                crash_point("after_intent")
                intent = manifests.write_intent(snap.table, plan, what)  # recovery from storage alone
            if before_flip is not None:
                before_flip(snap, held)
            if not plan.is_noop:
                # A server round trip right before the first write of the flip, however recent the last
                # heartbeat: a lock that expired or was taken away meanwhile stops the flip here, with
                # nothing changed (another writer may hold the lock and have committed meanwhile).
                held.confirm()
            flipping = True
            if not plan.is_noop:
                flip(client, snap.table, plan, held, snapshot=snap)
            flipped = True
            if timer:
                timer.mark("flip")
            bound.info(f"{what}.flipped", metastore_calls=client.calls - calls_before)
            gone = plan.displaced() if displaced is None else list(displaced)
            journal.commit(plan.swap_id, gone)
            journaled = True
            bound.info(f"{what}.committed", displaced=len(gone))
            if not plan.is_noop or resume:
                manifests.finish(snap.table.root, plan.swap_id, None if resume else intent)
            crash_point("after_commit")
    except BaseException as exc:
        if resume:
            raise
        if flipped and not journaled and isinstance(exc, Exception):
            raise not_recorded(journal, swap_id, exc, table=qualified, what=what) from exc
        replacement = fail(journal, swap_id, exc, flipped=flipping, discard=discard, table=qualified, what=what)
        if replacement is not None:
            raise replacement from exc
        raise
    notify_readers(rt, plan, what)  # after the lock: post-commit hooks never fail the commit
    return Committed(plan, client.calls - calls_before)


def not_recorded(journal: Journal, swap_id: str, exc: Exception, *, table: str,
                 what: str = "swap") -> errors.CommitNotRecordedError:
    """The flip completed but its journal commit failed (the journal unwritable, its connection lost):
    the error to raise. The entry stays ``pending`` (its error noted if the journal takes it) for
    ``tableswap recover``, which finds every change landed, commits it, queues the displaced data once
    and drops the temporary table."""
    error = f"{type(exc).__name__}: {exc}"
    log.error(f"{what}.commit_not_recorded", swap_id=swap_id, table=table, error=str(exc), raised=True,
              error_type=type(exc).__name__)
    try:
        journal.finish(swap_id, error=f"flipped, journal commit failed: {error}")
    except Exception as note_exc:  # noqa: BLE001 - the journal is failing: the error below says what to do
        log.warning(f"{what}.journal_note_failed", swap_id=swap_id, error=str(note_exc))
    return errors.CommitNotRecordedError(
        f"{what} {swap_id} of {table} flipped: every partition it changes now shows the new data, but the "
        f"journal could not record its commit ({error}). Its displaced data is not yet queued for the janitor "
        f"and its temporary table is still there. Run `tableswap recover --table {table}` (once the journal "
        "is writable again): it records the commit and cleans up. Do not roll back or rerun before that",
        table=table, swap_id=swap_id)


def fail(journal: Journal, swap_id: str, exc: BaseException, *, flipped: bool, table: str, what: str = "swap",
         discard: Callable[[], None] | None = None) -> errors.TableSwapError | None:
    """Map a failure of operation ``swap_id`` onto the journal (see the module's docstring); returns
    the error to raise instead of ``exc``, if any."""
    record = journal.get_swap(swap_id)
    state = record.state if record else None
    error = f"{type(exc).__name__}: {exc}"
    log.error(f"{what}.failed", swap_id=swap_id, table=table, error=str(exc), raised=True,
              error_type=type(exc).__name__,
              state=state)
    if state not in UNFINISHED:  # committed, or finished by a failure handled already
        return None
    if not flipped:
        try:
            if discard is not None:
                discard()
        except Exception as cleanup_exc:  # noqa: BLE001 - the first error is the one to report
            log.warning(f"{what}.cleanup_failed", swap_id=swap_id, error=str(cleanup_exc))
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
            f"{what} {swap_id} of {table} failed during its flip ({type(exc).__name__}: {exc}). Some partitions "
            "may already show the new data, the others the old; none is partial. Run "
            f"`tableswap recover --table {table}` to finish or undo it, or rerun the same {what}",
            table=table, swap_id=swap_id)
    return None
