"""Pure unit tests: partition names, locations, planning, settings, logging hygiene (no services)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import structlog

from tableswap import errors
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.config import resolve
from tableswap.core.catalog import BucketSpec, Column, PartitionInfo, TableInfo
from tableswap.core.eligibility import check_replaced_partitions
from tableswap.spark.staging import needs_spark_insert
from tableswap.core.plan import ADD, DROP, REPLACE, UNCHANGED, plan_partitions, plan_restore, plan_table


@pytest.mark.parametrize("raw,escaped", [
    ("2026-06-03", "2026-06-03"), ("a b", "a b"), ("x/y", "x%2Fy"), ("k=v", "k%3Dv"), ("100%", "100%25"),
    ("Zürich", "Zürich"), ("new\nline", "new%0Aline"), ("a:b", "a%3Ab"), ("#'*?[]^{\\\"", "%23%27%2A%3F%5B%5D%5E%7B%5C%22"),
])
def test_escape_matches_hive_and_round_trips(raw, escaped):
    assert pn.escape(raw) == escaped
    assert pn.unescape(escaped) == raw


def test_partition_names_and_specs():
    assert pn.partition_name(("dt", "country"), ("2026-06-03", "a/b")) == "dt=2026-06-03/country=a%2Fb"
    assert pn.parse_name("dt=2026-06-03/country=a%2Fb") == {"dt": "2026-06-03", "country": "a/b"}
    assert pn.values_for(("dt", "country"), pn.parse_name("country=DE/dt=x")) == ("x", "DE")
    assert pn.stored_value(None) == pn.DEFAULT_PARTITION == pn.stored_value("")
    with pytest.raises(errors.InvalidInputError, match="expected KEY=VALUE"):
        pn.parse_name("2026-06-03")
    with pytest.raises(errors.InvalidInputError, match="missing"):
        pn.values_for(("dt", "country"), {"dt": "x"})
    with pytest.raises(errors.InvalidInputError, match="unknown"):
        pn.values_for(("dt",), {"dt": "x", "hour": "1"})
    with pytest.raises(errors.InvalidPartitionValueError, match="at most 255"):
        pn.check_storable(("dt",), ("x" * 256,))


def test_location_normalization_and_containment():
    assert loc.normalize("file:/a/b/") == loc.normalize("file:///a/b") == loc.normalize("/a//b") == "file:///a/b"
    assert loc.normalize("S3A://Bucket/x/../y") == "s3a://bucket/y"
    assert loc.same("file:/a/b", "file:///a/b/")
    assert loc.is_within("file:/root/t/dt=1", "file:///root/t")
    assert not loc.is_within("file:/root/t2", "file:/root/t")
    assert not loc.is_within("file:/root/t/../other", "file:/root/t")
    assert not loc.is_within("s3a://other/root/t/x", "s3a://bucket/root/t")
    assert loc.staging_location("file:/w/t", "id1") == "file:/w/t/_tableswap/id1"


def _table(partitioned=True, location="file:/w/events", **params) -> TableInfo:
    return TableInfo(db="db", name="events", table_type="EXTERNAL_TABLE", location=location,
                     columns=(Column("id", "bigint"),),
                     partition_keys=(Column("dt", "string"),) if partitioned else (), parameters=params)


class FakeCatalog:
    """In-memory stand-in for the metastore's partition reads (planner tests only)."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, ...], PartitionInfo] = {}

    def add(self, table, values, location):
        self.parts[values] = PartitionInfo(values, location, {})

    def get_partitions(self, table, values_list):
        return {tuple(v): self.parts[tuple(v)] for v in values_list if tuple(v) in self.parts}


