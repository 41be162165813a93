"""OpenLineage events of tableswap's operations (docs/operations.md#lineage): the only part that imports the
``openlineage-python`` client (``pip install 'tableswap[lineage]'``).

    run_started(swap_id, kind, table, metastore_uri=..., temp_table=..., ...)    # ops/notify.py, after begin
    run_completed(swap_id, plan, location=..., seconds=...)                      # after the journal commit
    run_failed(swap_id, exc)                                                     # ops/commit.py's failure mapping
    run_aborted(swap_id, db, table, location=..., metastore_uri=...)             # a staged swap discarded
    group_started(group_id, kind, name, tables, ...) / group_completed / group_failed / group_aborted
    janitor_started(run_id, ...) / janitor_finished(run_id, report_facet, ok=...)

**A swap group is one run** (docs/groups.md): every table of it is an output of that run (with its own lifecycle
change and partitions), and its members send no run of their own. One run, not a parent run with a child run per
table: the group is one unit of work, committed or not as a whole, and a child run per member would make each
table the output of two jobs (the member's and the group's) in a lineage graph such as Marquez's. The group's run
takes the orchestrator's run as its parent, as a single swap's does.

**Off unless configured, the client's own way.** :func:`enabled` applies the client's rules
(``OpenLineageClient._resolve_transport`` and ``_find_yaml_config_path`` in ``openlineage/client/client.py``)
without importing it: ``OPENLINEAGE_DISABLED=true`` turns it off; else ``OPENLINEAGE_URL``,
``OPENLINEAGE__TRANSPORT__TYPE`` (the ``OPENLINEAGE__`` variables), a readable file named by
``OPENLINEAGE_CONFIG``, ``./openlineage.yml`` or ``~/.openlineage/openlineage.yml`` turn it on. Where the
client would fall back to printing events on the console, tableswap emits nothing and imports nothing.

**Never failing, never slowing a swap noticeably.** Events go out on one daemon thread per process, in order.
A START is queued and not waited for; a COMPLETE or FAIL is waited for at most :data:`WAIT_S` seconds (the
process may end right after it). Any error (the client missing or misconfigured, the server refusing or not
answering) is one warning log line (``lineage.emit_failed``), never an exception to the operation.

**Naming** (:mod:`tableswap.core.datasets`): the output dataset is the target table (never the temporary
table), named by its storage location with a ``symlinks`` facet naming it in its catalog, exactly as Spark's
own OpenLineage integration names the same table, so the graphs join.
"""

from __future__ import annotations

import datetime as dt
import os
import queue
import threading
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from tableswap.core.datasets import (DatasetName, ReadSource, glue_arn_symlink, hive_symlink, location_dataset,
                                     parse_parent)
from tableswap.core.plan import SwapPlan
from tableswap.logs import get_logger
from tableswap.redact import mask_text

log = get_logger("tableswap.lineage")

EXTRA = "tableswap[lineage]"
#: How long an operation waits, at most, for its COMPLETE or FAIL event to be sent.
WAIT_S = 5.0
#: The job namespace when ``OPENLINEAGE_NAMESPACE`` is not set (the client's and Spark's default).
DEFAULT_NAMESPACE = "default"
#: At most this many partitions are listed in an output subset facet and in the run facet's lists.
MAX_LISTED = 1000
#: Job names: ``tableswap.<kind>.<db>.<table>``; the janitor's ``tableswap.janitor`` (``.<db>.<table>`` with --table).
JOB_PREFIX = "tableswap"
#: The custom facets' schema (shipped in the package: ``tableswap/lineage/facets.json``).
FACETS_SCHEMA = "urn:tableswap:lineage_facets.json#/$defs/"
#: The run id namespace: a swap's run id is derived from its swap id, so ``tableswap recover`` finishing it in
#: another process reports on the same run.
RUN_ID_NAMESPACE = uuid.UUID("4b7d1d61-7a52-4c1c-8f3c-2f1f2a6d5e9b")


