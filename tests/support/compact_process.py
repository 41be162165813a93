"""A compaction in a Spark process of its own (tests/integration/test_appends_in_place.py: another writer, the test's own
Spark application, appends into the partition while this one waits at a pause point).

``python -m tests.support.compact_process CONFIG.json``; the config names the metastore, the table, the target file size
and a directory: the process writes ``<dir>/outcome.json`` when the compaction ends, ``{"result": ...}`` or
``{"error": <type>, "message": ..., "conflicts": [...]}``. Where it pauses is the caller's environment
(``TABLESWAP_PAUSE_AT``, ``TABLESWAP_PAUSE_FILE``: tableswap.faults); the journal is ``TABLESWAP_JOURNAL_URL``'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(config_file: str) -> None:
    config = json.loads(Path(config_file).read_text())
    work = Path(config["dir"])
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("compact-process")
             .config("spark.hadoop.hive.metastore.uris", config["metastore_uri"])
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.warehouse.dir", str(work / "warehouse"))
             .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={work / 'warehouse'}")
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    from tableswap import TableSwapError, compact_partitions

    try:
        result = compact_partitions(spark, config["table"], target_file_bytes=config["target_file_bytes"])
        outcome = {"result": result.to_dict()}
    except TableSwapError as exc:
        outcome = {"error": type(exc).__name__, "message": str(exc), "retryable": exc.retryable,
                   "conflicts": list(getattr(exc, "conflicts", ()) or ())}
    (work / "outcome.json").write_text(json.dumps(outcome, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
