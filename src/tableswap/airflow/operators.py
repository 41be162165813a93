"""Airflow operators for tableswap's scheduled and on-call operations (docs/airflow.md).

Each calls the library in the task's process (no CLI in between) with a runtime built from a ``tableswap``
connection (:class:`~tableswap.airflow.hooks.TableswapHook`):

- :class:`TableswapJanitorOperator` -- ``tableswap janitor run``
- :class:`TableswapRollbackOperator` -- ``tableswap rollback``
- :class:`TableswapRecoverOperator` -- ``tableswap recover``
- :class:`TableswapRepairOperator` -- ``tableswap repair``
- :class:`TableswapPublishGroupOperator` -- ``tableswap publish GROUP`` (a staged swap group, docs/groups.md)
- :class:`TableswapRollbackGroupOperator` -- ``tableswap rollback --group``

**Results** are the task's return value (XCom ``return_value``): the JSON document the CLI's ``--json`` prints
for the same command (plain ``dict``/``list``/``str``/number values only).

**Errors.** A :class:`~tableswap.errors.TableSwapError` whose ``retryable`` is false (bad input, data to
restore gone, a refused repair, a recover that needs a person) fails the task *without retries*
(``AirflowFailException``); a retryable one (a held lock, a conflict, the metastore unreachable) raises
``AirflowException``, which Airflow retries as the task's ``retries`` say. Either way the error's data
(``error``, ``error_type``, ``retryable``, ``table``, ``swap_id``) is pushed first as the XCom ``tableswap_error``.

**Lineage.** With Airflow's OpenLineage provider installed, each operator reports through Airflow's own
mechanism (``get_openlineage_facets_on_complete``): a rollback's or repair's output is the target table,
named as Spark's OpenLineage integration names it (its storage location, with the table as a symlink), with
the ``OVERWRITE`` lifecycle change and the partitions it changed; the janitor's run carries its deletions
(no dataset: see docs/operations.md#lineage-openlineage). Without the provider, nothing is imported.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Callable, Sequence

try:  # Airflow 3.1+: the task SDK's names
    from airflow.sdk import BaseOperator
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # pragma: no cover - Airflow 2.x and 3.0
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.models import BaseOperator

from tableswap import errors
from tableswap.lineage import events as lineage_events
from tableswap.airflow.hooks import TableswapHook
from tableswap.core.durations import parse_duration
from tableswap.core.group import GroupResult
from tableswap.core.names import parse_table_name
from tableswap.core.partitions import parse_name
from tableswap.core.result import SwapResult
from tableswap.metrics.janitor import metrics_targets, publish_janitor_metrics
from tableswap.ops.janitor.run import O_DROPPED, JanitorReport, run_janitor
from tableswap.ops.restore.group_rollback import plan_group_rollback, rollback_group
from tableswap.ops.restore.recover import LOCKED, MANUAL, recover
from tableswap.ops.restore.repair import execute_repair, plan_table_repair, planned_result
from tableswap.ops.restore.rollback import execute_rollback, plan_rollback
from tableswap.ops.write.group import publish_group

#: The XCom key of a failed task's error data (``TableSwapError.to_dict()``).
ERROR_XCOM_KEY = "tableswap_error"
#: Where the settings of an operator's parameters come from, in messages (as "command line" for the CLI).
SRC_OPERATOR = "Airflow operator"


def json_safe(document: Any) -> Any:
    """``document`` as plain JSON values (what an XCom backend stores; datetimes and paths become strings)."""
    return json.loads(json.dumps(document, default=str))


class TableswapBaseOperator(BaseOperator):
    """What the tableswap operators share: the connection, the error mapping, the result as XCom."""

    ui_color = "#e8f1fb"

    def __init__(self, *, tableswap_conn_id: str = TableswapHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tableswap_conn_id = tableswap_conn_id
        # The lineage of the run that just completed, built only when Airflow's OpenLineage provider asks.
        self._lineage: Callable[[], dict[str, Any]] | None = None

    @property
    def hook(self) -> TableswapHook:
        return TableswapHook(self.tableswap_conn_id)

    def execute(self, context: Any) -> Any:
        try:
            return json_safe(self.run(self.hook, context))
        except errors.TableSwapError as exc:
            self._push_error(context, exc.to_dict())
            message = f"{type(exc).__name__}: {exc}"
            if exc.retryable:
                raise AirflowException(message + " (retryable)") from exc
            raise AirflowFailException(message) from exc

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def _push_error(context: Any, data: dict[str, Any]) -> None:
        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is not None:
            ti.xcom_push(key=ERROR_XCOM_KEY, value=json_safe(data))

    # ------------------------------------------------------------------ lineage (Airflow's OpenLineage provider)
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The lineage of the run that just completed, for Airflow's OpenLineage provider (``None``
        without it or before a run)."""
        try:
            from airflow.providers.openlineage.extractors import OperatorLineage
        except ImportError:
            return None
        if self._lineage is None:
            return None
        outcome = self._lineage()
        return OperatorLineage(inputs=[], outputs=outcome.get("outputs", []), run_facets=outcome.get("run_facets", {}))


