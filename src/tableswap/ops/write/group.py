"""Swap groups: several tables written separately and published as one unit (docs/groups.md).

    with swap_group("orders-2026-06-03", audit=check) as g:
        g.swap_partitions(orders_df, "mart.orders")        # stages mart.orders (nothing a reader sees changes)
        g.swap_table(customers_df, "mart.customers")       # stages mart.customers
    g.result                                               # GroupResult: one SwapResult per table

Each call inside the block stages its table as ``stage_partitions`` / ``stage_table`` do (the batch written
outside any lock, journaled as a staged swap, a member of the group; a ``swap_group`` with no audit registers its
members' partitions on their temporary tables only if it is kept staged instead of published: nothing reads
them in between). Leaving the block without an exception
runs the group's ``audit`` (given ``{table: staged DataFrame}``), then publishes every member as one unit
(ops/group_commit.py: every lock in one global order, every table planned under its lock, one group intent,
the flips, one group commit). An exception inside the block or a refused audit changes no table: the members
stay staged swaps (``keep_on_failure``, the default) or are discarded.

``stage_group`` stages the same way and leaves the group ``open`` in the journal: another process audits it
and publishes it as one unit (``tableswap publish GROUP``, :func:`publish_group`) or discards it
(``tableswap discard GROUP``, :func:`discard_group`).
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any, Callable, Mapping

from dataclasses import dataclass, replace

from tableswap import errors
from tableswap.lineage import events as lineage_events
from tableswap.core import locations as loc
from tableswap.core.catalog_port import Catalog
from tableswap.core.group import FAILED, OPEN, SWAP, GroupRecord, GroupResult
from tableswap.core.names import new_swap_id, quoted
from tableswap.core.plan import WrittenPartitions
from tableswap.core.records import FAILED as SWAP_FAILED, STAGED as SWAP_STAGED
from tableswap.core.result import result_from_plan
from tableswap.journal.groups import GroupLog
from tableswap.journal.store import Journal
from tableswap.logs import get_logger
from tableswap.ops import notify
from tableswap.ops.commit import plan_under_lock
from tableswap.ops.group_commit import Member, commit_group
from tableswap.ops.write.finish import finish_committed
from tableswap.ops.write.staged import StagedSwap, discard, publish_operation, register_staged
from tableswap.ops.write.staged_state import batch_of
from tableswap.ops.write.request import checks_of, first_refusal
from tableswap.ops.write.swap import stage_member
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi, inputs as spark_inputs, reading

log = get_logger("tableswap.group")

#: What a group publish refused for a member that is no longer staged tells to do.
MEMBERS_ONE_BY_ONE = ("it can no longer be published or discarded as one unit: publish or discard its other members "
                      "one by one (`tableswap staged` lists them, `tableswap publish SWAP_ID` / `tableswap discard "
                      "SWAP_ID`)")


def catalog_of(rt: Runtime) -> str:
    """The catalog a runtime swaps in, as a group's members record it: its kind (``hive-metastore``, ``glue``),
    whatever URI reaches it (a staging job and an audit job may name one metastore by different hosts)."""
    return rt.capabilities.kind


class SwapGroup:
    """The ``g`` of ``with swap_group(...) as g`` / ``with stage_group(...) as g``: stage each table with
    :meth:`swap_partitions` / :meth:`swap_table`; after a ``swap_group`` block, :attr:`result` (a
    :class:`GroupResult`) once the group committed; after a ``stage_group`` block, the group is open in the
    journal (:attr:`group_id`), to be published or discarded by any process.

    Attributes:
        group_id: the group's id (``tableswap publish``/``discard``/``history --group``/``rollback --group``).
        name: its name (``tableswap rollback --group NAME``: the latest group of that name), if given.
        staged: ``{db.table: StagedSwap}``, the members staged so far.
        result: the :class:`GroupResult` once the block was left and the group committed, else None.
    """

    def __init__(self, name: str | None = None, *, audit: Any = None, keep_on_failure: bool = True,
                 runtime: Runtime | None = None, metastore_uri: str | None = None, journal_url: str | None = None,
                 publish: bool = True, **options: Any) -> None:
        self.group_id = f"g{new_swap_id()}"
        self.name = name
        self.checks: tuple[Callable[[Any], Any], ...] = checks_of(audit)
        self.keep_on_failure = keep_on_failure
        self.publish_on_exit = publish  # False: stage_group (left open for another process)
        self.staged: dict[str, StagedSwap] = {}
        self.result: GroupResult | None = None
        self._connect = dict(runtime=runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options)
        self._stack = ExitStack()
        self._closed = False  # the block was left: no more members
        self._rt: Runtime | None = None
        self._spark: Any = None
        self._catalog: str | None = None
        self._frames: dict[str, Any] = {}  # each member's batch: what it read, for the group's lineage run
        self._run_started = False
        self._lock = threading.Lock()  # the calls inside the block may come from several threads
        # A group published at the end of its block with no audit has no reader of its temporary tables: its
        # members are staged without their partitions registered there, which it registers only if it is kept
        # staged instead (:meth:`_register_kept`).
        self._register_at_stage = not self.publish_on_exit or bool(self.checks)
        self._unregistered: list[str] = []  # swap ids staged without their partitions registered
        self.log = log.bind(group_id=self.group_id, name=name)

    def __repr__(self) -> str:
        return f"SwapGroup(group_id={self.group_id!r}, name={self.name!r}, tables={list(self.staged)})"

    # ------------------------------------------------------------------ inside the block
    def swap_partitions(self, df: Any, table: str, *, replace_where: Any = None, allow_empty: bool = False,
                        if_unchanged_since: str | None = None) -> StagedSwap:
        """Stage ``df`` for the partitioned ``table`` as :func:`tableswap.swap_partitions` would write it; it is
        published with the rest of the group. ``if_unchanged_since``: journaled with the member and checked
        under the table's lock at the group's publish, whichever process publishes it (a conflict on any table
        changes none)."""
        rt = self._runtime(df)
        return self._member(stage_member(df, table, partitioned=True, group_id=self.group_id, runtime=rt,
                                         replace_where=replace_where, allow_empty=allow_empty,
                                         register=self._register_at_stage), df, if_unchanged_since)

    def swap_table(self, df: Any, table: str, *, allow_empty: bool = False,
                   if_unchanged_since: str | None = None) -> StagedSwap:
        """Stage ``df`` as the new contents of the unpartitioned ``table`` (see :meth:`swap_partitions`)."""
        rt = self._runtime(df)
        return self._member(stage_member(df, table, partitioned=False, group_id=self.group_id, runtime=rt,
                                         allow_empty=allow_empty), df, if_unchanged_since)

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
            self._catalog = catalog_of(self._rt)
            GroupLog(self._rt.journal).create(self.group_id, self.name, SWAP)
            self.log.info("group.start", catalog=self._catalog, publish=self.publish_on_exit)
        return self._rt

    def _member(self, staged: StagedSwap, df: Any, token: str | None) -> StagedSwap:
        assert self._rt is not None
        db, _, name = staged.table.partition(".")
        try:
            GroupLog(self._rt.journal).add_member(self.group_id, staged.swap_id, db, name, catalog=self._catalog,
                                                  state_token=token)
        except BaseException:
            discard(staged.swap_id, reason=f"not a member of group {self.group_id}", runtime=self._rt)
            raise
        with self._lock:
            self.staged[staged.table] = staged
            self._frames[staged.table] = df
            if not self._register_at_stage:
                self._unregistered.append(staged.swap_id)
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
            self._start_run()
            if not self.publish_on_exit:
                self.log.info("group.staged_all", tables=list(self.staged))
                return
            self._audit()
            self.result = self._publish()

    def _audit(self) -> None:
        """The group's checks, given ``{table: staged DataFrame}``; a refusal: :class:`AuditFailedError`, nothing
        changed, the members kept as staged swaps (``keep_on_failure``) or discarded."""
        if not self.checks:
            return
        assert self._rt is not None
        with self._rt.session() as (catalog, journal):
            frames = staged_frames(self._spark, self._rt, catalog, journal,
                                   {t: s.swap_id for t, s in self.staged.items()})
        refused = first_refusal(self.checks, frames, self.log, "group")
        if refused is None:
            return
        name, why, cause = refused
        self._abandon(f"the audit refused it: check {name!r} failed ({why})")
        batches = ", ".join(f"{t} {s.swap_id}" for t, s in self.staged.items())
        kept = (f"every table's batch is kept staged ({batches}): "
                f"inspect them, then `tableswap publish {self.group_id}` or `tableswap discard {self.group_id}` "
                "(the whole group)" if self.keep_on_failure else "every staged batch was discarded")
        error = errors.AuditFailedError(
            f"the audit of swap group {self.group_id} refused it: check {name!r} failed ({why}). Nothing was "
            f"changed on any table; {kept}", check=name, kept=self.keep_on_failure)
        if cause is not None:
            raise error from cause
        raise error

    def _abandon(self, why: str) -> None:
        """Nothing is published: the group ``failed``, its members kept staged or discarded (every one or none),
        its lineage run FAIL."""
        if self._rt is None:
            return
        self.log.warning("group.abandoned", reason=why, kept=self.keep_on_failure)
        GroupLog(self._rt.journal).finish(self.group_id, FAILED, f"not published: {why}", only_from=(OPEN,))
        if self.keep_on_failure:
            self._register_kept()
        self._start_run()
        notify.group_ended(self._rt, self.group_id, SWAP, self.name, self._tables(), failed=RuntimeError(why))
        if not self.keep_on_failure and self.staged:
            try:
                _discard(self._rt, self.group_id, f"not published: {why}", end_run=False)
            except errors.TableSwapError as exc:  # still staged: `tableswap discard` or the janitor's TTL
                self.log.warning("group.discard_failed", error=str(exc))

    def _tables(self) -> Callable[[], list[lineage_events.GroupTable]]:
        assert self._rt is not None
        return notify.group_tables_now(self._rt, {t: s.swap_id for t, s in self.staged.items()})

    def _start_run(self) -> None:
        """The group's lineage run starts once its tables are staged (every table an output)."""
        if self._run_started or self._rt is None or not self.staged:
            return
        self._run_started = True
        frames = list(self._frames.values())
        notify.group_started(self._rt, self.group_id, SWAP, self.name, self._tables(),
                             read_from=lambda: [s for df in frames for s in spark_inputs.read_sources(df)])

    def _publish(self) -> GroupResult:
        assert self._rt is not None
        try:
            return publish_group(self.group_id, runtime=self._rt, spark=self._spark,
                                 classify={t: s._classify for t, s in self.staged.items()})
        except errors.CommitStateUnknownError:  # past its commit point: `tableswap recover` publishes every member
            raise
        except Exception:  # nothing published, every member staged again: readable through its temporary table
            self._register_kept()
            raise

    def _register_kept(self) -> None:
        """The members staged without their partitions registered on their temporary tables, kept staged
        (the group was not published): registered now, so that Spark and Trino read each staged batch there
        as a staged swap's. A failure here is logged: the group's own error is the one to report."""
        assert self._rt is not None
        pending, self._unregistered = self._unregistered, []
        for swap_id in pending:
            try:
                with self._rt.session() as (client, journal):
                    register_staged(client, journal, swap_id)
            except errors.TableSwapError as exc:  # e.g. discarded meanwhile: nothing to read through it
                self.log.warning("group.register_failed", swap_id=swap_id, error=str(exc))


