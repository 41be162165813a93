"""Swap groups: several tables written separately and published as one unit (docs/groups.md).

    with swap_group("orders-2026-06-03", audit=check) as g:
        g.swap_partitions(orders_df, "mart.orders")        # stages mart.orders (nothing a reader sees changes)
        g.swap_table(customers_df, "mart.customers")       # stages mart.customers
    g.result                                               # GroupResult: one SwapResult per table

Each call inside the block stages its table as ``stage_partitions`` / ``stage_table`` do (the batch written
outside any lock, journaled as a staged swap, a member of the group). Leaving the block without an exception
runs the group's ``audit`` (given ``{table: staged DataFrame}``), then publishes every member as one unit
(ops/group_commit.py: every lock in one global order, every table planned under its lock, one group intent,
the flips, one group commit). An exception inside the block or a refused audit changes no table: the members
stay staged swaps (``keep_on_failure``, the default) or are discarded.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any, Callable, Mapping

from tableswap import errors
from tableswap.core.group import FAILED, OPEN, SWAP, GroupResult
from tableswap.core.names import new_swap_id
from tableswap.core.records import FAILED as SWAP_FAILED
from tableswap.core.result import result_from_plan
from tableswap.journal.groups import GroupLog
from tableswap.logs import get_logger
from tableswap.ops.group_commit import Member, commit_group
from tableswap.ops.write.staged import StagedSwap, discard, drop_temp, publish_operation
from tableswap.ops.write.swap import _checks_of, first_refusal, stage_partitions, stage_table
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi

log = get_logger("tableswap.group")


class SwapGroup:
    """The ``g`` of ``with swap_group(...) as g``: stage each table with :meth:`swap_partitions` /
    :meth:`swap_table`; after the block, :attr:`result` (a :class:`GroupResult`) once the group committed.

    Attributes:
        group_id: the group's id (``tableswap history --group``, ``tableswap rollback --group``).
        name: its name (``tableswap rollback --group NAME``: the latest group of that name), if given.
        staged: ``{db.table: StagedSwap}``, the members staged so far.
        result: the :class:`GroupResult` once the block was left and the group committed, else None.
    """

    def __init__(self, name: str | None = None, *, audit: Any = None, keep_on_failure: bool = True,
                 runtime: Runtime | None = None, metastore_uri: str | None = None, journal_url: str | None = None,
                 **options: Any) -> None:
        self.group_id = f"g{new_swap_id()}"
        self.name = name
        self.checks: tuple[Callable[[Any], Any], ...] = _checks_of(audit)
        self.keep_on_failure = keep_on_failure
        self.staged: dict[str, StagedSwap] = {}
        self.result: GroupResult | None = None
        self._tokens: dict[str, str | None] = {}
        self._connect = dict(runtime=runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options)
        self._stack = ExitStack()
        self._closed = False  # the block was left: no more members
        self._rt: Runtime | None = None
        self._spark: Any = None
        self._lock = threading.Lock()  # the calls inside the block may come from several threads
        self.log = log.bind(group_id=self.group_id, name=name)

    def __repr__(self) -> str:
        return f"SwapGroup(group_id={self.group_id!r}, name={self.name!r}, tables={list(self.staged)})"

    # ------------------------------------------------------------------ inside the block
    def swap_partitions(self, df: Any, table: str, *, replace_where: Any = None, allow_empty: bool = False,
                        if_unchanged_since: str | None = None) -> StagedSwap:
        """Stage ``df`` for the partitioned ``table`` as :func:`tableswap.swap_partitions` would write it; it is
        published with the rest of the group when the block is left. ``if_unchanged_since``: checked under the
        table's lock at that publish (a conflict on any table changes none)."""
        rt = self._runtime(df)
        return self._member(stage_partitions(df, table, replace_where=replace_where, allow_empty=allow_empty,
                                             runtime=rt), if_unchanged_since)

    def swap_table(self, df: Any, table: str, *, allow_empty: bool = False,
                   if_unchanged_since: str | None = None) -> StagedSwap:
        """Stage ``df`` as the new contents of the unpartitioned ``table`` (see :meth:`swap_partitions`)."""
        rt = self._runtime(df)
        return self._member(stage_table(df, table, allow_empty=allow_empty, runtime=rt), if_unchanged_since)

    def _runtime(self, df: Any) -> Runtime:
        if self._closed:
            raise errors.InvalidInputError(f"swap group {self.group_id} is closed: stage its tables inside its "
                                           "`with` block")
        with self._lock:
            return self._open(df)

    def _open(self, df: Any) -> Runtime:
        if self._rt is None:
            self._spark = sparkapi.session_of(df)
            self._rt = self._stack.enter_context(use(spark=self._spark, **self._connect))
            GroupLog(self._rt.journal).create(self.group_id, self.name, SWAP)
            self.log.info("group.start")
        return self._rt

    def _member(self, staged: StagedSwap, token: str | None) -> StagedSwap:
        assert self._rt is not None
        db, _, name = staged.table.partition(".")
        try:
            GroupLog(self._rt.journal).add_member(self.group_id, staged.swap_id, db, name)
        except BaseException:
            discard(staged.swap_id, reason=f"not a member of group {self.group_id}", runtime=self._rt)
            raise
        with self._lock:
            self.staged[staged.table] = staged
            self._tokens[staged.table] = token
        self.log.info("group.staged", table=staged.table, swap_id=staged.swap_id)
        return staged

    # ------------------------------------------------------------------ leaving the block
    def __enter__(self) -> "SwapGroup":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._closed = True
        with self._stack:
            if exc is not None:
                try:
                    self._abandon(f"the block raised {type(exc).__name__}: {exc}")
                except Exception as abandon_exc:  # noqa: BLE001 - the block's own exception is the one to report
                    self.log.warning("group.abandon_failed", error=str(abandon_exc))
                return
            if not self.staged:
                raise errors.EmptyBatchError(f"swap group {self.group_id} staged no table; nothing was changed")
            self._audit()
            self.result = self._publish()

    def _audit(self) -> None:
        """The group's checks, given ``{table: staged DataFrame}``; a refusal: :class:`AuditFailedError`, nothing
        changed, the members kept as staged swaps (``keep_on_failure``) or discarded."""
        if not self.checks:
            return
        frames = {table: self._spark.table(s.staged_table) for table, s in self.staged.items()}
        refused = first_refusal(self.checks, frames, self.log, "group")
        if refused is None:
            return
        name, why, cause = refused
        self._abandon(f"the audit refused it: check {name!r} failed ({why})")
        ids = ", ".join(f"{t} {s.swap_id}" for t, s in self.staged.items())
        kept = (f"every table's batch is kept as a staged swap ({ids}): inspect them, then `tableswap publish` "
                "or `tableswap discard` each" if self.keep_on_failure else "every staged batch was discarded")
        error = errors.AuditFailedError(
            f"the audit of swap group {self.group_id} refused it: check {name!r} failed ({why}). Nothing was "
            f"changed on any table; {kept}", check=name, kept=self.keep_on_failure)
        if cause is not None:
            raise error from cause
        raise error

    def _abandon(self, why: str) -> None:
        """Nothing is published: the group ``failed``, its members kept staged or discarded."""
        if self._rt is None:
            return
        self.log.warning("group.abandoned", reason=why, kept=self.keep_on_failure)
        GroupLog(self._rt.journal).finish(self.group_id, FAILED, f"not published: {why}")
        if not self.keep_on_failure:
            for staged in self.staged.values():
                try:
                    discard(staged.swap_id, reason=f"group {self.group_id} not published: {why}", runtime=self._rt)
                except errors.TableSwapError as exc:  # still staged: `tableswap discard` or the janitor's TTL
                    self.log.warning("group.discard_failed", swap_id=staged.swap_id, error=str(exc))

    def _publish(self) -> GroupResult:
        assert self._rt is not None
        return publish_group(self.group_id, if_unchanged_since=self._tokens, runtime=self._rt, spark=self._spark,
                             classify={t: s._classify for t, s in self.staged.items()})