def _swap_lineage(hook: TableswapHook, result: SwapResult, fields: dict[str, Any]) -> dict[str, Any]:
    """The output dataset and run facet of a committed rollback or repair (``{}`` if the client is missing or
    the metastore cannot be asked the table's location: lineage never fails the task)."""
    try:
        db, name = parse_table_name(result.table)
        location = result.table_change.new_location if result.table_change else None
        with hook.runtime() as rt:
            uri = rt.settings.metastore_uri
            if location is None:
                with rt.catalog() as catalog:
                    location = catalog.get_table(db, name).location
        changed = [*result.added, *result.replaced, *result.dropped]
        output = lineage_events.output_dataset(
            location, lineage_events.table_symlink(uri, db, name), db=db, table=name, overwrite=bool(changed),
            partitions=[(parse_name(c.partition), c.partition) for c in changed if c.partition])
        own = {"swapId": result.swap_id, "kind": result.kind,
               "added": [c.partition for c in result.added], "replaced": [c.partition for c in result.replaced],
               "dropped": [c.partition for c in result.dropped],
               "counts": {"added": len(result.added), "replaced": len(result.replaced),
                          "dropped": len(result.dropped)}, **fields}
        return {"outputs": [output], "run_facets": {"tableswap": lineage_events.own_run_facet(result.kind, own)}}
    except Exception:  # noqa: BLE001 - the client missing, the metastore gone: the task's result stands
        return {}


def _partitions(value: str | Sequence[str] | None) -> list[str] | None:
    if value is None or value == "" or value == []:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]


