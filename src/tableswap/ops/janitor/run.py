"""The janitor: deletes displaced locations whose grace period ended, and leftovers of crashed swaps.

    from tableswap.ops.janitor.run import run_janitor
    plan = run_janitor(grace="24h", dry_run=True)     # a dry run: what would be deleted
    report = run_janitor(grace="24h", dry_run=False)  # delete; also table="db.events", keep=2

How one run goes:

1. **Discover** (read only): the tables in scope (``table=...``, else every table this journal has
   swapped), their pending deletion-queue rows, a snapshot of every location the metastore
   references under each table's root (:class:`~tableswap.core.janitor_plan.LiveView`), and the swaps'
   leftovers: ``<root>/_tableswap/<id>`` directories and ``<table>__tswap_<id>`` temporary tables.
2. **Plan** (pure, :func:`~tableswap.core.janitor_plan.plan_janitor`): delete / refuse / keep / drop_temp.
   A dry run stops here and prints the plan.
3. **Execute**, batch by batch: claim each location in the journal (a lease; two janitors never
   take the same one), take the table's metastore lock (the one swaps and rollbacks take), re-read
   the live locations and re-check every path, delete the batch (one ``fs.rm`` per filesystem),
   release the lock, record the results and release the claims in one journal transaction.

Crash-safety: a location is marked deleted only after it is gone; a janitor killed between the two
leaves it pending and claimed by a dead process, and the next run takes the claim over, finds the
path gone and records it (reported as ``already_gone``, not deleted twice).
"""

from __future__ import annotations

import datetime as dt
import secrets
import socket
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from tableswap import errors, storage
from tableswap.config import janitor_settings
from tableswap.core.deletion_safety import REFERENCE_SCOPES
from tableswap.core.janitor_plan import (
    DEFAULT_GRACE,
    DEFAULT_MIN_GRACE,
    DEFAULT_STAGED_TTL,
    LEFTOVER,
    JanitorPlan,
    check_grace,
    format_duration,
    parse_duration,
    plan_janitor,
)
from tableswap.journal.queue import JanitorQueue
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog
from tableswap.runtime import Runtime, use
from tableswap.core.names import parse_table_name
from tableswap.ops import notify
from tableswap.ops.hdfs_client import configure_hdfs_client
from tableswap.ops.dryrun import REQUIRED, RequiredDryRun, required

from tableswap.ops.janitor.execute import (  # re-exported: the janitor's API
    O_DELETED as O_DELETED, O_DROPPED as O_DROPPED, O_ERROR as O_ERROR, O_GONE as O_GONE, O_KEPT as O_KEPT,
    O_REFUSED as O_REFUSED, O_SKIPPED as O_SKIPPED, O_WOULD_DELETE as O_WOULD_DELETE, O_WOULD_DROP as O_WOULD_DROP,
    Executor as Executor, Outcome as Outcome, _dry_run_outcomes as _dry_run_outcomes,
)
from tableswap.ops.janitor.refs import DEFAULT_FULL_SCAN_EVERY
from tableswap.ops.janitor.scan import (  # re-exported: the janitor's API
    Discovery as Discovery, discover as discover, read_live_view as read_live_view,
)

log = get_logger("tableswap.janitor")


