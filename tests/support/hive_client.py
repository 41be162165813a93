"""Spark's Hive client for the release under test, without resolving it again in every Spark process.

A SparkSession on a 4.x metastore needs Spark's Hive 4 client (``spark_client_conf``:
``spark.sql.hive.metastore.jars=maven``), which every Spark process resolves again through Ivy at its first
metastore call and copies into a temporary directory of its own: 14 s there against 5 s with the same jars from
a directory (``jars=path``), measured on 2 cores (2026-11-28, 4.0.1, 267 jars). So the suite's session records
the jars its resolution gave into the jar cache (``$TABLESWAP_JARS_DIR``, else ~/.cache/tableswap/jars:
``spark-<pyspark>-hive-<release>/``), and later Spark processes of the suite (and later runs) use that
directory; until it exists they resolve as a user's job does. Nothing of the library changes: users keep
``spark_client_conf`` (docs/metastores.md), and a test checks it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from tableswap.devmetastore.releases import spark_client_conf
from tableswap.jvm.jars import default_cache_dir

JARS_KEY = "spark.sql.hive.metastore.jars"
#: Written last into a recorded directory: without it the directory is incomplete (a run stopped mid-copy).
COMPLETE = ".complete"


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def recorded_dir(version: str) -> Path:
    return default_cache_dir() / f"spark-{_pyspark_version()}-hive-{version}"


def client_conf(version: str | None) -> dict[str, str]:
    """``spark_client_conf(version)``, with the recorded jars of a release Spark resolves by Maven coordinates."""
    conf = spark_client_conf(version)
    if conf.get(JARS_KEY) != "maven" or version is None:
        return conf
    where = recorded_dir(version)
    if not (where / COMPLETE).is_file():
        return conf
    return {**conf, JARS_KEY: "path", "spark.sql.hive.metastore.jars.path": f"{where.as_uri()}/*.jar"}


def record(session, version: str | None, since: float) -> Path | None:
    """After ``session`` (started at ``since``, ``time.time()``) resolved the Hive client by Maven coordinates and
    made its first metastore call: copy the jars it resolved (its temporary ``hive-v<release>-*`` directory,
    deleted when its JVM exits) into :func:`recorded_dir`. Returns the directory, or None when nothing was to be
    recorded (a release with the built-in client, already recorded, or no such temporary directory)."""
    if version is None or session.conf.get(JARS_KEY) != "maven":
        return None  # the built-in client, or this session used the recorded jars
    where = recorded_dir(version)
    if (where / COMPLETE).is_file():
        return None
    # Spark names it after the release's major and minor version: hive-v4_0-<random> for 4.0.x.
    major_minor = "_".join(version.split(".")[:2])
    candidates = [d for d in Path(tempfile.gettempdir()).glob(f"hive-v{major_minor}-*")
                  if d.is_dir() and d.stat().st_mtime >= since - 1 and any(d.glob("*.jar"))]
    if len(candidates) != 1:
        return None  # none, or another process's as well: which is ours cannot be told
    [resolved] = candidates
    partial = where.with_name(f"{where.name}.partial-{int(time.time())}")
    shutil.copytree(resolved, partial)
    (partial / COMPLETE).write_text(f"{len(list(partial.glob('*.jar')))} jars from {resolved.name}\n")
    shutil.rmtree(where, ignore_errors=True)
    partial.rename(where)
    return where