# ---------------------------------------------------------------------- janitor
class TableswapJanitorOperator(TableswapBaseOperator):
    """``tableswap janitor run``: delete displaced data whose grace period ended (docs/janitor.md).

    Args:
        grace: how long a displaced location is kept (``"24h"``, ``"7d"``, a ``timedelta``); ``None``: the
            config file's ``[janitor] grace``, else 24h.
        table: only this ``db.table`` (default: every table the journal has swapped).
        keep: keep the N most recent displaced locations of each partition.
        dry_run: only plan (the result lists what would be deleted).
        force_short_grace: allow a grace below the floor (1h, or ``[janitor] min_grace``).
        strict: fail the task (no retry) when a deletion was refused.
        batch_size, reference_scope: as ``tableswap janitor run``'s options.
        metrics_pushgateway, metrics_textfile: publish the run's Prometheus metrics (``tableswap[metrics]``).

    Fails without retry on bad settings or ``strict`` refusals; with a retry (``AirflowException``) when a
    location could not be deleted (the next run retries it too). Returns the CLI's ``--json`` document.
    """

    template_fields: Sequence[str] = ("grace", "table", "metrics_pushgateway", "metrics_textfile")

    def __init__(self, *, grace: str | dt.timedelta | None = None, table: str | None = None, keep: int | None = None,
                 dry_run: bool = False, force_short_grace: bool = False, strict: bool = False,
                 batch_size: int | None = None, reference_scope: str | None = None,
                 metrics_pushgateway: str | None = None, metrics_textfile: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.grace, self.table, self.keep, self.dry_run = grace, table, keep, dry_run
        self.force_short_grace, self.strict = force_short_grace, strict
        self.batch_size, self.reference_scope = batch_size, reference_scope
        self.metrics_pushgateway, self.metrics_textfile = metrics_pushgateway, metrics_textfile

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:
        grace = parse_duration(self.grace) if isinstance(self.grace, str) and self.grace else self.grace or None
        with hook.config_file():
            targets = metrics_targets(self.metrics_pushgateway, self.metrics_textfile, explicit_source=SRC_OPERATOR)
        with hook.runtime(read_only=self.dry_run) as rt:
            report = run_janitor(grace=grace, dry_run=self.dry_run, table=self.table or None, keep=self.keep,
                                 force_short_grace=self.force_short_grace, runtime=rt, batch_size=self.batch_size,
                                 reference_scope=self.reference_scope)
            published = publish_janitor_metrics(report, None if self.dry_run else rt.journal, targets) \
                if targets.wanted else None
        self._lineage = lambda: self._janitor_lineage(report)
        document = {**report.to_dict(), "metrics": published.to_dict() if published else None}
        self.log.info("janitor %s: %s", report.run_id, document["counts"])
        if report.errors:
            self._push_error(context, {"error": f"{len(report.errors)} location(s) could not be deleted",
                                       "error_type": "JanitorErrors", "retryable": True, "report": document})
            raise AirflowException(f"janitor {report.run_id}: {len(report.errors)} location(s) could not be deleted: "
                                   + "; ".join(f"{o.location}: {o.reason}" for o in report.errors[:5]))
        if self.strict and report.refused:
            self._push_error(context, {"error": f"{len(report.refused)} deletion(s) refused (strict)",
                                       "error_type": "JanitorRefusals", "retryable": False, "report": document})
            raise AirflowFailException(f"janitor {report.run_id}: {len(report.refused)} deletion(s) refused: "
                                       + "; ".join(f"{o.location}: {o.reason}" for o in report.refused[:5]))
        return document

    @staticmethod
    def _janitor_lineage(report: JanitorReport) -> dict[str, Any]:
        try:
            deleted = [{"table": o.table, "location": o.location, "partition": o.partition, "bytes": o.bytes}
                       for o in report.deleted]
            facet = lineage_events.own_run_facet("janitor", {
                "janitorRunId": report.run_id, "dryRun": report.dry_run,
                "deleted": deleted[:lineage_events.MAX_LISTED], "deletedCount": len(deleted),
                "deletedBytes": report.bytes_freed, "refusedCount": len(report.refused),
                "errorCount": len(report.errors), "seconds": report.seconds,
                "droppedTemporaryTables": sorted({o.table for o in report.of(O_DROPPED)})})
            return {"run_facets": {"tableswap_janitor": facet}}
        except Exception:  # noqa: BLE001 - the OpenLineage client missing: no lineage, the result stands
            return {}


# ---------------------------------------------------------------------- rollback
class TableswapRollbackOperator(TableswapBaseOperator):
    """``tableswap rollback``: restore previous locations of ``table`` (itself a journaled, locked swap).

    Args:
        table: ``db.table``.
        partitions: only these partitions (``"dt=2026-06-03"``, ``"a=1/b=x"``), each to its location before
            the last swap that changed it; ``None``: every partition the last committed swap changed.
        to: the state just before this swap id (with ``partitions``: only those).
        dry_run: only plan (the result is the plan; nothing changes).

    Fails without retry when data to restore is gone (deleted by the janitor) or nothing matches; retried
    when the table changed meanwhile or is locked. Returns the CLI's ``--json`` document (``swap_id``,
    ``rollback_of``, ``added``/``replaced``/``dropped`` with old and new locations, ``nothing_to_do``).
    """

    template_fields: Sequence[str] = ("table", "partitions", "to")

    def __init__(self, *, table: str, partitions: str | Sequence[str] | None = None, to: str | None = None,
                 dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.partitions, self.to, self.dry_run = table, partitions, to, dry_run

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:
        with hook.runtime(read_only=True) as rt:
            planned = plan_rollback(self.table, _partitions(self.partitions), self.to or None, runtime=rt)
            self.log.info("%s", planned.describe())
            if self.dry_run or planned.is_noop:
                result = planned.to_result(dry_run=True)
            else:
                result = execute_rollback(planned, runtime=rt)
        if not result.dry_run:
            self._lineage = lambda: _swap_lineage(hook, result, {"rollbackOf": planned.rollback_of})
        document = result.to_dict()
        document.update({"ok": True, "rollback_of": planned.rollback_of,
                         "undone": [{"swap_id": s, "partition": p} for s, p in planned.undone],
                         "nothing_to_do": planned.is_noop})
        return document


# ---------------------------------------------------------------------- recover
class TableswapRecoverOperator(TableswapBaseOperator):
    """``tableswap recover``: resolve swaps a crash left between journal intent and commit.

    Args:
        table: only swaps of this ``db.table`` (default: every unfinished swap in the journal).
        stale_after: abort swaps still writing their batch after this long (``"1h"``, a ``timedelta``).
        dry_run: say what recover would do now; change nothing.

    Fails without retry when a swap needs a person (outcome ``manual``); retried when a swap's table was
    locked (outcome ``locked``: a writer is still running, or a dead writer's lock has not expired yet).
    Returns the CLI's ``--json`` document (``resolutions``, ``needs_attention``).
    """

    template_fields: Sequence[str] = ("table", "stale_after")

    def __init__(self, *, table: str | None = None, stale_after: str | dt.timedelta = "1h", dry_run: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.stale_after, self.dry_run = table, stale_after, dry_run

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:
        stale = parse_duration(self.stale_after) if isinstance(self.stale_after, str) else self.stale_after
        with hook.runtime() as rt:
            report = recover(self.table or None, stale_after_s=stale.total_seconds(), dry_run=self.dry_run,
                             runtime=rt)
        document = {"ok": not report.needs_attention, **report.to_dict()}
        for r in report.resolutions:
            self.log.info("%s %s (%s): %s -> %s, %s: %s", r.swap_id, r.table, r.kind, r.state_before, r.state_after,
                          r.outcome, r.detail)
        outcomes = {r.outcome for r in report.needs_attention}
        if outcomes:
            ids = ", ".join(f"{r.swap_id} ({r.outcome}: {r.detail})" for r in report.needs_attention)
            self._push_error(context, {"error": f"swaps need attention: {ids}", "error_type": "RecoverNeedsAttention",
                                       "retryable": MANUAL not in outcomes, "report": document})
            if MANUAL in outcomes:
                raise AirflowFailException(f"recover: a swap needs manual attention: {ids}")
            assert outcomes == {LOCKED}, outcomes
            raise AirflowException(f"recover: a swap's table is locked (retry later): {ids}")
        return document


# ---------------------------------------------------------------------- repair
class TableswapRepairOperator(TableswapBaseOperator):
    """``tableswap repair``: put ``table``'s partitions back where tableswap last left them (after its
    metastore entry was lost; docs/operations.md, the runbook).

    Args:
        table: ``db.table`` (re-created with its original DDL and LOCATION first).
        from_storage: replay the recovery manifests under the table's root instead of the journal.
        partitions: only these partitions.
        skip_missing: leave partitions whose data is gone as they are instead of refusing the repair.
        dry_run: only plan (the ``result`` is the repair's, marked as a dry run; nothing changes).

    Fails without retry when data to restore is gone (the plan is in the XCom ``tableswap_error``'s
    ``plan``); retried on a conflict. Returns ``{"ok", "dry_run", "plan", "result"}`` as the CLI's ``--json``
    (a dry run's too).
    """

    template_fields: Sequence[str] = ("table", "partitions")

    def __init__(self, *, table: str, from_storage: bool = False, partitions: str | Sequence[str] | None = None,
                 skip_missing: bool = False, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.from_storage, self.partitions = table, from_storage, partitions
        self.skip_missing, self.dry_run = skip_missing, dry_run

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:
        with hook.runtime(read_only=not self.from_storage) as rt:
            planned = plan_table_repair(self.table, from_storage=self.from_storage,
                                        partitions=_partitions(self.partitions), skip_missing=self.skip_missing,
                                        runtime=rt)
            self.log.info("%s", planned.describe())
            refusal = planned.refusal()
            if refusal is not None:
                self._push_error(context, {**refusal.to_dict(), "plan": planned.to_dict()})
                raise AirflowFailException(f"{type(refusal).__name__}: {refusal}")
            if self.dry_run or planned.is_noop:
                return {"ok": True, "dry_run": True, "plan": planned.to_dict(),
                        "result": planned_result(planned).to_dict()}
            result = execute_repair(planned, runtime=rt)
        self._lineage = lambda: _swap_lineage(hook, result, {})
        return {"ok": True, "dry_run": False, "plan": planned.to_dict(), "result": result.to_dict()}


# ---------------------------------------------------------------------- swap groups
class TableswapPublishGroupOperator(TableswapBaseOperator):
    """``tableswap publish GROUP``: publish a staged swap group (``stage_group``) as one unit: every table or none
    (docs/groups.md). Runs no audit: a task before it audits the staged tables (each member's temporary table).

    Args:
        group: the group's id, or the name of its one staged group (templated: ``"orders-{{ ds }}"``).
        if_unchanged_since: ``{db.table: state token}``, checked under each table's lock besides the tokens
            journaled when the members were staged.

    Fails without retry when the group is unknown, already published or discarded, or a member is no longer
    staged; retried on a conflict or a held lock (nothing changed, the group still staged). Returns the CLI's
    ``--json`` document (``group_id``, ``results`` per table, ``flip_seconds``).
    """

    template_fields: Sequence[str] = ("group",)

    def __init__(self, *, group: str, if_unchanged_since: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group, self.if_unchanged_since = group, if_unchanged_since

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:
        with hook.runtime() as rt:
            result = publish_group(self.group, if_unchanged_since=self.if_unchanged_since, runtime=rt)
        self.log.info("%s", result.summary())
        self._lineage = lambda: _group_lineage(hook, result, {})
        return result.to_dict()


class TableswapRollbackGroupOperator(TableswapBaseOperator):
    """``tableswap rollback --group``: put every table of a committed swap group back to before it, as one group
    of its own (docs/groups.md).

    Args:
        group: the group's id, or a name (the latest group of that name).
        dry_run: only plan (the result is the plan; nothing changes).

    Fails without retry when data to restore is gone or the group is unknown; retried when a table changed
    meanwhile or is locked. Returns the CLI's ``--json`` document (``rollback_of``, ``group_id``, ``results``).
    """

    template_fields: Sequence[str] = ("group",)

    def __init__(self, *, group: str, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group, self.dry_run = group, dry_run

    def run(self, hook: TableswapHook, context: Any) -> dict[str, Any]:
        with hook.runtime(read_only=self.dry_run) as rt:
            undone, plans = plan_group_rollback(self.group, runtime=rt)
            for planned in plans.values():
                self.log.info("%s", planned.describe())
            if self.dry_run or all(p.is_noop for p in plans.values()):
                result = GroupResult(undone, None, {t: p.to_result(dry_run=True) for t, p in plans.items()},
                                     dry_run=True)
            else:
                result = rollback_group(undone, runtime=rt)
        if not result.dry_run:
            self._lineage = lambda: _group_lineage(hook, result, {"rollbackOf": undone})
        return {"ok": True, "rollback_of": undone, **result.to_dict()}


def _group_lineage(hook: TableswapHook, result: GroupResult, fields: dict[str, Any]) -> dict[str, Any]:
    """Every table of a committed group as an output, and the group's run facet (``{}`` when the client is
    missing or the metastore cannot be asked: lineage never fails the task)."""
    try:
        outputs = [o for r in result.results.values() for o in _swap_lineage(hook, r, {}).get("outputs", [])]
        own = {"groupId": result.group_id, "kind": "rollback" if "rollbackOf" in fields else "swap",
               "members": result.swap_ids, "flipSeconds": round(result.flip_seconds, 6),
               "counts": {t: {"added": len(r.added), "replaced": len(r.replaced), "dropped": len(r.dropped)}
                          for t, r in result.results.items()}, **fields}
        if result.name:
            own["name"] = result.name
        return {"outputs": outputs, "run_facets": {"tableswap_group": lineage_events.own_run_facet("group", own)}}
    except Exception:  # noqa: BLE001 - the client missing, the metastore gone: the task's result stands
        return {}


__all__ = ["ERROR_XCOM_KEY", "TableswapBaseOperator", "TableswapJanitorOperator", "TableswapPublishGroupOperator",
           "TableswapRecoverOperator", "TableswapRepairOperator", "TableswapRollbackGroupOperator",
           "TableswapRollbackOperator"]
