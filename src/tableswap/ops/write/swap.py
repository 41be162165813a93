"""Orchestration of one swap:

stage write → enumerate → lock → read and plan under the lock (and check a state token) → journal
intent → flip → journal commit → drop the temporary table's metadata → refresh the writer's cache →
:class:`SwapResult` (``table_state``, the token a read-modify-write job passes back, is in ops/write/state.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tableswap.logs import get_logger

from tableswap import errors, storage
from tableswap.spark import api as sparkapi, reading, scope as spark_scope, staging
from tableswap.core import eligibility, partitions as pn
from tableswap.core import locations as loc
from tableswap.ops import notify
from tableswap.ops.commit import commit, fail
from tableswap.ops.operation import Operation, begin
from tableswap.faults import crash_point
from tableswap.journal.store import ABORTED, utcnow
from tableswap.ops.background import Background
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_CREATED_PARAM, TEMP_FOR_PARAM, TableInfo
from tableswap.core.checks import require, unchanged_checks
from tableswap.core.names import new_swap_id, parse_table_name, quoted, temp_table_name
from tableswap.core.plan import SwapPlan, WrittenPartitions, WrittenTable
from tableswap.core.scope import ReplaceScope, scope_from, split
from tableswap.core.state import TableState
from tableswap.core.result import SwapResult, Timer, result_from_plan
from tableswap.core.records import SwapKind
from tableswap.runtime import Runtime, use

log = get_logger("tableswap")


@dataclass(frozen=True)
class LockedPlanning:
    """The swap's :class:`~tableswap.core.plan.Planner`: its staged batch, planned under the lock after
    checking that the table is still the one validated, still as the caller's state token saw it
    (``if_unchanged_since``), and that no partition it replaces has a storage format of its own."""

    batch: WrittenPartitions | WrittenTable
    target: TableInfo
    state: TableState | None = None

    @property
    def swap_id(self) -> str:
        return self.batch.swap_id

    @property
    def db(self) -> str:
        return self.batch.db

    @property
    def table(self) -> str:
        return self.batch.table

    def reads(self) -> list[tuple[str, ...]]:
        return self.batch.reads()

    def plan_against(self, snapshot: Any) -> SwapPlan:
        now, target = snapshot.table, self.target
        if now.partition_key_names != target.partition_key_names:
            raise errors.SwapConflictError.of(
                target.qualified_name, [f"partition columns were ({', '.join(target.partition_key_names)}), now "
                                        f"({', '.join(now.partition_key_names)})"],
                since="since the swap validated it", then="Rerun the swap", swap_id=self.swap_id)
        if self.state is not None:
            keys = target.partition_key_names
            touched = [(pn.partition_name(keys, v), v) for v in self.reads()]
            require(unchanged_checks(self.state, touched), snapshot, table=target.qualified_name,
                    since="since the state token was taken", swap_id=self.swap_id,
                    then="Read the table again, recompute the batch and rerun with a new token")
        plan = self.batch.plan_against(snapshot)
        eligibility.check_replaced_partitions(now, [snapshot.partitions[a.values] for a in plan.replaces])
        return plan


class _Swap:
    """One ``swap_partitions`` / ``swap_table`` call."""

    def __init__(self, df: Any, table_name: str, *, partitioned: bool, rt: Runtime, dry_run: bool,
                 allow_empty: bool, replace_where: Any = None, if_unchanged_since: str | None = None) -> None:
        self.df = df
        self.replace_where = replace_where
        self.scope: ReplaceScope | None = None
        self.spark = sparkapi.session_of(df)
        self.partitioned = partitioned
        self.rt = rt
        self.settings = rt.settings
        self.dry_run = dry_run
        self.allow_empty = allow_empty
        current_db = None
        if not isinstance(table_name, str) or "." not in table_name:  # asked of Spark only when needed
            try:
                current_db = self.spark.catalog.currentDatabase()
            except Exception:  # noqa: BLE001
                current_db = None
        self.db, self.name = parse_table_name(table_name, current_db)
        self.state = None if if_unchanged_since is None else TableState.decode(if_unchanged_since).require_for(
            f"{self.db}.{self.name}", partitioned=partitioned)
        self.swap_id = new_swap_id()
        self.kind = SwapKind.of_swap(partitioned)
        self.log = log.bind(swap_id=self.swap_id, table=f"{self.db}.{self.name}")
        self.timer = Timer()

    def run(self) -> SwapResult:
        # A catalog Spark itself uses (the Hive Metastore) must be the session's; with one it does not (Glue),
        # Spark only writes files and the session's own catalog does not matter.
        self.spark_catalog = self.rt.capabilities.spark_catalog
        if self.spark_catalog:
            sparkapi.require_hive_catalog(self.spark)
        # Two connections: this thread's, and a side one for the metastore work that overlaps Spark's
        # (the staging table's create during the write, its drop during the cache refresh).
        # The side connection is pinged in the background, with the create (see _stage).
        rt = self.rt
        with rt.session(ping=False) as (client, journal), rt.client(ping=False) as side:
            self.client, self.journal, self.side = client, journal, side
            self.target_snapshot = client.snapshot(self.db, self.name)
            target = self.target_snapshot.table
            eligibility.check_target(target, partitioned=self.partitioned)
            layout = None if self.spark_catalog else staging.needs_spark_insert(target)
            if layout:
                raise errors.UnsupportedTableError(
                    f"{target.qualified_name} has {layout}: Spark lays such files out "
                    f"only when it inserts through a table of its own catalog, and on {client.capabilities.kind} "
                    "tableswap writes the batch as plain files. Nothing was changed",
                    table=target.qualified_name)
            schema = self.schema = self._target_schema(target)
            aligned = staging.align(self.df, schema, target.partition_key_names, table=target.qualified_name)
            if self.replace_where is not None:
                self._check_scope(target, schema)
            self.timer.mark("validate")
            self.log.info("swap.start", kind=self.kind, dry_run=self.dry_run)
            root = self.root = target.root or ""
            self.staging_location = loc.staging_location(root, self.swap_id)
            self.temp = temp_table_name(self.name, self.swap_id)
            op = Operation(self.kind, self.swap_id, self.db, self.name, root,
                           staging_location=self.staging_location, temp_table=self.temp,
                           app_id=sparkapi.app_id(self.spark), discard=self._discard_staging)
            begin(journal, op)
            if not self.dry_run:  # lineage START (a no-op unless OpenLineage is configured)
                notify.run_started(rt, op, target)
            try:
                planning = LockedPlanning(self._stage(target, aligned), target, self.state)
                op = op.planned(planning)
                if self.dry_run:
                    # A dry run plans from an unlocked read (a swap plans under the lock, in commit).
                    snapshot = client.snapshot(self.db, self.name, planning.reads())
                    plan = planning.plan_against(snapshot)
                    self.timer.mark("plan")
                    try:
                        self._discard_staging("dry run")
                    finally:
                        journal.finish(self.swap_id, state=ABORTED, error="dry run")
                    return result_from_plan(plan, self.kind, staging_location=None, timings=self.timer.done(),
                                            calls=client.calls, dry_run=True)
            except BaseException as exc:
                fail(journal, op, exc, flipped=False)
                raise
            plan, self.commit_calls = commit(rt, target, op, client=client, timer=self.timer)
            self.log.info("swap.planned", adds=len(plan.adds), replaces=len(plan.replaces),
                          table_change=plan.table_change is not None)
            self._finish()
            self.timer.mark("finish")
            result = result_from_plan(plan, self.kind, staging_location=self.staging_location,
                                      timings=self.timer.done(), calls=client.calls,
                                      commit_calls=self.commit_calls)
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

    def _stage(self, target: TableInfo, aligned: Any) -> WrittenPartitions | WrittenTable:
        """Write the batch into the staging location; what it wrote, to plan under the lock."""
        params = {TEMP_FOR_PARAM: target.qualified_name, SWAP_ID_PARAM: self.swap_id,
                  TEMP_CREATED_PARAM: utcnow()}
        # The temporary table (the marker of this in-flight swap) is created while Spark writes, on
        # the side connection, pinged first: a pooled connection may have been idle a long time.
        def create(c: Catalog) -> TableInfo:
            c.ping()
            return c.create_staging_table(target, self.temp, self.staging_location, params,
                                          snapshot=self.target_snapshot)

        # The staging directory is made here rather than by the metastore's create_table, which
        # makes a missing location itself through Hadoop: on the development metastore that tripled
        # the create's cost (9 → 31 ms on an idle metastore), work done while Spark writes.
        try:
            storage.make_dirs(self.staging_location)
        except OSError as exc:
            raise self._staging_error(target, exc) from exc
        creating = Background("create-staging-table", create, self.side)
        if staging.needs_spark_insert(target):
            # Bucketed or char/varchar: Spark lays out buckets, pads and checks char values only
            # when it inserts through a table that declares them, so the batch goes through the
            # staging table, once it exists.
            self.temp_created = creating.join()
            self._check_same_metastore()
            try:
                staging.insert(aligned, quoted(self.db, self.temp))
            except Exception as exc:  # noqa: BLE001 - Spark raises many types
                raise self._staging_error(target, exc) from exc
        else:
            try:
                staging.write(aligned, target, self.staging_location)
            except Exception as exc:  # noqa: BLE001 - Spark raises many types
                try:
                    creating.join()
                except Exception as create_exc:  # noqa: BLE001 - the write's error is the one to report
                    self.log.warning("swap.staging_table_failed", error=str(create_exc))
                raise self._staging_error(target, exc) from exc
            self.temp_created = creating.join()
            self._check_same_metastore()
        self.log.info("swap.staging_table_created", temp_table=self.temp, location=self.staging_location)
        self.timer.mark("staging_write")
        self.log.info("swap.staged")
        crash_point("after_staging_write")
        if self.partitioned:
            written = staging.written_partitions(self.staging_location, target.partition_key_names)
            self.timer.mark("enumerate")
            if not written and self.scope is None:
                raise errors.EmptyBatchError(
                    f"the batch for {target.qualified_name} has no rows, so no partition would be replaced; "
                    "nothing was changed",
                    table=target.qualified_name, swap_id=self.swap_id
                )
            if not written and not self.allow_empty:
                raise errors.EmptyBatchError(
                    f"the batch for {target.qualified_name} has no rows; with replace_where "
                    f"({self.scope.describe()}) it would empty every partition in that scope. Nothing was "
                    "changed (pass allow_empty=True to empty the scope on purpose)",
                    table=target.qualified_name, swap_id=self.swap_id
                )
            drop = self._scoped_drops(target, [p.values for p in written])
            return WrittenPartitions(self.swap_id, self.db, self.name, tuple(written), tuple(drop))
        if not self.allow_empty and self._staged_nothing(target):
            raise errors.EmptyBatchError(
                f"the batch for {target.qualified_name} has no rows; swapping it in would empty the table. "
                "Nothing was changed (pass allow_empty=True to swap in an empty table on purpose)",
                table=target.qualified_name, swap_id=self.swap_id
            )
        # One listing of the staged table (a partitioned batch's sizes come with its listing above): the
        # journal carries its size to the deletion queue once a later swap displaces it.
        size = staging.staged_bytes(self.staging_location)
        if size is None:
            self.log.warning("swap.staged_size_unknown", location=self.staging_location)
        self.timer.mark("enumerate")
        return WrittenTable(self.swap_id, self.db, self.name, self.staging_location, size)

    def _staged_nothing(self, target: TableInfo) -> bool:
        """The unpartitioned batch wrote no row: read through the staging table where Spark sees it, else
        the staged files with the table's format."""
        if self.spark_catalog:
            return self.spark.table(quoted(self.db, self.temp)).isEmpty()
        return reading.read_locations(self.spark, target, self.schema, [((), self.staging_location)]).isEmpty()

    def _check_scope(self, target: TableInfo, schema: Any) -> None:
        """Validate ``replace_where`` before anything is written."""
        keys = target.partition_key_names
        self.scope = scope_from(self.replace_where, keys, target.qualified_name)
        if self.scope.predicate is not None:
            spark_scope.check_predicate(self.spark, schema, keys, self.scope.predicate, target.qualified_name)
        self.scope_schema = schema

    def _scoped_drops(self, target: TableInfo, written: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """With a scope: refuse batch rows outside it; the existing partitions inside it that the
        batch has no rows for (to be dropped)."""
        if self.scope is None:
            return []
        keys = target.partition_key_names
        existing = self.client.list_partition_values(target)
        if self.scope.predicate is not None:
            inside = spark_scope.inside(self.spark, self.scope_schema, keys, self.scope.predicate,
                                        [*written, *existing])
        else:
            inside = {v for v in [*written, *existing] if self.scope.matches_spec(keys, v)}
        drops = split(keys, written, existing, inside, target.qualified_name, self.scope)
        self.log.info("swap.scope", scope=self.scope.describe(), in_scope=len(inside), drops=len(drops))
        return drops

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

    def _staging_error(self, target: TableInfo, exc: BaseException) -> errors.TableSwapError:
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
            segments = set(storage.list_dirs(self.staging_location)) if self.partitioned else set()
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

    def _finish(self) -> None:
        crash_point("during_temp_drop")
        # The temporary table is dropped while Spark refreshes the writer's cache. It is the one this
        # swap created under its random name: no need to read it again before dropping it.
        dropping = Background("drop-staging-table",
                              lambda c: c.drop_table_keep_data(self.db, self.temp, created=self.temp_created),
                              self.side)
        if self.spark_catalog:
            try:
                self.spark.catalog.refreshTable(quoted(self.db, self.name))
            except Exception as exc:  # noqa: BLE001 - never fail a committed swap on a cache refresh
                self.log.warning("swap.refresh_failed", error=str(exc))
        try:
            dropping.join()
        except errors.TableSwapError as exc:  # committed already: leave it to the janitor's sweep
            self.log.warning("swap.temp_drop_failed", temp_table=self.temp, error=str(exc))
        self.journal.finish(self.swap_id)

    def _discard_staging(self, reason: str = "failed") -> None:
        """Remove what this swap staged. Safe: nothing references the staging location yet."""
        try:
            self.client.drop_table_keep_data(self.db, self.temp)
        finally:
            staging_parent = loc.join(self.root, loc.STAGING_DIR)
            if loc.same(self.staging_location, loc.join(staging_parent, self.swap_id)):
                storage.delete_tree(self.staging_location)
                storage.remove_empty_dir(staging_parent)
            self.log.info("swap.staging_discarded", reason=reason)


def swap_partitions(df: Any, table: str, *, replace_where: Any = None, allow_empty: bool = False,
                    metastore_uri: str | None = None, journal_url: str | None = None, dry_run: bool = False,
                    if_unchanged_since: str | None = None, runtime: Runtime | None = None,
                    **options: Any) -> SwapResult:
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
            partition columns). Every existing partition in the scope is replaced by the batch's rows or,
            when the batch has none for it, dropped in one ``drop_partitions`` call (its data kept,
            queued for the janitor, restored by ``tableswap rollback``); partitions outside it are
            untouched.
        allow_empty: with ``replace_where``, an empty batch empties the scope (on purpose).
        dry_run: stage and plan (from an unlocked read), change nothing, return the plan's result.
        if_unchanged_since: a state token (:func:`tableswap.table_state`, or a previous
            :attr:`SwapResult.state_token`) taken when the job read its input: if any partition the
            batch touches changed since (and the token covers it), the swap is refused.

    Raises:
        SwapConflictError: ``if_unchanged_since`` was given and a partition the batch touches changed
            since the token was taken (listed in ``conflicts``); nothing was changed.
        InvalidInputError: bad input (a malformed token, or one of another table, a predicate that does
            not parse or names a non-partition column, among others).
        ScopeViolationError: a batch row lies outside ``replace_where``; nothing was changed.
        EmptyBatchError: the batch is empty (with a scope: unless ``allow_empty=True``).
    """
    with use(runtime, spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url,
             **options) as rt:
        if allow_empty and replace_where is None:
            raise errors.InvalidInputError(
                "allow_empty=True needs replace_where: without a scope an empty batch replaces no partition")
        return _Swap(df, table, partitioned=True, rt=rt, dry_run=dry_run, allow_empty=allow_empty,
                     replace_where=replace_where, if_unchanged_since=if_unchanged_since).run()


def swap_table(df: Any, table: str, *, metastore_uri: str | None = None, journal_url: str | None = None,
               dry_run: bool = False, allow_empty: bool = False, if_unchanged_since: str | None = None,
               runtime: Runtime | None = None, **options: Any) -> SwapResult:
    """Replace an unpartitioned table's contents by repointing its location in one ``alter_table``,
    planned under the table lock from the location read there.

    ``if_unchanged_since``: a state token of the table (see :func:`swap_partitions`): the swap is refused
    with :class:`SwapConflictError`, nothing changed, if the table changed since it was taken."""
    with use(runtime, spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url,
             **options) as rt:
        return _Swap(df, table, partitioned=False, rt=rt, dry_run=dry_run, allow_empty=allow_empty,
                     if_unchanged_since=if_unchanged_since).run()
