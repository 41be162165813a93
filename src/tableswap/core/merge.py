"""``merge_partitions``, pure parts: what a merge is asked to do (:class:`MergeSpec`) and how it reports
duplicate keys. The merge itself (Spark) is :mod:`tableswap.spark.merging`; its swap is
:mod:`tableswap.ops.write.merge`.

A merge reads the partitions the updates touch, and builds each one's new rows:

* an existing row whose key (the ``on`` columns, NULL equal to NULL) matches an update is replaced by the
  update (``when_matched="update"``) or kept (``"ignore"``), and dropped when ``delete_when`` holds on
  the update;
* an update that matches no existing row is inserted (``when_not_matched="insert"``) or left out
  (``"ignore"``); never when ``delete_when`` holds on it (a delete of a row that is not there);
* every other existing row is kept.

Rows are matched within the partitions the updates touch: a key that also occurs in a partition the
updates do not touch is not matched there (keep the partition columns in ``on``, or keys within one
partition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from tableswap.core import partitions as pn
from tableswap.errors import InvalidInputError, UnsupportedTableError

WHEN_MATCHED = ("update", "ignore")
WHEN_NOT_MATCHED = ("insert", "ignore")
#: Duplicate keys named in the error (of how many were found).
SHOWN_KEYS = 5


@dataclass(frozen=True)
class MergeSpec:
    """A merge's validated options: ``on`` lowered to the table's column names."""

    on: tuple[str, ...]
    when_matched: str = "update"
    when_not_matched: str = "insert"
    delete_when: str | None = None

    @property
    def replaces_matched(self) -> bool:
        return self.when_matched == "update"

    @property
    def inserts(self) -> bool:
        return self.when_not_matched == "insert"


def merge_spec(on: Any, columns: Sequence[str], *, when_matched: Any, when_not_matched: Any,
               delete_when: Any, table: str) -> MergeSpec:
    """Check a merge's options against the table's columns (data and partition columns, lower case);
    :class:`InvalidInputError` naming what is wrong, before anything is read or written."""
    if isinstance(on, str):
        on = [on]
    if not isinstance(on, (list, tuple)) or not on or not all(isinstance(c, str) and c.strip() for c in on):
        raise InvalidInputError(
            f"merge into {table}: on= must be a non-empty list of column names, got {on!r}; nothing was changed",
            table=table)
    lowered = [c.strip().lower() for c in on]
    unknown = [c for c in lowered if c not in columns]
    if unknown:
        raise InvalidInputError(
            f"merge into {table}: on= names {', '.join(map(repr, unknown))}, not column(s) of the table "
            f"({', '.join(columns)}); nothing was changed", table=table)
    if len(set(lowered)) != len(lowered):
        raise InvalidInputError(f"merge into {table}: on= names a column twice ({on!r}); nothing was changed",
                                table=table)
    if when_matched not in WHEN_MATCHED:
        raise InvalidInputError(
            f"merge into {table}: when_matched={when_matched!r}, expected one of {', '.join(WHEN_MATCHED)}; "
            "nothing was changed", table=table)
    if when_not_matched not in WHEN_NOT_MATCHED:
        raise InvalidInputError(
            f"merge into {table}: when_not_matched={when_not_matched!r}, expected one of "
            f"{', '.join(WHEN_NOT_MATCHED)}; nothing was changed", table=table)
    if delete_when is not None and (not isinstance(delete_when, str) or not delete_when.strip()):
        raise InvalidInputError(
            f"merge into {table}: delete_when must be a Spark SQL condition on the update's columns (a string), "
            f"got {delete_when!r}; nothing was changed", table=table)
    return MergeSpec(tuple(lowered), when_matched, when_not_matched,
                     delete_when.strip() if isinstance(delete_when, str) else None)


def describe_key(on: Sequence[str], values: Sequence[Any]) -> str:
    """One key as ``id=7, country='DE'`` (``repr`` of each value: a string stays quoted, NULL is None)."""
    return ", ".join(f"{c}={v!r}" for c, v in zip(on, values))


def same_value_groups(keys: Sequence[str], column_types: Sequence[str],
                      stored: Iterable[Sequence[str]]) -> list[tuple[tuple[str, ...], ...]]:
    """The stored partitions that hold the same values for their columns' types under different spellings
    (``hour=01`` and ``hour=1`` of an INT, :func:`~tableswap.core.partitions.value_key`), grouped."""
    groups: dict[tuple[object, ...], list[tuple[str, ...]]] = {}
    for values in stored:
        groups.setdefault(pn.values_key(column_types, values), []).append(tuple(values))
    return [tuple(sorted(g)) for g in groups.values() if len(g) > 1]


def refuse_same_values(table: str, keys: Sequence[str], groups: Sequence[Sequence[Sequence[str]]],
                       what: str) -> None:
    """:class:`UnsupportedTableError` naming stored partitions that hold the same values (``groups``), when
    there are any: Spark reads them as one partition, so which of them a ``what`` would replace is not
    defined."""
    if not groups:
        return
    shown = "; ".join(" and ".join(pn.partition_name(keys, v) for v in g) for g in groups[:SHOWN_KEYS])
    raise UnsupportedTableError(
        f"{table} has partitions that hold the same values under different spellings ({shown}): Spark reads "
        f"each group as one partition, so which one the {what} would replace is not defined. Nothing was "
        "changed; move the rows of one of them into the other and drop it, then rerun", table=table)


def stored_spellings(table: str, keys: Sequence[str], column_types: Sequence[str],
                     wanted: Iterable[Sequence[str]], stored: Iterable[Sequence[str]],
                     what: str) -> dict[tuple[str, ...], tuple[str, ...]]:
    """For each partition of ``wanted`` (its values as Spark spells them) the partition of ``stored`` that
    holds the same values for the columns' types, where there is one (itself when it is spelled the same).
    :class:`UnsupportedTableError` when more than one does (:func:`refuse_same_values`)."""
    by_key: dict[tuple[object, ...], list[tuple[str, ...]]] = {}
    for values in stored:
        by_key.setdefault(pn.values_key(column_types, values), []).append(tuple(values))
    out: dict[tuple[str, ...], tuple[str, ...]] = {}
    ambiguous = []
    for values in wanted:
        found = by_key.get(pn.values_key(column_types, values), [])
        if len(found) > 1:
            ambiguous.append(tuple(sorted(found)))
        elif found:
            out[tuple(values)] = found[0]
    refuse_same_values(table, keys, sorted(set(ambiguous)), what)
    return out


def respelled(column_types: Sequence[str],
              stored: Iterable[Sequence[str]]) -> Callable[[tuple[str, ...]], tuple[str, ...]]:
    """A partition's values as Spark spelled them → the partition of ``stored`` (the partitions read, each
    of its own value) holding the same values for the columns' types, or the values as they are when none
    does (a new partition)."""
    by_key = {pn.values_key(column_types, values): tuple(values) for values in stored}

    def stored_as(values: tuple[str, ...]) -> tuple[str, ...]:
        return by_key.get(pn.values_key(column_types, values), tuple(values))

    return stored_as
