"""Swaps by Spark applications on a real YARN (tests/support/yarn.py: a ResourceManager and a NodeManager on loopback, on the
session's HDFS; each started once per session), into ``hdfs://`` tables of the session's metastore.

Client mode: a PySpark driver in a process of its own here, its executors in YARN containers. Cluster mode:
``spark-submit --master yarn --deploy-mode cluster`` of tests/support/yarn_job.py, its driver (and ``swap_partitions``) in
the ApplicationMaster's container, with a shared journal (PostgreSQL); the SQLite default there is refused before
anything is written. Then the failures a YARN application meets: its ApplicationMaster killed after the swap's
intent (through the ResourceManager: a second attempt commits, ``tableswap recover`` aborts the first one's swap),
an executor's container killed in the middle of the staging write (the
task runs again in a new container; the swap holds each row once).

Every application starts its own JVMs in containers (an ApplicationMaster and an executor, about 900 MB each):
the tests run one application at a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import storage
from tableswap.cli import main as cli_main
from tableswap.core import locations as loc
from tableswap.journal import Journal

from ..support.connect_server import spark_home
from ..support.helpers import (batch_df, create_events, partition_locations, process_gone, reader_view,
                      release_locks_of_dead_process, today, wait_or_kill)

pytestmark = [pytest.mark.integration, pytest.mark.hdfs, pytest.mark.yarn]

JOB = Path(__file__).resolve().parents[1] / "support" / "yarn_job.py"


@pytest.fixture
def yarn_hdfs_root(yarn_cluster, hdfs_cluster, monkeypatch) -> str:
    """A fresh directory on the session's HDFS (the YARN's file system); ``HADOOP_CONF_DIR`` names the cluster's
    configuration, as a user's environment would."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(yarn_cluster.conf_dir))
    return f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}"


def _rows(rows: dict[str, int]) -> str:
    return ",".join(f"{day}={n}" for day, n in rows.items())


def _run_client(yarn_cluster, work: Path, *, table: str, rows: dict[str, int], batch: str, metastore_uri: str,
                env: dict[str, str], hold: Path | None = None) -> subprocess.Popen:
    """A PySpark driver here, master ``yarn`` (client mode), swapping ``rows`` into ``table``."""
    conf = {**yarn_cluster.spark_conf(), "spark.master": "yarn", "spark.submit.deployMode": "client",
            "spark.hadoop.hive.metastore.uris": metastore_uri}
    args = [sys.executable, str(JOB), "--table", table, "--rows", _rows(rows), "--batch", batch,
            "--result", str(work / "result.json"), *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}"))]
    if hold is not None:
        args += ["--hold", str(hold)]
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "driver.log", "w") as log:
        return subprocess.Popen(args, env=yarn_cluster.client_env(env), stdout=log, stderr=subprocess.STDOUT,
                                cwd=work)


def _submit_cluster(yarn_cluster, work: Path, *, table: str, rows: dict[str, int], batch: str, metastore_uri: str,
                    driver_env: dict[str, str], conf: dict[str, str] | None = None,
                    job_args: tuple[str, ...] = ()) -> subprocess.Popen:
    """``spark-submit --master yarn --deploy-mode cluster`` of tests/support/yarn_job.py: its driver in the
    ApplicationMaster's container, with ``driver_env`` (``spark.yarn.appMasterEnv.*``), ``conf`` over the cluster's
    settings and ``job_args`` after the job's own."""
    conf = {**yarn_cluster.spark_conf(deploy_mode="cluster"), "spark.hadoop.hive.metastore.uris": metastore_uri,
            **{f"spark.yarn.appMasterEnv.{k}": v for k, v in driver_env.items()}, **(conf or {})}
    work.mkdir(parents=True, exist_ok=True)
    args = [str(spark_home() / "bin" / "spark-submit"), "--master", "yarn", "--deploy-mode", "cluster",
            "--name", f"tableswap-test-{batch}", *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}")),
            str(JOB), "--table", table, "--rows", _rows(rows), "--batch", batch, "--result", str(work / "result.json"),
            *job_args]
    with open(work / "submit.log", "w") as log:
        return subprocess.Popen(args, env=yarn_cluster.client_env(), stdout=log, stderr=subprocess.STDOUT, cwd=work)


