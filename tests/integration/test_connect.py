"""swap_partitions / swap_table with a DataFrame of a Spark Connect session.

The Connect server is a real subprocess (``connect_server`` fixture: Hive support, the test
metastore); the metastore Thrift calls go from this process, the staging write through the server.
Tables are created and read back with the classic test session, a separate Spark application.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tableswap import errors, swap_partitions, swap_table
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.spark.api import app_id, is_connect

from ..support.helpers import SRC, batch_df, create_events, file_tree, metastore_snapshot, partition_locations, reader_view, today

# A Spark Connect server is a Spark process of its own: the runs against further metastore releases leave these
# out (marker spark_processes; the server's metastore calls are those of the session's swaps).
pytestmark = [pytest.mark.integration, pytest.mark.spark_processes]


def test_connect_session_is_recognised(connect_spark, spark):
    assert is_connect(connect_spark) and not is_connect(spark)
    # No SparkContext on Connect: the application id comes from the server's configuration.
    server_app = connect_spark.conf.get("spark.app.id")
    assert app_id(connect_spark) == server_app
    assert server_app != spark.sparkContext.applicationId


def test_swap_partitions_from_connect_adds_replaces_and_rerun_is_idempotent(
        connect_spark, spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    days = [today(i) for i in range(3)]
    batch_df(spark, {(d,): 4 for d in days}, "initial").write.insertInto(table)
    before = partition_locations(hms, db, "events")

    backfill = {(days[1],): 6, (today(3),): 2}
    # ids as int: a lossless widening to the table's bigint, cast on the server
    df = batch_df(connect_spark, backfill, "backfill")
    df = df.withColumn("id", df["id"].cast("int"))
    assert is_connect(df.sparkSession) and dict(df.dtypes)["id"] == "int"
    result = swap_partitions(df, table)

    assert [c.partition for c in result.added] == [f"dt={today(3)}"]
    assert [c.partition for c in result.replaced] == [f"dt={days[1]}"]
    assert loc.same(result.replaced[0].old_location, before[(days[1],)])
    expected = {
        (days[0],): (4, ("initial",)),
        (days[1],): (6, ("backfill",)),
        (days[2],): (4, ("initial",)),
        (today(3),): (2, ("backfill",)),
    }
    # A reader in the classic session (another Spark application) sees the new data, no refresh.
    assert reader_view(spark, table) == expected
    # ... and so does the writer's Connect session.
    assert reader_view(connect_spark, table) == expected
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    assert parts[(days[1],)].parameters[SWAP_ID_PARAM] == result.swap_id
    assert f"/_tableswap/{result.swap_id}/" in parts[(today(3),)].location
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    record = journal.get_swap(result.swap_id)
    assert record.state == "committed" and record.app_id == connect_spark.conf.get("spark.app.id")

    again = swap_partitions(df, table)
    assert reader_view(spark, table) == expected
    assert {c.partition for c in again.replaced} == {f"dt={days[1]}", f"dt={today(3)}"}
    assert not again.added
    queued = journal.deletions(db=db, table="events")
    assert len({d.location for d in queued}) == len(queued) == 3


def test_swap_table_from_connect(connect_spark, spark, db, tmp_path, hms, ts_env):
    table = f"{db}.dim_user"
    root = tmp_path / "dim_user"
    spark.sql(f"CREATE TABLE {table} (id bigint, name string) USING parquet LOCATION '{root.as_uri()}'")
    spark.createDataFrame([(i, f"old{i}") for i in range(5)], "id bigint, name string").write.insertInto(table)
    assert connect_spark.table(table).count() == 5  # the Connect server caches the table now

    df = connect_spark.createDataFrame([(i, f"new{i}") for i in range(3)], "id bigint, name string")
    result = swap_table(df, table)

    assert loc.same(result.table_change.old_location, root.as_uri())
    assert loc.same(hms.get_table(db, "dim_user").location, result.table_change.new_location)
    # The writer's (Connect) session was refreshed by the swap.
    assert sorted(r.name for r in connect_spark.table(table).collect()) == ["new0", "new1", "new2"]
    # Another application sees the new location after REFRESH TABLE (docs/guarantees.md: datasource tables).
    spark.sql(f"REFRESH TABLE {table}")
    assert sorted(r.name for r in spark.table(table).collect()) == ["new0", "new1", "new2"]
    assert {p.name for p in root.iterdir() if not p.name.startswith(("_", "."))}  # old files kept


def test_schema_mismatch_from_connect_changes_nothing(connect_spark, spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3}, "initial").write.insertInto(table)
    snapshot, files = metastore_snapshot(hms, db), file_tree(tmp_path)
    bad = connect_spark.createDataFrame([("x", "v", "b", today(0))], "id string, value string, batch string, dt string")

    with pytest.raises(errors.SchemaMismatchError, match="column 'id' is string in the DataFrame but bigint"):
        swap_partitions(bad, table)

    assert metastore_snapshot(hms, db) == snapshot
    assert file_tree(tmp_path) == files
    assert reader_view(spark, table) == {(today(0),): (3, ("initial",))}
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions(db=db, table="events") == []


def test_connect_only_client_process_needs_no_local_jvm(connect_server, spark, db, tmp_path, hms, ts_env):
    """The user's path: a process that only has a Connect session (public builder, Connect mode for
    the whole process, DataFrame built with pyspark.sql.functions) and never starts a JVM."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "initial").write.insertInto(table)
    script = textwrap.dedent(f"""
        import json, os
        from pyspark.sql import SparkSession, functions as F
        from tableswap import swap_partitions
        spark = SparkSession.builder.remote({connect_server.url!r}).getOrCreate()
        df = spark.range(3).select(F.col("id"), F.lit("v").alias("value"), F.lit("connect").alias("batch"),
                                   F.lit({today(0)!r}).alias("dt"))
        result = swap_partitions(df, {table!r})
        from pyspark import SparkContext
        print(json.dumps({{"replaced": [c.partition for c in result.replaced],
                           "jvm": SparkContext._active_spark_context is not None,
                           "gateway": SparkContext._gateway is not None}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**ts_env_environ(ts_env), "PYTHONPATH": SRC})
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"replaced": [f"dt={today(0)}"], "jvm": False, "gateway": False}
    assert reader_view(spark, table) == {(today(0),): (3, ("connect",))}


def ts_env_environ(ts_env: dict[str, str]) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(ts_env)
    return env


@pytest.mark.hostile
def test_read_as_of_from_connect_reads_partition_values_verbatim(connect_spark, spark, db, tmp_path, hms, ts_env):
    # The partition values become literal columns of the Connect kind, never SQL text the server
    # would substitute ${...} in.
    from tableswap import read_as_of

    cols = ("dt", "country")
    table = create_events(spark, db, tmp_path, partition_cols=cols)
    values = ["${env:HOME}", "${spark.app.id}", "a'b", None]
    s1 = swap_partitions(batch_df(spark, {("2026-01-01", v): 2 for v in values}, "s1", cols), table)
    past = read_as_of(connect_spark, table, swap_id=s1.swap_id)
    assert is_connect(past.sparkSession)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in past.schema.fields] == \
        [(f.name, f.dataType.simpleString(), f.nullable) for f in spark.table(table).schema.fields]
    got = sorted((r["country"] is None, r["country"] or "") for r in past.collect())
    assert got == sorted((v is None, v or "") for v in values for _ in range(2))


def test_sql_on_a_connect_session_is_refused_before_anything_runs(connect_spark, spark, db, ts_env):
    """``tableswap.sql`` reads every statement of a script with Spark's parser before any runs, which a Connect
    client does not have: refused with the reason, not one statement run (the script's first would create a table)."""
    import tableswap

    script = f"CREATE TABLE {db}.marker (a int) USING parquet; SELECT 1"
    with pytest.raises(errors.UnsupportedTableError, match="needs a classic SparkSession.*Nothing ran"):
        tableswap.sql(connect_spark, script)
    assert not spark.catalog.tableExists(f"{db}.marker")
