"""The eligibility rules (tableswap.core.eligibility): one rule for which tables swap, rollback and repair
may change, one for what the read path can read. Pure."""

from __future__ import annotations

import pytest

from tableswap import errors
from tableswap.core import eligibility
from tableswap.core.catalog import Column, TableInfo, stored_spark_schema

PARQUET = {"spark.sql.sources.provider": "parquet"}


def table(table_type="EXTERNAL_TABLE", **params) -> TableInfo:
    return TableInfo(db="d", name="t", table_type=table_type, location="file:/x", columns=(Column("id", "bigint"),),
                     partition_keys=(Column("dt", "string"),), parameters={**PARQUET, **params})


@pytest.mark.parametrize("done", ["swapped", "rolled back", "repaired"])
@pytest.mark.parametrize("info, message", [
    (table("MANAGED_TABLE"), "is a MANAGED table"),
    (table("VIRTUAL_VIEW"), "is a view; only EXTERNAL tables can be"),
    (table(**{"external.table.purge": "TRUE"}), "external.table.purge=true: the metastore deletes its files"),
    (table(**{"external.table.purge": " true ", "TRANSLATED_TO_EXTERNAL": "TRUE"}), "Hive 4 translated"),
])
def test_one_external_rule_for_every_operation_that_repoints(info, message, done):
    with pytest.raises(errors.UnsupportedTableError, match=message):
        eligibility.check_external(info, done=done)
    assert not info.is_plain_external


def test_a_plain_external_table_is_eligible():
    for info in (table(), table("MANAGED_TABLE", EXTERNAL="TRUE"), table(**{"external.table.purge": "false"})):
        assert info.is_plain_external
        eligibility.check_external(info)
        eligibility.check_target(info, partitioned=True)
        eligibility.check_readable(info)
    with pytest.raises(errors.PartitioningMismatchError, match="use swap_partitions"):
        eligibility.check_target(table(), partitioned=False)


def test_the_read_path_needs_a_readable_format_not_an_external_table():
    eligibility.check_readable(table("MANAGED_TABLE"))
    with pytest.raises(errors.UnsupportedTableError, match="stored as avro; tableswap reads parquet and orc"):
        eligibility.check_readable(table(**{"spark.sql.sources.provider": "avro"}))


def test_the_stored_spark_schema_is_read_without_spark():
    info = TableInfo(db="d", name="t", table_type="EXTERNAL_TABLE", location="file:/x",
                     columns=(Column("id", "bigint"), Column("tags", "array<string>"),
                              Column("attrs", "map<string,int>"), Column("p", "struct<x:double,n:smallint>"),
                              Column("code", "varchar(8)")),
                     partition_keys=(Column("dt", "string"),), parameters={})
    fields = [("id", "long", {}), ("tags", {"type": "array", "elementType": "string", "containsNull": True}, {}),
              ("attrs", {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": True}, {}),
              ("p", {"type": "struct", "fields": [{"name": "x", "type": "double", "nullable": True, "metadata": {}},
                                                  {"name": "n", "type": "short", "nullable": True, "metadata": {}}]}, {}),
              ("code", "string", {"__CHAR_VARCHAR_TYPE_STRING": "varchar(8)"}), ("dt", "string", {})]
    import json
    text = json.dumps({"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": m}
                                                    for n, t, m in fields]})
    schema = {"spark.sql.sources.schema": text}
    assert stored_spark_schema(TableInfo(**{**info.__dict__, "parameters": schema})) == json.loads(text)
    other = (Column("id", "int"), *info.columns[1:])  # the metastore says int: the stored schema is stale
    assert stored_spark_schema(TableInfo(**{**info.__dict__, "columns": other, "parameters": schema})) is None
    odd = {"spark.sql.sources.schema": text.replace('"long"', '{"type": "udt", "class": "X"}', 1)}
    assert stored_spark_schema(TableInfo(**{**info.__dict__, "parameters": odd})) is None
