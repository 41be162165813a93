"""``backfill``: a resumable runner of per-unit swaps (one unit = one partition spec, e.g. a day).

    report = tableswap.backfill("sales.events", days, build_df, name="events-june-fix", parallelism=4)

Each unit is one scoped swap of its own (its partitions are replaced by ``build_df(unit)``'s rows,
see :func:`tableswap.swap_partitions`), run on a pool of ``parallelism`` threads of this process;
swaps of one table are serialized by the table lock, the Spark jobs that write the batches overlap.
Progress is journaled under the backfill's ``name``: running it again (after a crash, a failure, a
fix of ``build_df``) redoes only the units that are not done. ``tableswap backfill status NAME``
shows it.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from tableswap import errors
from tableswap.core.backfill import BackfillStatus, UnitState, UnitStatus, unit_name, unit_values
from tableswap.core.names import parse_table_name
from tableswap.core.result import SwapResult
from tableswap.journal.backfills import BackfillLog
from tableswap.logs import get_logger
from tableswap.ops.write.swap import swap_partitions
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.backfill")


@dataclass(frozen=True)
class BackfillReport:
    """What one :func:`backfill` call did, and the backfill's status after it."""

    name: str
    table: str
    status: BackfillStatus
    results: Mapping[str, SwapResult] = field(default_factory=dict)  # unit → its swap, for units run now
    already_done: tuple[str, ...] = ()  # units done by an earlier run, not run again
    not_started: tuple[str, ...] = ()  # units left pending by fail_fast
    dry_run: bool = False  # each result is a unit's dry run; the backfill's record is as it was

    @property
    def ok(self) -> bool:
        return self.status.complete

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "table": self.table, "ok": self.ok, "status": self.status.to_dict(),
                "results": {u: r.to_dict() for u, r in self.results.items()},
                "already_done": list(self.already_done), "not_started": list(self.not_started),
                "dry_run": self.dry_run}


