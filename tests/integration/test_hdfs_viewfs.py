"""``viewfs://`` locations on the session's HDFS: a mount table (``fs.viewfs.mounttable.tswap.link./vdata``,
tests/support/hdfs.py) maps ``viewfs://tswap/vdata/...`` onto ``<hdfs>/warehouse/...``, in the Hadoop
configuration of tableswap (``HADOOP_CONF_DIR``: hdfs-native resolves the mounts), of Spark (its Hadoop
configuration) and of the session's metastore (its ``hive-site.xml``: the marker ``viewfs`` starts the HDFS
before it). One directory, two spellings whose paths differ: the janitor's reference check resolves the mount.
"""

from __future__ import annotations

import uuid

import pytest

from tableswap import storage, swap_partitions
from tableswap.core import locations as loc
from tableswap.ops.janitor.run import O_DELETED, O_REFUSED, run_janitor

from ..support import hdfs
from ..support.helpers import batch_df, create_events, partition_locations, reader_view, today

pytestmark = [pytest.mark.integration, pytest.mark.hdfs, pytest.mark.viewfs]


@pytest.fixture
def viewfs(hdfs_cluster, hdfs_viewfs_conf, spark, monkeypatch):
    """This process (HADOOP_CONF_DIR) and Spark's driver with the mount table; returns a function that spells an
    ``hdfs://`` location under the HDFS's ``/warehouse`` through the mount."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_viewfs_conf))
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hdfs.viewfs_properties(hdfs_cluster.url).items():
        conf.set(key, value)
    warehouse = f"{hdfs_cluster.url}/warehouse"

    def spelled(location: str) -> str:
        assert loc.is_within(location, warehouse), location
        return f"viewfs://{hdfs.VIEWFS_TABLE}{hdfs.VIEWFS_MOUNT}{loc.normalize(location)[len(warehouse):]}"

    return spelled


def test_a_directory_another_table_references_through_viewfs_is_kept_by_the_janitor(
        spark, db, hdfs_cluster, viewfs, hms, ts_env):
    """Table ``events`` on ``hdfs://`` has a partition displaced by a swap; table ``other``, on
    ``viewfs://``, references that directory through the mount (another path). The janitor keeps it, saying
    which partition references it, deletes the other displaced directory, and ``other`` reads its rows."""
    root = f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    table = create_events(spark, db, root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    displaced = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 3}, "v2"), table)
    shared, unshared = displaced[(today(0),)], displaced[(today(1),)]
    other_root = viewfs(f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}")
    spark.sql(f"CREATE TABLE {db}.other (id BIGINT, batch STRING) PARTITIONED BY (dt STRING) STORED AS PARQUET "
              f"LOCATION '{other_root}'")
    spark.sql(f"ALTER TABLE {db}.other ADD PARTITION (dt='{today(0)}') LOCATION '{viewfs(shared)}'")
    assert partition_locations(hms, db, "other")[(today(0),)] == viewfs(shared)

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    outcomes = {o.location: o for o in report.outcomes if o.kind == "displaced"}
    kept = outcomes[loc.normalize(shared)]
    assert kept.outcome == O_REFUSED and "still referenced" in kept.reason and f"{db}.other" in kept.reason, kept
    assert storage.has_data_files(shared)
    assert outcomes[loc.normalize(unshared)].outcome == O_DELETED and not storage.exists(unshared)
    assert reader_view(spark, f"{db}.other") == {(today(0),): (2, ("v1",))}
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}


def test_a_swap_into_a_viewfs_table_then_the_janitor(spark, db, hdfs_cluster, viewfs, hms, ts_env):
    """A table whose location is spelled through the mount: the swap stages under its root (through viewfs),
    the new partitions are ``viewfs://`` locations with their file counts, Spark reads the new rows, and the
    janitor deletes the displaced directory (the same directory on ``hdfs://`` is gone)."""
    under = f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    table = create_events(spark, db, viewfs(under))
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    [displaced] = partition_locations(hms, db, "events").values()

    result = swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 3}, "v2"), table)

    table_location = hms.get_table(db, "events").location
    assert table_location.startswith(viewfs(under))
    staging = loc.join(table_location, "_tableswap", result.swap_id)
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    for values in [(today(0),), (today(1),)]:
        assert loc.is_within(parts[values].location, staging) and parts[values].location.startswith("viewfs://")
        assert int(parts[values].parameters["numFiles"]) >= 1
    on_hdfs = f"{hdfs_cluster.url}/warehouse{loc.split(staging)[2][len(hdfs.VIEWFS_MOUNT):]}"
    assert storage.has_data_files(on_hdfs)  # the same files, spelled hdfs://
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    assert [(o.location, o.outcome) for o in report.outcomes if o.kind == "displaced"] == [
        (loc.normalize(displaced), O_DELETED)]
    assert not storage.exists(displaced)
    assert not storage.exists(f"{hdfs_cluster.url}/warehouse{loc.split(displaced)[2][len(hdfs.VIEWFS_MOUNT):]}")
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}
