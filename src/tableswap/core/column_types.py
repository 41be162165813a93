"""Which data files the table's columns read (pure): a restore points partitions back at files written with the
columns of their time, under the table's columns of now.

A column added since reads NULL, a column dropped since is not read; a column whose type changed is read only
when every reader converts the old type to the new one: the widenings Spark's Parquet and ORC readers, Trino's
Hive connector and Hive itself all perform (a wider integer, ``float`` to ``double``, a wider ``decimal``,
``char``/``varchar`` to ``string`` or a longer ``varchar``). Anything else (``int`` to ``string``, ``string`` to
``int``, a narrower type) is refused by :func:`unreadable`: Spark's Parquet reader fails on it
(``Parquet column cannot be converted``), Trino refuses a partition it cannot coerce.

A swap records the table's columns with its intent (:func:`to_json`): the columns its new files carry.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Sequence

from tableswap.core.catalog import Column

_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_VARCHAR = re.compile(r"^varchar\((\d+)\)$")
_CHAR = re.compile(r"^char\((\d+)\)$")


def to_json(columns: Iterable[Column]) -> str:
    """``[[name, type], ...]``: what a swap records of the columns its files carry."""
    return json.dumps([[c.name, c.type] for c in columns])


def from_json(text: str | None) -> tuple[Column, ...] | None:
    """The columns :func:`to_json` recorded; None for none (a record from before they were recorded)."""
    if not text:
        return None
    return tuple(Column(str(name).lower(), str(kind).lower()) for name, kind in json.loads(text))


def _normal(kind: str) -> str:
    kind = re.sub(r"\s+", "", kind.lower())
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float",
            "decimal": "decimal(10,0)"}.get(kind, kind)


def readable_as(old: str, new: str) -> bool:
    """Do the readers read a column written as ``old`` when the table says ``new``?"""
    old, new = _normal(old), _normal(new)
    if old == new:
        return True
    if old in _INTEGERS and new in _INTEGERS:
        return _INTEGERS.index(old) <= _INTEGERS.index(new)
    if (old, new) == ("float", "double"):
        return True
    old_dec, new_dec = _DECIMAL.match(old), _DECIMAL.match(new)
    if old_dec and new_dec:
        (p1, s1), (p2, s2) = map(int, old_dec.groups()), map(int, new_dec.groups())
        return s2 >= s1 and p2 - s2 >= p1 - s1
    old_len = _VARCHAR.match(old) or _CHAR.match(old)
    if old_len and new == "string":
        return True
    new_var = _VARCHAR.match(new)
    if old_len and new_var:
        return int(new_var.group(1)) >= int(old_len.group(1))
    return False


def unreadable(written: Sequence[Column], now: Sequence[Column]) -> list[str]:
    """The columns of ``written`` (the files' columns) that the table's columns ``now`` do not read, each as
    ``name (written as OLD, the table now says NEW)``; empty when the files read under ``now``."""
    table = {c.name.lower(): c.type for c in now}
    out = []
    for column in written:
        kind = table.get(column.name.lower())
        if kind is not None and not readable_as(column.type, kind):
            out.append(f"{column.name} (written as {column.type}, the table now says {kind})")
    return out
