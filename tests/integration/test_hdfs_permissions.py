"""HDFS permissions with several users (simple authentication) against a real NameNode: who can read a swapped
partition's new data, what the writer's umask and the table root's default ACLs do, and the janitor run by a
user who may not delete what it should.

The cluster is ``hdfs_acl_ec_cluster`` (tests/conftest.py): permissions and ACLs on, the users ``ana``
(group ``analysts``), ``aud`` (``auditors``) and ``bob`` (``etl``) mapped to their groups by the NameNode.
Spark, the metastore and the suite's own hdfs-native client run as this process's user, the NameNode's
superuser; the readers and the janitor below are other users: an hdfs-native client made while
``HADOOP_USER_NAME`` names them (it reads the variable when it connects to the NameNode).
"""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from tableswap import storage, swap_partitions
from tableswap.core import locations as loc
from tableswap.ops.janitor.run import O_DELETED, O_REFUSED, run_janitor

from ..support.helpers import batch_df, create_events, partition_locations, reader_view, spark_conf, today

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]


@pytest.fixture
def acl_hdfs_root(hdfs_acl_ec_cluster, spark, monkeypatch) -> str:
    """A fresh directory on the cluster, made by its superuser."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_acl_ec_cluster.conf_dir))
    root = f"{hdfs_acl_ec_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"
    storage.make_dirs(root)
    return root


def client(cluster):
    """An hdfs-native client of ``cluster`` acting as this process's user, the NameNode's superuser."""
    from hdfs_native import Client

    return Client(cluster.url)


def path_of(location: str) -> str:
    return loc.split(location)[2]


@contextlib.contextmanager
def hdfs_user(user: str):
    """HADOOP_USER_NAME set to ``user`` for the block (hdfs-native reads it when it connects, not when a
    client is made: a client made here is used only here)."""
    before = os.environ.get("HADOOP_USER_NAME")
    os.environ["HADOOP_USER_NAME"] = user
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HADOOP_USER_NAME", None)
        else:
            os.environ["HADOOP_USER_NAME"] = before


def can_read(cluster, user: str, location: str) -> bool:
    """True if ``user`` can list ``location`` and read every data file below it (as a query would); False
    on HDFS's AccessControlException."""
    with hdfs_user(user):
        reader = client(cluster)
        try:
            files = [s for s in reader.list_status(path_of(location), True) if not s.isdir]
            assert files, location
            for status in files:
                with reader.read(status.path) as fh:
                    fh.read()
            return True
        except RuntimeError as exc:
            assert "AccessControlException" in str(exc), exc
            assert f"user={user}," in str(exc), exc
            return False


def tree(admin, location: str) -> list:
    """The FileStatus of ``location`` and of everything below it."""
    path = path_of(location)
    return [admin.get_file_info(path), *admin.list_status(path, True)]


def swapped_dirs(root: str, new: str) -> list[str]:
    """The directories from the table's root down to a new partition's: ``_tableswap``, the swap's, the
    partition's."""
    below = loc.split(new)[2][len(path_of(root)):].strip("/").split("/")
    return [loc.join(root, *below[:i]) for i in range(1, len(below) + 1)]


@contextlib.contextmanager
def writer_umask(spark, umask: str):
    """The session's Spark writes with ``umask`` (``fs.permissions.umask-mode``): Hadoop's client reads it
    from the configuration its FileSystem was made with, so the block's writes get FileSystems of their
    own (``fs.hdfs.impl.disable.cache``)."""
    with spark_conf(spark, {"fs.permissions.umask-mode": umask, "fs.hdfs.impl.disable.cache": "true"}):
        yield


