"""A Spark job on YARN that swaps a batch into a table (tests/integration/test_yarn.py): run as a PySpark driver in client mode
(``python tests/support/yarn_job.py --conf spark.master=yarn ...``) or submitted in cluster mode (``spark-submit --master yarn
--deploy-mode cluster tests/support/yarn_job.py ...``: its driver in the ApplicationMaster's container). Self-contained:
in cluster mode this file alone is shipped; ``tableswap`` comes from the containers' Python.

It builds the batch (``--rows DAY=N,...``, tagged ``--batch``), calls ``swap_partitions`` with the settings of its
environment (``TABLESWAP_JOURNAL_URL``: in cluster mode ``spark.yarn.appMasterEnv.TABLESWAP_JOURNAL_URL``) and the
session's metastore, and writes what happened as JSON into ``--result`` (a path on this machine: the containers run
here). A refused swap exits with 3, so that the application fails.

``--hold DIR``: the write's second task, the first time it runs, writes its Python worker's process id into
``DIR/reached`` and waits there until its executor is gone (a test kills the executor's container); run again
(a new task attempt, or a new attempt of its stage after the lost executor's shuffle output is computed again),
it goes on.

``--pause-first-attempt POINT``: the application's first attempt (in cluster mode: its ApplicationMaster's container
``container_..._01_000001``) pauses its driver at the swap's fault point ``POINT`` (``TABLESWAP_PAUSE_AT``, with the
``TABLESWAP_PAUSE_FILE`` of its environment, src/tableswap/faults.py), where a test kills its container, as a lost
ApplicationMaster; a later attempt runs the job whole. Each attempt also writes ``--result`` ``.started-<attempt>``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _hold(directory: str):
    """A column function that holds the write's second task, the first time it runs, until its executor dies."""

    def hold(value):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None or ctx.partitionId() != 1:
            return value
        mine = Path(directory, f"worker-{os.getpid()}")
        mine.write_text(str(os.getpid()))
        try:  # the first time only (a link is made whole, once): a task or a stage run again goes on
            os.link(mine, Path(directory, "reached"))
        except FileExistsError:
            return value
        parent, deadline = os.getppid(), time.monotonic() + 600
        while os.getppid() == parent and time.monotonic() < deadline:  # until the executor goes
            time.sleep(0.1)
        raise RuntimeError("the held task was not killed with its executor")

    return hold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", required=True)
    parser.add_argument("--rows", required=True, help="DAY=N,... rows per partition")
    parser.add_argument("--batch", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--conf", action="append", default=[], help="key=value for the SparkSession (client mode)")
    parser.add_argument("--hold")
    parser.add_argument("--pause-first-attempt", metavar="POINT")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as sf

    from tableswap import TableSwapError, swap_partitions

    builder = SparkSession.builder.appName(f"tableswap-test-{args.batch}").enableHiveSupport()
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    conf = spark.sparkContext.getConf()
    out: dict = {"app_id": spark.sparkContext.applicationId, "pid": os.getpid(),
                 "master": conf.get("spark.master"), "deploy_mode": conf.get("spark.submit.deployMode"),
                 "container": os.environ.get("CONTAINER_ID")}
    container = os.environ.get("CONTAINER_ID")  # container_[e<epoch>_]<cluster>_<app>_<attempt>_<container>
    out["attempt"] = str(int(container.split("_")[-2])) if container else None
    Path(args.result + ".started").write_text(json.dumps(out))
    Path(f"{args.result}.started-{out['attempt']}").write_text(json.dumps(out))
    if args.pause_first_attempt and out["attempt"] == "1":
        os.environ["TABLESWAP_PAUSE_AT"] = args.pause_first_attempt
    rows = [(n, f"v{i}", args.batch, day) for n, (day, i) in enumerate(
        ((day, i) for day, count in (p.split("=") for p in args.rows.split(",")) for i in range(int(count))), 1)]
    df = spark.createDataFrame(rows, "id bigint, value string, batch string, dt string")
    if args.hold:
        df = df.repartition(2).withColumn("value", sf.udf(_hold(args.hold), "string")("value"))
    code = 0
    try:
        result = swap_partitions(df, args.table)
        out.update(swap_id=result.swap_id, added=[c.partition for c in result.added],
                   replaced=[c.partition for c in result.replaced])
    except TableSwapError as exc:
        out.update(error=type(exc).__name__, message=str(exc))
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)  # the driver's log
        code = 3
    partial = Path(args.result + ".part")
    partial.write_text(json.dumps(out))
    partial.rename(args.result)
    spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
