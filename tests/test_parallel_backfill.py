"""Parallel per-day backfills of one table: 8 concurrent swaps of disjoint days, from threads of one
SparkSession and from separate Spark processes, against the real metastore. Every swap commits,
the table ends with every day's batch, the journal records each swap and each displaced location
once. The lock waits are printed (``pytest -s``)."""

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

from .helpers import SRC, batch_df, create_events, partition_locations, reader_view, today

pytestmark = pytest.mark.integration

DAYS = 8


def seed(spark, db, tmp_path) -> tuple[str, dict]:
    """Days 0-3 exist (written by Spark), days 4-7 are new: half the swaps replace, half add."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 2 for i in range(DAYS // 2)}, "old").write.insertInto(table)
    return table, {(today(i),): (i + 1, (f"day{i}",)) for i in range(DAYS)}


def check_outcome(spark, hms, db, table, journal_url, expected, old_locations, swap_ids) -> None:
    assert reader_view(spark, table) == expected
    journal = Journal(journal_url)
    records = {r.swap_id: r for r in journal.list_swaps(db, "events")}
    assert sorted(records) == sorted(swap_ids)
    assert {r.state for r in records.values()} == {"committed"}
    items = sorted((i.partition_name, i.action) for r in records.values() for i in r.items)
    assert items == sorted([(f"dt={today(i)}", "replace" if i < DAYS // 2 else "add") for i in range(DAYS)])
    # Each displaced location (days 0-3's old data) queued once, by the swap that displaced it.
    queued = journal.deletions(db=db, table="events")
    assert sorted(loc.normalize(d.location) for d in queued) == sorted(old_locations.values())
    now = partition_locations(hms, db, "events")
    assert len(now) == DAYS and all(f"/_tableswap/{records[s].swap_id}/" in now[(records[s].items[0].partition_name[3:],)]
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


def test_eight_processes_swap_disjoint_days(spark, db, tmp_path, hms, ts_env, metastore_uri):
    table, expected = seed(spark, db, tmp_path)
    old_locations = partition_locations(hms, db, "events")
    procs = []
    dirs = []
    for i in range(DAYS):
        work = tmp_path / f"p{i}"
        work.mkdir()
        (work / "config.json").write_text(json.dumps({
            "dir": str(work), "metastore_uri": metastore_uri, "master": "local[1]", "table": table,
            "spark_conf": {"spark.driver.memory": "512m"},
            "schema": "id bigint, value string, batch string, dt string",
            "swaps": [{"rows": [[n, f"v{n}", f"day{i}", today(i)] for n in range(i + 1)]}],
        }))
        env = {**ts_env, "PYTHONPATH": SRC + ":" + str(Path(SRC).parent), "PATH": __import__("os").environ["PATH"],
               "HOME": __import__("os").environ.get("HOME", "/tmp")}
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.s3_swap_process", str(work / "config.json")],
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
    report_waits("8 processes", [r["timings"]["lock"] for r in results])
