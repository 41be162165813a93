"""Glue tables under real process failures and real contention: a writer process (tests/support/protocol_writer.py, tableswap's
commit protocol on the Glue adapter against moto's server, no Spark) SIGKILLed at each step of a swap, including
between two chunks of its flip, converges by ``tableswap recover`` and a rerun; two writer processes swapping one
table at once serialize through the DynamoDB lease.

The crashing swap replaces 150 partitions and adds 120 (Glue's chunks: adds 100 + 20, repoints 100 + 50), so a
kill between two chunks leaves a flip half applied, each partition old or new.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tableswap import faults
from tableswap.config import resolve
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.journal import Journal
from tableswap.runtime import Runtime

from ..support import protocol_writer
from ..support.glue_tables import PARQUET_SD
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.glue

REPO = Path(__file__).resolve().parents[2]
INITIAL = [f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(150)]
ADDED = [f"2031-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(120)]
#: Where the crashing swap is killed: each step of the commit protocol, and between two chunks of the flip's
#: repoints (right after the first BatchUpdatePartition answered) and of its adds.
POINTS = ["after_staging_write", "after_lock", "after_intent", "after_add", "after_alter", "after_commit",
          "during_temp_drop", "call:BatchCreatePartition", "call:BatchUpdatePartition"]


def aws_env(endpoint_url: str) -> dict[str, str]:
    """What a writer process (and this one, for recover) needs to reach the emulator, with a lease table of its own."""
    return {"AWS_ENDPOINT_URL": endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION, "TABLESWAP_GLUE_LOCK_TABLE": f"tsl_{uuid.uuid4().hex[:8]}"}


#: Settings of the caller's environment that would point the writers (and recover) elsewhere or crash them.
UNSET = ("AWS_PROFILE", "AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_SESSION_TOKEN", faults.ENV,
         faults.JITTER_ENV)


def use_env(monkeypatch, values: dict[str, str]) -> None:
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def writer_env(moto_endpoint, monkeypatch) -> dict[str, str]:
    values = aws_env(moto_endpoint.url)
    use_env(monkeypatch, values)
    return values


@pytest.fixture(scope="module")
def process_glue(moto_endpoint):
    import boto3

    return boto3.client("glue", endpoint_url=moto_endpoint.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


def create_table(process_glue, root: str) -> str:
    """``DB.events`` (a fresh database) with its root at ``root``, no partition yet; returns DB."""
    db = f"tsgp_{uuid.uuid4().hex[:10]}"
    process_glue.create_database(DatabaseInput={"Name": db})
    process_glue.create_table(DatabaseName=db, TableInput={
        "Name": "events", "TableType": "EXTERNAL_TABLE", "StorageDescriptor": {**PARQUET_SD, "Location": root},
        "PartitionKeys": [{"Name": "dt", "Type": "string"}], "Parameters": {"EXTERNAL": "TRUE"}})
    return db


@pytest.fixture
def process_table(process_glue, writer_env, tmp_path) -> tuple[str, str]:
    """``DB.events`` with a local root; its 150 partitions written by a first swap (``s0``, a writer process)."""
    root = f"file://{tmp_path / 'events'}"
    db = create_table(process_glue, root)
    assert run_writer(writer_env, db, root, "s0", INITIAL, tmp_path).returncode == 0
    return db, root


#: The crash tests' heartbeat: their leases last 1.5 s, so a killed writer's is free 3 s after the kill (nobody
#: contends with a live writer there; the contention test keeps the default 1 s).
CRASH_HEARTBEAT_S = 0.5


def run_writer(writer_env: dict[str, str], db: str, root: str, swap_id: str, days: list[str], tmp_path: Path, *,
               crash: str | None = None, hold_s: float = 0.0, wait: bool = True, heartbeat_s: float = 1.0):
    args = [sys.executable, "-m", "tests.support.protocol_writer", *writer_args(db, root, swap_id, days, tmp_path,
                                                                        heartbeat_s=heartbeat_s)]
    extra: dict[str, str] = {}
    if crash and crash.startswith("call:"):
        args += ["--kill-after-call", crash.removeprefix("call:")]
    elif crash:
        extra[faults.ENV] = crash
    if hold_s:
        args += ["--hold-s", str(hold_s)]
    inherited = {k: v for k, v in os.environ.items() if k not in UNSET}
    child_env = {**inherited, **writer_env, **extra,
                 "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(args, cwd=REPO, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return finish(proc) if wait else proc


def writer_args(db: str, root: str, swap_id: str, days: list[str], tmp_path: Path, *, heartbeat_s: float) -> list[str]:
    return ["--db", db, "--root", root, "--swap-id", swap_id, "--days", ",".join(days), "--journal-url",
            process_journal_url(tmp_path), "--region", REGION, "--heartbeat-s", str(heartbeat_s)]


def finish(proc: subprocess.Popen) -> subprocess.Popen:
    """Wait for a writer started with ``wait=False``; its output is then ``stdout_text`` / ``stderr_text``."""
    out, err = proc.communicate(timeout=120)
    proc.stdout_text, proc.stderr_text = out, err  # type: ignore[attr-defined]
    return proc


def process_journal_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'journal.db'}"


def locations(process_glue, db: str) -> dict[str, str]:
    """Each partition's swap (the staging directory it points into)."""
    paginator = process_glue.get_paginator("get_partitions")
    out = {}
    for page in paginator.paginate(DatabaseName=db, TableName="events"):
        for p in page["Partitions"]:
            out[p["Values"][0]] = p["StorageDescriptor"]["Location"].split("/_tableswap/")[1].split("/")[0]
    return out


