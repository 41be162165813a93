"""Pure planning: what a swap will change, decided from metastore state.

No I/O here. A swap plans under the table lock, from the state read there (:class:`WrittenPartitions`,
:class:`WrittenTable`: the :class:`Planner` of what it staged), so concurrent swaps of one table
serialize in lock order. A plan made beforehand (a rollback's, a recovery's) is its own planner: the
commit re-checks every ``old_location`` under the lock (compare-and-swap), so a plan made from a stale
read fails safely instead of overwriting.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.records import Action, PartitionChange
from tableswap.core.scope import ScopeDrops
from tableswap.errors import InvalidInputError
from tableswap.core.catalog import LocationChange, NewPartition, PartitionInfo, TableInfo
from tableswap.core.catalog_port import Snapshot
from tableswap.core.deprecated import renamed

ADD, REPLACE, UNCHANGED, DROP = Action.ADD, Action.REPLACE, Action.UNCHANGED, Action.DROP


@dataclass(frozen=True)
class PlannedChange:
    """One partition's change as planned (under the lock, or beforehand for a restore): what the flip sends
    the catalog, with the partition's ``values`` and the new partition's ``parameters`` (its statistics).
    Once planned it is recorded and reported as a :class:`~tableswap.core.records.PartitionChange`
    (:meth:`SwapPlan.changes`), which keeps only the name, the action and the two locations. Formerly
    ``PartitionAction``, a deprecated name kept for one release."""

    action: Action
    values: tuple[str, ...]
    name: str
    old_location: str | None
    new_location: str | None
    parameters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class TableChange:
    old_location: str | None
    new_location: str
    new_bytes: int | None = None  # the new location's data bytes, when the swap knows them


@dataclass(frozen=True)
class SwapPlan:
    swap_id: str
    db: str
    table: str
    partition_keys: tuple[str, ...]
    actions: tuple[PlannedChange, ...] = ()
    table_change: TableChange | None = None

    def of(self, action: Action) -> tuple[PlannedChange, ...]:
        return tuple(a for a in self.actions if a.action == action)

    @property
    def adds(self) -> tuple[PlannedChange, ...]:
        return self.of(ADD)

    @property
    def replaces(self) -> tuple[PlannedChange, ...]:
        return self.of(REPLACE)

    @property
    def drops(self) -> tuple[PlannedChange, ...]:
        return self.of(DROP)

    @property
    def unchanged(self) -> tuple[PlannedChange, ...]:
        return self.of(UNCHANGED)

    @property
    def touched(self) -> tuple[PlannedChange, ...]:
        """The partition actions a flip changes the metastore for: adds, replaces and drops."""
        return self.adds + self.replaces + self.drops

    @property
    def is_noop(self) -> bool:
        return self.table_change is None and not self.touched

    def displaced(self) -> list[tuple[str, str]]:
        """``(partition name, location)`` of every location this plan stops referencing."""
        out = [(a.name, a.old_location) for a in self.replaces + self.drops if a.old_location]
        if self.table_change and self.table_change.old_location:
            out.append(("", self.table_change.old_location))
        return out

    def changes(self) -> list[PartitionChange]:
        """Every planned change, then the table's change (partition ``""``), as the records the journal keeps and
        a :class:`~tableswap.core.result.SwapResult` reports."""
        out = [PartitionChange(a.name, a.action, a.old_location, a.new_location) for a in self.actions]
        if self.table_change is not None:
            out.append(PartitionChange("", REPLACE, self.table_change.old_location, self.table_change.new_location))
        return out

    def sizes(self) -> dict[str, int]:
        """The data bytes of the locations this plan points at, where known: each written partition's
        ``totalSize`` (from its staging listing) and a staged table's size; a rollback's plan knows none."""
        out = {}
        for a in self.adds + self.replaces + self.unchanged:
            size = a.parameters.get("totalSize")
            if a.new_location and size is not None and str(size).isdigit():
                out[a.new_location] = int(size)
        if self.table_change is not None and self.table_change.new_bytes is not None:
            out[self.table_change.new_location] = self.table_change.new_bytes
        return out

    def new_partitions(self) -> list[NewPartition]:
        return [NewPartition(a.values, a.new_location, a.parameters) for a in self.adds if a.new_location]

    def location_changes(self) -> list[LocationChange]:
        return [LocationChange(a.values, a.old_location, a.new_location, a.parameters)
                for a in self.replaces if a.new_location]

    def reads(self) -> list[tuple[str, ...]]:
        """:class:`Planner`: the partitions to read under the lock (those the plan changes)."""
        return [a.values for a in self.touched]

    def plan_against(self, snapshot: Snapshot) -> "SwapPlan":
        """:class:`Planner`: a plan made beforehand stays as it is (the commit checks it against the
        snapshot)."""
        return self

    def describe(self) -> str:
        """Human-readable plan, as dry runs print it."""
        lines = [f"swap {self.swap_id} on {self.db}.{self.table}"]
        if self.table_change:
            lines.append(f"  table location: {self.table_change.old_location} -> {self.table_change.new_location}")
        for a in self.actions:
            if a.action == ADD:
                lines.append(f"  add      {a.name} -> {a.new_location}")
            elif a.action == REPLACE:
                lines.append(f"  replace  {a.name}: {a.old_location} -> {a.new_location}")
            elif a.action == DROP:
                lines.append(f"  drop     {a.name} (was {a.old_location})")
            else:
                lines.append(f"  keep     {a.name} at {a.new_location}")
        return "\n".join(lines)


class PlannedSwap:
    """What an operation's plan (a rollback's, a repair's) tells of the swap plan it holds in ``plan``."""

    plan: SwapPlan

    @property
    def swap_id(self) -> str:
        return self.plan.swap_id

    @property
    def table(self) -> str:
        return f"{self.plan.db}.{self.plan.table}"

    @property
    def is_noop(self) -> bool:
        return self.plan.is_noop