# ---------------------------------------------------------------------- the staged batches as DataFrames
def staged_frames(spark: Any, rt: Runtime, catalog: Catalog, journal: Journal,
                  members: Mapping[str, str]) -> dict[str, Any]:
    """``{db.table: the staged batch as a DataFrame}`` for the group's audit (``members``: table → swap id): its
    temporary table where Spark uses the catalog itself (the Hive Metastore), else (Glue) its staged files read
    with the table's schema, as a single swap's audit reads them."""
    if spark is None:
        raise errors.InvalidInputError("a group's audit reads its staged batches with Spark: pass spark= (a "
                                       "SparkSession) with audit=; nothing was changed")
    spark_catalog = rt.capabilities.spark_catalog
    out = {}
    for table, swap_id in members.items():
        record = journal.get_swap(swap_id)
        if record is None or record.state != SWAP_STAGED:
            raise errors.NotStagedError(f"member {table} (swap {swap_id}) is {record.state if record else 'gone'}, "
                                        "not staged: its batch cannot be audited; nothing was changed",
                                        table=table, swap_id=swap_id)
        if spark_catalog and record.temp_table:
            out[table] = spark.table(quoted(record.db_name, record.temp_table))
            continue
        target = catalog.get_table(record.db_name, record.table_name)
        batch = batch_of(record, target)
        if isinstance(batch, WrittenPartitions):
            parts = [(p.values, p.location) for p in batch.written if p.location is not None]
        else:
            parts = [((), record.staging_location or "")]
        schema = reading.stored_schema(target) or reading.catalog_schema(spark, target)
        out[table] = reading.read_locations(spark, target, schema, parts)
    return out


