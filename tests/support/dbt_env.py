"""A virtual environment with dbt-core, dbt-spark's session method and tableswap's dbt plugin, for
tests/integration/test_dbt.py: dbt runs as a user runs it, a process of its own (``dbt run``) whose SparkSession
(dbt-spark's ``session`` method) uses the suite's metastore.

dbt's pins are not the suite's (its own click, protobuf, jsonschema...): the environment has dbt-core
(:data:`DBT_CORE_VERSION`), dbt-spark with its ``session`` extra (:data:`DBT_SPARK_VERSION`), tableswap's
dependencies with the suite's own pyspark release, and tableswap from this checkout (a wheel, with the plugin
under ``dbt/adapters/tableswap``). uv builds it from its download cache (tests/support/uv_env.py). dbt-core 1.12 is not
used: it needs ``dbt-core-experimental-parser``, whose source distribution downloads its binary from outside
the package registry while it builds. :func:`start` prepares it in a background thread: conftest.py calls it as
soon as tests/integration/test_dbt.py is among the collected tests. ``python -m tests.support.dbt_env DIR`` prepares one by hand.
"""

from __future__ import annotations

import os
import re
import sys
from importlib.metadata import version
from pathlib import Path

from . import uv_env
from .uv_env import UV_MISSING, VenvEnv, project, uv_command

#: The releases the plugin is tested with (pyproject's ``dbt`` extra bounds them).
DBT_CORE_VERSION = "1.11.16"
DBT_SPARK_VERSION = "1.11.0"


def requirements() -> list[str]:
    """dbt-core and dbt-spark[session] (pinned), the ``dbt`` extra, tableswap's dependencies with pyspark
    pinned to the release running the suite (the same Spark, the same Hive client)."""
    deps = [d for d in project()["dependencies"] if not re.match(r"pyspark\b", d)]
    return [f"dbt-core=={DBT_CORE_VERSION}", f"dbt-spark[session]=={DBT_SPARK_VERSION}",
            *project()["optional-dependencies"]["dbt"], f"pyspark=={version('pyspark')}", *deps]


def prepare(root: Path, uv: list[str]) -> VenvEnv:
    env = uv_env.build(root, uv, requirements(), "dbt")
    print(f"dbt {DBT_CORE_VERSION} / dbt-spark {DBT_SPARK_VERSION} environment built in {env.seconds} s "
          f"{env.steps} (load average {os.getloadavg()[0]:.1f})")
    return env


#: :func:`prepare` (into ``root/venv``) in a background thread, once per process (``start(root)`` returns its
#: future).
start = uv_env.InBackground("dbt-env", lambda root, uv: prepare(root / "venv", uv)).start


if __name__ == "__main__":  # python -m tests.support.dbt_env DIR
    uv = uv_command()
    if uv is None:
        sys.exit(UV_MISSING)
    prepare(Path(sys.argv[1]), uv)
