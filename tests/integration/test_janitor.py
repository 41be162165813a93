"""The janitor against the real Hive Metastore, a real SparkSession and real files."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tableswap.core import locations as loc
from tableswap import swap_partitions, swap_table
from tableswap.cli import main
from tableswap.errors import ConfigurationError
from tableswap.ops.janitor.run import O_DELETED, O_GONE, O_KEPT, O_REFUSED, O_WOULD_DELETE, discover, run_janitor, Executor
from tableswap.core.janitor_plan import parse_duration, plan_janitor
from tableswap.journal.queue import JanitorQueue
from tableswap.journal import FAILED, STAGING, Journal, PartitionChange, SwapRecord, utcnow
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_CREATED_PARAM, TEMP_FOR_PARAM, LocationChange
from tableswap.runtime import Runtime

from ..support.helpers import (SRC, batch_df, create_events, file_tree, partition_locations, queue_deletions_by_hand,
                      reader_view, start_crashing_writer, today, wait_or_kill)

pytestmark = pytest.mark.integration

LATER = dt.timedelta(days=3)  # "now" for runs that must see every queued location as old


def local(location: str) -> Path:
    return Path(loc.to_local_path(location))


def rows(journal_url: str, db: str, table: str):
    return Journal(journal_url).deletions(states=("pending", "deleted", "refused", "restored"), db=db, table=table)


def janitor(table: str, **kw):
    kw.setdefault("grace", "0")
    kw.setdefault("force_short_grace", True)
    return run_janitor(table=table, **{"dry_run": False, **kw})


def later() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + LATER


def data_files(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_"))}


def repoint(hms, db, table, values, new_location):
    """What a rollback does to the metastore: repoint one partition (compare-and-swap)."""
    info = hms.get_table(db, table)
    current = hms.get_partitions(info, [values])[values].location
    hms.alter_partition_locations(info, [LocationChange(values, current, new_location)],
                                  {SWAP_ID_PARAM: f"manual-{uuid.uuid4().hex[:6]}"})
    return current


@pytest.fixture
def daily_events(spark, db, tmp_path):
    """db.events with 3 daily partitions written by plain Spark (locations <root>/dt=...)."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 2 for i in range(3)}, "b0").write.insertInto(table)
    return table


# --------------------------------------------------------------------------------- grace and keep


