"""``[swap] write_distribution``: the batch clustered by the target's partition columns before the staging
write (Spark's rebalance hint), against the real metastore and SparkSession; ``"auto"`` (the default) choosing
per swap (the rule: tests/unit/test_distribution_rule.py; a default swap onto S3:
tests/integration/test_s3a_swaps.py).

A batch spread over several Spark tasks leaves one file per (task x partition) as it comes ("none"), and one
file per partition clustered ("partition"), with the same rows; set by keyword or config file, from classic and
Connect sessions; not applied where Spark's insert lays out the files (bucketed) or to a compaction's layout.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tableswap import compact_partitions, errors, merge_partitions, swap_partitions, swap_table
from tableswap.core import distribution, locations as loc

from ..support.helpers import batch_df, create_events, data_files, reader_view, today

#: The layout of the staging write is Spark's work, whatever the metastore's release: the runs against other
#: releases leave these tests out (the swap itself runs against every release in the other files).
pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

DAYS = [today(i) for i in range(3)]
TASKS = 4


def _spread_batch(spark, tag: str = "b"):
    """30 rows in each of 3 days, dealt round-robin over 4 Spark tasks: every task holds rows of every day."""
    return batch_df(spark, {(d,): 30 for d in DAYS}, tag).repartition(TASKS)


def _files_per_partition(result) -> dict[str, int]:
    """Data files (no ``_SUCCESS``, no hidden ``.crc``) in each partition directory the swap pointed at."""
    out = {}
    for change in (*result.added, *result.replaced):
        assert "/_tableswap/" + result.swap_id + "/" in change.new_location
        out[change.partition] = len(data_files(Path(loc.to_local_path(change.new_location))))
    return out


def _rows(spark, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(table).collect())


def _staged_lines(caplog) -> list[str]:
    """The ``swap.staged`` log lines (the library's fallback rendering, key=value)."""
    return [r.getMessage() for r in caplog.records if "event='swap.staged'" in r.getMessage()]


def _advice_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "event='swap.write_distribution_advice'" in r.getMessage()]


def test_partition_distribution_leaves_one_file_per_partition_and_the_same_rows(spark, db, tmp_path, hms, ts_env,
                                                                                 caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="tableswap")
    # The advice to cluster is logged from 100 partitions; this batch has 3.
    monkeypatch.setattr(distribution, "ADVICE_MIN_PARTITIONS", 3)
    as_is, clustered = (create_events(spark, db, tmp_path, name=n) for n in ("as_is", "clustered"))
    batch = _spread_batch(spark)

    spread = swap_partitions(batch, as_is)  # the default, "auto": 3 partitions, of a count unknown before the write
    assert spread.write_distribution.applied == "none", spread.write_distribution
    assert spread.write_distribution.reason == ("file system, partition count unknown before the write: written "
                                                "as it comes")
    files_none = _files_per_partition(spread)
    assert len(files_none) == 3
    # As it comes, each task writes its own file into each day it holds rows of.
    assert max(files_none.values()) > 1, files_none
    # ... and the swap says that clustering would write fewer (the files it counted are the ones above).
    advice = _advice_lines(caplog)
    assert len(advice) == 1, caplog.text
    assert f"files={sum(files_none.values())}" in advice[0] and "partitions=3" in advice[0], advice
    assert 'write_distribution="partition"' in advice[0], advice
    assert "the next swap of this table clusters its batch by partition" in advice[0], advice

    caplog.clear()
    result = swap_partitions(batch, clustered, write_distribution="partition")
    files_partition = _files_per_partition(result)
    assert files_partition == {f"dt={d}": 1 for d in DAYS}, files_partition
    assert any("write_distribution='partition'" in line for line in _staged_lines(caplog)), caplog.text
    assert _advice_lines(caplog) == [], caplog.text  # clustered already: nothing to advise

    assert _rows(spark, clustered) == _rows(spark, as_is) == sorted(tuple(r) for r in batch.collect())
    assert reader_view(spark, clustered) == {(d,): (30, ("b",)) for d in DAYS}
    print(f"files per partition: none {files_none}, partition {files_partition}")


def test_auto_leaves_a_clustered_batch_as_it_is_and_takes_the_count_of_the_tables_last_swap(
        spark, db, tmp_path, hms, ts_env, monkeypatch):
    """A batch the job clustered itself (``df.repartition("dt")``) is written as it is, one file per partition,
    without a second shuffle; the next swap, with no replace_where, is clustered from the count of that one. The
    threshold (100 partitions) lowered to 3 so that 3 days stand for many."""
    monkeypatch.setattr(distribution, "AUTO_MIN_PARTITIONS", 3, raising=False)
    table = create_events(spark, db, tmp_path)
    result = swap_partitions(_spread_batch(spark).repartition("dt"), table, replace_where=[f"dt={d}" for d in DAYS])
    assert _files_per_partition(result) == {f"dt={d}": 1 for d in DAYS}
    assert result.write_distribution.applied == "none", result.write_distribution
    assert "the batch clustered by the partition columns already" in result.write_distribution.reason

    again = swap_partitions(_spread_batch(spark, "again"), table)  # no scope: the last swap wrote 3 partitions
    assert _files_per_partition(again) == {f"dt={d}": 1 for d in DAYS}
    assert again.write_distribution.reason == "file system, 3 partitions (the table's last swap wrote as many): 3 or more"
    assert reader_view(spark, table) == {(d,): (30, ("again",)) for d in DAYS}


