"""Parallel per-day backfills of one table: concurrent swaps of disjoint days, from 8 threads of one
SparkSession and from 4 separate Spark processes (each a JVM of its own: four, not eight, keep the suite's time
down on 2 cores; each still waits for the others' locks), against the real metastore. Every swap commits,
the table ends with every day's batch, the journal records each swap and each displaced location
once. The lock waits are printed (``pytest -s``). The backfill runner, and `tableswap backfill status` reading
what it journaled."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tableswap import swap_partitions
from tableswap.core import locations as loc
from tableswap.journal import Journal

from ..support.helpers import SRC, batch_df, create_events, partition_locations, reader_view, today

pytestmark = pytest.mark.integration

DAYS = 8  # the threads' swaps
PROCESSES = 4  # the processes' swaps


def seed(spark, db, tmp_path, days: int = DAYS) -> tuple[str, dict]:
    """The first half of ``days`` days exist (written by Spark), the second half are new: half the swaps
    replace, half add."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 2 for i in range(days // 2)}, "old").write.insertInto(table)
    return table, {(today(i),): (i + 1, (f"day{i}",)) for i in range(days)}


def check_outcome(spark, hms, db, table, journal_url, expected, old_locations, swap_ids) -> None:
    days = len(expected)
    assert reader_view(spark, table) == expected
    journal = Journal(journal_url)
    records = {r.swap_id: r for r in journal.list_swaps(db, "events")}
    assert sorted(records) == sorted(swap_ids)
    assert {r.state for r in records.values()} == {"committed"}
    items = sorted((i.partition_name, i.action) for r in records.values() for i in r.items)
    assert items == sorted([(f"dt={today(i)}", "replace" if i < days // 2 else "add") for i in range(days)])
    # Each displaced location (the first half's old data) queued once, by the swap that displaced it.
    queued = journal.deletions(db=db, table="events")
    assert sorted(loc.normalize(d.location) for d in queued) == sorted(old_locations.values())
    now = partition_locations(hms, db, "events")
    assert len(now) == days and all(f"/_tableswap/{records[s].swap_id}/" in now[(records[s].items[0].partition_name[3:],)]
                                    for s in swap_ids)
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    assert hms.lock_holders(db, "events") == []


def report_waits(label: str, waits: list[float]) -> None:
    waits = sorted(waits)
    print(f"\n{label}: lock waits (s) {', '.join(f'{w:.2f}' for w in waits)}; max {waits[-1]:.2f}, "
          f"total {sum(waits):.2f}")


def test_eight_threads_of_one_session_swap_disjoint_days(spark, db, tmp_path, hms, ts_env):
    table, expected = seed(spark, db, tmp_path)
    old_locations = partition_locations(hms, db, "events")
    batches = [batch_df(spark, {(today(i),): i + 1}, f"day{i}").cache() for i in range(DAYS)]
    for df in batches:
        df.count()
    start = threading.Barrier(DAYS)
    results: list = [None] * DAYS
    failures: list = []

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = swap_partitions(batches[i], table)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append((i, exc))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(DAYS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    check_outcome(spark, hms, db, table, ts_env["TABLESWAP_JOURNAL_URL"], expected, old_locations,
                  [r.swap_id for r in results])
    report_waits("8 threads", [r.timings["lock"] for r in results])


@pytest.mark.spark_processes
def test_four_processes_swap_disjoint_days(spark, db, tmp_path, hms, ts_env, metastore_uri):
    table, expected = seed(spark, db, tmp_path, PROCESSES)
    old_locations = partition_locations(hms, db, "events")
    procs = []
    dirs = []
    for i in range(PROCESSES):
        work = tmp_path / f"p{i}"
        work.mkdir()
        (work / "config.json").write_text(json.dumps({
            "dir": str(work), "metastore_uri": metastore_uri, "master": "local[1]", "table": table,
            "spark_conf": {"spark.driver.memory": "512m"},
            "schema": "id bigint, value string, batch string, dt string",
            "swaps": [{"rows": [[n, f"v{n}", f"day{i}", today(i)] for n in range(i + 1)]}],
        }))
        env = {**ts_env, "PYTHONPATH": SRC + ":" + str(Path(SRC).parent), "PATH": __import__("os").environ["PATH"],
               "HOME": __import__("os").environ.get("HOME", "/tmp"),
               # the suite's JVM options (tests/conftest.py): four JVMs start at once
               "JAVA_TOOL_OPTIONS": __import__("os").environ.get("JAVA_TOOL_OPTIONS", "")}
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.support.s3_swap_process", str(work / "config.json")],
                                      cwd=Path(SRC).parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        dirs.append(work)
    try:
        import time

        deadline = time.monotonic() + 600
        while not all((w / "ready-1").exists() for w in dirs):
            assert all(p.poll() is None for p in procs), [p.stdout.read().decode()[-2000:] for p in procs
                                                          if p.poll() is not None]
            assert time.monotonic() < deadline, "the Spark processes did not start in time"
            time.sleep(0.2)
        for w in dirs:  # all start their swap at once
            (w / "go-1").write_text("")
        for p in procs:
            out = p.communicate(timeout=600)[0].decode()
            assert p.returncode == 0, out[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = [json.loads((w / "result-1.json").read_text()) for w in dirs]
    check_outcome(spark, hms, db, table, ts_env["TABLESWAP_JOURNAL_URL"], expected, old_locations,
                  [r["swap_id"] for r in results])
    report_waits(f"{PROCESSES} processes", [r["timings"]["lock"] for r in results])


# ---------------------------------------------------------------------- the resumable runner
def status_cli(name: str, *extra: str, expect: int):
    from click.testing import CliRunner

    from tableswap.cli import main

    result = CliRunner().invoke(main, ["backfill", "status", name, *extra], catch_exceptions=False)
    assert result.exit_code == expect, result.output
    return result.stdout


def test_backfill_runner_keeps_going_past_a_failure_and_a_rerun_redoes_only_what_is_not_done(
        spark, db, tmp_path, ts_env, capsys):
    import datetime as dt

    from tableswap import backfill
    from tableswap.errors import BackfillFailedError
    from tableswap.journal import Journal
    from tableswap.journal.backfills import BackfillLog

    table, _ = seed(spark, db, tmp_path)
    days = [dt.date(2026, 6, 1) + dt.timedelta(days=i) for i in range(6)]
    calls: list = []

    def build(day, broken=(dt.date(2026, 6, 3),)):
        calls.append(day)
        if day in broken:
            raise ValueError(f"upstream data for {day} is not ready")
        return batch_df(spark, {(day.isoformat(),): 3}, f"fix-{day.day}")

    with pytest.raises(BackfillFailedError) as caught:
        backfill(table, days, build, name=f"{db}-june", parallelism=3)
    status = caught.value.report.status
    assert [u.unit for u in status.done] == [f"dt={d}" for d in days if d.day != 3]
    assert [(u.unit, u.error) for u in status.failed] == [
        ("dt=2026-06-03", "ValueError: upstream data for 2026-06-03 is not ready")]
    assert "1 of 6 unit(s) failed" in str(caught.value) and "dt=2026-06-03" in str(caught.value)
    progress = capsys.readouterr().err
    assert f"backfill {db}-june [6/6]" in progress and "dt=2026-06-03 FAILED" in progress
    view = reader_view(spark, table)
    assert {k: v for k, v in view.items() if k[0] >= "2026-06-01"} == {
        **{(d.isoformat(),): (3, (f"fix-{d.day}",)) for d in days if d.day != 3},
        ("2026-06-03",): (2, ("old",))}  # the failed day keeps its data
    text = status_cli(f"{db}-june", expect=1)
    assert "5 done, 1 failed, 0 pending of 6" in text and "upstream data for 2026-06-03" in text
    swaps_before = len(Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events"))

    # Rerun with the input fixed: only the failed unit runs.
    calls.clear()
    report = backfill(table, days, lambda d: build(d, broken=()), name=f"{db}-june", parallelism=3,
                      progress=False)
    assert calls == [dt.date(2026, 6, 3)] and report.ok and list(report.results) == ["dt=2026-06-03"]
    assert len(report.already_done) == 5
    assert reader_view(spark, table)[("2026-06-03",)] == (3, ("fix-3",))
    assert len(Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")) == swaps_before + 1
    assert "complete: every unit is done" in status_cli(f"{db}-june", expect=0)

    # A unit a dead run left "running" is redone; the others are not.
    BackfillLog(Journal(ts_env["TABLESWAP_JOURNAL_URL"])).running(f"{db}-june", "dt=2026-06-05")
    assert "running (or interrupted)" in status_cli(f"{db}-june", "--state", "pending", expect=1)
    calls.clear()
    backfill(table, days, lambda d: build(d, broken=()), name=f"{db}-june", progress=False)
    assert calls == [dt.date(2026, 6, 5)]


def test_backfill_fail_fast_leaves_the_rest_pending(spark, db, tmp_path, ts_env):
    import json as jsonlib

    from tableswap import backfill
    from tableswap.errors import BackfillFailedError, InvalidInputError

    table, _ = seed(spark, db, tmp_path)
    units = [f"dt={today(i)}" for i in range(4)]
    events: list = []

    def build(unit):
        if unit == units[1]:
            raise RuntimeError("bad day")
        return batch_df(spark, {(unit[3:],): 1}, "ff")

    with pytest.raises(BackfillFailedError, match="2 not started"):
        backfill(table, units, build, name=f"{db}-ff", parallelism=1, fail_fast=True, progress=events.append)
    status = jsonlib.loads(status_cli(f"{db}-ff", "--json", expect=1))
    assert [(u["unit"], u["state"]) for u in status["units"]] == [
        (units[0], "done"), (units[1], "failed"), (units[2], "pending"), (units[3], "pending")]
    assert [e["state"] for e in events] == ["done", "failed"] and events[-1]["left"] == 2
    with pytest.raises(InvalidInputError, match="not a partition column"):
        backfill(table, ["country=DE"], build, name=f"{db}-bad")


def test_a_backfill_dry_run_plans_each_unit_left_to_do_and_changes_nothing_then_the_run_does_it(
        spark, db, tmp_path, ts_env):
    """``backfill(..., dry_run=True)``: each unit not done yet is swapped as a dry run (its plan, nothing
    written), the units an earlier run did are named, and the backfill's record, the table and its storage stay
    as they were; the real run then does what the dry run said."""
    from tableswap import backfill
    from tableswap.journal.backfills import BackfillLog

    from ..support.helpers import file_tree

    table, _ = seed(spark, db, tmp_path)
    units = [f"dt={today(i)}" for i in range(3)]

    def build(unit):
        return batch_df(spark, {(unit[3:],): 4}, "dry")

    backfill(table, units[:1], build, name=f"{db}-dry", progress=False)
    blog = BackfillLog(Journal(ts_env["TABLESWAP_JOURNAL_URL"]))
    before = (blog.status(f"{db}-dry"), reader_view(spark, table), file_tree(tmp_path))

    planned = backfill(table, units, build, name=f"{db}-dry", progress=False, dry_run=True)

    assert planned.dry_run and planned.already_done == (units[0],) and sorted(planned.results) == units[1:]
    assert all(r.dry_run for r in planned.results.values())
    assert (blog.status(f"{db}-dry"), reader_view(spark, table), file_tree(tmp_path)) == before
    fresh = backfill(table, units, build, name=f"{db}-new", progress=False, dry_run=True)
    assert fresh.dry_run and sorted(fresh.results) == units and not fresh.already_done
    assert f"{db}-new" not in blog.names()  # a dry run of a new backfill records nothing

    done = backfill(table, units, build, name=f"{db}-dry", progress=False)
    for unit in units[1:]:
        real, dry = done.results[unit], planned.results[unit]
        assert ([c.partition for c in real.added], [c.partition for c in real.replaced]) == \
            ([c.partition for c in dry.added], [c.partition for c in dry.replaced])
    assert reader_view(spark, table)[(today(2),)] == (4, ("dry",))
