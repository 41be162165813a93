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
    deleted_by_janitor: bool = False
    queue_state: str | None = None  # its deletion-queue state: pending | deleted | restored | ...

    @property
    def restorable(self) -> bool:
        return bool(self.exists) and not self.deleted_by_janitor


class LocationChecker:
    """Existence on storage and the janitor's verdict for locations, cached per call."""

    def __init__(self, deletions: Sequence[Deletion], exists: Callable[[str], bool] = storage.exists,
                 check_storage: bool = True) -> None:
        self._queue: dict[str, str] = {}
        for d in deletions:
            key = loc.key(d.location)
            # 'deleted' wins over any other row of the same location.
            if self._queue.get(key) != DeletionState.DELETED:
                self._queue[key] = d.state
        self._exists = exists
        self._check_storage = check_storage
        self._cache: dict[str, LocationStatus] = {}

    def __call__(self, location: str | None) -> LocationStatus:
        if not location:
            return LocationStatus(None)
        key = loc.key(location)
        if key not in self._cache:
            state = self._queue.get(key)
            exists = None
            if self._check_storage:
                try:
                    exists = self._exists(location)
                except Exception:  # noqa: BLE001 - an unreachable store is "unknown", not a crash
                    exists = None
            self._cache[key] = LocationStatus(exists, state == DeletionState.DELETED, state)
        return self._cache[key]


def partition_key(table: TableInfo, spec: str) -> str:
    """A user's spec (``dt=2026-06-03`` or ``a=1/b=x``) → the partition name the journal stores."""
    if not table.is_partitioned:
        raise errors.InvalidInputError(f"{table.qualified_name} is not partitioned: --partition does not apply")
    keys = table.partition_key_names
    return pn.partition_name(keys, pn.values_for(keys, pn.parse_name(spec)))
