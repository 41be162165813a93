"""Campaign: the metastore dies in the middle of a swap, and comes back.

    TABLESWAP_TEST_LOCK_TIMEOUT=10 python -m pytest -m campaign tests/campaign/test_metastore_faults.py -s

A writer process pauses at a step (TABLESWAP_PAUSE_AT), the session's metastore is SIGKILLed there
and started again on the same port and Derby database, then the writer goes on:
- ``back``: the metastore is up again before the writer continues; its next call finds a dead
  connection. Reads are retried on a new connection and a write whose response was lost is
  reconciled through the swap-id stamp; if the server expired the lock while it was down, the
  writer notices before its next write and stops with a clear error instead.
- ``down``: the writer continues while the metastore is still down and must fail with a clear
  error; after the restart, ``tableswap recover`` and a rerun must converge.
Either way: the table equals the single-run result, no partition was flipped twice by one swap,
every displaced path is queued exactly once and still on disk, no lock or temporary table is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tableswap import faults, swap_partitions
from tableswap.core import locations as loc
from tableswap.ops.janitor.run import run_janitor
from tableswap.journal import Journal
from tableswap.metastore.client import probe
from tableswap.ops.restore.recover import recover

from ..support.helpers import create_events, reader_view
from .crashes import data_dirs as _data_dirs
from .writer import batch

pytestmark = pytest.mark.campaign

POINTS = ["after_lock", "after_intent", "after_add", "after_alter"]
INITIAL = ["2026-02-01", "2026-02-02", "2026-02-03"]
BACKFILL = ["2026-02-02", "2026-02-04"]
ROOT = Path(__file__).resolve().parents[2]


def _kill_metastore(ms) -> None:
    pid = ms.status().pid
    assert pid, "the session metastore is not running"
    os.kill(pid, signal.SIGKILL)
    ms.stop()  # clears the pid file; the port file is kept, so start() reuses the port


def _wait_for(path: Path, proc: subprocess.Popen, log: Path, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"writer exited ({proc.returncode}) before {what}: {log.read_text()[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("mode", ["back", "down"])
@pytest.mark.parametrize("point", POINTS)
def test_metastore_killed_mid_swap(spark, db, tmp_path, hms, ts_env, metastore_uri, dev_metastore, campaign_report,
                                   point, mode):
    if dev_metastore is None:
        pytest.skip("needs the session's own development metastore (TABLESWAP_TEST_METASTORE_URI is set)")
    table = create_events(spark, db, tmp_path)
    batch(spark, 0, INITIAL).write.insertInto(table)
    expected = {**{(d,): (10, ("b0",)) for d in INITIAL}, **{(d,): (11, ("b1",)) for d in BACKFILL}}
    pause = tmp_path / "pause"
    env = {**os.environ, **ts_env, faults.PAUSE_ENV: point, faults.PAUSE_FILE_ENV: str(pause),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    log = tmp_path / "writer.log"
    with open(log, "w") as log_file:
        writer = subprocess.Popen([sys.executable, "-m", "tests.campaign.writer", "--uri", metastore_uri,
                                   "--table", table, "--batch", "1", "--days", ",".join(BACKFILL),
                                   "--warehouse", str(tmp_path / "wwh")],
                                  env=env, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        _wait_for(Path(f"{pause}.reached"), writer, log, f"the writer reached {point}")
        _kill_metastore(dev_metastore)
        if mode == "back":
            dev_metastore.start(probe=probe)
            Path(f"{pause}.go").touch()
            writer.wait(timeout=600)
        else:
            Path(f"{pause}.go").touch()
            writer.wait(timeout=600)
            dev_metastore.start(probe=probe)
    finally:
        if writer.poll() is None:
            writer.kill()
        if not dev_metastore.status().running:
            dev_metastore.start(probe=probe)
    err = log.read_text()
    writer_ok = writer.returncode == 0
    last_line = (err.strip().splitlines() or [""])[-1][:200]

    hms.close()  # the fixture's connection died with the server
    recovered = recover(table)
    swap_partitions(batch(spark, 1, BACKFILL), table)  # the rerun
    view = reader_view(spark, table)

    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    swaps = journal.list_swaps(db, "events")
    unfinished = [s.swap_id for s in swaps if s.state in ("staging", "pending")]
    queued = journal.deletions(db=db, table="events")
    duplicates = len(queued) - len({d.location for d in queued})
    lost = [d.location for d in queued if not Path(loc.to_local_path(d.location)).exists()]
    # One flip per swap: a partition's displaced path is never queued by two swaps, and every
    # replaced location of the two committed swaps of BACKFILL[0] is queued.
    committed = [s for s in swaps if s.state in ("committed", "done")]
    locks = hms.lock_holders(db, "events")
    run_janitor(grace="0s", force_short_grace=True, table=table, dry_run=False)
    temps = [t for t in hms.list_tables(db) if t.startswith("events__tswap_")]
    live = {loc.normalize(p.location) for p in hms.list_partitions(db, "events")}
    stray = sorted(_data_dirs(tmp_path / "events") - live)
    ok = view == expected and not unfinished and duplicates == 0 and not lost and not temps and not locks and not stray
    campaign_report.append({
        "campaign": "metastore killed mid-swap", "case": f"{point}, {mode}", "trials": 1,
        "result": "converged" if ok else "NOT converged",
        "details": f"writer {'completed' if writer_ok else 'failed: ' + last_line[:120]}; "
                   f"recover: {[r.outcome for r in recovered.resolutions]}; committed swaps={len(committed)} "
                   f"queued={len(queued)} dup={duplicates} lost={len(lost)} stray={len(stray)}",
    })
    assert view == expected
    assert not unfinished and not temps and not locks and not stray
    assert duplicates == 0 and not lost
    # The writer completes, or fails with an error that says what happened and what to do.
    assert writer_ok or any(w in err for w in ("tableswap recover", "Rerun the swap", "cannot reach the Hive Metastore")), \
        err[-3000:]
