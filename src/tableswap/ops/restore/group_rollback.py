"""``tableswap rollback --group ID_OR_NAME``: every table of a committed swap group back to before the group, as
one journaled group of its own (kind ``rollback``), through the same group protocol (ops/group_commit.py: every
lock in one global order, every table checked under its lock, one group intent, the flips, one group commit).

Per member table, the plan is a rollback ``--to`` that member's swap (ops/restore/rollback.py): every partition
the member or a later swap of the table changed goes back to its location just before the member (partitions
they added are dropped), refused with nothing changed on any table where a single table's rollback would be
refused (a location deleted by the janitor, the table changed outside tableswap, an unfinished swap).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping

from tableswap import errors
from tableswap.core.group import COMMITTED, ROLLBACK, GroupResult
from tableswap.core.names import new_swap_id
from tableswap.core.result import result_from_plan
from tableswap.journal.groups import GroupLog
from tableswap.logs import get_logger
from tableswap.ops import notify
from tableswap.ops.group_commit import Member, commit_group, lock_order
from tableswap.ops.operation import Operation, begin
from tableswap.ops.restore.rollback import KIND, RollbackPlan, _plan, _refuse_if_unfinished, restore_guard, undo_restore
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.rollback")

RERUN = "Plan the group rollback again (`tableswap rollback --group ... --dry-run`)"


def plan_group_rollback(id_or_name: str, *, runtime: Runtime | None = None, metastore_uri: str | None = None,
                        journal_url: str | None = None, **options: Any) -> tuple[str, dict[str, RollbackPlan]]:
    """The committed group ``id_or_name`` (an id, or a name: the latest group of that name) and, per member table,
    its rollback plan to before the group; nothing changed."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        group = GroupLog(journal).get(id_or_name)
        if group.state != COMMITTED:
            raise errors.InvalidInputError(
                f"swap group {group.group_id} is {group.state}, not committed: only a committed group is rolled back "
                f"as a group{' (run `tableswap recover` first)' if group.state == 'pending' else ''}. Nothing was "
                "changed")
        plans = {}
        for m in sorted(group.members, key=lambda m: m.table):
            db, _, name = m.table.partition(".")
            plans[m.table] = _plan(catalog, journal, db, name, None, m.swap_id)
        return group.group_id, plans


def rollback_group(id_or_name: str, *, dry_run: bool = False, runtime: Runtime | None = None,
                   metastore_uri: str | None = None, journal_url: str | None = None, **options: Any) -> GroupResult:
    """Restore every table of the committed group ``id_or_name`` to before it, as one unit (the module's
    docstring); ``dry_run``: the plans, nothing changed. Returns the rollback group's :class:`GroupResult`.

    Raises:
        NotFoundError: no group of that id or name.
        InvalidInputError: the group is not committed.
        SwapConflictError, UnsafeOperationError: as a single table's rollback, for any table: nothing changed.
        CommitStateUnknownError: a failure during the flips: ``tableswap recover`` finishes every table.
    """
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        undone_id, plans = plan_group_rollback(id_or_name, runtime=rt)
        if dry_run:
            return GroupResult(undone_id, None, {t: p.to_result(dry_run=True) for t, p in plans.items()},
                               dry_run=True)
        return execute_group_rollback(undone_id, plans, runtime=rt)


def execute_group_rollback(undone_id: str, plans: Mapping[str, RollbackPlan], *, runtime: Runtime | None = None,
                           metastore_uri: str | None = None, journal_url: str | None = None,
                           **options: Any) -> GroupResult:
    """Carry out the plans :func:`plan_group_rollback` made (the ones a user was shown), as one group: every
    table's flip compares its partitions with the locations its plan expects, under the locks, so a table that
    changed since the plan raises :class:`~tableswap.errors.SwapConflictError` and no table changes; a new plan
    is never made here."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        group_id = f"g{new_swap_id()}"
        groups = GroupLog(rt.journal)
        with rt.session() as (catalog, journal):
            groups.create(group_id, None, ROLLBACK, rollback_of=undone_id)
            members = []
            for planned in plans.values():
                plan = planned.plan
                if plan.is_noop:
                    continue
                table = catalog.get_table(plan.db, plan.table)
                _refuse_if_unfinished(journal, table)
                op = Operation(KIND, plan.swap_id, plan.db, plan.table, table.root or "", plan, label=KIND,
                               rerun=RERUN, rollback_of=planned.rollback_of or None,
                               before_flip=restore_guard(journal, plan, undone=planned.undone, columns=planned.columns),
                               discard=partial(undo_restore, journal, table, plan.swap_id), group_id=group_id)
                begin(journal, op)
                groups.add_member(group_id, plan.swap_id, plan.db, plan.table)
                members.append(Member(table, op))
            if not members:
                groups.finish(group_id, COMMITTED, "nothing to do: every table is already as before the group")
                return GroupResult(group_id, None, {t: p.to_result(dry_run=False) for t, p in plans.items()})
            log.info("rollback.group_start", group_id=group_id, rollback_of=undone_id,
                     tables=[m.op.qualified for m in lock_order(members)])
            notify.group_started(rt, group_id, ROLLBACK, None,
                                 lambda: notify.group_tables([(m.op, m.table, None) for m in members]),
                                 rollback_of=undone_id)
            try:
                done = commit_group(rt, group_id, members, catalog=catalog)
            except BaseException as exc:
                notify.group_ended(rt, group_id, ROLLBACK, None,
                                   lambda: notify.group_tables([(m.op, m.table, None) for m in members]),
                                   failed=exc, rollback_of=undone_id)
                raise
            notify.group_ended(rt, group_id, ROLLBACK, None,
                               lambda: notify.group_tables([(c.op, c.table, c.plan) for c in done.members]),
                               rollback_of=undone_id, flip_seconds=done.flip_seconds)
            results = {}
            for c in done.members:
                journal.finish(c.op.swap_id)
                results[c.op.qualified] = result_from_plan(c.plan, KIND, staging_location=None, timings={}, calls=0)
    return GroupResult(group_id, None, results, done.flip_seconds)


__all__ = ["execute_group_rollback", "plan_group_rollback", "rollback_group"]
