"""Backfill units and progress (pure): what a unit is, its journal key, and a backfill's status.

A unit is one partition spec of the target (``dt=2026-06-01``; with several partition columns any
non-empty subset, ``dt=2026-06-01`` covering every ``country`` of that day, or ``dt=.../country=DE``),
given as text, a mapping, or a bare value (a ``date``, ``'2026-06-01'``) of the first partition column.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from tableswap.core.scope import spec_name, spec_values
from tableswap.core.records import StrEnum
from tableswap.errors import InvalidInputError


class UnitState(StrEnum):
    PENDING = "pending"  # not run yet (or not finished: a crashed run leaves "running")
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


def unit_values(unit: Any, keys: Sequence[str]) -> dict[str, str]:
    """``unit`` → ``{partition column: value}`` in the table's column order (a non-empty subset)."""
    if not keys:
        raise InvalidInputError("a backfill needs a partitioned table: its units are partitions")
    return spec_values(unit, keys, what="backfill unit")


unit_name = spec_name


@dataclass(frozen=True)
class UnitStatus:
    unit: str
    state: str
    swap_id: str | None = None
    attempts: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    seconds: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class BackfillStatus:
    """A named backfill's progress as the journal has it, units in the order first given."""

    name: str
    table: str
    created_at: str
    updated_at: str
    units: tuple[UnitStatus, ...]

    def of(self, state: str) -> tuple[UnitStatus, ...]:
        return tuple(u for u in self.units if u.state == state)

    @property
    def done(self) -> tuple[UnitStatus, ...]:
        return self.of(UnitState.DONE)

    @property
    def failed(self) -> tuple[UnitStatus, ...]:
        return self.of(UnitState.FAILED)

    @property
    def pending(self) -> tuple[UnitStatus, ...]:
        """Not done and not failed: never run, or left running by a process that died."""
        return tuple(u for u in self.units if u.state in (UnitState.PENDING, UnitState.RUNNING))

    @property
    def complete(self) -> bool:
        return len(self.done) == len(self.units)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(done=len(self.done), failed=len(self.failed), pending=len(self.pending), complete=self.complete)
        return out
