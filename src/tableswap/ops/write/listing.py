"""The data files of the partitions a merge or a compaction reads: listed before the read, and listed again
under the table lock by the operation's input check (``Operation.input_conflicts``: before its intent and
again right before its flip), compared by :class:`~tableswap.core.listing.FilesAsRead`. One recursive
listing per partition (on an object store one paged LIST of its prefix), a few at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from tableswap import errors, storage
from tableswap.core.catalog_port import Snapshot
from tableswap.core.listing import FilesAsRead, PartitionListing, relative_files

#: Partitions listed at once.
LISTING_THREADS = 8


def list_files(parts: Sequence[tuple[str, tuple[str, ...], str]]) -> list[PartitionListing]:
    """Each ``(name, values, location)``'s data files, in the order given; :class:`StorageError` when one
    cannot be listed (nothing listed is missing, it is an error)."""
    def one(part: tuple[str, tuple[str, ...], str]) -> PartitionListing:
        name, values, location = part
        try:
            found = storage.survey(location)
        except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
            raise errors.StorageError(f"cannot list {location}: {type(exc).__name__}: {exc}") from exc
        files = {} if found is None else relative_files(found.path, found.sizes)
        return PartitionListing(name, tuple(values), location, files)

    if not parts:
        return []
    with ThreadPoolExecutor(max_workers=min(LISTING_THREADS, len(parts))) as pool:
        return list(pool.map(one, parts))


def files_unchanged(read: Sequence[PartitionListing], what: str) -> Callable[[Snapshot], list[str]]:
    """The input check of an operation that read the partitions ``read`` (``what``: ``"merge"``,
    ``"compaction"``): given the snapshot read under the lock, each of them listed again at its current
    location; the conflicts (a partition gone or moved, a file that appeared, changed size or vanished)."""
    checks = [FilesAsRead(listing, what) for listing in read]

    def input_conflicts(snapshot: Snapshot) -> list[str]:
        current = {r.values: snapshot.partitions.get(r.values) for r in read}
        listed = list_files([(r.name, r.values, p.location) for r in read
                             for p in [current[r.values]] if p is not None and p.location])
        now = {listing.values: listing for listing in listed}
        return [c for c in (check.check(now) for check in checks) if c is not None]

    return input_conflicts
