"""Object-store (``s3a://``) locations at the storage, staging-enumeration and janitor level.

A real S3-compatible endpoint on loopback (moto's S3 emulator, the session's; see tests/support/s3.py) is
read and written through s3fs, the way tableswap does in production. Whole swaps on ``s3a://`` —
Spark writing through S3A, the metastore storing ``s3a://`` locations — are in
tests/integration/test_storage_swaps.py; the janitor test below isolates the janitor's storage side: a real
journal and the real S3 endpoint, only the metastore *reads* (the live-location snapshot) from a fake.
"""

from __future__ import annotations

import datetime as dt

import pytest

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.config import Settings
from tableswap.ops.janitor.run import O_DELETED, O_KEPT, O_REFUSED, Executor, discover
from tableswap.core.janitor_plan import plan_janitor
from tableswap.journal.queue import JanitorQueue
from tableswap.journal import STAGING, Journal, SwapRecord, utcnow
from tableswap.core.catalog import Column, PartitionInfo, TableInfo
from tableswap.runtime import Runtime
from tableswap.spark.staging import written_partitions

BUCKET = "lake"


@pytest.fixture(scope="module")
def s3_url(s3_endpoint) -> str:
    """The session's moto S3 server (tests/support/s3.py), on a loopback port."""
    return s3_endpoint.url