def enabled() -> bool:
    """Whether the OpenLineage client is configured (see the module docstring); reads the environment and
    checks up to three files exist, imports nothing."""
    env = os.environ
    if env.get("OPENLINEAGE_DISABLED", "").lower().strip() == "true":
        return False
    if env.get("OPENLINEAGE_URL") or env.get("OPENLINEAGE__TRANSPORT__TYPE"):
        return True
    for path in (env.get("OPENLINEAGE_CONFIG"), os.path.join(os.getcwd(), "openlineage.yml"),
                 os.path.join(os.path.expanduser("~/.openlineage"), "openlineage.yml")):
        try:
            if path and os.path.isfile(path) and os.access(path, os.R_OK):
                return True
        except OSError:
            continue
    return False


def run_id_of(swap_id: str) -> str:
    """The OpenLineage run id of a swap, rollback or repair (a UUID derived from its swap id)."""
    return str(uuid.uuid5(RUN_ID_NAMESPACE, swap_id))


def job_namespace() -> str:
    return os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_NAMESPACE


def parent_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The parent run (and its root) the orchestrator that started this process passed, or ``None``.

    The rules of OpenLineage's own dbt integration (``integration/common/src/openlineage/common/provider/dbt/``
    ``utils.py``, ``get_parent_run_metadata``), which Airflow's OpenLineage provider feeds: first
    ``OPENLINEAGE_CONTEXT`` (JSON ``{"parent": {"run": {"runId"}, "job": {"namespace", "name"}, "root": ...}}``),
    else ``OPENLINEAGE_PARENT_ID`` (``namespace/job/run_id``) with ``OPENLINEAGE_ROOT_PARENT_ID`` (the root,
    defaulting to the parent). A malformed value is ignored (logged)."""
    import json

    env = os.environ if env is None else env
    raw = env.get("OPENLINEAGE_CONTEXT")
    if raw:
        try:
            parent = json.loads(raw)["parent"]
            run_id, ns, name = parent["run"]["runId"], parent["job"]["namespace"], parent["job"]["name"]
            root = parent.get("root") or {}
            return {"run_id": str(run_id), "namespace": ns, "name": name,
                    "root": ((root.get("run") or {}).get("runId", run_id),
                             (root.get("job") or {}).get("namespace", ns), (root.get("job") or {}).get("name", name))}
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("lineage.parent_unparsed", variable="OPENLINEAGE_CONTEXT")
    parent = parse_parent(env.get("OPENLINEAGE_PARENT_ID"))
    if parent is None:
        if env.get("OPENLINEAGE_PARENT_ID"):
            log.warning("lineage.parent_unparsed", variable="OPENLINEAGE_PARENT_ID")
        return None
    ns, name, run_id = parent
    root = parse_parent(env.get("OPENLINEAGE_ROOT_PARENT_ID"))
    return {"run_id": run_id, "namespace": ns, "name": name,
            "root": (root[2], root[0], root[1]) if root else (run_id, ns, name)}


# --------------------------------------------------------------------------- what a run is
@dataclass
class _Run:
    run_id: str
    job: str
    kind: str
    swap_id: str
    db: str
    table: str
    location: str | None
    symlink: DatasetName | None
    own: dict[str, Any] = field(default_factory=dict)  # the tableswap run facet's fields
    inputs: tuple[tuple[DatasetName, DatasetName | None], ...] = ()  # (dataset, its table's symlink)
    tables: tuple["GroupTable", ...] = ()  # a swap group's run: its tables
    metastore_uri: str | None = None  # a swap group's run: its tables' catalog (their symlinks)


@dataclass(frozen=True)
class GroupTable:
    """One table of a swap group's run: its member swap, its location (after the group, on COMPLETE), its Glue
    catalog's ARN if any, and on COMPLETE what the group's flip changed on it."""

    db: str
    table: str
    swap_id: str
    location: str | None
    catalog_arn: str | None = None
    plan: SwapPlan | None = None


_RUNS: dict[str, _Run] = {}
_RUNS_LOCK = threading.Lock()


def table_symlink(metastore_uri: str | None, db: str, table: str, catalog_arn: str | None = None) -> DatasetName | None:
    """The table's catalog name as Spark's integration gives it: ``hive://host:port`` for a Thrift metastore; for
    the Glue Data Catalog (``glue://``) its ARN (``catalog_arn``: ``arn:aws:glue:REGION:ACCOUNT``, as the table's
    read gave it) and ``table/db/table``; ``None`` when neither is known (the dataset is then named by its
    location only)."""
    if catalog_arn:
        return glue_arn_symlink(catalog_arn, db, table)
    if metastore_uri and metastore_uri.strip().lower().startswith("thrift://"):
        return hive_symlink(metastore_uri, db, table)
    return None


def run_started(swap_id: str, kind: str, db: str, table: str, *, location: str | None, metastore_uri: str | None,
                temp_table: str | None = None, staging_location: str | None = None, rollback_of: str | None = None,
                inputs: Sequence[ReadSource] = (), catalog_arn: str | None = None, send: bool = True) -> None:
    """A START event for the operation ``swap_id`` of ``kind`` on ``db.table`` (its location now), queued;
    ``inputs``: what its batch was read from (:func:`tableswap.core.datasets.read_datasets`). With ``send`` false (a
    run another process started, continued here: a staged swap's publish) the run is only known here, for its
    COMPLETE or FAIL."""
    if not enabled():
        return
    own = {"swapId": swap_id, "kind": kind}
    if temp_table:
        own["temporaryTable"] = f"{db}.{temp_table}"
    if staging_location:
        own["stagingLocation"] = staging_location
    if rollback_of:
        own["rollbackOf"] = rollback_of
    run = _Run(run_id_of(swap_id), f"{JOB_PREFIX}.{kind}.{db}.{table}", kind, swap_id, db, table, location,
               table_symlink(metastore_uri, db, table, catalog_arn), own,
               tuple((location_dataset(s.location), table_symlink(metastore_uri, s.db, s.table) if s.db and s.table
                      else None) for s in inputs))
    with _RUNS_LOCK:
        if not send and swap_id in _RUNS:
            return  # this process started it: its run as started stays
        _RUNS[swap_id] = run
    if send:
        _submit(lambda: _event("START", run, outputs=[_output(run, run.location, None)]), wait=0)


def run_completed(swap_id: str, plan: SwapPlan, *, location: str | None = None, seconds: float | None = None) -> None:
    """The COMPLETE event of a started run: ``plan`` is what its flip changed; ``location`` the table's
    location after it (an unpartitioned table's new one). Waited for up to :data:`WAIT_S`."""
    with _RUNS_LOCK:
        run = _RUNS.pop(swap_id, None)
    if run is None or not enabled():
        return
    if plan.table_change is not None:
        location = plan.table_change.new_location
    location = location or run.location
    changes = {"added": [a.name for a in plan.adds], "replaced": [a.name for a in plan.replaces],
               "dropped": [a.name for a in plan.drops]}
    run.own.update({k: v[:MAX_LISTED] for k, v in changes.items()},
                   counts={k: len(v) for k, v in changes.items()})
    if seconds is not None:
        run.own["seconds"] = round(seconds, 3)
    _submit(lambda: _event("COMPLETE", run, outputs=[_output(run, location, plan)]), wait=WAIT_S)


def run_failed(swap_id: str, exc: BaseException) -> None:
    """The FAIL event of a started run (nothing for a run never started here). Waited for up to :data:`WAIT_S`."""
    with _RUNS_LOCK:
        run = _RUNS.pop(swap_id, None)
    if run is None or not enabled():
        return
    message = mask_text(f"{type(exc).__name__}: {exc}")[:4000]
    trace = mask_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))[-8000:]
    _submit(lambda: _event("FAIL", run, outputs=[_output(run, run.location, None)], error=(message, trace)),
            wait=WAIT_S)