class Progress:
    """One line per finished unit on stderr (``progress=True``), or calls to the user's callable."""

    def __init__(self, name: str, total: int, done_before: int, parallelism: int,
                 sink: bool | Callable[[dict[str, Any]], None]) -> None:
        self.name, self.total, self.parallelism, self.sink = name, total, parallelism, sink
        self.done, self.failed, self.ran, self.seconds = done_before, 0, 0, 0.0
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def finished(self, unit: str, ok: bool, seconds: float, detail: str) -> None:
        with self._lock:
            self.ran += 1
            self.seconds += seconds
            if ok:
                self.done += 1
            else:
                self.failed += 1
            left = self.total - self.done - self.failed
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.ran * left if self.ran else None
            event = {"backfill": self.name, "unit": unit, "state": UnitState.DONE if ok else UnitState.FAILED,
                     "seconds": round(seconds, 1), "detail": detail, "done": self.done, "failed": self.failed,
                     "left": left, "total": self.total, "elapsed_s": round(elapsed, 1),
                     "eta_s": round(eta, 1) if eta is not None else None}
            if callable(self.sink):
                self.sink(event)
            elif self.sink:
                width = len(str(self.total))
                print(f"backfill {self.name} [{self.done + self.failed:>{width}}/{self.total}] {unit} "
                      f"{'done' if ok else 'FAILED'} in {seconds:.1f}s {detail}; {self.done} done, "
                      f"{self.failed} failed, {left} left" + (f", ~{_duration(eta)} to go" if left and eta else ""),
                      file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def backfill(table: str, units: Iterable[Any], build_df: Callable[[Any], Any], *, name: str,
             parallelism: int = 4, fail_fast: bool = False, allow_empty: bool = False,
             progress: bool | Callable[[dict[str, Any]], None] = True, metastore_uri: str | None = None,
             journal_url: str | None = None, runtime: Runtime | None = None, dry_run: bool = False,
             **options: Any) -> BackfillReport:
    """Run one swap per unit of ``table`` (``db.table``), ``parallelism`` at a time, resumably.

    Args:
        table: the partitioned target, ``db.table``.
        units: partition specs (``"dt=2026-06-01"``, ``{"dt": "2026-06-01"}``, ``"dt=2026-06-01/country=DE"``)
            or values of the first partition column (``datetime.date(2026, 6, 1)``, ``"2026-06-01"``).
        build_df: ``build_df(unit)`` returns that unit's DataFrame (called with the unit as given,
            in the pool's thread).
        name: the backfill's name in the journal. Running the same name again skips the units
            already done and runs the others (new units are added).
        parallelism: units run at the same time (threads of this process, one SparkSession).
        fail_fast: stop starting units after the first failure (those not started stay pending);
            by default a failing unit never stops the others.
        allow_empty: a unit whose DataFrame has no rows empties that unit's partitions (else it fails
            with :class:`~tableswap.errors.EmptyBatchError`, changing nothing).
        progress: ``True``: one line per finished unit on stderr (done, failed, left, time to go);
            ``False``: none; a callable: called with a dict per finished unit.
        dry_run: each unit not done yet is swapped as a dry run (built, staged, planned from an unlocked
            read, its batch discarded: :func:`~tableswap.swap_partitions`'s dry run), the units an earlier run
            did are named; the backfill's record in the journal is neither made nor changed. The report's
            ``results`` are the units' plans; a unit whose dry run fails raises ``BackfillFailedError``.
        Other keywords: connection options, as for :func:`~tableswap.swap_partitions`.

    Returns:
        :class:`BackfillReport` when every unit is done.

    Raises:
        BackfillFailedError: some unit failed (after the others ran; with ``fail_fast``, after
            those already running finished). ``error.report`` has the details; rerun to retry them.
        InvalidInputError: a unit that is not a partition spec of the table, or a name used for
            another table.
    """
    if parallelism < 1:
        raise errors.InvalidInputError(f"parallelism={parallelism}: expected 1 or more")
    if not name or not isinstance(name, str) or len(name) > 200:
        raise errors.InvalidInputError("name: give the backfill a name (at most 200 characters), e.g. 'events-2026-06'")
    db, tname = parse_table_name(table)
    qualified = f"{db}.{tname}"
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        with rt.catalog() as catalog:
            info = catalog.get_table(db, tname)
        keys = info.partition_key_names
        given: dict[str, Any] = {}
        scopes: dict[str, dict[str, str]] = {}
        for unit in units:
            values = unit_values(unit, keys)
            key = unit_name(values)
            if key in given:
                raise errors.InvalidInputError(f"backfill unit {key} is given twice")
            given[key], scopes[key] = unit, values
        if not given:
            raise errors.InvalidInputError("backfill: no units given")
        blog = BackfillLog(rt.journal)
        if dry_run:
            recorded = _recorded(blog, name, qualified, list(given))
        else:
            blog.start(name, db, tname, list(given))
            recorded = blog.status(name)
        before = {u.unit: u for u in recorded.units}
        already = tuple(k for k in given if before[k].state == UnitState.DONE)
        todo = [k for k in given if k not in already]
        tracker = Progress(name, len(given), len(already), parallelism, progress)
        bound = log.bind(backfill=name, table=qualified)
        bound.info("backfill.start", units=len(given), already_done=len(already), parallelism=parallelism)
        results: dict[str, SwapResult] = {}
        stop = threading.Event()
        not_started: list[str] = []
        dry_failures: dict[str, str] = {}  # a dry run records nothing: its units' failures are kept here
        lock = threading.Lock()

        def run(key: str) -> None:
            if stop.is_set():
                with lock:
                    not_started.append(key)
                return
            if not dry_run:
                blog.running(name, key)
            started = time.monotonic()
            swap_id = None
            try:
                df = build_df(given[key])
                result = swap_unit(df, qualified, scopes[key], rt, allow_empty, dry_run=dry_run)
                swap_id = result.swap_id
            except Exception as exc:  # noqa: BLE001 - every unit's failure is recorded, the others go on
                seconds = time.monotonic() - started
                swap_id = getattr(exc, "swap_id", None)
                text = f"{type(exc).__name__}: {exc}"
                if dry_run:
                    with lock:
                        dry_failures[key] = text
                else:
                    blog.failed(name, key, text, swap_id, seconds)
                bound.warning("backfill.unit_failed", unit=key, error=text, swap_id=swap_id)
                tracker.finished(key, False, seconds, f"({text.splitlines()[0][:300]})")
                if fail_fast:
                    stop.set()
                return
            seconds = time.monotonic() - started
            if not dry_run:
                blog.done(name, key, swap_id, seconds)
            with lock:
                results[key] = result
            bound.info("backfill.unit_done", unit=key, swap_id=swap_id, seconds=round(seconds, 3))
            tracker.finished(key, True, seconds, f"(dry run: would be {_what(result)})" if dry_run
                             else f"(swap {swap_id}: {_what(result)})")

        _ = rt.journal  # opened once, before the threads share the runtime
        with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="tableswap-backfill") as pool:
            for future in [pool.submit(run, key) for key in todo]:
                future.result()
        status = recorded if dry_run else blog.status(name)
    report = BackfillReport(name, qualified, status, dict(results), already, tuple(k for k in todo if k in not_started),
                            dry_run=dry_run)
    if dry_failures:
        raise errors.BackfillFailedError(
            f"dry run of backfill {name} of {qualified}: {len(dry_failures)} of {len(given)} unit(s) would fail: "
            f"{errors.listing(f'{u}: {e}' for u, e in sorted(dry_failures.items()))}. Nothing was changed",
            table=qualified, report=report)
    bound.info("backfill.finished", done=len(status.done), failed=len(status.failed), pending=len(status.pending))
    if status.failed or report.not_started:
        failed = status.failed
        raise errors.BackfillFailedError(
            f"backfill {name} of {qualified}: {len(failed)} of {len(status.units)} unit(s) failed"
            + (f", {len(report.not_started)} not started (fail_fast)" if report.not_started else "")
            + f": {errors.listing(f'{u.unit}: {u.error}' for u in failed)}. The units done stay done; rerun the same "
            f"backfill to retry the rest (`tableswap backfill status {name}` shows them)",
            table=qualified, report=report)
    return report


