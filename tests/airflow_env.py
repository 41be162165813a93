"""A virtual environment with a real Airflow and tableswap's provider, for tests/test_airflow.py.

Airflow's pins do not fit beside pyspark's everywhere (its Spark provider replaces pyspark with
``pyspark-client``), and the operators need no Spark: the environment has Airflow (:data:`AIRFLOW_VERSION`),
its OpenLineage provider, tableswap from this checkout installed ``--no-deps`` and tableswap's dependencies
except pyspark (read from pyproject.toml). uv builds it (``uv venv``, ``uv pip install``) in seconds from its
download cache (``~/.cache/uv``, reused between runs as pip's is); pip took 563-577 s for Airflow alone
(2026-11-27, 2 cores). What it took is printed: ``python -m tests.airflow_env DIR`` builds one by hand.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: The Airflow release the provider is tested with, and its OpenLineage provider's.
AIRFLOW_VERSION = "3.3.2"
OPENLINEAGE_PROVIDER_VERSION = "2.20.3"


@dataclass(frozen=True)
class AirflowEnv:
    root: Path
    seconds: float
    steps: dict[str, float]

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")


def requirements() -> list[str]:
    """What the environment installs besides tableswap itself: Airflow and its OpenLineage provider (pinned),
    tableswap's dependencies except pyspark, and its lineage and metrics extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    deps = [d for d in project["dependencies"] if not re.match(r"pyspark\b", d)]
    return [f"apache-airflow=={AIRFLOW_VERSION}",
            f"apache-airflow-providers-openlineage=={OPENLINEAGE_PROVIDER_VERSION}",
            *extras["airflow"], *extras["lineage"], *extras["metrics"], *deps]


def uv_command() -> list[str] | None:
    """uv as the test extra installs it (``python -m uv``), else one on the PATH; ``None`` without either."""
    try:
        subprocess.run([sys.executable, "-m", "uv", "--version"], check=True, capture_output=True)
        return [sys.executable, "-m", "uv"]
    except (subprocess.CalledProcessError, OSError):
        pass
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and os.access(os.path.join(folder, "uv"), os.X_OK):
            return [os.path.join(folder, "uv")]
    return None


def build(root: Path, uv: list[str]) -> AirflowEnv:
    """Create the environment at ``root`` (which must not exist); raises ``CalledProcessError`` with uv's
    output on failure."""
    steps: dict[str, float] = {}
    began = time.monotonic()

    def step(name: str, args: list[str]) -> None:
        t = time.monotonic()
        done = subprocess.run([*uv, *args], capture_output=True, text=True)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
        steps[name] = round(time.monotonic() - t, 1)

    # The interpreter running the tests (its base, not its environment: pyspark stays out).
    step("venv", ["venv", "--quiet", "--python", sys.executable, str(root)])
    python = str(root / "bin" / "python")
    step("airflow", ["pip", "install", "--quiet", "--python", python, *requirements()])
    step("tableswap", ["pip", "install", "--quiet", "--python", python, "--no-deps", str(ROOT)])
    return AirflowEnv(root, round(time.monotonic() - began, 1), steps)


if __name__ == "__main__":  # python -m tests.airflow_env DIR
    uv = uv_command()
    if uv is None:
        sys.exit("uv is not installed: pip install uv (the test extra has it)")
    env = build(Path(sys.argv[1]), uv)
    print(f"built {env.root} in {env.seconds} s {env.steps} (load average {os.getloadavg()[0]:.1f})")
