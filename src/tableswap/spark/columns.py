"""A DataFrame's columns matched by name to a table's, with the lossless widenings Spark performs exactly:
shared by the swap's alignment (:func:`tableswap.spark.staging.align`) and a merge's updates."""

from __future__ import annotations

from typing import Any

from tableswap.spark import api as sparkapi

# Lossless widenings Spark performs exactly (target type <- allowed source types).
_WIDENINGS = {
    "smallint": {"tinyint"},
    "int": {"tinyint", "smallint"},
    "bigint": {"tinyint", "smallint", "int"},
    "double": {"float", "tinyint", "smallint", "int"},
    "float": {"tinyint", "smallint"},
}


def matched_columns(df: Any, target: list[tuple[str, Any]], problems: list[str], *, what: str) -> list[Any]:
    """The columns of ``df`` named as ``target``'s (``(lower-case name, Spark type)`` in the table's order,
    matched case-insensitively), each as it is or cast by a lossless widening; a column of another type is
    a line added to ``problems`` (``what`` names ``df`` in it), a missing one is left out."""
    source = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for name, dtype in target:
        field = source.get(name)
        if field is None:
            continue
        have, want = field.dataType.simpleString(), dtype.simpleString()
        if have == want:
            columns.append(sparkapi.column(df, field.name).alias(name))
        elif have == "void" or have in _WIDENINGS.get(want, ()):
            columns.append(sparkapi.column(df, field.name).cast(dtype).alias(name))
        else:
            problems.append(f"column {name!r} is {have} in {what} but {want} in the table")
    return columns