@dataclass
class Crashed:
    """One point's table after its writer was killed there."""

    db: str
    root: str
    work: Path
    env: dict[str, str]
    writer: subprocess.Popen
    after_crash: dict[str, str]  # each partition's swap right after the kill


@pytest.fixture(scope="module")
def crashed(process_glue, moto_endpoint, tmp_path_factory) -> dict[str, Crashed]:
    """For every point at once (each on a table, a journal and a lease table of its own, so that the writer
    processes' start-ups overlap): the table's 150 partitions written by a first swap (``s0``), then a writer of
    the next swap (``s1``: the 150 replaced, 120 added) SIGKILLed at the point."""
    work = {p: tmp_path_factory.mktemp("point") for p in POINTS}
    envs = {p: aws_env(moto_endpoint.url) for p in POINTS}
    roots = {p: f"file://{work[p] / 'events'}" for p in POINTS}
    dbs = {p: create_table(process_glue, roots[p]) for p in POINTS}
    first = {p: run_writer(envs[p], dbs[p], roots[p], "s0", INITIAL, work[p], wait=False) for p in POINTS}
    for p, proc in first.items():
        assert finish(proc).returncode == 0, (p, proc.stderr_text[-2000:])
    writers = {p: run_writer(envs[p], dbs[p], roots[p], "s1", INITIAL + ADDED, work[p], crash=p, wait=False,
                             heartbeat_s=CRASH_HEARTBEAT_S) for p in POINTS}
    return {p: Crashed(dbs[p], roots[p], work[p], envs[p], finish(proc), locations(process_glue, dbs[p]))
            for p, proc in writers.items()}


