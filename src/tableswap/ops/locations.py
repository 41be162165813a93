"""What the journal and the storage say of a location (can it still be restored?), and a user's partition spec
as the journal names it: shared by the operations that restore (rollback, repair), the state token and the
reports (history, show)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.catalog import TableInfo
from tableswap.core.records import DeletionState
from tableswap.journal.store import Deletion


@dataclass(frozen=True)
class LocationStatus:
    """Whether a location can still be restored."""

    exists: bool | None  # None: not checked / not applicable
    #: Deleted by the janitor, in whole or in part: its queue row is ``deleted``, or a janitor began deleting
    #: it (or a directory holding it, or something inside it) and may have died before it finished.
    deleted_by_janitor: bool = False
    queue_state: str | None = None  # its deletion-queue state: pending | deleted | restored | ...
    #: When a janitor began deleting it (or what holds it, or something inside it); None: never.
    deletion_begun_at: str | None = None

    @property
    def restorable(self) -> bool:
        return bool(self.exists) and not self.deleted_by_janitor

    @property
    def problem(self) -> str | None:
        """Why it cannot be restored, in words (None: it can, or nothing is known of it)."""
        if self.queue_state == DeletionState.DELETED:
            return "was deleted by the janitor"
        if self.deletion_begun_at:
            remains = "" if self.exists is False else ", whatever remains of it"
            return (f"the janitor began deleting it at {self.deletion_begun_at} and did not finish: part of its "
                    f"files may be gone, so it is never restored{remains}")
        if self.deleted_by_janitor:
            return "was deleted by the janitor"
        if self.exists is False:
            return "no longer exists"
        return None


class LocationChecker:
    """Existence on storage and the janitor's verdict for locations, cached per call.

    A location is deleted by the janitor when a queue row of it is ``deleted``, and partly so when a janitor
    began deleting it, a directory above it or anything a reader of it sees below it (``delete_begun_at``,
    recorded before the first delete): such a location is never restorable, whether files remain or not."""

    def __init__(self, deletions: Sequence[Deletion], exists: Callable[[str], bool] = storage.exists,
                 check_storage: bool = True) -> None:
        self._queue: dict[str, str] = {}
        self._begun: dict[str, str] = {}  # location → when a janitor began deleting it
        for d in deletions:
            key = loc.key(d.location)
            # 'deleted' wins over any other row of the same location.
            if self._queue.get(key) != DeletionState.DELETED:
                self._queue[key] = d.state
            if d.delete_begun_at:
                self._begun[d.location] = min(d.delete_begun_at, self._begun.get(d.location, d.delete_begun_at))
        self._exists = exists
        self._check_storage = check_storage
        self._cache: dict[str, LocationStatus] = {}

    def _deletion_begun(self, location: str) -> str | None:
        """When a janitor began deleting ``location``, a directory holding it or something inside it (seen by
        a reader of the one: no hidden segment between them, see :func:`_seen_below`)."""
        hits = [when for marked, when in self._begun.items()
                if _seen_below(marked, location) or _seen_below(location, marked)]
        return min(hits) if hits else None

    def __call__(self, location: str | None) -> LocationStatus:
        if not location:
            return LocationStatus(None)
        key = loc.key(location)
        if key not in self._cache:
            state = self._queue.get(key)
            begun = self._deletion_begun(location)
            exists = None
            if self._check_storage:
                try:
                    exists = self._exists(location)
                except Exception:  # noqa: BLE001 - an unreachable store is "unknown", not a crash
                    exists = None
            self._cache[key] = LocationStatus(exists, state == DeletionState.DELETED or begun is not None, state,
                                              begun)
        return self._cache[key]


def _seen_below(parent: str, path: str) -> bool:
    """True when ``path`` is ``parent`` or lies below it through visible names only. Readers (Spark, Hive,
    Trino) skip names starting with ``_`` or ``.``, and the janitor's partial deletes keep ``_tableswap/``:
    a deletion begun at a table root leaves the swap directories below it whole, and one begun inside
    ``<root>/_tableswap/`` changes nothing a reader of the root sees."""
    if not loc.is_within(path, parent):
        return False
    below = loc.key(path)[len(loc.key(parent)):].strip("/")
    return not any(name.startswith(("_", ".")) for name in below.split("/") if name)


def partition_key(table: TableInfo, spec: str) -> str:
    """A user's spec (``dt=2026-06-03`` or ``a=1/b=x``) → the partition name the journal stores."""
    if not table.is_partitioned:
        raise errors.InvalidInputError(f"{table.qualified_name} is not partitioned: --partition does not apply")
    keys = table.partition_key_names
    return pn.partition_name(keys, pn.values_for(keys, pn.parse_name(spec)))
