"""The staged swaps, read only: ``tableswap staged`` (:func:`list_staged`: each staged swap, and with ``measure``
its staging directory's partitions, files and bytes) and ``tableswap diff`` (:func:`diff`: per partition what a
publish would change, the current and the staged data side by side, with row counts read from the Parquet and ORC
files' footers, without Spark). Neither changes anything; publish and discard are ops/write/staged.py's."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from tableswap import storage
from tableswap.core import partitions as pn
from tableswap.core.names import parse_table_name
from tableswap.core.records import STAGED, SwapKind
from tableswap.journal.groups import GroupLog
from tableswap.logs import get_logger
from tableswap.ops.write.staged_state import batch_of, staged_record
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.staged")

#: File formats whose row counts are read from file footers (pyarrow, the ``audit`` extra).
FOOTER_FORMATS = ("parquet", "orc")


# ---------------------------------------------------------------------- staged
@dataclass(frozen=True)
class StagedEntry:
    """One staged swap, as ``tableswap staged`` lists it."""

    swap_id: str
    table: str
    kind: str
    staged_table: str | None
    staged_at: str | None
    age_seconds: float | None
    user: str | None
    host: str | None
    staging_location: str | None
    partitions: int | None  # staged partitions (None: unpartitioned, or not measured)
    drops: int
    files: int | None  # None: not measured
    bytes: int | None
    group_id: str | None = None  # the swap group it is a member of, if any

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_staged(table: str | None = None, *, measure: bool = True, metastore_uri: str | None = None,
                journal_url: str | None = None, runtime: Runtime | None = None, now: dt.datetime | None = None,
                **options: Any) -> list[StagedEntry]:
    """The staged swaps (of ``table`` if given), oldest first. ``measure``: list each staging directory (one
    recursive listing each) for its partitions, files and bytes. Reads the journal and storage only."""
    db = name = None
    if table is not None:
        db, name = parse_table_name(table)
    now = now or dt.datetime.now(dt.timezone.utc)
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        records = rt.journal.list_swaps(db, name, states=[STAGED])
        groups = GroupLog(rt.journal).groups_of([r.swap_id for r in records])
    out = []
    for r in sorted(records, key=lambda r: (r.staged_at or r.started_at, r.swap_id)):
        parts = files = size = None
        if measure and r.staging_location:
            try:
                found = storage.survey(r.staging_location)
                data = _data_files(found)
                files, size = len(data), sum(data.values())
                if SwapKind(r.kind) == SwapKind.PARTITIONS:
                    parts = len({n.rsplit("/", 1)[0] for n in data})
            except Exception as exc:  # noqa: BLE001 - a listing that fails: unknown, never an error
                log.warning("staged.measure_failed", swap_id=r.swap_id, error=str(exc))
        drops = len(json.loads(r.staged_drops)) if r.staged_drops else 0
        staged = _parse(r.staged_at)
        out.append(StagedEntry(r.swap_id, r.table, r.kind, f"{r.db_name}.{r.temp_table}" if r.temp_table else None,
                               r.staged_at, round((now - staged).total_seconds(), 1) if staged else None,
                               r.user_name, r.host_name, r.staging_location, parts, drops, files, size,
                               groups.get(r.swap_id)))
    return out


def _parse(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _data_files(found: Any) -> dict[str, int]:
    """The data files of a :func:`storage.survey` (none when nothing is there)."""
    return {} if found is None else pn.data_files_below(found.path, found.sizes)


# ---------------------------------------------------------------------- diff
@dataclass(frozen=True)
class Side:
    """One side of a partition in a diff: its location, data files, bytes and rows (None: unknown)."""

    location: str | None
    files: int | None = None
    bytes: int | None = None
    rows: int | None = None


@dataclass(frozen=True)
class DiffRow:
    partition: str  # "" for an unpartitioned table
    action: str  # add | replace | drop | unchanged
    current: Side
    staged: Side


@dataclass(frozen=True)
class StagedDiff:
    """What publishing a staged swap would change, per partition: the current and the staged data."""

    swap_id: str
    table: str
    storage_format: str
    rows_counted: bool  # row counts were read from file footers (Parquet/ORC with pyarrow installed)
    rows_note: str
    partitions: tuple[DiffRow, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diff(swap_id: str, *, rows: bool = True, metastore_uri: str | None = None, journal_url: str | None = None,
         runtime: Runtime | None = None, **options: Any) -> StagedDiff:
    """Per partition of the staged swap ``swap_id``: the current and the staged location, file count, bytes
    and (for Parquet and ORC, from the files' footers, without Spark; ``rows=False`` skips them) row count."""
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        record = staged_record(journal, swap_id, doing="diff")
        target = catalog.get_table(record.db_name, record.table_name)
        batch = batch_of(record, target)
        snapshot = catalog.snapshot(target.db, target.name, batch.reads())
        plan = batch.plan_against(snapshot)
    fmt = (target.storage_format or "").lower()
    counter, note = _row_counter(fmt) if rows else (None, "not asked (--no-rows)")
    out = []
    for change in plan.changes():
        out.append(DiffRow(change.partition, change.action, _side(change.old_location, counter, change.action != "add"),
                           _side(change.new_location, counter, change.action != "drop")))
    return StagedDiff(swap_id, record.table, fmt, counter is not None, note, tuple(out))


def _row_counter(fmt: str) -> tuple[Callable[[Any, str], int] | None, str]:
    if fmt not in FOOTER_FORMATS:
        return None, f"unknown: row counts are read from Parquet and ORC footers only (the table is {fmt or '?'})"
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            def count(fs: Any, path: str) -> int:
                with fs.open(path, "rb") as fh:
                    return int(pq.ParquetFile(fh).metadata.num_rows)
        else:
            import pyarrow.orc as orc

            def count(fs: Any, path: str) -> int:
                with fs.open(path, "rb") as fh:
                    return int(orc.ORCFile(fh).nrows)
    except ImportError:
        return None, "unknown: reading row counts from file footers needs pyarrow (pip install 'tableswap[audit]')"
    return count, f"from the {fmt} files' footers"


def _side(location: str | None, counter: Callable[[Any, str], int] | None, present: bool) -> Side:
    if not location or not present:
        return Side(None, 0 if not present else None, 0 if not present else None, 0 if not present else None)
    try:
        found = storage.survey(location)
    except Exception as exc:  # noqa: BLE001 - unknown, never an error
        log.warning("diff.list_failed", location=location, error=str(exc))
        return Side(location)
    data = _data_files(found)
    rows = None
    if counter is not None and found is not None:
        try:
            rows = sum(counter(found.fs, name) for name in data)
        except Exception as exc:  # noqa: BLE001 - an unreadable footer: unknown
            log.warning("diff.rows_unknown", location=location, error=str(exc))
    return Side(location, len(data), sum(data.values()), rows)


__all__ = ["StagedEntry", "StagedDiff", "DiffRow", "Side", "list_staged", "diff"]
