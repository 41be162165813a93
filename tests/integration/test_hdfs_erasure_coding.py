"""Swaps on a table whose root has an HDFS erasure-coding policy, against a real NameNode with three DataNodes
(``hdfs_acl_ec_cluster``, tests/conftest.py): the swapped partitions' files are erasure coded too, and their
statistics say nothing wrong about it.

The policy is ``XOR-2-1-1024k``, the cheapest Hadoop ships (two data blocks and one parity block a stripe,
so three DataNodes), enabled and set through Hadoop's own client in the session's Spark driver, as
``hdfs ec -enablePolicy`` and ``hdfs ec -setPolicy`` do; hdfs-native has no call for either, nor tells whether
a file is erasure coded, so the checks read ``FileStatus.isErasureCoded()`` there too.
"""

from __future__ import annotations

import uuid

import pytest

from tableswap import swap_partitions
from tableswap.core import locations as loc
from tableswap.metastore.client import parse_uri

from ..conftest import selected_hive_version
from ..support.helpers import batch_df, create_events, partition_locations, raw_hms, reader_view, today

pytestmark = [pytest.mark.integration, pytest.mark.hdfs, pytest.mark.hdfs_releases]

POLICY = "XOR-2-1-1024k"


def hadoop_fs(spark, url: str):
    """Hadoop's FileSystem for ``url`` in the session's driver (a DistributedFileSystem)."""
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(url), spark.sparkContext._jsc.hadoopConfiguration())


def data_files(spark, fs, location: str) -> dict[str, bool]:
    """Each data file below ``location``: whether it is erasure coded."""
    found = fs.listFiles(spark.sparkContext._jvm.org.apache.hadoop.fs.Path(location), True)
    out = {}
    while found.hasNext():
        status = found.next()
        if not status.getPath().getName().startswith(("_", ".")):
            out[status.getPath().toString()] = status.isErasureCoded()
    return out


def test_partitions_swapped_under_an_erasure_coded_root_are_erasure_coded_and_their_statistics_say_so_rightly(
        spark, db, hdfs_acl_ec_cluster, hms, ts_env, monkeypatch, metastore_uri):
    """The staging directory is made under the table's root (``<root>/_tableswap/<swap id>/``), so it and
    everything Spark writes there inherit the root's policy: the new partitions' files are erasure coded,
    as the replaced ones were. ``numFiles`` counts them; ``numFilesErasureCoded`` (a Hive 3+ statistic) is
    left to the metastore on HDFS, where tableswap cannot tell it: a stale value on the replaced partition is
    not carried over, and tableswap writes no 0 of its own. 2.3 has no such statistic and 3.1.3 counts none
    (TABLESWAP_TEST_HIVE_VERSION); 4.0.1 counts it for an added partition (add_partitions, from its own
    listing) but not for a replaced one (alter_partitions keeps the parameters given). A partition without it
    is unknown to Hive, never wrong."""
    counts_added = int(selected_hive_version().split(".")[0]) >= 4
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_acl_ec_cluster.conf_dir))
    root = f"{hdfs_acl_ec_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    fs = hadoop_fs(spark, hdfs_acl_ec_cluster.url)
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
    fs.enableErasureCodingPolicy(POLICY)
    fs.mkdirs(path(root))
    fs.setErasureCodingPolicy(path(root), POLICY)
    table = create_events(spark, db, root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    assert set(data_files(spark, fs, old[(today(0),)]).values()) == {True}  # Spark's own write: erasure coded
    with raw_hms(parse_uri(metastore_uri)[1]) as client:  # as a Hive 3 writer could have left it
        part = client.get_partition_by_name(db, "events", f"dt={today(0)}")
        part.parameters["numFilesErasureCoded"] = "0"
        client.alter_partition(db, "events", part)

    result = swap_partitions(batch_df(spark, {(today(0),): 3, (today(2),): 3}, "v2"), table)

    staging = loc.join(hms.get_table(db, "events").location, "_tableswap", result.swap_id)
    assert fs.getErasureCodingPolicy(path(staging)).getName() == POLICY
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    for values, added in [((today(0),), False), ((today(2),), True)]:
        partition = parts[values]
        assert loc.is_within(partition.location, staging)
        files = data_files(spark, fs, partition.location)
        assert files and set(files.values()) == {True}, files
        assert partition.parameters["numFiles"] == str(len(files))
        if added and counts_added:
            assert partition.parameters.get("numFilesErasureCoded") == str(len(files)), partition.parameters
        else:
            assert "numFilesErasureCoded" not in partition.parameters, partition.parameters
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (2, ("v1",)),
                                         (today(2),): (3, ("v2",))}