def test_grace_period_is_respected(spark, db, daily_events, hms, ts_env):
    first = swap_partitions(batch_df(spark, {(today(0),): 3}, "b1"), daily_events)
    second = swap_partitions(batch_df(spark, {(today(1),): 3}, "b2"), daily_events)
    old0, old1 = first.replaced[0].old_location, second.replaced[0].old_location
    queued = {d.location: dt.datetime.fromisoformat(d.queued_at) for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")}
    assert set(queued) == {old0, old1} and queued[old0] < queued[old1]
    # A moment at which only the first displacement is older than the grace period.
    grace = parse_duration("24h")
    now = queued[old0] + grace + (queued[old1] - queued[old0]) / 2
    before = reader_view(spark, daily_events)

    report = janitor(daily_events, grace="24h", force_short_grace=False, now=now)

    assert [(o.outcome, o.location) for o in report.outcomes if o.outcome != O_KEPT] == [(O_DELETED, loc.normalize(old0))]
    assert [o.location for o in report.kept] == [loc.normalize(old1)]
    assert report.bytes_freed > 0 and report.ok
    assert not local(old0).exists() and local(old1).is_dir()
    for live in partition_locations(hms, db, "events").values():
        assert data_files(local(live))
    assert reader_view(spark, daily_events) == before
    states = {d.location: d.state for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")}
    assert states == {old0: "deleted", old1: "pending"}

    # Rerun at the same instant: nothing more to do (idempotent).
    again = janitor(daily_events, grace="24h", force_short_grace=False, now=now)
    assert not again.deleted and [o.location for o in again.kept] == [loc.normalize(old1)]
    # Default grace, real clock: everything is younger than 24h.
    assert not run_janitor(table=daily_events, dry_run=False).deleted


def test_keep_n_most_recent_displaced_locations_per_partition(spark, db, daily_events, hms, ts_env):
    results = [swap_partitions(batch_df(spark, {(today(0),): 1}, f"b{i}"), daily_events) for i in range(1, 4)]
    displaced = [r.replaced[0].old_location for r in results]  # oldest first
    report = janitor(daily_events, keep=2, now=later())
    assert sorted(o.location for o in report.deleted) == [loc.normalize(displaced[0])]
    assert sorted(o.location for o in report.kept) == sorted(loc.normalize(x) for x in displaced[1:])
    assert not local(displaced[0]).exists()
    assert all(local(x).is_dir() for x in displaced[1:])
    assert janitor(daily_events, keep=0, now=later()).deleted  # the rest goes once --keep is lowered
    assert all(not local(x).exists() for x in displaced)
    assert reader_view(spark, daily_events)[(today(0),)] == (1, ("b3",))


# --------------------------------------------------------------------------------- never delete live data


@pytest.mark.hostile
def test_a_location_made_live_again_by_a_rollback_is_never_deleted(spark, db, daily_events, hms, ts_env):
    first = swap_partitions(batch_df(spark, {(today(0),): 3}, "b1"), daily_events)
    second = swap_partitions(batch_df(spark, {(today(0),): 4}, "b2"), daily_events)
    original, b1_loc = first.replaced[0].old_location, second.replaced[0].old_location
    # Roll the partition back to its original (plain Spark) directory.
    repoint(hms, db, "events", (today(0),), original)
    assert reader_view(spark, daily_events)[(today(0),)] == (2, ("b0",))

    report = janitor(daily_events, now=later())

    refused = {o.location: o.reason for o in report.refused}
    assert "still referenced: it is the location of partition dt=" in refused[loc.normalize(original)]
    assert local(original).is_dir() and data_files(local(original))
    first_dir = loc.normalize(loc.join(hms.get_table(db, "events").location, "_tableswap", first.swap_id))
    assert sorted((o.kind, o.location) for o in report.deleted) == [
        ("displaced", loc.normalize(b1_loc)),
        ("leftover", first_dir),  # the first swap's directory, an empty shell once b1_loc went
    ]
    # The repoint was made behind the journal's back: the data it displaced is not queued, so the
    # janitor does not delete it either, and says so.
    b2_dir = loc.normalize(loc.join(hms.get_table(db, "events").location, "_tableswap", second.swap_id))
    assert "not queued" in refused[b2_dir] and data_files(local(second.replaced[0].new_location))
    assert reader_view(spark, daily_events)[(today(0),)] == (2, ("b0",))
    pending = {d.location: d for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events") if d.state == "pending"}
    assert original in pending and "still referenced" in pending[original].last_error  # stays queued


@pytest.mark.hostile
def test_the_executor_rechecks_the_live_metastore_right_before_deleting(spark, db, daily_events, hms, ts_env):
    swapped = swap_partitions(batch_df(spark, {(today(1),): 3}, "b1"), daily_events)
    old = swapped.replaced[0].old_location
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    found = discover(hms, journal, JanitorQueue(journal), daily_events)
    plan = plan_janitor(found.entries, found.views, now=later(), grace=parse_duration("1h"),
                        candidates=found.candidates, unfinished=found.unfinished)
    assert [a.location for a in plan.deletes] == [loc.normalize(old)]
    # A rollback lands between planning and deleting.
    repoint(hms, db, "events", (today(1),), old)
    from tableswap.config import resolve

    outcomes = Executor(hms, Runtime(resolve(), journal=journal), run_id="t").execute(plan)
    assert [(o.outcome, o.location) for o in outcomes] == [(O_REFUSED, loc.normalize(old))]
    assert "still referenced" in outcomes[0].reason
    assert data_files(local(old))
    assert reader_view(spark, daily_events)[(today(1),)] == (2, ("b0",))


def test_unpartitioned_table_root_loses_old_files_but_keeps_the_live_swap_directory(spark, db, tmp_path, hms, ts_env):
    table = f"{db}.dim"
    root = tmp_path / "dim"
    spark.sql(f"CREATE TABLE {table} (id bigint, name string) USING parquet LOCATION '{root.as_uri()}'")
    spark.createDataFrame([(i, f"u{i}") for i in range(5)], "id bigint, name string").write.insertInto(table)
    old_files = data_files(root)
    assert old_files
    first = swap_table(spark.createDataFrame([(1, "a")], "id bigint, name string"), table)
    second = swap_table(spark.createDataFrame([(2, "b"), (3, "c")], "id bigint, name string"), table)
    live = hms.get_table(db, "dim").location
    assert loc.same(first.table_change.old_location, root.as_uri())

    report = janitor(table, now=later())

    assert not report.errors and not report.refused
    assert {o.location for o in report.deleted} == {loc.normalize(root.as_uri()),
                                                    loc.normalize(first.table_change.new_location)}
    assert root.is_dir() and not data_files(root)  # the old files went, the root stayed
    assert local(live).is_dir() and data_files(local(live))  # the live swap directory is intact
    assert not local(first.table_change.new_location).exists()
    assert {p.name for p in root.iterdir()} == {"_tableswap"}
    assert sorted(r.id for r in spark.newSession().table(table).collect()) == [2, 3]
    assert second.swap_id in live


@pytest.mark.hostile
def test_paths_outside_the_root_or_with_dot_dot_are_refused(spark, db, daily_events, tmp_path, hms, ts_env):
    outside = tmp_path / "precious"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_text("do not delete")
    root = hms.get_table(db, "events").location
    bad = [
        outside.as_uri(),                                           # another directory
        loc.join(root, "_tableswap", "..", "..", "precious", "sub"),  # '..' escaping the root
        loc.join(root, "..", "events", "dt=" + today(0)),           # '..' even when it lands inside
        "s3a://some-bucket/warehouse/events/dt=1",                  # another scheme / bucket
    ]
    queue_deletions_by_hand(ts_env["TABLESWAP_JOURNAL_URL"], db, "events", root, bad)
    before = file_tree(tmp_path)

    report = janitor(daily_events)

    reasons = {o.location: o.reason for o in report.refused}
    assert len(reasons) == 4 and not report.deleted and not report.errors
    assert "outside the table's storage root" in reasons[loc.normalize(outside.as_uri())]
    assert sum("'..' segments" in r for r in reasons.values()) == 2
    assert file_tree(tmp_path) == before
    pending = [d for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events") if d.location in bad]
    assert len(pending) == 4 and all(d.state == "pending" and d.last_error.startswith("refused") for d in pending)
    # The CLI lists refusals and exits 0, or 5 with --strict.
    runner = CliRunner()
    args = ["janitor", "run", "--table", daily_events, "--grace", "0", "--force-short-grace"]
    assert runner.invoke(main, args).exit_code == 0
    strict = runner.invoke(main, args + ["--strict"])
    assert strict.exit_code == 5 and "REFUSED" in strict.output


# --------------------------------------------------------------------------------- orphan sweep


def test_one_run_drops_a_leftover_temp_table_and_deletes_what_it_kept_live(spark, db, daily_events, hms, ts_env):
    """Regression (metastore-fault campaign): a swap committed while the metastore went down could
    not drop its temporary table; a rerun displaced its directories. The temp table made them look
    live, so the janitor only dropped it and needed a second run to delete them. One run does both."""
    first = swap_partitions(batch_df(spark, {(today(0),): 1}, "b1"), daily_events)
    target = hms.get_table(db, "events")
    temp = f"events__tswap_{first.swap_id}"
    hms.create_staging_table(target, temp, first.staging_location, {
        TEMP_FOR_PARAM: target.qualified_name, SWAP_ID_PARAM: first.swap_id,
        TEMP_CREATED_PARAM: (dt.datetime.now(dt.timezone.utc) - LATER).isoformat()})
    swap_partitions(batch_df(spark, {(today(0),): 1}, "b2"), daily_events)  # displaces the first swap's directory
    displaced = first.added + first.replaced
    assert all(local(c.new_location).is_dir() for c in displaced)

    report = janitor(daily_events, now=later())

    assert temp not in hms.list_tables(db)
    assert {o.location for o in report.deleted} >= {loc.normalize(c.new_location) for c in displaced}
    assert not any(local(c.new_location).exists() for c in displaced)
    assert not local(first.staging_location).exists()
    assert reader_view(spark, daily_events)[(today(0),)] == (1, ("b2",))


def _hand_made_swap(hms, journal_url, db, table, *, swap_id, state, age: dt.timedelta):
    """A swap's leftovers as a crash leaves them: temp table + staging dir with a file (+ journal row)."""
    target = hms.get_table(db, table)
    staging = loc.staging_location(target.root, swap_id)
    when = dt.datetime.now(dt.timezone.utc) - age
    temp = f"{table}__tswap_{swap_id}"
    hms.create_staging_table(target, temp, staging, {TEMP_FOR_PARAM: target.qualified_name, SWAP_ID_PARAM: swap_id,
                                                     TEMP_CREATED_PARAM: when.isoformat()})
    part = local(staging) / f"dt={today(9)}"
    part.mkdir(parents=True, exist_ok=True)
    (part / "part-0.parquet").write_bytes(b"x" * 100)
    for path in (part / "part-0.parquet", part, local(staging)):
        os.utime(path, (when.timestamp(), when.timestamp()))
    if state is not None:
        Journal(journal_url).begin_swap(SwapRecord(
            swap_id=swap_id, db_name=db, table_name=table, kind="partitions", state=STAGING,
            table_root=target.root, staging_location=staging, temp_table=temp, started_at=when.isoformat()))
        if state != STAGING:
            Journal(journal_url).finish(swap_id, state=state, error="boom")
    return temp, local(staging)


def test_orphan_sweep_removes_crashed_leftovers_but_not_in_flight_ones(spark, db, daily_events, hms, ts_env):
    url = ts_env["TABLESWAP_JOURNAL_URL"]
    old = dt.timedelta(days=2)
    crashed = _hand_made_swap(hms, url, db, "events", swap_id="20200101_000000_aaaa0001", state=FAILED, age=old)
    stuck = _hand_made_swap(hms, url, db, "events", swap_id="20200101_000000_aaaa0002", state=STAGING, age=old)
    unknown_dir = local(hms.get_table(db, "events").location) / "_tableswap" / "20200101_000000_aaaa0003"
    unknown_dir.mkdir(parents=True)
    (unknown_dir / "part-0.parquet").write_bytes(b"y")
    os.utime(unknown_dir / "part-0.parquet", (0, 0))
    os.utime(unknown_dir, (0, 0))
    from tableswap.core.names import new_swap_id

    fresh_id = new_swap_id()
    in_flight = _hand_made_swap(hms, url, db, "events", swap_id=fresh_id, state=STAGING, age=dt.timedelta(0))
    before = reader_view(spark, daily_events)

    report = run_janitor(table=daily_events, grace="24h", dry_run=False)

    tables = set(hms.list_tables(db))
    assert crashed[0] not in tables and stuck[0] not in tables
    assert not crashed[1].exists() and not stuck[1].exists() and not unknown_dir.exists()
    assert in_flight[0] in tables and (in_flight[1] / f"dt={today(9)}" / "part-0.parquet").exists()
    assert any(o.outcome == O_KEPT and fresh_id in o.swap_ids for o in report.outcomes)
    assert report.ok and reader_view(spark, daily_events) == before
    journal = Journal(url)
    assert journal.get_swap("20200101_000000_aaaa0002").state == "aborted"  # stuck in staging → aborted
    assert journal.get_swap(fresh_id).state == STAGING
    orphan_rows = {d.swap_id: d.state for d in rows(url, db, "events") if d.reason == "orphan"}
    assert orphan_rows == {"20200101_000000_aaaa0001": "deleted", "20200101_000000_aaaa0002": "deleted"}


def test_a_staging_swap_whose_writer_still_beats_is_kept_however_old_its_start_and_files(spark, db, daily_events,
                                                                                        hms, ts_env):
    """A long writer (a shuffle of hours before its first file) started and last wrote files beyond the grace
    period, but its process still beats in the journal: the janitor must neither abort it nor delete its
    staging directory and temporary table (it would fail a live writer at its intent); once the beats stop for
    the grace period, it is swept. The journal's abort compares the heartbeat the janitor judged, so a beat
    between the plan and the abort keeps the swap."""
    url = ts_env["TABLESWAP_JOURNAL_URL"]
    swap_id = "20200101_000000_aaaa0021"
    temp, staging = _hand_made_swap(hms, url, db, "events", swap_id=swap_id, state=STAGING, age=dt.timedelta(days=2))
    journal = Journal(url)
    assert journal.heartbeat(swap_id)

    report = run_janitor(table=daily_events, grace="24h", dry_run=False)

    assert journal.get_swap(swap_id).state == STAGING and staging.is_dir() and temp in hms.list_tables(db)
    assert any(o.outcome == O_KEPT and swap_id in o.swap_ids for o in report.outcomes), report.outcomes
    # A day later without a beat: abandoned like any swap stuck in staging.
    report = run_janitor(table=daily_events, grace="24h", now=later(), dry_run=False)
    assert journal.get_swap(swap_id).state == "aborted" and not staging.exists() and temp not in hms.list_tables(db)
    assert report.ok


def test_an_orphan_directory_that_reappears_after_its_deletion_is_deleted_again(spark, db, daily_events, hms, ts_env):
    """A failed swap's staging directory, deleted by the janitor, is written into again afterwards (an
    executor of the swap still writing): its queue row says deleted, so the next runs must queue it again, not report it
    claimed by another janitor forever."""
    url = ts_env["TABLESWAP_JOURNAL_URL"]
    swap_id = "20200101_000000_aaaa0011"
    _, staging = _hand_made_swap(hms, url, db, "events", swap_id=swap_id, state=FAILED, age=dt.timedelta(days=2))
    assert janitor(daily_events).deleted and not staging.exists()
    [first] = [d for d in rows(url, db, "events") if d.swap_id == swap_id]
    before = reader_view(spark, daily_events)
    late = staging / f"dt={today(9)}" / "part-1.parquet"
    late.parent.mkdir(parents=True)
    late.write_bytes(b"z" * 10)

    report = janitor(daily_events, now=later())

    assert [(o.outcome, o.location) for o in report.outcomes if swap_id in o.swap_ids] == [
        (O_DELETED, loc.normalize(staging.as_uri()))], report.outcomes
    assert not staging.exists() and reader_view(spark, daily_events) == before
    [row] = [d for d in rows(url, db, "events") if d.swap_id == swap_id]
    assert first.state == row.state == "deleted" and row.deleted_at > first.deleted_at  # deleted a second time
    assert not [o for o in janitor(daily_events, now=later()).outcomes if swap_id in o.swap_ids]  # nothing left


def test_a_location_another_janitor_holds_is_skipped_with_the_holder_named(spark, db, daily_events, hms, ts_env):
    swapped = swap_partitions(batch_df(spark, {(today(1),): 3}, "b1"), daily_events)
    old = swapped.replaced[0].old_location
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    [row] = journal.deletions(db=db, table="events")
    assert JanitorQueue(journal).claim(row.swap_id, row.location, token="other", lease_s=600, queued=True,
                                       holder="elsewhere:1")
    report = janitor(daily_events, now=later())
    [skipped] = [o for o in report.outcomes if o.location == loc.normalize(old)]
    assert skipped.outcome == "skipped" and "claimed by another janitor (elsewhere:1) until" in skipped.reason
    assert data_files(local(old))


def test_orphan_sweep_after_a_real_swap_crashed_in_another_process(spark, db, daily_events, hms, ts_env, tmp_path):
    """A writer of the table's next swap is SIGKILLed right after its staging write (tests/support/helpers.py's
    start_crashing_writer): the janitor leaves its staged data while it could still be in flight, and sweeps
    it (and drops its temporary table) once it is older than the grace."""
    proc, log = start_crashing_writer(spark, hms, daily_events, tmp_path / "crash", crash_at="after_staging_write",
                                      rows_per_day={today(0): 1}, batch="crash", env=ts_env)
    assert wait_or_kill(proc, timeout=300) == -9, log.read_text()[-3000:]
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    [crashed] = journal.list_swaps(db, "events")
    assert crashed.state == STAGING
    staging = local(crashed.staging_location)
    assert staging.is_dir() and crashed.temp_table in hms.list_tables(db)
    before = reader_view(spark, daily_events)

    assert not run_janitor(table=daily_events, grace="24h", dry_run=False).deleted  # in flight as far as anyone can tell
    assert staging.is_dir()
    report = run_janitor(table=daily_events, grace="24h", now=later(), dry_run=False)

    assert not staging.exists() and crashed.temp_table not in hms.list_tables(db)
    assert journal.get_swap(crashed.swap_id).state == "aborted" and report.ok
    assert reader_view(spark, daily_events) == before


# --------------------------------------------------------------------------------- dry run, crash, concurrency


def test_dry_run_deletes_and_changes_nothing(spark, db, daily_events, hms, ts_env, tmp_path):
    swap_partitions(batch_df(spark, {(today(0),): 1, (today(1),): 1}, "b1"), daily_events)
    _hand_made_swap(hms, ts_env["TABLESWAP_JOURNAL_URL"], db, "events", swap_id="20200101_000000_aaaa0009",
                    state=FAILED, age=dt.timedelta(days=2))
    engine = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).engine

    def journal_dump():
        with engine.connect() as conn:
            return {t: sorted(map(tuple, conn.execute(sa.text(f"SELECT * FROM {t}"))))
                    for t in ("tableswap_swaps", "tableswap_deletions", "tableswap_janitor_claims",
                              "tableswap_janitor_runs")}

    before = (file_tree(tmp_path), sorted(hms.list_tables(db)), journal_dump())
    report = janitor(daily_events, dry_run=True, now=later())
    assert len(report.of(O_WOULD_DELETE)) == 3 and sum(o.bytes for o in report.of(O_WOULD_DELETE)) > 0
    assert len(report.of("would_drop_temp_table")) == 1
    assert (file_tree(tmp_path), sorted(hms.list_tables(db)), journal_dump()) == before
    result = CliRunner().invoke(main, ["janitor", "run", "--dry-run", "--grace", "0", "--force-short-grace",
                                       "--table", daily_events])
    assert result.exit_code == 0 and "would delete" in result.output
    assert (file_tree(tmp_path), sorted(hms.list_tables(db)), journal_dump()) == before
    # The library's default was the dry run: for this release dry_run is required (the CLI's `janitor run`
    # deletes unless --dry-run); a call without it is refused before it reads anything.
    with pytest.raises(ConfigurationError, match="pass dry_run=True to see the plan, dry_run=False to apply"):
        run_janitor(table=daily_events, grace="0", force_short_grace=True, now=later())
    assert (file_tree(tmp_path), sorted(hms.list_tables(db)), journal_dump()) == before


def test_a_janitor_killed_mid_batch_and_restarted_deletes_everything_exactly_once(spark, db, daily_events, hms, ts_env):
    days = [today(i) for i in range(5)]
    batch_df(spark, {(d,): 1 for d in days[3:]}, "b0").write.insertInto(daily_events)
    swap_partitions(batch_df(spark, {(d,): 1 for d in days}, "b1"), daily_events)
    displaced = sorted(d.location for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events"))
    assert len(displaced) == 5
    script = (f"from tableswap.ops.janitor.run import run_janitor; "
              f"run_janitor(table={daily_events!r}, grace='0', force_short_grace=True, batch_size=2, dry_run=False)")
    env = {**os.environ, **ts_env, "PYTHONPATH": SRC, "TABLESWAP_CRASH_AT": "janitor_mid_batch"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-3000:]

    after_crash = {d.location: d.state for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")}
    gone = {x for x in displaced if not local(x).exists()}
    recorded = {x for x, s in after_crash.items() if s == "deleted"}
    assert len(recorded) == 2 and len(gone) == 4 and recorded < gone  # batch 2 deleted, not recorded

    report = janitor(daily_events)

    assert {o.location for o in report.of(O_GONE)} == {loc.normalize(x) for x in gone - recorded}
    assert {o.location for o in report.of(O_DELETED)} == {loc.normalize(x) for x in set(displaced) - gone}
    assert all(not local(x).exists() for x in displaced)
    assert {d.state for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")} == {"deleted"}
    with Journal(ts_env["TABLESWAP_JOURNAL_URL"]).engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM tableswap_janitor_claims")).scalar() == 0
    assert reader_view(spark, daily_events) == {(d,): (1, ("b1",)) for d in days}
    assert not janitor(daily_events).deleted


def test_two_janitors_at_once_do_not_double_delete_or_fail(spark, db, daily_events, hms, ts_env):
    days = [today(i) for i in range(6)]
    batch_df(spark, {(d,): 1 for d in days[3:]}, "b0").write.insertInto(daily_events)
    swap_partitions(batch_df(spark, {(d,): 1 for d in days}, "b1"), daily_events)
    displaced = {loc.normalize(d.location) for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")}
    reports, failures = [], []
    barrier = threading.Barrier(2)

    def one():
        try:
            barrier.wait()
            reports.append(janitor(daily_events, batch_size=1))
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not failures and len(reports) == 2
    deleted = [o.location for r in reports for o in r.of(O_DELETED)]
    assert sorted(deleted) == sorted(displaced)  # each exactly once, between them
    assert all(r.ok for r in reports)
    assert all(not local(x).exists() for x in displaced)
    assert {d.state for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")} == {"deleted"}


# --------------------------------------------------------------------------------- CLI


def test_cli_json_text_and_exit_codes(spark, db, daily_events, ts_env):
    swapped = swap_partitions(batch_df(spark, {(today(2),): 1}, "b1"), daily_events)
    runner = CliRunner()
    help_text = runner.invoke(main, ["janitor", "run", "--help"]).output
    assert "--grace" in help_text and "Examples" in help_text and "Exit codes" in help_text
    short = runner.invoke(main, ["janitor", "run", "--grace", "10m", "--table", daily_events])
    assert short.exit_code == 5 and "--force-short-grace" in short.output
    bad = runner.invoke(main, ["janitor", "run", "--grace", "ten minutes"])
    assert bad.exit_code == 2
    missing = runner.invoke(main, ["janitor", "run", "--table", f"{db}.nope", "--json"])
    assert missing.exit_code == 3 and "does not exist" in json.loads(missing.output)["error"]

    kept = runner.invoke(main, ["janitor", "run", "--table", daily_events, "--json"])
    payload = json.loads(kept.output)
    assert kept.exit_code == 0 and payload["ok"] and payload["counts"] == {"kept": 1}
    assert payload["grace_seconds"] == 86400

    done = runner.invoke(main, ["janitor", "run", "--table", daily_events, "--grace", "0", "--force-short-grace", "--json"])
    payload = json.loads(done.output)
    assert done.exit_code == 0 and payload["exit_code"] == 0 and payload["bytes_freed"] > 0
    [deleted] = [o for o in payload["outcomes"] if o["outcome"] == "deleted"]
    assert deleted["location"] == loc.normalize(swapped.replaced[0].old_location)
    assert not local(swapped.replaced[0].old_location).exists()

    text = runner.invoke(main, ["janitor", "run", "--table", daily_events, "--grace", "0", "--force-short-grace"])
    assert text.exit_code == 0 and "nothing to do" in text.output and "freed 0 B" in text.output
    assert JanitorQueue(Journal(ts_env["TABLESWAP_JOURNAL_URL"])).runs()[0]["deleted"] == 0


def test_cli_exits_1_when_a_deletion_fails(spark, db, daily_events, ts_env, monkeypatch):
    swapped = swap_partitions(batch_df(spark, {(today(2),): 1}, "b1"), daily_events)
    from tableswap import storage

    # (a refusal for want of permission is not an error: tests/integration/test_hdfs_permissions.py)
    monkeypatch.setattr(storage, "delete_many", lambda locations, surveyed=None: {
        x: OSError(errno.EROFS, "read-only file system") for x in locations})
    result = CliRunner().invoke(main, ["janitor", "run", "--table", daily_events, "--grace", "0", "--force-short-grace",
                                       "--json"])
    payload = json.loads(result.output)
    assert result.exit_code == 1 and not payload["ok"] and payload["counts"] == {"error": 1}
    assert "read-only file system" in payload["outcomes"][0]["reason"]
    assert local(swapped.replaced[0].old_location).is_dir()
    [row] = [d for d in rows(ts_env["TABLESWAP_JOURNAL_URL"], db, "events")]
    assert row.state == "pending" and row.last_error.startswith("error")


# --------------------------------------------------------------------------------- property


def _rollback(hms, journal_url, db, table, values, pname, target):
    """A journaled rollback of one partition, as `tableswap rollback` records it."""
    journal = Journal(journal_url)
    info = hms.get_table(db, table)
    swap_id = f"rb_{uuid.uuid4().hex[:10]}"
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name=db, table_name=table, kind="rollback", state=STAGING,
                                  table_root=info.root, started_at=utcnow()))
    current = hms.get_partitions(info, [values])[values].location
    journal.record_intent(swap_id, [PartitionChange(pname, "replace", current, target)])
    hms.alter_partition_locations(info, [LocationChange(values, current, target)], {SWAP_ID_PARAM: swap_id})
    journal.commit(swap_id, [(pname, current)])


STEP = st.one_of(
    st.tuples(st.just("swap"), st.sets(st.integers(0, 1), min_size=1)),
    st.tuples(st.just("rollback"), st.integers(0, 1), st.integers(0, 5)),
    st.tuples(st.just("janitor"), st.sampled_from(["0", "24h"]), st.integers(0, 1)),
)


@settings(max_examples=10, deadline=None, database=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=4))
def test_property_no_live_path_is_ever_deleted_and_nothing_unreferenced_remains(spark, db, tmp_path, hms, ts_env,
                                                                                 steps):
    name = f"ev_{uuid.uuid4().hex[:8]}"
    table = create_events(spark, db, tmp_path / name, name=name)
    days = (today(0), today(1))
    batch_df(spark, {(d,): 1 for d in days}, "b0").write.insertInto(table)
    url = ts_env["TABLESWAP_JOURNAL_URL"]
    content = {loc.normalize(x): "b0" for x in partition_locations(hms, db, name).values()}  # location → batch
    expected = {(d,): "b0" for d in days}
    root = local(hms.get_table(db, name).location)

    def check_live():
        for values, live in partition_locations(hms, db, name).items():
            assert data_files(local(live)), f"live location {live} of {values} lost its files"

    for n, step in enumerate(steps):
        if step[0] == "swap":
            batch = f"s{n}"
            result = swap_partitions(batch_df(spark, {(days[i],): 1 for i in step[1]}, batch), table)
            for change in result.replaced + result.added:
                content[loc.normalize(change.new_location)] = batch
                expected[(change.partition.split("=", 1)[1],)] = batch
        elif step[0] == "rollback":
            values = (days[step[1]],)
            pname = f"dt={days[step[1]]}"
            current = partition_locations(hms, db, name)[values]
            choices = sorted({loc.normalize(d.location) for d in rows(url, db, name)
                              if d.partition_name == pname and d.state == "pending"
                              and local(d.location).is_dir() and loc.normalize(d.location) != current})
            if not choices:
                continue
            target = choices[step[2] % len(choices)]
            _rollback(hms, url, db, name, values, pname, target)
            expected[values] = content[target]
        else:
            report = janitor(table, grace=step[1], keep=step[2])
            assert report.ok, report.errors
        check_live()

    final = janitor(table, keep=0, now=later())
    assert final.ok, final.errors
    check_live()
    live = set(partition_locations(hms, db, name).values())
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            path = loc.normalize("file://" + str(Path(dirpath, d)))
            related = any(loc.is_within(path, x) or loc.is_within(x, path) for x in live)
            assert related or d == "_tableswap", f"unreferenced directory left under the root: {path}"
    assert {k: v[1] for k, v in reader_view(spark, table).items()} == {k: (v,) for k, v in expected.items()}
