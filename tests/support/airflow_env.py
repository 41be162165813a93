"""A virtual environment with a real Airflow and tableswap's provider, for tests/integration/test_airflow.py.

Airflow's pins do not fit beside pyspark's everywhere (its Spark provider replaces pyspark with
``pyspark-client``), and the operators need no Spark: the environment has Airflow (:data:`AIRFLOW_VERSION`),
its OpenLineage provider, tableswap from this checkout installed ``--no-deps`` and tableswap's dependencies
except pyspark (read from pyproject.toml). uv builds it (tests/support/uv_env.py) in seconds from its
download cache (``~/.cache/uv``, reused between runs as pip's is); pip took 563-577 s for Airflow alone
(2026-11-27, 2 cores). :func:`start` prepares it, and a migrated SQLite AIRFLOW_HOME, in a background
thread: conftest.py calls it as soon as tests/integration/test_airflow.py is among the collected tests, so that it is
ready by the time they run. What it took is printed; ``python -m tests.support.airflow_env DIR`` prepares one by hand.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import uv_env
from .uv_env import UV_MISSING, VenvEnv, project, uv_command

#: The Airflow release the provider is tested with, and its OpenLineage provider's.
AIRFLOW_VERSION = "3.3.2"
OPENLINEAGE_PROVIDER_VERSION = "2.20.3"


#: The environment: its root, what building it took (tests/support/uv_env.py).
AirflowEnv = VenvEnv


def requirements() -> list[str]:
    """What the environment installs besides tableswap itself: Airflow and its OpenLineage provider (pinned),
    tableswap's dependencies except pyspark, and its lineage and metrics extras."""
    extras = project()["optional-dependencies"]
    deps = [d for d in project()["dependencies"] if not re.match(r"pyspark\b", d)]
    return [f"apache-airflow=={AIRFLOW_VERSION}",
            f"apache-airflow-providers-openlineage=={OPENLINEAGE_PROVIDER_VERSION}",
            *extras["airflow"], *extras["lineage"], *extras["metrics"], *deps]


def build(root: Path, uv: list[str]) -> AirflowEnv:
    """Create the environment at ``root`` (which must not exist); raises ``CalledProcessError`` with uv's
    output on failure."""
    return uv_env.build(root, uv, requirements(), "airflow")


class Airflow:
    """A built environment and a migrated AIRFLOW_HOME (SQLite); :meth:`run_dag` runs one DAG with ``dag.test()``."""

    def __init__(self, env: AirflowEnv, home: Path) -> None:
        self.env, self.home, self.migrate_s = env, home, 0.0

    def environ(self, connections: dict[str, dict], **extra: str) -> dict[str, str]:
        """The environment of an Airflow process: this home, no example DAGs, ``connections`` as
        ``AIRFLOW_CONN_*`` (JSON), none of the test run's tableswap, OpenLineage or Airflow settings."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TABLESWAP_", "OPENLINEAGE", "AIRFLOW", "PYTHONPATH", "VIRTUAL_ENV"))}
        env.update(AIRFLOW_HOME=str(self.home), AIRFLOW__CORE__LOAD_EXAMPLES="False", **extra)
        for conn_id, conn in connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
        return env

    def migrate(self) -> None:
        began = time.monotonic()
        done = subprocess.run([str(self.env.root / "bin" / "airflow"), "db", "migrate"], env=self.environ({}),
                              capture_output=True, text=True, timeout=900)
        if done.returncode:
            raise RuntimeError(f"airflow db migrate failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        self.migrate_s = round(time.monotonic() - began, 1)

    def run_dag(self, dag_file: Path, spec: dict, connections: dict[str, dict], tmp: Path
                ) -> tuple[dict, dict, list[dict]]:
        """Run the DAG of ``dag_file`` (copied into the home's dags folder, where ``dag.test()`` looks for
        it) with ``$TABLESWAP_TEST_DAG`` = ``spec``; returns the run's states (the file's ``DAG_RESULT`` line),
        each task's XComs (``$TABLESWAP_TEST_OUT``), and the OpenLineage events Airflow's provider wrote (its
        file transport)."""
        (self.home / "dags").mkdir(exist_ok=True)
        shutil.copy(dag_file, self.home / "dags" / dag_file.name)
        out, events = tmp / "xcoms.json", tmp / "openlineage.jsonl"
        transport = {"type": "file", "log_file_path": str(events), "append": True}
        env = self.environ(connections, TABLESWAP_TEST_DAG=json.dumps(spec), TABLESWAP_TEST_OUT=str(out),
                           AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport),
                           AIRFLOW__OPENLINEAGE__NAMESPACE="airflow-test")
        began = time.monotonic()
        done = subprocess.run([self.python, str(self.home / "dags" / dag_file.name)], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=900)
        print(f"dag.test() of {spec['name']}: {time.monotonic() - began:.1f} s "
              f"(load average {os.getloadavg()[0]:.1f})")
        result = [line for line in done.stdout.splitlines() if line.startswith("DAG_RESULT ")]
        assert done.returncode == 0 and result and out.exists(), \
            f"exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
        lineage = [json.loads(line) for line in events.read_text().splitlines() if line.strip()] \
            if events.exists() else []
        return json.loads(result[-1][len("DAG_RESULT "):]), json.loads(out.read_text()), lineage

    @property
    def python(self) -> str:
        return self.env.python


def prepare(root: Path, uv: list[str]) -> Airflow:
    """The environment under ``root/venv`` and a migrated home under ``root/home``; prints what each took."""
    env = build(root / "venv", uv)
    airflow = Airflow(env, root / "home")
    airflow.home.mkdir(parents=True)
    airflow.migrate()
    print(f"Airflow {AIRFLOW_VERSION} environment built in {env.seconds} s {env.steps}, its database migrated "
          f"in {airflow.migrate_s} s (load average {os.getloadavg()[0]:.1f})")
    return airflow


#: :func:`prepare` in a background thread, once per process (``start(root)`` returns its future).
start = uv_env.InBackground("airflow-env", prepare).start


if __name__ == "__main__":  # python -m tests.support.airflow_env DIR
    uv = uv_command()
    if uv is None:
        sys.exit(UV_MISSING)
    prepare(Path(sys.argv[1]), uv)
