"""What a swap plans from under the table lock: its staged batch, checked against the table it validated and the
caller's state token (pure). Used by a swap (ops/write/swap.py) and by the publish of a staged swap, which rebuilds it
from the journal and the staging directory in another process (ops/write/staged.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from tableswap import errors
from tableswap.core import eligibility, partitions as pn
from tableswap.core.catalog import TableInfo
from tableswap.core.catalog_port import Snapshot
from tableswap.core.checks import require, unchanged_checks
from tableswap.core.plan import SwapPlan, WrittenPartitions, WrittenTable
from tableswap.core.state import TableState


@dataclass(frozen=True)
class LockedPlanning:
    """The swap's :class:`~tableswap.core.plan.Planner`: its staged batch, planned under the lock after
    checking that the table is still the one validated, still as the caller's state token saw it
    (``if_unchanged_since``), and that no partition it replaces has a storage format of its own."""

    batch: WrittenPartitions | WrittenTable
    target: TableInfo
    state: TableState | None = None

    @property
    def swap_id(self) -> str:
        return self.batch.swap_id

    @property
    def db(self) -> str:
        return self.batch.db

    @property
    def table(self) -> str:
        return self.batch.table

    @property
    def lists_partitions(self) -> bool:
        """A replace scope: its drops are planned from the partitions listed under the lock."""
        return isinstance(self.batch, WrittenPartitions) and self.batch.lists_partitions

    def listed(self, values: Sequence[tuple[str, ...]]) -> "LockedPlanning":
        if not isinstance(self.batch, WrittenPartitions):
            return self
        return replace(self, batch=self.batch.listed(values))

    def reads(self) -> list[tuple[str, ...]]:
        return self.batch.reads()

    def plan_against(self, snapshot: Snapshot) -> SwapPlan:
        now, target = snapshot.table, self.target
        if now.partition_key_names != target.partition_key_names:
            raise errors.SwapConflictError.of(
                target.qualified_name, [f"partition columns were ({', '.join(target.partition_key_names)}), now "
                                        f"({', '.join(now.partition_key_names)})"],
                since="since the swap validated it", then="Rerun the swap", swap_id=self.swap_id)
        if self.state is not None:
            keys = target.partition_key_names
            touched = [(pn.partition_name(keys, v), v) for v in self.reads()]
            require(unchanged_checks(self.state, touched), snapshot, table=target.qualified_name,
                    since="since the state token was taken", swap_id=self.swap_id,
                    then="Read the table again, recompute the batch and rerun with a new token")
        plan = self.batch.plan_against(snapshot)
        eligibility.check_replaced_partitions(now, [snapshot.partitions[a.values] for a in plan.replaces])
        return plan