def run_aborted(swap_id: str, db: str, table: str, *, location: str | None, metastore_uri: str | None,
                staging_location: str | None = None) -> None:
    """The ABORT event of a staged swap that was discarded (``tableswap discard``, ``StagedSwap.discard()``, or
    the janitor past ``[janitor] staged_ttl``): its run began (START) when it was staged and will never complete.
    Reported on the same run (the run id derives from the swap id) from whichever process discards it; the
    output is the table, with no lifecycle change (nothing was overwritten). Waited for up to :data:`WAIT_S`."""
    with _RUNS_LOCK:
        run = _RUNS.pop(swap_id, None)
    if not enabled():
        return
    if run is None:  # staged in another process: the same run, rebuilt from what the discard knows
        own = {"swapId": swap_id, "kind": "swap"}
        if staging_location:
            own["stagingLocation"] = staging_location
        run = _Run(run_id_of(swap_id), f"{JOB_PREFIX}.swap.{db}.{table}", "swap", swap_id, db, table, location,
                   table_symlink(metastore_uri, db, table), own)
    where = location or run.location
    _submit(lambda: _event("ABORT", run, outputs=[_output(run, where, None)]), wait=WAIT_S)


def group_run_id(group_id: str) -> str:
    """The OpenLineage run id of a swap group (a UUID derived from its group id)."""
    return str(uuid.uuid5(RUN_ID_NAMESPACE, f"group:{group_id}"))


