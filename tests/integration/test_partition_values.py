"""Formats, multi-column partitioning, typed and escaped partition values."""

from __future__ import annotations

import datetime as dt

import pytest

from tableswap import swap_partitions
from tableswap.core import partitions as pn
from tableswap.errors import InvalidPartitionValueError

from ..conftest import selected_metastore_db
from ..support.helpers import batch_df, create_events, reader_view

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fmt,hive_format", [("parquet", False), ("orc", False), ("parquet", True), ("orc", True)],
                         ids=["using-parquet", "using-orc", "stored-as-parquet", "stored-as-orc"])
def test_formats_single_column(spark, db, tmp_path, hms, ts_env, fmt, hive_format):
    table = create_events(spark, db, tmp_path, fmt=fmt, hive_format=hive_format)
    batch_df(spark, {("2026-01-01",): 2, ("2026-01-02",): 2}, "old").write.insertInto(table)
    result = swap_partitions(batch_df(spark, {("2026-01-02",): 5, ("2026-01-03",): 1}, "new"), table)
    assert (len(result.added), len(result.replaced)) == (1, 1)
    assert reader_view(spark, table) == {
        ("2026-01-01",): (2, ("old",)), ("2026-01-02",): (5, ("new",)), ("2026-01-03",): (1, ("new",)),
    }


def test_multi_column_and_values_that_need_escaping(spark, db, tmp_path, hms, ts_env):
    cols = ("dt", "country")
    table = create_events(spark, db, tmp_path, partition_cols=cols)
    batch_df(spark, {("2026-01-01", "DE"): 2, ("2026-01-01", "a b"): 2}, "old", cols).write.insertInto(table)
    tricky = ["a b", "x/y", "k=v", "100%", "Zürich", "日本", "new\nline", "../up", "..", None]
    if selected_metastore_db() == "mysql":
        # Hive's MySQL schema keeps partition names in latin1 (docs/metastores.md): a value outside it is a
        # clear error and nothing changes; every other value swaps as everywhere.
        before = reader_view(spark, table, cols)
        with pytest.raises(InvalidPartitionValueError, match=r"latin1.*'日本'.*Illegal mix of collations"):
            swap_partitions(batch_df(spark, {("2026-01-01", v): 3 for v in tricky}, "new", cols), table)
        assert reader_view(spark, table, cols) == before
        tricky.remove("日本")
    result = swap_partitions(batch_df(spark, {("2026-01-01", v): 3 for v in tricky}, "new", cols), table)
    assert {c.partition for c in result.replaced} == {"dt=2026-01-01/country=a b"}
    assert len(result.added) == len(tricky) - 1
    assert "dt=2026-01-01/country=x%2Fy" in {c.partition for c in result.added}
    assert f"dt=2026-01-01/country={pn.DEFAULT_PARTITION}" in {c.partition for c in result.added}
    view = reader_view(spark, table, cols)
    assert view[("2026-01-01", "DE")] == (2, ("old",))
    for v in tricky:
        assert view[("2026-01-01", v)] == (3, ("new",)), v
    # Rerun of the same batch: identical reader view.
    swap_partitions(batch_df(spark, {("2026-01-01", v): 3 for v in tricky}, "new", cols), table)
    assert reader_view(spark, table, cols) == view


def test_int_and_date_partition_columns(spark, db, tmp_path, hms, ts_env):
    table = f"{db}.typed"
    spark.sql(f"CREATE TABLE {table} (id bigint, value string, batch string, day date, hour int) USING parquet "
              f"PARTITIONED BY (day, hour) LOCATION '{(tmp_path / 'typed').as_uri()}'")
    d = dt.date(2026, 3, 1)
    rows = lambda batch, hours: spark.createDataFrame(  # noqa: E731
        [(i, "v", batch, d, h) for h in hours for i in range(2)],
        "id bigint, value string, batch string, day date, hour int")
    rows("old", [0, 1, 2]).write.insertInto(table)
    result = swap_partitions(rows("new", [2, 3]), table)
    assert {c.partition for c in result.replaced} == {"day=2026-03-01/hour=2"}
    assert {c.partition for c in result.added} == {"day=2026-03-01/hour=3"}
    got = {(r.hour, r.batch): r.n for r in spark.sql(
        f"SELECT hour, batch, count(*) n FROM {table} WHERE day = DATE'2026-03-01' GROUP BY hour, batch").collect()}
    assert got == {(0, "old"): 2, (1, "old"): 2, (2, "new"): 2, (3, "new"): 2}