@dataclass(frozen=True)
class JanitorReport:
    run_id: str
    dry_run: bool
    grace_seconds: float
    keep: int
    table_filter: str | None
    started_at: str
    seconds: float
    outcomes: tuple[Outcome, ...] = ()
    tables: tuple[str, ...] = ()
    #: Whose locations counted as live references, and how much of the metastore was read for them.
    reference_scope: str = "metastore"
    references_read: dict[str, int] = field(default_factory=dict)
    #: How the references were read: "index" (the journal's, brought up to date from the metastore's
    #: notification log) or "full scan"; and, when an index was asked for, why a full scan instead.
    reference_source: str = "full scan"
    full_scan_reason: str | None = None

    def of(self, *names: str) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.outcome in names)

    @property
    def deleted(self) -> tuple[Outcome, ...]:
        return self.of(O_DELETED, O_GONE)

    @property
    def refused(self) -> tuple[Outcome, ...]:
        return self.of(O_REFUSED)

    @property
    def errors(self) -> tuple[Outcome, ...]:
        return self.of(O_ERROR)

    @property
    def kept(self) -> tuple[Outcome, ...]:
        return self.of(O_KEPT)

    @property
    def bytes_freed(self) -> int:
        return sum(o.bytes for o in self.of(O_DELETED))

    @property
    def ok(self) -> bool:
        return not self.errors

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.outcome] = out.get(o.outcome, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "run_id": self.run_id, "dry_run": self.dry_run, "grace_seconds": self.grace_seconds,
            "keep": self.keep, "table": self.table_filter, "tables": list(self.tables),
            "started_at": self.started_at, "seconds": self.seconds, "counts": self.counts(),
            "reference_scope": self.reference_scope, "references_read": dict(self.references_read),
            "reference_source": self.reference_source, "full_scan_reason": self.full_scan_reason,
            "bytes_freed": self.bytes_freed,
            "bytes_to_free": sum(o.bytes for o in self.of(O_WOULD_DELETE)),
            "outcomes": [{**asdict(o), "swap_ids": list(o.swap_ids), "paths": list(o.paths),
                          "trash": list(o.trash)}
                         for o in self.outcomes],
        }


# --------------------------------------------------------------------------- entry point


def min_grace_from_env() -> dt.timedelta:
    """The grace floor: ``TABLESWAP_JANITOR_MIN_GRACE`` > config file ``[janitor] min_grace`` > 1h."""
    raw = janitor_settings().min_grace
    return parse_duration(raw) if raw else DEFAULT_MIN_GRACE


def run_janitor(
    *,
    grace: str | dt.timedelta | None = None,
    dry_run: bool | RequiredDryRun = REQUIRED,
    table: str | None = None,
    keep: int | None = None,
    force_short_grace: bool = False,
    min_grace: str | dt.timedelta | None = None,
    metastore_uri: str | None = None,
    journal_url: str | None = None,
    batch_size: int | None = None,
    lease: str | dt.timedelta = "1h",
    lock: bool = True,
    now: dt.datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
    runtime: Runtime | None = None,
    reference_scope: str | None = None,
    staged_ttl: str | dt.timedelta | None = None,
    trash: str | None = None,
    full_scan_every: str | dt.timedelta | None = None,
    **options: Any,
) -> JanitorReport:
    """Delete displaced locations whose grace period ended, and the leftovers of crashed swaps.

    ``dry_run``, required in this release (its default was ``True``; it becomes ``False``, as every other
    call's, and a call without it raises :class:`~tableswap.errors.ConfigurationError`, nothing changed):
    ``True`` plans as a real run does and touches nothing (the report lists what would be deleted),
    ``False`` deletes.

    ``grace`` (``"24h"``, ``"30m"``, ``"7d"`` or a timedelta) below ``min_grace`` (default 1h, or
    ``TABLESWAP_JANITOR_MIN_GRACE``) raises :class:`~tableswap.errors.UnsafeOperationError` unless
    ``force_short_grace``. ``keep`` keeps the N most recent displaced locations of each partition.
    ``progress(done, total)`` is called as locations are handled. Never raises for one location's
    failure: see :attr:`JanitorReport.errors`. ``grace``, ``keep`` and ``batch_size`` left at ``None``
    come from the config file's ``[janitor]`` section, else 24h, 0 and 100.

    ``reference_scope`` (else ``[janitor] reference_scope``, else ``"metastore"``): which tables'
    and partitions' locations count as live references: every database's (``"metastore"``), the
    cleaned table's database's (``"database"``) or the cleaned table's own and its temporary tables'
    (``"table"``). A path any of them references is never deleted.

    ``staged_ttl`` (else ``[janitor] staged_ttl``, else 7 days): a staged swap (``stage_partitions``, a
    refused audit) nobody published or discarded within it is discarded: marked aborted, its temporary
    table dropped and its staged data deleted. Before it, its temporary table and data are never touched.

    ``trash`` (else ``[janitor] trash``, else ``"auto"``): on HDFS, a directory is moved into the deleting
    user's trash where the NameNode has the trash on (``"auto"``), always (``"always"``: where it cannot be,
    it is an error and stays) or never (``"never"``: deleted). Other storage has no trash: deleted.

    ``full_scan_every`` (else ``[janitor] full_scan_every``, else 7 days): where the metastore keeps a
    notification log, the references come from the journal's index brought up to date from it, and the
    whole metastore is read again (the index rebuilt) when its last full read is this old
    (docs/janitor.md#the-reference-index).
    """
    dry_run = required(dry_run, "run_janitor")
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        js = rt.settings.janitor
        grace_td = parse_duration(grace if grace is not None else js.grace or DEFAULT_GRACE)
        ttl_td = parse_duration(staged_ttl if staged_ttl is not None else js.staged_ttl or DEFAULT_STAGED_TTL)
        every_td = parse_duration(full_scan_every if full_scan_every is not None
                                  else js.full_scan_every or DEFAULT_FULL_SCAN_EVERY)
        keep = js.keep if keep is None else keep
        scope = js.reference_scope if reference_scope is None else reference_scope
        trash = js.trash if trash is None else trash
        if trash not in storage.TRASH_MODES:
            raise errors.InvalidInputError(f"trash {trash!r} is not one of {', '.join(storage.TRASH_MODES)}")
        if scope not in REFERENCE_SCOPES:
            raise errors.InvalidInputError(
                f"reference_scope {scope!r} is not one of {', '.join(REFERENCE_SCOPES)}")
        # A Kerberized HDFS: log in from [hdfs] kerberos_keytab when the run first reaches one (else the ticket
        # cache); a NameNode that does not answer: given up after [hdfs] connect_timeout_s.
        configure_hdfs_client()
        batch_size = js.batch_size if batch_size is None else batch_size
        floor = parse_duration(min_grace if min_grace is not None else js.min_grace or DEFAULT_MIN_GRACE)
        check_grace(grace_td, floor, force_short_grace)
        if keep < 0:
            raise errors.InvalidInputError("keep must be 0 or more")
        if table:
            parse_table_name(table)  # validate early
        with rt.session() as (catalog, _journal):
            return _run(rt, catalog, grace_td=grace_td, dry_run=dry_run, table=table, keep=keep, batch_size=batch_size,
                        lease=lease, lock=lock, now=now, progress=progress, scope=scope, staged_ttl=ttl_td,
                        trash=trash, full_scan_every=every_td)