def publish_group(group_id: str, *, if_unchanged_since: Mapping[str, str | None] | None = None,
                  runtime: Runtime | None = None, metastore_uri: str | None = None, journal_url: str | None = None,
                  spark: Any = None, classify: Mapping[str, Any] | None = None, **options: Any) -> GroupResult:
    """Publish the open group ``group_id`` (its members staged swaps) as one unit, from any process; Spark is
    needed only for a member's predicate scope (``classify``) and to refresh ``spark``'s cache afterwards.

    Raises: as :func:`swap_group` when its block is left (a conflict on any table changes none)."""
    tokens, scopes = dict(if_unchanged_since or {}), dict(classify or {})
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (client, journal):
        group = GroupLog(journal).get(group_id)
        bound = log.bind(group_id=group.group_id, name=group.name)
        if group.state != OPEN:
            raise errors.NotStagedError(f"swap group {group.group_id} is {group.state}, not open: it cannot be "
                                        "published. Nothing was changed")
        members, records = [], {}
        for m in group.members:
            record, target, op = publish_operation(client, journal, m.swap_id, tokens.get(m.table),
                                                   scopes.get(m.table))
            records[op.swap_id] = record
            members.append(Member(target, op))
        try:
            done = commit_group(rt, group.group_id, members, client=client)
        except errors.CommitStateUnknownError:
            raise
        except BaseException as exc:
            # Nothing flipped (ops/group_commit.py): each member whose intent was recorded is staged again.
            for member in members:
                journal.restage(member.op.swap_id, f"group {group.group_id} failed before its flips, nothing "
                                f"changed: {type(exc).__name__}: {exc}", states=(SWAP_FAILED,))
            raise
        results = {}
        for c in done.members:
            record = records[c.op.swap_id]
            drop_temp(client, record, bound)
            if spark is not None:
                try:
                    spark.catalog.refreshTable(f"`{c.op.db}`.`{c.op.table}`")
                except Exception as exc:  # noqa: BLE001 - never fail a committed group on a cache refresh
                    bound.warning("group.refresh_failed", table=c.op.qualified, error=str(exc))
            journal.finish(c.op.swap_id)
            results[c.op.qualified] = result_from_plan(c.plan, record.kind, staging_location=record.staging_location,
                                                       timings={}, calls=0)
    result = GroupResult(group.group_id, group.name, results, done.flip_seconds)
    bound.info("group.done", tables=len(results), flip_seconds=round(done.flip_seconds, 6))
    return result


