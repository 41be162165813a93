"""The same swap behaviour on a local file system and on an object store (``s3a://``).

Each test runs twice: ``file`` (a local directory) and ``s3a`` (a fresh prefix in the session's bucket
on moto's S3 emulator — not AWS — on loopback). On ``s3a`` Spark writes and reads through Hadoop's S3A
connector (the jars resolved by ``tableswap.jvm.jars``), the development metastore stores ``s3a://``
locations (it runs with the same jars), and tableswap enumerates and deletes through s3fs.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tableswap import errors, storage, swap_partitions, swap_table
from tableswap.core import locations as loc
from tableswap.ops.janitor.run import run_janitor
from tableswap.journal import Journal
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.ops.restore.rollback import rollback

from ..support.helpers import (batch_df, create_events, metastore_snapshot, partition_locations, queue_deletions_by_hand,
                      reader_view, today)
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.integration


@dataclass
class Store:
    """Where a test's tables live: ``root`` is a fresh location URI on that storage."""

    kind: str
    root: str
    endpoint: Any = None  # tests/support/s3.py S3Endpoint for s3a

    def files(self, location: str | None = None) -> set[str]:
        """Every object/file below ``location`` (default the root), relative to it (directory markers
        excluded)."""
        base = location or self.root
        fs, path = storage.filesystem(base)
        if not fs.exists(path):
            return set()
        return {f[len(path.rstrip("/")) + 1:] for f in fs.find(path) if not f.endswith("/")}

    def exists(self, location: str) -> bool:
        return storage.exists(location)