def _run(rt: Runtime, catalog: Catalog, *, dry_run: bool, table: str | None, **kw: Any) -> JanitorReport:
    """One janitor run; a real one (not a dry run) is also an OpenLineage run (START, then COMPLETE or FAIL
    with what it deleted: ops/notify.py)."""
    started = dt.datetime.now(dt.timezone.utc)
    run_id = f"janitor_{started:%Y%m%d_%H%M%S}_{secrets.token_hex(3)}"
    if dry_run:
        return _run_planned(rt, catalog, dry_run=dry_run, table=table, started=started, run_id=run_id, **kw)
    notify.janitor_started(run_id, table)
    try:
        report = _run_planned(rt, catalog, dry_run=dry_run, table=table, started=started, run_id=run_id, **kw)
    except BaseException as exc:
        notify.janitor_finished(run_id, {}, ok=False, error=f"{type(exc).__name__}: {exc}")
        raise
    deleted = [{"table": o.table, "location": o.location, "partition": o.partition, "bytes": o.bytes}
               for o in report.deleted]
    notify.janitor_finished(run_id, {
        "deleted": deleted, "deletedCount": len(deleted), "deletedBytes": report.bytes_freed,
        "refusedCount": len(report.refused), "errorCount": len(report.errors), "seconds": report.seconds,
        "droppedTemporaryTables": sorted({o.table for o in report.of(O_DROPPED)}),
    }, ok=report.ok, error=None if report.ok else f"{len(report.errors)} deletion(s) failed (retried next run)")
    return report