def _group_run(group_id: str, kind: str, name: str | None, tables: Sequence[GroupTable], metastore_uri: str | None,
               rollback_of: str | None, inputs: Sequence[ReadSource] = ()) -> _Run:
    label = name or "+".join(sorted(f"{t.db}.{t.table}" for t in tables))
    own: dict[str, Any] = {"groupId": group_id, "kind": kind,
                           "members": {f"{t.db}.{t.table}": t.swap_id for t in tables}}
    if name:
        own["name"] = name
    if rollback_of:
        own["rollbackOf"] = rollback_of
    run = _Run(group_run_id(group_id), f"{JOB_PREFIX}.{'group' if kind == 'swap' else 'rollback_group'}.{label}",
               "group", group_id, "", "", None, None, own,
               tuple((location_dataset(s.location), table_symlink(metastore_uri, s.db, s.table) if s.db and s.table
                      else None) for s in inputs), tuple(tables), metastore_uri)
    return run


def group_started(group_id: str, kind: str, name: str | None, tables: Sequence[GroupTable], *,
                  metastore_uri: str | None, rollback_of: str | None = None, inputs: Sequence[ReadSource] = ()) -> None:
    """The START of a swap group's run (``kind``: ``swap`` or ``rollback``), every table an output, queued."""
    if not enabled():
        return
    run = _group_run(group_id, kind, name, tables, metastore_uri, rollback_of, inputs)
    with _RUNS_LOCK:
        _RUNS[f"group:{group_id}"] = run
    _submit(lambda: _event("START", run, outputs=_group_outputs(run, tables)), wait=0)


def _known_group(group_id: str, kind: str, name: str | None, tables: Sequence[GroupTable],
                 metastore_uri: str | None, rollback_of: str | None) -> _Run:
    """The group's run as started here, else (started in another process) rebuilt from what the caller knows."""
    with _RUNS_LOCK:
        run = _RUNS.pop(f"group:{group_id}", None)
    return run or _group_run(group_id, kind, name, tables, metastore_uri, rollback_of)


