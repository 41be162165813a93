"""One HDFS, many spellings (pure): a nameservice, its NameNodes' ``host:port``, a host's fully qualified and
short names are one file system when the Hadoop configuration says so (``HdfsNames``, passed in as data), and
the janitor's safety rules compare them so; where the configuration cannot tell, the directory is kept."""

from __future__ import annotations

import pytest

from tableswap import storage
from tableswap.core import locations as loc
from tableswap.core.deletion_safety import LiveRef, LiveView, Roots, check_location
from tableswap.core.refindex import LocationIndex

#: A client configuration with an HA nameservice (FQDN NameNodes) and a second, single-NameNode HDFS.
PROPERTIES = {
    "fs.defaultFS": "hdfs://ns1",
    "dfs.nameservices": "ns1, ns2",
    "dfs.ha.namenodes.ns1": "nn0,nn1",
    "dfs.namenode.rpc-address.ns1.nn0": "nn0.example.com:8020",
    "dfs.namenode.rpc-address.ns1.nn1": "nn1.example.com:8020",
    "dfs.namenode.rpc-address.ns2": "archive:9000",
}
NAMES = loc.HdfsNames.from_properties(PROPERTIES)


def test_the_configuration_declares_the_nameservices_and_their_namenodes():
    assert NAMES.nameservices == (("ns1", ("nn0.example.com:8020", "nn1.example.com:8020")),
                                  ("ns2", ("archive:9000",)))
    single = loc.HdfsNames.from_properties({"fs.defaultFS": "hdfs://127.0.0.1:9000",
                                            "dfs.namenode.rpc-address": "127.0.0.1:9000"})
    assert single.nameservices == () and single.namenodes == ("127.0.0.1:9000",)
    assert loc.HdfsNames.from_properties({}) == loc.HdfsNames()


@pytest.mark.parametrize("spelling", [
    "hdfs://ns1/warehouse/t/dt=1",
    "hdfs://NS1/warehouse/t/dt=1/",
    "hdfs://nn0.example.com:8020/warehouse/t/dt=1",
    "hdfs://nn1.example.com/warehouse/t/dt=1",  # no port: 8020
    "hdfs://nn1:8020/warehouse/t/dt=1",  # the short name of a configured NameNode
    "hdfs://NN0/warehouse//t/dt=1",
])
def test_every_spelling_of_a_nameservice_is_the_nameservice(spelling):
    assert loc.same(spelling, "hdfs://ns1/warehouse/t/dt=1", NAMES)
    assert loc.is_within(spelling, "hdfs://nn1.example.com:8020/warehouse/t", NAMES)
    assert loc.is_within("hdfs://ns1/warehouse/t/dt=1/part-0.parquet", spelling, NAMES)
    assert not loc.same(spelling, "hdfs://ns1/warehouse/t/dt=2", NAMES)
    # Without the configuration only the written spelling counts (what the janitor compared before).
    if loc.split(loc.normalize(spelling))[1] != "ns1":
        assert not loc.same(spelling, "hdfs://ns1/warehouse/t/dt=1")


@pytest.mark.parametrize("other", [
    "hdfs://ns2/warehouse/t/dt=1",  # another nameservice
    "hdfs://archive:9000/warehouse/t/dt=1",  # its NameNode
    "hdfs://nn0.example.com:9000/warehouse/t/dt=1",  # a configured host on another port
    "hdfs://nn0.elsewhere.org:8020/warehouse/t/dt=1",  # another host of the same short name
    "s3a://ns1/warehouse/t/dt=1",
])
def test_what_the_configuration_does_not_make_one_stays_apart(other):
    assert not loc.same(other, "hdfs://ns1/warehouse/t/dt=1", NAMES)


def test_a_short_name_two_configured_hosts_share_is_not_resolved():
    names = loc.HdfsNames.from_properties({"dfs.nameservices": "a,b", "dfs.namenode.rpc-address.a": "nn.x.com:8020",
                                           "dfs.namenode.rpc-address.b": "nn.y.com:8020"})
    assert names.identity("nn:8020") is None
    assert names.identity("nn.x.com") != names.identity("nn.y.com:8020")


