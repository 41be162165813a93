"""A replaced partition's column list after a schema change, against the real metastore and SparkSession (and Glue on
moto's server): a swap that replaces a partition gives it the table's current columns, which its new files were
written with, as a new partition gets them; a rollback restores old files under the table's columns when they read
them (a column added since reads NULL) and refuses, nothing changed, when a column's type changed in a way the
readers cannot read the old files as.

Each partition's own column list is read back raw from the metastore (Hive's engine reads a partition through it:
HIVE-17460)."""

from __future__ import annotations

import pytest

from tableswap import errors, swap_partitions
from tableswap.metastore.client import parse_uri
from tableswap.ops.restore.repair import repair
from tableswap.ops.restore.rollback import rollback

from ..support.helpers import batch_df, create_events, raw_hms, reader_view, today
from .test_glue_swaps import create_glue_table, partitions
from .test_schema import raw_table

pytestmark = pytest.mark.integration


def partition_columns(metastore_uri: str, db: str, table: str) -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """Each partition's own column list (name, type), as the metastore stores it."""
    host, port = parse_uri(metastore_uri)
    with raw_hms(port, host) as client:
        names = client.get_partition_names(db, table, -1)
        parts = client.get_partitions_by_names(db, table, names)
    return {tuple(p.values): [(c.name, c.type) for c in p.sd.cols] for p in parts}


def partition_parameters(metastore_uri: str, db: str, table: str) -> dict[tuple[str, ...], dict[str, str]]:
    host, port = parse_uri(metastore_uri)
    with raw_hms(port, host) as client:
        names = client.get_partition_names(db, table, -1)
        return {tuple(p.values): dict(p.parameters) for p in client.get_partitions_by_names(db, table, names)}


OLD = [("id", "bigint"), ("value", "string"), ("batch", "string")]
NEW = OLD + [("extra", "string")]


