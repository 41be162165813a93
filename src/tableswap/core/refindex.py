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
    """

    def __init__(self, items: Iterable[tuple[str, T]] = ()) -> None:
        self._exact: dict[str, list[T]] = {}
        for location, item in items:
            self._exact.setdefault(loc.key(location), []).append(item)
        # is_within(p, r) <=> p == r or p starts with r.rstrip("/") + "/": index each key by its stripped form.
        self._stripped: dict[str, list[str]] = {}
        for k in self._exact:
            self._stripped.setdefault(k.rstrip("/"), []).append(k)
        self._sorted = sorted(self._exact)

    def __len__(self) -> int:
        return sum(len(items) for items in self._exact.values())

    def at(self, location: str) -> list[T]:
        """The items whose location is ``location`` (same key)."""
        return list(self._exact.get(loc.key(location), ()))

    def at_or_above(self, location: str) -> Iterator[T]:
        """The items whose location ``location`` is within (``is_within(location, item location)``):
        the location itself and every ancestor."""
        k = loc.key(location)
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
        yield from self._exact.get(loc.key(location), ())
        yield from self.strictly_below(location)

    def strictly_below(self, location: str) -> Iterator[T]:
        """The items under ``location``, not at it."""
        k = loc.key(location)
        prefix = k.rstrip("/") + "/"
        i = bisect.bisect_left(self._sorted, prefix)
        while i < len(self._sorted) and self._sorted[i].startswith(prefix):
            if self._sorted[i] != k:
                yield from self._exact[self._sorted[i]]
            i += 1