def group_completed(group_id: str, kind: str, name: str | None, tables: Sequence[GroupTable], *,
                    metastore_uri: str | None, rollback_of: str | None = None,
                    flip_seconds: float | None = None) -> None:
    """The COMPLETE of a swap group's run, from whichever process committed it: every table an output with what
    the group changed on it (``GroupTable.plan``). Waited for up to :data:`WAIT_S`."""
    if not enabled():
        return
    run = _known_group(group_id, kind, name, tables, metastore_uri, rollback_of)
    run.own["counts"] = {f"{t.db}.{t.table}": {"added": len(t.plan.adds), "replaced": len(t.plan.replaces),
                                               "dropped": len(t.plan.drops)}
                         for t in tables if t.plan is not None}
    if flip_seconds is not None:
        run.own["flipSeconds"] = round(flip_seconds, 6)
    _submit(lambda: _event("COMPLETE", run, outputs=_group_outputs(run, tables)), wait=WAIT_S)


def group_failed(group_id: str, kind: str, name: str | None, tables: Sequence[GroupTable], exc: BaseException, *,
                 metastore_uri: str | None, rollback_of: str | None = None) -> None:
    """The FAIL of a swap group's run (nothing of it flipped, or ``tableswap recover`` finishes it)."""
    if not enabled():
        return
    run = _known_group(group_id, kind, name, tables, metastore_uri, rollback_of)
    message = mask_text(f"{type(exc).__name__}: {exc}")[:4000]
    trace = mask_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))[-8000:]
    _submit(lambda: _event("FAIL", run, outputs=_group_outputs(run, tables), error=(message, trace)), wait=WAIT_S)


def group_aborted(group_id: str, name: str | None, tables: Sequence[GroupTable], *, metastore_uri: str | None) -> None:
    """The ABORT of a staged swap group's run: it was discarded (``tableswap discard GROUP``)."""
    if not enabled():
        return
    run = _known_group(group_id, "swap", name, tables, metastore_uri, None)
    _submit(lambda: _event("ABORT", run, outputs=_group_outputs(run, tables)), wait=WAIT_S)


def _group_outputs(run: _Run, tables: Sequence[GroupTable]) -> list[Any]:
    """Every table of the group as an output dataset, as a single swap's output is named."""
    out = []
    for t in tables:
        symlink = table_symlink(run.metastore_uri, t.db, t.table, t.catalog_arn)
        plan = t.plan
        location = plan.table_change.new_location if plan is not None and plan.table_change is not None \
            else t.location
        partitions = ([(dict(zip(plan.partition_keys, a.values)), a.name) for a in plan.touched]
                      if plan is not None and plan.partition_keys else [])
        out.append(output_dataset(location, symlink, db=t.db, table=t.table,
                                  overwrite=plan is not None and not plan.is_noop, partitions=partitions))
    return out


def janitor_started(run_id: str, *, table: str | None, dry_run: bool) -> None:
    """A START event of a janitor run (``table``: its ``--table``, else every table)."""
    if not enabled():
        return
    db, _, name = (table or "").partition(".")
    run = _Run(str(uuid.uuid5(RUN_ID_NAMESPACE, f"janitor:{run_id}")),
               f"{JOB_PREFIX}.janitor" + (f".{table}" if table else ""), "janitor", run_id, db, name, None, None,
               {"janitorRunId": run_id, "dryRun": dry_run})
    with _RUNS_LOCK:
        _RUNS[f"janitor:{run_id}"] = run
    _submit(lambda: _event("START", run), wait=0)


def janitor_finished(run_id: str, deletions: Mapping[str, Any], *, ok: bool, error: str | None = None) -> None:
    """The COMPLETE (``ok``) or FAIL event of a janitor run, with what it deleted (``deletions``: the janitor
    run facet's fields). No dataset: a displaced directory no table references is no dataset's data."""
    with _RUNS_LOCK:
        run = _RUNS.pop(f"janitor:{run_id}", None)
    if run is None or not enabled():
        return
    run.own.update(deletions)
    if run.own.get("deleted"):
        run.own["deleted"] = list(run.own["deleted"])[:MAX_LISTED]  # deletedCount says how many in all
    failure = None if ok else (mask_text(error or "the janitor run had errors")[:4000], None)
    _submit(lambda: _event("COMPLETE" if ok else "FAIL", run, error=failure), wait=WAIT_S)