def test_a_replaced_partition_gets_the_columns_added_since_and_a_rollback_keeps_them(spark, db, tmp_path, hms,
                                                                                    metastore_uri, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    assert partition_columns(metastore_uri, db, "events") == {(today(0),): OLD, (today(1),): OLD}
    spark.sql(f"ALTER TABLE {table} ADD COLUMNS (extra STRING)")

    batch = batch_df(spark, {(today(0),): 2, (today(2),): 1}, "new").selectExpr("*", "'x' AS extra")
    result = swap_partitions(batch.select("id", "value", "batch", "extra", "dt"), table)
    assert [c.partition for c in result.replaced] == [f"dt={today(0)}"]
    columns = partition_columns(metastore_uri, db, "events")
    # The replaced partition as the added one: the table's columns; the untouched one keeps its own.
    assert columns == {(today(0),): NEW, (today(1),): OLD, (today(2),): NEW}
    params = partition_parameters(metastore_uri, db, "events")[(today(0),)]
    assert params["numFiles"] == str(len(list((tmp_path / "events" / "_tableswap" / result.swap_id /
                                              f"dt={today(0)}").glob("part-*"))))
    assert spark.sql(f"SELECT DISTINCT extra FROM {table} WHERE dt = '{today(0)}'").collect()[0][0] == "x"

    # The rollback points day 0 back at files without `extra`: readable under the table's columns (NULL).
    rollback(table)
    assert partition_columns(metastore_uri, db, "events")[(today(0),)] == NEW
    assert reader_view(spark, table) == {(today(0),): (3, ("old",)), (today(1),): (3, ("old",))}
    assert spark.sql(f"SELECT count(*) FROM {table} WHERE dt = '{today(0)}' AND extra IS NULL").collect()[0][0] == 3


def test_a_rollback_to_files_whose_column_type_readers_cannot_read_is_refused(spark, db, tmp_path, hms,
                                                                             metastore_uri, ts_env):
    spark.sql(f"CREATE EXTERNAL TABLE {db}.counts (id bigint, n int) PARTITIONED BY (dt string) STORED AS PARQUET "
              f"LOCATION '{(tmp_path / 'counts').as_uri()}'")
    table = f"{db}.counts"
    first = swap_partitions(spark.createDataFrame([(1, 7, today(0))], "id bigint, n int, dt string"), table)
    # Another tool changes n's type to string (Hive allows int -> string); Spark's Parquet reader cannot read the
    # INT32 files written before as a string column.
    with raw_table(metastore_uri, db, "counts") as raw:
        raw.sd.cols = [c if c.name != "n" else type(c)(name="n", type="string", comment=c.comment)
                       for c in raw.sd.cols]
        raw.parameters = {k: v for k, v in raw.parameters.items() if not k.startswith("spark.sql.")}
    spark.catalog.refreshTable(table)
    second = swap_partitions(spark.createDataFrame([(2, "eight", today(0))], "id bigint, n string, dt string"),
                             table)
    assert partition_columns(metastore_uri, db, "counts")[(today(0),)] == [("id", "bigint"), ("n", "string")]
    before = hms.get_partitions(hms.get_table(db, "counts"), [(today(0),)])
    with pytest.raises(errors.SchemaMismatchError) as info:
        rollback(table)
    text = str(info.value)
    assert "n" in text and "int" in text and "string" in text and "Nothing was changed" in text
    assert hms.get_partitions(hms.get_table(db, "counts"), [(today(0),)]) == before
    assert first.swap_id != second.swap_id


def test_a_repair_to_files_whose_column_type_readers_cannot_read_is_refused(spark, db, tmp_path, hms, ts_env):
    """A re-deploy drops the table's entry and creates it again with a column's type changed (n int -> string);
    `repair` would point the new entry's partitions at files written with the old type, which Spark's Parquet
    reader cannot read as the new one: refused like a rollback to them, nothing changed, the dry run says so too."""
    location = (tmp_path / "counts").as_uri()
    spark.sql(f"CREATE EXTERNAL TABLE {db}.counts (id bigint, n int) PARTITIONED BY (dt string) STORED AS PARQUET "
              f"LOCATION '{location}'")
    table = f"{db}.counts"
    swap_partitions(spark.createDataFrame([(1, 7, today(0))], "id bigint, n int, dt string"), table)
    spark.sql(f"DROP TABLE {table}")  # EXTERNAL: the files stay
    spark.sql(f"CREATE EXTERNAL TABLE {table} (id bigint, n string) PARTITIONED BY (dt string) STORED AS PARQUET "
              f"LOCATION '{location}'")
    assert hms.partition_names(db, "counts") == []

    for dry_run in (True, False):
        with pytest.raises(errors.SchemaMismatchError) as info:
            repair(table, dry_run=dry_run)
        text = str(info.value)
        assert "n (written as int, the table now says string)" in text and "Nothing was changed" in text, text
    assert hms.partition_names(db, "counts") == []


@pytest.mark.glue
def test_on_glue_a_replaced_partition_gets_the_tables_columns(spark, glue, gdb, root, glue_env):
    table = create_glue_table(glue, gdb, f"{root}/events")
    swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old"), table)
    info = glue.get_table(DatabaseName=gdb, Name="events")["Table"]
    sd = dict(info["StorageDescriptor"], Columns=info["StorageDescriptor"]["Columns"] + [{"Name": "extra",
                                                                                            "Type": "string"}])
    glue.update_table(DatabaseName=gdb, TableInput={"Name": "events", "TableType": info["TableType"],
                                                    "StorageDescriptor": sd, "PartitionKeys": info["PartitionKeys"],
                                                    "Parameters": info.get("Parameters") or {}})
    batch = batch_df(spark, {(today(0),): 3}, "new").selectExpr("id", "value", "batch", "'x' AS extra", "dt")
    result = swap_partitions(batch, table)
    assert [c.partition for c in result.replaced] == [f"dt={today(0)}"]
    parts = partitions(glue, gdb)
    names = {v: [c["Name"] for c in p["StorageDescriptor"]["Columns"]] for v, p in parts.items()}
    assert names == {(today(0),): ["id", "value", "batch", "extra"], (today(1),): ["id", "value", "batch"]}
    assert int(parts[(today(0),)]["Parameters"]["numFiles"]) >= 1  # the new files' statistics, as before
