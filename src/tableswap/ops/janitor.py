"""The janitor: deletes displaced locations whose grace period ended, and leftovers of crashed swaps.

    from tableswap.ops.janitor import run_janitor
    plan = run_janitor(grace="24h")                   # a dry run: what would be deleted
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
from typing import Any, Callable, Iterable, Sequence

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.config import janitor_settings
from tableswap.faults import crash_point
from tableswap.core.janitor_plan import (
    DEFAULT_GRACE,
    DEFAULT_MIN_GRACE,
    DELETE,
    DROP_TEMP,
    KEEP,
    LEFTOVER,
    REFUSE,
    SWAP_ID_RE,
    JanitorAction,
    JanitorPlan,
    LiveRef,
    LiveView,
    QueueEntry,
    SwapDirCandidate,
    check_grace,
    check_location,
    expand,
    format_duration,
    parse_duration,
    parse_time,
    plan_janitor,
    swap_id_time,
)
from tableswap.journal.queue import DELETED, JanitorQueue, SwapState, this_holder
from tableswap.journal.store import Journal
from tableswap.logs import get_logger
from tableswap.metastore.client import MetastoreClient
from tableswap.metastore.lock import TableLock
from tableswap.runtime import Runtime, use
from tableswap.metastore.model import SWAP_ID_PARAM, TEMP_CREATED_PARAM, TEMP_FOR_PARAM, TableInfo
from tableswap.core.names import parse_table_name

log = get_logger("tableswap.janitor")


# Outcomes reported per location or temporary table.
O_DELETED, O_GONE, O_WOULD_DELETE = "deleted", "already_gone", "would_delete"
O_DROPPED, O_WOULD_DROP = "dropped_temp_table", "would_drop_temp_table"
O_REFUSED, O_KEPT, O_SKIPPED, O_ERROR = "refused", "kept", "skipped", "error"


@dataclass(frozen=True)
class Outcome:
    outcome: str
    kind: str
    table: str
    location: str
    reason: str = ""
    partition: str = ""
    swap_ids: tuple[str, ...] = ()
    bytes: int = 0
    paths: tuple[str, ...] = ()  # what was (or would be) deleted for it


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
            "bytes_freed": self.bytes_freed,
            "bytes_to_free": sum(o.bytes for o in self.of(O_WOULD_DELETE)),
            "outcomes": [{**asdict(o), "swap_ids": list(o.swap_ids), "paths": list(o.paths)}
                         for o in self.outcomes],
        }


# --------------------------------------------------------------------------- discovery (read only)


def read_live_view(client: MetastoreClient, db: str, table: str) -> tuple[LiveView, list[TableInfo]]:
    """Everything the metastore references under ``db.table``'s root, and its temporary tables.

    Looks at the table (location, storage root, every partition) and at every other table of the
    same database whose location or root overlaps that root (temporary tables of in-flight swaps,
    other tables sharing the directory), with their partitions.
    """
    try:
        target = client.get_table(db, table)
    except errors.TableNotFoundError:
        return LiveView(db, table, exists=False), []
    if not target.root:
        return LiveView(db, table, exists=True, root=None), []
    root = loc.normalize(target.root)
    q = target.qualified_name
    refs = [LiveRef(root, f"the storage root of {q}", container=True)]
    refs.extend(_table_refs(client, target, f"table {q}"))
    temps = []
    others = [n for n in client.list_tables(db) if n.lower() != table.lower()]
    for other in client.get_tables(db, others) if others else []:
        places = [p for p in (other.location, other.root) if p]
        if not any(loc.is_within(p, root) or loc.is_within(root, p) for p in places):
            continue
        temp_of = None
        if other.parameters.get(TEMP_FOR_PARAM):
            temp_of = other.parameters.get(SWAP_ID_PARAM)
            if other.parameters.get(TEMP_FOR_PARAM, "").lower() == q:
                temps.append(other)
        kind = "temporary table" if temp_of else "table"
        refs.extend(_table_refs(client, other, f"{kind} {other.qualified_name}", temp_of=temp_of))
    return LiveView(db, table, exists=True, root=root, refs=tuple(refs)), temps


def _table_refs(client: MetastoreClient, info: TableInfo, owner: str, temp_of: str | None = None) -> list[LiveRef]:
    refs = []
    # A partitioned table's own location is only a container, except a temporary table's: all of
    # its staging directory is its data.
    container = info.is_partitioned and temp_of is None
    if info.location:
        refs.append(LiveRef(loc.normalize(info.location), owner, container=container, temp_of=temp_of))
    if info.root and not loc.same(info.root, info.location):
        refs.append(LiveRef(loc.normalize(info.root), f"the storage root of {info.qualified_name}", container=True,
                            temp_of=temp_of))
    if info.is_partitioned:
        keys = info.partition_key_names
        for part in client.list_partitions(info.db, info.name):
            if part.location:
                refs.append(LiveRef(loc.normalize(part.location), f"partition {part.name(keys)} of {owner}",
                                    temp_of=temp_of))
    return refs


def _candidates(view: LiveView, temps: Sequence[TableInfo], states: dict[str, SwapState]) -> list[SwapDirCandidate]:
    """Swaps with a directory under ``<root>/_tableswap`` or a temporary table still present."""
    if not view.exists or not view.root:
        return []
    staging_root = loc.join(view.root, loc.STAGING_DIR)
    dirs = {name for name in storage.list_dirs(staging_root) if SWAP_ID_RE.match(name)}
    temp_by_id = {t.parameters.get(SWAP_ID_PARAM): t for t in temps if t.parameters.get(SWAP_ID_PARAM)}
    out = []
    for swap_id in sorted(dirs | set(temp_by_id)):
        state = states.get(swap_id)
        location = loc.normalize(loc.join(staging_root, swap_id)) if swap_id in dirs else None
        temp = temp_by_id.get(swap_id)
        times = [swap_id_time(swap_id), parse_time(state.started_at) if state else None,
                 parse_time(temp.parameters.get(TEMP_CREATED_PARAM)) if temp else None]
        if location and (state is None or state.state != "committed"):
            mtime = storage.newest_mtime(location)  # a slow staging write still touches files
            times.append(dt.datetime.fromtimestamp(mtime, dt.timezone.utc) if mtime else None)
        known = [t for t in times if t is not None]
        has_data = None
        if location and state is not None and state.state == "committed" and not any(
                loc.is_within(ref.location, location) or loc.is_within(location, ref.location)
                for ref in view.refs if not ref.container and ref.temp_of != swap_id):
            has_data = storage.has_data_files(location)  # only for dirs nothing references
        out.append(SwapDirCandidate(
            db=view.db, table=view.table, swap_id=swap_id, location=location,
            temp_table=temp.name if temp else None, state=state.state if state else None,
            last_activity=max(known) if known else None, has_data=has_data,
        ))
    return out


@dataclass
class Discovery:
    tables: list[tuple[str, str]]
    entries: list[QueueEntry]
    views: dict[tuple[str, str], LiveView]
    candidates: list[SwapDirCandidate]
    unfinished: dict[tuple[str, str], list[tuple[str, str]]]
    swap_started: dict[str, dt.datetime] = field(default_factory=dict)


def discover(client: MetastoreClient, journal: Journal, queue: JanitorQueue, table: str | None) -> Discovery:
    if table:
        tables = [parse_table_name(table)]
        pending = journal.deletions(db=tables[0][0], table=tables[0][1])
    else:
        pending = journal.deletions()
        tables = sorted(set(queue.swapped_tables()) | {(d.db_name, d.table_name) for d in pending})
    entries = [
        QueueEntry(d.swap_id, d.location, d.db_name, d.table_name, d.partition_name, d.table_root, d.reason,
                   parse_time(d.queued_at) or dt.datetime.now(dt.timezone.utc))
        for d in pending
    ]
    views, candidates, unfinished, started = {}, [], {}, {}
    for db, name in tables:
        view, temps = read_live_view(client, db, name)
        views[(db, name)] = view
        states = queue.swap_states(db, name)
        started.update({s: t for s, st in states.items() if (t := parse_time(st.started_at))})
        candidates.extend(_candidates(view, temps, states))
        unfinished[(db, name)] = queue.unfinished_locations(db, name)
        if table and not view.exists and not entries:
            raise errors.TableNotFoundError(
                f"table {db}.{name} does not exist and the journal has nothing queued for it")
    return Discovery(tables, entries, views, candidates, unfinished, started)


# --------------------------------------------------------------------------- execution


class Executor:
    """Carries out a :class:`JanitorPlan`: temp-table drops first, then deletes in batches."""

    def __init__(self, client: MetastoreClient, rt: Runtime, *, run_id: str,
                 batch_size: int = 100, lease_s: float = 3600.0, lock: bool = True,
                 progress: Callable[[int], None] | None = None) -> None:
        self.client = client
        self.rt = rt
        self.journal = rt.journal
        self.queue = JanitorQueue(self.journal)
        self.run_id = run_id
        self.token = f"{run_id}:{secrets.token_hex(4)}"
        self.batch_size = max(1, batch_size)
        self.lease_s = lease_s
        self.lock = lock
        self.progress = progress or (lambda n: None)
        self.outcomes: list[Outcome] = []
        self.blocked_swaps: set[str] = set()  # swaps that moved on meanwhile: leave their leftovers alone
        self.batches_done = 0

    def _add(self, action: JanitorAction, outcome: str, reason: str = "", *, bytes_: int = 0,
             paths: Iterable[str] = ()) -> None:
        self.outcomes.append(Outcome(outcome, action.kind, action.qualified, action.location,
                                     reason or action.reason, action.partition, action.swap_ids, bytes_,
                                     tuple(paths)))

    def execute(self, plan: JanitorPlan) -> list[Outcome]:
        """Carry out ``plan``; returns the outcomes of this plan (also kept in ``self.outcomes``)."""
        start = len(self.outcomes)
        for action in plan.refusals:
            self._add(action, O_REFUSED)
            self.progress(1)
        refused_queued = [(k[0], k[1], "refused", a.reason) for a in plan.refusals if a.queued for k in a.keys]
        if refused_queued:
            self.queue.record(refused_queued, token=None)
        for action in plan.kept:
            self._add(action, O_KEPT)
            self.progress(1)
        for action in plan.temp_drops:
            self._drop_temp(action)
            self.progress(1)
        by_table: dict[tuple[str, str], list[JanitorAction]] = {}
        for action in plan.deletes:
            by_table.setdefault((action.db, action.table), []).append(action)
        for (db, table), actions in by_table.items():
            for first in range(0, len(actions), self.batch_size):
                self._delete_batch(db, table, actions[first:first + self.batch_size])
        return self.outcomes[start:]

    # ------------------------------------------------------------------ temp tables
    def _drop_temp(self, action: JanitorAction) -> None:
        swap_id = action.swap_ids[0]
        if action.abandon and not self.queue.abandon_swap(
                swap_id, "abandoned in state staging; leftovers removed by the janitor"):
            self.blocked_swaps.add(swap_id)
            self._add(action, O_SKIPPED, f"swap {swap_id} left state staging meanwhile; leaving it alone")
            return
        try:
            info = self.client.get_table(action.db, action.location)
        except errors.TableNotFoundError:
            self._add(action, O_DROPPED, "already dropped")
            return
        except errors.TableSwapError as exc:
            self.blocked_swaps.add(swap_id)
            self._add(action, O_ERROR, f"cannot read {action.db}.{action.location}: {exc}")
            return
        if info.parameters.get(SWAP_ID_PARAM) != swap_id or not info.parameters.get(TEMP_FOR_PARAM):
            self.blocked_swaps.add(swap_id)
            self._add(action, O_REFUSED, f"{info.qualified_name} is not the temporary table of swap {swap_id}")
            return
        try:
            self.client.drop_table_keep_data(action.db, action.location)
            self._add(action, O_DROPPED)
            log.info("janitor.temp_table_dropped", table=f"{action.db}.{action.location}", swap_id=swap_id)
        except errors.TableSwapError as exc:
            self.blocked_swaps.add(swap_id)
            self._add(action, O_ERROR, f"could not drop {action.db}.{action.location}: {exc}")

    # ------------------------------------------------------------------ deletes
    def _claim(self, actions: Sequence[JanitorAction]) -> list[JanitorAction]:
        claimed = []
        for action in actions:
            if set(action.swap_ids) & self.blocked_swaps:
                self._add(action, O_SKIPPED, "its swap's temporary table could not be dropped or the swap moved on")
                continue
            queued = action.queued
            keys = action.keys
            if action.enqueue:
                self.journal.queue_orphans(action.swap_ids[0], [("", action.location)])
                queued = True
            if action.abandon and not self.queue.abandon_swap(
                    action.swap_ids[0], "abandoned in state staging; leftovers removed by the janitor"):
                self._add(action, O_SKIPPED, f"swap {action.swap_ids[0]} left state staging meanwhile")
                continue
            got = []
            for swap_id, location in keys:
                if self.queue.claim(swap_id, location, token=self.token, lease_s=self.lease_s, queued=queued,
                                    holder=this_holder()):
                    got.append((swap_id, location))
            if len(got) != len(keys):
                self.queue.release(got, self.token)
                self._add(action, O_SKIPPED, "claimed or finished by another janitor")
                continue
            claimed.append(action if queued == action.queued else _as_queued(action))
        return claimed

    def _delete_batch(self, db: str, table: str, actions: Sequence[JanitorAction]) -> None:
        claimed = self._claim(actions)
        if not claimed:
            self.progress(len(actions))
            return
        results: list[tuple[JanitorAction, str, str, int, tuple[str, ...]]] = []
        try:
            lock = self._lock(db, table)
        except errors.TableSwapError as exc:
            self._finish(claimed, [(a, O_ERROR, f"could not lock {db}.{table}: {exc}", 0, ()) for a in claimed])
            self.progress(len(actions))
            return
        try:
            results = self._recheck_and_delete(db, table, claimed, lock)
        except errors.TableSwapError as exc:
            results = [(a, O_ERROR, str(exc), 0, ()) for a in claimed]
        finally:
            if lock is not None:
                lock.release()
        if self.batches_done > 0:
            crash_point("janitor_mid_batch")  # deleted, lock released, not yet recorded
        self.batches_done += 1
        self._finish(claimed, results)
        self.progress(len(actions))

    def _lock(self, db: str, table: str) -> TableLock | None:
        if not self.lock or not self.client.table_exists(db, table):
            return None
        return self.rt.table_lock(self.client, db, table, f"janitor-{self.run_id}").acquire()

    def _recheck_and_delete(self, db: str, table: str, actions: Sequence[JanitorAction],
                            lock: TableLock | None) -> list[tuple[JanitorAction, str, str, int, tuple[str, ...]]]:
        view, _ = read_live_view(self.client, db, table)  # fresh, under the lock
        unfinished = self.queue.unfinished_locations(db, table)
        pending = [loc.normalize(d.location) for d in self.journal.deletions(db=db, table=table)]
        results = []
        todo: list[tuple[JanitorAction, list[str], int]] = []
        for action in actions:
            reason, _ = check_location(action.location, action.table_root, view, unfinished=unfinished)
            if action.kind == LEFTOVER and not reason and any(
                    loc.is_within(p, action.location) for p in pending):
                reason = "holds displaced locations that are queued again"
            if reason:
                results.append((action, O_REFUSED, reason, 0, ()))
                continue
            if not storage.exists(action.location):
                results.append((action, O_GONE, "already gone (deleted by an interrupted run)", 0, ()))
                continue
            paths = expand(action.location, view.refs, storage.children)
            todo.append((action, paths, sum(storage.size(p) for p in paths)))
        if lock is not None:
            lock.ensure_held()
        failures = storage.delete_many([p for _, paths, _ in todo for p in paths])
        for action, paths, size in todo:
            failed = {p: failures[p] for p in paths if p in failures}
            if failed:
                detail = "; ".join(f"{p}: {e}" for p, e in list(failed.items())[:3])
                results.append((action, O_ERROR, f"could not delete: {detail}", 0, tuple(paths)))
                continue
            self._prune_parents(action.location, view)
            note = action.reason if action.kind != LEFTOVER else "removed"
            if action.partial:
                note = f"unreferenced contents removed; kept the live locations inside and {loc.STAGING_DIR}/"
            results.append((action, O_DELETED, note, size, tuple(paths)))
            log.info("janitor.deleted", location=action.location, table=action.qualified, bytes=size,
                     partial=action.partial)
        return results

    def _prune_parents(self, location: str, view: LiveView) -> None:
        """Remove directories left empty above a deleted location, up to the root / ``_tableswap``."""
        if not view.root:
            return
        parent = location.rsplit("/", 1)[0]
        while loc.is_within(parent, view.root) and parent != view.root:
            if parent.rsplit("/", 1)[-1] == loc.STAGING_DIR or any(
                    loc.is_within(ref.location, parent) for ref in view.refs):
                return
            try:
                if not storage.remove_empty_dir(parent):
                    return
            except OSError:
                return
            parent = parent.rsplit("/", 1)[0]

    def _finish(self, claimed: Sequence[JanitorAction],
                results: Sequence[tuple[JanitorAction, str, str, int, tuple[str, ...]]]) -> None:
        rows = []
        for action, outcome, reason, size, paths in results:
            self._add(action, outcome, reason, bytes_=size, paths=paths)
            state = DELETED if outcome in (O_DELETED, O_GONE) else outcome
            if action.queued:
                rows.extend((k[0], k[1], state, reason) for k in action.keys)
        self.queue.record(rows, self.token)
        self.queue.release([k for a in claimed if not a.queued for k in a.keys], self.token)


def _as_queued(action: JanitorAction) -> JanitorAction:
    from dataclasses import replace

    return replace(action, queued=True, enqueue=False)


def _dry_run_outcomes(plan: JanitorPlan, views: dict[tuple[str, str], LiveView]) -> list[Outcome]:
    out = []
    for a in plan.actions:
        if a.decision == DELETE:
            view = views.get((a.db, a.table))
            refs = view.refs if view else ()
            paths = expand(a.location, refs, storage.children) if storage.exists(a.location) else []
            reason = a.reason or "grace period over"
            if a.partial:
                reason = f"would remove unreferenced contents only; the live locations inside and {loc.STAGING_DIR}/ stay"
            out.append(Outcome(O_WOULD_DELETE, a.kind, a.qualified, a.location, reason, a.partition, a.swap_ids,
                               sum(storage.size(p) for p in paths), tuple(paths)))
        elif a.decision == DROP_TEMP:
            out.append(Outcome(O_WOULD_DROP, a.kind, a.qualified, a.location, a.reason, a.partition, a.swap_ids))
        elif a.decision == REFUSE:
            out.append(Outcome(O_REFUSED, a.kind, a.qualified, a.location, a.reason, a.partition, a.swap_ids))
        elif a.decision == KEEP:
            out.append(Outcome(O_KEPT, a.kind, a.qualified, a.location, a.reason, a.partition, a.swap_ids))
    return out


# --------------------------------------------------------------------------- entry point


def min_grace_from_env() -> dt.timedelta:
    """The grace floor: ``TABLESWAP_JANITOR_MIN_GRACE`` > config file ``[janitor] min_grace`` > 1h."""
    raw = janitor_settings().min_grace
    return parse_duration(raw) if raw else DEFAULT_MIN_GRACE


def run_janitor(
    *,
    grace: str | dt.timedelta | None = None,
    dry_run: bool = True,
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
    **options: Any,
) -> JanitorReport:
    """Delete displaced locations whose grace period ended, and the leftovers of crashed swaps.

    A dry run unless ``dry_run=False`` (as delta-rs's ``vacuum``): the report then lists what would be
    deleted and nothing is touched.

    ``grace`` (``"24h"``, ``"30m"``, ``"7d"`` or a timedelta) below ``min_grace`` (default 1h, or
    ``TABLESWAP_JANITOR_MIN_GRACE``) raises :class:`~tableswap.errors.UnsafeOperationError` unless
    ``force_short_grace``. ``keep`` keeps the N most recent displaced locations of each partition.
    ``progress(done, total)`` is called as locations are handled. Never raises for one location's
    failure: see :attr:`JanitorReport.errors`. ``grace``, ``keep`` and ``batch_size`` left at ``None``
    come from the config file's ``[janitor]`` section, else 24h, 0 and 100.
    """
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        js = rt.settings.janitor
        grace_td = parse_duration(grace if grace is not None else js.grace or DEFAULT_GRACE)
        keep = js.keep if keep is None else keep
        batch_size = js.batch_size if batch_size is None else batch_size
        floor = parse_duration(min_grace if min_grace is not None else js.min_grace or DEFAULT_MIN_GRACE)
        check_grace(grace_td, floor, force_short_grace)
        if keep < 0:
            raise errors.InvalidInputError("keep must be 0 or more")
        if table:
            parse_table_name(table)  # validate early
        with rt.client() as client:
            return _run(rt, client, grace_td=grace_td, dry_run=dry_run, table=table, keep=keep, batch_size=batch_size,
                        lease=lease, lock=lock, now=now, progress=progress)


def _run(rt: Runtime, client: MetastoreClient, *, grace_td: dt.timedelta, dry_run: bool, table: str | None,
         keep: int, batch_size: int, lease: str | dt.timedelta, lock: bool, now: dt.datetime | None,
         progress: Callable[[int, int], None] | None) -> JanitorReport:
    started = dt.datetime.now(dt.timezone.utc)
    now = now or started
    run_id = f"janitor_{started:%Y%m%d_%H%M%S}_{secrets.token_hex(3)}"
    journal = rt.journal
    queue = JanitorQueue(journal)
    found = discover(client, journal, queue, table)
    plan = plan_janitor(found.entries, found.views, now=now, grace=grace_td, keep=keep,
                        candidates=found.candidates, unfinished=found.unfinished,
                        swap_started=found.swap_started)
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
        executor = Executor(client, rt, run_id=run_id, batch_size=batch_size,
                            lease_s=parse_duration(lease).total_seconds(), lock=lock, progress=tick)
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
            again = discover(client, journal, queue, table)
            replanned = plan_janitor(again.entries, again.views, now=now, grace=grace_td, keep=keep,
                                     candidates=again.candidates, unfinished=again.unfinished,
                                     swap_started=again.swap_started)
            more = tuple(a for a in replanned.deletes if dropped_temp or a.kind == LEFTOVER)
            if not more:
                break
            last = executor.execute(JanitorPlan(now=now, grace=grace_td, keep=keep, actions=more))
            handled = {o.location for o in last}
            outcomes = [o for o in outcomes if o.location not in handled] + list(last)
    finished = dt.datetime.now(dt.timezone.utc)
    report = JanitorReport(
        run_id=run_id, dry_run=dry_run, grace_seconds=grace_td.total_seconds(), keep=keep, table_filter=table,
        started_at=started.isoformat(timespec="seconds"), seconds=round((finished - started).total_seconds(), 3),
        outcomes=tuple(outcomes), tables=tuple(f"{d}.{t}" for d, t in found.tables),
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