# ---------------------------------------------------------------------- a staged group, from any process
def waiting_group(journal: Journal, id_or_name: str, *, doing: str) -> GroupRecord:
    """The group to publish or discard: by id, else the one group of that name still waiting (open, or failed
    before any flip with every member staged: :attr:`GroupRecord.waiting`). :class:`NotFoundError` if none has
    that id or name; :class:`InvalidInputError` if several waiting groups share the name; :class:`NotStagedError`
    if it cannot be published or discarded as one unit (already published, discarded, a member published alone...)."""
    groups = GroupLog(journal)
    group = groups.find(id_or_name)
    if group is None:
        named = groups.named(id_or_name)
        if not named:
            raise errors.NotFoundError(f"no swap group with the id or name {id_or_name!r} in the journal; "
                                       "`tableswap staged` lists the staged groups")
        waiting = [g for g in named if g.waiting]
        if len(waiting) > 1:
            ids = ", ".join(f"{g.group_id} (created {g.created_at})" for g in waiting)
            raise errors.InvalidInputError(
                f"{len(waiting)} staged swap groups are named {id_or_name!r}: {ids}. Nothing was changed; "
                f"{doing} one by its id (`tableswap {doing} GROUP_ID`; `tableswap staged` lists them)")
        group = waiting[0] if waiting else named[0]
    require_waiting(group, doing=doing)
    return group


