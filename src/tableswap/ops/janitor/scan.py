"""The janitor's discovery (read only): the tables to clean, their queued deletions, a snapshot of
every location the metastore references at, under or above each table's root (every table and partition
in the reference scope: :mod:`tableswap.ops.janitor.refs`), and the swaps' leftovers. Used by
:func:`tableswap.ops.janitor.run.run_janitor`."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.deletion_safety import SCOPE_METASTORE
from tableswap.core.janitor_plan import (
    SWAP_ID_RE,
    LiveRef,
    LiveView,
    QueueEntry,
    SwapDirCandidate,
    parse_time,
    swap_id_time,
)
from tableswap.core.manifest import MANIFEST_NAME
from tableswap.core.records import COMMITTED, PENDING
from tableswap.ops import manifests
from tableswap.ops.janitor.refs import DEFAULT_FULL_SCAN_EVERY, ReferenceScan
from tableswap.journal.refindex import ReferenceIndexStore
from tableswap.journal.queue import JanitorQueue, SwapProgress
from tableswap.journal.store import Journal
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_CREATED_PARAM, TableInfo
from tableswap.core.names import parse_table_name


# --------------------------------------------------------------------------- discovery (read only)


def read_live_view(catalog: Catalog, db: str, table: str, scope: str = SCOPE_METASTORE,
                   ) -> tuple[LiveView, list[TableInfo]]:
    """Everything the metastore references at, under or above ``db.table``'s root (every table and
    partition in ``scope``, see :class:`~tableswap.ops.janitor.refs.ReferenceScan`), and its temporary
    tables. One full read; the janitor itself keeps one scan for a whole run."""
    refs = ReferenceScan(catalog, scope)
    refs.set_targets([(db, table)])
    refs.scan()
    return refs.view(db, table), refs.temp_tables_of(db, table)


def partition_refs(catalog: Catalog, db: str, table: str, names: Sequence[str],
                   ) -> tuple[TableInfo, list[LiveRef]] | None:
    """The table and the references of its partitions ``names`` (those that exist), read by name: what a
    janitor batch re-reads under the table lock. ``None`` when the table is gone or not partitioned."""
    try:
        info = catalog.get_table(db, table)
    except errors.TableNotFoundError:
        return None
    if not info.is_partitioned:
        return None
    keys = info.partition_key_names
    values = [pn.values_for(keys, pn.parse_name(n)) for n in names]
    owner = f"table {info.qualified_name}"
    refs = [LiveRef(loc.normalize(p.location), f"partition {p.name(keys)} of {owner}", partition=p.name(keys))
            for p in catalog.get_partitions(info, values).values() if p.location]
    return info, refs


def _candidates(view: LiveView, temps: Sequence[TableInfo], states: dict[str, SwapProgress],
                groups: Mapping[str, tuple[str, str | None]] | None = None) -> list[SwapDirCandidate]:
    """Swaps with a directory under ``<root>/_tableswap`` or a temporary table still present (``groups``: the
    staged groups' members, :meth:`JanitorQueue.staged_groups`)."""
    groups = groups or {}
    if not view.exists or not view.root:
        return []
    staging_root = loc.join(view.root, loc.STAGING_DIR)
    dirs = {name for name in storage.list_dirs(staging_root) if SWAP_ID_RE.match(name)}
    temp_by_id = {tagged: t for t in temps if (tagged := t.parameters.get(SWAP_ID_PARAM))}
    out = []
    for swap_id in sorted(dirs | set(temp_by_id)):
        state = states.get(swap_id)
        location = loc.normalize(loc.join(staging_root, swap_id)) if swap_id in dirs else None
        temp = temp_by_id.get(swap_id)
        # A writer still beating is alive however long ago it started or last wrote a file (a long shuffle).
        times = [swap_id_time(swap_id), parse_time(state.started_at) if state else None,
                 parse_time(state.heartbeat_at) if state and state.heartbeat_at else None,
                 parse_time(temp.parameters.get(TEMP_CREATED_PARAM)) if temp else None]
        if location and (state is None or state.state != COMMITTED):
            mtime = storage.newest_mtime(location)  # a slow staging write still touches files
            times.append(dt.datetime.fromtimestamp(mtime, dt.timezone.utc) if mtime else None)
        known = [t for t in times if t is not None]
        has_data = None
        manifest_state, in_use = None, False
        unreferenced = location is not None and not any(
            not ref.container and ref.temp_of != swap_id
            for ref in itertools.chain(view.index.at_or_below(location), view.index.at_or_above(location)))
        if location is not None and unreferenced:
            if state is not None and state.state == COMMITTED:
                has_data = storage.has_data_files(location)  # only for dirs nothing references
            if state is None or state.state != PENDING:
                manifest_state, in_use = _manifest_in_use(view, location)
        group_id, group_staged_at = groups.get(swap_id, (None, None))
        out.append(SwapDirCandidate(
            db=view.db, table=view.table, swap_id=swap_id, location=location,
            temp_table=temp.name if temp else None, state=state.state if state else None,
            last_activity=max(known) if known else None, has_data=has_data,
            manifest_state=manifest_state, manifest_in_use=in_use,
            staged_at=parse_time(state.staged_at) if state and state.staged_at else None,
            heartbeat_at=state.heartbeat_at if state else None,
            group_id=group_id, group_staged_at=parse_time(group_staged_at) if group_staged_at else None,
        ))
    return out


def _manifest_in_use(view: LiveView, location: str) -> tuple[str | None, bool]:
    """The state of the recovery manifest in a swap's directory (None: there is none, or it is
    unreadable) and whether it is still in use: a location it names is live or still on storage."""
    try:
        found = manifests.read(loc.join(location, MANIFEST_NAME))
    except errors.TableSwapError:
        return None, False
    except OSError:
        return None, True  # cannot tell: keep it
    if found is None:
        return None, False
    named = [loc.normalize(x) for x in found.named_locations]
    if any(not ref.container for x in named for ref in view.index.at(x)):
        return found.state, True
    for x in named:
        try:
            if storage.exists(x):
                return found.state, True
        except Exception:  # noqa: BLE001 - an unreachable store: keep it
            return found.state, True
    return found.state, False


def reference_index(catalog: Catalog, journal: Journal, scope: str) -> ReferenceIndexStore | None:
    """The journal's reference index for ``catalog``'s metastore and ``scope`` (None: the catalog names
    no metastore URI)."""
    uri = getattr(catalog, "uri", None)
    return ReferenceIndexStore(journal, f"{scope} {uri}") if isinstance(uri, str) and uri else None


@dataclass
class Discovery:
    tables: list[tuple[str, str]]
    entries: list[QueueEntry]
    views: dict[tuple[str, str], LiveView]
    candidates: list[SwapDirCandidate]
    unfinished: dict[tuple[str, str], list[tuple[str, str]]]
    swap_started: dict[str, dt.datetime] = field(default_factory=dict)
    #: The run's reads of the metastore's references (kept up to date before each batch of deletions).
    references: ReferenceScan | None = None


def _group_grace(member_of: tuple[str, str | None] | None) -> tuple[str | None, dt.datetime | None]:
    """A queue entry's group and the group's commit time (the start of its grace), if it was displaced by a group."""
    if member_of is None:
        return None, None
    group_id, committed_at = member_of
    if committed_at is None:
        return group_id, None
    return group_id, parse_time(committed_at) or dt.datetime.now(dt.timezone.utc)


def discover(catalog: Catalog, journal: Journal, queue: JanitorQueue, table: str | None, *,
             scope: str = SCOPE_METASTORE, references: ReferenceScan | None = None,
             full_scan_every: dt.timedelta = DEFAULT_FULL_SCAN_EVERY) -> Discovery:
    """The tables to clean, their queued deletions and leftovers, and what references their storage.

    ``references``: an earlier discovery's scan of this run, brought up to date instead of read again.
    Otherwise the references come from the journal's reference index where the metastore keeps a
    notification log (:mod:`tableswap.ops.janitor.refs`; ``full_scan_every``: how old its last full scan may be)."""
    if table:
        tables = [parse_table_name(table)]
        pending = journal.deletions(db=tables[0][0], table=tables[0][1])
    else:
        pending = journal.deletions()
        tables = sorted(set(queue.swapped_tables()) | {(d.db_name, d.table_name) for d in pending})
    in_groups = queue.group_commits() if pending else {}
    entries = [
        QueueEntry(d.swap_id, d.location, d.db_name, d.table_name, d.partition_name, d.table_root, d.reason,
                   parse_time(d.queued_at) or dt.datetime.now(dt.timezone.utc),
                   *_group_grace(in_groups.get(d.swap_id)))
        for d in pending
    ]
    views, candidates, unfinished, started = {}, [], {}, {}
    refs = references or ReferenceScan(catalog, scope, index=reference_index(catalog, journal, scope),
                                       full_scan_every=full_scan_every)
    refs.set_targets(tables)
    refs.ensure()
    for db, name in tables:
        view, temps = refs.view(db, name), refs.temp_tables_of(db, name)
        views[(db, name)] = view
        states = queue.swap_states(db, name)
        started.update({s: t for s, st in states.items() if (t := parse_time(st.started_at))})
        candidates.extend(_candidates(view, temps, states, queue.staged_groups(db, name)))
        unfinished[(db, name)] = queue.unfinished_locations(db, name)
        if table and not view.exists and not entries:
            raise errors.TableNotFoundError(
                f"table {db}.{name} does not exist and the journal has nothing queued for it",
                table=f"{db}.{name}")
    return Discovery(tables, entries, views, candidates, unfinished, started, refs)
