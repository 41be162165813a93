"""The replace scope of a swap (``replace_where``), pure parts.

A scope says which partitions a swap owns: every existing partition inside it is replaced by the
batch's rows or, when the batch has none for it, dropped from the table (its data kept for rollback
and the janitor); a batch row outside it is an error. Two forms:

* a Spark SQL predicate on the partition columns (``"dt >= '2026-06-01' AND dt <= '2026-06-07'"``),
  evaluated by Spark itself (:mod:`tableswap.spark.scope`) on the partition values cast to the
  partition columns' types, so it means exactly what it means in a Spark query;
* a list of partition specs (``["dt=2026-06-01", {"dt": "2026-06-02"}]``), each naming a non-empty
  subset of the partition columns (``dt=2026-06-01`` covers every ``country`` of that day), evaluated
  here by comparing the stored values.

The drops are planned under the table lock (:class:`ScopeDrops`), from the table's partitions listed there,
as the replaced partitions are: a partition another swap added inside the scope and committed first is
dropped, as running the two swaps one after the other gives (guarantee 5). A predicate is evaluated by
Spark before the lock on every partition then known; under the lock only a partition added since is
evaluated (by the front end's ``classify``), and with no Spark at hand (a staged swap published from the
command line) the commit is refused rather than keeping it.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from tableswap.core import partitions as pn
from tableswap.errors import InvalidInputError, ScopeViolationError, SwapConflictError, listing

Values = tuple[str, ...]


def spec_values(spec: Any, keys: Sequence[str], *, what: str = "partition spec") -> dict[str, str]:
    """``spec`` (``'dt=2026-06-01'``, ``{'dt': ...}``, or a bare value of the first partition column:
    a ``date``, a string) → ``{partition column: stored value}`` in the table's column order."""
    if not keys:
        raise InvalidInputError(f"{what} {spec!r}: the table is not partitioned")
    if isinstance(spec, Mapping):
        found = {str(k).lower(): _text(v, spec, what) for k, v in spec.items()}
    elif isinstance(spec, str) and "=" in spec:
        found = pn.parse_name(spec)
    elif isinstance(spec, (str, int, dt.date)) and not isinstance(spec, bool):
        found = {keys[0]: _text(spec, spec, what)}
    else:
        raise InvalidInputError(
            f"{what} {spec!r}: expected a partition spec ('dt=2026-06-01', {{'dt': '2026-06-01'}}) or a value "
            f"of {keys[0]!r} (a date or a string)"
        )
    unknown = [k for k in found if k not in keys]
    if unknown or not found:
        raise InvalidInputError(
            f"{what} {spec!r}: {', '.join(map(repr, unknown)) or 'nothing'} is not a partition column of the "
            f"table ({', '.join(keys)})"
        )
    return {k: found[k] for k in keys if k in found}


def _text(value: Any, spec: Any, what: str) -> str:
    if isinstance(value, dt.datetime):
        raise InvalidInputError(f"{what} {spec!r}: give a date, not a date-time")
    if isinstance(value, dt.date):
        return value.isoformat()
    return pn.stored_value(value)


def spec_name(values: Mapping[str, str]) -> str:
    """``dt=2026-06-01`` (escaped as partition names are) for a (partial) spec."""
    return pn.partition_name(list(values), list(values.values()))


@dataclass(frozen=True)
class ReplaceScope:
    """``predicate`` (Spark SQL text) or ``specs`` (partial partition specs), never both."""

    predicate: str | None = None
    specs: tuple[Mapping[str, str], ...] = ()

    def describe(self) -> str:
        if self.predicate is not None:
            return self.predicate
        return " OR ".join(spec_name(s) for s in self.specs)

    def matches_spec(self, keys: Sequence[str], values: Values) -> bool:
        """For the list form: is the partition ``values`` inside one of the specs."""
        row = dict(zip(keys, values))
        return any(all(row[k] == v for k, v in spec.items()) for spec in self.specs)


def scope_from(replace_where: Any, keys: Sequence[str], table: str) -> ReplaceScope:
    """Validate ``replace_where`` (a predicate string, or a list/tuple of specs) for a table."""
    if not keys:
        raise InvalidInputError(f"{table} is not partitioned: replace_where applies to partitioned tables only")
    if isinstance(replace_where, str):
        text = replace_where.strip()
        if not text:
            raise InvalidInputError("replace_where is empty: give a predicate on the partition columns, e.g. "
                                    f"\"{keys[0]} >= '2026-06-01' AND {keys[0]} <= '2026-06-07'\"")
        return ReplaceScope(predicate=text)
    if isinstance(replace_where, (list, tuple, set, frozenset)):
        specs = [spec_values(s, keys, what="replace_where spec") for s in replace_where]
        if not specs:
            raise InvalidInputError("replace_where is an empty list: it would own no partition")
        unique = {spec_name(s): s for s in specs}
        return ReplaceScope(specs=tuple(unique[n] for n in sorted(unique)))
    raise InvalidInputError(
        f"replace_where must be a Spark SQL predicate on the partition columns or a list of partition specs, "
        f"got {type(replace_where).__name__}"
    )


