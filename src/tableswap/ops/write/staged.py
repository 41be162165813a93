"""Staged swaps: write, audit, publish.

A staged swap is a swap paused between its stage and its commit (``stage_partitions`` / ``stage_table``,
or a swap whose ``audit=`` refused the batch with ``keep_on_failure``). Its batch is written as a swap
writes it (``<root>/_tableswap/<swap id>``), registered as its temporary table ``db.<table>__tswap_<id>``
(with its partitions, so that Spark and Trino can query it), and journaled in state ``staged``: nothing a
reader of the table sees has changed.

Everything a publish needs is durable, so any process can publish it (``tableswap publish``, a separate
audit job), without Spark:

* the journal record: table, kind, table root, staging location, temporary table, the partitions its
  ``replace_where`` scope drops (``staged_drops``) and the scope itself (``staged_scope``: a publish plans the
  drops again under the lock; a predicate scope needs Spark for a partition added since the stage);
* the staging directory: the partitions written and their files' sizes (:func:`tableswap.storage.written_partitions`),
  first compared with the data files and sizes journaled when it was staged
  (:func:`~tableswap.ops.write.staged_state.check_staged_files`);
* the format and columns the batch was written for, journaled with them and compared under the lock with the
  table read there (:class:`~tableswap.ops.write.staged_state.PublishPlanning`): a table re-created as ORC
  meanwhile does not get a Parquet batch.

:func:`publish` rebuilds the swap's planner from them and runs the one commit protocol (lock, plan from
the state read under the lock, checks, journal intent, flip, journal commit): a publish after other swaps
of the same partitions is serial-equivalent, and with ``if_unchanged_since`` refused (``SwapConflictError``)
when what the token covers changed. The journal record goes ``staged`` → ``pending`` → ``committed``. A
failure before the flip leaves it ``staged`` (nothing changed); any failure once the flip may have started
(an error, ``KeyboardInterrupt``, a ``SystemExit`` from a SIGTERM handler, a kill) leaves it ``pending`` for
``tableswap recover`` (which puts a publish that landed nothing back to ``staged``).

:func:`discard` ends it: ``staged`` → ``aborted`` (one conditional journal update, so a concurrent
publish and discard cannot both win), its staged data queued for the janitor, its temporary table
dropped (its data kept until the janitor's grace ends). The janitor keeps a staged swap's temporary
table and data until ``[janitor] staged_ttl``, then discards it.

What a staged swap is made of and the publish's checks of it are ops/write/staged_state.py's; listing the staged
swaps and a staged swap's diff, read only, are ops/write/staged_view.py's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

from tableswap import errors, storage
from tableswap.core import eligibility, partitions as pn
from tableswap.core import locations as loc
from tableswap.core.catalog import SWAP_ID_PARAM, NewPartition, TableInfo
from tableswap.core.catalog_port import Catalog
from tableswap.core.plan import WrittenPartitions, WrittenTable
from tableswap.core.planning import LockedPlanning
from tableswap.core.records import FAILED, PENDING, PartitionChange, SwapKind, SwapRecord
from tableswap.core.result import SwapResult, Timer, result_from_plan
from tableswap.core.scope import Classify
from tableswap.core.state import TableState
from tableswap.core.group import OPEN as GROUP_OPEN
from tableswap.journal.groups import GroupLog
from tableswap.journal.store import Journal
from tableswap.logs import get_logger
from tableswap.ops import notify
from tableswap.ops.commit import commit, plan_under_lock
from tableswap.ops.operation import Operation
from tableswap.ops.write.finish import finish_committed
from tableswap.ops.write.staged_state import (  # what a staged swap is made of, and its publish's checks
    RERUN, PublishPlanning, batch_of, shape_staged_for, check_staged_files, staged_files, staged_record,
    written_for,
)
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.staged")

#: What a publish is called in its log events and errors (what a conflict tells to do: staged_state.RERUN).
LABEL = "publish"


# ---------------------------------------------------------------------- the staged swap a stage returns
class StagedSwap:
    """A batch written and journaled as **staged**: nothing a reader of :attr:`table` sees changed.

    Attributes:
        swap_id: its swap id (``tableswap publish SWAP_ID`` / ``tableswap discard SWAP_ID`` from any process).
        table: the target, ``db.table``.
        staged_table: ``db.name`` of its temporary table, which Spark and Trino can query: the staged batch.
        partitions: what a publish would do, planned from the table as read when it was staged (a
            publish plans again under the table lock): one :class:`~tableswap.core.result.PartitionChange`
            per partition added, replaced or dropped (``partition`` ``""``: an unpartitioned table's
            location).
        staging_location: where the batch is stored.
    """

    def __init__(self, swap_id: str, table: str, staged_table: str, partitions: Sequence[PartitionChange],
                 staging_location: str, *, runtime: Runtime | None = None, settings: Any = None,
                 spark: Any = None, classify: Classify | None = None) -> None:
        self.swap_id = swap_id
        self.table = table
        self.staged_table = staged_table
        self.partitions = tuple(partitions)
        self.staging_location = staging_location
        self._runtime = runtime  # the caller's own (left open), else one built from `settings` per call
        self._settings = settings
        self._spark = spark
        self._classify = classify  # a predicate scope evaluated with the staging job's SparkSession

    def __repr__(self) -> str:
        return (f"StagedSwap(swap_id={self.swap_id!r}, table={self.table!r}, staged_table={self.staged_table!r}, "
                f"partitions={len(self.partitions)})")

    def _use(self) -> Any:
        if self._runtime is not None:
            return use(self._runtime)
        return Runtime(self._settings)

    def publish(self, *, if_unchanged_since: str | None = None, dry_run: bool = False) -> SwapResult:
        """Make the staged batch visible: the same protocol as a swap (lock, plan from the state read under the
        lock, journal, flip); ``dry_run``: its plan, nothing changed. See :func:`publish`."""
        with self._use() as rt:
            return publish(self.swap_id, if_unchanged_since=if_unchanged_since, dry_run=dry_run, runtime=rt,
                           spark=self._spark, classify=self._classify)

    def discard(self, *, dry_run: bool = False) -> "Discarded":
        """Throw the staged batch away: nothing a reader sees changes; ``dry_run``: what it would do, nothing
        changed. See :func:`discard`."""
        with self._use() as rt:
            return discard(self.swap_id, dry_run=dry_run, runtime=rt)


# ---------------------------------------------------------------------- the stage's last steps (from a swap)
def register_partitions(catalog: Catalog, temp: TableInfo, batch: WrittenPartitions | WrittenTable) -> int:
    """Register the staged partitions on the staging table (at their staged locations), so that Spark and
    Trino read the staged batch through it; returns the catalog calls made. An unpartitioned staging table
    points at the batch already."""
    if not isinstance(batch, WrittenPartitions) or not batch.written:
        return 0
    adds = [NewPartition(p.values, p.location, p.fast_stats()) for p in batch.written
            if p.location is not None]  # all are staged
    size = catalog.capabilities.chunk("add", catalog.write_batch_size)
    calls = 0
    for start in range(0, len(adds), size):
        calls += catalog.add_partitions(temp, adds[start:start + size], {SWAP_ID_PARAM: batch.swap_id})
    return calls


def register_staged(client: Catalog, journal: Journal, swap_id: str) -> int:
    """Register on the temporary table of the staged swap ``swap_id`` the staged partitions it does not have yet,
    rebuilt from what is durable (the journal record, the staging directory): for a member of a swap group whose
    stage left them out (it was to be published at once, with no audit) when the group is kept staged instead.
    Returns the catalog calls made."""
    record = staged_record(journal, swap_id, doing="register the partitions of")
    if not record.temp_table or SwapKind(record.kind) != SwapKind.PARTITIONS:
        return 0
    batch = batch_of(record, client.get_table(record.db_name, record.table_name))
    if not isinstance(batch, WrittenPartitions):
        return 0
    temp = client.get_table(record.db_name, record.temp_table)
    have = set(client.list_partition_values(temp))
    missing = tuple(p for p in batch.written if p.values not in have)
    return register_partitions(client, temp, replace(batch, written=missing))


def pause(journal: Journal, batch: WrittenPartitions | WrittenTable, target: TableInfo, staging_location: str) -> None:
    """Journal the swap as staged (``staging`` → ``staged``), with its scope and the drops it plans now, and
    what it staged: its data files and sizes (one listing of ``staging_location``) and the target's format
    and columns it was written for, which its publish compares with the staging directory and the target then."""
    keys = target.partition_key_names
    drops = [pn.partition_name(keys, v) for v in getattr(batch, "drop", ())]
    scope = getattr(batch, "scope", None)
    files = staged_files(staging_location, keys)
    if not journal.mark_staged(batch.swap_id, drops, scope.to_json() if scope is not None else None,
                               files, written_for(target)):
        record = journal.get_swap(batch.swap_id)
        raise errors.NotStagedError(
            f"swap {batch.swap_id} is no longer staging (state {record.state if record else '?'}: aborted by "
            "`tableswap recover`?); it cannot be staged. Stage the batch again",
            table=f"{batch.db}.{batch.table}", swap_id=batch.swap_id, state=record.state if record else None)


def preview(batch: WrittenPartitions | WrittenTable, snapshot: Any) -> tuple[PartitionChange, ...]:
    """What a publish would change, planned from ``snapshot`` (an unlocked read)."""
    return tuple(c for c in batch.plan_against(snapshot).changes() if c.action != "unchanged")


# ---------------------------------------------------------------------- publish
def publish_operation(catalog: Catalog, journal: Journal, swap_id: str, if_unchanged_since: str | None = None,
                      classify: Classify | None = None) -> tuple[SwapRecord, TableInfo, Operation]:
    """The publish of the staged swap ``swap_id`` as an operation for the commit protocol, rebuilt from what is
    durable and checked before any lock (its staged files, the target's kind, ``if_unchanged_since``): its
    journal record, the target as read now, and the operation. Raises as :func:`publish` before its lock."""
    record = staged_record(journal, swap_id, doing="publish")
    bound = log.bind(swap_id=swap_id, table=record.table)
    target = catalog.get_table(record.db_name, record.table_name)
    partitioned = SwapKind(record.kind) == SwapKind.PARTITIONS
    eligibility.check_target(target, partitioned=partitioned)
    state = None if if_unchanged_since is None else TableState.decode(if_unchanged_since).require_for(
        target.qualified_name, partitioned=partitioned)
    recorded = journal.staged_batch(swap_id)
    # One listing of the staging directory, both checked against the files journaled at the stage and planned
    # from: what is published is exactly what was checked (no second listing that could differ).
    listing = storage.survey_staging(record.staging_location or "") if partitioned else None
    if recorded is not None:
        check_staged_files(record, recorded[0], target.partition_key_names if partitioned else (), listing)
    else:
        bound.warning("publish.files_unchecked", reason="staged before journal version 9: its files were not recorded")
    planning = PublishPlanning(LockedPlanning(batch_of(record, target, classify, listing), target, state),
                               shape_staged_for(catalog, record, recorded and recorded[1], bound))
    op = Operation(SwapKind(record.kind), swap_id, record.db_name, record.table_name, record.table_root,
                   planning, label=LABEL, rerun=RERUN, staging_location=record.staging_location,
                   temp_table=record.temp_table, app_id=record.app_id)
    return record, target, op


def publish(swap_id: str, *, if_unchanged_since: str | None = None, dry_run: bool = False,
            metastore_uri: str | None = None, journal_url: str | None = None, runtime: Runtime | None = None,
            spark: Any = None, classify: Classify | None = None, **options: Any) -> SwapResult:
    """Publish the staged swap ``swap_id``: its batch becomes what readers of the table see, exactly as the
    swap that staged it would have done, planned under the table lock from the table as it is then (so a
    publish after other swaps of the same partitions is serial-equivalent). Needs no Spark.

    Args:
        swap_id: the staged swap (``StagedSwap.swap_id``, ``tableswap staged``).
        if_unchanged_since: a state token (:func:`tableswap.table_state`) taken before staging: if a partition
            the batch touches changed since, the publish is refused with :class:`SwapConflictError`.
        dry_run: read, plan and check as the publish does, from the table as it is now and without its lock;
            change nothing (no lock, no journal write) and return the result the publish would return, marked
            ``dry_run``: the plan it would carry out (a publish plans again under the lock).
        spark: the caller's SparkSession, if any: its cache of the table is refreshed afterwards.
        classify: a predicate scope's evaluation on partitions added since the stage (the staging job's
            :class:`StagedSwap` passes it); without it such a partition refuses the publish.

    Raises:
        NotFoundError: the journal has no such swap.
        NotStagedError: it is already published or discarded, or was never staged; nothing was changed.
        SwapConflictError: ``if_unchanged_since`` no longer holds (or the table's root moved); nothing was
            changed, the swap stays staged.
        CommitStateUnknownError: the flip failed part way; ``tableswap recover`` finishes it.
    """
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        timer = Timer()
        not_alone(journal, swap_id, doing="publish")
        record, target, op = publish_operation(catalog, journal, swap_id, if_unchanged_since, classify)
        bound = log.bind(swap_id=swap_id, table=record.table)
        timer.mark("validate")
        if dry_run:
            return planned_publish(catalog, record, target, op, timer)
        bound.info("publish.start")
        notify.run_started(rt, op, target, continued=True)  # its lineage run, started when it was staged
        try:
            plan, commit_calls = commit(rt, target, op, catalog=catalog, timer=timer)
        except errors.CommitStateUnknownError:
            raise
        except BaseException as exc:
            # Staged again only when the failure mapping (ops/commit.py, `fail`) found that its flip never
            # started and marked it failed: nothing changed. Once its flip may have started (an interrupt, a
            # SystemExit from a scheduler's SIGTERM handler, during or after its first catalog write) it
            # stays pending with its intent, and `tableswap recover` finishes or undoes it from the stamps.
            if journal.restage(swap_id, f"publish failed before its flip, nothing changed: {type(exc).__name__}: {exc}",
                               states=(FAILED,)):
                bound.warning("publish.restaged", error=str(exc))
            elif _state(journal, swap_id) == PENDING:
                bound.error("publish.left_pending", error=f"{type(exc).__name__}: {exc}",
                            then=f"tableswap recover --table {record.table}")
            raise
        finish_committed(journal, catalog, swap_id, record.db_name, record.table_name, record.temp_table,
                         spark=spark, log=bound, what="publish")
        timer.mark("finish")
        result = result_from_plan(plan, record.kind, staging_location=record.staging_location,
                                  timings=timer.done(), calls=catalog.calls, commit_calls=commit_calls)
        bound.info("publish.done", added=len(result.added), replaced=len(result.replaced),
                   dropped=len(result.dropped))
        return result


def planned_publish(catalog: Catalog, record: SwapRecord, target: TableInfo, op: Operation, timer: Timer) -> SwapResult:
    """A publish's dry run: its read, plan and checks exactly as under the lock (:func:`plan_under_lock`), from an
    unlocked read; nothing written. The result the publish would return, marked ``dry_run``."""
    _, plan = plan_under_lock(catalog, target, op)
    timer.mark("plan")
    log.info("publish.dry_run", swap_id=record.swap_id, table=record.table)
    return result_from_plan(plan, record.kind, staging_location=record.staging_location, timings=timer.done(),
                            calls=catalog.calls, dry_run=True)


def not_alone(journal: Journal, swap_id: str, *, doing: str) -> None:
    """Refuse (nothing changed) to publish or discard alone a member of a group still open: its group is
    published or discarded as one unit (a member of a group that failed before its flips may go alone)."""
    group = GroupLog(journal).group_of(swap_id)
    if group is not None and group.state == GROUP_OPEN:
        label = group.group_id + (f" ({group.name})" if group.name else "")
        raise errors.InvalidInputError(
            f"swap {swap_id} is a member of the open swap group {label} ({', '.join(group.tables)}): a group is "
            f"published or discarded as one unit. Nothing was changed; `tableswap {doing} {group.group_id}`",
            swap_id=swap_id)


def _state(journal: Journal, swap_id: str) -> str | None:
    """The swap's journal state, None when the journal cannot say (a failure is being reported already)."""
    try:
        record = journal.get_swap(swap_id)
    except Exception:  # noqa: BLE001 - the journal is failing: the first error is the one to report
        return None
    return record.state if record else None


# ---------------------------------------------------------------------- discard
@dataclass(frozen=True)
class Discarded:
    """What :func:`discard` did."""

    swap_id: str
    table: str
    temp_table_dropped: str | None  # db.name, None when there was none
    queued: tuple[str, ...]  # the staged data queued for the janitor
    dry_run: bool = False  # what a discard would do: the temporary table it would drop, the data it would queue

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "queued": list(self.queued), "state": "staged" if self.dry_run else "aborted"}


