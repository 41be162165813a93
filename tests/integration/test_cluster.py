"""tableswap on a real Spark cluster: a standalone master and two workers on loopback (tests/support/cluster.py).

One Python process holds one SparkContext, and the rest of the suite runs ``local[2]``; so a session-scoped
fixture starts the cluster and runs, in a pytest process of its own whose ``spark`` fixture is a client-mode
driver on the cluster (``$TABLESWAP_TEST_SPARK_MASTER``), the behaviour tests listed in :data:`BEHAVIOUR`
with their own assertions, and what a cluster adds (tests/integration/cluster_scenarios.py: executors writing, an
executor killed mid-write, speculation, a spark-submit driver killed after an intent mid-script). That process has its own
development metastore whose abandoned locks expire after 10 s (the crashed driver's). Each test here
reports one of those tests. The cluster starts only when a test of this file is selected; skip them all
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

import pytest

from ..conftest import stop_beside_the_others
from ..support import cluster, needs
from . import cluster_scenarios
from ..support.helpers import SRC

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

REPO = Path(SRC).parent

#: Behaviour tests run again with the driver on the cluster: swap partitions (add, replace, rerun) and swap table,
#: whose batches the cluster's executors write and read. Rollback, recover after a failed flip and the janitor
#: ran here too until 2026-11-29: their steps are the driver's metastore calls and file deletions, the same on a
#: cluster as in local mode (the default run has them), and the cluster's part of a rollback's or recover's
#: test (executors writing the swaps before it, reading after) is that of the two kept here.
BEHAVIOUR = (
    "test_swap_partitions.py::test_backfill_replaces_existing_adds_new_and_rerun_is_idempotent",
    "test_swap_table.py::test_swap_table_repoints_location_and_keeps_old_files",
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


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The standalone cluster (master leading, workers started, maybe not yet registered)."""
    if not shutil.which("java"):
        needs.missing("Java 17", "no java on PATH", "apt-get install openjdk-17-jre-headless")
    spark_cluster = cluster.StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start(wait=False)
    try:
        yield spark_cluster
    finally:
        stop_beside_the_others("Spark standalone cluster", spark_cluster.stop)


@pytest.fixture(scope="session")
def cluster_run(spark_cluster, tmp_path_factory: pytest.TempPathFactory) -> InnerRun:
    """Run :data:`BEHAVIOUR` and :data:`SCENARIOS` with the driver on the cluster (its workers register
    while that process starts its metastore)."""
    work = tmp_path_factory.mktemp("cluster-run")
    junit = work / "junit.xml"
    env = {**os.environ, cluster.MASTER_ENV: spark_cluster.master_url, "TABLESWAP_TEST_NO_S3": "1",
           "TABLESWAP_TEST_LOCK_TIMEOUT": str(INNER_LOCK_TIMEOUT_S),
           "PYTHONPATH": os.pathsep.join([SRC, str(REPO), os.environ.get("PYTHONPATH", "")]),
           "PYTEST_ADDOPTS": ""}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
           f"--basetemp={work / 'tmp'}", *(f"tests/integration/{t}" for t in BEHAVIOUR + SCENARIOS)]
    began = time.monotonic()
    log = work / "pytest.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            spark_cluster.wait_ready()
            proc.wait(timeout=1800)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    run = InnerRun(proc.returncode, round(time.monotonic() - began, 1), log)
    if junit.exists():
        run.outcomes = _parse_junit(junit)
    print(f"\ncluster run: {run.seconds}s (cluster started in {spark_cluster.startup_seconds}s), "
          f"exit {run.returncode}")
    return run


@pytest.mark.parametrize("test", BEHAVIOUR + SCENARIOS)
def test_on_the_cluster(cluster_run: InnerRun, test: str) -> None:
    results = cluster_run.outcomes.get(test)
    assert results, f"{test} did not run on the cluster (exit {cluster_run.returncode}):\n{cluster_run.tail()}"
    bad = [(name, outcome, text) for name, outcome, text in results if outcome != "passed"]
    if bad and all(outcome == "skipped" for _, outcome, _ in bad) and not needs.strict():
        pytest.skip("; ".join(text.strip().splitlines()[0] for _, _, text in bad))
    assert not bad, "\n\n".join(f"{name}: {outcome}\n{text}" for name, outcome, text in bad)