@pytest.mark.parametrize("point", POINTS)
def test_a_writer_killed_at_each_step_converges_by_recover_and_rerun(point, process_glue, crashed, monkeypatch):
    case = crashed[point]
    use_env(monkeypatch, case.env)
    db, root, tmp_path, proc, after_crash = case.db, case.root, case.work, case.writer, case.after_crash
    assert proc.returncode == -9, (proc.returncode, proc.stdout_text, proc.stderr_text[-2000:])
    # Whatever the point, each partition is old (s0) or new (s1), never anything else.
    assert set(after_crash.values()) <= {"s0", "s1"} and set(INITIAL) <= set(after_crash)
    if point == "call:BatchUpdatePartition":  # the first chunk of repoints landed, the second was never sent
        assert list(after_crash.values()).count("s1") == len(ADDED) + 100
    assert locations(process_glue, db) == after_crash  # nothing changed it since

    from tableswap.ops.restore.recover import recover

    # The killed writer's lease is reported held until it is two leases old (what recover would say meanwhile:
    # "locked", try again), then recover takes it over.
    settings = resolve(metastore_uri=f"glue://{REGION}", journal_url=process_journal_url(tmp_path),
                       heartbeat_s=CRASH_HEARTBEAT_S, lock_timeout_s=60)
    with Runtime(settings) as rt:
        catalog = rt.new_catalog().open()
        deadline = time.monotonic() + 30
        while catalog.lock_holders(db, "events") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert catalog.lock_holders(db, "events") == [], "the killed writer's lease never expired"
        # The dry run decides what the run then does, and changes nothing.
        journal = Journal(process_journal_url(tmp_path))
        preview = recover(f"{db}.events", runtime=rt, stale_after_s=0, dry_run=True)
        assert preview.dry_run and locations(process_glue, db) == after_crash
        assert journal.get_swap("s1").state == (
            "committed" if point in ("after_commit", "during_temp_drop") else
            "staging" if point in ("after_staging_write", "after_lock") else "pending")
        report = recover(f"{db}.events", runtime=rt, stale_after_s=0)
        assert [(r.swap_id, r.outcome, r.state_after) for r in preview.resolutions] == [
            (r.swap_id, r.outcome, r.state_after) for r in report.resolutions], (preview, report)
        assert all(r.detail.startswith("dry run: would") for r in preview.resolutions), preview
        state = journal.get_swap("s1").state
        now = locations(process_glue, db)
        if state == "committed":  # recover finished the flip (or found it done): the whole batch is in
            assert now == {d: "s1" for d in INITIAL + ADDED}, report
        else:  # recover undid or abandoned it before the flip: the table is as before, nothing half done
            assert state == "aborted" and now == {d: "s0" for d in INITIAL}, (state, report)
        assert not journal.list_swaps(db, "events", states=["staging", "pending"])
        # No temporary table is left, whatever the point (recover drops a crashed swap's).
        assert [t["Name"] for t in process_glue.get_tables(DatabaseName=db)["TableList"]] == ["events"]
        assert catalog.lock_holders(db, "events") == []
    # A rerun of the batch (a new swap; in this process, whose environment is the writer's) gives the table
    # one successful run gives.
    assert protocol_writer.main(writer_args(db, root, "s2", INITIAL + ADDED, tmp_path,
                                            heartbeat_s=CRASH_HEARTBEAT_S)) == 0
    assert locations(process_glue, db) == {d: "s2" for d in INITIAL + ADDED}
    params = {p["Parameters"].get(SWAP_ID_PARAM) for p in process_glue.get_partitions(DatabaseName=db,
                                                                               TableName="events")["Partitions"]}
    assert params == {"s2"}


def test_two_writer_processes_swapping_one_table_serialize_through_the_lease(process_glue, writer_env, process_table, tmp_path):
    """Both commit; the second waits for the first's lease (held 4 s by its flip) and plans from what the first
    left: the table is that of running them one after the other."""
    db, root = process_table
    first = run_writer(writer_env, db, root, "a1", INITIAL[:100], tmp_path, hold_s=4, wait=False)
    time.sleep(1.5)  # the first holds the lease by now (its start is ~1 s)
    second = run_writer(writer_env, db, root, "b2", INITIAL[50:] + ADDED[:10], tmp_path, wait=False)
    outputs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], [o[1][-1500:] for o in outputs]
    journal = Journal(process_journal_url(tmp_path))
    a1, b2 = journal.get_swap("a1"), journal.get_swap("b2")
    assert a1.state == b2.state == "committed"
    assert a1.committed_at < b2.committed_at  # serialized in lease order
    expected = {**{d: "a1" for d in INITIAL[:50]}, **{d: "b2" for d in INITIAL[50:] + ADDED[:10]}}
    assert locations(process_glue, db) == expected
    # b2 waited for a1's lease: it committed at least the hold after a1 started flipping.
    b2_seconds = float(outputs[1][0].split()[-1])
    assert b2_seconds >= 2.0, outputs[1][0]