def test_the_configuration_cannot_tell_an_unknown_namenode_from_a_known_one():
    # A host the configuration does not name, at the same path: perhaps the same HDFS (a DNS alias, an IP).
    assert NAMES.cannot_tell("hdfs://10.0.0.7:8020/warehouse/t/dt=1", "hdfs://ns1/warehouse/t")
    assert NAMES.cannot_tell("hdfs://ns1/warehouse/t", "hdfs://10.0.0.7:8020/warehouse/t/dt=1")
    assert NAMES.cannot_tell("hdfs://a:1/x", "hdfs://b:1/x")  # neither configured
    # It can: two configured file systems, one spelled twice, paths apart, or not HDFS.
    assert not NAMES.cannot_tell("hdfs://ns2/warehouse/t/dt=1", "hdfs://ns1/warehouse/t")
    assert not NAMES.cannot_tell("hdfs://nn0:8020/warehouse/t/dt=1", "hdfs://ns1/warehouse/t")
    assert not NAMES.cannot_tell("hdfs://10.0.0.7:8020/other/t/dt=1", "hdfs://ns1/warehouse/t")
    assert not NAMES.cannot_tell("s3a://b/warehouse/t/dt=1", "hdfs://ns1/warehouse/t")


def test_the_index_finds_a_reference_under_any_spelling():
    index = LocationIndex([("hdfs://nn0.example.com:8020/warehouse/t/dt=1", "p1")], NAMES)
    assert index.at("hdfs://ns1/warehouse/t/dt=1") == ["p1"]
    assert list(index.at_or_above("hdfs://nn1/warehouse/t/dt=1/f.parquet")) == ["p1"]
    assert list(index.at_or_below("hdfs://ns1/warehouse/t")) == ["p1"]
    assert index.updated([("hdfs://ns1/warehouse/t/dt=1", "p1")], []).at("hdfs://nn0:8020/warehouse/t/dt=1") == []


def _view(*refs: LiveRef, names: loc.HdfsNames | None = NAMES) -> LiveView:
    root = "hdfs://ns1/warehouse/t"
    return LiveView("db", "t", exists=True, root=root, location=root, names=names,
                    refs=(LiveRef(root, "table db.t", container=True), *refs))


def test_a_directory_another_table_references_by_a_namenode_address_is_kept():
    """Two tables reference one directory, one through the nameservice and one through a NameNode's
    host:port: the janitor, deleting what the first displaced, keeps it."""
    other = LiveRef("hdfs://nn1.example.com:8020/warehouse/t/dt=1", "partition dt=1 of table db.u")
    reason, _ = check_location("hdfs://ns1/warehouse/t/dt=1", "hdfs://ns1/warehouse/t", _view(other))
    assert reason is not None and "still referenced" in reason and "db.u" in reason
    inside, _ = check_location("hdfs://ns1/warehouse/t/dt=1/x", "hdfs://ns1/warehouse/t", _view(other))
    assert inside is not None and "inside the location of partition dt=1 of table db.u" in inside
    # Without the configuration the two spellings were two directories: deleted.
    assert check_location("hdfs://ns1/warehouse/t/dt=1", "hdfs://ns1/warehouse/t", _view(other, names=None)) \
        == (None, False)


def test_a_displaced_directory_spelled_by_a_namenode_is_inside_the_nameservice_root():
    assert check_location("hdfs://nn0:8020/warehouse/t/dt=9", "hdfs://ns1/warehouse/t", _view()) == (None, False)


def test_a_reference_the_configuration_cannot_place_keeps_the_directory_and_says_why():
    unknown = LiveRef("hdfs://10.0.0.7:8020/warehouse/t/dt=1", "partition dt=1 of table db.u")
    reason, _ = check_location("hdfs://ns1/warehouse/t/dt=1", "hdfs://ns1/warehouse/t", _view(unknown))
    assert reason is not None and "may still be referenced" in reason and "HADOOP_CONF_DIR" in reason, reason
    # Above it too (the directory holds what it may be), and below it.
    assert check_location("hdfs://ns1/warehouse/t", None, _view(unknown))[0] is not None
    below = LiveRef("hdfs://10.0.0.7:8020/warehouse/t/dt=1/x", "table db.v")
    assert "may still be referenced" in check_location("hdfs://ns1/warehouse/t/dt=1", None, _view(below))[0]
    # A path apart from it is deleted; so is one below a table root spelled that way (only its own path is live).
    assert check_location("hdfs://ns1/warehouse/t/dt=2", None, _view(unknown)) == (None, False)
    root = LiveRef("hdfs://10.0.0.7:8020/warehouse/t", "the storage root of db.w", container=True)
    assert check_location("hdfs://ns1/warehouse/t/dt=2", None, _view(root)) == (None, False)