# --------------------------------------------------------------------------- the events (the client's classes)
def _client_modules() -> Any:
    try:
        from openlineage.client import event_v2, facet_v2
        from openlineage.client.client import OpenLineageClient
        from openlineage.client.constants import __version__ as client_version
    except ImportError as exc:
        raise RuntimeError(f"OpenLineage is configured but its client is not installed: pip install '{EXTRA}'"
                           ) from exc
    return event_v2, facet_v2, OpenLineageClient, client_version


_FACET_CLASSES: dict[str, Any] = {}


def _own_facets() -> dict[str, Any]:
    """tableswap's custom facets (attrs classes of the client's facet bases), made once."""
    if not _FACET_CLASSES:
        import attr
        from openlineage.client.facet_v2 import JobFacet, RunFacet

        @attr.define
        class TableswapRunFacet(RunFacet):
            swapId: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            kind: str | None = None
            temporaryTable: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            stagingLocation: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            rollbackOf: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            added: list[str] | None = None
            replaced: list[str] | None = None
            dropped: list[str] | None = None
            counts: dict[str, int] | None = None
            seconds: float | None = None

            @staticmethod
            def _get_schema() -> str:
                return FACETS_SCHEMA + "TableswapRunFacet"

        @attr.define
        class TableswapJanitorRunFacet(RunFacet):
            janitorRunId: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            dryRun: bool | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            deleted: list[dict[str, Any]] | None = None
            deletedCount: int | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            deletedBytes: int | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            refusedCount: int | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            errorCount: int | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            droppedTemporaryTables: list[str] | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            seconds: float | None = None

            @staticmethod
            def _get_schema() -> str:
                return FACETS_SCHEMA + "TableswapJanitorRunFacet"

        @attr.define
        class TableswapGroupRunFacet(RunFacet):
            groupId: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            kind: str | None = None
            name: str | None = None
            rollbackOf: str | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            members: dict[str, str] | None = None
            counts: dict[str, dict[str, int]] | None = None
            flipSeconds: float | None = None  # noqa: N815 - the facet's JSON field, camelCase as OpenLineage's
            @staticmethod
            def _get_schema() -> str:
                return FACETS_SCHEMA + "TableswapGroupRunFacet"

        _FACET_CLASSES.update(run=TableswapRunFacet, janitor=TableswapJanitorRunFacet, group=TableswapGroupRunFacet,
                              job=JobFacet)
    return _FACET_CLASSES


def _symlinks(symlink: DatasetName | None) -> dict[str, Any]:
    """The ``symlinks`` facet naming a dataset's table in its catalog (none without one)."""
    if symlink is None:
        return {}
    facet = _client_modules()[1].symlinks_dataset
    return {"symlinks": facet.SymlinksDatasetFacet(identifiers=[
        facet.Identifier(namespace=symlink.namespace, name=symlink.name, type="TABLE")])}


def _output(run: _Run, location: str | None, plan: SwapPlan | None) -> Any:
    """The target table as an output dataset (``plan``: what the flip changed, on COMPLETE)."""
    partitions = ([(dict(zip(plan.partition_keys, a.values)), a.name) for a in plan.touched]
                  if plan is not None and plan.partition_keys else [])
    return output_dataset(location, run.symlink, db=run.db, table=run.table,
                          overwrite=plan is not None and not plan.is_noop, partitions=partitions)


