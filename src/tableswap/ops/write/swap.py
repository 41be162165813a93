"""Orchestration of one swap:

stage write → enumerate → lock → read and plan under the lock (and check a state token) → journal
intent → the temporary table's drop started (it runs during the flip) → flip → journal commit → the drop
waited for, the writer's cache refreshed where it can be stale → :class:`SwapResult` (``table_state``, the
token a read-modify-write job passes back, is in ops/write/state.py).

What a swap is asked to do is one value, a :class:`~tableswap.ops.write.request.SwapRequest`; :func:`run_swap`
carries it out with the batch and a runtime (the public functions below, a merge, a compaction, a SQL script's
overwrite), :func:`run_stage` up to its stage, paused as a staged swap. Two phases: the stage (``_stage_phase``:
validate, begin, write, enumerate) returns what it staged, a :class:`Staged`, which a dry run plans from and the
commit (``_commit_phase``) takes. Write, audit, publish (docs/audit.md) sits between them: ``checks`` run on the
staged batch before the commit; ``stage_partitions`` / ``stage_table`` stop after the stage with the swap journaled
as staged, and its publish (ops/write/staged.py, any process) is the commit phase rebuilt from the journal and the
staging directory.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Sequence

from tableswap.logs import get_logger

from tableswap import errors, storage
from tableswap.spark import api as sparkapi, inputs as spark_inputs, reading, scope as spark_scope, staging
from tableswap.core import distribution, eligibility, partitions as pn
from tableswap.core import locations as loc
from tableswap.ops import notify
from tableswap.ops.commit import commit, fail
from tableswap.ops.operation import Operation, begin, end_heartbeat
from tableswap.faults import crash_point
from tableswap.journal.store import ABORTED, Journal, utcnow
from tableswap.ops.background import Background
from tableswap.core.catalog_port import Catalog, Snapshot
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_CREATED_PARAM, TEMP_FOR_PARAM, PartitionInfo, TableInfo
from tableswap.core.names import new_swap_id, parse_table_name, quoted, temp_table_name
from tableswap.core.plan import WrittenPartitions, WrittenTable
from tableswap.core.planning import LockedPlanning
from tableswap.core.scope import Classify, ReplaceScope, ScopeDrops, scope_from, split
from tableswap.core.state import TableState
from tableswap.core.result import SwapResult, Timer, result_from_plan
from tableswap.core.records import SwapKind
from tableswap.runtime import Runtime, use
from tableswap.ops.write import staged as write_staged
from tableswap.ops.write.finish import TempTableDrop, finish_committed
from tableswap.ops.write.request import SwapRequest, checks_of, first_refusal
from tableswap.ops.write.staged import StagedSwap

log = get_logger("tableswap")
#: How a conflict's advice names an operation of a kind other than a plain swap.
_NOUNS = {SwapKind.MERGE: "merge", SwapKind.COMPACT: "compaction"}


def run_swap(df: Any, request: SwapRequest, runtime: Runtime) -> SwapResult:
    """Carry out ``request`` with the batch ``df`` through ``runtime`` (the caller's, left open): the swap's
    result, or with ``dry_run`` its plan's. Raises as :func:`swap_partitions`."""
    outcome = _Swap(df, request, runtime).run()
    assert isinstance(outcome, SwapResult), "only a stage pauses as a StagedSwap"
    return outcome


def run_stage(df: Any, request: SwapRequest, runtime: Runtime, *, keep_runtime: bool = False) -> StagedSwap:
    """Carry out ``request`` up to its stage and journal it as staged (:func:`stage_partitions`): the staged swap.
    ``keep_runtime``: it publishes and discards through ``runtime`` (the caller's own), else through a runtime
    of the same settings, one per call."""
    if request.dry_run:
        raise errors.InvalidInputError("a staged swap has no dry run: stage it, then `tableswap diff` shows what "
                                       "its publish would change", table=request.table)
    outcome = _Swap(df, request, runtime, stage_only=True, keep_runtime=keep_runtime).run()
    assert isinstance(outcome, StagedSwap), "a stage pauses as a StagedSwap"
    return outcome


@dataclasses.dataclass(frozen=True)
class Staged:
    """What a swap's stage leaves: the operation begun in the journal and planned from its batch, written to
    ``location`` with its temporary table created. Nothing a reader of the table sees has changed."""

    op: Operation  # planned: its planner is ``planning``
    planning: LockedPlanning
    target: TableInfo  # the table as read before the stage
    schema: Any  # the target's Spark schema the batch was aligned to
    location: str  # the staging location
    temp_created: TableInfo  # the temporary table, as created
    layout: distribution.Layout  # how the staging write laid out the batch, and why

    @property
    def batch(self) -> WrittenPartitions | WrittenTable:
        return self.planning.batch


class _Swap:
    """One run of a :class:`SwapRequest`: what it needs throughout, set once here; the connections it opens and
    what it staged are handed from step to step."""

    def __init__(self, df: Any, request: SwapRequest, rt: Runtime, *, stage_only: bool = False,
                 keep_runtime: bool = False) -> None:
        self.df = df
        self.request = request
        self.stage_only = stage_only  # stage_partitions / stage_table: pause as a staged swap
        self.keep_runtime = keep_runtime  # the caller's runtime: a StagedSwap publishes through it too
        self.spark = sparkapi.session_of(df)
        self.rt = rt
        self.settings = rt.settings
        # How the staging write lays out the batch: the settings' ([swap] write_distribution, "auto" resolved
        # per swap by _layout), unless the caller laid it out itself (a compaction: its files per partition
        # are its plan).
        self.write_distribution = request.write_distribution or rt.settings.write_distribution
        self.db, self.name = _table_name(self.spark, request.table)
        self.state = None if request.if_unchanged_since is None else TableState.decode(
            request.if_unchanged_since).require_for(f"{self.db}.{self.name}", partitioned=request.partitioned)
        self.swap_id = new_swap_id()
        # A merge or a compaction is a swap of its own kind (its journal record, history, manifest).
        self.kind = request.swap_kind
        self.temp = temp_table_name(self.name, self.swap_id)
        self.log = log.bind(swap_id=self.swap_id, table=f"{self.db}.{self.name}")
        self.timer = Timer()
        # A catalog Spark itself uses (the Hive Metastore) must be the session's; with one it does not (Glue),
        # Spark only writes files and the session's own catalog does not matter.
        self.spark_catalog = rt.capabilities.spark_catalog

    def run(self) -> SwapResult | StagedSwap:
        if self.spark_catalog:
            sparkapi.require_hive_catalog(self.spark)
        # Two connections: this thread's, and a side one for the metastore work that overlaps Spark's
        # (the staging table's create during the write, its drop during the cache refresh).
        # The side connection is pinged in the background, with the create (see _write).
        with self.rt.session(ping=False) as (catalog, journal), self.rt.catalog(ping=False) as side:
            try:
                staged = self._stage_phase(catalog, journal, side)
                try:
                    if self.request.dry_run:
                        return self._dry_run(catalog, journal, staged)
                    if (self.stage_only and self.request.register_staged) or self.request.checks:
                        # Readers audit the staged batch through its temporary table (Spark, Trino): with its
                        # partitions.
                        if not staging.needs_spark_insert(staged.target):  # Spark's own insert registered them
                            write_staged.register_partitions(catalog, staged.temp_created, staged.batch)
                        self.timer.mark("register")
                    if self.stage_only:
                        return self._pause(catalog, journal, staged)
                except BaseException as exc:
                    fail(journal, staged.op, exc, flipped=False)
                    raise
                if self.request.checks:
                    self._audit(catalog, journal, staged)
                return self._commit_phase(catalog, journal, side, staged)
            finally:
                end_heartbeat(self.swap_id)  # committed, failed, staged or a dry run: no longer beating

    def _stage_phase(self, catalog: Catalog, journal: Journal, side: Catalog) -> Staged:
        """Validate, begin, stage: the operation planned from its staged batch. Nothing a reader sees changes."""
        request = self.request
        snapshot = catalog.snapshot(self.db, self.name)
        target = snapshot.table
        eligibility.check_target(target, partitioned=request.partitioned)
        layout = None if self.spark_catalog else staging.needs_spark_insert(target)
        if layout:
            raise errors.UnsupportedTableError(
                f"{target.qualified_name} has {layout}: Spark lays such files out "
                f"only when it inserts through a table of its own catalog, and on {catalog.capabilities.kind} "
                "tableswap writes the batch as plain files. Nothing was changed",
                table=target.qualified_name)
        schema = self._target_schema(target)
        aligned = staging.align(self.df, schema, target.partition_key_names, table=target.qualified_name)
        scope = None if request.replace_where is None else self._check_scope(target, schema)
        self.timer.mark("validate")
        self.log.info("swap.start", kind=self.kind, dry_run=request.dry_run, stage_only=self.stage_only,
                      audit=len(request.checks))
        root = target.root or ""
        location = loc.staging_location(root, self.swap_id)
        op = Operation(self.kind, self.swap_id, self.db, self.name, root,
                       staging_location=location, temp_table=self.temp, app_id=sparkapi.app_id(self.spark),
                       discard=functools.partial(self._discard_staging, catalog, root, location),
                       rerun=f"Rerun the {_NOUNS.get(self.kind, 'swap')}", input_conflicts=request.input_conflicts,
                       group_id=request.group_id)
        begin(journal, op, heartbeat_s=self.settings.heartbeat_s)
        if not request.dry_run:  # lineage START (a no-op unless OpenLineage is configured)
            notify.run_started(self.rt, op, target, read_from=lambda: spark_inputs.read_sources(self.df))
        try:
            write_layout = self._layout(journal, target, aligned, scope)
            created = self._write(side, snapshot, aligned, location, write_layout)
            batch = self._enumerate(catalog, target, schema, scope, location, write_layout)
            planning = LockedPlanning(batch, target, self.state)
            if request.verify is not None:  # sees the staged batch before the lock, may refuse it
                request.verify(planning.batch)
            op = op.planned(planning)
        except BaseException as exc:
            fail(journal, op, exc, flipped=False)
            raise
        return Staged(op, planning, target, schema, location, created, write_layout)

    def _dry_run(self, catalog: Catalog, journal: Journal, staged: Staged) -> SwapResult:
        """A dry run plans from an unlocked read (a swap plans under the lock, in commit), then discards its batch."""
        snapshot = catalog.snapshot(self.db, self.name, staged.planning.reads())
        plan = staged.planning.plan_against(snapshot)
        self.timer.mark("plan")
        try:
            self._discard_staging(catalog, staged.op.table_root, staged.location, "dry run")
        finally:
            journal.finish(self.swap_id, state=ABORTED, error="dry run")
        return result_from_plan(plan, self.kind, staging_location=None, timings=self.timer.done(),
                                calls=catalog.calls, dry_run=True, write_distribution=staged.layout)

    def _pause(self, catalog: Catalog, journal: Journal, staged: Staged) -> StagedSwap:
        """Journal the swap as staged (between its stage and its commit) and describe it."""
        batch = staged.batch
        write_staged.pause(journal, batch, staged.target, staged.location)
        try:
            partitions = write_staged.preview(batch, catalog.snapshot(self.db, self.name, batch.reads()))
        except errors.TableSwapError as exc:  # staged already: what it would change is shown by `tableswap diff`
            self.log.warning("swap.preview_failed", error=str(exc))
            partitions = ()
        self.log.info("swap.staged_for_publish", partitions=len(partitions))
        own_runtime = self.rt if self.keep_runtime else None
        scope = getattr(batch, "scope", None)  # its publish evaluates a predicate scope with this session
        return StagedSwap(self.swap_id, f"{self.db}.{self.name}", f"{self.db}.{self.temp}", partitions,
                          staged.location, runtime=own_runtime, settings=self.settings, spark=self.spark,
                          classify=scope.classify if scope is not None else None)

    def _audit(self, catalog: Catalog, journal: Journal, staged: Staged) -> None:
        """Run the audit's checks on the staged batch; a refusal raises :class:`AuditFailedError` with nothing
        changed, the batch kept as a staged swap (``keep_on_failure``) or discarded."""
        op, target, keep = staged.op, staged.target, self.request.keep_on_failure
        try:
            frame = self._staged_frame(staged)
        except BaseException as exc:
            fail(journal, op, exc, flipped=False)
            raise
        refused = first_refusal(self.request.checks, frame, self.log, "swap")
        if refused is not None:
            name, why, cause = refused
            self.log.warning("swap.audit_failed", check=name, error=why, kept=keep)
            if keep:
                error = errors.AuditFailedError(
                    f"the audit of {target.qualified_name} refused the batch: check {name!r} failed ({why}). Nothing "
                    f"was changed; the batch is kept as staged swap {self.swap_id} (its temporary table "
                    f"{self.db}.{self.temp}): inspect it, then `tableswap publish {self.swap_id}` or "
                    f"`tableswap discard {self.swap_id}`", table=target.qualified_name, swap_id=self.swap_id,
                    check=name, kept=True)
                try:
                    self._pause(catalog, journal, staged)
                except BaseException as exc:
                    fail(journal, op, exc, flipped=False)
                    raise
            else:
                error = errors.AuditFailedError(
                    f"the audit of {target.qualified_name} refused the batch: check {name!r} failed ({why}). Nothing "
                    "was changed; the staged batch was discarded", table=target.qualified_name,
                    swap_id=self.swap_id, check=name, kept=False)
                fail(journal, op, error, flipped=False)
            if cause is not None:
                raise error from cause
            raise error
        self.timer.mark("audit")

    def _staged_frame(self, staged: Staged) -> Any:
        """The staged batch as a DataFrame: its temporary table where Spark uses the catalog, else its files."""
        if self.spark_catalog:
            return self.spark.table(quoted(self.db, self.temp))
        batch = staged.batch
        if isinstance(batch, WrittenPartitions):
            parts = [(p.values, p.location) for p in batch.written if p.location is not None]  # all are staged
        else:
            parts = [((), staged.location)]
        return reading.read_locations(self.spark, staged.target, staged.schema, parts)

    def _commit_phase(self, catalog: Catalog, journal: Journal, side: Catalog, staged: Staged) -> SwapResult:
        """Commit the staged operation (ops/commit.py: lock, plan from the state read there, intent, flip,
        commit), then drop its temporary table; its result."""
        # The temporary table is dropped on the side connection from the journaled intent on, during the flip
        # (the operation's before_flip; why that is safe: TempTableDrop). It is the one this swap created under its
        # random name: no need to read it again before dropping it.
        dropping = TempTableDrop(side, self.db, self.temp, staged.temp_created)
        op = dataclasses.replace(staged.op, before_flip=dropping.start)
        try:
            plan, commit_calls = commit(self.rt, staged.target, op, catalog=catalog, timer=self.timer)
        except BaseException:
            try:
                dropping.join()  # the side connection goes back to the pool idle
            except errors.TableSwapError as exc:  # the failure's own discard dropped it, or recover and the janitor do
                self.log.warning("swap.temp_drop_failed", temp_table=self.temp, error=str(exc))
            raise
        self.log.info("swap.planned", adds=len(plan.adds), replaces=len(plan.replaces),
                      table_change=plan.table_change is not None)
        crash_point("during_temp_drop")
        # Spark refreshes the writer's cache only where some of it can be stale (sparkapi.needs_refresh).
        refresh = self.spark_catalog and sparkapi.needs_refresh(self.spark,
                                                                table_location_changed=plan.table_change is not None)
        finish_committed(journal, side, self.swap_id, self.db, self.name, self.temp, created=staged.temp_created,
                         spark=self.spark if refresh else None, log=self.log, what="swap", dropping=dropping)
        self.timer.mark("finish")
        result = result_from_plan(plan, self.kind, staging_location=staged.location,
                                  timings=self.timer.done(), calls=catalog.calls, commit_calls=commit_calls,
                                  write_distribution=staged.layout)
        self.log.info("swap.done", added=len(result.added), replaced=len(result.replaced),
                      unchanged=len(result.unchanged), seconds=result.timings["total"])
        return result

    # ------------------------------------------------------------------ steps
    def _target_schema(self, target: TableInfo) -> Any:
        """The target's Spark schema: the one a Spark-created table stores in the metastore, else
        (a table created by Hive, or columns changed since) Spark's own resolution of the table."""
        stored = reading.stored_schema(target)
        if stored is not None:
            return stored
        if not self.spark_catalog:
            return reading.catalog_schema(self.spark, target)
        return self.spark.table(quoted(self.db, self.name)).schema

    def _layout(self, journal: Journal, target: TableInfo, aligned: Any,
                scope: ReplaceScope | None) -> distribution.Layout:
        """How the staging write lays out the batch: ``write_distribution`` as the rule resolves it for this
        swap (:func:`tableswap.core.distribution.choose`), from what is known before the write: the target's
        storage and shape, the partitions the batch touches at most (its ``replace_where`` listing every
        partition column's value, else as many as the table's last swap wrote), whether it is clustered already."""
        asked, keys = self.write_distribution, target.partition_key_names
        partitions: int | None = None
        source = ""
        if asked == distribution.AUTO and self.request.partitioned and keys:
            if scope is not None and scope.predicate is None and all(len(s) == len(keys) for s in scope.specs):
                partitions, source = len(scope.specs), "its replace_where lists them"
            else:
                partitions = journal.last_batch_partitions(self.db, self.name)
                source = "the table's last swap wrote as many"
        return distribution.choose(asked, location=target.root or "", partitioned=self.request.partitioned,
                                   insert_layout=staging.needs_spark_insert(target), partitions=partitions,
                                   partitions_source=source,
                                   clustered=lambda: staging.clustered_by_partition(aligned, target))

    def _write(self, side: Catalog, snapshot: Snapshot, aligned: Any, location: str,
               layout: distribution.Layout) -> TableInfo:
        """Write the batch into the staging ``location``, laid out as ``layout`` says, while the temporary table
        is created on ``side``: that table as created."""
        target = snapshot.table
        params = {TEMP_FOR_PARAM: target.qualified_name, SWAP_ID_PARAM: self.swap_id,
                  TEMP_CREATED_PARAM: utcnow()}
        # The temporary table (the marker of this in-flight swap) is created while Spark writes, on
        # the side connection, pinged first: a pooled connection may have been idle a long time.
        def create(c: Catalog) -> TableInfo:
            c.ping()
            return c.create_staging_table(target, self.temp, location, params, snapshot=snapshot)

        # The staging directory is made here rather than by the metastore's create_table, which
        # makes a missing location itself through Hadoop: on the development metastore that tripled
        # the create's cost (9 → 31 ms on an idle metastore), work done while Spark writes.
        try:
            storage.make_dirs(location)
        except OSError as exc:
            raise self._staging_error(target, location, exc) from exc
        creating = Background("create-staging-table", create, side)
        created: TableInfo
        if staging.needs_spark_insert(target):
            # Bucketed or char/varchar: Spark lays out buckets, pads and checks char values only
            # when it inserts through a table that declares them, so the batch goes through the
            # staging table, once it exists (and is laid out by that insert: no write distribution).
            created = creating.join()
            self._check_same_metastore()
            try:
                staging.insert(aligned, quoted(self.db, self.temp))
            except Exception as exc:  # noqa: BLE001 - Spark raises many types
                raise self._staging_error(target, location, exc) from exc
        else:
            try:
                staging.write(aligned, target, location, distribution=layout.applied)
            except Exception as exc:  # noqa: BLE001 - Spark raises many types
                try:
                    creating.join()
                except Exception as create_exc:  # noqa: BLE001 - the write's error is the one to report
                    self.log.warning("swap.staging_table_failed", error=str(create_exc))
                raise self._staging_error(target, location, exc) from exc
            created = creating.join()
            self._check_same_metastore()
        self.log.info("swap.staging_table_created", temp_table=self.temp, location=location)
        self.timer.mark("staging_write")
        self.log.info("swap.staged", write_distribution=layout.applied, write_distribution_asked=layout.asked,
                      write_distribution_reason=layout.reason)
        crash_point("after_staging_write")
        return created

    def _enumerate(self, catalog: Catalog, target: TableInfo, schema: Any, scope: ReplaceScope | None,
                   location: str, layout: distribution.Layout) -> WrittenPartitions | WrittenTable:
        """What the write left in the staging ``location``, to plan under the lock (with a ``scope``: and the
        partitions in it to drop)."""
        request = self.request
        if request.partitioned:
            written = staging.written_partitions(location, target.partition_key_names)
            if request.stored_values is not None:
                written = [dataclasses.replace(p, values=request.stored_values(p.values)) for p in written]
            have = {p.values for p in written}
            written += [storage.empty_partition(location, target.partition_key_names, values)
                        for values in request.empty_partitions if values not in have]
            self.timer.mark("enumerate")
            if not staging.needs_spark_insert(target) and self.kind != SwapKind.COMPACT:  # its files are its plan
                self._advise(layout, written)
            if not written and scope is None:
                raise errors.EmptyBatchError(
                    f"the batch for {target.qualified_name} has no rows, so no partition would be replaced; "
                    "nothing was changed",
                    table=target.qualified_name, swap_id=self.swap_id
                )
            if not written and scope is not None and not request.allow_empty:
                raise errors.EmptyBatchError(
                    f"the batch for {target.qualified_name} has no rows; with replace_where "
                    f"({scope.describe()}) it would empty every partition in that scope. Nothing was "
                    "changed (pass allow_empty=True to empty the scope on purpose)",
                    table=target.qualified_name, swap_id=self.swap_id
                )
            drop, drops = self._scoped_drops(catalog, target, schema, scope, [p.values for p in written])
            return WrittenPartitions(self.swap_id, self.db, self.name, tuple(written), tuple(drop), drops)
        if not request.allow_empty and self._staged_nothing(target, schema, location):
            raise errors.EmptyBatchError(
                f"the batch for {target.qualified_name} has no rows; swapping it in would empty the table. "
                "Nothing was changed (pass allow_empty=True to swap in an empty table on purpose)",
                table=target.qualified_name, swap_id=self.swap_id
            )
        # One listing of the staged table (a partitioned batch's sizes come with its listing above): the
        # journal carries its size to the deletion queue once a later swap displaces it.
        size = staging.staged_bytes(location)
        if size is None:
            self.log.warning("swap.staged_size_unknown", location=location)
        self.timer.mark("enumerate")
        return WrittenTable(self.swap_id, self.db, self.name, location, size)

    def _staged_nothing(self, target: TableInfo, schema: Any, location: str) -> bool:
        """The unpartitioned batch wrote no row: read through the staging table where Spark sees it, else
        the staged files with the table's format."""
        if self.spark_catalog:
            return bool(self.spark.table(quoted(self.db, self.temp)).isEmpty())
        return bool(reading.read_locations(self.spark, target, schema, [((), location)]).isEmpty())

    def _check_scope(self, target: TableInfo, schema: Any) -> ReplaceScope:
        """Validate ``replace_where`` before anything is written: the scope."""
        keys = target.partition_key_names
        scope = scope_from(self.request.replace_where, keys, target.qualified_name)
        if scope.predicate is not None:
            spark_scope.check_predicate(self.spark, schema, keys, scope.predicate, target.qualified_name)
        return scope

    def _scoped_drops(self, catalog: Catalog, target: TableInfo, schema: Any, scope: ReplaceScope | None,
                      written: list[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], ScopeDrops | None]:
        """With a scope: refuse batch rows outside it; the existing partitions inside it that the batch has
        no rows for (to be dropped: planned again under the lock), and the scope as the lock holder applies
        it (a predicate evaluated here on every partition known now; under the lock, with Spark, only on
        those added meanwhile)."""
        if scope is None:
            return [], None
        keys = target.partition_key_names
        existing = catalog.list_partition_values(target)
        known = {*written, *existing}
        predicate = scope.predicate
        classify: Classify | None = None
        if predicate is not None:
            def evaluate(values: Sequence[tuple[str, ...]]) -> set[tuple[str, ...]]:
                return spark_scope.inside(self.spark, schema, keys, predicate, values)

            classify = evaluate
            inside = evaluate(sorted(known))
        else:
            inside = {v for v in known if scope.matches_spec(keys, v)}
        drops = split(keys, written, existing, inside, target.qualified_name, scope)
        self.log.info("swap.scope", scope=scope.describe(), in_scope=len(inside), drops=len(drops))
        return drops, ScopeDrops(scope, tuple(keys), target.qualified_name, frozenset(inside),
                                 frozenset(known - inside), classify)

    def _check_same_metastore(self) -> None:
        """The SparkSession must use the metastore tableswap flips in; checked through Spark's
        catalog unless the session is configured with that very URI (or Spark only writes files)."""
        if not self.spark_catalog:
            return
        configured = sparkapi.conf_get(self.spark, "spark.hadoop.hive.metastore.uris") or ""
        ours = self.settings.metastore_uri.split(",")[0].strip()  # the adapter talks to the first URI
        if ours in [u.strip() for u in configured.split(",")]:
            return
        if not self.spark.catalog.tableExists(quoted(self.db, self.temp)):
            raise errors.ConfigurationError(
                f"the SparkSession does not see the staging table {self.db}.{self.temp} that tableswap created "
                f"in {self.settings.metastore_uri}: the session uses a different metastore "
                f"(spark.hadoop.hive.metastore.uris={configured or None})"
            )

    def _staging_error(self, target: TableInfo, location: str, exc: BaseException) -> errors.TableSwapError:
        if isinstance(exc, errors.TableSwapError):
            return exc
        full = str(exc)
        text = full.strip().splitlines()[0] if full.strip() else type(exc).__name__
        cause = sparkapi.java_cause(full)
        if cause and cause not in text:
            text = f"{text} {cause}"
        # A partition value too long for the metastore (or for a directory name) makes the write or
        # the staging table's partition registration fail: name it instead of a Spark stack trace.
        keys = set(target.partition_key_names)
        try:
            segments = set(storage.list_dirs(location)) if self.request.partitioned else set()
        except Exception:  # noqa: BLE001 - the storage may be what failed: the write's error is the one to report
            segments = set()
        segments.update(m.group(0) for m in re.finditer(r"(?<=/)[^/\s=]+=[^/\s]+", full))
        for segment in sorted(segments):
            key, _, raw = segment.partition("=")
            value = pn.unescape(raw)
            if pn.unescape(key).lower() in keys and (
                len(value) > pn.MAX_VALUE_LENGTH or len(segment.encode()) > 255
            ):
                return errors.InvalidPartitionValueError(
                    f"partition value for {pn.unescape(key)!r} is {len(value)} characters long; the Hive "
                    f"Metastore stores at most {pn.MAX_VALUE_LENGTH} and a directory name at most 255 bytes "
                    f"(value starts {value[:40]!r}). Nothing was changed.",
                    table=target.qualified_name, swap_id=self.swap_id
                )
        return errors.StagingWriteError(
            f"writing the batch for {target.qualified_name} failed; the target is unchanged: {text}",
            table=target.qualified_name, swap_id=self.swap_id
        )

    def _advise(self, layout: distribution.Layout, written: Sequence[PartitionInfo]) -> None:
        """Log the advice to cluster the batch by partition when its write left many small files per partition
        (:func:`tableswap.core.distribution.advice`)."""
        files = sum(int(p.parameters.get("numFiles", 0)) for p in written)
        size = sum(int(p.parameters.get("totalSize", 0)) for p in written)
        hint = distribution.advice(layout.applied, len(written), files, size, layout.asked)
        if hint is not None:
            self.log.info("swap.write_distribution_advice", partitions=len(written), files=files, advice=hint)


    def _discard_staging(self, catalog: Catalog, root: str, location: str, reason: str = "failed") -> None:
        """Remove what this swap staged. Safe: nothing references the staging location yet."""
        try:
            catalog.drop_table_keep_data(self.db, self.temp)
        finally:
            staging_parent = loc.join(root, loc.STAGING_DIR)
            if loc.same(location, loc.join(staging_parent, self.swap_id)):
                storage.delete_tree(location)
                storage.remove_empty_dir(staging_parent)
            self.log.info("swap.staging_discarded", reason=reason)


def _table_name(spark: Any, table: Any) -> tuple[str, str]:
    """``db``, ``name`` of ``table``, a table of the session's current database unless qualified."""
    current_db = None
    if not isinstance(table, str) or "." not in table:  # asked of Spark only when needed
        try:
            current_db = spark.catalog.currentDatabase()
        except Exception:  # noqa: BLE001 - a session that cannot say: the name must then be qualified
            current_db = None
    return parse_table_name(table, current_db)


def swap_partitions(df: Any, table: str, *, replace_where: Any = None, allow_empty: bool = False,
                    metastore_uri: str | None = None, journal_url: str | None = None, dry_run: bool = False,
                    if_unchanged_since: str | None = None, audit: Any = None, keep_on_failure: bool = True,
                    runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Replace exactly the partitions present in ``df`` and add the new ones, atomically per partition.

    The batch is written once to a fresh directory. Then, under the table's EXCLUSIVE metastore lock,
    the target's current partitions for the batch are read once, planned from, and repointed in one
    ``add_partitions`` and one ``alter_partitions`` call: concurrent swaps of one table give the table
    that running them one after the other (in lock order) gives. Old directories are kept and queued
    for the janitor.

    Args:
        df: the batch (a Spark DataFrame with the target's columns).
        table: ``db.table`` (or a table of the session's current database).
        replace_where: the partitions the swap owns, as Delta's ``replaceWhere``: a Spark SQL predicate
            on the partition columns (``"dt >= '2026-06-01' AND dt <= '2026-06-07'"``) or a list of
            partition specs (``["dt=2026-06-01", {"dt": "2026-06-02"}]``; a spec may name only some
            partition columns). Every partition in the scope (as listed under the table lock) is replaced
            by the batch's rows or, when the batch has none for it, dropped in one ``drop_partitions`` call
            (its data kept, queued for the janitor, restored by ``tableswap rollback``); partitions outside it
            are untouched.
        allow_empty: with ``replace_where``, an empty batch empties the scope (on purpose).
        dry_run: stage and plan (from an unlocked read), change nothing, return the plan's result.
        if_unchanged_since: a state token (:func:`tableswap.table_state`, or a previous
            :attr:`SwapResult.state_token`) taken when the job read its input: if any partition the
            batch touches changed since (and the token covers it), the swap is refused.
        audit: write, audit, publish: a check (a callable given the staged batch as a DataFrame, read
            through its temporary table), or a list of them, run after the batch is staged and before
            the lock is taken; one that raises or returns ``False`` refuses the batch
            (:class:`AuditFailedError`), nothing a reader sees changed (docs/audit.md).
        keep_on_failure: with ``audit``, a refused batch is kept as a staged swap for inspection
            (``tableswap staged``, then ``tableswap publish`` or ``tableswap discard``); ``False``:
            discarded at once.
        options: the swap options of ``[swap]`` (docs/configuration.md), e.g. ``lock_timeout_s=60`` or
            ``write_distribution="partition"`` (the batch clustered by partition before its write: about
            one file per partition).

    Raises:
        SwapConflictError: ``if_unchanged_since`` was given and a partition the batch touches changed
            since the token was taken (listed in ``conflicts``); nothing was changed.
        InvalidInputError: bad input (a malformed token, or one of another table, a predicate that does
            not parse or names a non-partition column, among others).
        ScopeViolationError: a batch row lies outside ``replace_where``; nothing was changed.
        EmptyBatchError: the batch is empty (with a scope: unless ``allow_empty=True``).
        AuditFailedError: a check of ``audit`` refused the batch (its ``check`` names it); nothing was changed.
    """
    with use(runtime, spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url,
             **options) as rt:
        request = SwapRequest(table, replace_where=replace_where, allow_empty=allow_empty,
                              if_unchanged_since=if_unchanged_since, dry_run=dry_run, checks=checks_of(audit),
                              keep_on_failure=keep_on_failure)
        return run_swap(df, request, rt)


def swap_table(df: Any, table: str, *, metastore_uri: str | None = None, journal_url: str | None = None,
               dry_run: bool = False, allow_empty: bool = False, if_unchanged_since: str | None = None,
               audit: Any = None, keep_on_failure: bool = True, runtime: Runtime | None = None,
               **options: Any) -> SwapResult:
    """Replace an unpartitioned table's contents by repointing its location in one ``alter_table``,
    planned under the table lock from the location read there.

    ``if_unchanged_since``: a state token of the table (see :func:`swap_partitions`): the swap is refused
    with :class:`SwapConflictError`, nothing changed, if the table changed since it was taken.
    ``audit``, ``keep_on_failure``: checks of the staged batch before it is swapped in (see :func:`swap_partitions`)."""
    with use(runtime, spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url,
             **options) as rt:
        request = SwapRequest(table, partitioned=False, allow_empty=allow_empty, if_unchanged_since=if_unchanged_since,
                              dry_run=dry_run, checks=checks_of(audit), keep_on_failure=keep_on_failure)
        return run_swap(df, request, rt)


def stage_partitions(df: Any, table: str, *, replace_where: Any = None, allow_empty: bool = False,
                     metastore_uri: str | None = None, journal_url: str | None = None,
                     runtime: Runtime | None = None, **options: Any) -> StagedSwap:
    """Write the batch as :func:`swap_partitions` would and journal it as **staged**: nothing a reader of
    the table sees changes. The batch is queryable as :attr:`StagedSwap.staged_table` (Spark, Trino);
    :meth:`StagedSwap.publish` makes it visible (any process can: ``tableswap publish SWAP_ID``) and
    :meth:`StagedSwap.discard` throws it away. Unpublished, the janitor discards it after ``[janitor]
    staged_ttl`` (7 days). ``replace_where`` and ``allow_empty`` as for :func:`swap_partitions` (the drops
    of its scope are planned again under the lock when it is published; a predicate scope needs Spark then
    for a partition created since: :meth:`StagedSwap.publish` has it, ``tableswap publish`` refuses).

    Raises: as :func:`swap_partitions` before its lock (bad input, an empty batch, a failed write)."""
    with use(runtime, spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url,
             **options) as rt:
        request = SwapRequest(table, replace_where=replace_where, allow_empty=allow_empty)
        return run_stage(df, request, rt, keep_runtime=runtime is not None)


def stage_table(df: Any, table: str, *, allow_empty: bool = False, metastore_uri: str | None = None,
                journal_url: str | None = None, runtime: Runtime | None = None, **options: Any) -> StagedSwap:
    """Write an unpartitioned table's new contents as :func:`swap_table` would and journal them as
    **staged**; see :func:`stage_partitions`."""
    with use(runtime, spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url,
             **options) as rt:
        return run_stage(df, SwapRequest(table, partitioned=False, allow_empty=allow_empty), rt,
                         keep_runtime=runtime is not None)


def stage_member(df: Any, table: str, *, partitioned: bool, group_id: str, runtime: Runtime,
                 replace_where: Any = None, allow_empty: bool = False, register: bool = True) -> StagedSwap:
    """Stage ``df`` for ``table`` as :func:`stage_partitions` / :func:`stage_table` do, as a member of the swap
    group ``group_id`` (ops/write/group.py): its lineage is the group's run, not one of its own. ``register``:
    False leaves its temporary table without the staged partitions (the group registers them if it is not
    published: :func:`tableswap.ops.write.staged.register_staged`)."""
    request = SwapRequest(table, partitioned=partitioned, replace_where=replace_where, allow_empty=allow_empty,
                          group_id=group_id, register_staged=register)
    return run_stage(df, request, runtime, keep_runtime=True)