def names_a_group(journal: Journal, target: str) -> bool:
    """``tableswap publish/discard TARGET``: a group's id or name, not a swap id (a swap id comes first)."""
    if journal.get_swap(target) is not None:
        return False
    groups = GroupLog(journal)
    return groups.find(target) is not None or bool(groups.named(target))


def require_waiting(group: GroupRecord, *, doing: str) -> None:
    """Refuse (nothing changed) a group that cannot be published or discarded as one unit, saying why and what to do."""
    label = group.group_id + (f" ({group.name})" if group.name else "")
    if group.kind != SWAP:
        raise errors.NotStagedError(f"cannot {doing} group {label}: it is a {group.kind} group (it has nothing "
                                    "staged). Nothing was changed")
    if group.state not in (OPEN, FAILED):
        why = {"committed": f"it is already published (committed {group.committed_at})"
                            + (f"; to take it back: `tableswap rollback --group {group.group_id}`" if doing == "discard"
                               else ""),
               "pending": "its publish was interrupted during its flips: run `tableswap recover`, which finishes "
                          "every table of it",
               "discarded": f"it was discarded ({group.error or 'discarded'})"}.get(group.state, f"it is {group.state}")
        raise errors.NotStagedError(f"cannot {doing} group {label}: {why}. Nothing was changed", state=group.state)
    if not group.members:
        raise errors.NotStagedError(f"cannot {doing} group {label}: it has no member (its writer staged nothing "
                                    "yet, or died before). Nothing was changed", state=group.state)
    off = [m for m in group.members if m.state != SWAP_STAGED]
    if off:
        what = "; ".join(f"{m.table} (swap {m.swap_id}) is {_member_state(m.state)}" for m in off)
        running = all(m.state == "staging" for m in off)
        then = ("its writer is still staging it (or died: `tableswap recover` aborts a dead writer's swap once "
                "stale); try again when it is staged" if running else MEMBERS_ONE_BY_ONE)
        raise errors.NotStagedError(f"cannot {doing} group {label} as one unit: {what}. Nothing was changed; {then}",
                                    swap_id=off[0].swap_id, table=off[0].table, state=off[0].state)


