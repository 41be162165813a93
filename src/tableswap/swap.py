"""Orchestration of one swap:

stage write → enumerate → plan → lock → re-check (CAS) → journal intent → flip → journal commit
→ drop the temporary table's metadata → refresh the writer's cache → :class:`SwapResult`.
"""

from __future__ import annotations

import datetime as dt
import re
import getpass
import secrets
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from .logs import get_logger

from . import errors, sparkapi, staging, storage
from . import partitions as pn
from . import locations as loc
from .config import Settings, resolve
from .faults import crash_point
from .journal import ABORTED, FAILED, PENDING, STAGING, Journal, SwapItem, SwapRecord, utcnow
from .metastore.client import MetastoreClient, TableSnapshot
from .metastore.lock import TableLock
from .metastore.pool import POOL
from .metastore.model import (
    ROOT_PARAM,
    SWAP_ID_PARAM,
    PartitionInfo,
    TEMP_CREATED_PARAM,
    TEMP_FOR_PARAM,
    TableInfo,
)
from .plan import ADD, SwapPlan, plan_partitions, plan_table
from .result import PartitionChange, SwapResult

log = get_logger("tableswap")

TEMP_MARKER = "__tswap_"


_JAVA_EXCEPTION = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b.*")


def java_cause(text: str, limit: int = 600) -> str | None:
    """The innermost Java exception line of a Py4J error's text (``Caused by: ...``), e.g. the S3 client's
    ``NoSuchBucketException`` under Spark's ``o112.save``; None when there is none."""
    found = [m.group(0) for m in map(_JAVA_EXCEPTION.match, (ln.strip() for ln in text.splitlines())) if m]
    if not found:
        return None
    cause = found[-1].removeprefix("Caused by: ")
    return cause if len(cause) <= limit else cause[:limit] + "..."


def new_swap_id() -> str:
    now = dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"


def temp_table_name(table: str, swap_id: str) -> str:
    return f"{table[:80]}{TEMP_MARKER}{swap_id}"


class Timer:
    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.marks: dict[str, float] = {}
        self._last = self.start

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self.marks[step] = round(now - self._last, 4)
        self._last = now

    def done(self) -> dict[str, float]:
        self.marks["total"] = round(time.perf_counter() - self.start, 4)
        return dict(self.marks)


def _client_options(settings: Settings) -> dict[str, Any]:
    return {"timeout_s": settings.metastore_timeout_s, "connect_attempts": settings.connect_attempts,
            "write_batch_size": settings.write_batch_size}


def new_client(settings: Settings) -> MetastoreClient:
    return MetastoreClient(settings.metastore_uri, **_client_options(settings))


def pooled(settings: Settings, *, ping: bool = True):  # -> ContextManager[MetastoreClient]
    """A metastore connection for one operation, reused from (and given back to) the process's pool;
    pinged first unless ``ping=False``. Pooled per URI and client options: the key is made of what
    the connection is built from."""
    key = (settings.metastore_uri, *sorted(_client_options(settings).items()))
    return POOL.client(key, lambda: new_client(settings), ping=ping)


@contextmanager
def session(settings: Settings, journal: Journal | None = None, *,
            ping: bool = True) -> Iterator[tuple[MetastoreClient, Journal]]:
    """A metastore connection and a journal for the duration of one operation. ``ping=False``
    when the first call made is itself a read that reports an unreachable metastore clearly."""
    owned = journal is None
    jr = journal or Journal(settings.journal_url)
    try:
        with pooled(settings, ping=ping) as client:
            yield client, jr
    finally:
        if owned:
            jr.close()


def table_lock(client: MetastoreClient, settings: Settings, table: TableInfo, swap_id: str) -> TableLock:
    return TableLock(
        client, table.db, table.name, swap_id=swap_id, timeout_s=settings.lock_timeout_s,
        heartbeat_s=settings.heartbeat_s, client_factory=lambda: new_client(settings),
    )