class Planner(Protocol):
    """What the commit protocol plans from, under the table lock: it reads the table and the partitions
    :meth:`reads` names (one snapshot), then calls :meth:`plan_against` with that snapshot.

    A planner whose reads depend on every partition of the table (a replace scope's: its drops) says so
    with ``lists_partitions = True`` and a method ``listed(values) -> Planner``: the protocol lists the
    table's partitions under the lock first and plans from ``listed(those values)`` (:func:`under_lock`)."""

    # read-only: the frozen planners (a plan, a batch, a staged swap's planning) satisfy it
    @property
    def swap_id(self) -> str: ...

    @property
    def db(self) -> str: ...

    @property
    def table(self) -> str: ...

    def reads(self) -> Sequence[Sequence[str]]: ...

    def plan_against(self, snapshot: Snapshot) -> SwapPlan: ...


def under_lock(planner: Planner, list_values: Callable[[], Sequence[tuple[str, ...]]]) -> Planner:
    """The planner the commit protocol plans from under the lock: a planner that ``lists_partitions`` (a
    replace scope) planned from the table's partitions ``list_values()`` lists there; any other as it is."""
    listed = getattr(planner, "listed", None)
    if getattr(planner, "lists_partitions", False) and listed is not None:
        replanned: Planner = listed(list_values())
        return replanned
    return planner


@dataclass(frozen=True)
class WrittenPartitions:
    """A staged batch of partitions (new locations and files' statistics), planned under the lock
    against the target's partitions read there: each is added or replaces the current one; each of
    ``drop`` (a replace scope's partitions the batch has no rows for) still there is dropped.

    With ``scope``, ``drop`` is what the scope dropped from the table as read before the lock (a dry
    run, a staged swap's preview); under the lock the drops are planned again from every partition
    listed there (:meth:`listed`)."""

    swap_id: str
    db: str
    table: str
    written: tuple[PartitionInfo, ...]
    drop: tuple[tuple[str, ...], ...] = ()
    scope: ScopeDrops | None = None

    @property
    def lists_partitions(self) -> bool:
        return self.scope is not None

    def listed(self, values: Sequence[tuple[str, ...]]) -> "WrittenPartitions":
        """The batch with its scope's drops planned from ``values``, the table's partitions listed under
        the lock."""
        if self.scope is None:
            return self
        return replace(self, drop=self.scope.drops(values, [p.values for p in self.written]), scope=None)

    def reads(self) -> list[tuple[str, ...]]:
        return [p.values for p in self.written] + list(self.drop)

    def plan_against(self, snapshot: Snapshot) -> SwapPlan:
        return plan_partitions(self.swap_id, snapshot.table, self.written, snapshot.partitions, self.drop)


