"""Campaign: crash at every step, then recover + rerun must converge to the single-run result.

    TABLESWAP_TEST_LOCK_TIMEOUT=10 python -m pytest -m campaign tests/campaign/test_crashes.py -s

(a short lock timeout makes a killed writer's lock expire quickly; trials per point:
TABLESWAP_CAMPAIGN_TRIALS, default 3: the first kills exactly at the point, the others at a random
moment up to TABLESWAP_CAMPAIGN_JITTER_MS (default 400) later, inside the next step)

The default run's tests/integration/test_crash_every_step.py is one pass of it, a kill exactly at each point, plus three
writers without Spark killed at a seeded random moment; the machinery both use is in tests/campaign/crashes.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tableswap import faults, swap_partitions
from tableswap.core import locations as loc
from tableswap.ops.janitor.run import run_janitor
from tableswap.journal import Journal
from tableswap.ops.restore.recover import recover

from ..support.helpers import create_events, reader_view, wait_or_kill
from .crashes import BACKFILL, INITIAL, SWAP_POINTS, convergence_problems, start_writer
from .writer import batch

pytestmark = pytest.mark.campaign

TRIALS = int(os.environ.get("TABLESWAP_CAMPAIGN_TRIALS", "3"))
JITTER_MS = int(os.environ.get("TABLESWAP_CAMPAIGN_JITTER_MS", "400"))


@pytest.mark.parametrize("point", SWAP_POINTS)
def test_crash_at_point_then_recover_and_rerun_converges(spark, db, tmp_path, hms, ts_env, metastore_uri, campaign_report,
                                                         point):
    converged = killed_count = 0
    problems = []
    for trial in range(TRIALS):
        name = f"events{trial}"
        table = create_events(spark, db, tmp_path, name=name)
        batch(spark, 0, INITIAL).write.insertInto(table)
        # Trial 0 kills exactly at the point; the others at a random moment up to JITTER_MS later,
        # inside the next step (a metastore call or a journal transaction in flight), or not at all.
        # A killed writer's lock is left to expire on the server (a call of it may still be in flight).
        proc, log = start_writer(point=point, table=table, metastore_uri=metastore_uri, ts_env=ts_env,
                                 work=tmp_path / f"writer{trial}", jitter_ms=0 if trial == 0 else JITTER_MS)
        wait_or_kill(proc)
        killed = proc.returncode == -9
        recover(table, stale_after_s=0)  # the writer is gone
        swap_partitions(batch(spark, 1, BACKFILL), table)  # the rerun
        recover(table)
        found = convergence_problems(spark, hms, ts_env["TABLESWAP_JOURNAL_URL"], db, name, tmp_path / name)
        killed_count += killed
        ok = (killed or trial > 0) and not found
        converged += ok
        if not ok:
            problems.append(dict(trial=trial, killed=killed, rc=proc.returncode, **found,
                                 output=log.read_text()[-300:] if not killed else ""))
    campaign_report.append({"campaign": "crash at every step", "case": point, "trials": TRIALS,
                   "result": f"{converged}/{TRIALS} converged ({killed_count} killed)", "details": str(problems)[:300] if problems else ""})
    assert converged == TRIALS, problems


def test_janitor_killed_mid_batch_then_rerun_deletes_everything_once(spark, db, tmp_path, hms, ts_env, campaign_report):
    """The janitor is SIGKILLed after deleting a batch but before recording it (exactly, then at a
    random moment up to JITTER_MS later); a rerun must finish the queue: every displaced directory
    gone exactly once, every live one intact, the journal agreeing with the disk."""
    converged = killed_count = 0
    problems = []
    for trial in range(TRIALS):
        name = f"jan{trial}"
        table = create_events(spark, db, tmp_path, name=name)
        days = [f"2026-03-0{i}" for i in range(1, 7)]
        batch(spark, 0, days[3:]).write.insertInto(table)
        swap_partitions(batch(spark, 1, days), table)
        swap_partitions(batch(spark, 2, days[:4]), table)
        journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
        queued = {d.location for d in journal.deletions(db=db, table=name)}
        jitter = {} if trial == 0 else {faults.JITTER_ENV: str(JITTER_MS)}
        script = ("from tableswap.ops.janitor.run import run_janitor; "
                  f"run_janitor(table={table!r}, grace='0', force_short_grace=True, batch_size=2, dry_run=False)")
        env = {**os.environ, **ts_env, **jitter, faults.ENV: "janitor_mid_batch",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        killed = proc.returncode == -9
        killed_count += killed
        run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False)
        states = {d.location: d.state for d in journal.deletions(states=("pending", "deleted", "refused"),
                                                                 db=db, table=name)}
        on_disk = [x for x in queued if Path(loc.to_local_path(x)).exists()]
        live = {loc.normalize(p.location) for p in hms.list_partitions(db, name)}
        live_missing = [x for x in live if not Path(loc.to_local_path(x)).is_dir()]
        expected = {**{(d,): (12, ("b2",)) for d in days[:4]}, **{(d,): (11, ("b1",)) for d in days[4:]}}
        ok = (set(states) == queued and set(states.values()) == {"deleted"} and not on_disk and not live_missing
              and reader_view(spark, table) == expected and (killed or trial > 0))
        converged += ok
        if not ok:
            problems.append(dict(trial=trial, rc=proc.returncode, states=sorted(set(states.values())),
                                 on_disk=len(on_disk), live_missing=len(live_missing), stderr=proc.stderr[-300:]))
    campaign_report.append({"campaign": "crash at every step", "case": "janitor mid-batch", "trials": TRIALS,
                   "result": f"{converged}/{TRIALS} converged ({killed_count} killed)",
                   "details": str(problems)[:300] if problems else ""})
    assert converged == TRIALS, problems
