"""Compare-and-swap requirements as objects: each says what the table must look like for a commit to
go ahead, and ``.check(snapshot)`` returns ``None`` when it holds or one line saying what differs.

A snapshot is anything with ``table`` (a :class:`~tableswap.core.catalog.TableInfo`) and
``partitions`` (the partitions read, keyed by their values), such as the metastore adapter's
``TableSnapshot`` read under the table lock. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence

from tableswap.core import locations as loc
from tableswap.core.catalog_port import Snapshot
from tableswap.errors import SwapConflictError


class Check(Protocol):
    def check(self, snapshot: Snapshot) -> str | None: ...


@dataclass(frozen=True)
class PartitionAbsent:
    """The partition must not exist (the plan adds it)."""

    name: str
    values: tuple[str, ...]

    def check(self, snapshot: Snapshot) -> str | None:
        found = snapshot.partitions.get(tuple(self.values))
        return None if found is None else f"{self.name} was added meanwhile (now at {found.location})"


@dataclass(frozen=True)
class PartitionAt:
    """The partition must exist at ``location`` (the plan replaces or drops it)."""

    name: str
    values: tuple[str, ...]
    location: str | None

    def check(self, snapshot: Snapshot) -> str | None:
        found = snapshot.partitions.get(tuple(self.values))
        if found is not None and loc.same(found.location, self.location):
            return None
        return f"{self.name}: expected {self.location}, found {found.location if found else 'no partition'}"


@dataclass(frozen=True)
class TableAt:
    """The table's location must be ``location`` (the plan repoints the table)."""

    location: str | None

    def check(self, snapshot: Snapshot) -> str | None:
        now = snapshot.table.location
        if loc.same(now, self.location):
            return None
        return f"the table location: expected {self.location or 'none'}, found {now or 'none'}"


@dataclass(frozen=True)
class Unchanged:
    """The partition ``values`` (``()``: the unpartitioned table itself) must still be in the state a
    state token recorded for it (fingerprint ``before``; see :mod:`tableswap.core.state`)."""

    name: str
    values: tuple[str, ...]
    before: str

    def check(self, snapshot: Snapshot) -> str | None:
        from tableswap.core.state import describe_change, fingerprint_of

        now = snapshot.partitions.get(tuple(self.values)) if self.values else snapshot.table
        return None if fingerprint_of(now) == self.before else describe_change(self.name, self.before, now)


def unchanged_checks(state: Any, touched: Iterable[tuple[str, tuple[str, ...]]]) -> list[Check]:
    """The requirements of a state token (:class:`~tableswap.core.state.TableState`) for a batch that
    touches ``touched`` (``(name, values)`` of each partition; nothing for an unpartitioned table, whose
    own state is checked): each one the token covers must be as the token saw it."""
    if not state.partitioned:
        return [Unchanged("", (), state.then(""))]
    return [Unchanged(name, tuple(values), state.then(name)) for name, values in touched if state.covers(name)]


def conflicts(checks: Iterable[Check], snapshot: Snapshot) -> list[str]:
    """What differs: one line per failing check, in order."""
    return [c for c in (check.check(snapshot) for check in checks) if c is not None]


def plan_checks(plan: Any) -> list[Check]:
    """The requirements of a :class:`~tableswap.core.plan.SwapPlan`: every partition it adds still absent,
    every one it replaces or drops still at its planned location, the table still at its old
    location when the plan repoints the table."""
    from tableswap.core.plan import ADD

    if plan.table_change is not None:
        return [TableAt(plan.table_change.old_location)]
    return [PartitionAbsent(a.name, a.values) if a.action == ADD else PartitionAt(a.name, a.values, a.old_location)
            for a in plan.touched]


def require(checks: Sequence[Check], snapshot: Snapshot, *, table: str, since: str, then: str,
            changed: str = "nothing was changed", swap_id: str | None = None) -> None:
    """Raise :class:`SwapConflictError` (listing every conflict) unless every check holds."""
    found = conflicts(checks, snapshot)
    if found:
        raise SwapConflictError.of(table, found, since=since, then=then, changed=changed, swap_id=swap_id)
