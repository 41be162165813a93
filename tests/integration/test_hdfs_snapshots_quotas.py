"""The janitor against HDFS snapshots and quotas, on the session's local HDFS (trash off) and the one with the
trash on (tests/conftest.py): a displaced directory HDFS will not delete or move into the trash because it is
a snapshottable directory with snapshots, or because a name quota leaves no room in the trash, is kept and
reported with HDFS's reason, as a refusal for want of permission is: the run does not fail, the entry stays
queued, and every later run tries it once again.

hdfs-native has no call for snapshots nor quotas, so they are made through Hadoop's own client in the
session's Spark driver (``DistributedFileSystem.allowSnapshot``, ``createSnapshot``, ``setQuota``), as
``hdfs dfsadmin -allowSnapshot``, ``hdfs dfs -createSnapshot`` and ``hdfs dfsadmin -setQuota`` do.
"""

from __future__ import annotations

import getpass
import os
import uuid

import pytest

from tableswap import storage, swap_partitions
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.ops.janitor.run import O_DELETED, O_REFUSED, run_janitor
from tableswap.ops.janitor.status import janitor_status

from ..support.helpers import batch_df, create_events, partition_locations, reader_view, today

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]

#: Hadoop's HdfsConstants.QUOTA_RESET and QUOTA_DONT_SET (``hdfs dfsadmin -clrQuota``).
QUOTA_RESET, QUOTA_DONT_SET = -1, (1 << 63) - 1


def dfs(spark, cluster):
    """Hadoop's DistributedFileSystem of ``cluster`` in the session's Spark driver, and its ``Path``."""
    jvm = spark.sparkContext._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(cluster.url),
                                                 spark.sparkContext._jsc.hadoopConfiguration())
    return fs, jvm.org.apache.hadoop.fs.Path


def status(ts_env, table: str):
    return janitor_status(Journal(ts_env["TABLESWAP_JOURNAL_URL"]), table=table)


def displaced_partitions(spark, db: str, root: str, hms) -> tuple[str, dict[tuple[str, ...], str]]:
    """A table at ``root`` whose two partitions a swap replaced: ``(table, the displaced locations)``."""
    table = create_events(spark, db, root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    displaced = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 3}, "v2"), table)
    return table, displaced


