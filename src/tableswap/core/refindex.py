"""An index of locations for the janitor's path questions (pure: no I/O).

The janitor asks, for every path it may delete, "is any live location this path, above it, or below
it?". Scanning every live location for each question costs (paths × live locations): quadratic in a
large backfill. :class:`LocationIndex` answers the same questions by :func:`tableswap.locations.is_within`
semantics exactly, in O(length of the path) for "at or above" (one dictionary lookup per ``/`` of the
path) and O(log n + answers) for "at or below" (a range of a sorted list).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from tableswap.core import locations as loc

T = TypeVar("T")

__all__ = ["LocationIndex"]


class LocationIndex(Generic[T]):
    """Items keyed by location; lookups compare by :func:`tableswap.locations.key`.

    Args:
        items: ``(location, item)`` pairs; a location may carry several items.
        names: the HDFS spellings a configuration makes one (:class:`tableswap.core.locations.HdfsNames`).
    """

    def __init__(self, items: Iterable[tuple[str, T]] = (), names: loc.HdfsNames | None = None) -> None:
        self.names = names
        self._exact: dict[str, list[T]] = {}
        for location, item in items:
            self._exact.setdefault(loc.key(location, names), []).append(item)
        # is_within(p, r) <=> p == r or p starts with r.rstrip("/") + "/": index each key by its stripped form.
        self._stripped: dict[str, list[str]] = {}
        for k in self._exact:
            self._stripped.setdefault(k.rstrip("/"), []).append(k)
        self._sorted = sorted(self._exact)

    def updated(self, removed: Iterable[tuple[str, T]], added: Iterable[tuple[str, T]]) -> "LocationIndex[T]":
        """A new index: this one without one occurrence of each ``removed`` item (at its location, compared
        by equality; an item not present is ignored) and with the ``added`` ones. This index is left as it
        is. Costs the items changed plus a copy of the key list, not a rebuild (the janitor's batches
        change a few partitions of a table read in full)."""
        new: LocationIndex[T] = LocationIndex(names=self.names)
        new._exact = dict(self._exact)
        copied: set[str] = set()
        gone: set[str] = set()
        born: set[str] = set()

        def items_of(k: str) -> list[T]:
            if k not in copied:
                new._exact[k] = list(new._exact.get(k, ()))
                copied.add(k)
            return new._exact[k]

        for location, item in removed:
            k = loc.key(location, self.names)
            if k in new._exact and item in new._exact[k]:
                items_of(k).remove(item)
        for location, item in added:
            k = loc.key(location, self.names)
            if k not in self._exact:
                born.add(k)
            items_of(k).append(item)
        for k in copied:
            if not new._exact[k]:
                del new._exact[k]
                if k in self._exact:
                    gone.add(k)
                born.discard(k)
        new._sorted = list(self._sorted)
        new._stripped = dict(self._stripped)
        for k in gone:
            del new._sorted[bisect.bisect_left(new._sorted, k)]
            s = k.rstrip("/")
            new._stripped[s] = [x for x in new._stripped[s] if x != k]
            if not new._stripped[s]:
                del new._stripped[s]
        for k in born:
            bisect.insort(new._sorted, k)
            s = k.rstrip("/")
            new._stripped[s] = [*new._stripped.get(s, ()), k]
        return new

    def __len__(self) -> int:
        return sum(len(items) for items in self._exact.values())

    def at(self, location: str) -> list[T]:
        """The items whose location is ``location`` (same key)."""
        return list(self._exact.get(loc.key(location, self.names), ()))

    def at_or_above(self, location: str) -> Iterator[T]:
        """The items whose location ``location`` is within (``is_within(location, item location)``):
        the location itself and every ancestor."""
        k = loc.key(location, self.names)
        seen: set[str] = set()
        if k in self._exact:
            seen.add(k)
            yield from self._exact[k]
        for i, char in enumerate(k):
            if char != "/":
                continue
            for root in self._stripped.get(k[:i], ()):
                if root not in seen:
                    seen.add(root)
                    yield from self._exact[root]

    def at_or_below(self, location: str) -> Iterator[T]:
        """The items whose location is within ``location`` (``is_within(item location, location)``): the
        location itself and everything under it."""
        yield from self._exact.get(loc.key(location, self.names), ())
        yield from self.strictly_below(location)

    def strictly_below(self, location: str) -> Iterator[T]:
        """The items under ``location``, not at it."""
        k = loc.key(location, self.names)
        prefix = k.rstrip("/") + "/"
        i = bisect.bisect_left(self._sorted, prefix)
        while i < len(self._sorted) and self._sorted[i].startswith(prefix):
            if self._sorted[i] != k:
                yield from self._exact[self._sorted[i]]
            i += 1
