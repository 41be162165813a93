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
from typing import Any, Sequence

from tableswap.errors import InvalidInputError

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