def planning_scenario(catalog, table: TableInfo, root: str):
    """Shared behaviour: run against the fake catalog here and against the real metastore in
    tests/integration/test_plan_real.py."""
    catalog.add(table, ("a",), f"{root}/dt=a")
    catalog.add(table, ("b",), f"{root}/dt=b")
    written = [
        PartitionInfo(("b",), f"{root}/_tableswap/s1/dt=b", {"numFiles": "2", "totalSize": "10"}),
        PartitionInfo(("c",), f"{root}/_tableswap/s1/dt=c", {}),
        PartitionInfo(("a",), f"{root}/dt=a", {}),
    ]
    plan = plan_partitions("s1", table, written, catalog.get_partitions(table, [p.values for p in written]))
    assert [(a.action, a.name) for a in plan.actions] == [(UNCHANGED, "dt=a"), (REPLACE, "dt=b"), (ADD, "dt=c")]
    assert loc.same(plan.replaces[0].old_location, f"{root}/dt=b")
    assert dict(plan.replaces[0].parameters) == {"numFiles": "2", "totalSize": "10"}
    assert [(n, loc.normalize(where)) for n, where in plan.displaced()] == [("dt=b", loc.normalize(f"{root}/dt=b"))]
    assert [c.values for c in plan.location_changes()] == [("b",)]
    assert [p.values for p in plan.new_partitions()] == [("c",)]
    return plan


def test_plan_partitions_with_fake_catalog():
    table = _table()
    plan = planning_scenario(FakeCatalog(), table, "file:/w/events")
    assert "replace  dt=b" in plan.describe()


def test_plan_rejects_unstorable_and_duplicate_partitions():
    table = _table()
    with pytest.raises(errors.InvalidPartitionValueError):
        plan_partitions("s", table, [PartitionInfo(("x" * 300,), "file:/w/x")], {})
    with pytest.raises(errors.InvalidInputError, match="staged twice"):
        plan_partitions("s", table, [PartitionInfo(("a",), "file:/1"), PartitionInfo(("a",), "file:/2")], {})


def test_plan_table_and_restore():
    table = _table(partitioned=False)
    plan = plan_table("s", table, "file:/w/events/_tableswap/s")
    assert plan.table_change.old_location == "file:/w/events"
    assert plan.displaced() == [("", "file:/w/events")]
    assert plan_table("s", table, "file:///w/events").is_noop
    restore = plan_restore("r", _table(), {("a",): "file:/old/a", ("b",): None, ("c",): "file:/c"},
                           {("a",): PartitionInfo(("a",), "file:/new/a"), ("b",): PartitionInfo(("b",), "file:/b"),
                            ("c",): PartitionInfo(("c",), "file:///c")})
    assert [(a.action, a.name) for a in restore.actions] == [(REPLACE, "dt=a"), (DROP, "dt=b"), (UNCHANGED, "dt=c")]
    assert sorted(restore.displaced()) == [("dt=a", "file:/new/a"), ("dt=b", "file:/b")]


def test_table_info_properties():
    t = _table(**{"spark.sql.sources.provider": "parquet", "tableswap.root": "file:/w/root"})
    assert t.storage_format == "parquet" and t.root == "file:/w/root" and t.is_external
    hive = TableInfo("db", "t", "MANAGED_TABLE", "file:/x", (), (), {}, {},
                     "org.apache.hadoop.hive.ql.io.orc.OrcSerde", "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat")
    assert hive.storage_format == "orc" and not hive.is_external


def test_bucket_spec_and_spark_insert_reasons():
    key = "spark.sql.sources.schema."
    ds = _table(**{"spark.sql.sources.provider": "parquet", key + "numBuckets": "4", key + "numBucketCols": "1",
                   key + "bucketCol.0": "ID", key + "numSortCols": "1", key + "sortCol.0": "v"})
    assert ds.bucket_spec == BucketSpec(4, ("id",), ("v",), hive=False)
    assert needs_spark_insert(ds) == "CLUSTERED BY (id) SORTED BY (v) INTO 4 BUCKETS (Spark datasource bucketing)"
    broken = _table(**{"spark.sql.sources.provider": "parquet", key + "numBuckets": "4", key + "numBucketCols": "2",
                       key + "bucketCol.0": "id"})
    assert broken.bucket_spec is None  # unreadable spec: treated as unbucketed, as Spark would fail to read it
    hive = dataclasses.replace(_table(), hive_buckets=BucketSpec(8, ("id",), (), hive=True))
    assert hive.bucket_spec.hive and "Hive bucketing" in needs_spark_insert(hive)
    assert needs_spark_insert(_table(**{"spark.sql.sources.provider": "parquet"})) is None
    padded = dataclasses.replace(_table(), columns=(Column("id", "bigint"), Column("c", "char(5)")))
    assert needs_spark_insert(padded) == "char/varchar columns"