def test_the_plan_tells_a_batch_clustered_by_partition_columns(spark):
    """What :func:`tableswap.spark.staging.clustered_by_partition` reads from a batch's plan, without a job."""
    from tableswap.core.catalog import Column, TableInfo
    from tableswap.spark.staging import clustered_by_partition

    def table(*keys: str) -> TableInfo:
        return TableInfo("db", "t", "EXTERNAL_TABLE", "file:/w/t", (Column("id", "bigint"),),
                         tuple(Column(k, "string") for k in keys))

    batch = batch_df(spark, {(d, c): 2 for d in DAYS for c in ("de", "fr")}, "b", partition_cols=("dt", "country"))
    by_table = table("dt", "country")
    assert clustered_by_partition(batch.repartition("dt"), by_table)  # a part of the columns: each day's rows together
    assert clustered_by_partition(batch.repartition(8, "country", "dt").select("id", "dt", "country"), by_table)
    assert clustered_by_partition(batch.repartitionByRange("dt"), by_table)  # a range partitioning
    assert not clustered_by_partition(batch, by_table)
    assert not clustered_by_partition(batch.repartition(TASKS), by_table)  # round robin
    assert not clustered_by_partition(batch.repartition("id"), by_table)
    assert not clustered_by_partition(batch.repartition("dt", "id"), by_table)
    assert not clustered_by_partition(batch.repartition("dt"), table())  # unpartitioned: nothing to cluster by
    # A global sort's shuffle is added when Spark prepares the plan to run, after what is read here: not told.
    assert not clustered_by_partition(batch.orderBy("dt"), by_table)