def test_a_candidate_on_an_unplaced_spelling_of_the_root_is_kept_and_says_why():
    reason, _ = check_location("hdfs://10.0.0.7:8020/warehouse/t/dt=1", None, _view())
    assert reason is not None and "does not say whether they are one file system" in reason, reason
    assert check_location("hdfs://ns2/warehouse/t/dt=1", None, _view())[0] == \
        "outside the table's current storage root hdfs://ns1/warehouse/t"


def test_the_janitor_keeps_references_the_configuration_cannot_place_under_its_roots():
    roots = Roots(["hdfs://ns1/warehouse/t"], NAMES)
    assert roots.relevant("hdfs://nn1:8020/warehouse/t/dt=1")
    assert roots.relevant("hdfs://10.0.0.7:8020/warehouse/t/dt=1")
    assert not roots.relevant("hdfs://ns2/warehouse/t/dt=1") and not roots.relevant("hdfs://10.0.0.7/other")


def test_the_configuration_is_read_from_hadoop_conf_dir(tmp_path, monkeypatch):
    from tableswap.devmetastore.hdfs import site_xml

    (tmp_path / "core-site.xml").write_text(site_xml({"fs.defaultFS": "hdfs://ns1"}))
    (tmp_path / "hdfs-site.xml").write_text(site_xml({k: v for k, v in PROPERTIES.items() if k != "fs.defaultFS"}))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert storage.hdfs_names() == NAMES
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "missing"))
    assert storage.hdfs_names() == loc.HdfsNames()


def test_recover_finds_a_partition_at_its_old_directory_spelled_through_a_namenode():
    """A crashed swap's partition found at its old directory, written through a NameNode's address: with the
    configuration it did not land (the swap can be finished or undone), without it was "other" (manual)."""
    from tableswap.journal import PartitionChange
    from tableswap.ops.restore.recover import LANDED, NOT_LANDED, OTHER, classify

    item = PartitionChange("dt=1", "replace", "hdfs://ns1/warehouse/t/dt=1", "hdfs://ns1/warehouse/t/_tableswap/s/dt=1")
    found_old = ("hdfs://nn0.example.com:8020/warehouse/t/dt=1", None)
    assert classify(item, "s", found_old, None, NAMES).verdict == NOT_LANDED
    assert classify(item, "s", found_old, None).verdict == OTHER
    found_new = ("hdfs://nn1:8020/warehouse/t/_tableswap/s/dt=1", "s")
    assert classify(item, "s", found_new, None, NAMES).verdict == LANDED


def test_repair_leaves_a_partition_at_its_recorded_directory_spelled_through_a_namenode():
    from types import MappingProxyType

    from tableswap.core.catalog import Column, PartitionInfo, TableInfo
    from tableswap.core.records import COMMITTED, PartitionChange, SwapRecord
    from tableswap.core.repair_plan import A_LEAVE, A_REPOINT, plan_repair

    root = "hdfs://ns1/warehouse/t"
    table = TableInfo("db", "t", "EXTERNAL_TABLE", root, (Column("id", "bigint"),), (Column("dt", "string"),))
    swap = "20260601_000000_aaaa0001"
    record = SwapRecord(swap, "db", "t", "partitions", COMMITTED, root, started_at="2026-06-01T00:00:00",
                        intent_at="2026-06-01T00:00:00",
                        items=(PartitionChange("dt=1", "replace", f"{root}/dt=1", f"{root}/_tableswap/{swap}/dt=1"),))
    now = {("1",): PartitionInfo(("1",), f"hdfs://nn1:8020/warehouse/t/_tableswap/{swap}/dt=1", MappingProxyType({}))}

    def exists(_location):
        return type("Status", (), {"exists": True, "deleted_by_janitor": False})()

    [item] = plan_repair("r", table, [record], now, exists, spellings=NAMES).items
    assert item.action == A_LEAVE and item.note == "already there"
    [before] = plan_repair("r", table, [record], now, exists).items
    assert before.action == A_REPOINT