class Background:
    """One metastore operation on ``client`` in a thread, so that it overlaps Spark work. Nothing
    else may use ``client`` until :meth:`join` (a Thrift client is not thread-safe), which waits,
    re-raises the operation's error or returns its result."""

    def __init__(self, name: str, fn: Callable[[MetastoreClient], Any], client: MetastoreClient) -> None:
        self._error: BaseException | None = None
        self._result: Any = None

        def run() -> None:
            try:
                self._result = fn(client)
            except BaseException as exc:  # noqa: BLE001 - handed to join()
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"tableswap-{name}", daemon=True)
        self._thread.start()

    def join(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def flip(client: MetastoreClient, table: TableInfo, plan: SwapPlan, lock: TableLock,
         snapshot: TableSnapshot | None = None) -> int:
    """Apply a plan under a held lock: adds in one batch, repoints in one batch (or one alter_table).

    Between the two batch calls a reader sees the new partitions already added while the replaced
    ones still point at their old locations; each partition is always entirely old or entirely new.
    ``snapshot``: the state :func:`check_plan` verified under this same lock (saves re-reading it).
    """
    stamp = {SWAP_ID_PARAM: plan.swap_id}
    calls = 0
    if plan.table_change is not None:
        lock.ensure_held()
        client.alter_table_location(table, plan.table_change.old_location, plan.table_change.new_location, stamp,
                                    {ROOT_PARAM: table.root or plan.table_change.old_location or ""},
                                    snapshot=snapshot)
        crash_point("after_alter")
        return 1
    lock.ensure_held()
    calls += client.add_partitions(table, plan.new_partitions(), stamp, snapshot=snapshot)
    crash_point("after_add")
    lock.ensure_held()
    calls += client.alter_partition_locations(table, plan.location_changes(), stamp, snapshot=snapshot)
    crash_point("after_alter")
    calls += client.clear_table_statistics(table, snapshot=snapshot)
    if plan.drops:
        lock.ensure_held()
        calls += client.drop_partitions_keep_data(table, [a.values for a in plan.drops])
    return calls


def touched_values(plan: SwapPlan) -> list[tuple[str, ...]]:
    return [a.values for a in plan.touched]


def check_plan_current(client: MetastoreClient, table: TableInfo, plan: SwapPlan) -> None:
    """:func:`check_plan` against a fresh read of the plan's partitions."""
    touched = touched_values(plan)
    if touched:
        check_plan(table, plan, client.get_partitions(table, touched))


def check_plan(table: TableInfo, plan: SwapPlan, now: Mapping[tuple[str, ...], PartitionInfo]) -> None:
    """Compare-and-swap, under the lock and before any write: every partition the plan adds must
    still be absent and every one it replaces or drops must still be at its planned location
    (``now``: the plan's partitions as read under the lock)."""
    conflicts = []
    for a in plan.touched:
        found = now.get(a.values)
        if a.action == ADD and found is not None:
            conflicts.append(f"{a.name} was added meanwhile (now at {found.location})")
        elif a.action != ADD and (found is None or not loc.same(found.location, a.old_location)):
            conflicts.append(f"{a.name}: expected {a.old_location}, found {found.location if found else 'no partition'}")
    if conflicts:
        raise errors.SwapConflictError(
            f"{table.qualified_name} changed since the swap was planned; nothing was changed. Rerun the swap. "
            f"Conflicts: {'; '.join(conflicts[:5])}" + (f" (+{len(conflicts) - 5} more)" if len(conflicts) > 5 else "")
        )


def result_from_plan(plan: SwapPlan, kind: str, *, staging_location: str | None, timings: dict[str, float],
                     calls: int, dry_run: bool = False, commit_calls: int = 0) -> SwapResult:
    def changes(actions):
        return tuple(PartitionChange(a.name, a.action, a.old_location, a.new_location) for a in actions)

    table_change = None
    if plan.table_change is not None:
        table_change = PartitionChange("", "replace", plan.table_change.old_location, plan.table_change.new_location)
    return SwapResult(
        swap_id=plan.swap_id, table=f"{plan.db}.{plan.table}", kind=kind, added=changes(plan.adds),
        replaced=changes(plan.replaces), unchanged=changes(plan.unchanged), dropped=changes(plan.drops),
        table_change=table_change, staging_location=staging_location, timings=timings,
        metastore_calls=calls, commit_metastore_calls=commit_calls, dry_run=dry_run,
    )


def journal_items(plan: SwapPlan) -> list[SwapItem]:
    items = [SwapItem(a.name, a.action, a.old_location, a.new_location) for a in plan.actions]
    if plan.table_change is not None:
        items.append(SwapItem("", "replace", plan.table_change.old_location, plan.table_change.new_location))
    return items


class _Swap:
    """One ``swap_partitions`` / ``swap_table`` call."""

    def __init__(self, df: Any, table_name: str, *, partitioned: bool, settings: Settings, dry_run: bool,
                 allow_empty: bool) -> None:
        self.df = df
        self.spark = sparkapi.session_of(df)
        self.partitioned = partitioned
        self.settings = settings
        self.dry_run = dry_run
        self.allow_empty = allow_empty
        try:
            current_db = self.spark.catalog.currentDatabase()
        except Exception:  # noqa: BLE001
            current_db = None
        self.db, self.name = staging.parse_table_name(table_name, current_db)
        self.swap_id = new_swap_id()
        self.kind = "partitions" if partitioned else "table"
        self.log = log.bind(swap_id=self.swap_id, table=f"{self.db}.{self.name}")
        self.timer = Timer()

    def run(self) -> SwapResult:
        staging.require_hive_catalog(self.spark)
        # Two connections: this thread's, and a side one for the metastore work that overlaps Spark's
        # (the staging table's create during the write, its drop during the cache refresh).
        # The side connection is pinged in the background, with the create (see _stage_and_plan).
        with session(self.settings, ping=False) as (client, journal), pooled(self.settings, ping=False) as side:
            self.client, self.journal, self.side = client, journal, side
            self.target_snapshot = client.snapshot(self.db, self.name)
            target = self.target_snapshot.table
            staging.check_target(target, partitioned=self.partitioned)
            aligned = staging.align(self.df, self._target_schema(target), target.partition_key_names)
            self.timer.mark("validate")
            self.log.info("swap.start", kind=self.kind, dry_run=self.dry_run)
            root = self.root = target.root or ""
            self.staging_location = loc.staging_location(root, self.swap_id)
            self.temp = temp_table_name(self.name, self.swap_id)
            journal.begin_swap(SwapRecord(
                swap_id=self.swap_id, db_name=self.db, table_name=self.name, kind=self.kind, state=STAGING,
                table_root=root, staging_location=self.staging_location, temp_table=self.temp,
                started_at=utcnow(), user_name=getpass.getuser(), host_name=socket.gethostname(),
                app_id=sparkapi.app_id(self.spark),
            ))
            try:
                plan = self._stage_and_plan(target, aligned)
                if self.dry_run or plan.is_noop:
                    self._discard_staging("dry run" if self.dry_run else "nothing to change")
                    return result_from_plan(plan, self.kind, staging_location=None, timings=self.timer.done(),
                                            calls=client.calls, dry_run=self.dry_run)
                self._commit(target, plan)
            except BaseException as exc:
                replacement = self._on_failure(exc)
                if replacement is not None:
                    raise replacement from exc
                raise
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
        return staging.stored_schema(target) or self.spark.table(staging.quoted(self.db, self.name)).schema

    def _stage_and_plan(self, target: TableInfo, aligned: Any) -> SwapPlan:
        params = {TEMP_FOR_PARAM: target.qualified_name, SWAP_ID_PARAM: self.swap_id,
                  TEMP_CREATED_PARAM: utcnow()}
        # The temporary table (the marker of this in-flight swap) is created while Spark writes, on
        # the side connection, pinged first: a pooled connection may have been idle a long time.
        def create(c: MetastoreClient) -> TableInfo:
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
                staging.insert(aligned, staging.quoted(self.db, self.temp))
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
            if not written:
                raise errors.EmptyBatchError(
                    f"the batch for {target.qualified_name} has no rows, so no partition would be replaced; "
                    "nothing was changed"
                )
            current = self.client.get_partitions(target, [p.values for p in written])
            staging.check_replaced_partitions(target, current.values())
            plan = plan_partitions(self.swap_id, target, written, current)
        else:
            if not self.allow_empty and self.spark.table(staging.quoted(self.db, self.temp)).isEmpty():
                raise errors.EmptyBatchError(
                    f"the batch for {target.qualified_name} has no rows; swapping it in would empty the table. "
                    "Nothing was changed (pass allow_empty=True to swap in an empty table on purpose)"
                )
            self.timer.mark("enumerate")
            plan = plan_table(self.swap_id, target, self.staging_location)
        self.timer.mark("plan")
        self.log.info("swap.planned", adds=len(plan.adds), replaces=len(plan.replaces),
                      unchanged=len(plan.unchanged), table_change=plan.table_change is not None)
        return plan

    def _check_same_metastore(self) -> None:
        """The SparkSession must use the metastore tableswap flips in; checked through Spark's
        catalog unless the session is configured with that very URI."""
        configured = sparkapi.conf_get(self.spark, "spark.hadoop.hive.metastore.uris") or ""
        ours = self.settings.metastore_uri.split(",")[0].strip()  # the adapter talks to the first URI
        if ours in [u.strip() for u in configured.split(",")]:
            return
        if not self.spark.catalog.tableExists(staging.quoted(self.db, self.temp)):
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
        cause = java_cause(full)
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
                    f"(value starts {value[:40]!r}). Nothing was changed."
                )
        return errors.StagingWriteError(
            f"writing the batch for {target.qualified_name} failed; the target is unchanged: {text}"
        )

    def _commit(self, target: TableInfo, plan: SwapPlan) -> None:
        calls_before = self.client.calls
        with table_lock(self.client, self.settings, target, self.swap_id) as lock:
            self.timer.mark("lock")
            crash_point("after_lock")
            snap = self.client.snapshot(self.db, self.name, touched_values(plan))
            if plan.table_change is None:
                check_plan(snap.table, plan, snap.partitions)
            lock.ensure_held()  # still ours (the metastore may have restarted meanwhile)
            self.journal.record_intent(self.swap_id, journal_items(plan))
            self.log.info("swap.intent_recorded")
            crash_point("after_intent")
            flip(self.client, snap.table, plan, lock, snapshot=snap)
            self.timer.mark("flip")
            self.log.info("swap.flipped", metastore_calls=self.client.calls - calls_before)
            self.journal.commit(self.swap_id, plan.displaced())
            self.log.info("swap.committed", displaced=len(plan.displaced()))
            crash_point("after_commit")
        self.commit_calls = self.client.calls - calls_before

    def _finish(self) -> None:
        crash_point("during_temp_drop")
        # The temporary table is dropped while Spark refreshes the writer's cache. It is the one this
        # swap created under its random name: no need to read it again before dropping it.
        dropping = Background("drop-staging-table",
                              lambda c: c.drop_table_keep_data(self.db, self.temp, created=self.temp_created),
                              self.side)
        try:
            self.spark.catalog.refreshTable(staging.quoted(self.db, self.name))
        except Exception as exc:  # noqa: BLE001 - never fail a committed swap on a cache refresh
            self.log.warning("swap.refresh_failed", error=str(exc))
        try:
            dropping.join()
        except errors.TableSwapError as exc:  # committed already: leave it to the janitor's sweep
            self.log.warning("swap.temp_drop_failed", temp_table=self.temp, error=str(exc))
        self.journal.finish(self.swap_id)

    def _discard_staging(self, reason: str, state: str = ABORTED, error: str | None = None) -> None:
        """Remove what this swap staged. Safe: nothing references the staging location yet."""
        try:
            self.client.drop_table_keep_data(self.db, self.temp)
        finally:
            staging_parent = loc.join(self.root, loc.STAGING_DIR)
            if loc.same(self.staging_location, loc.join(staging_parent, self.swap_id)):
                storage.delete_tree(self.staging_location)
                storage.remove_empty_dir(staging_parent)
            self.journal.finish(self.swap_id, state=state, error=error or reason)
            self.log.info("swap.staging_discarded", reason=reason)

    def _on_failure(self, exc: BaseException) -> errors.TableSwapError | None:
        """Clean up after a failure; return a clearer error to raise instead, if any."""
        record = self.journal.get_swap(self.swap_id)
        state = record.state if record else None
        self.log.error("swap.failed", error=str(exc), error_type=type(exc).__name__, state=state)
        if state == STAGING:
            # Nothing in the target refers to the staged data: discard it now.
            try:
                self._discard_staging(str(exc), state=FAILED, error=f"{type(exc).__name__}: {exc}")
            except Exception as cleanup_exc:  # noqa: BLE001
                self.log.warning("swap.cleanup_failed", error=str(cleanup_exc))
        elif state == PENDING:
            # The intent is journaled and the flip may be partial (each partition still entirely old
            # or entirely new): `tableswap recover` decides from the metastore's stamps.
            self.journal.finish(self.swap_id, error=f"{type(exc).__name__}: {exc}")
            if isinstance(exc, Exception) and not isinstance(exc, errors.CommitStateUnknownError):
                return errors.CommitStateUnknownError(
                    f"swap {self.swap_id} of {self.db}.{self.name} failed during its flip ({type(exc).__name__}: "
                    f"{exc}). Some partitions may already show the new data, the others the old; none is "
                    f"partial. Run `tableswap recover --table {self.db}.{self.name}` to finish or undo it, "
                    "or rerun the same swap"
                )
        return None


def swap_partitions(df: Any, table: str, *, metastore_uri: str | None = None, journal_url: str | None = None,
                    dry_run: bool = False, **options: Any) -> SwapResult:
    """Replace exactly the partitions present in ``df`` and add the new ones, atomically per partition.

    The batch is written once to a fresh directory; the target's partitions are then repointed in one
    ``add_partitions`` and one ``alter_partitions`` metastore call under an EXCLUSIVE table lock with
    compare-and-swap checks. Old directories are kept and queued for the janitor.
    """
    settings = resolve(spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url, **options)
    return _Swap(df, table, partitioned=True, settings=settings, dry_run=dry_run, allow_empty=False).run()


def swap_table(df: Any, table: str, *, metastore_uri: str | None = None, journal_url: str | None = None,
               dry_run: bool = False, allow_empty: bool = False, **options: Any) -> SwapResult:
    """Replace an unpartitioned table's contents by repointing its location in one ``alter_table``."""
    settings = resolve(spark=sparkapi.session_of(df), metastore_uri=metastore_uri, journal_url=journal_url, **options)
    return _Swap(df, table, partitioned=False, settings=settings, dry_run=dry_run, allow_empty=allow_empty).run()