def test_partition_with_its_own_format_is_refused():
    parquet = ("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
               "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat")
    orc = ("org.apache.hadoop.hive.ql.io.orc.OrcSerde", "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat")
    table = dataclasses.replace(_table(), serde_lib=parquet[0], input_format=parquet[1])
    same = PartitionInfo(("a",), "file:/a", {}, *parquet)
    own = PartitionInfo(("b",), "file:/b", {}, *orc)
    check_replaced_partitions(table, [same])
    with pytest.raises(errors.UnsupportedTableError, match="dt=b of db.events have their own storage format"):
        check_replaced_partitions(table, [same, own])
    # A datasource table reads every partition with the table's provider: nothing to refuse.
    check_replaced_partitions(dataclasses.replace(table, parameters={"spark.sql.sources.provider": "parquet"}), [own])


def test_settings_precedence(monkeypatch):
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", "thrift://env:1")
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", "sqlite:///env.db")
    assert resolve().metastore_uri == "thrift://env:1"
    assert resolve(metastore_uri="thrift://kw:2").metastore_uri == "thrift://kw:2"
    assert resolve().journal_url == "sqlite:///env.db"
    monkeypatch.delenv("TABLESWAP_METASTORE_URI")

    class FakeConf:
        def get(self, key, default=None):
            return {"spark.hadoop.hive.metastore.uris": "thrift://spark:3"}.get(key, default)

    class FakeSpark:
        conf = FakeConf()

    assert resolve(spark=FakeSpark()).metastore_uri == "thrift://spark:3"
    with pytest.raises(errors.ConfigurationError, match="no Hive Metastore configured"):
        resolve()
    with pytest.raises(errors.ConfigurationError, match="unknown tableswap option"):
        resolve(metastore_uri="thrift://x:1", bogus=1)


def test_error_hierarchy_has_one_root_and_retryability():
    assert issubclass(errors.SwapConflictError, errors.TableSwapError) and errors.SwapConflictError.retryable
    assert issubclass(errors.SchemaMismatchError, errors.InvalidInputError) and not errors.SchemaMismatchError.retryable
    assert errors.CatalogUnavailableError.retryable and errors.LockTimeoutError.retryable


def test_library_never_configures_logging(caplog):
    from tableswap.logs import get_logger

    root_handlers = list(logging.getLogger().handlers)
    was_configured = structlog.is_configured()
    with caplog.at_level(logging.INFO, logger="tableswap"):
        get_logger("tableswap.test").bind(swap_id="s1").info("swap.step", table="db.t")
    assert structlog.is_configured() == was_configured
    assert logging.getLogger().handlers == root_handlers
    if not was_configured:
        assert any("swap.step" in r.getMessage() and "swap_id='s1'" in r.getMessage() for r in caplog.records)


def test_a_non_dataframe_is_refused_before_anything_else():
    from tableswap import swap_partitions, swap_table

    for call in (swap_partitions, swap_table):
        with pytest.raises(errors.InvalidInputError, match="expected a pyspark DataFrame .* got builtins.list"):
            call([("2026-06-03", 1)], "db.events", metastore_uri="thrift://127.0.0.1:1")