def _run_planned(rt: Runtime, catalog: Catalog, *, grace_td: dt.timedelta, dry_run: bool, table: str | None,
                 keep: int, batch_size: int, lease: str | dt.timedelta, lock: bool, now: dt.datetime | None,
                 progress: Callable[[int, int], None] | None, scope: str, started: dt.datetime,
                 run_id: str, staged_ttl: dt.timedelta = DEFAULT_STAGED_TTL, trash: str = "auto",
                 full_scan_every: dt.timedelta = DEFAULT_FULL_SCAN_EVERY) -> JanitorReport:
    now = now or started
    journal = rt.journal
    queue = JanitorQueue(journal)
    found = discover(catalog, journal, queue, table, scope=scope, full_scan_every=full_scan_every)
    if not dry_run and found.references is not None:
        found.references.save_index()  # what the next run starts from (tableswap.ops.janitor.refs)
    plan = plan_janitor(found.entries, found.views, now=now, grace=grace_td, keep=keep,
                        candidates=found.candidates, unfinished=found.unfinished,
                        swap_started=found.swap_started, staged_ttl=staged_ttl)
    log.info("janitor.planned", run_id=run_id, deletes=len(plan.deletes), refused=len(plan.refusals),
             kept=len(plan.kept), temp_tables=len(plan.temp_drops), dry_run=dry_run)
    total = len(plan.actions)
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        if progress:
            progress(min(done[0], total), total)

    if dry_run:
        outcomes = _dry_run_outcomes(plan, found.views)
    else:
        executor = Executor(catalog, rt, run_id=run_id, batch_size=batch_size,
                            lease_s=parse_duration(lease).total_seconds(), lock=lock, progress=tick,
                            views=found.views, references=found.references, trash=trash)
        outcomes = list(executor.execute(plan))
        last = outcomes
        # A dropped leftover temporary table no longer makes its location live, and a committed
        # swap's directory becomes an empty shell once the queued locations inside it are gone:
        # further passes, each planned on a fresh read, remove what became deletable in the same
        # run (a later pass's outcome replaces an earlier one's for the same location).
        for _ in range(2):
            dropped_temp = any(o.outcome == O_DROPPED for o in last)
            if not (dropped_temp or any(o.outcome in (O_DELETED, O_GONE) for o in last)):
                break
            again = discover(catalog, journal, queue, table, references=executor.references)
            replanned = plan_janitor(again.entries, again.views, now=now, grace=grace_td, keep=keep,
                                     candidates=again.candidates, unfinished=again.unfinished,
                                     swap_started=again.swap_started, staged_ttl=staged_ttl)
            more = tuple(a for a in replanned.deletes if dropped_temp or a.kind == LEFTOVER)
            if not more:
                break
            executor.views.update(again.views)  # the pass's own read
            last = executor.execute(JanitorPlan(now=now, grace=grace_td, keep=keep, actions=more))
            handled = {o.location for o in last}
            outcomes = [o for o in outcomes if o.location not in handled] + list(last)
    finished = dt.datetime.now(dt.timezone.utc)
    report = JanitorReport(
        run_id=run_id, dry_run=dry_run, grace_seconds=grace_td.total_seconds(), keep=keep, table_filter=table,
        started_at=started.isoformat(timespec="seconds"), seconds=round((finished - started).total_seconds(), 3),
        outcomes=tuple(outcomes), tables=tuple(f"{d}.{t}" for d, t in found.tables),
        reference_scope=scope, references_read=found.references.read_counts() if found.references else {},
        reference_source=found.references.source if found.references else "full scan",
        full_scan_reason=found.references.full_scan_reason if found.references else None,
    )
    if not dry_run:
        queue.record_run({
            "run_id": run_id, "started_at": started.isoformat(timespec="microseconds"),
            "finished_at": finished.isoformat(timespec="microseconds"), "host_name": socket.gethostname(),
            "table_filter": table, "grace_seconds": int(grace_td.total_seconds()), "keep_count": keep,
            "deleted": len(report.deleted), "bytes_freed": report.bytes_freed,
            "refused": len(report.refused), "errors": len(report.errors),
        })
    log.info("janitor.done", run_id=run_id, counts=report.counts(), bytes_freed=report.bytes_freed,
             seconds=report.seconds)
    return report


__all__ = ["run_janitor", "JanitorReport", "Outcome", "Executor", "discover", "read_live_view",
           "parse_duration", "format_duration"]
