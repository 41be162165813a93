"""Swaps in a Spark process of its own against secured metastores (tests/integration/test_secured_metastore.py).

``python -m tests.support.secured_swap_process CONFIG.json``. The config names the phases, run in turn in this one
process (one JVM: each Spark process start costs 20-50 s), each against a metastore of its own: its Spark conf
(docs/security.md#spark), the environment tableswap reads there (``TABLESWAP_METASTORE_*``, the journal; set
for the phase, the previous phase's removed), a database with its location, a table and the batches. Each phase
has a SparkSession of its own (the previous one stopped: a session's metastore is fixed when it starts).

Each batch is swapped in with ``swap_partitions`` (the staging write and the temporary table in this job); after
it ``<dir>/<phase>-result-N.json`` holds its result and ``<dir>/<phase>-read-N.json`` what this job then reads.
A batch with ``"crash_at"`` runs with ``TABLESWAP_CRASH_AT`` set: the process is SIGKILLed there (the last
batch of the last phase). A batch with ``"park_at"`` runs in a thread that stops at that point
(``TABLESWAP_PAUSE_AT``) and never goes on: the process moves to the next phase, and the SIGKILL that ends the
process ends that swap there too, a crash at that point of its own.

Its flips reach the Kerberized metastore through tableswap's client, which needs the ``kerberos`` binding: the
test puts the directory tests/support/kerberos_env.py built it into on this process's ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

def _session(config: dict, phase: dict):
    from pyspark.sql import SparkSession

    out = Path(config["dir"])
    builder = (SparkSession.builder.master("local[1]").appName(f"secured-swap-{phase['name']}")
               .config("spark.hadoop.hive.metastore.uris", phase["metastore_uri"])
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.warehouse.dir", str(out / f"warehouse-{phase['name']}")))
    # Every phase sets the same keys (test_secured_metastore checks): the first session's settings stay in the
    # JVM's defaults for the sessions after it.
    for key in sorted(phase["spark_conf"]):
        builder = builder.config(key, phase["spark_conf"][key])
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _set_env(env: dict[str, str | None]) -> None:
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def main(config_file: str) -> None:
    config = json.loads(Path(config_file).read_text())
    out = Path(config["dir"])
    from tableswap import swap_partitions

    spark = None
    for phase in config["phases"]:
        name = phase["name"]
        if spark is not None:
            spark.stop()
        _set_env({key: None for p in config["phases"] for key in p["env"]})
        _set_env(phase["env"])
        spark = _session(config, phase)
        db, table = phase["db"], phase["table"]
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION '{phase['db_location']}'")
        spark.sql(f"CREATE TABLE {db}.{table} (id BIGINT, batch STRING, dt STRING) USING parquet "
                  f"PARTITIONED BY (dt) LOCATION '{phase['table_location']}'")

        for n, batch in enumerate(phase["batches"], start=1):
            df = spark.createDataFrame([tuple(r) for r in batch["rows"]], "id BIGINT, batch STRING, dt STRING")
            if batch.get("park_at"):
                _park(swap_partitions, df, f"{db}.{table}", batch["park_at"], out / f"{name}-parked-{n}")
                continue
            if batch.get("crash_at"):
                os.environ["TABLESWAP_CRASH_AT"] = batch["crash_at"]
            result = swap_partitions(df, f"{db}.{table}")
            (out / f"{name}-result-{n}.json").write_text(json.dumps(result.to_dict(), default=str))
            # What a reader of this job sees after the swap (Spark reads the partitions through the metastore).
            rows = spark.sql(f"SELECT dt, batch, count(*) AS n FROM {db}.{table} GROUP BY dt, batch").collect()
            (out / f"{name}-read-{n}.json").write_text(json.dumps(sorted([r.dt, r.batch, r.n] for r in rows)))
    assert spark is not None
    spark.stop()


def _park(swap, df, table: str, point: str, pause_file: Path) -> None:
    """Run the swap in a thread that stops at ``point`` for good; return once it is there."""
    os.environ["TABLESWAP_PAUSE_AT"] = point
    os.environ["TABLESWAP_PAUSE_FILE"] = str(pause_file)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            swap(df, table)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    threading.Thread(target=run, daemon=True, name=f"parked-swap-{point}").start()
    deadline = time.monotonic() + 300
    while not Path(f"{pause_file}.reached").exists():
        if failed:
            raise failed[0]
        if time.monotonic() > deadline:
            raise RuntimeError(f"the parked swap did not reach {point}")
        time.sleep(0.05)
    os.environ.pop("TABLESWAP_PAUSE_AT")


if __name__ == "__main__":
    main(sys.argv[1])