def test_spark_helpers_are_duck_typed():
    from tableswap.spark import api as sparkapi

    class Conf:
        def __init__(self, values):
            self.values = values

        def get(self, key, default=None):
            if key == "broken":
                raise RuntimeError("stopped")
            return self.values.get(key, default)

    class FakeConnectSession:  # what matters is the module, like pyspark.sql.connect.session
        conf = Conf({"spark.app.id": "app-42", "spark.sql.catalogImplementation": "in-memory"})

    FakeConnectSession.__module__ = "pyspark.sql.connect.session"
    session = FakeConnectSession()
    assert sparkapi.is_connect(session)
    assert sparkapi.app_id(session) == "app-42"  # never asks a Connect session for its sparkContext
    assert sparkapi.conf_get(session, "broken", "dflt") == "dflt"
    assert sparkapi.conf_get(None, "x") is None
    from tableswap.spark.api import require_hive_catalog

    with pytest.raises(errors.ConfigurationError, match="Spark Connect server has no Hive support"):
        require_hive_catalog(session)


def test_make_dirs_creates_nested_local_directories_and_is_idempotent(tmp_path):
    from tableswap import storage

    target = tmp_path / "root" / "_tableswap" / "20260101_000000_abcd"
    storage.make_dirs(target.as_uri())
    assert target.is_dir()
    (target / "part-0.parquet").write_bytes(b"x")
    storage.make_dirs(f"file:{target}")  # already there (another spelling): kept as it is
    assert [p.name for p in target.iterdir()] == ["part-0.parquet"]


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("sqlite:////tmp/journal.db", "sqlite:////tmp/journal.db"),
    ("postgresql://u:s3cret@[::1:5/db", "postgresql://u:***@[::1:5/db"),  # unparsable: still hidden
    ("postgresql://u:s3cret@h:99999999/db", "postgresql://u:***@h:99999999/db"),
])
def test_hide_password_hides_only_the_password(url, shown):
    from tableswap.core.names import hide_password

    assert hide_password(url) == shown


# ------------------------------------------------------------ hostile names and location spellings

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@pytest.mark.hostile
def test_partition_names_are_parsed_exactly_not_stripped():
    assert pn.parse_name("dt=a ") == {"dt": "a "}
    assert pn.parse_name("dt=a\u00a0") == {"dt": "a\u00a0"}
    assert pn.parse_name(" dt=a") == {" dt": "a"}  # a key is what it is, too (values_for refuses it)
    assert pn.parse_name("dt=\ta/country=\n") == {"dt": "\ta", "country": "\n"}
    assert len({tuple(pn.parse_name(f"dt={v}").values()) for v in ("a", "a ", "a\u00a0", " a")}) == 4
    assert pn.escape("\x00") == "%00"  # Hive escapes every control character, NUL included


@pytest.mark.hostile
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True), st.text(max_size=8)),
                min_size=1, max_size=4, unique_by=lambda kv: kv[0].lower()))
def test_partition_names_round_trip_any_value(pairs):
    keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    name = pn.partition_name(keys, values)
    assert pn.parse_name(name) == {k.lower(): v for k, v in pairs}
    assert pn.values_for(keys, pn.parse_name(name)) == tuple(values)


@pytest.mark.hostile
@pytest.mark.parametrize("location,norm", [
    ("file:///a/b#c?d", "file:///a/b#c?d"),
    ("file:/a/b?x=1#y/", "file:///a/b?x=1#y"),
    ("/a/#b/../c", "file:///a/c"),
    ("s3a://Bucket/t/x#1?q", "s3a://bucket/t/x#1?q"),
    ("hdfs://nn:8020/t/?", "hdfs://nn:8020/t/?"),
])
def test_hash_and_question_mark_are_part_of_the_path(location, norm):
    assert loc.normalize(location) == norm
    assert loc.to_local_path("file:///a/b#c") == "/a/b#c"
    assert not loc.same("file:///a/b#c", "file:///a/b")
    assert not loc.same("s3a://b/t/x?y", "s3a://b/t/x")
    assert loc.is_within("file:///a/b#c/x", "file:///a/b#c")
    assert not loc.is_within("file:///a/b#c", "file:///a/b")
    assert not loc.is_within("file:///a/b", "file:///a/b#c")
    assert loc.path_of("s3a://b/t/x#1") == "/t/x#1" and loc.path_of("/a?b") == "/a?b"
    # urllib also dropped tabs and new lines: a path keeps every character.
    assert loc.normalize("file:///a/b\nc\t") == "file:///a/b\nc\t" and not loc.same("/a/b\nc", "/a/bc")