@pytest.fixture(params=["file", "s3a"])
def store(request: pytest.FixtureRequest, tmp_path, monkeypatch) -> Store:
    if request.param == "file":
        yield Store("file", (tmp_path / "data").as_uri())
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    request.getfixturevalue("spark")  # the session is configured for the endpoint
    # tableswap's own storage access (s3fs), in this process and in CLI subprocesses.
    for name, value in {"AWS_ENDPOINT_URL": endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    storage.configure("s3", endpoint_url=endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    try:
        yield Store("s3a", f"s3a://{bucket}/{uuid.uuid4().hex[:10]}", endpoint)
    finally:
        storage.configure("s3")


def _scheme(location: str) -> str:
    return location.split(":", 1)[0]


# ------------------------------------------------------------------------------ swap_partitions


def test_backfill_replaces_adds_and_an_identical_rerun_changes_nothing_visible(spark, db, store, hms, ts_env):
    table = create_events(spark, db, store.root)
    root = loc.join(store.root, "events")
    days = [today(i) for i in range(3)]
    batch_df(spark, {(d,): 5 for d in days}, "initial").write.insertInto(table)
    old = partition_locations(hms, db, "events")
    assert {_scheme(p) for p in old.values()} == {store.kind}

    backfill = {(days[1],): 7, (today(3),): 4}
    result = swap_partitions(batch_df(spark, backfill, "backfill"), table)

    assert [c.partition for c in result.added] == [f"dt={today(3)}"]
    assert [c.partition for c in result.replaced] == [f"dt={days[1]}"]
    view = reader_view(spark, table)
    assert view == {(days[0],): (5, ("initial",)), (days[1],): (7, ("backfill",)),
                    (days[2],): (5, ("initial",)), (today(3),): (4, ("backfill",))}
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    staging = loc.join(root, "_tableswap", result.swap_id)
    for values in [(days[1],), (today(3),)]:
        assert _scheme(parts[values].location) == store.kind
        assert loc.is_within(parts[values].location, staging)
        assert parts[values].parameters[SWAP_ID_PARAM] == result.swap_id
    assert loc.same(parts[(days[0],)].location, old[(days[0],)])
    # The displaced data is still there (readers that planned against it keep working).
    assert store.exists(old[(days[1],)]) and store.files(old[(days[1],)])
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]

    again = swap_partitions(batch_df(spark, backfill, "backfill"), table)
    assert reader_view(spark, table) == view
    assert {c.partition for c in again.replaced} == {f"dt={days[1]}", f"dt={today(3)}"}
    queued = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions(db=db, table="events")
    assert len({d.location for d in queued}) == len(queued) == 3
    assert {_scheme(d.location) for d in queued} == {store.kind}


def test_values_that_need_escaping_round_trip(spark, db, store, hms, ts_env):
    cols = ("dt", "country")
    table = create_events(spark, db, store.root, partition_cols=cols)
    batch_df(spark, {("2026-01-01", "a b"): 2}, "old", cols).write.insertInto(table)
    tricky = ["a b", "x/y", "k=v", "100%", "Zürich", "#?&"]
    result = swap_partitions(batch_df(spark, {("2026-01-01", v): 3 for v in tricky}, "new", cols), table)
    assert {c.partition for c in result.replaced} == {"dt=2026-01-01/country=a b"}
    assert "dt=2026-01-01/country=x%2Fy" in {c.partition for c in result.added}
    view = reader_view(spark, table, cols)
    assert view == {("2026-01-01", v): (3, ("new",)) for v in tricky}
    assert {p.values for p in hms.list_partitions(db, "events")} == {("2026-01-01", v) for v in tricky}


# ------------------------------------------------------------------------------ swap_table


def test_swap_table_repoints_the_table_and_keeps_the_old_files(spark, db, store, hms, ts_env):
    table = f"{db}.dim"
    root = loc.join(store.root, "dim")
    spark.sql(f"CREATE TABLE {table} (id bigint, name string, batch string) USING parquet LOCATION '{root}'")
    spark.createDataFrame([(i, f"u{i}", "v1") for i in range(6)], "id bigint, name string, batch string") \
        .write.insertInto(table)
    old_files = store.files(root)
    assert old_files

    result = swap_table(spark.createDataFrame([(1, "u1", "v2")], "id bigint, name string, batch string"), table)

    info = hms.get_table(db, "dim")
    assert _scheme(info.location) == store.kind
    assert loc.same(info.location, loc.join(root, "_tableswap", result.swap_id))
    assert loc.same(info.serde_parameters["path"], info.location)
    assert [r.batch for r in spark.table(table).collect()] == ["v2"]
    assert spark.newSession().table(table).count() == 1
    assert old_files <= store.files(root)


# ------------------------------------------------------------------------------ nothing changed


def test_dry_run_and_a_schema_mismatch_change_nothing(spark, db, store, hms, ts_env):
    table = create_events(spark, db, store.root)
    batch_df(spark, {(today(0),): 3}, "old").write.insertInto(table)
    before_meta, before_files = metastore_snapshot(hms, db), store.files()

    planned = swap_partitions(batch_df(spark, {(today(0),): 1, (today(1),): 1}, "new"), table, dry_run=True)
    assert [c.partition for c in planned.replaced] == [f"dt={today(0)}"]
    assert [c.partition for c in planned.added] == [f"dt={today(1)}"]

    wrong = spark.createDataFrame([(1, 2.5, "x", today(0))], "id bigint, value double, batch string, dt string")
    with pytest.raises(errors.SchemaMismatchError):
        swap_partitions(wrong, table)

    assert metastore_snapshot(hms, db) == before_meta
    assert store.files() == before_files
    assert reader_view(spark, table) == {(today(0),): (3, ("old",))}


# ------------------------------------------------------------------------------ rollback, janitor


def test_rollback_restores_the_previous_locations(spark, db, store, hms, ts_env):
    table = create_events(spark, db, store.root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    before = partition_locations(hms, db, "events")
    swap_partitions(batch_df(spark, {(today(0),): 5, (today(2),): 1}, "v2"), table)
    assert reader_view(spark, table)[(today(0),)] == (5, ("v2",))

    rollback(table)

    assert {k: v for k, v in partition_locations(hms, db, "events").items() if k in before} == before
    assert reader_view(spark, table) == {(today(0),): (2, ("v1",)), (today(1),): (2, ("v1",))}


def test_janitor_keeps_grace_then_deletes_once_and_never_live_or_outside_root(spark, db, store, hms, ts_env):
    table = create_events(spark, db, store.root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "v1").write.insertInto(table)
    displaced = swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table).replaced[0].old_location
    live = partition_locations(hms, db, "events")

    # Within the grace period: kept.
    kept = run_janitor(grace="1h", table=table, dry_run=False)
    assert [o.location for o in kept.kept] == [loc.normalize(displaced)] and not kept.deleted
    assert store.files(displaced)

    # Journaled deletions of a live location and of one outside the table's root (displaced long ago).
    outside = loc.join(store.root, "elsewhere", "dt=x")
    spark.createDataFrame([(1,)], "id bigint").write.parquet(outside)
    root = hms.get_table(db, "events").location
    queue_deletions_by_hand(ts_env["TABLESWAP_JOURNAL_URL"], db, "events", root, [live[(today(1),)], outside])

    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    report = run_janitor(grace="1h", table=table, now=later, dry_run=False)
    assert [o.location for o in report.deleted if o.kind == "displaced"] == [loc.normalize(displaced)]
    assert not store.files(displaced)
    refused = {o.location: o.reason for o in report.refused}
    assert "still referenced" in refused[loc.normalize(live[(today(1),)])]
    assert "outside the table's storage root" in refused[loc.normalize(outside)]
    assert store.files(live[(today(1),)]) and store.files(outside)
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",)), (today(1),): (2, ("v1",))}

    again = run_janitor(grace="1h", table=table, now=later, dry_run=False)
    assert not again.deleted
