"""The target's schema as a swap sees it: read from the metastore when Spark stored it there, from
Spark otherwise; and the batch aligned to it (by name, case-insensitive, lossless widenings)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tableswap.spark import reading, staging
from tableswap import swap_partitions
from tableswap.metastore.client import parse_uri
from tableswap.core.catalog import Column, TableInfo

from ..support.helpers import raw_hms

SCHEMA = StructType([
    StructField("id", LongType()),
    StructField("name", StringType(), metadata={"__CHAR_VARCHAR_TYPE_STRING": "varchar(10)"}),
    StructField("dt", StringType()),
])


def table_info(params: dict[str, str], columns=(("id", "bigint"), ("name", "varchar(10)"))) -> TableInfo:
    return TableInfo(db="d", name="t", table_type="EXTERNAL_TABLE", location="file:/x",
                     columns=tuple(Column(n, t) for n, t in columns), partition_keys=(Column("dt", "string"),),
                     parameters=params)


def names_and_types(schema) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def test_stored_schema_read_whole_or_in_parts():
    text = SCHEMA.json()
    assert reading.stored_schema(table_info({"spark.sql.sources.schema": text})) == SCHEMA
    parts = {"spark.sql.sources.schema.numParts": "3", "spark.sql.sources.schema.part.0": text[:10],
             "spark.sql.sources.schema.part.1": text[10:30], "spark.sql.sources.schema.part.2": text[30:]}
    assert reading.stored_schema(table_info(parts)) == SCHEMA


@pytest.mark.parametrize("params, columns", [
    ({}, None),                                                             # not created by Spark
    ({"spark.sql.sources.schema": "{not json"}, None),                      # unreadable
    ({"spark.sql.sources.schema.numParts": "2", "spark.sql.sources.schema.part.0": "{"}, None),  # a part missing
    ({"spark.sql.sources.schema": SCHEMA.json()}, (("id", "bigint"), ("name", "varchar(10)"), ("x", "int"))),
    ({"spark.sql.sources.schema": SCHEMA.json()}, (("id", "int"), ("name", "varchar(10)"))),   # type changed
    ({"spark.sql.sources.schema": SCHEMA.json()}, (("ident", "bigint"), ("name", "varchar(10)"))),  # renamed
    ({"spark.sql.sources.schema": SCHEMA.json()}, (("col", "array<string>"),)),  # not Hive-compatible
])
def test_stored_schema_is_not_used_when_absent_unreadable_or_out_of_step(params, columns):
    info = table_info(params) if columns is None else table_info(params, columns)
    assert reading.stored_schema(info) is None


@pytest.mark.parametrize("hive_format", [False, True], ids=["datasource", "hive-serde"])
def test_stored_schema_is_what_spark_resolves_for_tables_spark_created(spark, db, tmp_path, hms, hive_format):
    cols = ("id bigint, amount decimal(12,3), tags array<string>, attrs map<string,int>, "
            "point struct<x:double,y:double>, code varchar(8), flag boolean, born date, seen timestamp, "
            "small smallint, tiny tinyint, ratio float, raw binary")
    where = (tmp_path / "wide").as_uri()
    if hive_format:
        spark.sql(f"CREATE EXTERNAL TABLE {db}.wide ({cols}) PARTITIONED BY (dt string) STORED AS PARQUET "
                  f"LOCATION '{where}'")
    else:
        spark.sql(f"CREATE TABLE {db}.wide ({cols}, dt string) USING parquet PARTITIONED BY (dt) LOCATION '{where}'")
    stored = reading.stored_schema(hms.get_table(db, "wide"))
    assert stored is not None
    assert names_and_types(stored) == names_and_types(spark.table(f"{db}.wide").schema)
    # After a column is added through Spark, the stored schema follows.
    spark.sql(f"ALTER TABLE {db}.wide ADD COLUMNS (extra int)")
    after = reading.stored_schema(hms.get_table(db, "wide"))
    assert after is not None and names_and_types(after) == names_and_types(spark.table(f"{db}.wide").schema)
    assert "extra" in [f.name for f in after.fields]


def test_batch_with_other_case_order_and_a_widening_is_aligned(spark, db, tmp_path, hms, ts_env):
    spark.sql(f"CREATE TABLE {db}.t (id bigint, value string, dt string) USING parquet PARTITIONED BY (dt) "
              f"LOCATION '{(tmp_path / 't').as_uri()}'")
    df = spark.createDataFrame([("a", "2024-01-01", 1), ("b", "2024-01-01", 2)], "VALUE string, Dt string, ID int")
    result = swap_partitions(df, f"{db}.t")
    assert [c.partition for c in result.added] == ["dt=2024-01-01"]
    rows = sorted((r.id, r.value, r.dt) for r in spark.table(f"{db}.t").collect())
    assert rows == [(1, "a", "2024-01-01"), (2, "b", "2024-01-01")]
    assert dict(spark.table(f"{db}.t").dtypes)["id"] == "bigint"


def test_a_batch_already_in_the_target_layout_is_written_as_it_is(spark):
    df = spark.createDataFrame([(1, "a", "x")], "id bigint, name string, dt string")
    assert staging.align(df, SCHEMA, ("dt",)) is df
    reordered = spark.createDataFrame([("a", 1, "x")], "name string, id bigint, dt string")
    aligned = staging.align(reordered, SCHEMA, ("dt",))
    assert aligned is not reordered and aligned.columns == ["id", "name", "dt"]


@contextlib.contextmanager
def raw_table(metastore_uri: str, db: str, name: str) -> Iterator[object]:
    """The table's raw Thrift object, altered in the metastore on exit: what another tool (Hive,
    a migration script) does behind Spark's back. Raw Thrift only in tests, never in the library."""
    host, port = parse_uri(metastore_uri)
    with raw_hms(port, host) as client:
        from hmsclient.genthrift.hive_metastore import ttypes

        # The request variant: HMS 4 removed get_table.
        table = client.get_table_req(ttypes.GetTableRequest(dbName=db, tblName=name)).table
        yield table
        client.alter_table(db, name, table)