def test_a_client_is_never_reused_under_another_hadoop_configuration(tmp_path, monkeypatch):
    """hdfs-native reads the nameservice's NameNodes from HADOOP_CONF_DIR when its client is made: a process
    whose configuration names ``ns1`` elsewhere (another HADOOP_CONF_DIR, or the files rewritten) must get a
    client of that configuration, never the one made for the earlier (a listing of the wrong cluster reads as
    an empty batch). Made lazily: no NameNode is reached here."""
    pytest.importorskip("hdfs_native")
    from tableswap import storage

    def conf(name: str, port: int):
        d = tmp_path / name
        d.mkdir()
        (d / "core-site.xml").write_text("<configuration/>")
        props = {"dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn0",
                 "dfs.namenode.rpc-address.ns1.nn0": f"127.0.0.1:{port}"}
        (d / "hdfs-site.xml").write_text("<configuration>" + "".join(
            f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
            + "</configuration>")
        return d

    a, b = conf("a", 1), conf("b", 2)
    monkeypatch.setattr(storage, "_first_answer", lambda *args, **kwargs: None)  # no NameNode runs here
    monkeypatch.setenv("HADOOP_CONF_DIR", str(a))
    first, _ = storage._hdfs_filesystem("hdfs", "ns1/warehouse", {})
    assert storage._hdfs_filesystem("hdfs", "ns1/warehouse", {})[0] is first  # the same configuration: reused
    monkeypatch.setenv("HADOOP_CONF_DIR", str(b))
    assert storage._hdfs_filesystem("hdfs", "ns1/warehouse", {})[0] is not first


def test_a_namenode_that_does_not_answer_is_one_error_after_the_connect_timeout_remembered(tmp_path, monkeypatch):
    """A nameservice whose NameNode's port accepts no connection: hdfs-native would retry for minutes; the first
    request gets ``connect_timeout_s`` (0.5 s here), then one StorageError naming the nameservice, its address and
    the setting. The next call to that HDFS raises the same error at once, without asking again."""
    pytest.importorskip("hdfs_native")
    import socket

    from tableswap import errors, storage

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    (tmp_path / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.nameservices</name><value>ns9</value></property>"
        "<property><name>dfs.ha.namenodes.ns9</name><value>nn0</value></property>"
        f"<property><name>dfs.namenode.rpc-address.ns9.nn0</name><value>127.0.0.1:{port}</value></property>"
        "</configuration>")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.setattr(storage, "_UNREACHABLE", {})
    monkeypatch.setattr(storage, "_CONNECT_TIMEOUT_S", {"value": 30.0})
    storage.use_connect_timeout(0.5)

    with pytest.raises(errors.StorageError) as first:
        storage.exists("hdfs://ns9/warehouse/t")
    message = str(first.value)
    assert f"nameservice ns9: 127.0.0.1:{port}" in message and "connect_timeout_s" in message, message
    assert "nothing was read, deleted or changed" in message and "0.5 s" in message, message
    monkeypatch.setattr(storage, "_first_answer", lambda *args, **kwargs: pytest.fail("asked again"))
    with pytest.raises(errors.StorageError) as again:
        storage.list_dirs("hdfs://ns9/warehouse")
    assert again.value is first.value


#: A ``viewfs://`` mount table onto the nameservice and the archive (Hadoop's ``ViewFileSystem`` settings).
VIEWFS = loc.HdfsNames.from_properties({
    **PROPERTIES,
    "fs.viewfs.mounttable.cluster.link./data": "hdfs://ns1/warehouse",
    "fs.viewfs.mounttable.cluster.link./data/old": "hdfs://archive:9000/cold",
    "fs.viewfs.mounttable.cluster.linkFallback": "hdfs://nn0.example.com:8020/",
    "fs.viewfs.mounttable.linked.link./t": "hdfs://ns1/warehouse/t",
})


@pytest.mark.parametrize(("spelling", "stands_for"), [
    ("viewfs://cluster/data/t/dt=1", "hdfs://ns1/warehouse/t/dt=1"),
    ("viewfs://CLUSTER/data//t/dt=1/", "hdfs://ns1/warehouse/t/dt=1"),
    ("viewfs://cluster/data", "hdfs://ns1/warehouse"),
    ("viewfs://cluster/data/old/x", "hdfs://archive:9000/cold/x"),  # the deepest link
    ("viewfs://cluster/tmp/x", "hdfs://nn0.example.com:8020/tmp/x"),  # the fallback
    ("viewfs://linked/t/dt=1", "hdfs://ns1/warehouse/t/dt=1"),
])
def test_a_viewfs_path_is_the_path_its_mount_table_maps_it_to(spelling, stands_for):
    assert loc.same(spelling, stands_for, VIEWFS)
    assert loc.is_within(spelling + "/part-0.parquet", stands_for, VIEWFS)
    assert loc.is_within(stands_for + "/part-0.parquet", spelling, VIEWFS)
    # Without the configuration a viewfs path was compared as written: never the directory it mounts.
    assert not loc.same(spelling, stands_for, NAMES)


def test_what_a_mount_table_does_not_map_stays_apart():
    assert not loc.same("viewfs://cluster/data/t", "hdfs://ns2/warehouse/t", VIEWFS)
    assert not loc.same("viewfs://linked/t", "viewfs://linked/u", VIEWFS)
    assert VIEWFS.through_mounts("viewfs://linked/other") is None  # no link and no fallback
    assert VIEWFS.through_mounts("viewfs://nosuchtable/data/t") is None
    assert VIEWFS.through_mounts("hdfs://ns1/data/t") is None
    default = loc.HdfsNames.from_properties({"fs.viewfs.mounttable.default.link./data": "hdfs://ns1/warehouse"})
    assert default.through_mounts("viewfs:///data/t") == "hdfs://ns1/warehouse/t"


def test_a_directory_another_table_references_through_viewfs_is_kept():
    """Two tables reference one directory, one through the nameservice and one through a viewfs mount: the
    janitor, deleting what the first displaced, keeps it (before, a viewfs reference was compared as written
    and the directory was deleted)."""
    other = LiveRef("viewfs://cluster/data/t/dt=1", "partition dt=1 of table db.u")
    reason, _ = check_location("hdfs://ns1/warehouse/t/dt=1", "hdfs://ns1/warehouse/t", _view(other, names=VIEWFS))
    assert reason is not None and "still referenced" in reason and "db.u" in reason, reason
    inside, _ = check_location("hdfs://ns1/warehouse/t/dt=1/x", "hdfs://ns1/warehouse/t",
                               _view(other, names=VIEWFS))
    assert inside is not None and "inside the location of partition dt=1 of table db.u" in inside
    assert Roots(["hdfs://ns1/warehouse/t"], VIEWFS).relevant("viewfs://cluster/data/t/dt=1")
    # And a table whose root is spelled through viewfs keeps a directory referenced through hdfs://.
    root = "viewfs://cluster/data/t"
    view = LiveView("db", "t", exists=True, root=root, location=root, names=VIEWFS,
                    refs=(LiveRef(root, "table db.t", container=True),
                          LiveRef("hdfs://nn1:8020/warehouse/t/dt=1", "partition dt=1 of table db.u")))
    reason, _ = check_location("viewfs://cluster/data/t/dt=1", root, view)
    assert reason is not None and "still referenced" in reason and "db.u" in reason, reason
    assert check_location("viewfs://cluster/data/t/dt=2", root, view) == (None, False)


def test_a_viewfs_reference_the_configuration_cannot_map_keeps_the_directory():
    unmapped = LiveRef("viewfs://nosuchtable/warehouse/t/dt=1", "partition dt=1 of table db.u")
    reason, _ = check_location("hdfs://ns1/warehouse/t/dt=1", "hdfs://ns1/warehouse/t",
                               _view(unmapped, names=VIEWFS))
    assert reason is not None and "may still be referenced" in reason, reason
