"""The janitor honours every reference in the metastore, not only the swapped table's: tables and
partitions of other tables and other databases, read at discovery and re-read under the lock before each
batch (so a reference made after discovery is seen too). Real metastore, real Spark, real files."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest

from tableswap import swap_partitions
from tableswap.config import resolve
from tableswap.core import locations as loc
from tableswap.core.deletion_safety import SCOPE_DATABASE
from tableswap.core.janitor_plan import JanitorPlan, parse_duration, plan_janitor
from tableswap.journal import Journal
from tableswap.journal.queue import JanitorQueue
from tableswap.core.catalog import NewPartition
from tableswap.ops.janitor.run import O_DELETED, O_REFUSED, Executor, discover, run_janitor
from tableswap.ops.janitor.refs import ReferenceScan
from tableswap.runtime import Runtime

from ..conftest import selected_hive_version
from ..support.helpers import batch_df, create_events, reader_view, today

pytestmark = pytest.mark.integration

LATER = dt.timedelta(days=3)


def later() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + LATER


def local(location: str) -> Path:
    return Path(loc.to_local_path(location))


def janitor(table: str, **kw):
    return run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False, **kw)


@pytest.fixture
def other_db(spark, tmp_path):
    """A second database, dropped (its tables' data kept: they are EXTERNAL) at the end."""
    name = f"o_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{(tmp_path / 'other' / f'{name}.db').as_uri()}'")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture
def displaced(spark, db, tmp_path, ts_env):
    """db.events after two swaps of two days: two displaced directories (the plain Spark ones)."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "b0").write.insertInto(table)
    r0 = swap_partitions(batch_df(spark, {(today(0),): 3}, "b1"), table)
    r1 = swap_partitions(batch_df(spark, {(today(1),): 4}, "b2"), table)
    return table, r0.replaced[0].old_location, r1.replaced[0].old_location


def archive_over(spark, table: str, location: str) -> None:
    """An unpartitioned EXTERNAL table reading ``location`` (a snapshot/archive table)."""
    spark.sql(f"CREATE TABLE {table} (id BIGINT, value STRING, batch STRING) USING parquet "
              f"LOCATION '{location}'")


@pytest.mark.hostile
def test_a_table_of_another_database_at_a_displaced_directory_is_kept(spark, db, displaced, other_db, ts_env):
    events, old0, old1 = displaced
    archive_over(spark, f"{other_db}.archive", old0)
    assert spark.table(f"{other_db}.archive").count() == 2

    report = janitor(events, now=later())

    refused = {o.location: o.reason for o in report.refused}
    assert loc.normalize(old0) in refused, [(o.outcome, o.kind, o.location[-40:], o.reason[:80]) for o in report.outcomes]
    assert f"table {other_db}.archive" in refused[loc.normalize(old0)]
    assert local(old0).is_dir() and spark.table(f"{other_db}.archive").count() == 2
    # The directory nothing references is deleted, as before.
    assert loc.normalize(old1) in {o.location for o in report.deleted} and not local(old1).exists()
    assert reader_view(spark, events)[(today(0),)] == (3, ("b1",))


@pytest.mark.hostile
def test_a_hand_made_partition_of_another_table_at_a_displaced_directory_is_kept(spark, db, displaced, tmp_path,
                                                                                 ts_env):
    events, old0, old1 = displaced
    side = create_events(spark, db, tmp_path / "elsewhere", name="side")
    spark.sql(f"ALTER TABLE {side} ADD PARTITION (dt='d1') LOCATION '{old1}'")
    assert spark.table(side).count() == 2

    report = janitor(events, now=later())

    refused = {o.location: o.reason for o in report.refused}
    assert f"partition dt=d1 of table {side}" in refused[loc.normalize(old1)]
    assert local(old1).is_dir() and spark.table(side).count() == 2
    assert not local(old0).exists()


@pytest.mark.hostile
def test_references_made_after_discovery_are_seen_before_deleting(spark, db, displaced, other_db, tmp_path, ts_env):
    """A table created, and a partition added to an existing table, between discovery and deletion."""
    events, old0, old1 = displaced
    side = create_events(spark, other_db, tmp_path / "elsewhere", name="side")  # exists at discovery
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    rt = Runtime(resolve(), journal=journal)
    with rt.session() as (client, _):
        found = discover(client, journal, JanitorQueue(journal), events)
        plan = plan_janitor(found.entries, found.views, now=later(), grace=parse_duration("1h"),
                            candidates=found.candidates, unfinished=found.unfinished)
        assert sorted(a.location for a in plan.deletes if a.kind == "displaced") == sorted(
            loc.normalize(x) for x in (old0, old1))
        # After discovery: a new table over one displaced directory, a new partition over the other.
        archive_over(spark, f"{other_db}.snapshot", old0)
        spark.sql(f"ALTER TABLE {side} ADD PARTITION (dt='fix') LOCATION '{old1}'")

        # As run_janitor does: the discovery's scan, brought up to date (not read again) before the batch.
        assert found.references is not None and found.references.scanned
        partitions_read = found.references.stats.partitions
        displaced_only = JanitorPlan(now=plan.now, grace=plan.grace, keep=plan.keep,
                                     actions=tuple(a for a in plan.deletes if a.kind == "displaced"))
        outcomes = Executor(client, rt, run_id="t", views=found.views,
                            references=found.references).execute(displaced_only)
        assert found.references.stats.partitions - partitions_read == 1  # only the new partition was read

    assert {(o.outcome, o.location) for o in outcomes} == {(O_REFUSED, loc.normalize(old0)),
                                                          (O_REFUSED, loc.normalize(old1))}
    reasons = " | ".join(o.reason for o in outcomes)
    assert f"table {other_db}.snapshot" in reasons and f"partition dt=fix of table {side}" in reasons
    assert local(old0).is_dir() and local(old1).is_dir()
    assert spark.table(f"{other_db}.snapshot").count() == 2 and spark.table(side).count() == 2


def test_the_reference_scope_setting_narrows_what_is_read(spark, db, displaced, other_db, tmp_path, ts_env,
                                                         monkeypatch):
    """``[janitor] reference_scope``: "database" honours the swapped table's database only, "table" the
    table itself (and its temporary tables); the default, "metastore", every database."""
    events, old0, old1 = displaced
    archive_over(spark, f"{other_db}.archive", old0)  # another database
    side = create_events(spark, db, tmp_path / "elsewhere", name="side")  # the same database
    spark.sql(f"ALTER TABLE {side} ADD PARTITION (dt='d1') LOCATION '{old1}'")

    dry = run_janitor(table=events, dry_run=True, grace="0", force_short_grace=True, reference_scope="database", now=later())
    by_location = {o.location: o.outcome for o in dry.outcomes}
    assert by_location[loc.normalize(old0)] == "would_delete"  # the other database is not read
    assert by_location[loc.normalize(old1)] == O_REFUSED

    dry = run_janitor(table=events, dry_run=True, grace="0", force_short_grace=True, reference_scope="table", now=later())
    assert {o.location: o.outcome for o in dry.outcomes}[loc.normalize(old1)] == "would_delete"

    config = tmp_path / "tableswap.toml"
    config.write_text('[janitor]\nreference_scope = "database"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    dry = run_janitor(table=events, dry_run=True, grace="0", force_short_grace=True, now=later())
    assert {o.location: o.outcome for o in dry.outcomes}[loc.normalize(old0)] == "would_delete"
    monkeypatch.delenv("TABLESWAP_CONFIG")

    report = janitor(events, now=later())  # the default: the whole metastore
    assert {o.location for o in report.refused} == {loc.normalize(old0), loc.normalize(old1)}
    assert local(old0).is_dir() and local(old1).is_dir()
    assert not [o for o in report.outcomes if o.outcome == O_DELETED and o.kind == "displaced"]


def test_a_refresh_reads_only_what_is_new(spark, db, tmp_path, hms):
    """The re-check before each batch lists what a new reference can appear through and reads only what is
    new: for an unchanged table three light calls (its database's table names, their objects, its partition
    names) and no partition, the same view (its index built once); a partition added since is read alone.
    The full read is of locations only where the server can (HMS 4.x), and finds what full partitions say."""
    create_events(spark, db, tmp_path)
    info = hms.get_table(db, "events")
    root = info.location.rstrip("/")
    where = [f"{root}/dt=d{i}" for i in range(20)] + [
        root,  # at the table's location itself
        f"{root}x/y",  # a sibling sharing the table location's prefix (not under it)
        (tmp_path / "elsewhere" / "p").as_uri()]  # outside the table
    hms.add_partitions(info, [NewPartition((f"d{i}",), w) for i, w in enumerate(where)], {})

    refs = ReferenceScan(hms, SCOPE_DATABASE)
    refs.set_targets([(db, "events")])
    refs.scan()
    view = refs.view(db, "events")
    full = {p.name(("dt",)): loc.normalize(p.location) for p in hms.list_partitions(db, "events")}
    assert {r.partition: r.location for r in view.refs if r.partition} == full
    assert hms.reads_locations_only is (int(selected_hive_version().split(".")[0]) >= 4)

    calls, read = hms.calls, refs.stats.partitions
    refs.refresh()
    assert (hms.calls - calls, refs.stats.partitions - read) == (3, 0)
    assert refs.view(db, "events") is view

    hms.add_partitions(info, [NewPartition(("fix",), f"{root}/dt=d0")], {})
    calls = hms.calls
    refs.refresh()
    assert (hms.calls - calls, refs.stats.partitions - read) == (4, 1)
    assert [r.location for r in refs.view(db, "events").refs if r.partition == "dt=fix"] == [full["dt=d0"]]
