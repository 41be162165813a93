"""After a commit: run the post-commit hooks (:mod:`tableswap.hooks`) and record what they did; and the
OpenLineage events of every operation (:mod:`tableswap.lineage.events`: START, COMPLETE, FAIL).

A hook's failure is logged and recorded in the journal (``tableswap history`` shows it), never raised:
the operation it follows has committed already. Lineage is never raised either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tableswap import errors
from tableswap.lineage import events as lineage_events
from tableswap.core.catalog import TableInfo
from tableswap.core.datasets import ReadSource, read_datasets
from tableswap.core.plan import SwapPlan
from tableswap.core.records import HookOutcome
from tableswap.hooks import CommitEvent, run_hooks
from tableswap.logs import get_logger
from tableswap.ops.operation import Operation
from tableswap.runtime import Runtime

log = get_logger("tableswap.hooks")


def notify_readers(rt: Runtime, plan: SwapPlan, label: str, *, seconds: float | None = None) -> list[HookOutcome]:
    """Run ``rt``'s hooks for the committed ``plan`` (nothing for a no-op; ``seconds``: how long the operation
    took, when known); returns their outcomes."""
    if not rt.hooks or plan.is_noop:
        return []
    outcomes = run_hooks(rt.hooks, CommitEvent.from_plan(plan, label, seconds=seconds), rt.settings.hooks.timeout_s)
    for o in outcomes:
        if o.ok:
            log.info("hook.ran", swap_id=plan.swap_id, hook=o.hook, seconds=o.seconds)
        else:
            log.warning("hook.failed", swap_id=plan.swap_id, hook=o.hook, seconds=o.seconds, error=o.error)
    try:
        rt.journal.record_hook_runs(plan.swap_id, outcomes)
    except Exception as exc:  # noqa: BLE001 - committed already: the log keeps the outcome
        log.warning("hook.record_failed", swap_id=plan.swap_id, error=str(exc))
    return outcomes


# --------------------------------------------------------------------------- lineage (tableswap.lineage.events)
# OpenLineage events of an operation: START once it has begun, COMPLETE after its commit, FAIL from the
# failure mapping. Each is a no-op unless the OpenLineage client is configured, and never raises.
def run_started(rt: Runtime, op: Operation, table: TableInfo,
                read_from: Callable[[], Iterable[ReadSource]] | None = None, *, continued: bool = False) -> None:
    """The operation ``op`` began on ``table`` (as read when it began); ``read_from``: what its batch reads
    (asked only when lineage is configured). ``continued``: ``op`` was begun, and its START sent, by another
    process or earlier in this one (a staged swap's publish): no START again, its run is known here for its end."""
    try:
        if op.group_id is not None or not lineage_events.enabled():
            return  # a group's member: the group's run (group_started)
        # The job is named by what the operation is (a recovery finishing a rollback is that rollback's run).
        kind = op.kind.value if op.kind.restores else "swap"
        inputs = read_datasets(read_from(), db=op.db, table=op.table, root=table.root) if read_from else ()
        lineage_events.run_started(op.swap_id, kind, op.db, op.table, location=table.location,
                                   metastore_uri=rt.settings.metastore_uri, temp_table=op.temp_table,
                                   staging_location=op.staging_location, rollback_of=op.rollback_of,
                                   inputs=inputs, catalog_arn=table.catalog_arn, send=not continued)
    except Exception as exc:  # noqa: BLE001 - lineage never fails an operation
        log.warning("lineage.failed", swap_id=op.swap_id, error=f"{type(exc).__name__}: {exc}")


def run_failed(op: Operation, exc: BaseException) -> None:
    """The operation ``op`` failed with ``exc`` (whatever the journal says of it now)."""
    if op.group_id is not None:
        return  # a group's member: the group's run fails (group_failed)
    try:
        lineage_events.run_failed(op.swap_id, exc)
    except Exception as error:  # noqa: BLE001 - lineage never fails an operation
        log.warning("lineage.failed", swap_id=op.swap_id, error=f"{type(error).__name__}: {error}")


def committed(rt: Runtime, op: Operation, plan: SwapPlan, table: TableInfo, seconds: float | None) -> None:
    """After the commit of ``op`` (``plan`` carried out on ``table``, ``seconds`` since it began when known):
    the post-commit hooks, then its lineage COMPLETE. Never raises."""
    notify_readers(rt, plan, op.label, seconds=seconds)
    if op.group_id is not None:
        return  # a group's member: the group's run completes (group_completed)
    try:
        lineage_events.run_completed(op.swap_id, plan, location=table.location, seconds=seconds)
    except Exception as exc:  # noqa: BLE001 - lineage never fails an operation
        log.warning("lineage.failed", swap_id=op.swap_id, error=f"{type(exc).__name__}: {exc}")


def run_aborted(rt: Runtime, catalog: Any, swap_id: str, db: str, table: str, *, root: str | None,
                staging_location: str | None) -> None:
    """The staged swap ``swap_id`` of ``db.table`` was discarded (its journal state is ``aborted``): its lineage
    run ends with ABORT. The table's location is read through ``catalog`` (its ``root`` if that fails)."""
    try:
        from tableswap.lineage import events as events

        if not events.enabled():
            return
        try:
            location = catalog.get_table(db, table).location or root
        except Exception:  # noqa: BLE001 - a dropped table, the metastore gone: the root names the same dataset
            location = root
        events.run_aborted(swap_id, db, table, location=location, metastore_uri=rt.settings.metastore_uri,
                           staging_location=staging_location)
    except Exception as exc:  # noqa: BLE001 - lineage never fails an operation
        log.warning("lineage.failed", swap_id=swap_id, error=f"{type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------- a swap group's one run
def group_tables(members: Sequence[tuple[Operation, TableInfo, SwapPlan | None]]) -> list[lineage_events.GroupTable]:
    """A group's tables for its lineage run: each member's operation, its table (as read last) and, once the
    group committed, its plan."""
    return [lineage_events.GroupTable(op.db, op.table, op.swap_id, table.location, table.catalog_arn, plan)
            for op, table, plan in members]


def group_tables_now(rt: Runtime, members: Mapping[str, str]) -> Callable[[], list[lineage_events.GroupTable]]:
    """A group's tables for its lineage run (``members``: table → swap id), each at its location as read when
    asked (only when lineage is configured)."""
    def read() -> list[lineage_events.GroupTable]:
        out = []
        with rt.catalog() as catalog:
            for table, swap_id in members.items():
                db, _, name = table.partition(".")
                try:
                    info = catalog.get_table(db, name)
                    location, arn = info.location, info.catalog_arn
                except errors.TableSwapError:  # gone: named by the table alone
                    location, arn = None, None
                out.append(lineage_events.GroupTable(db, name, swap_id, location, arn))
        return out
    return read


def group_started(rt: Runtime, group_id: str, kind: str, name: str | None,
                  tables: Callable[[], Sequence[lineage_events.GroupTable]], *, rollback_of: str | None = None,
                  read_from: Callable[[], Iterable[ReadSource]] | None = None) -> None:
    """A swap group's run starts (``tables`` and ``read_from``, what its batches read, asked only when lineage is
    configured). Never raises."""
    try:
        if not lineage_events.enabled():
            return
        lineage_events.group_started(group_id, kind, name, tables(), metastore_uri=rt.settings.metastore_uri,
                                     rollback_of=rollback_of, inputs=tuple(read_from()) if read_from else ())
    except Exception as exc:  # noqa: BLE001 - lineage never fails an operation
        log.warning("lineage.failed", group_id=group_id, error=f"{type(exc).__name__}: {exc}")


def group_ended(rt: Runtime, group_id: str, kind: str, name: str | None,
                tables: Callable[[], Sequence[lineage_events.GroupTable]], *, failed: BaseException | None = None,
                aborted: bool = False, rollback_of: str | None = None, flip_seconds: float | None = None) -> None:
    """A swap group's run ends: COMPLETE (committed), FAIL (``failed``) or ABORT (``aborted``: discarded), from
    whichever process ends it. Never raises."""
    try:
        if not lineage_events.enabled():
            return
        uri = rt.settings.metastore_uri
        if aborted:
            lineage_events.group_aborted(group_id, name, tables(), metastore_uri=uri)
        elif failed is not None:
            lineage_events.group_failed(group_id, kind, name, tables(), failed, metastore_uri=uri,
                                        rollback_of=rollback_of)
        else:
            lineage_events.group_completed(group_id, kind, name, tables(), metastore_uri=uri, rollback_of=rollback_of,
                                           flip_seconds=flip_seconds)
    except Exception as exc:  # noqa: BLE001 - lineage never fails an operation
        log.warning("lineage.failed", group_id=group_id, error=f"{type(exc).__name__}: {exc}")


def janitor_started(run_id: str, table: str | None) -> None:
    try:
        lineage_events.janitor_started(run_id, table=table, dry_run=False)
    except Exception as exc:  # noqa: BLE001 - lineage never fails a janitor run
        log.warning("lineage.failed", run_id=run_id, error=f"{type(exc).__name__}: {exc}")


def janitor_finished(run_id: str, deletions: dict[str, Any], *, ok: bool, error: str | None = None) -> None:
    """The janitor run ``run_id`` ended (``deletions``: its lineage run facet's fields)."""
    try:
        lineage_events.janitor_finished(run_id, deletions, ok=ok, error=error)
    except Exception as exc:  # noqa: BLE001 - lineage never fails a janitor run
        log.warning("lineage.failed", run_id=run_id, error=f"{type(exc).__name__}: {exc}")
