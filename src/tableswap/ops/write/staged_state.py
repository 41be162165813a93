"""What a staged swap is made of, durably, and how a publish checks it (ops/write/staged.py's publish, the
group publish, staged_view's diff): the staging directory's files compared with those journaled at the stage
(:func:`check_staged_files`), the format and columns the batch was written for compared with the table read
under the lock (:class:`PublishPlanning`), and the swap's planner rebuilt from its journal record
(:func:`staged_record`, :func:`batch_of`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Sequence

from tableswap import errors, storage
from tableswap.core import partitions as pn
from tableswap.core import locations as loc
from tableswap.core.catalog import TableInfo
from tableswap.core.catalog_port import Catalog
from tableswap.core.plan import WrittenPartitions, WrittenTable
from tableswap.core.planning import LockedPlanning
from tableswap.core.records import PENDING, STAGED, SwapKind, SwapRecord
from tableswap.core.scope import Classify, ScopeDrops
from tableswap.journal.store import Journal
from tableswap.logs import get_logger

log = get_logger("tableswap.staged")

#: What a conflict of a publish tells to do.
RERUN = ("Publish it again (`tableswap publish SWAP_ID`: it plans from the table as it is then), or discard it "
         "(`tableswap discard SWAP_ID`) and stage a new batch")
#: What a publish refused for a partition added in its predicate scope with no Spark at hand tells to do.
NO_SPARK = ("Publish it with the StagedSwap the staging job got (its SparkSession evaluates the predicate), or "
            "`tableswap discard {swap_id}` and stage the batch again")


# ---------------------------------------------------------------------- what was staged, checked at publish
def staged_files(location: str, keys: Sequence[str]) -> dict[str, int]:
    """The data files below the staging ``location`` (path relative to it → bytes), from one listing: a
    reader's rule, no part of the path hidden (``_SUCCESS``, ``.crc``, ``_temporary``...) but a partition
    directory ``<key>=<value>`` at its depth (a partition column may be named ``_p``)."""
    return staged_files_in(storage.survey_staging(location), keys)


def staged_files_in(found: storage.Survey | None, keys: Sequence[str]) -> dict[str, int]:
    """:func:`staged_files` from ``found``, a listing of the staging location made already."""
    if found is None:
        return {}
    prefix = found.path.rstrip("/") + "/"
    out = {}
    for name, size in found.sizes.items():
        if not name.startswith(prefix):
            continue
        parts = name[len(prefix):].split("/")
        if any(pn.is_hidden(part) and not (depth < len(keys) and pn.is_partition_dir(part, keys[depth]))
               for depth, part in enumerate(parts)):
            continue
        out["/".join(parts)] = size
    return out


def written_for(table: TableInfo) -> dict[str, Any]:
    """What of ``table`` its staged files were written for: its format (input and output format, serde,
    provider) and its columns (names and types), partition columns apart."""
    def columns(cols: Sequence[Any]) -> list[list[str]]:
        return [[c.name.lower(), c.type.lower().replace(" ", "")] for c in cols]

    return {"input_format": table.input_format, "output_format": table.output_format, "serde": table.serde_lib,
            "provider": table.provider, "columns": columns(table.columns),
            "partition_columns": columns(table.partition_keys)}


def shape_differences(staged_for: dict[str, Any], now: TableInfo) -> list[str]:
    """How ``now`` differs from the table a batch was staged for (:func:`written_for`): any change of format,
    of a staged column's name, type or place, or of the partition columns. Columns added after the staged
    ones are no difference: the published partitions read them as NULL, as a partition written before an
    ``ADD COLUMNS`` does."""
    current = written_for(now)
    out = [f"{what}: {staged_for.get(key) or 'none'} when staged, {current[key] or 'none'} now"
           for key, what in (("provider", "format"), ("input_format", "input format"),
                             ("output_format", "output format"), ("serde", "serde"))
           if (staged_for.get(key) or None) != (current[key] or None)]
    staged_cols, cols = [tuple(c) for c in staged_for.get("columns", [])], [tuple(c) for c in current["columns"]]
    for i, (name, type_) in enumerate(staged_cols):
        if i >= len(cols):
            out.append(f"column {name} {type_}: gone")
        elif cols[i] != (name, type_):
            out.append(f"column {i + 1}: {name} {type_} when staged, {cols[i][0]} {cols[i][1]} now")
    staged_keys = [tuple(c) for c in staged_for.get("partition_columns", [])]
    if staged_keys != [tuple(c) for c in current["partition_columns"]]:
        out.append(f"partition columns: ({', '.join(' '.join(c) for c in staged_keys)}) when staged, "
                   f"({', '.join(' '.join(c) for c in current['partition_columns'])}) now")
    return out


def file_differences(staged: dict[str, int], now: dict[str, int]) -> list[str]:
    """The data files deleted, added or resized since they were staged, one line each."""
    return ([f"{p}: missing ({staged[p]} bytes staged)" for p in sorted(staged.keys() - now.keys())]
            + [f"{p}: added ({now[p]} bytes)" for p in sorted(now.keys() - staged.keys())]
            + [f"{p}: {staged[p]} bytes staged, {now[p]} now" for p in sorted(staged.keys() & now.keys())
               if staged[p] != now[p]])


def check_staged_files(record: SwapRecord, staged: dict[str, int], keys: Sequence[str],
                       listing: storage.Survey | None = None) -> None:
    """Refuse (:class:`StagedBatchChangedError`, nothing changed) a staging directory whose data files are not
    those journaled when it was staged. ``listing``: the staging directory's, made already (else listed here)."""
    where = record.staging_location or ""
    found = listing if listing is not None else storage.survey_staging(where)
    changed = file_differences(staged, staged_files_in(found, keys))
    if changed:
        raise errors.StagedBatchChangedError(
            f"the staging directory {where} of swap {record.swap_id} no longer holds what was staged "
            f"({len(changed)} difference(s): {errors.listing(changed)}). Nothing was changed; the swap is still "
            f"staged. Put the files back as they were and publish again, or discard it (`tableswap discard "
            f"{record.swap_id}`) and stage the batch again",
            table=record.table, swap_id=record.swap_id, differences=changed)


