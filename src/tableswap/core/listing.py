"""What a merge or a compaction saw of the files of the partitions it read, and the check, under the table
lock, that they are still there as read (pure; the listings themselves are storage I/O in ``ops/``).

A partition's state token (:mod:`tableswap.core.state`) is its location and swap-id stamp: it does not
change when another writer appends into the partition's current directory (Spark's, Hive's and Trino's
``INSERT INTO ... PARTITION``). A merge or compaction that rewrites the partition from an earlier read would
repoint it away from those appended files. So each records, before it reads, the data files of every
partition it reads (:class:`PartitionListing`: names relative to the location, and sizes), and the commit
protocol compares a new listing with it under the lock (:class:`FilesAsRead`): a file that appeared,
changed size or vanished is a conflict, and nothing is changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from tableswap.core import locations as loc
from tableswap.core import partitions as pn

#: Files named in one conflict line (of how many differ).
SHOWN_FILES = 3


@dataclass(frozen=True)
class PartitionListing:
    """One partition's data files at ``location`` when listed: path relative to the location → bytes."""

    name: str  # the partition's name, ``dt=2026-06-03``
    values: tuple[str, ...]
    location: str
    files: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


def relative_files(location_path: str, sizes: Mapping[str, int]) -> dict[str, int]:
    """The data files of one storage listing (file paths → bytes) below ``location_path``, by their path
    relative to it (hidden files and directories left out, as readers leave them out:
    :func:`~tableswap.core.partitions.data_files_below`)."""
    prefix = location_path.rstrip("/") + "/"
    return {name[len(prefix):]: size for name, size in pn.data_files_below(location_path, sizes).items()}


def _shown(names: list[str]) -> str:
    more = f" and {len(names) - SHOWN_FILES} more" if len(names) > SHOWN_FILES else ""
    return ", ".join(sorted(names)[:SHOWN_FILES]) + more


def files_differ(before: Mapping[str, int], now: Mapping[str, int]) -> str | None:
    """How the files ``now`` differ from ``before`` (relative paths → bytes), or None when they do not:
    ``2 files appeared (a, b); 1 changed size (c); 1 vanished (d)``."""
    appeared = [n for n in now if n not in before]
    vanished = [n for n in before if n not in now]
    changed = [n for n in now if n in before and now[n] != before[n]]
    parts = [f"{len(names)} file{'s' if len(names) != 1 else ''} {verb} ({_shown(names)})"
             for names, verb in ((appeared, "appeared"), (changed, "changed size"), (vanished, "vanished"))
             if names]
    return "; ".join(parts) or None


@dataclass(frozen=True)
class FilesAsRead:
    """The partition read must still be at the location it was read from, holding the same data files.

    ``.check(now)``: ``now`` maps each partition's values to its listing under the lock (the listing of
    its current location), or to None when the partition is gone."""

    read: PartitionListing
    what: str = "operation"  # how the conflict names the reader: "compaction", "merge"

    def check(self, now: Mapping[tuple[str, ...], Any]) -> str | None:
        found = now.get(tuple(self.read.values))
        if found is None:
            return f"{self.read.name} was dropped since the {self.what} read it"
        if not loc.same(found.location, self.read.location):
            return f"{self.read.name} moved since the {self.what} read it (now at {found.location})"
        differs = files_differ(self.read.files, found.files)
        if differs is None:
            return None
        return (f"{self.read.name}: its files at {self.read.location} changed since the {self.what} read them "
                f"(another writer appended or rewrote in place): {differs}")