def split(keys: Sequence[str], written: Iterable[Values], existing: Iterable[Values],
          inside: set[Values], table: str, scope: ReplaceScope) -> list[Values]:
    """Check the batch against the scope; return the existing partitions to drop (inside the scope,
    no batch rows). ``inside``: those of ``written`` and ``existing`` the scope covers."""
    written = list(written)
    outside = [v for v in written if v not in inside]
    if outside:
        names = [pn.partition_name(keys, v) for v in sorted(outside)]
        raise ScopeViolationError(
            f"the batch for {table} has rows outside replace_where ({scope.describe()}): partition(s) "
            f"{listing(names, limit=10)}. Nothing was changed: filter the batch to the scope, or widen the scope",
            table=table, outside=names)
    have = set(written)
    return sorted(v for v in set(existing) if v in inside and v not in have)



#: Evaluates a predicate scope on partition values: those of them inside it (Spark, from the front end).
Classify = Callable[[Sequence[Values]], "set[Values]"]


@dataclass(frozen=True)
class ScopeDrops:
    """A replace scope as the holder of the table lock applies it: which of the partitions listed there
    it drops (:meth:`drops`).

    A spec list is evaluated here on any partition. A predicate was evaluated before the lock on the
    partitions known then (``inside``, ``outside``); a partition listed under the lock that is neither
    (added meanwhile) goes to ``classify``, or, with none at hand, the commit is refused
    (:class:`SwapConflictError`, nothing changed) rather than keeping a partition the scope may own.
    ``unavailable``: what to do then (in the refusal's message)."""

    scope: ReplaceScope
    keys: tuple[str, ...]
    table: str
    inside: frozenset[Values] = frozenset()
    outside: frozenset[Values] = frozenset()
    classify: Classify | None = field(default=None, compare=False, repr=False)
    unavailable: str = "Rerun the swap"

    def drops(self, listed: Iterable[Values], written: Iterable[Values]) -> tuple[Values, ...]:
        """Of ``listed`` (the table's partitions, read under the lock), those inside the scope that the
        batch (``written``) has no rows for."""
        listed, have = set(listed), set(written)
        if self.scope.predicate is None:
            inside = {v for v in listed if self.scope.matches_spec(self.keys, v)}
        else:
            new = sorted(listed - self.inside - self.outside)
            if new and self.classify is None:
                names = [pn.partition_name(self.keys, v) for v in new]
                raise SwapConflictError(
                    f"{self.table} has partition(s) {listing(names, limit=10)} added since the batch was staged, "
                    f"and no Spark is at hand to evaluate replace_where ({self.scope.describe()}) on them: they "
                    f"may be inside the scope, which drops them. Nothing was changed. {self.unavailable}",
                    table=self.table, conflicts=tuple(names))
            inside = (listed & self.inside) | (set(self.classify(new)) if new and self.classify else set())
        return tuple(sorted(inside - have))

    def to_json(self) -> str:
        """What a staged swap journals of its scope: the scope, and for a predicate the partitions known
        outside it (the batch's and its drops are inside)."""
        if self.scope.predicate is not None:
            return json.dumps({"predicate": self.scope.predicate,
                               "outside": sorted(pn.partition_name(self.keys, v) for v in self.outside)})
        return json.dumps({"specs": [dict(s) for s in self.scope.specs]})

    @classmethod
    def from_json(cls, text: str, keys: Sequence[str], table: str, inside: Iterable[Values], *,
                  classify: Classify | None = None, unavailable: str = "") -> "ScopeDrops":
        """The scope a staged swap journaled (:meth:`to_json`); ``inside``: its batch's partitions and drops."""
        data = json.loads(text)
        keys = tuple(keys)
        if "predicate" in data:
            outside = frozenset(pn.values_for(keys, pn.parse_name(n)) for n in data.get("outside", ()))
            scope = ReplaceScope(predicate=str(data["predicate"]))
        else:
            outside = frozenset()
            scope = ReplaceScope(specs=tuple({str(k): str(v) for k, v in s.items()} for s in data["specs"]))
        return cls(scope, keys, table, frozenset(inside), outside, classify, unavailable)