def _result(work: Path) -> dict:
    return json.loads((work / "result.json").read_text())


def _log(work: Path, name: str) -> str:
    return (work / name).read_text(errors="replace")[-4000:]


def _executor_containers(yarn_cluster, app_id: str) -> dict[str, str]:
    """The application's executor containers (every container but its first, the ApplicationMaster's) and their
    stderr."""
    logs = yarn_cluster.container_logs(app_id)
    return {name: files.get("stderr", "") for name, files in logs.items() if not name.endswith("_000001")}


def _driver_output(yarn_cluster, app_id: str) -> str:
    """The ApplicationMaster's container's stdout and stderr (in cluster mode: the driver's)."""
    logs = yarn_cluster.container_logs(app_id)
    [am] = [files for name, files in logs.items() if name.endswith("_000001")]
    return am.get("stdout", "") + am.get("stderr", "")


# --------------------------------------------------------------------------- client mode
def test_client_mode_a_driver_here_swaps_a_batch_its_executors_wrote_in_yarn_containers(
        spark, db, yarn_hdfs_root, yarn_cluster, hms, metastore_uri, tmp_path):
    table = create_events(spark, db, yarn_hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    journal_url = f"sqlite:///{tmp_path / 'journal.db'}"  # client mode: the driver, and its journal, are here

    driver = _run_client(yarn_cluster, tmp_path / "client", table=table, rows={today(0): 3, today(1): 4},
                         batch="b1", metastore_uri=metastore_uri, env={"TABLESWAP_JOURNAL_URL": journal_url})

    assert wait_or_kill(driver, 600) == 0, _log(tmp_path / "client", "driver.log")
    result = _result(tmp_path / "client")
    assert (result["master"], result["deploy_mode"], result["container"]) == ("yarn", "client", None)
    assert (result["added"], result["replaced"]) == ([f"dt={today(1)}"], [f"dt={today(0)}"])
    assert reader_view(spark, table) == {(today(0),): (3, ("b1",)), (today(1),): (4, ("b1",))}
    record = Journal(journal_url).get_swap(result["swap_id"])
    assert record.state == "committed" and record.app_id == result["app_id"]
    # The application ran on the ResourceManager, and its executor in a container of the NodeManager: the
    # staging write's tasks ran there.
    report = yarn_cluster.wait_for_app(result["app_id"])
    assert (report["state"], report["finalStatus"], report["applicationType"]) == ("FINISHED", "SUCCEEDED", "SPARK")
    executors = _executor_containers(yarn_cluster, result["app_id"])
    assert executors and any("Finished task" in err for err in executors.values()), executors
    staging = loc.join(yarn_hdfs_root, "events", "_tableswap", result["swap_id"])
    assert all(loc.is_within(p, staging) for p in partition_locations(hms, db, "events").values())


# --------------------------------------------------------------------------- cluster mode
def test_cluster_mode_refuses_a_sqlite_journal_on_the_containers_disk_before_writing_anything(
        spark, db, yarn_hdfs_root, yarn_cluster, hms, metastore_uri, tmp_path):
    """The SQLite default in cluster mode would be a file on the ApplicationMaster's container's machine, gone with
    it (and another attempt runs elsewhere): refused, naming the shared journal's setting, before anything is
    written (no journal file, no staging directory, the table as it was)."""
    table = create_events(spark, db, yarn_hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    before = reader_view(spark, table)
    state_dir = tmp_path / "driver-state"  # where the default SQLite journal would be

    submit = _submit_cluster(yarn_cluster, tmp_path / "cluster", table=table, rows={today(0): 5}, batch="s1",
                             metastore_uri=metastore_uri, driver_env={"TABLESWAP_STATE_DIR": str(state_dir)})

    assert wait_or_kill(submit, 600) != 0, _log(tmp_path / "cluster", "submit.log")
    result = _result(tmp_path / "cluster")
    assert result["deploy_mode"] == "cluster" and result["error"] == "ConfigurationError", result
    assert "TABLESWAP_JOURNAL_URL" in result["message"] and "journal_url" in result["message"], result
    assert "Nothing was written" in result["message"], result
    report = yarn_cluster.wait_for_app(result["app_id"])
    assert (report["state"], report["finalStatus"]) == ("FINISHED", "FAILED"), report
    assert "TABLESWAP_JOURNAL_URL" in _driver_output(yarn_cluster, result["app_id"])
    assert not list(state_dir.rglob("*.db"))
    assert not storage.exists(loc.join(yarn_hdfs_root, "events", "_tableswap"))
    assert reader_view(spark, table) == before


# --------------------------------------------------------------------------- failures
def _wait_for(path: Path, proc: subprocess.Popen, log: Path, timeout_s: float = 600.0) -> str:
    """``path``'s text once it exists, while ``proc`` runs."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"exited with {proc.returncode} before {path.name}:\n{_log(log.parent, log.name)}"
        assert time.monotonic() < deadline, f"no {path} after {timeout_s:g}s"
        time.sleep(0.2)
    return path.read_text()


def _wait_gone(pid: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not process_gone(pid):
        assert time.monotonic() < deadline, f"process {pid} still running {timeout_s:g}s after its container's kill"
        time.sleep(0.2)


def _executor_of(pid: int) -> int:
    """The executor JVM (``YarnCoarseGrainedExecutorBackend``) that process ``pid`` (a Python worker) runs under."""
    while pid > 1:
        if b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    raise AssertionError("no executor JVM above the held Python worker")


def test_the_application_master_killed_after_the_intent_a_second_attempt_commits_and_recover_aborts_the_first(
        spark, db, yarn_hdfs_root, yarn_cluster, hms, metastore_uri, pg_journal_url, tmp_path, monkeypatch):
    """Cluster mode with ``spark.yarn.maxAppAttempts=2``: the first attempt's driver (in the ApplicationMaster's
    container) holds at ``after_intent`` (the swap journaled as intended, under the table lock, nothing flipped: the
    table reads as before); its container is stopped through the ResourceManager, whose NodeManager kills it, driver
    and all, so YARN starts a second ApplicationMaster, which runs the job file again: a new swap of the same batch.
    It waits for the table lock the dead attempt left (released here once its process is gone, as the metastore's
    ``hive.txn.timeout`` would) and commits. ``tableswap recover`` from here, on the shared journal, then aborts the
    first attempt's swap, the janitor deletes its staging directory and the directory the second one displaced: the
    table holds the batch once, nothing unfinished or staged is left, its lock free. The second attempt is also the
    plain cluster-mode swap: its driver in its ApplicationMaster's container, committed in the shared journal
    (PostgreSQL) with the application's id (until 2026-11-29 an application of its own)."""
    table = create_events(spark, db, yarn_hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    before = reader_view(spark, table)
    work, pause = tmp_path / "cluster", tmp_path / "pause"
    submit = _submit_cluster(yarn_cluster, work, table=table, rows={today(0): 5, today(1): 1}, batch="a1",
                             metastore_uri=metastore_uri,
                             driver_env={"TABLESWAP_JOURNAL_URL": pg_journal_url, "TABLESWAP_PAUSE_FILE": str(pause)},
                             conf={"spark.yarn.maxAppAttempts": "2"},
                             job_args=("--pause-first-attempt", "after_intent"))
    _wait_for(Path(f"{pause}.reached"), submit, work / "submit.log")
    first = json.loads((work / "result.json.started-1").read_text())
    assert first["deploy_mode"] == "cluster" and first["container"].endswith("_000001"), first
    journal = Journal(pg_journal_url)
    [pending] = journal.list_swaps(db, "events", states=["pending"])  # the first attempt's intent
    assert reader_view(spark, table) == before  # nothing flipped

    yarn_cluster.kill_container(first["container"])

    _wait_gone(first["pid"])
    second = json.loads(_wait_for(Path(f"{work / 'result.json'}.started-2"), submit, work / "submit.log"))
    assert first["app_id"] == second["app_id"] and first["container"] != second["container"], (first, second)
    # Its lock, left without heartbeat: released as the metastore does after hive.txn.timeout (60 s in the
    # suite), or already expired.
    release_locks_of_dead_process(hms, db, "events", first["pid"])

    assert wait_or_kill(submit, 600) == 0, _log(work, "submit.log")

    result = _result(work)
    assert result["attempt"] == "2" and result["swap_id"] != pending.swap_id, result
    assert (result["master"], result["deploy_mode"]) == ("yarn", "cluster")
    assert result["container"].endswith("_000001"), result  # its ApplicationMaster's container
    assert result["replaced"] == [f"dt={today(0)}"] and result["added"] == [f"dt={today(1)}"], result
    report = yarn_cluster.wait_for_app(result["app_id"])
    assert (report["state"], report["finalStatus"]) == ("FINISHED", "SUCCEEDED"), report
    record = journal.get_swap(result["swap_id"])
    assert record.state == "committed" and record.app_id == result["app_id"]
    assert reader_view(spark, table) == {(today(0),): (5, ("a1",)), (today(1),): (1, ("a1",))}
    assert spark.table(table).select("id").distinct().count() == spark.table(table).count() == 6  # once each
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", metastore_uri)
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", pg_journal_url)
    recovered = CliRunner().invoke(cli_main, ["recover", "--table", table, "--stale-after", "0s", "--json"],
                                   catch_exceptions=False)
    assert recovered.exit_code == 0, recovered.output
    resolutions = json.loads(recovered.stdout)["resolutions"]
    assert [(r["swap_id"], r["outcome"]) for r in resolutions] == [(pending.swap_id, "aborted")], resolutions
    assert not journal.list_swaps(db, "events", states=["pending"])
    janitor = CliRunner().invoke(cli_main, ["janitor", "run", "--table", table, "--grace", "0", "--force-short-grace",
                                            "--json"], catch_exceptions=False)
    assert janitor.exit_code == 0, janitor.output
    assert not storage.exists(loc.join(yarn_hdfs_root, "events", "_tableswap", pending.swap_id))
    assert not journal.list_swaps(db, "events", states=["pending", "staging"])
    assert not journal.deletions(db=db, table="events")
    assert reader_view(spark, table) == {(today(0),): (5, ("a1",)), (today(1),): (1, ("a1",))}
    assert not hms.lock_holders(db, "events")


def test_an_executor_container_killed_in_the_middle_of_the_staging_write_its_task_runs_again(
        spark, db, yarn_hdfs_root, yarn_cluster, hms, metastore_uri, tmp_path):
    """Client mode: the staging write's second task holds, the first time it runs, once the first task has written;
    the executor's JVM is SIGKILLed (its container lost, as when a NodeManager dies or YARN preempts it). Spark runs the
    task again in an executor YARN starts in a new container, and the swap commits each row once."""
    table = create_events(spark, db, yarn_hdfs_root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    journal_url = f"sqlite:///{tmp_path / 'journal.db'}"
    work, hold = tmp_path / "client", tmp_path / "hold"
    hold.mkdir()
    driver = _run_client(yarn_cluster, work, table=table, rows={today(0): 30, today(1): 40}, batch="e1",
                         metastore_uri=metastore_uri, env={"TABLESWAP_JOURNAL_URL": journal_url}, hold=hold)
    worker = int(_wait_for(hold / "reached", driver, work / "driver.log"))
    executor = _executor_of(worker)
    killed = {line.split("=", 1)[1] for line in Path(f"/proc/{executor}/environ").read_bytes().decode().split("\0")
              if line.startswith("CONTAINER_ID=")}

    os.kill(executor, signal.SIGKILL)

    assert wait_or_kill(driver, 600) == 0, _log(work, "driver.log")
    result = _result(work)
    assert Journal(journal_url).get_swap(result["swap_id"]).state == "committed"
    assert reader_view(spark, table) == {(today(0),): (30, ("e1",)), (today(1),): (40, ("e1",))}
    assert spark.table(table).select("id").distinct().count() == 70  # each row once
    executors = _executor_containers(yarn_cluster, result["app_id"])
    assert killed < set(executors), (killed, executors)  # the killed container, and at least one after it
    assert any("Finished task" in err for name, err in executors.items() if name not in killed), executors