def _member_state(state: str | None) -> str:
    return {"committed": "already published", "aborted": "discarded", "pending": "being published (or interrupted: "
            "`tableswap recover`)", None: "gone from the journal"}.get(state, str(state))


def publish_group(group_id: str, *, audit: Any = None, if_unchanged_since: Mapping[str, str | None] | None = None,
                  dry_run: bool = False, runtime: Runtime | None = None, metastore_uri: str | None = None,
                  journal_url: str | None = None, spark: Any = None, classify: Mapping[str, Any] | None = None,
                  **options: Any) -> GroupResult:
    """Publish the staged group ``group_id`` (an id, or the name of one waiting group) as one unit, from any
    process: every table or none (docs/groups.md). Needs no Spark, but for ``audit`` and a member's predicate
    scope (``classify``); ``spark``'s cache of each table is refreshed afterwards.

    Args:
        group_id: the group's id (``SwapGroup.group_id``, ``tableswap staged``) or name.
        audit: checks (as for :func:`swap_group`) given ``{db.table: staged DataFrame}``, run before any lock:
            a refusal raises :class:`AuditFailedError`, nothing changed, the group still staged. Needs ``spark``.
        if_unchanged_since: ``{db.table: state token}`` checked under that table's lock, with those journaled when
            the members were staged (one token per table).
        dry_run: every member read, planned and checked as the publish does, from its table as it is now and
            without the locks (the audit too, when given); nothing changed. The :class:`GroupResult` the publish
            would return, marked ``dry_run``: each table's plan.
        spark: a SparkSession: the audit reads the staged batches with it, and its cache of each table is
            refreshed after the publish.

    Raises:
        NotFoundError: no group has that id or name.
        NotStagedError: it was published, discarded, or a member is no longer staged; nothing was changed.
        InvalidInputError: a name shared by several waiting groups, or a group staged in another catalog than
            this process's; nothing was changed.
        AuditFailedError, SwapConflictError (no table changed, every member staged again),
        CommitStateUnknownError (``tableswap recover`` finishes every table).
    """
    checks = checks_of(audit)
    scopes = dict(classify or {})
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        group = waiting_group(journal, group_id, doing="publish")
        bound = log.bind(group_id=group.group_id, name=group.name)
        require_one_catalog(group, catalog_of(rt), doing="publish")
        tokens = _tokens(group, if_unchanged_since)
        if checks:
            frames = staged_frames(spark, rt, catalog, journal, {m.table: m.swap_id for m in group.members})
            refused = first_refusal(checks, frames, bound, "group")
            if refused is not None:
                name, why, cause = refused
                error = errors.AuditFailedError(
                    f"the audit of swap group {group.group_id} refused it: check {name!r} failed ({why}). Nothing "
                    f"was changed on any table; the group is still staged: `tableswap discard {group.group_id}`, or "
                    "publish it once its batches are right", check=name, kept=True)
                if cause is not None:
                    raise error from cause
                raise error
        if dry_run:
            return _planned_group(catalog, journal, group, tokens, scopes)
        if group.state == FAILED and not GroupLog(journal).reopen(group.group_id):
            raise errors.NotStagedError(f"swap group {group.group_id} left state failed meanwhile (published or "
                                        "discarded by another process?); nothing was changed")
        members, records = [], {}
        for m in group.members:
            record, target, op = publish_operation(catalog, journal, m.swap_id, tokens.get(m.table),
                                                   scopes.get(m.table))
            records[op.swap_id] = record
            members.append(Member(target, replace(op, group_id=group.group_id)))  # the group's lineage run
        try:
            done = commit_group(rt, group.group_id, members, catalog=catalog)
        except BaseException as exc:
            notify.group_ended(rt, group.group_id, SWAP, group.name,
                               lambda: notify.group_tables([(m.op, m.table, None) for m in members]), failed=exc)
            if not isinstance(exc, errors.CommitStateUnknownError):
                # Nothing flipped (ops/group_commit.py): each member whose intent was recorded is staged again.
                for member in members:
                    journal.restage(member.op.swap_id, f"group {group.group_id} failed before its flips, nothing "
                                    f"changed: {type(exc).__name__}: {exc}", states=(SWAP_FAILED,))
            raise
        notify.group_ended(rt, group.group_id, SWAP, group.name,
                           lambda: notify.group_tables([(c.op, c.table, c.plan) for c in done.members]),
                           flip_seconds=done.flip_seconds)
        results = {}
        for c in done.members:
            record = records[c.op.swap_id]
            finish_committed(journal, catalog, c.op.swap_id, c.op.db, c.op.table, record.temp_table, spark=spark,
                             log=bound.bind(table=c.op.qualified), what="group")
            results[c.op.qualified] = result_from_plan(c.plan, record.kind, staging_location=record.staging_location,
                                                       timings={}, calls=0)
    result = GroupResult(group.group_id, group.name, results, done.flip_seconds)
    bound.info("group.done", tables=len(results), flip_seconds=round(done.flip_seconds, 6))
    return result


