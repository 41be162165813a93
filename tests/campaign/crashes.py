"""The crash machinery shared by the crash campaign (tests/campaign/test_crashes.py, several trials per point,
some killed at a random moment after the point) and the default run's single pass over every crash point
(tests/integration/test_crash_every_step.py, with its random-moment trials): start a writer process that SIGKILLs itself at a point, and check that
recover + rerun converged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tableswap import faults
from tableswap.core import locations as loc
from tableswap.journal import Journal

from ..support.helpers import reader_view

#: The crash points of a swap's commit protocol (the janitor's has a test of its own).
SWAP_POINTS = [p for p in faults.POINTS if not p.startswith(("janitor", "group_"))]  # group_: tests/integration/test_groups.py
INITIAL = ["2026-01-01", "2026-01-02", "2026-01-03"]  # batch 0, written by Spark
BACKFILL = ["2026-01-02", "2026-01-04"]  # batch 1, the crashing swap's: replaces one day, adds one
#: What one successful run of the backfill gives: batch b has 10 + b rows per day.
EXPECTED = {**{(d,): (10, ("b0",)) for d in INITIAL}, **{(d,): (11, ("b1",)) for d in BACKFILL}}
REPO = Path(__file__).resolve().parents[2]


def start_writer(*, point: str, table: str, metastore_uri: str, ts_env: dict[str, str], work: Path,
                 jitter_ms: int = 0) -> tuple[subprocess.Popen, Path]:
    """A writer process (tests/campaign/writer.py) swapping batch 1 into ``table``, SIGKILLed at ``point``
    (exactly there, or with ``jitter_ms`` at a random moment up to that much later, inside the next step).
    Its output goes to a file (a pipe could be held open by Spark's JVM child)."""
    work.mkdir(parents=True, exist_ok=True)
    jitter = {faults.JITTER_ENV: str(jitter_ms)} if jitter_ms else {}
    env = {**os.environ, **ts_env, **jitter, faults.ENV: point,
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    log = work / "output.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.campaign.writer", "--uri", metastore_uri,
                                 "--table", table, "--batch", "1", "--days", ",".join(BACKFILL),
                                 "--warehouse", str(work / "wh")],
                                env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    return proc, log


def data_dirs(root: Path) -> set[str]:
    """Directories below the table root that hold data files."""
    out = set()
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith((".", "_")):
            out.add(loc.normalize(str(path.parent)))
    return out


def convergence_problems(spark, client, journal_url: str, db: str, name: str, root: Path) -> dict:
    """After the crashed swap, ``recover`` and the rerun, checked before and after ``janitor run --grace 0``:
    what is wrong (an empty dict: converged). Converged means: the rows are those of one successful run; no
    swap is left unfinished, no lock held, no temporary table left; every displaced or orphaned directory is
    queued for the janitor exactly once, is still on disk until the janitor runs (nothing lost before its
    grace), and is the only kind of directory the janitor deletes; afterwards no unreferenced data directory
    remains and the table still reads the same."""
    from tableswap.ops.janitor.run import run_janitor

    problems: dict = {}
    view = reader_view(spark, f"{db}.{name}")
    if view != EXPECTED:
        problems["view"] = view
    journal = Journal(journal_url)
    unfinished = [s.swap_id for s in journal.list_swaps(db, name, states=["staging", "pending"])]
    if unfinished:
        problems["unfinished"] = unfinished
    locks = client.lock_holders(db, name)
    if locks:
        problems["locks"] = [h.describe() for h in locks]
    temps = [t for t in client.list_tables(db) if t.startswith(f"{name}__tswap_")]
    if temps:
        problems["temps"] = temps
    live = {loc.normalize(p.location) for p in client.list_partitions(db, name)}
    queued = [loc.normalize(d.location) for d in journal.deletions_of(db, name)]
    if len(queued) != len(set(queued)):
        problems["queued_twice"] = sorted(x for x in set(queued) if queued.count(x) > 1)
    if set(queued) & live:
        problems["queued_but_live"] = sorted(set(queued) & live)
    stray = data_dirs(root) - live
    unqueued = sorted(d for d in stray if not any(loc.is_within(d, q) or loc.same(d, q) for q in queued))
    if unqueued:
        problems["unreferenced_not_queued"] = unqueued
    lost = sorted(q for q in queued if not Path(loc.to_local_path(q)).is_dir())
    if lost:
        problems["deleted_before_grace"] = lost
    run_janitor(grace="0s", force_short_grace=True, table=f"{db}.{name}", dry_run=False)
    states = {d.state for d in journal.deletions_of(db, name)}
    if states - {"deleted"}:
        problems["janitor_states"] = sorted(states)
    left = data_dirs(root) - live
    if left:
        problems["stray_after_janitor"] = sorted(left)[:3]
    after = reader_view(spark, f"{db}.{name}")
    if after != EXPECTED:
        problems["view_after_janitor"] = after
    return problems