@dataclass(frozen=True)
class PublishPlanning:
    """A publish's :class:`~tableswap.core.plan.Planner`: under the table lock, first the target read there
    compared with the table the batch was staged for (:func:`shape_differences`), then the swap's own planning."""

    planning: LockedPlanning
    staged_for: dict[str, Any] | None  # None: not known (staged before journal version 9, no temporary table)

    @property
    def swap_id(self) -> str:
        return self.planning.swap_id

    @property
    def db(self) -> str:
        return self.planning.db

    @property
    def table(self) -> str:
        return self.planning.table

    @property
    def lists_partitions(self) -> bool:
        return self.planning.lists_partitions

    def listed(self, values: Sequence[tuple[str, ...]]) -> "PublishPlanning":
        return replace(self, planning=self.planning.listed(values))

    def reads(self) -> list[tuple[str, ...]]:
        return self.planning.reads()

    def plan_against(self, snapshot: Any) -> Any:
        if self.staged_for is not None:
            changed = shape_differences(self.staged_for, snapshot.table)
            if changed:
                qualified = snapshot.table.qualified_name
                raise errors.StagedBatchChangedError(
                    f"{qualified} is not the table swap {self.swap_id} was staged for (dropped and re-created "
                    f"meanwhile?): {errors.listing(changed)}. Nothing was changed; the swap is still staged. Its "
                    f"files do not fit the table as it is: discard it (`tableswap discard {self.swap_id}`) and "
                    "stage the batch again for the table as it is now",
                    table=qualified, swap_id=self.swap_id, differences=changed)
        return self.planning.plan_against(snapshot)


def shape_staged_for(catalog: Catalog, record: SwapRecord, recorded: dict[str, Any] | None,
                bound: Any) -> dict[str, Any] | None:
    """The format and columns the batch was written for: journaled when it was staged, else (a swap staged
    before journal version 9) those of its temporary table, a copy of the target made when it was staged."""
    if recorded is not None:
        return recorded
    if record.temp_table:
        try:
            return written_for(catalog.get_table(record.db_name, record.temp_table))
        except errors.TableNotFoundError:
            pass
    bound.warning("publish.shape_unchecked", reason="staged before journal version 9 and its temporary table is gone")
    return None