def _planned_group(catalog: Catalog, journal: Journal, group: GroupRecord, tokens: Mapping[str, str | None],
                   scopes: Mapping[str, Any]) -> GroupResult:
    """A group publish's dry run: each member's read, plan and checks as under its lock, from unlocked reads."""
    results = {}
    for m in sorted(group.members, key=lambda m: m.table):  # the order the publish flips them in
        record, target, op = publish_operation(catalog, journal, m.swap_id, tokens.get(m.table), scopes.get(m.table))
        _, plan = plan_under_lock(catalog, target, op)
        results[op.qualified] = result_from_plan(plan, record.kind, staging_location=record.staging_location,
                                                 timings={}, calls=0, dry_run=True)
    log.info("group.dry_run", group_id=group.group_id, tables=list(results))
    return GroupResult(group.group_id, group.name, results, dry_run=True)


def require_one_catalog(group: GroupRecord, here: str, *, doing: str) -> None:
    """Refuse (nothing changed) a group whose members were staged in several catalogs, or in another catalog
    than ``here`` (this process's): a group's tables are locked, planned and flipped through one catalog."""
    staged_in = {m.catalog for m in group.members if m.catalog is not None}
    if len(staged_in) > 1:
        which = "; ".join(f"{m.table} in {m.catalog}" for m in group.members)
        raise errors.InvalidInputError(
            f"swap group {group.group_id} mixes catalogs ({which}): a group's tables must all be in one catalog, "
            f"to be locked and flipped as one unit. Nothing was changed; {doing} each table's swap on its own "
            "(`tableswap discard` the group, then swap each catalog's tables as a group of their own)")
    if staged_in and staged_in != {here}:
        raise errors.InvalidInputError(
            f"swap group {group.group_id} was staged in the {staged_in.pop()} catalog, and this process uses the "
            f"{here} one: nothing was changed. {doing.capitalize()} it with the metastore URI its tables are in "
            "(TABLESWAP_METASTORE_URI / --metastore-uri)")


