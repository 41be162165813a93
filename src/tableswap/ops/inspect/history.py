"""``history`` and ``show``: what happened to a table and what can be rolled back.

Both read the journal and (``show``) the metastore; neither changes anything. They return frozen
dataclasses with ``to_dict()`` so the CLI prints the same facts as text or JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from tableswap import errors
from tableswap.core import lineage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.config import resolve_journal_url
from tableswap.core.records import Action, HookOutcome, PartitionChange
from tableswap.journal.store import ABORTED, COMMITTED, UNFINISHED, Journal, SwapRecord
from tableswap.core.catalog import TableInfo
from tableswap.core.names import parse_table_name
from tableswap.ops.locations import LocationChecker, LocationStatus, partition_key
from tableswap.runtime import Runtime, use

ROLLED_BACK, PARTLY_ROLLED_BACK = "rolled back", "partly rolled back"
#: A staged swap once published (committed) or discarded (aborted): docs/audit.md.
PUBLISHED, DISCARDED = "published", "discarded"


# ---------------------------------------------------------------------- history
@dataclass(frozen=True)
class HistoryItem(PartitionChange):
    """A journal item as history shows it: whether its old location is still there, and undone."""

    old_exists: bool | None  # does the old location still exist (None: no old location)
    old_deleted_by_janitor: bool
    rolled_back: bool


@dataclass(frozen=True)
class HistoryEntry:
    swap_id: str
    table: str
    kind: str  # partitions | table | rollback
    status: str  # committed | published | rolled back | partly rolled back | staging | staged | pending | failed
    #            | aborted | discarded (published, staged, discarded: a staged swap's, docs/audit.md)
    state: str  # the journal state
    rollback_of: str | None
    started_at: str
    committed_at: str | None
    user: str | None
    host: str | None
    app_id: str | None
    error: str | None
    added: int
    replaced: int
    dropped: int
    items: tuple[HistoryItem, ...]
    hooks: tuple[HookOutcome, ...] = ()  # the post-commit hooks run after it (tableswap.hooks)
    staged_at: str | None = None  # a staged swap's (stage_partitions, a refused audit): when it was staged

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class History:
    table: str
    entries: tuple[HistoryEntry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "swaps": [e.to_dict() for e in self.entries]}


def _status(record: SwapRecord, items: Sequence[HistoryItem]) -> str:
    if record.state != COMMITTED:
        return DISCARDED if record.state == ABORTED and record.staged_at else record.state
    changed = [i for i in items if i.action != Action.UNCHANGED]
    undone = [i for i in changed if i.rolled_back]
    if changed and len(undone) == len(changed):
        return ROLLED_BACK
    if undone:
        return PARTLY_ROLLED_BACK
    return PUBLISHED if record.staged_at else COMMITTED


def build_history(table: str, records: Sequence[SwapRecord], undone: Sequence[tuple[str, str, str]],
                  check: Callable[[str | None], LocationStatus], *, partition: str | None = None,
                  limit: int | None = None, hook_runs: Mapping[str, Sequence[HookOutcome]] | None = None) -> History:
    """Assemble the history (newest first) from journal records; ``check`` tells location status,
    ``hook_runs`` what the post-commit hooks of each swap did."""
    rolled = lineage.rolled_back(records, undone)
    ordered = sorted(records, key=lineage.flip_order, reverse=True)
    entries = []
    for record in ordered:
        items = []
        for i in record.items:
            if partition is not None and i.partition_name != partition:
                continue
            status = check(i.old_location) if i.action in (Action.REPLACE, Action.DROP) else LocationStatus(None)
            items.append(HistoryItem(
                partition=i.partition_name, action=i.action, old_location=i.old_location,
                new_location=i.new_location, old_exists=status.exists,
                old_deleted_by_janitor=status.deleted_by_janitor,
                rolled_back=(record.swap_id, i.partition_name) in rolled,
            ))
        if partition is not None and not items:
            continue
        entries.append(HistoryEntry(
            swap_id=record.swap_id, table=record.table, kind=record.kind, status=_status(record, items),
            state=record.state, rollback_of=record.rollback_of, started_at=record.started_at,
            committed_at=record.committed_at, user=record.user_name, host=record.host_name,
            app_id=record.app_id, error=record.error,
            added=sum(1 for i in items if i.action == Action.ADD),
            replaced=sum(1 for i in items if i.action == Action.REPLACE),
            dropped=sum(1 for i in items if i.action == Action.DROP),
            items=tuple(items), hooks=tuple((hook_runs or {}).get(record.swap_id, ())),
            staged_at=record.staged_at,
        ))
        if limit and len(entries) >= limit:
            break
    return History(table, tuple(entries))


def history(table: str, partition: str | None = None, limit: int | None = None, *,
            journal_url: str | None = None, metastore_uri: str | None = None,
            check_storage: bool = True, table_info: TableInfo | None = None) -> History:
    """The swaps of ``table`` (``db.table``), newest first, from the journal.

    ``partition`` (a spec like ``dt=2026-06-03``) keeps the swaps that touched it; it is put in the
    table's partition-column order when the metastore is reachable (``metastore_uri`` or the
    environment), else used as given.
    """
    db, name = parse_table_name(table)
    wanted = None
    if partition is not None:
        wanted = _canonical_partition(partition, db, name, metastore_uri, table_info)
    journal = Journal(_journal_url(journal_url), create=False)  # read-only: never a new, empty journal
    try:
        records = journal.list_swaps(db, name)
        checker = LocationChecker(journal.deletions_of(db, name), check_storage=check_storage)
        return build_history(f"{db}.{name}", records, journal.undone(db, name), checker,
                             partition=wanted, limit=limit,
                             hook_runs=journal.hook_runs([r.swap_id for r in records]))
    finally:
        journal.close()


def _journal_url(journal_url: str | None) -> str | None:
    return resolve_journal_url(journal_url)


def _canonical_partition(spec: str, db: str, name: str, metastore_uri: str | None,
                         table_info: TableInfo | None) -> str:
    parsed = pn.parse_name(spec)
    if table_info is None:
        try:
            with Runtime.from_options(metastore_uri=metastore_uri) as rt, rt.catalog() as catalog:
                table_info = catalog.get_table(db, name)
        except (errors.ConfigurationError, errors.CatalogUnavailableError, errors.TableNotFoundError):
            # The journal alone still answers; the spec is taken in the order given.
            return pn.partition_name(list(parsed), list(parsed.values()))
    return partition_key(table_info, spec)


# ---------------------------------------------------------------------- show
@dataclass(frozen=True)
class CurrentPartition:
    partition: str  # '' for an unpartitioned table
    location: str | None
    set_by: str | None  # the swap id stamped on it (None: not written by tableswap)
    set_by_kind: str | None
    previous_location: str | None  # what a rollback of it restores (None with can_roll_back: drop)
    previous_exists: bool | None
    previous_deleted_by_janitor: bool
    can_roll_back: bool
    note: str


@dataclass(frozen=True)
class TableOverview:
    table: str
    location: str | None
    partitioned: bool
    partition_keys: tuple[str, ...]
    partitions: tuple[CurrentPartition, ...]
    last_swap: str | None
    unfinished_swaps: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_show(table: TableInfo, current: Sequence[tuple[str, str | None, str | None]],
               records: Sequence[SwapRecord], check: Callable[[str | None], LocationStatus]) -> TableOverview:
    """``current``: ``(partition name, location, stamped swap id)`` as the metastore has them."""
    by_id = {r.swap_id: r for r in records}
    last = lineage.current_by_history(records)
    rows = []
    for name, location, stamp in sorted(current):
        record = by_id.get(stamp) if stamp else None
        change = last.get(name)
        previous, exists, deleted, can, note = None, None, False, False, ""
        if change is None:
            note = "not changed by any committed tableswap swap"
        elif not loc.same(change.new_location, location):
            note = (f"changed outside tableswap since swap {change.swap_id} "
                    f"(journal: {change.new_location})")
        elif change.action == Action.ADD:
            can, note = True, f"added by {change.swap_id}: a rollback drops it"
        else:
            previous = change.old_location
            status = check(previous)
            exists, deleted = status.exists, status.deleted_by_janitor
            can = status.restorable
            note = ("previous data deleted by the janitor" if deleted
                    else "previous location no longer exists" if exists is False
                    else f"rollback restores the location before {change.swap_id}")
        rows.append(CurrentPartition(
            partition=name, location=location, set_by=stamp, set_by_kind=record.kind if record else None,
            previous_location=previous, previous_exists=exists, previous_deleted_by_janitor=deleted,
            can_roll_back=can, note=note,
        ))
    chain = lineage.committed(records)
    return TableOverview(
        table=table.qualified_name, location=table.location, partitioned=table.is_partitioned,
        partition_keys=table.partition_key_names, partitions=tuple(rows),
        last_swap=chain[-1].swap_id if chain else None,
        unfinished_swaps=tuple(r.swap_id for r in records if r.state in UNFINISHED),
    )


def show(table: str, *, metastore_uri: str | None = None, journal_url: str | None = None,
         check_storage: bool = True, runtime: Runtime | None = None) -> TableOverview:
    """The table's current partitions (or location) with the swap that set each and what a
    rollback would restore."""
    db, name = parse_table_name(table)
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url) as rt:
        info, current = _current(rt, db, name)
        checker = LocationChecker(rt.journal.deletions_of(db, name), check_storage=check_storage)
        return build_show(info, current, rt.journal.list_swaps(db, name), checker)


# ---------------------------------------------------------------------- show --as-of
@dataclass(frozen=True)
class PastPartitionState:
    partition: str  # '' for an unpartitioned table's location
    location: str
    set_by: str | None  # the swap that set it (None: not changed by a journaled swap)
    exists: bool | None  # on storage now (None: not checked, or the store could not say)
    deleted_by_janitor: bool

    @property
    def missing(self) -> bool:
        return self.deleted_by_janitor or self.exists is False


@dataclass(frozen=True)
class PastTableOverview:
    """The table as it was right after swap ``as_of`` (``None``: before its first journaled swap)."""

    table: str
    partitioned: bool
    partition_keys: tuple[str, ...]
    as_of: str | None
    as_of_committed_at: str | None
    undone: tuple[str, ...]  # committed swaps after it, oldest first
    partitions: tuple[PastPartitionState, ...]

    @property
    def missing(self) -> tuple[PastPartitionState, ...]:
        """Partitions whose data is gone (deleted by the janitor, or no longer on storage)."""
        return tuple(p for p in self.partitions if p.missing)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["missing"] = [p.partition or p.location for p in self.missing]
        return out


def build_past_state(table: TableInfo, current: Sequence[tuple[str, str | None, str | None]],
                     records: Sequence[SwapRecord], check: Callable[[str | None], LocationStatus], *,
                     swap_id: str | None = None, timestamp: Any = None) -> PastTableOverview:
    """``current`` as for :func:`build_show`; ``check`` tells whether each past location remains."""
    past = lineage.state_as_of(records, {name: location for name, location, _ in current},
                               swap_id=swap_id, timestamp=timestamp)
    rows = []
    for p in past.partitions:
        status = check(p.location)
        rows.append(PastPartitionState(p.partition, p.location, p.set_by, status.exists, status.deleted_by_janitor))
    return PastTableOverview(table.qualified_name, table.is_partitioned, table.partition_key_names, past.point,
                          past.point_committed_at, past.undone, tuple(rows))


def show_as_of(table: str, *, swap_id: str | None = None, timestamp: Any = None,
               metastore_uri: str | None = None, journal_url: str | None = None, check_storage: bool = True,
               runtime: Runtime | None = None) -> PastTableOverview:
    """The table's partitions (or location) right after committed swap ``swap_id``, or as they were
    at ``timestamp`` (a datetime or ISO text; naive is UTC), from the journal and the metastore.

    Each partition says whether its data is still on storage (the janitor deletes displaced data
    after its grace period). Changes made outside tableswap are not in the journal: a partition no
    journaled swap changed since is shown as it is now.

    Raises:
        NotFoundError: ``swap_id`` is not a swap of this table.
        InvalidInputError: the swap is not committed, or ``timestamp`` is not a date-time.
    """
    db, name = parse_table_name(table)
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url) as rt:
        info, current = _current(rt, db, name)
        checker = LocationChecker(rt.journal.deletions_of(db, name), check_storage=check_storage)
        return build_past_state(info, current, rt.journal.list_swaps(db, name), checker,
                                swap_id=swap_id, timestamp=timestamp)


def _current(rt: Runtime, db: str, name: str) -> tuple[TableInfo, list[tuple[str, str | None, str | None]]]:
    """The table and its ``(partition name, location, stamped swap id)`` rows as the metastore has them."""
    with rt.catalog() as catalog:
        info = catalog.get_table(db, name)
        if info.is_partitioned:
            keys = info.partition_key_names
            return info, [(p.name(keys), p.location, p.swap_id) for p in catalog.list_partitions(db, name)]
        return info, [(lineage.TABLE, info.location, info.swap_id)]
