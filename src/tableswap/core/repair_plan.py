"""Repair planning (pure): put a table's partitions back where tableswap last left them.

When a table's metastore entry is lost (dropped and re-created, a restored metastore database) its
partitions point at Spark's default paths again, or are missing: ``MSCK REPAIR TABLE`` finds the
directories swaps displaced and none of the ones under ``_tableswap/``. The history of committed swaps
and rollbacks (the journal's records, or the recovery manifests replayed as such) says where each
partition tableswap touched was last left: :func:`lineage.current_by_history`. This module compares
that with the metastore now and plans, per partition:

* ``add``     the partition is missing: add it at its last location;
* ``repoint`` it exists elsewhere (e.g. at the default path MSCK found): move it back;
* ``leave``   it is already there; or tableswap dropped it last (then it is left as it is, never dropped).

Partitions tableswap never touched are not in the plan. A location to restore that no longer exists on
storage (deleted by the janitor, or by hand) is a *problem*: the repair is refused unless those
partitions are skipped (left as they are now).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol, Sequence

from tableswap.core import lineage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.plan import ADD, REPLACE, UNCHANGED, PlannedChange, PlannedSwap, SwapPlan, TableChange
from tableswap.core.records import SwapRecord
from tableswap.errors import InvalidInputError, NotFoundError, UnsafeOperationError
from tableswap.core.catalog import Column, PartitionInfo, TableInfo

A_ADD, A_REPOINT, A_LEAVE = "add", "repoint", "leave"
JOURNAL, STORAGE = "journal", "storage"


class Status(Protocol):
    """A location's status on storage, read-only (ops/locations.py's LocationStatus is a frozen dataclass)."""

    @property
    def exists(self) -> bool | None: ...

    @property
    def deleted_by_janitor(self) -> bool: ...


@dataclass(frozen=True)
class RepairItem:
    """One partition (``''``: an unpartitioned table's location) the history knows."""

    partition: str
    action: str  # add | repoint | leave
    location: str | None  # where the history last left it (None: tableswap dropped it)
    current_location: str | None  # in the metastore now (None: no such partition)
    exists: bool | None  # ``location`` on storage (None: not checked / no location)
    set_by: str  # the swap, rollback or repair that last set it
    note: str = ""
    problem: str | None = None  # why it cannot be restored (missing data)


@dataclass(frozen=True)
class RepairPlan(PlannedSwap):
    """A planned repair: the swap plan plus what each partition gets and why. Execute it with
    :func:`tableswap.ops.restore.repair.execute_repair`; the flip re-checks every location (compare-and-swap).
    The repair's result (:class:`~tableswap.core.result.SwapResult`, dry run or not) carries it as ``repair``."""

    plan: SwapPlan
    source: str  # journal | storage
    items: tuple[RepairItem, ...]
    untouched: int  # partitions in the metastore that the history never touched (left alone)
    skipped: tuple[RepairItem, ...] = ()  # problems left as they are (``skip_missing``)
    notes: tuple[str, ...] = ()
    history: int = 0  # committed swaps replayed
    #: Partition (``''``: the table) → the columns the files it restores carry, where the journal knows them
    #: (checked against the table's columns at the plan and again under the lock).
    columns: Mapping[str, tuple[Column, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def problems(self) -> tuple[RepairItem, ...]:
        return tuple(i for i in self.items if i.problem)

    def refusal(self) -> UnsafeOperationError | None:
        """The error a repair with problems raises (None when there is none): the reason per partition
        and what is left."""
        if not self.problems:
            return None
        lines = [f"{i.partition or 'the table'}: {i.problem}" for i in self.problems]
        fine = [i for i in self.items if not i.problem and i.action != A_LEAVE]
        left = (f"{len(fine)} other partition(s) can be restored: rerun with --skip-missing to restore them and "
                "leave the others as they are (then rewrite those from the source)" if fine
                else "nothing else needs restoring; rewrite those partitions from the source")
        return UnsafeOperationError(
            f"cannot repair {self.table}: the data to restore is gone for {len(lines)} partition(s), so the "
            f"repair would point readers at missing files. Nothing was changed. {'; '.join(lines[:20])}"
            + (f"; ... {len(lines) - 20} more" if len(lines) > 20 else "") + f". {left}.")

    def describe(self) -> str:
        head = (f"repair {self.swap_id} of {self.table} from the {self.source} "
                f"({self.history} committed swap(s) replayed)")
        lines = [head]
        for i in self.items:
            where = i.location or "(dropped by tableswap)"
            exists = "" if i.exists is None else ("  [exists]" if i.exists else "  [MISSING]")
            now = f" (now {i.current_location or 'absent'})" if i.action != A_LEAVE else ""
            lines.append(f"  {i.action:<8} {i.partition or '(table)'} -> {where}{exists}{now}  set by {i.set_by}"
                         + (f"; {i.problem}" if i.problem else f"; {i.note}" if i.note else ""))
        for i in self.skipped:
            lines.append(f"  skip     {i.partition or '(table)'}: {i.problem} (left at "
                         f"{i.current_location or 'absent'})")
        if self.untouched:
            lines.append(f"  {self.untouched} partition(s) tableswap never touched: left alone")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"swap_id": self.swap_id, "table": self.table, "source": self.source, "history": self.history,
                "items": [asdict(i) for i in self.items], "skipped": [asdict(i) for i in self.skipped],
                "untouched": self.untouched, "notes": list(self.notes), "nothing_to_do": self.is_noop,
                "problems": [asdict(i) for i in self.problems]}


def wanted(records: Sequence[SwapRecord]) -> dict[str, lineage.Change]:
    """Per partition, the last committed change of it (rollbacks and repairs included)."""
    return lineage.current_by_history(records)


def plan_repair(swap_id: str, table: TableInfo, records: Sequence[SwapRecord],
                current: Mapping[tuple[str, ...], PartitionInfo], check: Callable[[str], Status], *,
                source: str = JOURNAL, partitions: Sequence[str] | None = None, skip_missing: bool = False,
                partition_count: int = 0, notes: Sequence[str] = (),
                spellings: loc.HdfsNames | None = None) -> RepairPlan:
    """Plan the repair of ``table`` from ``records`` (committed ones count, in flip order).
    ``spellings``: the HDFS spellings the configuration makes one (a partition at its recorded directory spelled
    through a NameNode's address is already there).

    ``current``: the metastore's partitions among those the history names, keyed by values;
    ``partition_count``: how many partitions the table has in all; ``check``: a location's status
    on storage; ``partitions``: only these names.
    """
    last = wanted(records)
    history = len(lineage.committed(records))
    if not last:
        raise NotFoundError(f"the {source} has no committed swap of {table.qualified_name}: there is nothing "
                            "tableswap can restore" + (" (is this the table's storage root?)" if source == STORAGE
                                                       else " (try --from-storage)"))
    if partitions is not None:
        unknown = [p for p in partitions if p not in last]
        if unknown:
            raise NotFoundError(f"partition {', '.join(unknown)} was never changed by a committed swap")
        last = {p: last[p] for p in partitions}
    if not table.is_partitioned:
        return _plan_table(swap_id, table, last, check, source, skip_missing, notes, history, spellings)
    if lineage.TABLE in last:
        raise InvalidInputError(f"{table.qualified_name} is partitioned, but the {source}'s history records it "
                                "as unpartitioned: re-create it with its original DDL")
    keys = table.partition_key_names
    items: list[RepairItem] = []
    skipped: list[RepairItem] = []
    actions: list[PlannedChange] = []
    for name in sorted(last):
        change = last[name]
        values = pn.values_for(keys, pn.parse_name(name))
        now = current.get(values)
        now_at = now.location if now else None
        if change.new_location is None:
            items.append(RepairItem(name, A_LEAVE, None, now_at, None, change.swap_id,
                                    note="dropped by tableswap last" + (
                                        "; present now: left as it is" if now else "")))
            continue
        if now is not None and loc.same(now_at, change.new_location, spellings):
            items.append(RepairItem(name, A_LEAVE, change.new_location, now_at, None, change.swap_id,
                                    note="already there"))
            actions.append(PlannedChange(UNCHANGED, values, name, now_at, change.new_location))
            continue
        status = check(change.new_location)
        problem = _problem(status)
        item = RepairItem(name, A_ADD if now is None else A_REPOINT, change.new_location, now_at, status.exists,
                          change.swap_id, problem=problem)
        if problem and skip_missing:
            skipped.append(item)
            continue
        items.append(item)
        if now is None:
            actions.append(PlannedChange(ADD, values, name, None, change.new_location))
        else:
            actions.append(PlannedChange(REPLACE, values, name, now_at, change.new_location))
    plan = SwapPlan(swap_id, table.db, table.name, keys, tuple(actions))
    untouched = max(partition_count - sum(1 for i in items + skipped if i.current_location), 0)
    return RepairPlan(plan, source, tuple(items), untouched, tuple(skipped), tuple(notes), history)


def _problem(status: Status) -> str | None:
    if status.deleted_by_janitor:
        return "deleted by the janitor"
    if status.exists is False:
        return "no longer exists on storage"
    return None


def _plan_table(swap_id: str, table: TableInfo, last: Mapping[str, lineage.Change], check: Callable[[str], Status],
                source: str, skip_missing: bool, notes: Sequence[str], history: int,
                spellings: loc.HdfsNames | None = None) -> RepairPlan:
    change = last.get(lineage.TABLE)
    if change is None or set(last) != {lineage.TABLE}:
        raise InvalidInputError(f"{table.qualified_name} is unpartitioned, but the {source}'s history records "
                                "partitions: re-create it with its original DDL")
    if change.new_location is None:
        raise InvalidInputError(f"the {source} has no location for {table.qualified_name}")
    if loc.same(table.location, change.new_location, spellings):
        item = RepairItem("", A_LEAVE, change.new_location, table.location, None, change.swap_id, note="already there")
        return RepairPlan(SwapPlan(swap_id, table.db, table.name, ()), source, (item,), 0, (), tuple(notes), history)
    status = check(change.new_location)
    item = RepairItem("", A_REPOINT, change.new_location, table.location, status.exists, change.swap_id,
                      problem=_problem(status))
    if item.problem and skip_missing:
        return RepairPlan(SwapPlan(swap_id, table.db, table.name, ()), source, (), 0, (item,), tuple(notes), history)
    plan = SwapPlan(swap_id, table.db, table.name, (), (), TableChange(table.location, change.new_location))
    return RepairPlan(plan, source, (item,), 0, (), tuple(notes), history)


__all__ = ["RepairItem", "RepairPlan", "plan_repair", "wanted", "A_ADD", "A_REPOINT", "A_LEAVE"]
