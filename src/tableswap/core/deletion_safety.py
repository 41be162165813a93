"""What may be deleted: the metastore's live references under a table's root (:class:`LiveView`) and
the safety rules every deletion is held to. Pure: no I/O.

Safety rules (:func:`check_location`), in order:
1. no ``.`` or ``..`` segment in the location as stored (never follow a path that normalizes
   elsewhere);
2. inside the table root recorded when the location was queued *and* inside the table's current
   root (scheme and bucket/host included);
3. the table still exists (otherwise nothing can be checked);
4. not equal to, nor inside, any location a table or partition references; a location that
   *contains* live ones is only partly deleted (its other entries), and a storage root or a
   partitioned table's own location is never deleted itself;
5. not a location an unfinished swap may still point the table at (``tableswap recover``).

Locations are compared by :func:`tableswap.core.locations.key`, with the HDFS spellings the Hadoop
configuration makes one (:class:`~tableswap.core.locations.HdfsNames`, the view's ``names``): a nameservice and
its NameNodes' addresses, a host's short and fully qualified names. A reference on an ``hdfs://`` authority
that the configuration does not place, at the path of a deletion (or above or below it), may be the same
directory spelled another way: the deletion is refused, saying so (rule 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Iterable, Sequence

from tableswap.core import locations as loc
from tableswap.core.manifest import is_manifest
from tableswap.core.refindex import LocationIndex


#: What the janitor reads for live references (``[janitor] reference_scope``): every table and partition
#: of every database (the default), of the cleaned table's database, or the cleaned table alone (with its
#: temporary tables).
SCOPE_METASTORE, SCOPE_DATABASE, SCOPE_TABLE = "metastore", "database", "table"
REFERENCE_SCOPES = (SCOPE_METASTORE, SCOPE_DATABASE, SCOPE_TABLE)


class Roots:
    """The storage roots deletions happen under. A referenced location matters to a deletion only if it
    is at, under or above one of them (rule 2 keeps every deletion inside its table's root)."""

    def __init__(self, roots: Iterable[str], names: loc.HdfsNames | None = None) -> None:
        self._roots = tuple(roots)
        self._names = names
        self._index = LocationIndex(((r, r) for r in self._roots), names)

    def relevant(self, location: str) -> bool:
        if _any(self._index.at_or_above(location)) or _any(self._index.at_or_below(location)):
            return True
        names = self._names
        return names is not None and loc.on_hdfs(location) and any(
            names.cannot_tell(location, root) for root in self._roots)


@dataclass(frozen=True)
class LiveRef:
    """A location the metastore references right now."""

    location: str  # normalized
    owner: str  # human-readable: "partition dt=1 of db.t", "table db.t", ...
    container: bool = False  # a storage root or partitioned table's location: only its own path is live
    temp_of: str | None = None  # swap id, when it belongs to that swap's temporary table
    partition: str | None = None  # the partition's name, when it is a partition of the view's own table


@dataclass(frozen=True)
class LiveView:
    """What references storage under one table's root, read from the metastore at one instant."""

    db: str
    table: str
    exists: bool
    root: str | None = None  # normalized
    refs: tuple[LiveRef, ...] = ()
    location: str | None = None  # the table's own location as read, normalized
    names: loc.HdfsNames | None = None  # the HDFS spellings the configuration makes one

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.table}"

    def refreshed(self, names: Iterable[str], location: str | None, root: str | None,
                  fresh: Iterable[LiveRef]) -> LiveView | None:
        """This view with the table read again (its ``location`` and ``root``) and its partitions
        ``names`` read again by name (``fresh``: the references of those that exist), or None when the
        table's location or root moved (then only a full read tells what is live).

        Sound for deleting locations displaced from the partitions ``names``: such a location becomes
        live again only through its own partition (a rollback points it back there)."""
        if not (self.exists and self.root and root and location and self.location
                and loc.same(root, self.root, self.names) and loc.same(location, self.location, self.names)):
            return None
        names = set(names)
        fresh = tuple(fresh)
        kept: list[LiveRef] = []
        dropped: list[LiveRef] = []
        for r in self.refs:
            (dropped if r.partition is not None and r.partition in names else kept).append(r)
        view = replace(self, refs=tuple(kept) + fresh)
        # The index of the new view from this one's (built once per full read), not rebuilt per batch.
        view.__dict__["index"] = self.index.updated(((r.location, r) for r in dropped),
                                                    ((r.location, r) for r in fresh))
        return view

    @cached_property
    def index(self) -> LocationIndex[LiveRef]:
        """The references by location: path questions without a scan of every reference."""
        return LocationIndex(((ref.location, ref) for ref in self.refs), self.names)

    @cached_property
    def elsewhere(self) -> tuple[LiveRef, ...]:
        """The references on another ``hdfs://`` authority than the table's root (after the configuration's
        spellings): the only ones :meth:`cannot_tell` has to look at."""
        names = self.names
        if names is None or not self.root or not loc.on_hdfs(self.root):
            return ()
        own = loc.split(loc.key(self.root, names))[:2]
        return tuple(r for r in self.refs
                     if loc.on_hdfs(r.location) and loc.split(loc.key(r.location, names))[:2] != own)

    def cannot_tell(self, location: str) -> LiveRef | None:
        """A reference that may be ``location``, at, above or below it, on an HDFS spelled in a way the
        configuration does not place (a table root or a partitioned table's location only at or below it)."""
        names = self.names
        if names is None:
            return None
        for ref in self.elsewhere:
            if names.cannot_tell(ref.location, location) and (
                    not ref.container or loc.is_within(loc.path_of(ref.location), loc.path_of(location))):
                return ref
        return None


