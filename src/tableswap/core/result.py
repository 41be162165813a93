"""What a swap returns."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from tableswap.core.deprecated import warn_renamed
from tableswap.core.distribution import Layout
from tableswap.core.records import Action, PartitionChange
from tableswap.core.state import state_after

if TYPE_CHECKING:
    from tableswap.core.plan import SwapPlan
    from tableswap.core.repair_plan import RepairPlan


@dataclass(frozen=True)
class SwapResult:
    swap_id: str
    table: str
    kind: str  # partitions | table | merge | compact | rollback | repair
    added: tuple[PartitionChange, ...] = ()
    replaced: tuple[PartitionChange, ...] = ()
    unchanged: tuple[PartitionChange, ...] = ()
    dropped: tuple[PartitionChange, ...] = ()
    table_change: PartitionChange | None = None
    staging_location: str | None = None
    timings: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    catalog_calls: int = 0  # every catalog call the swap made (Hive Metastore or Glue)
    commit_catalog_calls: int = 0  # of which from taking the lock to the journaled commit
    dry_run: bool = False
    #: The state this swap left the partitions (or the table) it changed in, as a token for the next
    #: read-modify-write run's ``if_unchanged_since`` (None for a dry run or when nothing changed).
    state_token: str | None = None
    #: A repair's (kind ``repair``, dry run or not): what it restores, per partition, and why
    #: (:class:`~tableswap.core.repair_plan.RepairPlan`: each item's action, location and whether its data exists).
    repair: RepairPlan | None = None
    #: How its staging write laid out the batch and why (``[swap] write_distribution``, the rule of ``"auto"``:
    #: :func:`tableswap.core.distribution.choose`); None where no batch was written here (a rollback, a
    #: repair, a staged swap's publish).
    write_distribution: Layout | None = None

    @property
    def metastore_calls(self) -> int:
        """Deprecated (kept for one release): :attr:`catalog_calls`."""
        warn_renamed("SwapResult.metastore_calls", "SwapResult.catalog_calls")
        return self.catalog_calls

    @property
    def commit_metastore_calls(self) -> int:
        """Deprecated (kept for one release): :attr:`commit_catalog_calls`."""
        warn_renamed("SwapResult.commit_metastore_calls", "SwapResult.commit_catalog_calls")
        return self.commit_catalog_calls

    @property
    def displaced(self) -> tuple[str, ...]:
        """Locations no longer referenced after this swap, queued for the janitor."""
        olds = [c.old_location for c in self.replaced + self.dropped if c.old_location]
        if self.table_change and self.table_change.old_location:
            olds.append(self.table_change.old_location)
        return tuple(olds)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(replace(self, timings={}, repair=None))  # a read-only mapping cannot be copied: below
        out["timings"] = dict(self.timings)
        out["displaced"] = list(self.displaced)
        # For one release, the old names of the call counts too (docs/cli.md#json-output).
        out["metastore_calls"], out["commit_metastore_calls"] = self.catalog_calls, self.commit_catalog_calls
        del out["repair"]
        if self.repair is not None:  # a repair's plan, as its own to_dict gives it
            out["repair"] = self.repair.to_dict()
        return out

    def summary(self) -> str:
        if self.table_change:
            what = f"table location {self.table_change.old_location} -> {self.table_change.new_location}"
        else:
            what = (f"{len(self.added)} added, {len(self.replaced)} replaced, {len(self.unchanged)} unchanged"
                    + (f", {len(self.dropped)} dropped" if self.dropped else ""))
        total = self.timings.get("total")
        took = f" in {total:.1f}s" if total is not None else ""
        prefix = "dry run: would swap" if self.dry_run else "swapped"
        return f"{prefix} {self.table} ({self.swap_id}): {what}{took}"


def result_from_plan(plan: SwapPlan, kind: str, *, staging_location: str | None, timings: Mapping[str, float],
                     calls: int, dry_run: bool = False, commit_calls: int = 0,
                     write_distribution: Layout | None = None) -> SwapResult:
    """The :class:`SwapResult` of a :class:`~tableswap.core.plan.SwapPlan` (carried out, or a dry run's)."""
    after = None if dry_run else state_after(plan)
    changes = plan.changes()

    def of(action: Action) -> tuple[PartitionChange, ...]:
        return tuple(c for c in changes if c.partition and c.action == action)

    table_change = next((c for c in changes if not c.partition), None)
    return SwapResult(
        swap_id=plan.swap_id, table=f"{plan.db}.{plan.table}", kind=kind, added=of(Action.ADD),
        replaced=of(Action.REPLACE), unchanged=of(Action.UNCHANGED), dropped=of(Action.DROP),
        table_change=table_change, staging_location=staging_location, timings=timings,
        catalog_calls=calls, commit_catalog_calls=commit_calls, dry_run=dry_run,
        state_token=after.encode() if after is not None else None, write_distribution=write_distribution,
    )


class Timer:
    """Seconds per step of an operation, for :attr:`SwapResult.timings`."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.marks: dict[str, float] = {}
        self._last = self.start

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self.marks[step] = round(now - self._last, 4)
        self._last = now

    def done(self) -> dict[str, float]:
        self.marks["total"] = round(time.perf_counter() - self.start, 4)
        return dict(self.marks)