def test_a_reader_of_the_tables_group_reads_the_new_partitions_and_the_writers_umask_decides_the_rest(
        spark, db, acl_hdfs_root, hdfs_acl_ec_cluster, hms, ts_env):
    """The new partition's directories take their group from their parent (HDFS's rule), so a reader who
    could read the replaced partition through the table's group reads the new one, as long as the writer's
    umask leaves the group its read bits (Hadoop's default 022, or 027). With 077 the new files are the
    writer's alone: the umask, not tableswap, decides."""
    admin = client(hdfs_acl_ec_cluster)
    admin.set_owner(path_of(acl_hdfs_root), None, "analysts")
    admin.set_permission(path_of(acl_hdfs_root), 0o750)  # the group reads, others nothing
    table = create_events(spark, db, acl_hdfs_root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")[(today(0),)]
    assert can_read(hdfs_acl_ec_cluster, "ana", old) and not can_read(hdfs_acl_ec_cluster, "bob", old)

    with writer_umask(spark, "027"):
        result = swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table)

    new = result.replaced[0].new_location
    root = hms.get_table(db, "events").location
    assert {s.group for s in tree(admin, root)} == {"analysts"}  # every directory and file below the root
    assert can_read(hdfs_acl_ec_cluster, "ana", new) and not can_read(hdfs_acl_ec_cluster, "bob", new)
    files = [s for s in tree(admin, new) if not s.isdir]
    assert {s.permission for s in files} == {0o640}  # 0666 less the umask 027
    assert reader_view(spark, table)[(today(0),)] == (3, ("v2",))

    with writer_umask(spark, "077"):
        private = swap_partitions(batch_df(spark, {(today(0),): 4}, "v3"), table).replaced[0].new_location

    assert {s.permission for s in tree(admin, private) if not s.isdir} == {0o600}
    assert not can_read(hdfs_acl_ec_cluster, "ana", private)  # its group no longer reads what the table now points at
    # tableswap's own directories (made through hdfs-native, which applies no umask) are 0755, as
    # `hdfs dfs -mkdir` with the default umask makes them: the partition's directory below is Spark's.
    swap_dir, partition_dir = swapped_dirs(root, private)[1:]
    assert admin.get_file_info(path_of(swap_dir)).permission == 0o755
    assert admin.get_file_info(path_of(partition_dir)).permission == 0o700


def test_default_acls_on_the_table_root_reach_the_new_partitions_whatever_the_writers_umask(
        spark, db, acl_hdfs_root, hdfs_acl_ec_cluster, hms, ts_env):
    """A default ACL on the table's root (``hdfs dfs -setfacl -m default:group:auditors:r-x``) is inherited
    by every directory made below it, tableswap's ``_tableswap/<swap id>/`` and Spark's partition directories
    alike, and the files take it as their access ACL: a reader of the ACL's group reads the new partitions.
    Where a parent has a default ACL, HDFS ignores the writer's umask (POSIX ACL inheritance,
    ``dfs.namenode.posix.acl.inheritance.enabled``, on by default): even 077 leaves them readable."""
    from hdfs_native import AclEntry

    admin = client(hdfs_acl_ec_cluster)
    admin.set_permission(path_of(acl_hdfs_root), 0o750)
    # hdfs dfs -setfacl -m group:auditors:r-x,default:group:auditors:r-x (and the default ACL's base entries,
    # which -setfacl copies from the mode)
    admin.modify_acl_entries(path_of(acl_hdfs_root), [
        AclEntry("group", "access", "r-x", "auditors"), AclEntry("group", "default", "r-x", "auditors"),
        AclEntry("user", "default", "rwx"), AclEntry("group", "default", "r-x"), AclEntry("other", "default", "---")])
    table = create_events(spark, db, acl_hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    old = partition_locations(hms, db, "events")[(today(0),)]
    assert can_read(hdfs_acl_ec_cluster, "aud", old)

    with writer_umask(spark, "077"):
        result = swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table)

    new = result.replaced[0].new_location
    root = hms.get_table(db, "events").location
    for directory in swapped_dirs(root, new):
        acl = admin.get_acl_status(path_of(directory))
        named = {(e.scope, e.type, e.name, e.permissions) for e in acl.entries}
        assert {("access", "group", "auditors", "r-x"), ("default", "group", "auditors", "r-x")} <= named, \
            (directory, named)
    assert can_read(hdfs_acl_ec_cluster, "aud", new)
    assert reader_view(spark, table)[(today(0),)] == (3, ("v2",))