def discard(swap_id: str, *, reason: str = "discarded", dry_run: bool = False, metastore_uri: str | None = None,
            journal_url: str | None = None, runtime: Runtime | None = None, **options: Any) -> Discarded:
    """Discard the staged swap ``swap_id``: nothing a reader sees changes. Its journal state goes ``staged`` →
    ``aborted`` first (a publish that comes second is refused, and a discard that comes second after a
    publish is refused: :class:`NotStagedError`), its staged data is queued for the janitor (deleted once the
    grace period ends) and its temporary table dropped (its data kept).

    ``dry_run``: the same checks, nothing changed; the :class:`Discarded` a discard would return (the temporary
    table it would drop, the data it would queue), marked ``dry_run``."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        record = staged_record(journal, swap_id, doing="discard")
        not_alone(journal, swap_id, doing="discard")
        where = record.staging_location
        own = loc.staging_location(record.table_root, swap_id) if record.table_root else None
        # Queued only when it is this swap's own directory under the table root (the janitor re-checks it).
        queued = ((("", where),) if where and own and loc.same(where, own) else ())
        if dry_run:
            temp = f"{record.db_name}.{record.temp_table}" if record.temp_table else None
            return Discarded(swap_id, record.table, temp, tuple(q[1] for q in queued), dry_run=True)
        if not journal.end_staged(swap_id, f"discarded: {reason}", queued):
            # A publish (or another discard) came first: nothing was changed here.
            staged_record(journal, swap_id, doing="discard")  # raises, naming its state now
            raise errors.NotStagedError(f"swap {swap_id} of {record.table} left state staged meanwhile; nothing "
                                        "was changed", table=record.table, swap_id=swap_id)
        dropped = None
        if record.temp_table:
            try:
                catalog.drop_table_keep_data(record.db_name, record.temp_table)
                dropped = f"{record.db_name}.{record.temp_table}"
            except errors.TableSwapError as exc:  # aborted already: the janitor drops it after its grace
                log.warning("discard.temp_drop_failed", swap_id=swap_id, error=str(exc))
        log.info("discard.done", swap_id=swap_id, table=record.table, queued=len(queued))
        notify.run_aborted(rt, catalog, swap_id, record.db_name, record.table_name, root=record.table_root,
                           staging_location=where)
        return Discarded(swap_id, record.table, dropped, tuple(q[1] for q in queued))


__all__ = ["StagedSwap", "Discarded", "publish", "discard"]
