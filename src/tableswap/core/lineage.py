"""What the journal says about a table's past (pure functions, no I/O).

A table's history is the chain of its committed swaps in flip order. Swaps of one table are
serialized by the table lock and each records its intent under that lock just before its flip, so
``intent_at`` orders flips. For every partition (``''`` for an unpartitioned table) each committed
swap that added, replaced or dropped it is one :class:`Change` with the location before and after.

From that chain this module decides what a rollback restores (:func:`restore_spec`) and which
changes are currently rolled back (:func:`rolled_back`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from tableswap.errors import InvalidInputError, NotFoundError
from tableswap.core.locations import same as same_location
from tableswap.core.records import COMMITTED, PartitionChange, SwapRecord
from tableswap.core.plan import ADD, DROP, REPLACE

TABLE = ""  # partition name of an unpartitioned table's single "partition"


@dataclass(frozen=True)
class Change(PartitionChange):
    """A journal item with the swap that made it (``old_location`` None: the partition did not exist
    before; ``new_location`` None: the swap dropped it)."""

    swap_id: str


@dataclass(frozen=True)
class RestoreSpec:
    """What a rollback must do, decided from the journal alone.

    ``targets``: partition → location to restore (``None``: drop the partition, the undone swap
    added it). ``expected``: partition → location the journal says it has now (``None``: absent);
    the metastore must agree, or someone changed it outside tableswap. ``undone``: the
    ``(swap id, partition)`` changes the rollback reverts. ``rollback_of``: the oldest swap undone.
    """

    rollback_of: str
    targets: Mapping[str, str | None]
    expected: Mapping[str, str | None]
    undone: tuple[tuple[str, str], ...]


def flip_order(record: SwapRecord) -> tuple[str, str]:
    return (record.intent_at or record.committed_at or record.started_at or "", record.swap_id)


def committed(records: Iterable[SwapRecord]) -> list[SwapRecord]:
    """Committed swaps, oldest flip first."""
    return sorted((r for r in records if r.state == COMMITTED), key=flip_order)


def changes(record: SwapRecord) -> list[Change]:
    return [Change(i.partition, i.action, i.old_location, i.new_location, swap_id=record.swap_id)
            for i in record.items if i.action in (ADD, REPLACE, DROP)]


def rolled_back(records: Sequence[SwapRecord], undone: Iterable[tuple[str, str, str]]) -> set[tuple[str, str]]:
    """The ``(swap id, partition)`` changes that are rolled back now.

    A change is rolled back when a committed rollback undid it and that rollback's own change of
    the partition is not rolled back in turn (rolling back a rollback re-applies the change).
    """
    is_committed = {r.swap_id for r in records if r.state == COMMITTED}
    undone_by: dict[tuple[str, str], list[str]] = {}
    for rollback_id, swap_id, partition in undone:
        if rollback_id in is_committed:
            undone_by.setdefault((swap_id, partition), []).append(rollback_id)
    memo: dict[tuple[str, str], bool] = {}

    def check(key: tuple[str, str], depth: int = 0) -> bool:
        if key not in memo:
            if depth > 10_000:  # a cycle is impossible (a rollback is newer than what it undoes)
                return False
            memo[key] = any(not check((r, key[1]), depth + 1) for r in undone_by.get(key, ()))
        return memo[key]

    return {key for key in undone_by if check(key)}


def current_by_history(records: Sequence[SwapRecord]) -> dict[str, Change]:
    """For each partition, the last committed change of it."""
    last: dict[str, Change] = {}
    for record in committed(records):
        for change in changes(record):
            last[change.partition] = change
    return last


def position(chain: Sequence[SwapRecord], records: Sequence[SwapRecord], swap_id: str, uncommitted: str) -> int:
    """The index of committed swap ``swap_id`` in ``chain``; :class:`NotFoundError` for a swap not
    in ``records``, :class:`InvalidInputError` (``uncommitted`` says why it matters) for one not committed."""
    index = next((i for i, r in enumerate(chain) if r.swap_id == swap_id), None)
    if index is None:
        known = next((r for r in records if r.swap_id == swap_id), None)
        if known is None:
            raise NotFoundError(f"swap {swap_id} is not in the history of this table (see `tableswap history`)")
        raise InvalidInputError(f"swap {swap_id} is {known.state}, not committed: {uncommitted}")
    return index


def restore_spec(records: Sequence[SwapRecord], *, partitions: Sequence[str] | None = None,
                 to: str | None = None) -> RestoreSpec:
    """What a rollback restores.

    * neither: every partition the last committed swap changed goes back to its location before it;
    * ``partitions``: each named partition goes back to its location before the last swap that
      changed it;
    * ``to``: every partition changed by swap ``to`` or a later one goes back to its location just
      before ``to`` (partitions those swaps added are dropped); ``partitions`` narrows it.
    """
    chain = committed(records)
    if to is not None:
        index = position(chain, records, to, "there is nothing of it to roll back")
        window = chain[index:]
        rollback_of = to
    elif partitions:
        window = chain
        rollback_of = ""
    else:
        if not chain:
            raise NotFoundError("the table has no committed swap to roll back")
        window = chain[-1:]
        rollback_of = chain[-1].swap_id

    firsts: dict[str, Change] = {}
    lasts: dict[str, Change] = {}
    undone: list[tuple[str, str]] = []
    per_partition_last: dict[str, list[Change]] = {}
    for record in window:
        for change in changes(record):
            firsts.setdefault(change.partition, change)
            lasts[change.partition] = change
            per_partition_last.setdefault(change.partition, []).append(change)

    if partitions and to is None:
        # Each named partition: only its last change is undone.
        chosen: dict[str, Change] = {}
        for name in partitions:
            if name not in lasts:
                raise NotFoundError(f"partition {name} was never changed by a committed swap (see `tableswap history`)")
            chosen[name] = lasts[name]
        firsts = dict(chosen)
        lasts = dict(chosen)
        undone = [(c.swap_id, c.partition) for c in chosen.values()]
        order = {r.swap_id: flip_order(r) for r in chain}
        rollback_of = max((c.swap_id for c in chosen.values()), key=lambda s: order[s])
    else:
        if partitions:
            missing = [p for p in partitions if p not in firsts]
            if missing:
                raise NotFoundError(f"partition {', '.join(missing)} was not changed by swap {to} or any later swap")
            firsts = {p: firsts[p] for p in partitions}
            lasts = {p: lasts[p] for p in partitions}
        undone = [(c.swap_id, p) for p in firsts for c in per_partition_last[p]]
        if not firsts:
            raise NotFoundError(f"swap {rollback_of} changed no partition: there is nothing to roll back")

    targets = {p: (None if c.action == ADD else c.old_location) for p, c in firsts.items()}
    expected = {p: (None if c.action == DROP else c.new_location) for p, c in lasts.items()}
    return RestoreSpec(rollback_of, targets, expected, tuple(sorted(set(undone))))


# ---------------------------------------------------------------------- the table as it was
@dataclass(frozen=True)
class PastPartition:
    """One partition (``''``: an unpartitioned table's location) of a past state."""

    partition: str
    location: str
    set_by: str | None  # the committed swap whose change left it there (None: none in the journal)


@dataclass(frozen=True)
class PastState:
    """The table right after committed swap ``point`` (``None``: before its first journaled swap).

    ``undone``: the committed swaps after ``point`` whose changes were reversed to get there, oldest
    first. Partitions no journaled swap changed after ``point`` are taken as they are now.
    """

    point: str | None
    point_committed_at: str | None
    partitions: tuple[PastPartition, ...]
    undone: tuple[str, ...]


def _instant(value: Any) -> datetime:
    """An ISO timestamp (the journal's) or a datetime; naive means UTC."""
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInputError(
                f"timestamp {value!r} is not an ISO date-time such as 2026-06-03T04:00:00+00:00"
            ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def state_as_of(records: Sequence[SwapRecord], current: Mapping[str, str | None], *,
                swap_id: str | None = None, timestamp: Any = None) -> PastState:
    """The table's partitions right after committed swap ``swap_id``, or at ``timestamp`` (after
    the last swap committed at or before it).

    ``current``: partition name → location as the metastore has them now. Working back from now,
    each partition a later committed swap (a rollback included) changed gets its location before
    the first of those changes (absent, if that change added it); the others keep their current
    location. Raises :class:`NotFoundError` for a swap not in the journal, :class:`InvalidInputError`
    for one that is not committed or for a bad ``timestamp``.
    """
    if (swap_id is None) == (timestamp is None):
        raise InvalidInputError("give exactly one of swap_id or timestamp")
    chain = committed(records)
    if swap_id is not None:
        index = position(chain, records, swap_id, "the table never was as it left it")
    else:
        moment = _instant(timestamp)
        index = -1
        for i, record in enumerate(chain):
            if record.committed_at and _instant(record.committed_at) <= moment:
                index = i
    before, after = chain[: index + 1], chain[index + 1:]
    state: dict[str, str | None] = dict(current)
    seen: set[str] = set()
    for record in after:
        for change in changes(record):
            if change.partition not in seen:
                seen.add(change.partition)
                state[change.partition] = change.old_location
    last = current_by_history(before)
    rows = tuple(
        PastPartition(name, location, last[name].swap_id
                      if name in last and same_location(last[name].new_location, location) else None)
        for name, location in sorted(state.items()) if location is not None
    )
    point = chain[index] if index >= 0 else None
    return PastState(point.swap_id if point else None, point.committed_at if point else None, rows,
                     tuple(r.swap_id for r in after))