def output_dataset(location: str | None, symlink: DatasetName | None, *, db: str, table: str, overwrite: bool,
                   partitions: Sequence[tuple[Mapping[str, str], str]] = ()) -> Any:
    """The client's ``OutputDataset`` for the table ``db.table`` at ``location`` (its storage location, named as
    Spark's integration names it), with ``symlinks`` (``symlink``: :func:`table_symlink`), the ``OVERWRITE``
    lifecycle change when ``overwrite``, and the partitions changed (``(dimensions, name)`` each, at most
    :data:`MAX_LISTED`) as its output subset. The events' outputs and the Airflow operators' lineage
    (:mod:`tableswap.airflow`) are both built here. Needs the client (``tableswap[lineage]``)."""
    event_v2, facet_v2, _, _ = _client_modules()
    name = location_dataset(location) if location else (symlink or DatasetName("hive", f"{db}.{table}"))
    facets = _symlinks(symlink)
    if overwrite:
        facets["lifecycleStateChange"] = facet_v2.lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=facet_v2.lifecycle_state_change_dataset.LifecycleStateChange.OVERWRITE)
    output_facets: dict[str, Any] = {}
    if partitions:
        subset = facet_v2.base_subset_dataset
        output_facets["outputSubset"] = subset.OutputSubsetOutputDatasetFacet(
            outputCondition=subset.PartitionSubsetCondition(partitions=[
                subset.Partition(dimensions=dict(dims), identifier=ident) for dims, ident in partitions[:MAX_LISTED]]))
    return event_v2.OutputDataset(namespace=name.namespace, name=name.name, facets=facets,
                                  outputFacets=output_facets)


def own_run_facet(kind: str, fields: Mapping[str, Any]) -> Any:
    """tableswap's own run facet: ``tableswap_janitor`` fields for ``kind`` ``"janitor"``, ``tableswap_group``
    fields for ``"group"`` (groupId, kind, name, rollbackOf, members, counts, flipSeconds), else the ``tableswap``
    facet's (swapId, kind, rollbackOf, added, replaced, dropped, counts, seconds). Needs the client."""
    own = _own_facets()
    return own.get(kind if kind in ("janitor", "group") else "run", own["run"])(**fields)


def _event(event_type: str, run: _Run, *, outputs: list[Any] | None = None,
           error: tuple[str, str | None] | None = None) -> Any:
    event_v2, facet_v2, _, client_version = _client_modules()
    __version__ = _version()
    run_facets: dict[str, Any] = {
        "processing_engine": facet_v2.processing_engine_run.ProcessingEngineRunFacet(
            version=__version__, name="tableswap", openlineageAdapterVersion=client_version),
        {"janitor": "tableswap_janitor", "group": "tableswap_group"}.get(run.kind, "tableswap"):
            own_run_facet(run.kind, run.own),
    }
    parent = parent_from_env()
    if parent is not None:
        pr = facet_v2.parent_run
        root_run, root_ns, root_name = parent["root"]
        run_facets["parent"] = pr.ParentRunFacet(
            run=pr.Run(runId=parent["run_id"]), job=pr.Job(namespace=parent["namespace"], name=parent["name"]),
            root=pr.Root(run=pr.RootRun(runId=root_run), job=pr.RootJob(namespace=root_ns, name=root_name)))
    if error is not None:
        run_facets["errorMessage"] = facet_v2.error_message_run.ErrorMessageRunFacet(
            message=error[0], programmingLanguage="PYTHON", stackTrace=error[1])
    job_facets = {"jobType": facet_v2.job_type_job.JobTypeJobFacet(
        processingType="BATCH", integration="TABLESWAP", jobType=run.kind.upper())}
    inputs = [event_v2.InputDataset(namespace=d.namespace, name=d.name, facets=_symlinks(symlink))
              for d, symlink in run.inputs]
    return event_v2.RunEvent(
        eventType=getattr(event_v2.RunState, event_type), eventTime=dt.datetime.now(dt.timezone.utc).isoformat(),
        run=event_v2.Run(runId=run.run_id, facets=run_facets),
        job=event_v2.Job(namespace=job_namespace(), name=run.job, facets=job_facets),
        inputs=inputs, outputs=outputs or [], producer=f"urn:tableswap:{__version__}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tableswap")
    except PackageNotFoundError:
        return "unknown"


