"""The commit protocol (ops/commit.py) for several tables as one unit: a swap group's publish, a group rollback.

    every table's lock, in one global order (sorted ``db.table``: two groups sharing tables cannot deadlock)
    → per table, under its lock: read, plan, checks, the operation's input check
    → per table: journal intent, recovery manifest, ``before_flip``           (members ``pending``, group ``open``)
    → every lock confirmed with the catalog (a lost lock: nothing changed on any table)
    → the ONE group intent                                                    (group ``pending``: the commit point)
    → per table: flip (its lock confirmed again right before)                 (a reader may see some tables new)
    → the ONE group commit: every member and the group committed in one journal transaction
    → (unlocked) per table: manifest committed, post-commit hooks, lineage

The steps per table are those of :func:`tableswap.ops.commit.commit` (its :func:`flip`, checks and failure
mapping), run for every member before the next step starts. The failure mapping:

* before the group intent: no table changed. Every member goes through :func:`tableswap.ops.commit.fail` with
  ``flipped=False`` (its ``discard``; ``failed``), the group ``failed``, and the error is raised as it is.
* from the group intent on: the flips may have started on some tables. Every member stays ``pending`` with its
  intent, the group ``pending``, and :class:`CommitStateUnknownError` names ``tableswap recover``, which finishes
  EVERY member forward (the group's intent is its commit point: a member none of whose flip landed is flipped
  too, under its lock, checked against the state its intent recorded), then commits the group.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Sequence

from tableswap import errors
from tableswap.core import column_types
from tableswap.core.catalog import TableInfo
from tableswap.core.catalog_port import Catalog, CatalogLock, Snapshot
from tableswap.core.group import FAILED, OPEN
from tableswap.core.plan import SwapPlan
from tableswap.faults import crash_point
from tableswap.journal.groups import GroupLog
from tableswap.logs import get_logger
from tableswap.ops import manifests, notify
from tableswap.ops.commit import catalog_argument, fail, flip, plan_under_lock, require_inputs
from tableswap.ops.operation import Operation
from tableswap.runtime import Runtime

log = get_logger("tableswap.group")


@dataclass(frozen=True)
class Member:
    """One table of a group: the table as read before the lock and its operation (begun, with its planner)."""

    table: TableInfo
    op: Operation


@dataclass(frozen=True)
class MemberCommitted:
    op: Operation
    plan: SwapPlan
    table: TableInfo


@dataclass(frozen=True)
class GroupCommitted:
    members: tuple[MemberCommitted, ...]  # in lock (and flip) order
    flip_seconds: float  # from the first flip call to the end of the last one
    catalog_calls: int


def lock_order(members: Sequence[Member]) -> list[Member]:
    """The one global lock order: by qualified table name (then swap id), whatever the order of the calls."""
    return sorted(members, key=lambda m: (m.op.db.lower(), m.op.table.lower(), m.op.swap_id))


def commit_group(rt: Runtime, group_id: str, members: Sequence[Member], *, catalog: Catalog | None = None,
                 client: Catalog | None = None) -> GroupCommitted:
    """Commit every member's operation as one unit (the module's docstring). The group ``group_id`` is journaled
    (:class:`~tableswap.journal.groups.GroupLog`, state ``open``) with these members.

    Raises:
        SwapConflictError: a table is not as planned (nothing was changed on any table).
        CommitStateUnknownError: a failure once the group intent was recorded: ``tableswap recover`` finishes it.
    """
    catalog = catalog_argument("commit_group", catalog, client)  # client=: its former name, for one release
    journal, groups = rt.journal, GroupLog(rt.journal)
    ordered = lock_order(members)
    if len({(m.op.db.lower(), m.op.table.lower()) for m in ordered}) != len(ordered):
        raise errors.InvalidInputError(f"group {group_id} changes a table twice; nothing was changed")
    bound = log.bind(group_id=group_id, tables=[m.op.qualified for m in ordered])
    calls_before = catalog.calls
    planned: list[tuple[Member, Snapshot, SwapPlan, CatalogLock]] = []
    intended = False
    flip_start = flip_end = 0.0
    try:
        with ExitStack() as stack:
            locks = []
            for m in ordered:  # one global order: no deadlock between groups sharing tables
                locks.append(stack.enter_context(rt.table_lock(catalog, m.table.db, m.table.name, m.op.swap_id)))
                crash_point("group_after_lock")
            for m, held in zip(ordered, locks):
                planned.append((m, *plan_under_lock(catalog, m.table, m.op), held))
            for _m, snap, plan, held in planned:
                held.ensure_held()
                journal.record_intent(plan.swap_id, plan.changes(), plan.sizes(),
                                      column_types.to_json(snap.table.columns))
                crash_point("after_intent")  # this member's intent, not yet the group's
            intents = [manifests.write_intent(snap.table, plan, m.op.kind, m.op.label) for m, snap, plan, _ in planned]
            for m, snap, plan, held in planned:
                if m.op.before_flip is not None:
                    m.op.before_flip(snap, held)
                if not plan.is_noop:
                    require_inputs(m.op, snap)
            for _, _, plan, held in planned:
                if not plan.is_noop:
                    # A server round trip for every lock before the commit point: a lock that expired or was taken
                    # away stops the group here, with nothing changed on any table.
                    held.confirm()
            groups.record_intent(group_id)  # the commit point: from here recover finishes every member
            intended = True
            bound.info("group.intent_recorded")
            crash_point("group_after_intent")
            flip_start = time.perf_counter()
            for i, (_m, snap, plan, held) in enumerate(planned):
                if i:
                    crash_point("group_between_flips")
                if not plan.is_noop:
                    if i:
                        held.confirm()  # again right before its flip, as a single swap's commit does
                    flip(catalog, snap.table, plan, held, snapshot=snap)
            flip_end = time.perf_counter()
            bound.info("group.flipped", flip_seconds=round(flip_end - flip_start, 6))
            groups.commit(group_id, {plan.swap_id: (plan.displaced() if m.op.displaced is None else m.op.displaced)
                                     for m, _, plan, _ in planned})
            bound.info("group.committed")
            for (_m, snap, plan, _), intent in zip(planned, intents):
                if not plan.is_noop:
                    manifests.finish(snap.table.root, plan.swap_id, intent)
            crash_point("group_after_commit")
    except BaseException as exc:
        replacement = _failed(rt, groups, group_id, ordered, exc, intended=intended)
        if replacement is exc:
            raise
        raise replacement from exc
    for m, snap, plan, _ in planned:
        notify.committed(rt, m.op, plan, snap.table, None)
    return GroupCommitted(tuple(MemberCommitted(m.op, plan, snap.table) for m, snap, plan, _ in planned),
                          flip_end - flip_start, catalog.calls - calls_before)


def _failed(rt: Runtime, groups: GroupLog, group_id: str, ordered: Sequence[Member], exc: BaseException, *,
            intended: bool) -> BaseException:
    """The module's failure mapping: the error to raise."""
    error = f"{type(exc).__name__}: {exc}"
    log.error("group.failed", group_id=group_id, error=error, intent_recorded=intended)
    if not intended:
        for m in ordered:
            fail(rt.journal, m.op, exc, flipped=False)
        groups.finish(group_id, FAILED, error, only_from=(OPEN,))  # not a group another publisher committed
        return exc
    for m in ordered:
        notify.run_failed(m.op, exc)
        record = rt.journal.get_swap(m.op.swap_id)
        if record is not None and record.state != "committed":
            rt.journal.finish(m.op.swap_id, error=f"group {group_id}: {error}")  # stays pending for recover
    groups.finish(group_id, error=error)
    if isinstance(exc, errors.CommitStateUnknownError) or not isinstance(exc, Exception):
        return exc
    tables = ", ".join(m.op.qualified for m in ordered)
    return errors.CommitStateUnknownError(
        f"group {group_id} failed during its flips ({error}): its intent is recorded, so some of its tables "
        f"({tables}) may show the new data and others the old; none is partial. Run `tableswap recover`: it "
        "finishes every table of the group", swap_id=ordered[0].op.swap_id if ordered else None)


__all__ = ["Member", "MemberCommitted", "GroupCommitted", "commit_group", "lock_order"]
