"""What the metastore references, for the janitor: every table and partition in the reference scope
(``[janitor] reference_scope``: the whole metastore by default), read once in full at discovery and
brought up to date before each batch of deletions. Read only.

Only what can matter for a deletion is kept: the locations at, under or above the storage root of a
table the janitor works on (:class:`~tableswap.core.deletion_safety.Roots`), so memory grows with the
tables being cleaned, not with the metastore. Partitions are read a page at a time (their names in
one light call, then their values and locations by name: only those two fields on HMS 4.x, see
:meth:`~tableswap.core.catalog_port.Catalog.partition_locations`), never with one unbounded
``get_partitions``. A table's view (:meth:`ReferenceScan.view`) is the same object, with the same index,
until something new is read.

The re-read before a batch (:meth:`ReferenceScan.refresh`) lists again what a reference can appear
through: the databases, the tables of each (a new table, or a table whose location or storage root
changed, is read in full) and the partition names of each partitioned table (a new partition is read by
name). The partitions of the table being cleaned are read again by name by the janitor itself, under
that table's lock. What the re-read does not see: an *existing* partition of another table repointed
at a displaced directory between discovery and the deletion (the discovery's full read sees every
partition as it was then); docs/guarantees.md says so.

**The reference index** (``index``, the whole-metastore scope only): where the metastore keeps a
notification log, what a full scan kept is stored in the journal (:mod:`tableswap.journal.refindex`)
with the id of the last event it reflects; the next run loads it and applies the events since (each
names what changed, which is read again now: :mod:`tableswap.core.notifications`), instead of reading
the whole metastore, and every re-read before a batch applies the newer events (so a repointed
partition of another table is seen too). The index is used only when it is certainly complete; a full
scan (which rebuilds it) happens instead when there is no stored index, when the log holds no event
(no listener writes it) or no longer holds the one after the last applied (expired: ids are
consecutive, a gap is a loss), when an event is of a type this release does not know, when a table
being cleaned was not among the index's roots, or when the last full scan is older than
``full_scan_every``. In doubt, a full scan: never a narrower read.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.deletion_safety import SCOPE_DATABASE, SCOPE_METASTORE, SCOPE_TABLE, LiveRef, LiveView, Roots
from tableswap.core.names import TEMP_MARKER
from tableswap.core import notifications as ev
from tableswap.core.catalog import Column
from tableswap.journal.refindex import IndexState, ReferenceIndexStore, StoredTable
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_FOR_PARAM, TableInfo

log = get_logger("tableswap.janitor")

Key = tuple[str, str]
#: Tables per ``get_table_objects_by_name`` call.
TABLE_PAGE = 100


def _key(db: str, table: str) -> Key:
    return db.lower(), table.lower()


@dataclass
class _Seen:
    """One table as last read: what identifies a change, and its references that matter."""

    info: TableInfo
    names: frozenset[str] = frozenset()  # its partition names
    refs: list[LiveRef] = field(default_factory=list)  # partition: the partition's name (of this table)


@dataclass
class ScanStats:
    tables: int = 0
    partitions: int = 0
    kept: int = 0  # references kept (the ones that matter)
    events: int = 0  # notification-log events applied


#: How often the index is rebuilt by a full scan when nothing else asks for one (``[janitor] full_scan_every``).
DEFAULT_FULL_SCAN_EVERY = dt.timedelta(days=7)


class ReferenceScan:
    """The references of every table in ``scope`` that matter for deleting under the roots of the
    ``targets`` (the tables the janitor works on). Not thread-safe.

    ``names``: the HDFS spellings the Hadoop configuration makes one (default: read from ``$HADOOP_CONF_DIR``
    now, :func:`tableswap.storage.hdfs_names`); a reference on an HDFS the configuration does not place, at a
    path under a root's, is kept too (the deletion safety rules refuse what it may be)."""

    def __init__(self, catalog: Catalog, scope: str = SCOPE_METASTORE, names: loc.HdfsNames | None = None, *,
                 index: ReferenceIndexStore | None = None,
                 full_scan_every: dt.timedelta = DEFAULT_FULL_SCAN_EVERY) -> None:
        if scope not in (SCOPE_METASTORE, SCOPE_DATABASE, SCOPE_TABLE):
            raise errors.ConfigurationError(
                f"reference_scope {scope!r} is not one of {SCOPE_METASTORE}, {SCOPE_DATABASE}, {SCOPE_TABLE}")
        self.catalog = catalog
        self.scope = scope
        self.targets: dict[Key, tuple[str, str]] = {}  # key -> (db, table) as given
        self.names = names if names is not None else storage.hdfs_names()
        self._roots: list[str] = []
        self.roots = Roots((), self.names)
        self._seen: dict[Key, _Seen] = {}
        self._databases: set[str] = set()
        self.scanned = False
        self.stats = ScanStats()
        # Views handed out, with the read they were built from (``_changes`` counts what changed what was
        # read): an unchanged table's view, and the index built on it, serve every batch and pass.
        self._changes = 0
        self._views: dict[Key, tuple[int, LiveView]] = {}
        # The notification log: read where the catalog has one, for the whole-metastore scope only.
        self.log = catalog if scope == SCOPE_METASTORE and isinstance(catalog, ev.NotificationLog) else None
        self.index = index if self.log is not None else None
        self.full_scan_every = full_scan_every
        #: The last event the references reflect (None: not followed through the log).
        self.last_event_id: int | None = None
        self.full_scan_at: str | None = None
        #: How the references were read: "full scan" or "index"; why a full scan when an index was asked for.
        self.source = "full scan"
        self.full_scan_reason: str | None = None
        self._dirty: set[Key] = set()
        self._replace_all = False

    # ------------------------------------------------------------------ what is read
    def set_targets(self, tables: Iterable[tuple[str, str]]) -> None:
        """Add the tables whose roots deletions happen under (their roots are read now). A new target
        makes the next :meth:`ensure` a full scan: what matters to it was not kept before."""
        added = False
        for db, table in tables:
            if _key(db, table) in self.targets:
                continue
            self.targets[_key(db, table)] = (db, table)
            added = True
            try:
                info = self.catalog.get_table(db, table)
            except errors.TableNotFoundError:
                continue
            if info.root:
                self._roots.append(loc.normalize(info.root))
        if added:
            self.roots = Roots(self._roots, self.names)
            self.scanned = False
            self._changes += 1

    def _in_scope_databases(self) -> list[str]:
        if self.scope == SCOPE_METASTORE:
            return sorted(self.catalog.list_databases())
        return sorted({db for db, _ in self.targets.values()})

    def _table_names(self, db: str) -> list[str]:
        """The tables of ``db`` in scope ([] when the database was dropped meanwhile)."""
        try:
            if self.scope != SCOPE_TABLE:
                return self.catalog.list_tables(db)
            names: list[str] = []
            for tdb, table in self.targets.values():
                if tdb.lower() == db.lower():
                    names.append(table)
                    names.extend(self.catalog.list_tables(db, f"{table[:80]}{TEMP_MARKER}*"))
            return names
        except errors.TableNotFoundError:
            return []

    def ensure(self) -> None:
        """A full scan if anything is not read yet, else :meth:`refresh`."""
        if self.scanned:
            self.refresh()
        elif not self._load_index():
            self.scan()

    def scan(self) -> None:
        """Read every table in scope and its partitions in full (where the log is followed, the newest
        event id is read first: what the scan reads reflects at least that much)."""
        mark = self._current_event_id()
        self._seen.clear()
        self._changes += 1
        self.stats = ScanStats()
        self._databases = set()
        for db in self._in_scope_databases():
            self._databases.add(db.lower())
            self._read_tables(db, self._table_names(db))
        self.scanned = True
        self.source = "full scan"
        self.last_event_id = mark or None  # 0: the log is empty, no listener writes it
        self.full_scan_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        self._replace_all = True
        log.info("janitor.references_scanned", scope=self.scope, **self.read_counts())

    def refresh(self) -> None:
        """List again what a new reference can appear through (see the module's docstring) and read
        what is new or changed; where the log is followed, the events since the last applied."""
        if self.last_event_id is not None:
            if not self._apply_events():
                self.scan()
            return
        for db in self._in_scope_databases():
            self._databases.add(db.lower())
            infos = self._get_tables(db, self._table_names(db))
            for info in infos:
                seen = self._seen.get(_key(info.db, info.name))
                if seen is None or not (loc.same(seen.info.location, info.location, self.names)
                                        and loc.same(seen.info.root, info.root, self.names)
                                        and seen.info.partition_keys == info.partition_keys):
                    self._read_table(info, merge=seen)
                elif info.is_partitioned:
                    try:
                        names_now = frozenset(self.catalog.partition_names(info.db, info.name))
                        new = sorted(names_now - seen.names)
                        if new:
                            self._read_partitions(info, new, seen)
                    except errors.TableNotFoundError:  # dropped meanwhile; its references are kept
                        continue
                    seen.names = seen.names | names_now
                    if seen.info != info:
                        seen.info = info
                        self._changes += 1

    def forget(self, db: str, table: str) -> None:
        """``db.table`` is gone (the janitor dropped it): what it referenced is no longer live."""
        self._seen.pop(_key(db, table), None)
        self._dirty.add(_key(db, table))
        self._changes += 1

    def reread(self, db: str, table: str) -> None:
        """Read ``db.table`` again in full (its location or root moved)."""
        self.forget(db, table)
        for info in self._get_tables(db, [table]):
            root = loc.normalize(info.root) if info.root else None
            if root and _key(db, table) in self.targets and root not in self._roots:
                # A target's root moved: what matters to the new root was not kept. Read everything.
                self._roots.append(root)
                self.roots = Roots(self._roots, self.names)
                self.scan()
                return
            self._read_table(info)

    # ------------------------------------------------------------------ reads
    def _get_tables(self, db: str, names: Sequence[str]) -> list[TableInfo]:
        out: list[TableInfo] = []
        for start in range(0, len(names), TABLE_PAGE):
            try:
                out.extend(self.catalog.get_tables(db, list(names[start:start + TABLE_PAGE])))
            except errors.TableNotFoundError:  # the database went away meanwhile
                return out
        return out

    def _read_tables(self, db: str, names: Sequence[str]) -> None:
        for info in self._get_tables(db, names):
            self._read_table(info)

    def _read_table(self, info: TableInfo, merge: _Seen | None = None) -> None:
        """Read ``info``'s partitions in full; ``merge``: an earlier read whose references are kept too
        (a change never makes an earlier reference less live within one run)."""
        self.stats.tables += 1
        self._changes += 1
        self._dirty.add(_key(info.db, info.name))
        own = _key(info.db, info.name) in self.targets
        seen = _Seen(info, refs=list(merge.refs) if merge else [])
        owner = self._owner(info)
        temp_of = self._temp_of(info)
        container = info.is_partitioned and temp_of is None
        for location, what, is_container in (
                (info.location, owner, container),
                (info.root if info.root and not loc.same(info.root, info.location, self.names) else None,
                 f"the storage root of {info.qualified_name}", True)):
            if location:
                self._keep(seen, location, what, container=is_container, temp_of=temp_of, force=own)
        self._seen[_key(info.db, info.name)] = seen
        if info.is_partitioned:
            try:
                names = self.catalog.partition_names(info.db, info.name)
                self._read_partitions(info, names, seen)
            except errors.TableNotFoundError:  # dropped while being read: what it referenced is not live
                if merge is None:
                    self._seen.pop(_key(info.db, info.name), None)
                return
            seen.names = frozenset(names)

    def _read_partitions(self, info: TableInfo, names: Sequence[str], seen: _Seen) -> None:
        keys = info.partition_key_names
        owner = self._owner(info)
        temp_of = self._temp_of(info)
        own = _key(info.db, info.name) in self.targets
        self._changes += 1
        self._dirty.add(_key(info.db, info.name))
        for page in self.catalog.partition_locations(info.db, info.name, names):
            self.stats.partitions += len(page)
            for values, location in page:
                if location:
                    name = pn.partition_name(keys, values)
                    self._keep(seen, location, f"partition {name} of {owner}", temp_of=temp_of,
                               partition=name, force=own)

    def _keep(self, seen: _Seen, location: str, owner: str, *, container: bool = False,
              temp_of: str | None = None, partition: str | None = None, force: bool = False) -> None:
        try:
            norm = loc.normalize(location)
        except ValueError:
            log.warning("janitor.unreadable_location", location=location, owner=owner)
            return
        if force or self.roots.relevant(norm):
            seen.refs.append(LiveRef(norm, owner, container=container, temp_of=temp_of, partition=partition))
            self.stats.kept += 1

    @staticmethod
    def _temp_of(info: TableInfo) -> str | None:
        return info.parameters.get(SWAP_ID_PARAM) if info.parameters.get(TEMP_FOR_PARAM) else None

    def _owner(self, info: TableInfo) -> str:
        return f"{'temporary table' if self._temp_of(info) else 'table'} {info.qualified_name}"

    def read_counts(self) -> dict[str, int]:
        """What the last full scan read: databases, tables, partitions, and the references it kept."""
        return {"databases": len(self._databases), "tables": self.stats.tables,
                "partitions": self.stats.partitions, "kept": self.stats.kept, "events": self.stats.events}

    # ------------------------------------------------------------------ the index and the log
    def _current_event_id(self) -> int | None:
        if self.log is None:
            return None
        try:
            return self.log.current_event_id()
        except errors.TableSwapError as exc:  # cannot read it: nothing is followed, every read is full
            log.warning("janitor.notification_log_unreadable", error=str(exc))
            return None

    def _fall_back(self, why: str) -> bool:
        self.full_scan_reason = why
        log.info("janitor.reference_index_not_used", reason=why)
        return False

    def _load_index(self) -> bool:
        """Load the stored index and apply the events since; False (nothing loaded) when it is not
        certainly complete: the caller does a full scan."""
        if self.index is None:
            return False
        state = self.index.state()
        if state is None:
            if not self._current_event_id():
                return self._fall_back("the metastore keeps no notification log (no event in it)")
            return self._fall_back("no index stored yet")
        stored = {loc.key(r, self.names) for r in state.roots}
        missing = [r for r in self._roots if loc.key(r, self.names) not in stored]
        if missing:
            # What matters to these roots was not kept: read everything, for the old roots and the new.
            self._roots = sorted(set(self._roots) | set(state.roots))
            self.roots = Roots(self._roots, self.names)
            return self._fall_back(f"a table's storage root is not in the index ({missing[0]})")
        scanned_at = dt.datetime.fromisoformat(state.full_scan_at)
        if dt.datetime.now(dt.timezone.utc) - scanned_at >= self.full_scan_every:
            self._roots = sorted(set(self._roots) | set(state.roots))
            self.roots = Roots(self._roots, self.names)
            return self._fall_back(f"the last full scan ({state.full_scan_at}) is older than full_scan_every")
        self._roots = list(state.roots)
        self.roots = Roots(self._roots, self.names)
        self._seen = {(t.db, t.table): _stored_to_seen(t) for t in self.index.tables()}
        self.last_event_id = state.last_event_id
        self.full_scan_at = state.full_scan_at
        self.stats = ScanStats()
        self._changes += 1
        if not self._apply_events():
            self._seen.clear()
            self.last_event_id = None
            return False
        self.scanned = True
        self.source = "index"
        log.info("janitor.references_from_index", last_event_id=self.last_event_id, events=self.stats.events,
                 tables=len(self._seen))
        return True

    def _apply_events(self) -> bool:
        """Apply every event after :attr:`last_event_id`; False when one may be missing (a gap: events
        expired or the log was reset) or is not understood. What was applied stays applied."""
        assert self.log is not None and self.last_event_id is not None
        current = self._current_event_id()
        if current is None or current < self.last_event_id:
            return self._fall_back(f"the notification log's newest event ({current}) is older than the last "
                                   f"applied ({self.last_event_id}): reset, or unreadable")
        while self.last_event_id < current:
            try:
                events = self.log.events_after(self.last_event_id)
            except errors.TableSwapError as exc:
                return self._fall_back(f"the notification log could not be read: {exc}")
            if not events:
                return self._fall_back(f"the notification log no longer holds the events after "
                                       f"{self.last_event_id} (up to {current})")
            why = self._apply_page(events)
            if why is not None:
                return self._fall_back(why)
        return True

    def _apply_page(self, events: Sequence[ev.NotificationEvent]) -> str | None:
        """Apply a page of consecutive events; why not, when one is missing or cannot be followed.

        What an event names is read as it is now, so the page's reads are grouped: each database, table and
        table's partitions once, the partitions of a table by name in one read (a table or database read in
        full covers its partitions)."""
        assert self.last_event_id is not None
        databases: dict[str, None] = {}
        tables: dict[Key, None] = {}
        partitions: dict[Key, list[Mapping[str, str]]] = {}
        expected = self.last_event_id + 1
        for event in events:
            if event.event_id != expected:
                return f"the notification log has no event {expected} (next: {event.event_id}): expired or lost"
            expected += 1
            what = ev.effect(event)
            if what == ev.NONE:
                continue
            if what == ev.UNKNOWN or (event.event_type == "ALTER_TABLE" and event.renamed_to is None):
                return f"event {event.event_id} ({event.event_type}) is not one the index can follow"
            assert event.db is not None
            if what == ev.DATABASE:
                databases[event.db.lower()] = None
                continue
            assert event.table is not None
            if what == ev.PARTITIONS and event.partitions is not None:
                partitions.setdefault(_key(event.db, event.table), []).extend(event.partitions)
                continue
            tables[_key(event.db, event.table)] = None
            if event.renamed_to is not None:
                tables[event.renamed_to] = None
        for db in databases:
            for key in [k for k in self._seen if k[0] == db]:
                self.forget(*key)
            self._read_tables(db, self._table_names(db))
        for db, table in tables:
            if db not in databases:
                self.forget(db, table)
                self._read_tables(db, [table])  # gone (dropped, renamed away): nothing of it is live
        for (db, table), values in partitions.items():
            if db not in databases and (db, table) not in tables and not self._apply_partitions(db, table, values):
                self.forget(db, table)
                self._read_tables(db, [table])
        self.stats.events += len(events)
        self.last_event_id = events[-1].event_id
        return None

    def _apply_partitions(self, db: str, table: str, partitions: Sequence[Mapping[str, str]]) -> bool:
        """Read the ``partitions`` (key -> value maps, or position -> value) of ``db.table`` again by name;
        False when they cannot be named (the caller reads the table in full)."""
        seen = self._seen.get(_key(db, table))
        if seen is None:
            found = self._get_tables(db, [table])
            if not found:
                return True  # gone: a later DROP_TABLE event says so; nothing of it is live
            info = found[0]
            seen = _Seen(info)
        else:
            info = seen.info
        keys = info.partition_key_names
        names: set[str] = set()
        for values in partitions:
            by_key = {k.lower(): v for k, v in values.items()}
            if len(by_key) != len(keys):
                return False
            if all(str(i) in by_key for i in range(len(keys))):
                ordered = [by_key[str(i)] for i in range(len(keys))]
            elif all(k in by_key for k in keys):
                ordered = [by_key[k] for k in keys]
            else:
                return False
            names.add(pn.partition_name(keys, ordered))
        seen.refs = [r for r in seen.refs if r.partition not in names]
        seen.names = seen.names - names
        self._seen[_key(info.db, info.name)] = seen
        try:
            self._read_partitions(info, sorted(names), seen)
        except (errors.TableNotFoundError, errors.CatalogError):  # dropped meanwhile, say: read the table
            return False
        return True

    def save_index(self) -> None:
        """Store the index (after a full scan: all of it; else the tables read since it was loaded)."""
        if self.index is None or self.last_event_id is None or self.full_scan_at is None:
            return
        state = IndexState(tuple(self._roots), self.last_event_id, self.full_scan_at)
        keys = set(self._seen) if self._replace_all else self._dirty
        kept = [k for k in keys if k in self._seen and self._persisted(self._seen[k])]
        self.index.save(state, [_seen_to_stored(self._seen[k]) for k in kept], replace_all=self._replace_all,
                        removed=[k for k in keys if k not in kept])
        self._replace_all = False
        self._dirty.clear()

    def _persisted(self, seen: _Seen) -> bool:
        """Whether ``seen`` goes into the index: what it references matters, or it is a table being cleaned
        or a temporary table of a swap."""
        return bool(seen.refs) or _key(seen.info.db, seen.info.name) in self.targets or \
            bool(seen.info.parameters.get(TEMP_FOR_PARAM))

    # ------------------------------------------------------------------ answers
    def temp_tables_of(self, db: str, table: str) -> list[TableInfo]:
        """The temporary tables of swaps of ``db.table`` (as read)."""
        q = f"{db}.{table}".lower()
        return [s.info for s in self._seen.values()
                if s.info.parameters.get(TEMP_FOR_PARAM, "").lower() == q]

    def view(self, db: str, table: str) -> LiveView:
        """Everything referenced at, under or above ``db.table``'s storage root, as last read: its own
        partitions (with their names) and every other table's and partition's location that matters.
        The same object while nothing was read since (its index is built once)."""
        cached = self._views.get(_key(db, table))
        if cached is not None and cached[0] == self._changes:
            return cached[1]
        view = self._view(db, table)
        self._views[_key(db, table)] = (self._changes, view)
        return view

    def _view(self, db: str, table: str) -> LiveView:
        own = self._seen.get(_key(db, table))
        if own is None:
            return LiveView(db, table, exists=False, names=self.names)
        info = own.info
        if not info.root:
            return LiveView(db, table, exists=True, root=None, names=self.names)
        root = loc.normalize(info.root)
        refs = [LiveRef(root, f"the storage root of {info.qualified_name}", container=True)]
        refs.extend(own.refs)
        hdfs_root = loc.on_hdfs(root)
        for key, seen in self._seen.items():
            if key == _key(db, table):
                continue
            for ref in seen.refs:
                if (loc.is_within(ref.location, root, self.names) or loc.is_within(root, ref.location, self.names)
                        or (hdfs_root and loc.on_hdfs(ref.location)
                            and self.names.cannot_tell(ref.location, root))):
                    refs.append(replace(ref, partition=None) if ref.partition is not None else ref)
        return LiveView(db, table, exists=True, root=root, refs=tuple(refs),
                        location=loc.normalize(info.location) if info.location else None, names=self.names)


def _seen_to_stored(seen: _Seen) -> StoredTable:
    info = seen.info
    return StoredTable(info.db, info.name, {
        "table_type": info.table_type, "location": info.location,
        "partition_keys": [[c.name, c.type] for c in info.partition_keys],
        "parameters": dict(info.parameters),
    }, [[r.location, r.owner, r.container, r.temp_of, r.partition] for r in seen.refs])


def _stored_to_seen(stored: StoredTable) -> _Seen:
    raw = stored.info
    info = TableInfo(stored.db, stored.table, str(raw.get("table_type") or ""), raw.get("location"), (),
                     tuple(Column(str(n), str(t)) for n, t in raw.get("partition_keys") or ()),
                     parameters={str(k): str(v) for k, v in (raw.get("parameters") or {}).items()})
    refs = [LiveRef(str(location), str(owner), container=bool(container), temp_of=temp_of, partition=partition)
            for location, owner, container, temp_of, partition in stored.refs]
    return _Seen(info, refs=refs)