# --------------------------------------------------------------------------- the janitor and permissions
@pytest.fixture
def janitor_as(monkeypatch):
    """Run tableswap's own storage calls as another HDFS user from here on: HADOOP_USER_NAME set and this
    process's hdfs-native clients (made for its own user) set aside until the test ends."""
    def use(user: str | None) -> None:
        if user is None:
            monkeypatch.delenv("HADOOP_USER_NAME", raising=False)
        else:
            monkeypatch.setenv("HADOOP_USER_NAME", user)
        monkeypatch.setattr(storage, "_HDFS_CLIENTS", {"pid": os.getpid()})
    return use


def test_the_janitor_refuses_what_its_user_may_not_delete_says_why_and_deletes_it_when_run_by_one_who_may(
        spark, db, acl_hdfs_root, hdfs_acl_ec_cluster, hms, ts_env, janitor_as):
    """Two displaced directories the janitor's user (``bob``) may not delete: one it may not even list
    (0700, another user's), one in a directory it may not write. Each is a refusal with HDFS's reason in the
    report, nothing deleted, the run goes on and does not fail; a later run by a user who may (here the
    superuser) deletes both."""
    admin = client(hdfs_acl_ec_cluster)
    table = create_events(spark, db, acl_hdfs_root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    displaced = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 3}, "v2"), table)
    unlistable, undeletable = displaced[(today(0),)], displaced[(today(1),)]
    admin.set_permission(path_of(unlistable), 0o700)

    janitor_as("bob")
    preview = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=True)
    [unlisted] = [o for o in preview.outcomes if o.location == loc.normalize(unlistable)]
    assert unlisted.outcome == O_REFUSED and "Permission denied: user=bob" in unlisted.reason, unlisted
    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    outcomes = {o.location: o for o in report.outcomes if o.kind == "displaced"}
    assert {outcomes[loc.normalize(x)].outcome for x in (unlistable, undeletable)} == {O_REFUSED}, outcomes
    for where, access in ((unlistable, "READ_EXECUTE"), (undeletable, "WRITE")):
        reason = outcomes[loc.normalize(where)].reason
        assert f"Permission denied: user=bob, access={access}, inode=" in reason, reason
        assert "nothing was deleted" in reason and "\tat org.apache" not in reason, reason
        assert storage.exists(where)
    assert not report.errors, report.errors  # a refusal does not fail the run
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}

    again = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
    assert {o.outcome for o in again.outcomes if o.kind == "displaced"} == {O_REFUSED}  # once a run, no loop

    janitor_as(None)
    done = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)
    assert {o.location for o in done.outcomes if o.outcome == O_DELETED} == {
        loc.normalize(unlistable), loc.normalize(undeletable)}
    assert not storage.exists(unlistable) and not storage.exists(undeletable)
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (3, ("v2",))}


def test_a_refusal_for_want_of_permission_is_told_from_other_storage_errors_in_one_line():
    """hdfs-native raises the NameNode's AccessControlException as a RuntimeError carrying the Java class and
    the server's stack trace: it reads as a permission refusal, in one line; so does a PermissionError, also
    as the cause of tableswap's own StorageError (a move into the trash); any other error is not one."""
    from tableswap import errors

    raw = RuntimeError('RPCError("org.apache.hadoop.security.AccessControlException", "Permission denied: user=bob, '
                       'access=WRITE, inode=\\"/w/t\\":root:etl:drwxr-xr-x\\n\\tat org.apache.hadoop.hdfs.server.'
                       'namenode.FSPermissionChecker.check(FSPermissionChecker.java:663)\\n")')
    line = 'AccessControlException: Permission denied: user=bob, access=WRITE, inode="/w/t":root:etl:drwxr-xr-x'
    assert storage.permission_denied(raw) == storage.error_text(raw) == line
    wrapped = errors.StorageError("HDFS refused to move it into the trash")
    wrapped.__cause__ = PermissionError(13, "Permission denied")
    assert storage.permission_denied(wrapped) == "PermissionError: [Errno 13] Permission denied"
    other = RuntimeError('RPCError("org.apache.hadoop.hdfs.protocol.QuotaExceededException", "The NameSpace quota '
                         'is exceeded\\n\\tat x")')
    assert storage.permission_denied(other) is None
    assert storage.error_text(other) == "QuotaExceededException: The NameSpace quota is exceeded"
    assert storage.permission_denied(OSError("connection reset")) is None