# --------------------------------------------------------------------------- doctor
def probe(timeout_s: float = 5.0) -> dict[str, Any]:
    """Where the configured client sends events, for ``tableswap doctor``: ``transport`` (the client's kind:
    ``http``, ``kafka``, ``file``, ``composite``, ...), ``client_version``, the job ``namespace``, and for each
    HTTP endpoint its ``url`` and whether a TCP connection to it opened within ``timeout_s`` (``unreachable``:
    the URLs that did not, with why). Sends no event. Raises :class:`RuntimeError` when the client is not
    installed, and the client's own errors for a configuration it refuses."""
    import socket
    from urllib.parse import urlsplit

    _, _, client_class, client_version = _client_modules()
    transport = client_class().transport
    kinds = [transport, *getattr(transport, "transports", [])]
    facts: dict[str, Any] = {"transport": getattr(transport, "kind", type(transport).__name__),
                             "client_version": client_version, "namespace": job_namespace(),
                             "urls": [], "unreachable": []}
    for t in kinds:
        url = getattr(t, "url", None)
        if not url:
            continue
        safe = mask_text(str(url))
        facts["urls"].append(safe)
        parts = urlsplit(str(url))
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
                pass
        except (OSError, ValueError) as exc:
            facts["unreachable"].append(f"{safe}: {type(exc).__name__}: {exc}")
    return facts


# --------------------------------------------------------------------------- sending
class _Sender:
    """One daemon thread sending the queued events in order through one client."""

    def __init__(self) -> None:
        self.queue: queue.Queue[Any] = queue.Queue()
        self.client: Any = None
        self.thread = threading.Thread(target=self._loop, name="tableswap-openlineage", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            build, done = self.queue.get()
            if build is None:  # flush(): everything before it was handled
                done.set()
                continue
            try:
                event = build()
                if self.client is None:
                    _, _, client_class, _ = _client_modules()
                    self.client = client_class()
                self.client.emit(event)
            except Exception as exc:  # noqa: BLE001 - lineage never fails an operation
                log.warning("lineage.emit_failed", error=mask_text(f"{type(exc).__name__}: {exc}")[:500])
            finally:
                done.set()


_SENDER: _Sender | None = None
_SENDER_LOCK = threading.Lock()


def _submit(build: Any, *, wait: float) -> None:
    global _SENDER
    with _SENDER_LOCK:
        if _SENDER is None:
            _SENDER = _Sender()
        sender = _SENDER
    done = threading.Event()
    sender.queue.put((build, done))
    if wait > 0 and not done.wait(wait):
        log.warning("lineage.emit_slow", waited_s=wait, note="the event is still being sent in the background")


def flush(timeout_s: float = WAIT_S) -> bool:
    """Wait up to ``timeout_s`` for the events queued so far to be sent (or to fail); whether they were."""
    if _SENDER is None:
        return True
    done = threading.Event()
    _SENDER.queue.put((None, done))
    return done.wait(timeout_s)


def reset() -> None:
    """Forget the client (its configuration is read again for the next event) and the runs started here."""
    with _SENDER_LOCK:
        if _SENDER is not None:
            _SENDER.client = None
    with _RUNS_LOCK:
        _RUNS.clear()


__all__ = ["WAIT_S", "enabled", "flush", "janitor_finished", "janitor_started", "job_namespace", "output_dataset",
           "own_run_facet", "parent_from_env", "probe", "reset", "run_aborted", "run_completed", "run_failed",
           "run_id_of", "run_started", "table_symlink", "GroupTable", "group_run_id", "group_started",
           "group_completed", "group_failed", "group_aborted"]