def _tokens(group: GroupRecord, given: Mapping[str, str | None] | None) -> dict[str, str | None]:
    """Each member's state token: journaled at its stage, or given now (one per table)."""
    tokens = {m.table: m.state_token for m in group.members}
    for table, token in (given or {}).items():
        if token is None:
            continue
        if table not in tokens:
            raise errors.InvalidInputError(f"if_unchanged_since names {table}, which is not a table of group "
                                           f"{group.group_id} ({', '.join(tokens)}); nothing was changed")
        if tokens[table] not in (None, token):
            raise errors.InvalidInputError(
                f"{table} of group {group.group_id} has a state token already, journaled when it was staged: it is "
                "checked at the publish; give no other. Nothing was changed", table=table)
        tokens[table] = token
    return tokens


@dataclass(frozen=True)
class GroupDiscarded:
    """What :func:`discard_group` did: every member discarded (state ``aborted``), the group ``discarded``."""

    group_id: str
    name: str | None
    members: dict[str, str]  # db.table → swap id
    temp_tables_dropped: tuple[str, ...]
    queued: tuple[str, ...]  # the staged data queued for the janitor
    dry_run: bool = False  # what a discard would do, nothing changed

    def to_dict(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "name": self.name, "state": "staged" if self.dry_run else "discarded",
                "members": dict(self.members), "temp_tables_dropped": list(self.temp_tables_dropped),
                "queued": list(self.queued), "dry_run": self.dry_run}