@pytest.fixture
def s3(s3_url, monkeypatch):
    """A fresh bucket; tableswap's storage configured explicitly for the endpoint; a boto3 client."""
    import boto3

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client("s3", endpoint_url=s3_url, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    if BUCKET not in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
        client.create_bucket(Bucket=BUCKET)
    for obj in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    storage.configure("s3", endpoint_url=s3_url, key="testing", secret="testing")
    yield client
    storage.configure("s3")


def put(client, *keys: str, body: bytes = b"data") -> None:
    for key in keys:
        client.put_object(Bucket=BUCKET, Key=key, Body=b"" if key.endswith("/") or "_SUCCESS" in key else body)


def keys(client, prefix: str = "") -> set[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


# ------------------------------------------------------------------------------- locations (pure)


def test_s3_location_normalization_and_identity():
    assert loc.normalize("s3a://lake/x/") == loc.normalize("s3a://lake/x") == "s3a://lake/x"
    assert loc.normalize("s3a://lake//x/./y/") == "s3a://lake/x/y"
    # The scheme is kept as written: what tableswap stores or shows stays s3a for Spark.
    assert loc.normalize("s3a://lake/x") != loc.normalize("s3://lake/x")
    assert loc.staging_location("s3a://lake/wh/t/", "id1") == "s3a://lake/wh/t/_tableswap/id1"
    # s3a, s3n and s3 name the same objects: equal for every comparison ...
    assert loc.same("s3a://lake/x/", "s3://lake/x")
    assert loc.same("s3n://lake/x", "s3a://lake/x")
    assert loc.is_within("s3a://lake/x/dt=1", "s3://lake/x/")
    assert loc.is_within("s3://lake/x", "s3a://lake/x")
    # ... but buckets, hosts, schemes of other stores and path segments are compared exactly.
    assert not loc.same("s3a://lake/x", "s3a://lake2/x")
    assert not loc.same("s3a://lake/x", "gs://lake/x")
    assert not loc.same("s3a://lake/x", "hdfs://lake/x")
    assert not loc.is_within("s3a://lake/xy", "s3a://lake/x")
    assert not loc.is_within("s3a://lake/x", "s3a://lake/x/y")
    assert not loc.same("s3a://lake/X", "s3a://lake/x")  # keys are case-sensitive


# ------------------------------------------------------------------------------- storage semantics


def test_only_local_disks_and_object_stores_are_known_to_hold_no_erasure_coded_file():
    for location in ("s3a://b/t/dt=1", "s3://b/t", "file:///data/t", "file:/data/t", "gs://b/t", "abfss://c@a/t",
                     "wasbs://c@a/t"):
        assert storage.never_erasure_coded(location), location
    for location in ("hdfs://nn:8020/t", "viewfs://cluster/t", "ofs://om/vol/b/t", "/data/t", "t"):
        assert not storage.never_erasure_coded(location), location


def test_storage_semantics_on_s3_prefixes(s3):
    put(s3,
        "t/only-success/", "t/only-success/_SUCCESS",   # a prefix with a marker and _SUCCESS only
        "t/marker-only/",                               # an "empty directory": just its marker
        "t/data/", "t/data/part-0.parquet", "t/data/.part-0.parquet.crc", "t/data/sub/part-1.parquet",
        "t/datax/part-9.parquet")                       # a sibling sharing the prefix "t/data"
    root = f"s3a://{BUCKET}/t"

    assert storage.exists(f"{root}/data") and storage.exists(f"{root}/marker-only")
    assert storage.exists(f"{root}/data/")  # trailing slash: same location
    assert not storage.exists(f"{root}/nothing")
    assert storage.list_dirs(root) == ["data", "datax", "marker-only", "only-success"]
    assert storage.list_dirs(f"{root}/marker-only") == []  # its own marker is not a child
    assert storage.children(f"{root}/data") == [
        (f"{root}/data/.part-0.parquet.crc", False), (f"{root}/data/part-0.parquet", False),
        (f"{root}/data/sub", True)]
    assert storage.children(f"{root}/only-success") == [(f"{root}/only-success/_SUCCESS", False)]
    # Data files: not markers, not _SUCCESS-like or hidden.
    assert storage.has_data_files(f"{root}/data")
    assert not storage.has_data_files(f"{root}/only-success")
    assert not storage.has_data_files(f"{root}/marker-only")
    assert storage.size(f"{root}/data") == 3 * len(b"data")
    assert storage.newest_mtime(f"{root}/data") is not None and storage.newest_mtime(f"{root}/nothing") is None

    # "Remove an empty directory": only markers left → they go; a _SUCCESS file is not nothing.
    assert storage.remove_empty_dir(f"{root}/marker-only")
    assert "t/marker-only/" not in keys(s3)
    assert not storage.remove_empty_dir(f"{root}/only-success")
    assert {"t/only-success/", "t/only-success/_SUCCESS"} <= keys(s3)
    assert not storage.remove_empty_dir(f"{root}/nothing")

    # Recursive delete of a prefix: everything below it and its marker; never the sibling "datax".
    storage.delete_tree(f"{root}/data/")
    assert keys(s3, "t/data/") == set()
    assert keys(s3, "t/datax") == {"t/datax/part-9.parquet"}
    storage.delete_tree(f"{root}/data")  # already gone: no error
    before = keys(s3)
    storage.make_dirs(f"{root}/new/staging")  # a prefix needs no creating: nothing is written
    assert keys(s3) == before

    failures = storage.delete_many([f"{root}/only-success", f"s3://{BUCKET}/t/nothing"])
    assert failures == {}
    assert keys(s3) == {"t/datax/part-9.parquet"}
    # The s3 and s3a spellings open the same objects.
    assert storage.exists(f"s3://{BUCKET}/t/datax") and storage.exists(f"s3n://{BUCKET}/t/datax/")


def test_surveyed_prefixes_are_listed_once_and_deleted_by_key_in_one_request(s3, s3_endpoint):
    """The janitor's object-store path: one paged LIST per prefix gives existence, bytes and keys; one
    DeleteObjects request removes the keys of several prefixes, directory markers included; a sibling
    prefix is untouched."""
    root = f"s3a://{BUCKET}/t"
    put(s3, "t/p/", "t/p/part-0.parquet", "t/p/sub/", "t/p/sub/part-1.parquet", "t/q/", "t/q/part-3.parquet",
        "t/px/part-2.parquet")
    mark = len(s3_endpoint.requests_since(0))
    found = [storage.survey(f"{root}/p"), storage.survey(f"{root}/q/")]
    assert all(f is not None for f in found)
    assert [f.location for f in found] == [f"{root}/p", f"{root}/q"]
    assert [f.bytes for f in found] == [2 * len(b"data"), len(b"data")]
    assert len(found[0].files) == 4  # two data files and two markers
    assert storage.delete_many([f.location for f in found], {f.location: f for f in found}) == {}
    assert s3_endpoint.counts(mark) == {"LIST": 2, "DELETE": 1}
    assert keys(s3) == {"t/px/part-2.parquet"}
    assert storage.survey(f"{root}/p") is None  # an empty prefix does not exist


@pytest.mark.hostile
def test_glob_and_version_characters_in_an_s3_prefix_name_are_taken_literally(s3):
    """``?``, ``*`` and ``[`` are characters of a key, not patterns (fsspec's ``rm`` expands them as
    globs), and s3fs reads ``?versionId=`` as an object version: neither may reach a sibling."""
    root = f"s3a://{BUCKET}/t"
    put(s3, "t/old?x/part-0", "t/oldAx/part-0", "t/old[1]/part-0", "t/old1/part-0", "t/o*/part-0", "t/oz/part-0",
        "t/v?versionId=1/part-0", "t/v/part-0")
    assert storage.delete_many([f"{root}/old?x", f"{root}/old[1]", f"{root}/o*"]) == {}
    assert keys(s3) == {"t/oldAx/part-0", "t/old1/part-0", "t/oz/part-0", "t/v?versionId=1/part-0", "t/v/part-0"}
    with pytest.raises(errors.UnsafeOperationError, match="versionId"):
        storage.survey(f"{root}/v?versionId=1")
    with pytest.raises(errors.UnsafeOperationError, match="versionId"):
        storage.delete_many([f"{root}/v?versionId=1"])
    # A prefix holding only directory markers goes by its listed keys, not by a pattern.
    put(s3, "t/e?/", "t/eX/", "t/eX/part-0")
    assert storage.remove_empty_dir(f"{root}/e?") and keys(s3, "t/e") == {"t/eX/", "t/eX/part-0"}
    assert "t/v/part-0" in keys(s3)


def test_keys_the_store_refuses_are_reported_not_swallowed(s3, s3_endpoint, monkeypatch):
    root = f"s3a://{BUCKET}/t"
    put(s3, "t/p/part-0.parquet")
    found = storage.survey(f"{root}/p")
    assert found is not None
    real = found.fs.call_s3

    def refuse(method, *args, **kwargs):
        if method == "delete_objects":
            return {"Errors": [{"Key": "t/p/part-0.parquet", "Code": "AccessDenied", "Message": "denied"}]}
        return real(method, *args, **kwargs)

    monkeypatch.setattr(found.fs, "call_s3", refuse)
    failures = storage.delete_many([found.location], {found.location: found})
    assert list(failures) == [found.location]
    assert "AccessDenied" in str(failures[found.location])
    assert keys(s3) == {"t/p/part-0.parquet"}


def test_credentials_and_endpoint_from_the_environment(s3, s3_url, monkeypatch):
    """Without configure(): boto's own AWS_* variables are honoured (AWS_ENDPOINT_URL included)."""
    import s3fs

    put(s3, "env/part-0.parquet")
    storage.configure("s3")
    s3fs.S3FileSystem.clear_instance_cache()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    try:
        assert storage.has_data_files(f"s3a://{BUCKET}/env")
        # fsspec's configuration (FSSPEC_S3_* variables end up here) wins over the environment.
        nowhere = {"endpoint_url": "http://127.0.0.1:9",
                   "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}}}
        monkeypatch.setitem(__import__("fsspec").config.conf, "s3", nowhere)
        s3fs.S3FileSystem.clear_instance_cache()
        with pytest.raises(Exception, match=r"127\.0\.0\.1:9"):  # the endpoint fsspec was given
            storage.exists(f"s3a://{BUCKET}/env")
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


def test_missing_s3fs_is_a_clear_configuration_error(monkeypatch):
    import fsspec

    def no_s3fs(*args, **kwargs):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_s3fs)
    with pytest.raises(errors.ConfigurationError, match="install s3fs"):
        storage.exists("s3a://lake/x")


# ------------------------------------------------------------------------------- staging enumeration


def test_written_partitions_over_an_s3_prefix_with_escaped_values(s3):
    staging = f"s3a://{BUCKET}/wh/events/_tableswap/20260601_000000_abcd1234"
    odd = "a/b c=d%é"
    base = "wh/events/_tableswap/20260601_000000_abcd1234"
    put(s3,
        f"{base}/", f"{base}/_SUCCESS",
        f"{base}/dt=2026-06-01/country=fr/part-0.parquet", f"{base}/dt=2026-06-01/country=fr/part-1.parquet",
        f"{base}/dt=2026-06-01/country=fr/.part-0.parquet.crc",
        f"{base}/dt=2026-06-01/country={pn.escape(odd)}/", f"{base}/dt=2026-06-01/country={pn.escape(odd)}/part-0.parquet",
        f"{base}/dt=2026-06-02/country=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
        f"{base}/dt=2026-06-03/", f"{base}/dt=2026-06-03/country=de/",   # markers only: no data written
        f"{base}/_temporary/0/part-9.parquet")                          # a committer's leftovers: ignored

    found = {p.values: p for p in written_partitions(staging, ("dt", "country"))}

    assert set(found) == {("2026-06-01", "fr"), ("2026-06-01", odd), ("2026-06-02", "__HIVE_DEFAULT_PARTITION__")}
    fr = found[("2026-06-01", "fr")]
    assert fr.location == f"{staging}/dt=2026-06-01/country=fr"
    assert fr.parameters == {"numFiles": "2", "totalSize": str(2 * len(b"data")),
                             "numFilesErasureCoded": "0"}  # an object store: no erasure-coded file
    assert found[("2026-06-01", odd)].location == f"{staging}/dt=2026-06-01/country={pn.escape(odd)}"
    assert loc.same(found[("2026-06-01", odd)].location + "/", f"s3://{BUCKET}/{base}/dt=2026-06-01/country={pn.escape(odd)}")
    # A directory that is not a partition of the table is refused, not silently skipped.
    put(s3, f"{base}/oops/part-0.parquet")
    with pytest.raises(errors.StagingWriteError, match="unexpected directory 'oops'"):
        written_partitions(staging, ("dt", "country"))
    assert written_partitions(f"s3a://{BUCKET}/wh/nothing-here", ("dt",)) == []


# ------------------------------------------------------------------------------- janitor on s3a


class LiveLocations:
    """A stand-in for the metastore *reads* the janitor makes (one database, one table, its partitions).

    Only the live-location snapshot comes from here; the journal, the plan, the executor and the
    storage are the real ones.
    """

    def __init__(self, table: TableInfo, partitions: list[PartitionInfo]) -> None:
        self.table, self.partitions = table, partitions

    def get_table(self, db: str, name: str) -> TableInfo:
        if (db, name) != (self.table.db, self.table.name):
            raise errors.TableNotFoundError(f"table {db}.{name} does not exist")
        return self.table

    def table_exists(self, db: str, name: str) -> bool:
        return (db, name) == (self.table.db, self.table.name)

    def list_tables(self, db: str, pattern: str = "*") -> list[str]:
        return [self.table.name] if db == self.table.db else []

    def get_tables(self, db: str, names) -> list[TableInfo]:
        return [self.table for n in names if self.table_exists(db, n)]

    def list_partitions(self, db: str, name: str) -> list[PartitionInfo]:
        return list(self.partitions) if self.table_exists(db, name) else []

    def get_partitions(self, table: TableInfo, values_list) -> dict:
        wanted = {tuple(v) for v in values_list}
        return {p.values: p for p in self.list_partitions(table.db, table.name) if p.values in wanted}

    def list_databases(self) -> list[str]:
        return [self.table.db]

    def partition_names(self, db: str, name: str) -> list[str]:
        return [p.name(self.table.partition_key_names) for p in self.list_partitions(db, name)]

    def partitions_by_names(self, db: str, name: str, names):
        wanted = set(names)
        yield [p for p in self.list_partitions(db, name) if p.name(self.table.partition_key_names) in wanted]

    def partition_locations(self, db: str, name: str, names):
        for page in self.partitions_by_names(db, name, names):
            yield [(p.values, p.location) for p in page]


def _committed_swap(journal: Journal, swap_id: str, db: str, table: str, root: str,
                    displaced: list[tuple[str, str]]) -> None:
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name=db, table_name=table, kind="partitions", state=STAGING,
                                  table_root=root, started_at=utcnow()))
    journal.record_intent(swap_id, [])
    journal.commit(swap_id, displaced)
    journal.finish(swap_id)