def test_a_displaced_directory_with_snapshots_is_kept_with_hdfss_reason_and_deleted_once_they_are_gone(
        spark, db, hdfs_cluster, hms, ts_env, monkeypatch):
    """The displaced directory is snapshottable and has a snapshot: HDFS refuses to delete it (its
    SnapshotException). The janitor reports a refusal with that reason and what to do, deletes nothing of
    it, does not fail the run, goes on with the other displaced directory and lists it in ``janitor
    status``; the next run tries it once again; once the snapshot is deleted, a run deletes it. A displaced
    directory merely below a snapshotted table root is deleted (HDFS allows it: the snapshot keeps its files,
    readable under the root's ``.snapshot``)."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_cluster.conf_dir))
    root = f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    table, displaced = displaced_partitions(spark, db, root, hms)
    snapshotted, plain = displaced[(today(0),)], displaced[(today(1),)]
    fs, path = dfs(spark, hdfs_cluster)
    fs.allowSnapshot(path(snapshotted))
    fs.createSnapshot(path(snapshotted), "s1")

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    outcomes = {o.location: o for o in report.outcomes if o.kind == "displaced"}
    kept = outcomes[loc.normalize(snapshotted)]
    assert kept.outcome == O_REFUSED, kept
    assert "SnapshotException" in kept.reason and "snapshottable and already has snapshots" in kept.reason, kept
    assert "nothing was deleted" in kept.reason and "hdfs dfs -deleteSnapshot" in kept.reason, kept
    assert "\tat org.apache" not in kept.reason, kept
    assert storage.has_data_files(snapshotted)
    assert not report.errors, report.errors  # kept, as a permission refusal: the run does not fail
    assert [e.location for e in status(ts_env, table).refused] == [loc.normalize(snapshotted)]
    assert outcomes[loc.normalize(plain)].outcome == O_DELETED and not storage.exists(plain)
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}

    again = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
    assert [(o.location, o.outcome) for o in again.outcomes if o.kind == "displaced"] == [
        (loc.normalize(snapshotted), O_REFUSED)]  # once a run, no retry loop

    fs.deleteSnapshot(path(snapshotted), "s1")
    done = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
    assert [(o.location, o.outcome) for o in done.outcomes if o.kind == "displaced"] == [
        (loc.normalize(snapshotted), O_DELETED)]
    assert not storage.exists(snapshotted) and not status(ts_env, table).refused

    current = partition_locations(hms, db, "events")[(today(0),)]
    swap_partitions(batch_df(spark, {(today(0),): 4}, "v3"), table)
    fs.allowSnapshot(path(root))
    fs.createSnapshot(path(root), "s0")
    try:
        under_root = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
        assert [(o.location, o.outcome) for o in under_root.outcomes if o.kind == "displaced"] == [
            (loc.normalize(current), O_DELETED)]
        assert not storage.exists(current)
        assert storage.has_data_files(f"{root}/.snapshot/s0{loc.split(current)[2][len(loc.split(root)[2]):]}")
    finally:
        fs.deleteSnapshot(path(root), "s0")
        fs.disallowSnapshot(path(root))
    assert reader_view(spark, table) == {(today(0),): (4, ("v3",)), (today(1),): (3, ("v2",))}


def test_a_displaced_directory_the_trash_has_no_room_for_is_kept_with_hdfss_reason(
        spark, db, hdfs_trash_cluster, hms, ts_env, monkeypatch):
    """With the trash on, the janitor moves a displaced directory into the user's trash; a name quota on the
    trash's directory for it makes HDFS refuse the move (NSQuotaExceededException). The directory stays, the
    report says why and what to do (the quota, or --skip-trash), the run does not fail; once the quota is
    cleared the next run moves it."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_trash_cluster.conf_dir))
    root = f"{hdfs_trash_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    table, displaced = displaced_partitions(spark, db, root, hms)
    user = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    in_trash = f"/user/{user}/.Trash/Current{loc.split(root)[2]}"  # where the table's directories would go
    fs, path = dfs(spark, hdfs_trash_cluster)
    fs.mkdirs(path(in_trash))
    fs.setQuota(path(in_trash), 1, QUOTA_DONT_SET)  # the directory itself: no room for anything below it
    try:
        report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

        outcomes = {o.location: o for o in report.outcomes if o.kind == "displaced"}
        for location in displaced.values():
            kept = outcomes[loc.normalize(location)]
            assert kept.outcome == O_REFUSED, kept
            assert "NSQuotaExceededException" in kept.reason and "nothing was deleted" in kept.reason, kept
            assert "--skip-trash" in kept.reason and "quota" in kept.reason, kept
            assert storage.has_data_files(location)
        assert not report.errors, report.errors
        assert {e.location for e in status(ts_env, table).refused} == {
            loc.normalize(x) for x in displaced.values()}
    finally:
        fs.setQuota(path(in_trash), QUOTA_RESET, QUOTA_DONT_SET)
    done = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
    assert {o.outcome for o in done.outcomes if o.kind == "displaced"} == {O_DELETED}
    assert all(o.trash for o in done.outcomes if o.kind == "displaced")
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}


def test_hdfss_snapshot_and_quota_refusals_are_told_from_other_storage_errors_in_one_line():
    """hdfs-native raises the NameNode's refusals as RuntimeErrors carrying the Java class and the server's
    stack trace: a SnapshotException and the quota exceptions read as refusals, in one line, also as the
    cause of tableswap's own StorageError (a move into the trash); a permission refusal stays one; any other
    error is none."""
    from tableswap import errors

    snapshot = RuntimeError('RPCError("org.apache.hadoop.hdfs.protocol.SnapshotException", "The directory /w/t/dt=1 '
                            'cannot be deleted since /w/t/dt=1 is snapshottable and already has snapshots\\n\\tat '
                            'org.apache.hadoop.hdfs.server.namenode.FSDirSnapshotOp.checkSnapshot(x)\\n")')
    assert storage.refusal(snapshot) == ("snapshot", "SnapshotException: The directory /w/t/dt=1 cannot be deleted "
                                                     "since /w/t/dt=1 is snapshottable and already has snapshots")
    quota = RuntimeError('RPCError("org.apache.hadoop.hdfs.protocol.NSQuotaExceededException", "The NameSpace quota '
                         '(directories and files) of directory /user/u/.Trash/Current/w is exceeded: quota=1 file '
                         'count=2\\n\\tat x")')
    wrapped = errors.StorageError("HDFS refused to move it into the trash")
    wrapped.__cause__ = quota
    assert storage.refusal(wrapped) == ("quota", storage.error_text(quota))
    assert storage.permission_denied(wrapped) is None
    denied = RuntimeError('RPCError("org.apache.hadoop.security.AccessControlException", "Permission denied: '
                          'user=bob\\n")')
    assert storage.refusal(denied) == ("permission", "AccessControlException: Permission denied: user=bob")
    assert storage.refusal(RuntimeError('RPCError("java.io.IOException", "disk full")')) is None
    assert storage.refusal(OSError("connection reset")) is None
