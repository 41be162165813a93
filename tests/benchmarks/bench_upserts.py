"""Benchmark: ``merge_partitions`` of 1 % updated rows into 20 partitions, and compaction throughput
(docs/upserts-and-compaction.md, figures in docs/benchmarks.md#upserts-and-compaction).

    python -m tests.benchmarks.bench_upserts                          # 2M rows, 20 partitions, 3 runs
    python -m tests.benchmarks.bench_upserts --rows 500000 --runs 1 --small-files 200,1000 --json out.json

On one development metastore (Hive 2.3 from the pyspark wheel, Derby), a SQLite journal and a local[2]
SparkSession, with local files:

* **merge**: a table of ``--rows`` rows in 20 partitions (``dt``); the updates are 1 % of its rows (spread
  over all 20 partitions, new values) plus 0.1 % new keys. Timed: one ``merge_partitions(updates, table,
  on=["id"])`` per run (the updates are materialized as Parquet once and read back each run), and for
  comparison the full rewrite a plain Spark job would do (read the 20 partitions, join, dynamic
  ``INSERT OVERWRITE``). Checked: the table's row count after each run.
* **compaction**: for each N of ``--small-files``, a partition of N small files (``--rows-per-file`` rows
  each) compacted into target-size files; timed: ``compact_partitions`` end to end; reported: files before
  and after, MB/s of data rewritten, rows per second.

The comparison with Delta Lake's ``MERGE`` on the same data waits for the peer benchmark (Delta and Iceberg
against tableswap), which sets Delta up; this script does not install it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows of the merge's table")
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small-files", default="200,1000", help="small files per compacted partition (comma separated)")
    ap.add_argument("--rows-per-file", type=int, default=500)
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    from tableswap import compact_partitions, merge_partitions
    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-upserts-"))
    ms = DevMetastore(state_dir=work / "hms")
    status = ms.start(probe=probe)
    os.environ["TABLESWAP_METASTORE_URI"] = status.uri
    os.environ["TABLESWAP_JOURNAL_URL"] = f"sqlite:///{work / 'journal.db'}"
    spark = (SparkSession.builder.master("local[2]").appName("tableswap-bench-upserts")
             .config("spark.hadoop.hive.metastore.uris", status.uri).config("spark.sql.warehouse.dir", str(work / "wh"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE DATABASE bench")
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "spark": spark.version,
                                 "date": time.strftime("%Y-%m-%d"), "load_1m": os.getloadavg()[0]},
                     "merge": {}, "compaction": []}
    try:
        results["merge"] = bench_merge(spark, work, args, merge_partitions)
        for n in [int(x) for x in args.small_files.split(",") if x]:
            results["compaction"].append(bench_compaction(spark, work, n, args.rows_per_file, compact_partitions))
    finally:
        spark.stop()
        ms.stop()
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def _table(spark, work: Path, name: str) -> str:
    spark.sql(f"CREATE TABLE bench.{name} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
              f"LOCATION '{(work / 'tables' / name).as_uri()}'")
    return f"bench.{name}"


def bench_merge(spark, work: Path, args, merge_partitions) -> dict:
    parts = args.partitions
    base = spark.range(args.rows).selectExpr("id", "concat('v', id) AS v",
                                             f"concat('2026-06-', lpad(cast(id % {parts} + 1 AS string), 2, '0')) AS dt")
    updates_path = str(work / "updates")
    (base.where("id % 100 = 7").selectExpr("id", "concat('u', id) AS v", "dt")
     .unionByName(spark.range(args.rows, args.rows + args.rows // 1000).selectExpr(
         "id", "concat('n', id) AS v", f"concat('2026-06-', lpad(cast(id % {parts} + 1 AS string), 2, '0')) AS dt"))
     .write.parquet(updates_path))
    n_updates = spark.read.parquet(updates_path).count()
    out: dict = {"rows": args.rows, "partitions": parts, "updates": n_updates, "tableswap_s": [], "spark_rewrite_s": []}
    for run in range(args.runs):
        table = _table(spark, work, f"merge_ts_{run}")
        base.write.insertInto(table)
        t = time.perf_counter()
        merge_partitions(spark.read.parquet(updates_path), table, on=["id"])
        out["tableswap_s"].append(round(time.perf_counter() - t, 2))
        out["rows_after"] = spark.table(table).count()
        plain = _table(spark, work, f"merge_spark_{run}")
        base.write.insertInto(plain)
        t = time.perf_counter()
        ups = spark.read.parquet(updates_path)
        current = spark.table(plain)
        merged = (current.join(ups.select("id"), "id", "left_anti").unionByName(ups)
                  .localCheckpoint())  # Spark cannot overwrite a table it reads from in the same job
        merged.write.insertInto(plain, overwrite=True)
        out["spark_rewrite_s"].append(round(time.perf_counter() - t, 2))
        assert spark.table(plain).count() == out["rows_after"]
    out["tableswap_median_s"] = statistics.median(out["tableswap_s"])
    out["spark_rewrite_median_s"] = statistics.median(out["spark_rewrite_s"])
    return out


def bench_compaction(spark, work: Path, files: int, rows_per_file: int, compact_partitions) -> dict:
    table = _table(spark, work, f"compact_{files}")
    rows = files * rows_per_file
    spark.conf.set("spark.sql.files.maxRecordsPerFile", str(rows_per_file))
    spark.range(rows, numPartitions=1).selectExpr("id", "concat('v', id) AS v", "'2026-06-01' AS dt") \
        .write.insertInto(table)
    spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    part = work / "tables" / table.split(".")[1] / "dt=2026-06-01"
    size = sum(f.stat().st_size for f in part.iterdir() if not f.name.startswith(("_", ".")))
    t = time.perf_counter()
    result = compact_partitions(spark, table, target_file_bytes=max(1024 * 1024, size // 2))
    seconds = time.perf_counter() - t
    new = Path(result.replaced[0].new_location.replace("file://", "").replace("file:", ""))
    after = len([f for f in new.iterdir() if not f.name.startswith(("_", "."))])
    return {"files_before": files, "files_after": after, "rows": rows, "bytes": size, "seconds": round(seconds, 2),
            "mb_per_s": round(size / 1e6 / seconds, 2), "rows_per_s": round(rows / seconds)}


def report(results: dict) -> str:
    m = results["merge"]
    lines = [f"machine: {results['machine']}", "",
             f"merge of {m['updates']} updates (1 % of {m['rows']} rows + 0.1 % new) into {m['partitions']} partitions",
             "| method | median s | runs |", "|---|---|---|",
             f"| merge_partitions | {m['tableswap_median_s']} | {m['tableswap_s']} |",
             f"| Spark: read, anti-join, dynamic INSERT OVERWRITE | {m['spark_rewrite_median_s']} | {m['spark_rewrite_s']} |",
             "", "compaction", "| files before | files after | rows | MB | s | MB/s | rows/s |", "|---|---|---|---|---|---|---|"]
    for c in results["compaction"]:
        lines.append(f"| {c['files_before']} | {c['files_after']} | {c['rows']} | {c['bytes'] / 1e6:.1f} | {c['seconds']} "
                     f"| {c['mb_per_s']} | {c['rows_per_s']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
