"""Swaps in a Spark process of its own against a Kerberized metastore (tests/test_secured_metastore.py).

``python -m tests.secured_swap_process CONFIG.json``. The process's environment holds the realm
(``KRB5_CONFIG``), the ticket cache the JVM and the library read (``KRB5CCNAME``) and tableswap's Kerberos
settings (``TABLESWAP_METASTORE_KERBEROS=true``); the config names the metastore, the Spark conf of a
Kerberized metastore (docs/security.md#spark), a database with its location, a table and the batches: each
batch is swapped in with ``swap_partitions`` (the staging write and the temporary table in this job); a
batch with ``"crash_at"`` runs with ``TABLESWAP_CRASH_AT`` set (the process is SIGKILLed there). After each
swap ``<dir>/result-N.json`` holds its result.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(config_file: str) -> None:
    config = json.loads(Path(config_file).read_text())
    out = Path(config["dir"])
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("secured-swap-process")
               .config("spark.hadoop.hive.metastore.uris", config["metastore_uri"])
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.warehouse.dir", str(out / "warehouse")))
    for key, value in config["spark_conf"].items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    db, table = config["db"], config["table"]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION '{config['db_location']}'")
    spark.sql(f"CREATE TABLE {db}.{table} (id BIGINT, batch STRING, dt STRING) USING parquet "
              f"PARTITIONED BY (dt) LOCATION '{config['table_location']}'")
    (out / "created").write_text("")

    from tableswap import swap_partitions

    for n, batch in enumerate(config["batches"], start=1):
        df = spark.createDataFrame([tuple(r) for r in batch["rows"]], "id BIGINT, batch STRING, dt STRING")
        if batch.get("crash_at"):
            os.environ["TABLESWAP_CRASH_AT"] = batch["crash_at"]
        result = swap_partitions(df, f"{db}.{table}")
        (out / f"result-{n}.json").write_text(json.dumps(result.to_dict(), default=str))
        # What a reader of this job sees after the swap (Spark reads the partitions through the metastore).
        rows = spark.sql(f"SELECT dt, batch, count(*) AS n FROM {db}.{table} GROUP BY dt, batch").collect()
        (out / f"read-{n}.json").write_text(json.dumps(sorted([r.dt, r.batch, r.n] for r in rows)))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