@dataclass(frozen=True)
class WrittenTable:
    """A staged unpartitioned table at ``location``, planned under the lock against the table's
    location read there."""

    swap_id: str
    db: str
    table: str
    location: str
    bytes: int | None = None  # the staged data's size, when known

    def reads(self) -> list[tuple[str, ...]]:
        return []

    def plan_against(self, snapshot: Snapshot) -> SwapPlan:
        return plan_table(self.swap_id, snapshot.table, self.location, self.bytes)


def plan_partitions(
    swap_id: str,
    table: TableInfo,
    written: Sequence[PartitionInfo],
    current: Mapping[tuple[str, ...], PartitionInfo],
    drop: Sequence[tuple[str, ...]] = (),
) -> SwapPlan:
    """Each written partition is added (new) or replaces the current one (expected old location);
    each of ``drop`` (existing partitions a replace scope owns that the batch has no rows for) is
    dropped, its location kept (expected old location).

    ``written`` are the staged partitions with their new locations and the new files'
    statistics; ``current`` the target's existing partitions among them and ``drop``, keyed by values.
    """
    if not table.is_partitioned:
        raise InvalidInputError(f"{table.qualified_name} is not partitioned")
    keys = table.partition_key_names
    seen: set[tuple[str, ...]] = set()
    actions = []
    for part in sorted(written, key=lambda p: p.values):
        if part.values in seen:
            raise InvalidInputError(f"partition {pn.partition_name(keys, part.values)} staged twice")
        seen.add(part.values)
        pn.check_storable(keys, part.values)
        name = pn.partition_name(keys, part.values)
        stats = MappingProxyType(part.fast_stats())
        existing = current.get(part.values)
        if existing is None:
            actions.append(PlannedChange(ADD, part.values, name, None, part.location, stats))
        elif loc.same(existing.location, part.location):
            actions.append(PlannedChange(UNCHANGED, part.values, name, existing.location, part.location, stats))
        else:
            actions.append(PlannedChange(REPLACE, part.values, name, existing.location, part.location, stats))
    for values in sorted(set(drop)):
        if values in seen:
            raise InvalidInputError(f"partition {pn.partition_name(keys, values)} is both written and dropped")
        existing = current.get(values)
        if existing is not None:  # gone meanwhile: nothing to drop
            actions.append(PlannedChange(DROP, values, pn.partition_name(keys, values), existing.location, None))
    return SwapPlan(swap_id, table.db, table.name, keys, tuple(actions))


def plan_table(swap_id: str, table: TableInfo, new_location: str, new_bytes: int | None = None) -> SwapPlan:
    if table.is_partitioned:
        raise InvalidInputError(f"{table.qualified_name} is partitioned")
    change = None if loc.same(table.location, new_location) else TableChange(table.location, new_location,
                                                                              new_bytes)
    return SwapPlan(swap_id, table.db, table.name, (), (), change)


def plan_restore(
    swap_id: str,
    table: TableInfo,
    targets: Mapping[tuple[str, ...], str | None],
    current: Mapping[tuple[str, ...], PartitionInfo],
) -> SwapPlan:
    """Rollback planning: bring each partition to ``targets[values]`` (a location, or ``None`` to
    drop a partition that the undone swap added)."""
    keys = table.partition_key_names
    actions = []
    for values in sorted(targets):
        name = pn.partition_name(keys, values)
        want = targets[values]
        existing = current.get(values)
        if want is None:
            if existing is not None:
                actions.append(PlannedChange(DROP, values, name, existing.location, None))
        elif existing is None:
            actions.append(PlannedChange(ADD, values, name, None, want))
        elif loc.same(existing.location, want):
            actions.append(PlannedChange(UNCHANGED, values, name, existing.location, want))
        else:
            actions.append(PlannedChange(REPLACE, values, name, existing.location, want))
    return SwapPlan(swap_id, table.db, table.name, keys, tuple(actions))


if TYPE_CHECKING:  # the old name, for one release (tableswap.core.deprecated)
    PartitionAction = PlannedChange
else:
    def __getattr__(name: str) -> Any:
        return renamed(__name__, globals(), name, {"PartitionAction": "PlannedChange"})