def test_janitor_deletes_displaced_s3a_paths_after_grace_and_refuses_unsafe_ones(s3, tmp_path):
    db, table = "lakedb", "events"
    root = f"s3a://{BUCKET}/wh/events"
    swap_a, swap_b = "20260601_000000_aaaa1111", "20260602_000000_bbbb2222"
    put(s3,
        # displaced by swap A (written by plain Spark, with a directory marker)
        "wh/events/dt=2026-06-01/", "wh/events/dt=2026-06-01/part-0.parquet", "wh/events/dt=2026-06-01/_SUCCESS",
        # a sibling sharing its prefix, never queued
        "wh/events/dt=2026-06-011/part-0.parquet",
        # swap A's data: live for dt=2026-06-01
        f"wh/events/_tableswap/{swap_a}/", f"wh/events/_tableswap/{swap_a}/_SUCCESS",
        f"wh/events/_tableswap/{swap_a}/dt=2026-06-01/part-0.parquet",
        # queued by swap A, but the metastore points dt=2026-06-02 back at it (spelled s3://)
        "wh/events/dt=2026-06-02/part-0.parquet",
        # queued by swap B with a location outside the table's root
        "elsewhere/dt=2026-06-03/part-0.parquet")
    live = LiveLocations(
        TableInfo(db=db, name=table, table_type="EXTERNAL_TABLE", location=root + "/",
                  columns=(Column("id", "bigint"),), partition_keys=(Column("dt", "string"),),
                  parameters={"EXTERNAL": "TRUE", "spark.sql.sources.provider": "parquet"}),
        [PartitionInfo(("2026-06-01",), f"{root}/_tableswap/{swap_a}/dt=2026-06-01"),
         PartitionInfo(("2026-06-02",), f"s3://{BUCKET}/wh/events/dt=2026-06-02")],
    )
    journal = Journal(f"sqlite:///{tmp_path / 'journal.db'}")
    _committed_swap(journal, swap_a, db, table, root, [("dt=2026-06-01", f"{root}/dt=2026-06-01"),
                                                       ("dt=2026-06-02", f"{root}/dt=2026-06-02/")])
    _committed_swap(journal, swap_b, db, table, root, [("dt=2026-06-03", f"s3a://{BUCKET}/elsewhere/dt=2026-06-03")])
    before = keys(s3)
    queue = JanitorQueue(journal)

    def run(now: dt.datetime):
        found = discover(live, journal, queue, f"{db}.{table}")
        plan = plan_janitor(found.entries, found.views, now=now, grace=dt.timedelta(hours=1),
                            candidates=found.candidates, unfinished=found.unfinished,
                            swap_started=found.swap_started)
        executor = Executor(live, Runtime(Settings(metastore_uri="thrift://127.0.0.1:1"), journal=journal), run_id="t",
                            lock=False)
        return {o.location: o for o in executor.execute(plan)}

    # Within the grace period: nothing is deleted.
    first = run(dt.datetime.now(dt.timezone.utc))
    assert first[f"{root}/dt=2026-06-01"].outcome == O_KEPT
    assert keys(s3) == before

    outcomes = run(dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2))

    assert outcomes[f"{root}/dt=2026-06-01"].outcome == O_DELETED
    assert outcomes[f"{root}/dt=2026-06-02"].outcome == O_REFUSED
    assert "still referenced" in outcomes[f"{root}/dt=2026-06-02"].reason
    outside = outcomes[f"s3a://{BUCKET}/elsewhere/dt=2026-06-03"]
    assert outside.outcome == O_REFUSED and "outside the table's storage root" in outside.reason
    # Exactly the displaced prefix (its objects and its marker) is gone.
    assert keys(s3) == before - {"wh/events/dt=2026-06-01/", "wh/events/dt=2026-06-01/part-0.parquet",
                                 "wh/events/dt=2026-06-01/_SUCCESS"}
    rows = {d.location: d for d in journal.deletions(states=("pending", "deleted"), db=db, table=table)}
    assert rows[f"{root}/dt=2026-06-01"].state == "deleted"
    # Refused locations stay queued (pending) with the reason recorded.
    for refused in (f"{root}/dt=2026-06-02/", f"s3a://{BUCKET}/elsewhere/dt=2026-06-03"):
        assert rows[refused].state == "pending" and rows[refused].last_error.startswith("refused")
    journal.close()