def swap_group(name: str | None = None, *, audit: Any = None, keep_on_failure: bool = True,
               runtime: Runtime | None = None, metastore_uri: str | None = None, journal_url: str | None = None,
               **options: Any) -> SwapGroup:
    """Several tables as one unit: use as ``with swap_group(name, audit=...) as g:``, stage each table with
    ``g.swap_partitions(df, table)`` / ``g.swap_table(df, table)``; leaving the block publishes them all as one
    unit and sets ``g.result`` (a :class:`GroupResult`). See docs/groups.md.

    Args:
        name: the group's name (optional): ``tableswap rollback --group NAME`` takes the latest group of it.
        audit: a check (a callable given ``{db.table: staged DataFrame}``; it raises or returns ``False`` to refuse
            the group) or a list of them, run once every table is staged and before any lock.
        keep_on_failure: an exception inside the block or a refused audit keeps every staged table as a staged
            swap (``tableswap staged``); ``False``: discards them.
        runtime, metastore_uri, journal_url, options: as for :func:`tableswap.swap_partitions`.

    Raises (when the block is left):
        AuditFailedError: the audit refused the group; no table changed.
        SwapConflictError: a table is not as planned (``if_unchanged_since``, say); no table changed, every
            member staged again.
        CommitStateUnknownError: a failure during the flips; ``tableswap recover`` finishes every table.
    """
    return SwapGroup(name, audit=audit, keep_on_failure=keep_on_failure, runtime=runtime,
                     metastore_uri=metastore_uri, journal_url=journal_url, **options)


__all__ = ["SwapGroup", "swap_group", "publish_group", "GroupResult"]