def test_the_config_file_sets_it_and_a_keyword_overrides_the_file(spark, db, tmp_path, hms, ts_env, monkeypatch):
    config = tmp_path / "tableswap.toml"
    config.write_text('[swap]\nwrite_distribution = "partition"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    table = create_events(spark, db, tmp_path)

    from_file = swap_partitions(_spread_batch(spark, "file"), table)
    assert _files_per_partition(from_file) == {f"dt={d}": 1 for d in DAYS}

    overridden = swap_partitions(_spread_batch(spark, "keyword"), table, write_distribution="none")
    assert max(_files_per_partition(overridden).values()) > 1
    assert reader_view(spark, table) == {(d,): (30, ("keyword",)) for d in DAYS}


def test_a_merge_reaches_the_setting(spark, db, tmp_path, hms, ts_env):
    """A merge's rows come out of a join (a shuffle by key): every task holds rows of every day unless the
    setting clusters them."""
    as_is, clustered = (create_events(spark, db, tmp_path, name=n) for n in ("as_is", "clustered"))
    for t in (as_is, clustered):
        batch_df(spark, {(d,): 30 for d in DAYS}, "old").write.insertInto(t)
    updates = batch_df(spark, {(d,): 10 for d in DAYS}, "new").repartition(TASKS)
    spread = merge_partitions(updates, as_is, on=["id"])
    assert max(_files_per_partition(spread).values()) > 1
    result = merge_partitions(updates, clustered, on=["id"], write_distribution="partition")
    assert _files_per_partition(result) == {f"dt={d}": 1 for d in DAYS}
    assert _rows(spark, clustered) == _rows(spark, as_is)


@pytest.mark.hostile
@pytest.mark.parametrize("value", ["hash", 3, ""])
def test_an_invalid_value_is_refused_before_anything_is_written(spark, db, tmp_path, hms, ts_env, value):
    table = create_events(spark, db, tmp_path)
    with pytest.raises(errors.ConfigurationError) as info:
        swap_partitions(_spread_batch(spark), table, write_distribution=value)
    message = str(info.value)
    assert "write_distribution" in message and repr(value) in message and "one of auto, none, partition" in message
    assert not (tmp_path / "events" / "_tableswap").exists()
    assert not hms.list_partitions(db, "events")


def test_partition_columns_with_a_dot_and_in_upper_case_are_clustered(spark, db, tmp_path, hms, ts_env):
    """The hint's names are quoted: a column `p.q` is that column, not field q of a column p."""
    table = f"{db}.odd"
    spark.sql(f"CREATE TABLE {table} (id bigint, `p.q` string, Day string) USING parquet "
              f"PARTITIONED BY (`p.q`, Day) LOCATION '{(tmp_path / 'odd').as_uri()}'")
    rows = [(i, "x" if i % 2 else "y", DAYS[i % 3]) for i in range(120)]
    batch = spark.createDataFrame(rows, "id bigint, `p.q` string, DAY string").repartition(TASKS)
    result = swap_partitions(batch, table, write_distribution="partition")
    assert len(result.added) == 6
    assert set(_files_per_partition(result).values()) == {1}
    assert _rows(spark, table) == sorted(rows)


def test_an_unpartitioned_table_is_written_as_it_comes(spark, db, tmp_path, hms, ts_env, caplog):
    caplog.set_level(logging.INFO, logger="tableswap")
    table = f"{db}.flat"
    spark.sql(f"CREATE TABLE {table} (id bigint, v string) USING parquet LOCATION '{(tmp_path / 'flat').as_uri()}'")
    batch = spark.createDataFrame([(i, f"v{i}") for i in range(40)], "id bigint, v string").repartition(TASKS)
    swap_table(batch, table, write_distribution="partition")
    assert _rows(spark, table) == [(i, f"v{i}") for i in range(40)]
    (line,) = _staged_lines(caplog)
    assert "write_distribution='none'" in line and "unpartitioned table" in line, line


def test_a_bucketed_table_is_laid_out_by_sparks_insert_with_the_setting_on(spark, db, tmp_path, hms, ts_env, caplog):
    caplog.set_level(logging.INFO, logger="tableswap")
    table = f"{db}.bucketed"
    spark.sql(f"CREATE TABLE {table} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
              f"CLUSTERED BY (id) INTO 4 BUCKETS LOCATION '{(tmp_path / 'bucketed').as_uri()}'")
    rows = [(i, f"v{i}", DAYS[i % 2]) for i in range(80)]
    batch = spark.createDataFrame(rows, "id bigint, v string, dt string").repartition(TASKS)
    spark.createDataFrame([(1000, "old", DAYS[0])], "id bigint, v string, dt string").write.insertInto(table)

    result = swap_partitions(batch, table, write_distribution="partition")
    assert [c.partition for c in result.replaced] == [f"dt={DAYS[0]}"]
    assert [c.partition for c in result.added] == [f"dt={DAYS[1]}"]
    assert _rows(spark, table) == sorted(rows)
    # Bucket files as Spark's insert writes them (a bucket id in every name), not one file per partition.
    for change in (*result.added, *result.replaced):
        names = [f.name for f in data_files(Path(loc.to_local_path(change.new_location)))]
        assert len(names) >= 4 and all("_0000" in n for n in names), names
    (line,) = _staged_lines(caplog)
    assert "write_distribution='none'" in line and "Spark's insert lays out the files" in line, line
    # Bucket pruning still reads the right rows.
    assert sorted(tuple(r) for r in spark.sql(f"SELECT id, v, dt FROM {table} WHERE id = 7").collect()) == \
        [(7, "v7", DAYS[1])]


def test_a_compaction_keeps_its_own_layout_with_the_setting_on(spark, db, tmp_path, hms, ts_env, caplog):
    """Compaction lays out ceil(bytes / target) files per partition itself: the setting must not cluster them
    again into one file per partition."""
    caplog.set_level(logging.INFO, logger="tableswap")
    table = create_events(spark, db, tmp_path)
    for n in range(12):  # twelve small files in one day
        batch_df(spark, {(DAYS[0],): 100}, f"b{n:02d}").coalesce(1).write.insertInto(table)
    before = _rows(spark, table)
    size = sum(f.stat().st_size for f in data_files(tmp_path / "events" / f"dt={DAYS[0]}"))
    result = compact_partitions(spark, table, target_file_bytes=size // 5, min_files=2,
                                write_distribution="partition")
    (files,) = _files_per_partition(result).values()
    print(f"compaction: {files} files")
    assert 1 < files <= 6, files
    (line,) = _staged_lines(caplog)
    assert "write_distribution='none'" in line, line
    assert _rows(spark, table) == before


@pytest.mark.spark_processes
def test_the_hint_works_from_a_spark_connect_session(connect_spark, spark, db, tmp_path, hms, ts_env):
    as_is, clustered = (create_events(spark, db, tmp_path, name=n) for n in ("as_is", "clustered"))
    batch = batch_df(connect_spark, {(d,): 30 for d in DAYS}, "connect").repartition(TASKS)
    assert max(_files_per_partition(swap_partitions(batch, as_is)).values()) > 1
    result = swap_partitions(batch, clustered, write_distribution="partition")
    assert _files_per_partition(result) == {f"dt={d}": 1 for d in DAYS}
    assert reader_view(spark, clustered) == reader_view(spark, as_is) == {(d,): (30, ("connect",)) for d in DAYS}
