"""End-to-end tableswap demo: a real Hive Metastore and Spark, no Docker, no cluster.

    python -m tableswap.demo            # state in ./.tableswap-demo (deleted and recreated)

1. starts a local Hive Metastore (tableswap's dev launcher, jars from the pyspark wheel);
2. creates an EXTERNAL table partitioned by day with three days of data;
3. backfills one existing day and one new day with ``swap_partitions``;
4. reruns the same backfill (idempotent: same rows, no duplicates);
and prints what a reader sees after each step.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=".tableswap-demo", help="working directory for the demo's state")
    parser.add_argument("--keep-metastore", action="store_true", help="leave the metastore running at the end")
    args = parser.parse_args()

    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe

    base = Path(args.dir).resolve()
    data = base / "data"
    metastore = DevMetastore(state_dir=base / "metastore")
    metastore.stop()
    shutil.rmtree(base, ignore_errors=True)
    print(f"starting a local Hive Metastore (state in {base / 'metastore'}) ...", flush=True)
    status = metastore.start(probe=probe)
    print(f"metastore ready at {status.uri}")
    uri = status.uri
    if uri is None:  # a started metastore's status carries its URI (DevMetastore.start)
        raise RuntimeError("the local metastore started but reported no URI; nothing was written")
    os.environ["TABLESWAP_METASTORE_URI"] = uri
    os.environ["TABLESWAP_JOURNAL_URL"] = f"sqlite:///{base / 'journal.db'}"
    try:
        run_demo(uri, data, base)
    finally:
        if not args.keep_metastore:
            metastore.stop()
            print("metastore stopped")
        else:
            print(f"metastore still running: export TABLESWAP_METASTORE_URI={status.uri}")
    return 0


def run_demo(uri: str, data: Path, base: Path) -> None:
    from pyspark.sql import SparkSession

    from tableswap import swap_partitions
    from tableswap.core.locations import to_local_path

    spark = quiet_session(
        SparkSession.builder.master("local[2]").appName("tableswap-demo")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", str(base / "spark-warehouse"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .enableHiveSupport(),
        base / "spark.log",
    )
    try:
        spark.sql("CREATE DATABASE IF NOT EXISTS demo")
        spark.sql(
            "CREATE TABLE demo.events (id bigint, amount double, source string, dt string) USING parquet "
            f"PARTITIONED BY (dt) LOCATION '{(data / 'events').as_uri()}'"
        )

        def batch(days: dict[str, int], source: str):
            rows = [(i, float(i), source, day) for day, n in days.items() for i in range(n)]
            return spark.createDataFrame(rows, "id bigint, amount double, source string, dt string")

        batch({"2026-06-01": 100, "2026-06-02": 100, "2026-06-03": 100}, "original").write.insertInto("demo.events")
        show(spark, "1. the table as created (three days)")

        backfill = {"2026-06-02": 250, "2026-06-04": 80}
        result = swap_partitions(batch(backfill, "backfill"), "demo.events")
        print(f"\n{result.summary()}")
        for c in result.replaced:
            print(f"  replaced {c.partition}: {c.old_location}\n        -> {c.new_location}")
        for c in result.added:
            print(f"  added    {c.partition}: {c.new_location}")
        show(spark, "2. after the backfill (2026-06-02 replaced, 2026-06-04 added)")

        again = swap_partitions(batch(backfill, "backfill"), "demo.events")
        print(f"\n{again.summary()}")
        show(spark, "3. after rerunning the same backfill (identical: no duplicates)")
        print("\nDisplaced directories are kept for readers and rollback, queued for `tableswap janitor run`:")
        for location in result.displaced + again.displaced:
            local = to_local_path(location)  # the demo writes under its local directory only
            print(f"  {location}  (exists: {Path(local).exists() if local else 'not a local path'})")
    finally:
        spark.stop()


def quiet_session(builder, log: Path):
    """The demo's SparkSession, with the JVM's own output (start-up warnings, log4j lines) written to
    ``log`` instead of the user's terminal, which is kept for the demo's tables. Demo only: the library
    never touches logging or the user's session."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf()
    for key, value in builder._options.items():
        conf.set(key, value)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as sink:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
    SparkContext(conf=conf, gateway=gateway)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    print(f"Spark started (its own log: {log})")
    return spark


def show(spark, title: str) -> None:
    from tableswap.metastore.client import MetastoreClient

    print(f"\n{title}")
    rows = spark.sql(
        "SELECT dt, count(*) AS rows, concat_ws(',', sort_array(collect_set(source))) AS sources "
        "FROM demo.events GROUP BY dt ORDER BY dt"
    ).collect()
    # Where each partition points, as the metastore has it: one call (a DESCRIBE per partition is a query each).
    with MetastoreClient(os.environ["TABLESWAP_METASTORE_URI"]) as client:
        locations = {p.values[0]: p.location for p in client.list_partitions("demo", "events")}
    print(f"  {'partition':<14} {'rows':>5}  {'source':<10} location")
    for r in rows:
        print(f"  dt={r['dt']:<11} {r['rows']:>5}  {r['sources']:<10} {locations[r['dt']]}")


if __name__ == "__main__":
    sys.exit(main())