def has_dot_segments(location: str) -> bool:
    return any(segment in (".", "..") for segment in loc.path_of(location).split("/"))


def check_location(
    location: str,
    queued_root: str | None,
    view: LiveView,
    *,
    unfinished: Iterable[tuple[str, str]] = (),
    ignore_temp_of: str | None = None,
) -> tuple[str | None, bool]:
    """``(refusal reason or None, partial)`` for deleting ``location`` given a live snapshot.

    ``partial`` means the location contains live locations (or is a root): only its entries that
    are not live and contain nothing live may be deleted, never the directory itself.
    """
    if not location:
        return "empty location", False
    if has_dot_segments(location):
        return f"{location} has '.' or '..' segments; refusing to follow a path that normalizes elsewhere", False
    try:
        norm = loc.normalize(location)
    except ValueError as exc:
        return f"not a valid location: {exc}", False
    if not view.exists:
        return (f"table {view.qualified} no longer exists in the metastore, so what references {norm} "
                "cannot be checked; remove the queue entry by hand once you have verified it"), False
    if not view.root:
        return f"table {view.qualified} has no storage root", False
    names = view.names
    if queued_root and not loc.is_within(norm, queued_root, names):
        return f"outside the table's storage root {loc.normalize(queued_root)} (recorded when queued)", False
    if not loc.is_within(norm, view.root, names):
        if names is not None and names.cannot_tell(norm, view.root):
            return (f"{norm} and the table's storage root {view.root} are on HDFS spelled differently, and the "
                    "Hadoop configuration (HADOOP_CONF_DIR) does not say whether they are one file system; kept. "
                    "Name the NameNodes of both in hdfs-site.xml (a nameservice's dfs.namenode.rpc-address.*) so "
                    "that the janitor can tell"), False
        return f"outside the table's current storage root {view.root}", False
    def counted(ref: LiveRef) -> bool:
        return not (ignore_temp_of and ref.temp_of == ignore_temp_of)

    for ref in view.index.at(norm):
        if counted(ref) and not ref.container:
            return f"still referenced: it is the location of {ref.owner}", False
    for ref in view.index.at_or_above(norm):
        if counted(ref) and not ref.container:
            return f"still referenced: it is inside the location of {ref.owner} ({ref.location})", False
    uncertain = view.cannot_tell(norm)
    if uncertain is not None and counted(uncertain):
        return (f"may still be referenced: {uncertain.owner} is at {uncertain.location}, the same path on an HDFS "
                "spelled in a way the Hadoop configuration (HADOOP_CONF_DIR) does not place, so it may be this "
                "directory under another name; kept. Name that NameNode in hdfs-site.xml (its nameservice's "
                "dfs.namenode.rpc-address.*, or its host's other name) so that the janitor can tell"), False
    for swap_id, other in unfinished:
        try:
            other_norm = loc.normalize(other)
        except ValueError:
            continue
        if loc.is_within(norm, other_norm, names) or loc.is_within(other_norm, norm, names):
            return (f"swap {swap_id} is unfinished and may still point the table at {other_norm}; "
                    "run `tableswap recover` first"), False
    partial = any(counted(ref) for ref in view.index.at_or_below(norm))
    return None, partial


def expand(location: str, refs: Sequence[LiveRef] | LocationIndex[LiveRef],
           list_children: Callable[[str], list[tuple[str, bool]]]) -> list[str]:
    """What to delete for ``location`` (already checked with :func:`check_location`): itself if it
    contains nothing live, else its entries that are neither live nor contain anything live nor are
    a ``_tableswap`` directory, recursively. Never returns a live location or one containing one.
    ``refs``: the live references, best as a view's :attr:`LiveView.index`."""
    index = refs if isinstance(refs, LocationIndex) else LocationIndex((r.location, r) for r in refs)
    norm = loc.normalize(location)
    if not _any(index.at_or_below(norm)):
        return [norm]
    out: list[str] = []
    for child, is_dir in list_children(norm):
        child = loc.normalize(child)
        if child.rsplit("/", 1)[-1] == loc.STAGING_DIR:
            continue  # staged and rolled-back data: the queue and the orphan sweep handle it
        if is_manifest(child):
            continue  # a recovery manifest goes only with its whole directory
        if _any(index.at(child)) or any(not ref.container for ref in index.at_or_above(child)):
            continue
        if is_dir:
            out.extend(expand(child, index, list_children))
        elif not _any(index.at_or_below(child)):
            out.append(child)
    return out


def _any(items: Iterable[object]) -> bool:
    return next(iter(items), None) is not None
