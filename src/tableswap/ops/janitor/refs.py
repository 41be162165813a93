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
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.deletion_safety import SCOPE_DATABASE, SCOPE_METASTORE, SCOPE_TABLE, LiveRef, LiveView, Roots
from tableswap.core.names import TEMP_MARKER
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


class ReferenceScan:
    """The references of every table in ``scope`` that matter for deleting under the roots of the
    ``targets`` (the tables the janitor works on). Not thread-safe.

    ``names``: the HDFS spellings the Hadoop configuration makes one (default: read from ``$HADOOP_CONF_DIR``
    now, :func:`tableswap.storage.hdfs_names`); a reference on an HDFS the configuration does not place, at a
    path under a root's, is kept too (the deletion safety rules refuse what it may be)."""

    def __init__(self, catalog: Catalog, scope: str = SCOPE_METASTORE, names: loc.HdfsNames | None = None) -> None:
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
        else:
            self.scan()

    def scan(self) -> None:
        """Read every table in scope and its partitions in full."""
        self._seen.clear()
        self._changes += 1
        self.stats = ScanStats()
        self._databases = set()
        for db in self._in_scope_databases():
            self._databases.add(db.lower())
            self._read_tables(db, self._table_names(db))
        self.scanned = True
        log.info("janitor.references_scanned", scope=self.scope, **self.read_counts())

    def refresh(self) -> None:
        """List again what a new reference can appear through (see the module's docstring) and read
        what is new or changed."""
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
                "partitions": self.stats.partitions, "kept": self.stats.kept}

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
