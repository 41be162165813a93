"""tableswap on a real Spark cluster: a standalone master and two workers on loopback (tests/cluster.py).

One Python process holds one SparkContext, and the rest of the suite runs ``local[2]``; so a session-scoped
fixture starts the cluster and runs, in a pytest process of its own whose ``spark`` fixture is a client-mode
driver on the cluster (``$TABLESWAP_TEST_SPARK_MASTER``), the behaviour tests listed in :data:`BEHAVIOUR`
with their own assertions, and what a cluster adds (tests/cluster_scenarios.py: executors writing, an
executor killed mid-write, speculation, a driver killed after the intent). That process has its own
development metastore whose abandoned locks expire after 10 s (the crashed driver's). Each test here
reports one of those tests. The cluster and that process start only when a test of this file is selected,
as soon as the session's collection ends (they run beside the tests before this file's); skip them all
locally with ``-m 'not campaign and not cluster'``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from . import cluster, cluster_scenarios, needs
from .helpers import SRC

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

REPO = Path(SRC).parent

#: Behaviour tests run again with the driver on the cluster: swap partitions (add, replace, rerun), swap
#: table, rollback, recover after a failed flip, the janitor.
BEHAVIOUR = (
    "test_swap_partitions.py::test_backfill_replaces_existing_adds_new_and_rerun_is_idempotent",
    "test_swap_table.py::test_swap_table_repoints_location_and_keeps_old_files",
    "test_admin_cli.py::test_rollback_partition_then_rollback_of_rollback_then_to",
    "test_admin_cli.py::test_rollback_unpartitioned_table",
    "test_concurrency.py::test_failure_during_the_flip_says_recover_and_recover_completes_it",
    "test_janitor.py::test_a_location_made_live_again_by_a_rollback_is_never_deleted",
    "test_janitor.py::test_the_executor_rechecks_the_live_metastore_right_before_deleting",
)
SCENARIOS = tuple(f"cluster_scenarios.py::{name}" for name in vars(cluster_scenarios) if name.startswith("test_"))
INNER_LOCK_TIMEOUT_S = 10


@dataclass
class InnerRun:
    """The outcome of each test of the cluster run, by ``file::name`` (parametrized variants together)."""

    returncode: int
    seconds: float
    log: Path
    outcomes: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # [(id, outcome, text)]

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _parse_junit(path: Path) -> dict[str, list[tuple[str, str, str]]]:
    out: dict[str, list[tuple[str, str, str]]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        name = case.get("name", "")
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                text = (child.get("message") or "") + "\n" + (child.text or "")
                break
        out.setdefault(f"{module}.py::{name.split('[')[0]}", []).append((name, outcome, text))
    return out


@dataclass
class _Launched:
    """The cluster and the pytest process running on it, started together."""

    cluster: cluster.StandaloneCluster
    proc: subprocess.Popen
    work: Path
    began: float


_launched: _Launched | None = None


def launch(tmp_path_factory: pytest.TempPathFactory) -> _Launched:
    """Start the standalone cluster and, at once, the pytest process that runs :data:`BEHAVIOUR` and
    :data:`SCENARIOS` with the driver on it (its workers register while that process starts its metastore).
    Called when the session's collection ends if a test of this file is selected (tests/conftest.py): the
    cluster run then goes on beside the tests before this file's, which leave about a third of the two cores
    idle; else by the first test here."""
    global _launched
    if _launched is not None:
        return _launched
    if not shutil.which("java"):
        needs.missing("Java 17", "no java on PATH", "apt-get install openjdk-17-jre-headless")
    spark_cluster = cluster.StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start(wait=False)
    work = tmp_path_factory.mktemp("cluster-run")
    env = {**os.environ, cluster.MASTER_ENV: spark_cluster.master_url, "TABLESWAP_TEST_NO_S3": "1",
           "TABLESWAP_TEST_LOCK_TIMEOUT": str(INNER_LOCK_TIMEOUT_S),
           "PYTHONPATH": os.pathsep.join([SRC, str(REPO), os.environ.get("PYTHONPATH", "")]),
           "PYTEST_ADDOPTS": ""}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={work / 'junit.xml'}",
           f"--basetemp={work / 'tmp'}", *(f"tests/{t}" for t in BEHAVIOUR + SCENARIOS)]
    began = time.monotonic()
    try:
        with open(work / "pytest.log", "wb") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    except BaseException:
        spark_cluster.stop()
        raise
    _launched = _Launched(spark_cluster, proc, work, began)
    return _launched


def stop_launched() -> None:
    """Kill the cluster run if it is still going and stop the cluster (the session's end)."""
    global _launched
    if _launched is None:
        return
    launched, _launched = _launched, None
    try:
        if launched.proc.poll() is None:
            launched.proc.kill()
            launched.proc.wait()
    finally:
        launched.cluster.stop()


@pytest.fixture(scope="session")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InnerRun]:
    """The outcome of the cluster run (started by :func:`launch`), once it has ended; the cluster stops after
    the session."""
    launched = launch(tmp_path_factory)
    try:
        try:
            launched.cluster.wait_ready()
            launched.proc.wait(timeout=1800)
        finally:
            if launched.proc.poll() is None:
                launched.proc.kill()
                launched.proc.wait()
        run = InnerRun(launched.proc.returncode, round(time.monotonic() - launched.began, 1),
                       launched.work / "pytest.log")
        junit = launched.work / "junit.xml"
        if junit.exists():
            run.outcomes = _parse_junit(junit)
        print(f"\ncluster run: {run.seconds}s since it started (its workers found registered after "
              f"{launched.cluster.startup_seconds}s), exit {run.returncode}")
        yield run
    finally:
        stop_launched()


@pytest.mark.parametrize("test", BEHAVIOUR + SCENARIOS)
def test_on_the_cluster(cluster_run: InnerRun, test: str) -> None:
    results = cluster_run.outcomes.get(test)
    assert results, f"{test} did not run on the cluster (exit {cluster_run.returncode}):\n{cluster_run.tail()}"
    bad = [(name, outcome, text) for name, outcome, text in results if outcome != "passed"]
    if bad and all(outcome == "skipped" for _, outcome, _ in bad) and not needs.strict():
        pytest.skip("; ".join(text.strip().splitlines()[0] for _, _, text in bad))
    assert not bad, "\n\n".join(f"{name}: {outcome}\n{text}" for name, outcome, text in bad)
