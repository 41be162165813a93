"""Evaluating a ``replace_where`` predicate with Spark itself: partition values, cast to the
partition columns' types, in a small DataFrame filtered with the expression. The predicate then
means exactly what it means in a Spark SQL query (types, casts, functions, NULL for Hive's default
partition)."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from tableswap import errors
from tableswap.core import partitions as pn

_INDEX = "__tableswap_row"
_UNRESOLVED = re.compile(r"name `([^`]+)` cannot be resolved|cannot resolve '`?([^`' ]+)`?'", re.I)


def _types(schema: Any, keys: Sequence[str]) -> dict[str, str]:
    by_name = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    return {k: by_name[k] for k in keys}


def _frame(spark: Any, keys: Sequence[str], types: dict[str, str], rows: list[tuple]) -> Any:
    """A DataFrame ``(row index, partition columns...)`` with the columns of the partition types."""
    raw = spark.createDataFrame(rows, ", ".join([f"`{_INDEX}` int", *(f"`{k}` string" for k in keys)]))
    return raw.selectExpr(f"`{_INDEX}`", *(f"TRY_CAST(`{k}` AS {types[k]}) AS `{k}`" for k in keys))


def check_predicate(spark: Any, schema: Any, keys: Sequence[str], predicate: str, table: str) -> None:
    """Refuse, before anything is written, a predicate that does not parse, is not a boolean
    condition, or uses a column that is not a partition column."""
    types = _types(schema, keys)
    try:
        filtered = _frame(spark, keys, types, []).filter(predicate)
        _ = filtered.schema  # analysis (eager on classic, one RPC on Spark Connect)
        _ = filtered.columns
    except Exception as exc:  # noqa: BLE001 - ParseException, AnalysisException, Connect's variants
        text = str(exc)
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
        match = _UNRESOLVED.search(text)
        name = (match.group(1) or match.group(2)) if match else None
        data_columns = {f.name.lower() for f in schema.fields} - set(keys)
        if name is not None and name.strip("`").lower() in data_columns:
            raise errors.InvalidInputError(
                f"replace_where ({predicate}) uses {name.strip('`')!r}, which is not a partition column of "
                f"{table}; the scope may name only the partition columns ({', '.join(keys)}). Nothing was changed",
                table=table) from None
        raise errors.InvalidInputError(
            f"replace_where ({predicate}) is not a valid Spark SQL condition on the partition columns "
            f"({', '.join(keys)}) of {table}: {first[:500]}. Nothing was changed", table=table) from None


def inside(spark: Any, schema: Any, keys: Sequence[str], predicate: str,
           values_list: Iterable[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Those of ``values_list`` (stored partition values) for which ``predicate`` is true."""
    values = sorted(set(values_list))
    if not values:
        return set()
    rows = [(i, *(None if v == pn.DEFAULT_PARTITION else v for v in vs)) for i, vs in enumerate(values)]
    kept = _frame(spark, keys, _types(schema, keys), rows).filter(predicate).select(f"`{_INDEX}`").collect()
    return {values[r[0]] for r in kept}