def create_hive_table(spark, db: str, tmp_path, name: str) -> str:
    spark.sql(f"CREATE EXTERNAL TABLE {db}.{name} (id bigint, value string) PARTITIONED BY (dt string) "
              f"STORED AS PARQUET LOCATION '{(tmp_path / name).as_uri()}'")
    return f"{db}.{name}"


def test_a_table_without_a_stored_spark_schema_is_resolved_by_spark(spark, db, tmp_path, hms, metastore_uri, ts_env):
    """As for a table created by Hive itself: no Spark schema among its parameters."""
    table = create_hive_table(spark, db, tmp_path, "bare")
    with raw_table(metastore_uri, db, "bare") as raw:
        raw.parameters = {k: v for k, v in raw.parameters.items() if not k.startswith("spark.sql.")}
    info = hms.get_table(db, "bare")
    assert not any(k.startswith("spark.sql.sources.schema") for k in info.parameters)
    assert reading.stored_schema(info) is None
    spark.catalog.refreshTable(table)
    df = spark.createDataFrame([("v", 7, "2024-01-02")], "value string, id bigint, dt string")
    swap_partitions(df, table)
    assert sorted(tuple(r) for r in spark.table(table).collect()) == [(7, "v", "2024-01-02")]


def test_columns_added_behind_sparks_back_are_seen(spark, db, tmp_path, hms, metastore_uri, ts_env):
    """The stored Spark schema is stale once another tool adds a column: Spark then reads the
    metastore's columns, and so does the swap (a batch with the new column is accepted)."""
    table = create_hive_table(spark, db, tmp_path, "grown")
    from hmsclient.genthrift.hive_metastore import ttypes

    with raw_table(metastore_uri, db, "grown") as raw:
        raw.sd.cols.append(ttypes.FieldSchema(name="extra", type="int"))
    info = hms.get_table(db, "grown")
    assert "extra" in [c.name for c in info.columns] and "extra" not in info.parameters["spark.sql.sources.schema"]
    assert reading.stored_schema(info) is None
    spark.catalog.refreshTable(table)
    df = spark.createDataFrame([(7, "v", 3, "2024-01-02")], "id bigint, value string, extra int, dt string")
    swap_partitions(df, table)
    assert sorted(tuple(r) for r in spark.table(table).collect()) == [(7, "v", 3, "2024-01-02")]
