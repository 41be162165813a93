"""Hostile names against the real metastore and Spark: a partition column starting with ``_``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tableswap import swap_partitions


pytestmark = [pytest.mark.integration, pytest.mark.hostile]


# ------------------------------------------------------------------ a partition column named _p


def _underscore_table(spark, db: str, root: Path) -> str:
    table = f"{db}.u"
    spark.sql(f"CREATE TABLE {table} (id bigint, value string, batch string, `_p` string) USING parquet "
              f"PARTITIONED BY (`_p`) LOCATION '{(root / 'u').as_uri()}'")
    return table


def _underscore_df(spark, rows: dict[str, int], batch: str):
    data = [(i, f"v{i}", batch, p) for p, n in rows.items() for i in range(n)]
    return spark.createDataFrame(data, "id bigint, value string, batch string, `_p` string")


def _underscore_view(spark, table: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    return {r["_p"]: (r["n"], tuple(r["b"])) for r in spark.sql(
        f"SELECT `_p`, count(*) AS n, sort_array(collect_set(batch)) AS b FROM {table} GROUP BY `_p`").collect()}


def test_a_partition_column_starting_with_underscore_swaps(spark, db, tmp_path, hms, ts_env):
    table = _underscore_table(spark, db, tmp_path)
    _underscore_df(spark, {"a": 2, "b": 2}, "old").write.insertInto(table)
    result = swap_partitions(_underscore_df(spark, {"b": 3, "c": 1}, "new"), table)
    assert sorted(c.partition for c in result.replaced) == ["_p=b"]
    assert sorted(c.partition for c in result.added) == ["_p=c"]
    # Spark reads such a table (its listing keeps `_key=value` directories), before and after the swap.
    assert _underscore_view(spark, table) == {"a": (2, ("old",)), "b": (3, ("new",)), "c": (1, ("new",))}


def test_replace_where_with_allow_empty_keeps_the_rows_of_an_underscore_column(spark, db, tmp_path, hms, ts_env):
    table = _underscore_table(spark, db, tmp_path)
    _underscore_df(spark, {"a": 2, "b": 2}, "old").write.insertInto(table)
    result = swap_partitions(_underscore_df(spark, {"a": 4}, "new"), table, replace_where=["_p=a", "_p=b"],
                             allow_empty=True)
    assert [c.partition for c in result.replaced] == ["_p=a"]
    assert [c.partition for c in result.dropped] == ["_p=b"]
    assert _underscore_view(spark, table) == {"a": (4, ("new",))}