def _what(result: SwapResult) -> str:
    parts = [f"{len(result.added)} added", f"{len(result.replaced)} replaced"]
    dropped = getattr(result, "dropped", ())
    if dropped:
        parts.append(f"{len(dropped)} emptied")
    return ", ".join(parts)


def swap_unit(df: Any, table: str, scope: Mapping[str, str], rt: Runtime, allow_empty: bool, *,
              dry_run: bool = False) -> SwapResult:
    """One unit's swap, scoped to the unit: its partitions are replaced by the batch's, those the
    batch has no rows for are emptied (with ``allow_empty``); rows outside the unit are an error."""
    return swap_partitions(df, table, replace_where=[dict(scope)], allow_empty=allow_empty, runtime=rt,
                           dry_run=dry_run)


def _recorded(blog: BackfillLog, name: str, qualified: str, units: list[str]) -> BackfillStatus:
    """The backfill ``name`` as the journal has it, with ``units`` it does not know yet as pending, read only
    (a dry run's); a name used for another table is refused as :meth:`BackfillLog.start` refuses it."""
    try:
        known = blog.status(name)
    except errors.NotFoundError:
        return BackfillStatus(name, qualified, "", "", tuple(UnitStatus(u, UnitState.PENDING) for u in units))
    if known.table != qualified:
        raise errors.InvalidInputError(f"backfill {name!r} is a backfill of {known.table}, not {qualified}; "
                                       "choose another name")
    have = {u.unit for u in known.units}
    return replace(known, units=known.units + tuple(UnitStatus(u, UnitState.PENDING) for u in units if u not in have))