def discard_group(group_id: str, *, reason: str = "discarded", dry_run: bool = False, runtime: Runtime | None = None,
                  metastore_uri: str | None = None, journal_url: str | None = None, **options: Any) -> GroupDiscarded:
    """Discard every member of the staged group ``group_id`` (an id, or the name of one waiting group), in one
    journal transaction: every member or none (a member published meanwhile changes nothing). Each member's
    staged data is queued for the janitor and its temporary table dropped, as :func:`discard` does one; the
    group's lineage run ends with ABORT. ``dry_run``: the same checks, nothing changed; what it would drop and
    queue, marked ``dry_run``.

    Raises: as :func:`publish_group` before its lock."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        return _discard(rt, group_id, reason, end_run=True, dry_run=dry_run)


def _discard(rt: Runtime, group_id: str, reason: str, *, end_run: bool, dry_run: bool = False) -> GroupDiscarded:
    with rt.session() as (catalog, journal):
        group = waiting_group(journal, group_id, doing="discard")
        require_one_catalog(group, catalog_of(rt), doing="discard")
        records = {m.swap_id: journal.get_swap(m.swap_id) for m in group.members}
        queued: dict[str, list[tuple[str, str]]] = {}
        for swap_id, record in records.items():
            assert record is not None  # every member is staged (waiting_group)
            where = record.staging_location
            own = loc.staging_location(record.table_root, swap_id) if record.table_root else None
            # Queued only when it is this swap's own directory under the table root (the janitor re-checks it).
            queued[swap_id] = [("", where)] if where and own and loc.same(where, own) else []
        if dry_run:
            return GroupDiscarded(group.group_id, group.name, {m.table: m.swap_id for m in group.members},
                                  tuple(f"{r.db_name}.{r.temp_table}" for r in records.values()
                                        if r is not None and r.temp_table),
                                  tuple(where for q in queued.values() for _, where in q), dry_run=True)
        GroupLog(journal).discard(group.group_id, reason, queued)
        dropped = []
        for swap_id, record in records.items():
            assert record is not None
            if record.temp_table:
                try:
                    catalog.drop_table_keep_data(record.db_name, record.temp_table)
                    dropped.append(f"{record.db_name}.{record.temp_table}")
                except errors.TableSwapError as exc:  # aborted already: the janitor drops it after its grace
                    log.warning("discard.temp_drop_failed", swap_id=swap_id, error=str(exc))
        log.info("group.discarded", group_id=group.group_id, tables=list(group.tables))
    if end_run:
        notify.group_ended(rt, group.group_id, SWAP, group.name,
                           notify.group_tables_now(rt, {m.table: m.swap_id for m in group.members}),
                           aborted=True)
    return GroupDiscarded(group.group_id, group.name, {m.table: m.swap_id for m in group.members},
                          tuple(dropped), tuple(where for q in queued.values() for _, where in q))


def list_staged_groups(table: str | None = None, *, runtime: Runtime | None = None, metastore_uri: str | None = None,
                       journal_url: str | None = None, **options: Any) -> list[GroupRecord]:
    """The groups waiting to be published or discarded (:attr:`GroupRecord.waiting`; with ``table``: those with a
    member of it), oldest first, and the open groups whose writer is still staging. Reads the journal only."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        groups = GroupLog(rt.journal).list(states=[OPEN, FAILED], limit=10_000)
    out = [g for g in groups if g.kind == SWAP and (g.waiting or g.state == OPEN)
           and (table is None or table in g.tables)]
    return sorted(out, key=lambda g: (g.created_at, g.group_id))


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
        keep_on_failure: an exception inside the block or a refused audit keeps every staged table staged
            (``tableswap staged``; ``tableswap publish GROUP_ID`` / ``discard`` the group); ``False``: discards them.
        runtime, metastore_uri, journal_url, options: as for :func:`tableswap.swap_partitions`.

    Raises (when the block is left):
        AuditFailedError: the audit refused the group; no table changed.
        SwapConflictError: a table is not as planned (``if_unchanged_since``, say); no table changed, every
            member staged again.
        CommitStateUnknownError: a failure during the flips; ``tableswap recover`` finishes every table.
    """
    return SwapGroup(name, audit=audit, keep_on_failure=keep_on_failure, runtime=runtime,
                     metastore_uri=metastore_uri, journal_url=journal_url, **options)


def stage_group(name: str | None = None, *, keep_on_failure: bool = True, runtime: Runtime | None = None,
                metastore_uri: str | None = None, journal_url: str | None = None, **options: Any) -> SwapGroup:
    """Stage several tables as one group, to be audited and published as one unit later, by any process: use as
    ``with stage_group(name) as g:``, stage each table with ``g.swap_partitions(df, table)`` /
    ``g.swap_table(df, table)``; leaving the block leaves the group open in the journal: nothing a reader sees
    changed. Then ``g.group_id`` (or the name) is what ``tableswap publish`` / ``tableswap discard`` and
    :func:`publish_group` (with ``audit=`` from Python) / :func:`discard_group` take. See docs/groups.md.

    Args:
        name: the group's name (optional): ``tableswap publish NAME`` takes the one waiting group of that name.
        keep_on_failure: an exception inside the block keeps every staged table staged (the group ``failed``,
            still publishable as one unit); ``False``: discards them.
        runtime, metastore_uri, journal_url, options: as for :func:`tableswap.swap_partitions`.

    Raises (when the block is left): EmptyBatchError when no table was staged.
    """
    return SwapGroup(name, keep_on_failure=keep_on_failure, runtime=runtime, metastore_uri=metastore_uri,
                     journal_url=journal_url, publish=False, **options)


__all__ = ["SwapGroup", "swap_group", "stage_group", "publish_group", "discard_group", "list_staged_groups",
           "names_a_group",
           "GroupDiscarded", "GroupResult"]