@pytest.mark.parametrize("a,b", [
    ("s3a://b/t/x", "s3://b/t/x"), ("s3n://b/t/x", "s3a://b/t/x/"),
    ("abfs://c@acct.dfs.core.windows.net/t", "abfss://c@acct.dfs.core.windows.net/t"),
    ("wasb://c@acct.blob.core.windows.net/t", "wasbs://c@acct.blob.core.windows.net/t"),
    ("wasbs://c@acct.blob.core.windows.net/t", "abfss://c@acct.dfs.core.windows.net/t"),
    ("gs://b/t", "gcs://b/t"),
    ("hdfs://nn/t", "hdfs://nn:8020/t"), ("hdfs://NN.example.com/t", "hdfs://nn.example.com:8020/t/"),
    ("hdfs://[::1]/t", "hdfs://[::1]:8020/t"),
    ("file:/x", "file:///x"), ("/x", "file:///x"), ("file://localhost/x", "/x"),
])
def test_one_store_spelled_two_ways_is_one_location(a, b):
    assert loc.same(a, b) and loc.key(a) == loc.key(b)
    assert loc.is_within(f"{a}/dt=1", b) and loc.is_within(a, b) and loc.is_within(b, a)


@pytest.mark.parametrize("a,b", [
    ("hdfs://nn:9000/t", "hdfs://nn/t"), ("hdfs://nn/t", "hdfs://nn2/t"), ("hdfs://nn:8020/t", "hdfs://nn:8021/t"),
    ("gs://b/t", "s3://b/t"), ("abfs://c@acct.dfs.core.windows.net/t", "abfs://c@other.dfs.core.windows.net/t"),
    ("abfs://c@acct.dfs.core.windows.net/t", "abfs://d@acct.dfs.core.windows.net/t"),
    ("s3a://b/t", "s3a://b/T"), ("hdfs://nn/t", "file:///t"), ("viewfs://x/t", "hdfs://x/t"),
])
def test_different_stores_or_paths_stay_apart(a, b):
    assert not loc.same(a, b) and not loc.is_within(a, b) and not loc.is_within(b, a)


_SPELLINGS = [("s3a://", "s3://", "s3n://"), ("abfs://c@a.dfs.core.windows.net", "abfss://c@a.dfs.core.windows.net",
              "wasb://c@a.blob.core.windows.net", "WASBS://C@A.BLOB.CORE.WINDOWS.NET"),
              ("gs://b", "gcs://b", "GS://B"), ("hdfs://nn", "hdfs://nn:8020", "hdfs://NN:8020"),
              ("file://", "file:", "")]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_SPELLINGS).flatmap(lambda group: st.tuples(st.sampled_from(group), st.sampled_from(group))),
       st.lists(st.sampled_from(["t", "a b", "x#1", "y?z", "dt=1", "..", ".", "", "%2F"]), max_size=5),
       st.sampled_from(["", "/"]))
def test_spellings_of_one_store_have_one_key(bases, segments, trailing):
    path = "/d/" + "/".join(segments) + trailing  # "//x" right after a scheme would be an authority
    first, second = (b if not b.startswith("s3") else b + "bucket" for b in bases)
    assert loc.key(first + path) == loc.key(second + path)
    assert loc.is_within(first + path + "/child", second + path)
    assert loc.normalize(loc.normalize(first + path)) == loc.normalize(first + path)


@pytest.mark.parametrize("markexpr, asked", [
    ("hostile", True), ("campaign or hostile or fault", True), ("fault and not glue", True),
    ("not fault", False), ("", False), ("integration and not default_metastore", False),
    ("integration and not cluster and not campaign and not spark_processes", False),
])
def test_the_campaign_report_is_asked_for_by_whole_marker_words(markexpr, asked):
    from tests.support.report import asked_for

    assert asked_for(markexpr) is asked
