"""Swap groups (several tables published as one unit): their journal states, record and result. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from tableswap.core.result import SwapResult

#: A group's journal states: ``open`` (members being staged), ``pending`` (its one intent recorded: every
#: member's intent is journaled and the flips may have started; ``tableswap recover`` finishes every member
#: from here), ``committed`` (every member committed in one transaction), ``failed`` (nothing of it flipped),
#: ``discarded`` (``tableswap discard GROUP``: every member discarded in one transaction).
OPEN, PENDING, COMMITTED, FAILED, DISCARDED = "open", "pending", "committed", "failed", "discarded"
#: What a group does: publish staged batches (``swap_group``) or restore every member table (``rollback --group``).
SWAP, ROLLBACK = "swap", "rollback"


@dataclass(frozen=True)
class GroupMember:
    swap_id: str
    table: str  # db.table
    position: int
    state: str | None = None  # the member swap's journal state (None: not read)
    catalog: str | None = None  # the catalog it was staged in (``hive-metastore``, ``glue://REGION``); None: not known
    state_token: str | None = None  # its if_unchanged_since, checked at the group's publish


@dataclass(frozen=True)
class GroupRecord:
    """A group as the journal records it."""

    group_id: str
    name: str | None
    kind: str
    state: str
    created_at: str
    intent_at: str | None = None
    committed_at: str | None = None
    rollback_of: str | None = None
    error: str | None = None
    members: tuple[GroupMember, ...] = ()

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(m.table for m in self.members)

    @property
    def waiting(self) -> bool:
        """Publishable or discardable as one unit: a group of swaps, ``open`` (staged, nobody published it) or
        ``failed`` before any flip (a refused audit, a conflict), with every member still ``staged``."""
        return (self.kind == SWAP and self.state in (OPEN, FAILED) and bool(self.members)
                and all(m.state == "staged" for m in self.members))

    def to_dict(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "name": self.name, "kind": self.kind, "state": self.state,
                "created_at": self.created_at, "intent_at": self.intent_at, "committed_at": self.committed_at,
                "rollback_of": self.rollback_of, "error": self.error,
                "members": [{"swap_id": m.swap_id, "table": m.table, "state": m.state, "catalog": m.catalog}
                            for m in self.members]}


@dataclass(frozen=True)
class GroupResult:
    """What a committed group did: one :class:`SwapResult` per member table (``result["db.t"]``).

    Attributes:
        group_id: the group's id (``tableswap history --group``, ``tableswap rollback --group``).
        name: its name, if it was given one.
        results: ``{db.table: SwapResult}``, in the order the tables were flipped (sorted by name).
        flip_seconds: from the first member's flip call to the last one's end: how long a reader querying
            several member tables may see some new and others old (docs/groups.md).
        dry_run: a rollback group's dry run (nothing changed).
    """

    group_id: str
    name: str | None
    results: Mapping[str, SwapResult] = field(default_factory=dict)
    flip_seconds: float = 0.0
    dry_run: bool = False

    def __getitem__(self, table: str) -> SwapResult:
        return self.results[table]

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def swap_ids(self) -> dict[str, str]:
        return {table: r.swap_id for table, r in self.results.items()}

    def to_dict(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "name": self.name, "flip_seconds": round(self.flip_seconds, 6),
                "dry_run": self.dry_run, "results": {t: r.to_dict() for t, r in self.results.items()}}

    def summary(self) -> str:
        label = f"{self.group_id}" + (f" ({self.name})" if self.name else "")
        verb = "dry run: would change" if self.dry_run else "committed"
        lines = [f"group {label}: {verb} {len(self.results)} table(s) as one unit"
                 + ("" if self.dry_run else f", flips {self.flip_seconds * 1000:.0f} ms first to last")]
        lines += [f"  {r.summary()}" for r in self.results.values()]
        return "\n".join(lines)


__all__ = ["OPEN", "PENDING", "COMMITTED", "FAILED", "DISCARDED", "SWAP", "ROLLBACK", "GroupMember", "GroupRecord",
           "GroupResult"]
