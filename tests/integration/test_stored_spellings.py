"""Merge and compaction replace the partitions as the metastore stores them, whatever Spark calls them.

Hive keeps a partition value as it was given (``ADD PARTITION (hour='01')`` of an INT column, ``1.50`` of a
DECIMAL(5,1)); Spark reads it as its type (``1``, ``1.5``) and names the directories it writes by that. A merge
or compaction of such a partition must read it and replace it (same stored values), never add a second
partition of the same value beside it. An update whose partition value is ``''`` belongs to Hive's default
partition, as Spark writes it. On the real metastore and Spark."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tableswap import compact_partitions, merge_partitions
from tableswap.core.catalog import NewPartition

from ..support.helpers import create_events, spark_conf

pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

TARGET = 64 * 1024


def add_stored_partition(spark, hms, db: str, name: str, values: tuple[str, ...], location, df, files: int = 1):
    """Partition ``values`` (spelled as given, as Hive's ``ADD PARTITION`` keeps them) of ``db.name`` at
    ``location``, holding ``df`` (the data columns) in ``files`` Parquet files."""
    with spark_conf(spark, {"spark.sql.files.maxRecordsPerFile": str(max(1, df.count() // files))}):
        df.coalesce(1).write.parquet(location.as_uri())
    hms.add_partitions(hms.get_table(db, name), [NewPartition(values, location.as_uri())], {})
    spark.catalog.refreshTable(f"{db}.{name}")


def stored_values(hms, db: str, name: str) -> list[tuple[str, ...]]:
    return sorted(p.values for p in hms.list_partitions(db, name))


def data(spark, ids, value: str = "v"):
    return spark.createDataFrame([(i, f"{value}{i}", "init") for i in ids], "id bigint, value string, batch string")


def test_a_merge_replaces_an_int_partition_stored_as_01(spark, db, tmp_path, hms, ts_env):
    """ids 0-4 in ``hour='01'``; a merge of ids 3-7 with ``hour = 1``: one partition, still ``hour=01``, 8 rows."""
    table = create_events(spark, db, tmp_path, partition_cols=("hour",))
    add_stored_partition(spark, hms, db, "events", ("01",), tmp_path / "hour-01", data(spark, range(5)))
    assert spark.table(table).where("hour = 1").count() == 5
    updates = spark.createDataFrame([(i, f"u{i}", "merge", 1) for i in range(3, 8)],
                                    "id bigint, value string, batch string, hour int")
    result = merge_partitions(updates, table, on=["id"])
    assert stored_values(hms, db, "events") == [("01",)]
    assert [c.partition for c in result.replaced] == ["hour=01"] and not result.added
    got = sorted((r["id"], r["value"], r["hour"]) for r in spark.table(table).collect())
    assert got == [(0, "v0", 1), (1, "v1", 1), (2, "v2", 1)] + [(i, f"u{i}", 1) for i in range(3, 8)]


def test_a_compaction_replaces_an_int_partition_stored_as_01(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path, partition_cols=("hour",))
    add_stored_partition(spark, hms, db, "events", ("01",), tmp_path / "hour-01", data(spark, range(120)), files=12)
    result = compact_partitions(spark, table, target_file_bytes=TARGET)
    assert [c.partition for c in result.replaced] == ["hour=01"] and not result.added
    assert stored_values(hms, db, "events") == [("01",)]
    assert spark.table(table).count() == 120
    assert sorted(r["id"] for r in spark.table(table).collect()) == list(range(120))


def test_a_compaction_replaces_a_decimal_partition_stored_as_1_50(spark, db, tmp_path, hms, ts_env):
    """A DECIMAL(5,1) partition stored as ``1.50`` (Spark reads 1.5 and writes ``p=1.5``), and another stored
    as Spark spells it: both compacted in place."""
    table = f"{db}.amounts"
    spark.sql(f"CREATE TABLE {table} (id bigint, value string, batch string, p decimal(5,1)) USING parquet "
              f"PARTITIONED BY (p) LOCATION '{(tmp_path / 'amounts').as_uri()}'")
    add_stored_partition(spark, hms, db, "amounts", ("1.50",), tmp_path / "p-1.50", data(spark, range(120)), files=12)
    add_stored_partition(spark, hms, db, "amounts", ("2.5",), tmp_path / "p-2.5", data(spark, range(200, 320)),
                         files=12)
    assert spark.table(table).where("p = 1.5").count() == 120
    result = compact_partitions(spark, table, target_file_bytes=TARGET)
    assert sorted(c.partition for c in result.replaced) == ["p=1.50", "p=2.5"] and not result.added
    assert stored_values(hms, db, "amounts") == [("1.50",), ("2.5",)]
    assert sorted((r["id"], r["p"]) for r in spark.table(table).collect()) == (
        [(i, Decimal("1.5")) for i in range(120)] + [(i, Decimal("2.5")) for i in range(200, 320)])


def test_a_merge_with_empty_string_partition_values_merges_into_the_default_partition(spark, db, tmp_path, hms,
                                                                                      ts_env):
    """Spark writes a NULL or ``''`` partition value into Hive's default partition: a merge of ids 3-7 with
    ``dt = ''`` merges into the default partition holding ids 0-4 (8 rows), it does not replace it by the
    updates alone."""
    table = create_events(spark, db, tmp_path)
    spark.createDataFrame([(i, f"v{i}", "init", None) for i in range(5)],
                          "id bigint, value string, batch string, dt string").write.insertInto(table)
    assert stored_values(hms, db, "events") == [("__HIVE_DEFAULT_PARTITION__",)]
    updates = spark.createDataFrame([(i, f"u{i}", "merge", "") for i in range(3, 8)],
                                    "id bigint, value string, batch string, dt string")
    result = merge_partitions(updates, table, on=["id"])
    assert [c.partition for c in result.replaced] == ["dt=__HIVE_DEFAULT_PARTITION__"]
    assert stored_values(hms, db, "events") == [("__HIVE_DEFAULT_PARTITION__",)]
    got = sorted((r["id"], r["value"]) for r in spark.table(table).collect())
    assert got == [(0, "v0"), (1, "v1"), (2, "v2")] + [(i, f"u{i}") for i in range(3, 8)]