# ---------------------------------------------------------------------- durable state → planner
def staged_record(journal: Journal, swap_id: str, *, doing: str) -> SwapRecord:
    """The journal record of the staged swap ``swap_id``. :class:`NotFoundError` when the journal has no such
    swap; :class:`NotStagedError` when it is not staged (published, discarded, or never staged)."""
    record = journal.get_swap(swap_id)
    if record is None:
        raise errors.NotFoundError(f"no swap {swap_id} in the journal {_safe(journal)}; "
                                   "`tableswap staged` lists the staged swaps", swap_id=swap_id)
    if record.state == STAGED:
        return record
    if record.staged_at is None:
        why = f"it was never staged (a swap, state {record.state})"
    elif record.state == PENDING:
        why = ("its publish was interrupted during its flip (state pending: part of its batch may be live): run "
               f"`tableswap recover --table {record.table}`, which finishes it or, if nothing of it landed, "
               f"makes it staged again{', then discard it' if doing == 'discard' else ''}")
    elif record.state == "committed":
        why = f"it is already published (committed {record.committed_at})"
        if doing == "discard":
            why += (f"; to take its batch back, roll the table back to before it: "
                    f"`tableswap rollback {record.table} --to {swap_id}`")
    elif record.state == "aborted":
        why = f"it was discarded ({record.error or 'aborted'})"
    else:
        why = f"its state is {record.state}"
    raise errors.NotStagedError(f"cannot {doing} swap {swap_id} of {record.table}: {why}. Nothing was changed",
                                table=record.table, swap_id=swap_id, state=record.state)


def _safe(journal: Journal) -> str:
    from tableswap.journal.store import safe_url

    return safe_url(journal.url)


def staged_drops(record: SwapRecord, keys: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    names = json.loads(record.staged_drops) if record.staged_drops else []
    return tuple(pn.values_for(tuple(keys), pn.parse_name(n)) for n in names)


def batch_of(record: SwapRecord, target: TableInfo, classify: Classify | None = None,
             listing: storage.Survey | None = None) -> WrittenPartitions | WrittenTable:
    """The staged batch of ``record`` rebuilt from what is durable: the staging directory's listing and the
    journal's drops and scope (``classify``: a predicate scope's evaluation, where Spark is at hand; ``listing``:
    the staging directory's listing made already, else it is listed here). Refuses a record whose staging
    location is not its own directory under the table root, or a table whose root moved since it was staged."""
    where = record.staging_location or ""
    own = loc.staging_location(record.table_root, record.swap_id) if record.table_root else None
    if not own or not loc.same(where, own):
        raise errors.UnsafeOperationError(
            f"staged swap {record.swap_id} records its data at {where or 'no location'}, not its own directory "
            f"{own} under the table root: refusing to publish it", table=record.table, swap_id=record.swap_id)
    if not loc.same(target.root or "", record.table_root):
        raise errors.SwapConflictError(
            f"{target.qualified_name}'s storage root moved since swap {record.swap_id} was staged "
            f"({record.table_root} → {target.root}); nothing was changed. {RERUN}",
            table=target.qualified_name, swap_id=record.swap_id)
    if SwapKind(record.kind) == SwapKind.PARTITIONS:
        keys = target.partition_key_names
        found = listing if listing is not None else storage.survey_staging(where)
        written = storage.written_partitions_in(found, where, keys)
        drops = staged_drops(record, keys)
        if not written and not drops:
            raise errors.StagingWriteError(
                f"the staging directory {where} of swap {record.swap_id} holds no partition any more; nothing "
                "was changed. Discard it and stage the batch again", table=record.table, swap_id=record.swap_id)
        scope = None
        if record.staged_scope:  # planned again under the lock (a record staged before journal version 13: as staged)
            scope = ScopeDrops.from_json(record.staged_scope, keys, target.qualified_name,
                                         [p.values for p in written] + list(drops), classify=classify,
                                         unavailable=NO_SPARK.format(swap_id=record.swap_id))
        return WrittenPartitions(record.swap_id, target.db, target.name, tuple(written), drops, scope)
    return WrittenTable(record.swap_id, target.db, target.name, where, storage.staged_bytes(where))
