"""Hive partition names: escaping, unescaping and ``k=v/k2=v2`` specs (pure functions).

Hive and Spark escape the same characters in partition directory names and in the names the
metastore stores (``FileUtils.escapePathName`` / ``ExternalCatalogUtils.escapePathName``): control
characters (NUL included) and ``"#%'*/:=?\\^{[]`` and DEL become ``%XX``; nothing else (a space or
U+00A0 stays as it is, also at the end of a value). A null or empty value is stored as Hive's default
partition ``__HIVE_DEFAULT_PARTITION__``.

Names are parsed exactly: ``dt=a `` (trailing space) and ``dt=a`` are two partitions, and so they are
in the metastore on a backend that does not pad strings with blanks (PostgreSQL; Derby and MySQL compare
``'a '`` equal to ``'a'``).
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Iterable, Mapping, Sequence

from tableswap.errors import InvalidInputError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_ESCAPED = frozenset(
    [chr(c) for c in range(0x00, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^")
)
_UNESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")

# What the Hive Metastore schema can hold (PARTITION_KEY_VALS.PART_KEY_VAL, PARTITIONS.PART_NAME).
MAX_VALUE_LENGTH = 255
MAX_NAME_LENGTH = 767


def escape(value: str) -> str:
    """Escape one partition key or value the way Hive names directories and partitions."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def stored_value(value: object) -> str:
    """The string the metastore stores for a partition value (``None``/empty → default partition)."""
    if value is None:
        return DEFAULT_PARTITION
    text = str(value)
    return text if text else DEFAULT_PARTITION


_INTEGER_TYPES = ("tinyint", "smallint", "int", "integer", "bigint")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})")


def value_key(column_type: str, value: str | None) -> object:
    """What a stored partition value means for its column's Hive type, to tell two spellings of one value
    apart from two values: ``'01'`` and ``'1'`` of an INT are one value, ``'1.50'`` and ``'1.5'`` of a DECIMAL
    one, as are ``2026-6-1`` and ``2026-06-01`` of a DATE, ``TRUE`` and ``true`` of a BOOLEAN; ``None``,
    ``''`` and the default partition are the default partition (as Spark writes them). A value of another
    type, or one that does not parse as its type, is itself."""
    if value is None or value in ("", DEFAULT_PARTITION):
        return DEFAULT_PARTITION
    kind = column_type.strip().lower().split("(", 1)[0].strip()
    if kind in _INTEGER_TYPES and _INTEGER.fullmatch(value):
        return int(value)
    if kind in ("decimal", "numeric", "float", "double") and _NUMBER.fullmatch(value):
        try:
            return Decimal(value)  # equal (and of equal hash) for 1.50 and 1.5
        except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
            return value
    if kind == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "date":
        match = _DATE.fullmatch(value)
        if match:
            try:
                return dt.date(*(int(g) for g in match.groups()))
            except ValueError:
                return value
    return value


def one_spelling(column_type: str) -> bool:
    """True for a type whose every value has one stored spelling (the strings: ``string``, ``varchar(n)``,
    ``char(n)``), so that two partitions of different names hold different values."""
    return column_type.strip().lower().split("(", 1)[0].strip() in ("string", "varchar", "char")


def values_key(column_types: Sequence[str], values: Sequence[str]) -> tuple[object, ...]:
    """:func:`value_key` of each value of one partition (``column_types``: the partition columns' types)."""
    return tuple(value_key(t, v) for t, v in zip(column_types, values))


def partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """``dt=2026-06-03/country=DE``: the metastore's partition name (also the directory path)."""
    if len(keys) != len(values):
        raise InvalidInputError(
            f"partition has {len(values)} values but the table has {len(keys)} partition columns "
            f"({', '.join(keys)})"
        )
    return "/".join(f"{escape(k.lower())}={escape(v)}" for k, v in zip(keys, values))


def parse_name(name: str) -> dict[str, str]:
    """Parse ``a=1/b=x`` (escaped, as printed by tableswap and Hive) into an ordered mapping.

    Exact: no whitespace is stripped (a value may end in a space or U+00A0, and is then another
    partition than the one without it); only a leading or trailing ``/`` is ignored, which no escaped
    name contains."""
    result: dict[str, str] = {}
    for part in name.strip("/").split("/"):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise InvalidInputError(
                f"bad partition spec {name!r}: expected KEY=VALUE pairs joined by '/', "
                "for example dt=2026-06-03 or dt=2026-06-03/country=DE"
            )
        key = unescape(key).lower()
        if key in result:
            raise InvalidInputError(f"bad partition spec {name!r}: column {key!r} given twice")
        result[key] = unescape(value)
    return result


def is_partition_dir(name: str, key: str) -> bool:
    """True when the directory name ``name`` is ``<key>=<value>`` for the partition column ``key``
    (escaped as Hive names it; the column compared case-insensitively)."""
    escaped_key, sep, _ = name.partition("=")
    return bool(sep) and unescape(escaped_key).lower() == key.lower()


def is_hidden(name: str) -> bool:
    """A name Hadoop's committers and tableswap use for what is not table data (``_temporary``,
    ``_SUCCESS``, ``_tableswap``, ``.crc`` files, ...). A partition directory of a column whose name
    starts with ``_`` looks the same: test :func:`is_partition_dir` first."""
    return name.startswith(("_", "."))


def data_files_below(root_path: str, sizes: Mapping[str, int]) -> dict[str, int]:
    """The data files of one storage listing (file paths → bytes) below ``root_path``: those with no part of
    their path below it hidden (:func:`is_hidden`: committers' markers, ``_tableswap``, ``.crc``...)."""
    prefix = root_path.rstrip("/") + "/"
    return {name: size for name, size in sizes.items()
            if name.startswith(prefix) and not any(is_hidden(p) for p in name[len(prefix):].split("/"))}


def values_for(keys: Sequence[str], spec: Mapping[str, str]) -> tuple[str, ...]:
    """Order a parsed spec by the table's partition keys; every key must be given, no other."""
    lowered = [k.lower() for k in keys]
    missing = [k for k in lowered if k not in spec]
    extra = [k for k in spec if k not in lowered]
    if missing or extra:
        raise InvalidInputError(
            f"partition spec {'/'.join(f'{k}={v}' for k, v in spec.items())!r} does not match the "
            f"partition columns ({'/'.join(lowered)}): "
            + "; ".join(
                filter(None, [f"missing {missing}" if missing else "", f"unknown {extra}" if extra else ""])
            )
        )
    return tuple(spec[k] for k in lowered)


def check_storable(keys: Sequence[str], values: Sequence[str]) -> None:
    """Raise :class:`InvalidPartitionValueError` for a value the metastore cannot store."""
    from tableswap.errors import InvalidPartitionValueError

    for key, value in zip(keys, values):
        if len(value) > MAX_VALUE_LENGTH:
            raise InvalidPartitionValueError(
                f"partition value for {key!r} is {len(value)} characters long; the Hive Metastore "
                f"stores at most {MAX_VALUE_LENGTH} (value starts {value[:40]!r})"
            )
    name = partition_name(keys, values)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidPartitionValueError(
            f"partition name {name[:60]!r}... is {len(name)} characters long once escaped; "
            f"the Hive Metastore stores at most {MAX_NAME_LENGTH}"
        )


def names(keys: Sequence[str], values_list: Iterable[Sequence[str]]) -> list[str]:
    return [partition_name(keys, v) for v in values_list]
