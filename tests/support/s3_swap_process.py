"""A swap in a Spark process of its own (a session's committer is fixed when the session starts).

``python -m tests.support.s3_swap_process CONFIG.json``; the config names the metastore, the Spark conf (the S3A
jars, endpoint and committer), the table, the rows of each swap and a directory for handshakes: before
each swap the process writes ``<dir>/ready-N`` and waits for ``<dir>/go-N``, so that the test can read
the S3 endpoint's request log around exactly that swap; after it, ``<dir>/result-N.json``. A swap
listed with ``"crash_at"`` runs with ``TABLESWAP_CRASH_AT`` set (the process is SIGKILLed there). ``"master"``
(default ``local[2]``) runs the driver against a cluster instead (tests/integration/cluster_scenarios.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def _wait_for(path: Path, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"nobody created {path} within {timeout:.0f}s")
        time.sleep(0.05)


def main(config_file: str) -> None:
    config = json.loads(Path(config_file).read_text())
    handshake = Path(config["dir"])
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(config.get("master", "local[2]")).appName("s3-swap-process")
               .config("spark.hadoop.hive.metastore.uris", config["metastore_uri"])
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.warehouse.dir", str(handshake / "warehouse")))
    for key, value in config["spark_conf"].items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    from tableswap import swap_partitions

    for n, swap in enumerate(config["swaps"], start=1):
        df = spark.createDataFrame([tuple(r) for r in swap["rows"]], config["schema"])
        df.cache().count()  # the batch is computed before the handshake: the swap alone is measured
        (handshake / f"ready-{n}").write_text("")
        _wait_for(handshake / f"go-{n}")
        if swap.get("crash_at"):
            os.environ["TABLESWAP_CRASH_AT"] = swap["crash_at"]
        result = swap_partitions(df, config["table"])
        (handshake / f"result-{n}.json").write_text(json.dumps(result.to_dict(), default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
