"""Conformance against Spark's own overwrite, one table shape after another.

For each shape two identical tables are made: ``<name>_ts`` gets seeded random batches through
tableswap, ``<name>_sp`` the same batches through Spark's dynamic ``INSERT OVERWRITE`` (a plain
``INSERT OVERWRITE`` for unpartitioned tables). Both must then hold the same rows and the same
partitions, as a fresh session reads them. Shapes tableswap does not write are refused with a
:class:`TableSwapError` saying why, the metastore and the files unchanged. The shapes are
documented in docs/table-shapes.md.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import pytest

from tableswap import TableSwapError, errors, swap_partitions, swap_table
from tableswap.core import locations as loc

from tableswap.devmetastore.releases import parse_hive_version

from ..conftest import selected_hive_version
from ..support.helpers import data_files, file_codecs, file_tree, live_data_files, metastore_snapshot, spark_overwrite

pytestmark = pytest.mark.integration

Row = tuple
MakeRow = Callable[[random.Random, int, tuple], Row]


class Twin:
    """Two identical tables from one DDL: ``ts`` swapped by tableswap, ``sp`` written by Spark."""

    def __init__(self, spark, db: str, root: Path, name: str, ddl: str) -> None:
        self.spark, self.db, self.root = spark, db, root
        self.ts, self.sp = f"{db}.{name}_ts", f"{db}.{name}_sp"
        for table in (self.ts, self.sp):
            short = table.split(".")[1]
            spark.sql(ddl.format(table=table, location=(root / short).as_uri()))
        self.partitioned = any(c.isPartition for c in spark.catalog.listColumns(self.ts))
        self.results = []

    def apply(self, df, *, spark_too: bool = True) -> None:
        swap = swap_partitions if self.partitioned else swap_table
        self.results.append(swap(df, self.ts))
        if spark_too:
            spark_overwrite(self.spark, df, self.sp)

    def run(self, batches: list) -> None:
        """Each batch through both; then the last one again through tableswap (a rerun)."""
        for df in batches:
            self.apply(df)
        self.apply(batches[-1], spark_too=False)

    def assert_same(self, hms) -> None:
        fresh = self.spark.newSession()
        assert rows(fresh, self.ts) == rows(fresh, self.sp)
        assert partitions(hms, self.ts) == partitions(hms, self.sp)
        assert rows(fresh, self.ts), "the comparison must not be between two empty tables"


def rows(spark, table: str) -> list[str]:
    """Every row as JSON (nested values included), sorted."""
    return sorted(r[0] for r in spark.sql(f"SELECT to_json(struct(*)) FROM {table}").collect())


def partitions(hms, table: str) -> set[tuple[str, ...]]:
    db, name = table.split(".")
    return {p.values for p in hms.list_partitions(db, name)} if hms.get_table(db, name).is_partitioned else set()


def batches(spark, schema: str, pool: list[tuple], make_row: MakeRow, seed: int) -> list:
    """Two seeded random batches: the first over some of ``pool``'s partitions, the second
    replacing some of those and adding new ones; 1-3 rows per partition."""
    rng = random.Random(seed)
    half = max(1, len(pool) // 2)
    first = rng.sample(pool[:half], k=max(1, half - 1)) if half > 1 else pool[:1]
    second = rng.sample(first, k=max(1, len(first) // 2)) + rng.sample(pool[half:], k=max(1, (len(pool) - half) // 2 + 1))
    out, n = [], 0
    for parts in (first, second):
        data = []
        for values in parts:
            for _ in range(rng.randint(1, 3)):
                n += 1
                data.append(make_row(rng, n, values))
        out.append(spark.createDataFrame(data, schema))
    return out


def simple_row(rng: random.Random, n: int, values: tuple) -> Row:
    return (n, f"v{rng.randint(0, 999)}", *values)


SIMPLE = "id bigint, v string, dt string"
SIMPLE_POOL = [(f"2026-06-0{i}",) for i in range(1, 7)]


def assert_refused(hms, db: str, root: Path, exc_type: type, match: str, action: Callable[[], Any]) -> None:
    """``action`` raises ``exc_type`` (a TableSwapError) matching ``match``; metastore and files unchanged."""
    before, files = metastore_snapshot(hms, db), file_tree(root)
    with pytest.raises(exc_type, match=match) as info:
        action()
    assert isinstance(info.value, TableSwapError)
    assert metastore_snapshot(hms, db) == before
    assert file_tree(root) == files


# --------------------------------------------------------------------------- formats


FORMATS = {
    "using-parquet": "CREATE TABLE {table} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) LOCATION '{location}'",
    "using-orc": "CREATE TABLE {table} (id bigint, v string, dt string) USING orc PARTITIONED BY (dt) LOCATION '{location}'",
    "stored-as-parquet": "CREATE EXTERNAL TABLE {table} (id bigint, v string) PARTITIONED BY (dt string) STORED AS PARQUET LOCATION '{location}'",
    "stored-as-orc": "CREATE EXTERNAL TABLE {table} (id bigint, v string) PARTITIONED BY (dt string) STORED AS ORC LOCATION '{location}'",
    "unpartitioned-using-parquet": "CREATE TABLE {table} (id bigint, v string, dt string) USING parquet LOCATION '{location}'",
    "unpartitioned-stored-as-orc": "CREATE EXTERNAL TABLE {table} (id bigint, v string, dt string) STORED AS ORC LOCATION '{location}'",
}


def test_formats_match_spark(spark, db, tmp_path, hms, ts_env):
    for i, (shape, ddl) in enumerate(sorted(FORMATS.items())):
        twin = Twin(spark, db, tmp_path, shape.replace("-", "_"), ddl)
        twin.run(batches(spark, SIMPLE, SIMPLE_POOL, simple_row, seed=i))
        twin.assert_same(hms)
        if twin.partitioned:  # the session's default codec, as Spark's own write uses it
            assert file_codecs(live_data_files(hms, twin.ts)) == file_codecs(live_data_files(hms, twin.sp)), shape


REFUSED_FORMATS = {
    "csv": "CREATE TABLE {table} (id bigint, v string, dt string) USING csv PARTITIONED BY (dt) LOCATION '{location}'",
    "json": "CREATE TABLE {table} (id bigint, v string, dt string) USING json PARTITIONED BY (dt) LOCATION '{location}'",
    "text": "CREATE EXTERNAL TABLE {table} (id bigint, v string) PARTITIONED BY (dt string) STORED AS TEXTFILE LOCATION '{location}'",
    "avro": "CREATE EXTERNAL TABLE {table} (id bigint, v string) PARTITIONED BY (dt string) STORED AS AVRO LOCATION '{location}'",
}


@pytest.mark.hostile
def test_other_formats_are_refused_and_nothing_changes(spark, db, tmp_path, hms, ts_env):
    batch = spark.createDataFrame([(1, "a", "2026-06-01"), (2, "b", "2026-06-02")], SIMPLE)
    for fmt, ddl in sorted(REFUSED_FORMATS.items()):
        table = f"{db}.{fmt}_t"
        spark.sql(ddl.format(table=table, location=(tmp_path / fmt).as_uri()))
        spark_overwrite(spark, batch, table)
        assert_refused(hms, db, tmp_path, errors.UnsupportedTableError, f"stored as {fmt}.*supports parquet and orc",
                       lambda table=table: swap_partitions(batch, table))


# --------------------------------------------------------------------------- partition values


TYPED = {
    "ints": ("CREATE TABLE {table} (id bigint, p_str string, p_tiny tinyint, p_small smallint, p_int int, "
             "p_big bigint) USING parquet PARTITIONED BY (p_str, p_tiny, p_small, p_int, p_big) LOCATION '{location}'",
             "id bigint, p_str string, p_tiny tinyint, p_small smallint, p_int int, p_big bigint",
             [("a b", 1, -2, 3, 2**40), ("x/y", None, 7, -1, 0), ("", 0, 0, 0, -5), (None, 127, 32767, 2**31 - 1, 2**63 - 1),
              ("k=v", -128, -32768, -2**31, -2**63), ("100%", 5, 5, 5, 5), ("Zürich", 2, 2, None, 2),
              ("new\nline", 3, 3, 3, None), ("Up=Case#?", 4, 4, 4, 4)]),
    "temporal": ("CREATE TABLE {table} (id bigint, p_date date, p_ts timestamp, p_bool boolean, p_dec decimal(10,2)) "
                 "USING parquet PARTITIONED BY (p_date, p_ts, p_bool, p_dec) LOCATION '{location}'",
                 "id bigint, p_date date, p_ts timestamp, p_bool boolean, p_dec decimal(10,2)",
                 [(dt.date(2026, 6, 1), dt.datetime(2026, 6, 1, 10, 30), True, Decimal("1.50")),
                  (dt.date(1970, 1, 1), dt.datetime(2026, 6, 1, 0, 0, 0, 500000), False, Decimal("-3.00")),
                  (None, None, None, None),
                  (dt.date(2026, 12, 31), dt.datetime(1999, 12, 31, 23, 59, 59), True, Decimal("0.00")),
                  (dt.date(2026, 6, 2), dt.datetime(2026, 6, 2, 1, 2, 3), False, Decimal("12345678.99")),
                  (dt.date(2000, 2, 29), dt.datetime(2000, 2, 29, 12, 0), None, Decimal("7.25"))]),
    "hive-typed": ("CREATE EXTERNAL TABLE {table} (id bigint) PARTITIONED BY (p_int int, p_date date, p_str string) "
                   "STORED AS ORC LOCATION '{location}'",
                   "id bigint, p_int int, p_date date, p_str string",
                   [(1, dt.date(2026, 6, 1), "a"), (None, dt.date(2026, 6, 1), "a b"), (2, None, "x/y"),
                    (3, dt.date(2026, 6, 3), ""), (4, dt.date(2026, 6, 4), None), (-1, dt.date(2026, 6, 5), "Zürich")]),
}


def test_partition_column_types_and_values_match_spark(spark, db, tmp_path, hms, ts_env):
    for i, (shape, (ddl, schema, pool)) in enumerate(sorted(TYPED.items())):
        twin = Twin(spark, db, tmp_path, shape.replace("-", "_"), ddl)
        twin.run(batches(spark, schema, pool, lambda rng, n, values: (n, *values), seed=10 + i))
        twin.assert_same(hms)


# --------------------------------------------------------------------------- schema features


def _spark_hive4_client() -> bool:
    release = parse_hive_version(selected_hive_version())
    return release is not None and release.major >= 4


def test_schema_features_match_spark(spark, db, tmp_path, hms, ts_env):
    # Nested types, char/varchar (Spark pads char(n) on insert), upper-case names, and a DataFrame
    # whose columns come in another order and another case.
    nested = Twin(spark, db, tmp_path, "nested", (
        "CREATE TABLE {table} (ID bigint, S struct<a:int,b:string>, Arr array<int>, M map<string,int>, "
        "C char(5), VC varchar(8), DT string) USING parquet PARTITIONED BY (DT) LOCATION '{location}'"))

    def nested_row(rng, n, values):
        return (values[0], f"c{n % 10}", f"vc{rng.randint(0, 99)}", {f"k{n}": n} if n % 3 else None,
                [n, None, rng.randint(0, 9)], (n, None if n % 4 == 0 else f"b{n}"), n)

    reordered = "DT string, c string, Vc string, m map<string,int>, arr array<int>, s struct<a:int,b:string>, id bigint"
    if _spark_hive4_client():
        # Spark's Hive 4 client (a 4.x metastore) cannot write a datasource table whose partition column
        # is upper-case: its own insert fails after writing the files (the metastore's lower-case `dt` is not
        # mapped back to `DT`). tableswap's staging insert fails the same way, with the target unchanged.
        batch = batches(spark, reordered, SIMPLE_POOL, nested_row, seed=20)[0]
        spark_error = "Partition spec is missing a value for column 'DT'"
        with pytest.raises(Exception, match=spark_error):
            spark_overwrite(spark, batch, nested.sp)
        before = partitions(hms, nested.ts), rows(spark, nested.ts)
        with pytest.raises(errors.StagingWriteError, match=spark_error):
            swap_partitions(batch, nested.ts)
        assert (partitions(hms, nested.ts), rows(spark, nested.ts)) == before
    else:
        nested.run(batches(spark, reordered, SIMPLE_POOL, nested_row, seed=20))
        nested.assert_same(hms)
        padded = spark.sql(f"SELECT DISTINCT length(C) FROM {nested.ts}").collect()
        assert {r[0] for r in padded} == {5}, "char(5) values are padded as Spark pads them"

    hive_nested = Twin(spark, db, tmp_path, "hive_nested", (
        "CREATE EXTERNAL TABLE {table} (id bigint, s struct<a:int,b:string>, arr array<int>, m map<string,int>, "
        "vc varchar(8)) PARTITIONED BY (dt string) STORED AS PARQUET LOCATION '{location}'"))
    hive_nested.run(batches(spark, reordered.replace("c string, ", "", 1),
                            SIMPLE_POOL, lambda rng, n, v: tuple(x for j, x in enumerate(nested_row(rng, n, v)) if j != 1),
                            seed=21))
    hive_nested.assert_same(hms)

    # Columns added after creation: older partitions lack them in their files.
    for shape, ddl in (("added_ds", FORMATS["using-parquet"]), ("added_hive", FORMATS["stored-as-parquet"])):
        twin = Twin(spark, db, tmp_path, shape, ddl)
        first, second = batches(spark, "id bigint, v string, extra int, dt string", SIMPLE_POOL,
                                lambda rng, n, values: (n, f"v{n}", rng.randint(0, 9), *values), seed=22)
        twin.apply(first.drop("extra"))
        for t in (twin.ts, twin.sp):
            spark.sql(f"ALTER TABLE {t} ADD COLUMNS (extra int)")
        twin.apply(second)
        twin.apply(second, spark_too=False)
        twin.assert_same(hms)


@pytest.mark.hostile
def test_schema_refusals_change_nothing(spark, db, tmp_path, hms, ts_env):
    # A column DEFAULT is not filled in by tableswap: the DataFrame must carry every column.
    spark.sql(f"CREATE TABLE {db}.dflt (id bigint, v string DEFAULT 'none', dt string) USING parquet "
              f"PARTITIONED BY (dt) LOCATION '{(tmp_path / 'dflt').as_uri()}'")
    spark.sql(f"INSERT INTO {db}.dflt VALUES (1, 'a', 'd1')")
    assert_refused(hms, db, tmp_path, errors.SchemaMismatchError, r"missing column 'v'.*DEFAULT 'none'",
                   lambda: swap_partitions(spark.createDataFrame([(2, "d1")], "id bigint, dt string"), f"{db}.dflt"))
    # With the column given, the defaulted table swaps like any other.
    swap_partitions(spark.createDataFrame([(2, "b", "d1")], SIMPLE), f"{db}.dflt")
    assert [tuple(r) for r in spark.table(f"{db}.dflt").collect()] == [(2, "b", "d1")]

    # A varchar value longer than the column: Spark's insert fails, so does the swap, nothing changed.
    spark.sql(f"CREATE TABLE {db}.vc (id bigint, v varchar(3), dt string) USING parquet PARTITIONED BY (dt) "
              f"LOCATION '{(tmp_path / 'vc').as_uri()}'")
    spark.sql(f"INSERT INTO {db}.vc VALUES (1, 'abc', 'd1')")
    assert_refused(hms, db, tmp_path, errors.StagingWriteError, "EXCEED_LIMIT_LENGTH|exceeds",
                   lambda: swap_partitions(spark.createDataFrame([(2, "abcdef", "d1")], SIMPLE), f"{db}.vc"))


# --------------------------------------------------------------------------- write options


CODECS = {
    "using_parquet_gzip": ("CREATE TABLE {table} (id bigint, v string, dt string) USING parquet "
                           "OPTIONS ('compression'='gzip') PARTITIONED BY (dt) LOCATION '{location}'", "GZIP"),
    "using_orc_zlib": ("CREATE TABLE {table} (id bigint, v string, dt string) USING orc "
                       "OPTIONS ('compression'='zlib') PARTITIONED BY (dt) LOCATION '{location}'", "ZLIB"),
    "hive_parquet_gzip": ("CREATE EXTERNAL TABLE {table} (id bigint, v string) PARTITIONED BY (dt string) STORED AS "
                          "PARQUET LOCATION '{location}' TBLPROPERTIES ('parquet.compression'='GZIP')", "GZIP"),
    "hive_orc_snappy": ("CREATE EXTERNAL TABLE {table} (id bigint, v string) PARTITIONED BY (dt string) STORED AS "
                        "ORC LOCATION '{location}' TBLPROPERTIES ('orc.compress'='SNAPPY')", "SNAPPY"),
}


def test_compression_codecs_match_spark(spark, db, tmp_path, hms, ts_env):
    for i, (shape, (ddl, codec)) in enumerate(sorted(CODECS.items())):
        twin = Twin(spark, db, tmp_path, shape, ddl)
        twin.run(batches(spark, SIMPLE, SIMPLE_POOL, simple_row, seed=30 + i))
        twin.assert_same(hms)
        ours, spark_files = file_codecs(live_data_files(hms, twin.ts)), file_codecs(live_data_files(hms, twin.sp))
        assert ours == spark_files == {codec}, (shape, ours, spark_files)


# --------------------------------------------------------------------------- partition layouts


def _local(location: str) -> Path:
    return Path(loc.to_local_path(location))


def _live_locations(hms, table: str) -> list[Path]:
    db, name = table.split(".")
    return [_local(p.location) for p in hms.list_partitions(db, name)]


def _janitor(table: str):
    from tableswap.ops.janitor.run import run_janitor

    return run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False)


def test_custom_partition_location_outside_root(spark, db, tmp_path, hms, ts_env):
    """A partition Spark (or anyone) pointed outside the table root is replaced like any other;
    the janitor never deletes its old directory (outside the root), nor anything live."""
    twin = Twin(spark, db, tmp_path / "tables", "custom", FORMATS["stored-as-parquet"])
    first, second = batches(spark, SIMPLE, SIMPLE_POOL, simple_row, seed=40)
    twin.apply(first)
    moved = first.collect()[0]["dt"]
    outside = {}
    for t in (twin.ts, twin.sp):
        outside[t] = tmp_path / "elsewhere" / t.split(".")[1]
        spark.sql(f"ALTER TABLE {t} PARTITION (dt='{moved}') SET LOCATION '{outside[t].as_uri()}'")
        spark.sql(f"INSERT OVERWRITE TABLE {t} PARTITION (dt='{moved}') SELECT 900, 'outside'")
    second = second.union(spark.createDataFrame([(901, "replaced", moved)], SIMPLE))
    twin.apply(second)
    twin.assert_same(hms)
    report = _janitor(twin.ts)
    assert data_files(outside[twin.ts]), "the old directory outside the table root is never deleted"
    seen = [o for o in report.outcomes if _local(o.location) == outside[twin.ts]]
    assert seen and all(o.outcome in ("refused", "kept") for o in seen), report.outcomes
    assert not report.errors
    assert all(data_files(p) for p in _live_locations(hms, twin.ts))
    twin.assert_same(hms)


@pytest.mark.hostile
def test_partition_with_its_own_format_is_refused(spark, db, tmp_path, hms, ts_env, metastore_uri):
    """Hive allows a partition its own storage format; a batch for such a partition is refused
    (it would be written in the table's format), nothing changed; other partitions swap."""
    from tableswap.metastore.client import parse_uri

    from ..support.helpers import raw_hms

    table = f"{db}.own_fmt"
    spark.sql(FORMATS["stored-as-parquet"].format(table=table, location=(tmp_path / "own_fmt").as_uri()))
    spark_overwrite(spark, spark.createDataFrame([(1, "a", "d1"), (2, "b", "d2")], SIMPLE), table)
    with raw_hms(parse_uri(metastore_uri)[1]) as client:
        part = client.get_partition_by_name(db, "own_fmt", "dt=d2")
        part.sd.inputFormat = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
        part.sd.outputFormat = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
        part.sd.serdeInfo.serializationLib = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
        client.alter_partition(db, "own_fmt", part)
    assert_refused(hms, db, tmp_path, errors.UnsupportedTableError, "dt=d2 of .* have their own storage format",
                   lambda: swap_partitions(spark.createDataFrame([(3, "c", "d2"), (4, "d", "d3")], SIMPLE), table))
    swap_partitions(spark.createDataFrame([(5, "e", "d1"), (6, "f", "d4")], SIMPLE), table)
    assert sorted(r["dt"] for r in spark.sql(f"SELECT dt FROM {table} WHERE dt <> 'd2'").collect()) == ["d1", "d4"]


@pytest.mark.parametrize("shape", ["using-parquet", "stored-as-orc"])
def test_spark_overwrites_between_swaps_then_janitor(spark, db, tmp_path, hms, ts_env, shape):
    """Plain Spark INSERT OVERWRITE (static and dynamic) between two swaps: the same rows as Spark
    alone, and the janitor after it deletes nothing live."""
    twin = Twin(spark, db, tmp_path, "mixed", FORMATS[shape])
    first, second = batches(spark, SIMPLE, SIMPLE_POOL, simple_row, seed=50)
    twin.apply(first)
    swapped = sorted({r["dt"] for r in first.collect()})
    for t in (twin.ts, twin.sp):
        spark.sql(f"INSERT OVERWRITE TABLE {t} PARTITION (dt='{swapped[0]}') SELECT 700, 'static'")
        spark_overwrite(spark, spark.createDataFrame(
            [(701, "dynamic", swapped[-1]), (702, "dynamic", "2026-07-01")], SIMPLE), t)
    twin.assert_same(hms)
    twin.apply(second)
    twin.assert_same(hms)
    report = _janitor(twin.ts)
    assert report.deleted and not report.errors
    assert all(data_files(p) for p in _live_locations(hms, twin.ts))
    twin.assert_same(hms)
