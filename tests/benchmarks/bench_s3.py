"""Benchmark on S3 (moto's S3 emulator on loopback, not AWS): tableswap vs Spark dynamic partition overwrite.

    python -m tests.benchmarks.bench_overwrite --storage s3a            # K = 1,20,200; 3 runs each
    python -m tests.benchmarks.bench_s3 --k 1,20 --rows 50000 --runs 1

One endpoint (tests/support/s3.py: every request it receives is logged, COPY sources sized), one development
metastore with S3 support, the S3A jars from ``tableswap jars s3``. For each K (partitions in the batch:
half existing, half new), identical tables and identical input (the batch materialized as local Parquet
once, read back for every run), each method on a fresh table:

* ``ts-magic``: tableswap, Spark session with the S3A magic committer;
* ``ts-classic``: tableswap, Spark session with Hadoop's classic committer;
* ``dynamic``: ``insertInto(overwrite=True)`` with ``partitionOverwriteMode=dynamic`` (classic committer:
  the S3A committers refuse dynamic mode);
* ``static`` (K = 1 only): ``INSERT OVERWRITE ... PARTITION (dt=...)``, classic committer.

A Spark session's committer is fixed when it starts, so the methods run in two phases (one session each):
classic-committer methods first (taking turns), then ts-magic. Reported: median end-to-end seconds, the
ratio to dynamic overwrite, and per method the S3 requests by type and the bytes copied server-side during
the timed call (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

KINDS = ("PUT", "COPY", "DELETE", "LIST", "HEAD", "GET", "MULTIPART")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", default="s3a", choices=["s3a"])
    ap.add_argument("--k", default="1,20,200", help="partition counts to replace (comma separated)")
    ap.add_argument("--rows", type=int, default=200_000, help="rows per batch")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per method and K (median reported)")
    ap.add_argument("--json", default="benchmark-s3-results.json", help="where to write the raw figures")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint

    from tableswap import storage
    from tableswap.devmetastore import DevMetastore
    from tableswap.jvm.jars import S3Access, resolve_s3_jars, s3a_spark_conf
    from tableswap.metastore.client import probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-s3-"))
    endpoint = S3Endpoint().start()
    bucket = endpoint.new_bucket("bench")
    access = S3Access(endpoint=endpoint.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, path_style=True,
                      region=REGION)
    jars = resolve_s3_jars()
    ms = DevMetastore(state_dir=work / "hms", s3=access)
    uri = ms.start(probe=probe).uri
    os.environ.update({"TABLESWAP_METASTORE_URI": uri, "TABLESWAP_JOURNAL_URL": f"sqlite:///{work / 'journal.db'}",
                       "AWS_ENDPOINT_URL": endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                       "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION})
    storage.configure("s3", endpoint_url=endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    ks = [int(x) for x in args.k.split(",") if x.strip()]
    samples: dict[int, dict[str, list[dict]]] = {k: {} for k in ks}
    try:
        for phase, committer, methods in (("classic", "file", ("ts-classic", "dynamic", "static")),
                                          ("magic", "magic", ("ts-magic",))):
            spark = _session(uri, work, s3a_spark_conf(jars, access, committer=committer))
            if phase == "classic":
                spark.sql("CREATE DATABASE IF NOT EXISTS bench")
                for k in ks:
                    _prepare_inputs(spark, work, k, args.rows)
            for k in ks:
                run_methods = [m for m in methods if m != "static" or k == 1]
                for m in run_methods:  # one untimed warm-up each
                    _run(spark, endpoint, bucket, work, k, m)
                for run in range(args.runs):
                    order = run_methods[run % len(run_methods):] + run_methods[:run % len(run_methods)]
                    for m in order:
                        samples[k].setdefault(m, []).append(_run(spark, endpoint, bucket, work, k, m))
                        print(f"K={k} {m} run {run + 1}: {samples[k][m][-1]['seconds']:.2f}s "
                              f"{samples[k][m][-1]['requests']}", flush=True)
            spark.stop()
    finally:
        ms.stop()
        endpoint.stop()
    results = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "rows": args.rows, "runs": args.runs,
               "endpoint": "moto S3 emulator on loopback (not AWS)", "by_k": samples}
    Path(args.json).write_text(json.dumps(results, indent=2))
    print_table(results)
    return 0


def _session(uri: str, work: Path, conf: dict[str, str]):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("tableswap-bench-s3")
               .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", str(work / "wh"))
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _prepare_inputs(spark, work: Path, k: int, rows: int) -> None:
    existing = max(1, k // 2)
    spark.range(max(rows // 4, 1000)).selectExpr("id", "CAST(id AS string) AS v",
                                                 f"concat('p', CAST(id % {existing} AS string)) AS dt") \
        .write.mode("overwrite").parquet(str(work / f"existing_{k}"))
    spark.range(rows).selectExpr("id", "sha1(CAST(id AS string)) AS v", f"concat('p', CAST(id % {k} AS string)) AS dt") \
        .write.mode("overwrite").parquet(str(work / f"batch_{k}"))


def _run(spark, endpoint, bucket: str, work: Path, k: int, method: str) -> dict:
    from tableswap import swap_partitions

    name = f"t_{method.replace('-', '_')}_{k}_{uuid.uuid4().hex[:6]}"
    table = f"bench.{name}"
    spark.sql(f"CREATE TABLE {table} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
              f"LOCATION 's3a://{bucket}/tables/{name}'")
    spark.read.parquet(str(work / f"existing_{k}")).write.insertInto(table)
    batch = spark.read.parquet(str(work / f"batch_{k}"))
    mark = endpoint.mark()
    start = time.perf_counter()
    if method.startswith("ts-"):
        swap_partitions(batch, table)
    elif method == "dynamic":
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        try:
            batch.write.insertInto(table, overwrite=True)
        finally:
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
    else:  # static, K = 1: one partition overwritten by name
        batch.createOrReplaceTempView("bench_batch")
        spark.sql(f"INSERT OVERWRITE TABLE {table} PARTITION (dt='p0') SELECT id, v FROM bench_batch")
    seconds = time.perf_counter() - start
    counts = endpoint.counts(mark)
    copied = endpoint.copied_bytes(mark)
    got = spark.table(table).where("dt = 'p0'").count()
    assert got > 0, f"{method}: nothing readable in p0"
    endpoint.purge(bucket, "tables/")  # untimed: moto's LIST reads the whole bucket (S3Endpoint.purge)
    return {"seconds": seconds, "requests": {kind: counts.get(kind, 0) for kind in KINDS}, "copied_bytes": copied}


def print_table(results: dict) -> None:
    print(f"\nS3 benchmark, {results['date']}, {results['cpus']} cores; {results['rows']} rows per batch; "
          f"median of {results['runs']} runs; endpoint: {results['endpoint']}")
    for k, by_method in results["by_k"].items():
        dyn = statistics.median(s["seconds"] for s in by_method["dynamic"]) if "dynamic" in by_method else None
        print(f"\nK = {k}\n")
        print("| method | seconds (median) | / dynamic | " + " | ".join(KINDS) + " | bytes copied |")
        print("|---|---|---|" + "---|" * len(KINDS) + "---|")
        for method, runs in by_method.items():
            secs = statistics.median(r["seconds"] for r in runs)
            ratio = f"{secs / dyn:.2f}" if dyn else "-"
            reqs = " | ".join(str(int(statistics.median(r["requests"][kind] for r in runs))) for kind in KINDS)
            copied = int(statistics.median(r["copied_bytes"] for r in runs))
            print(f"| {method} | {secs:.2f} | {ratio} | {reqs} | {copied:,} |")


if __name__ == "__main__":
    sys.exit(main())
