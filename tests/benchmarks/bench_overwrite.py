"""Benchmark: tableswap vs Spark dynamic partition overwrite vs static overwrite (one command).

    python -m tests.benchmarks.bench_overwrite                 # K = 1,20,200,2000; 2M rows; 5 runs each
    python -m tests.benchmarks.bench_overwrite --k 20 --rows 500000 --runs 1 --json out.json
    python -m tests.benchmarks.bench_overwrite --history 1000  # tables that also hold 1,000 older partitions
    python -m tests.benchmarks.bench_overwrite --metastore-db postgresql://postgres@127.0.0.1:5432/bench_hms
    python -m tests.benchmarks.bench_overwrite --storage s3a   # on S3 (moto's emulator): see bench_s3.py
    python -m tests.benchmarks.bench_overwrite --cluster --k 20,200   # executors on a standalone cluster
    python -m tests.benchmarks.bench_overwrite --hdfs --runs 3 --rows 1000000 --no-fs-watch --flip-sizes ""

Same machine, same real Hive Metastore (tableswap's dev launcher), identical tables and identical input
(the batch is materialized as Parquet once and read back for every run). Both methods are timed by the
wall clock around the call, after one untimed warm-up each, and take turns going first. For each K
(partitions in the batch: half existing, half new) it prints a markdown table with: median end-to-end seconds, the ratio
tableswap / dynamic overwrite, the commit phase (data written → data visible), the metastore calls of
tableswap's commit, the file-system work at commit observed with inotify (renames and deletes under the
table root, bytes moved), and the metastore server's CPU time per call of each method (from /proc). It also
times the flip alone for --flip-sizes partitions.

With ``--hdfs`` the tables are on a local HDFS (the test suite's: Hadoop's MiniDFSCluster of the pyspark wheel's
Hadoop release, a NameNode and a DataNode on loopback, tests/support/hdfs.py), where a rename is one NameNode
call whatever the bytes: the case most favourable to Spark's dynamic overwrite, which renames each written
partition into place. The inputs stay on local disk; the plain write goes to HDFS too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path


def rss_mb() -> float:
    """Current resident set size of this (driver) Python process."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class FsWatch:
    """Counts renames and deletes below a directory with inotifywait (Debian package inotify-tools)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.events: list[tuple[str, str]] = []
        self.proc = subprocess.Popen(
            ["inotifywait", "-m", "-r", "-q", "-e", "moved_to,delete", "--format", "%e|%w%f", str(root)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        time.sleep(1.0 + len(list(root.rglob("*"))) / 20000)  # let it set up its watches

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            event, _, path = line.strip().partition("|")
            self.events.append((event, path))

    def stop(self) -> dict[str, int]:
        time.sleep(0.5)
        self.proc.terminate()
        self.proc.wait(timeout=10)
        renames = [p for e, p in self.events if e.startswith("MOVED_TO")]
        deletes = [p for e, p in self.events if e.startswith("DELETE")]
        moved_bytes = 0
        for p in renames:
            path = Path(p)
            if path.is_file():
                moved_bytes += path.stat().st_size
            elif path.is_dir():
                moved_bytes += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        return {"renames": len(renames), "deletes": len(deletes), "bytes_renamed": moved_bytes}


def process_cpu_ms(pid: int | None) -> float | None:
    """CPU time (user + system) a process has used so far, from /proc; None where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return None


def write_inputs(spark, work: Path, k: int, rows: int, existing_rows: int = 200_000):
    """The inputs for K, as Parquet under ``work``: ``existing_<k>`` (the table's partitions p0.. before
    the swap: half of the batch's K, at least one) and ``batch_<k>`` (``rows`` rows over p0..p{K-1}, so
    half of the batch's partitions exist in the table and half are new). Returns the batch, read back."""
    existing = max(1, k // 2) if k > 1 else 1
    spark.range(existing_rows).selectExpr("id", "CAST(id AS string) AS v",
                                          f"concat('p', CAST(id % {existing} AS string)) AS dt") \
        .write.mode("overwrite").parquet(str(work / f"existing_{k}"))
    spark.range(rows).selectExpr("id", "sha1(CAST(id AS string)) AS v", f"concat('p', CAST(id % {k} AS string)) AS dt") \
        .write.mode("overwrite").parquet(str(work / f"batch_{k}"))
    return spark.read.parquet(str(work / f"batch_{k}"))


def median(values):
    return statistics.median(values) if values else float("nan")


def main() -> int:
    if "--storage" in sys.argv[1:] or any(a.startswith("--storage=") for a in sys.argv[1:]):
        from .bench_s3 import main as s3_main  # its own options: --k, --rows, --runs, --json

        return s3_main(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", default="1,20,200,2000", help="partition counts to replace (comma separated)")
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows per batch")
    ap.add_argument("--runs", type=int, default=5,
                    help="timed runs per method and K after one untimed warm-up of each; the methods take "
                         "turns going first (median reported)")
    ap.add_argument("--history", type=int, default=0,
                    help="untouched partitions each table holds besides the batch's (a table with history: "
                         "dynamic overwrite lists every partition of the table, tableswap reads the batch's)")
    ap.add_argument("--flip-sizes", default="1000,10000", help="partition counts for the flip-only timing")
    ap.add_argument("--json", default="benchmark-results.json", help="where to write the raw figures")
    ap.add_argument("--no-fs-watch", action="store_true", help="skip the inotify pass")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    ap.add_argument("--metastore-db", default="derby",
                    help="the development metastore's backing database: derby (default) or "
                         "postgresql://USER@HOST:PORT/DB (an existing, empty database)")
    ap.add_argument("--hive-version", default=None,
                    help="a standalone metastore release (3.1.x/4.x, e.g. 4.0.1) instead of the pyspark wheel's "
                         "HMS 2.3; Spark then uses its Hive client of that line (with --metastore-db postgresql://...)")
    ap.add_argument("--hdfs", action="store_true",
                    help="the tables (and the plain write) on a local HDFS started for the run (tests/support/hdfs.py); "
                         "implies --no-fs-watch (inotify sees only local disks)")
    ap.add_argument("--cluster", action="store_true",
                    help="run Spark on a standalone cluster on loopback (a master and two workers, one one-core "
                         "executor on each, the driver in client mode: tests/support/cluster.py) instead of local[2]")
    args = ap.parse_args()
    args.no_fs_watch = args.no_fs_watch or args.hdfs
    if not args.no_fs_watch and not shutil.which("inotifywait"):
        sys.exit("inotifywait not found: apt-get install inotify-tools (or pass --no-fs-watch)")

    from pyspark.sql import SparkSession

    from tableswap import swap_partitions
    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import MetastoreClient, probe
    from tableswap.core.catalog import LocationChange, NewPartition

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-"))
    hdfs_server = None
    tables_base = (work / "tables").as_uri()  # where the tables and the plain writes go
    if args.hdfs:
        from ..support.hdfs import MiniHdfs, resolve

        hdfs_server = MiniHdfs(work / "hdfs", resolve()).start()
        os.environ["HADOOP_CONF_DIR"] = str(hdfs_server.conf_dir)
        tables_base = f"{hdfs_server.url}/bench"
        print(f"HDFS at {hdfs_server.url} (started in {hdfs_server.startup_seconds}s)", flush=True)
    ms = DevMetastore(state_dir=work / "hms", db=args.metastore_db, hive_version=args.hive_version)
    status = ms.start(probe=probe)
    uri = status.uri
    os.environ["TABLESWAP_METASTORE_URI"] = uri
    os.environ["TABLESWAP_JOURNAL_URL"] = f"sqlite:///{work / 'journal.db'}"
    spark_cluster = None
    builder = SparkSession.builder
    if args.cluster:
        from ..support.cluster import StandaloneCluster, client_conf

        spark_cluster = StandaloneCluster(work / "cluster").start()
        for key, value in client_conf(speculation=False).items():
            builder = builder.config(key, value)
    if args.hive_version:  # Spark's built-in Hive 2.3 client cannot talk to a 4.x server: its Hive client of that line
        from tableswap.devmetastore.releases import spark_client_conf

        for key, value in spark_client_conf(args.hive_version).items():
            builder = builder.config(key, value)
    spark = (builder.master(spark_cluster.master_url if spark_cluster else "local[2]").appName("tableswap-bench")
             .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", str(work / "wh"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE DATABASE bench")
    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "spark": spark.version, "date": time.strftime("%Y-%m-%d"),
                           "metastore_db": status.backend, "metastore": f"HMS {args.hive_version or '2.3'}",
                           "spark_master": "standalone cluster, 2 executors of 1 core" if args.cluster else "local[2]",
                           "storage": "HDFS (MiniDFSCluster, 1 DataNode)" if args.hdfs else "local disk",
                           "load_average_1m_at_start": round(os.getloadavg()[0], 1)},
               "rows": args.rows, "runs": args.runs, "history": args.history, "by_k": {}, "flip_only": {}}
    counter = [0]
    hms_pid = status.pid
    hms = MetastoreClient(uri).open()  # the benchmark's own metastore work: history partitions, flip alone

    def new_table(k: int, method: str) -> str:
        counter[0] += 1
        name = f"t{counter[0]}_{method}_{k}"
        spark.sql(f"CREATE TABLE bench.{name} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
                  f"LOCATION '{tables_base}/{name}'")
        existing = max(1, k // 2) if k > 1 else 1
        spark.read.parquet(str(work / f"existing_{k}")).write.insertInto(f"bench.{name}")
        assert spark.table(f"bench.{name}").select("dt").distinct().count() == existing
        if args.history:
            # Older partitions nobody rewrites (empty directories at Spark's default paths).
            info = hms.get_table("bench", name)
            hms.add_partitions(info, [NewPartition((f"h{i:05d}",), f"{info.location}/dt=h{i:05d}")
                                                 for i in range(args.history)], {})
        return f"bench.{name}"

    server_cpu = {"ts": [], "dyn": []}  # the metastore server's CPU time during each timed call, ms

    def metastore_cpu(method: str, before: float | None) -> None:
        after = process_cpu_ms(hms_pid)
        if before is not None and after is not None:
            server_cpu[method].append(after - before)

    def timed_swap(t: str):
        cpu = process_cpu_ms(hms_pid)
        start = time.perf_counter()
        res = swap_partitions(batch, t)
        secs = time.perf_counter() - start
        metastore_cpu("ts", cpu)
        return secs, res

    def timed_dynamic(t: str) -> float:
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        try:
            cpu = process_cpu_ms(hms_pid)
            start = time.perf_counter()
            batch.write.insertInto(t, overwrite=True)
            secs = time.perf_counter() - start
            metastore_cpu("dyn", cpu)
            return secs
        finally:
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")

    try:
        for k in [int(x) for x in args.k.split(",") if x.strip()]:
            batch = write_inputs(spark, work, k, args.rows)
            row = {"ts": [], "dyn": [], "static": [], "ts_commit": [], "ts_calls": [], "write_only": [],
                   "ts_steps": []}
            timed_swap(new_table(k, "warm"))  # warm-up, untimed: both code paths, JIT and metastore caches
            timed_dynamic(new_table(k, "warm"))
            for samples in server_cpu.values():
                samples.clear()
            for run in range(args.runs):
                for method in ("ts", "dyn") if run % 2 == 0 else ("dyn", "ts"):  # neither always goes first
                    t = new_table(k, method)
                    if method == "dyn":
                        row["dyn"].append(timed_dynamic(t))
                        continue
                    secs, res = timed_swap(t)
                    row["ts"].append(secs)
                    row["ts_commit"].append(sum(res.timings.get(s, 0) for s in ("enumerate", "plan", "lock", "flip")))
                    row["ts_calls"].append(res.commit_catalog_calls)
                    row["ts_steps"].append(res.timings)  # seconds per step (validate, staging_write, ...)
                start = time.perf_counter()
                batch.write.partitionBy("dt").mode("append").parquet(f"{tables_base}/plain_{k}_{run}")
                row["write_only"].append(time.perf_counter() - start)
                if k == 1:
                    t = new_table(k, "static")
                    batch.createOrReplaceTempView("batch_view")
                    start = time.perf_counter()
                    spark.sql(f"INSERT OVERWRITE TABLE {t} PARTITION (dt='p0') SELECT id, v FROM batch_view")
                    row["static"].append(time.perf_counter() - start)
            fs = {}
            if not args.no_fs_watch:
                for method in ("ts", "dyn"):
                    t = new_table(k, method)
                    root = work / "tables" / t.split(".")[1]
                    watch = FsWatch(root)
                    if method == "ts":
                        import tableswap.ops.commit as swap_module

                        real_flip = swap_module.flip
                        commit_watch = {}

                        def watched_flip(*a, _root=root, _flip=real_flip, _watch=commit_watch, **kw):
                            w = FsWatch(_root)
                            try:
                                return _flip(*a, **kw)
                            finally:
                                _watch.update(w.stop())

                        swap_module.flip = watched_flip
                        try:
                            swap_partitions(batch, t)
                        finally:
                            swap_module.flip = real_flip
                        fs["ts_total"] = watch.stop()
                        fs["ts_commit"] = commit_watch
                    else:
                        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
                        batch.write.insertInto(t, overwrite=True)
                        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
                        fs["dyn_total"] = watch.stop()
            memory = {}
            if not args.no_memory:
                # Python allocations of the driver process during one swap (not timed): the Thrift
                # payload and the plan grow with K, nothing else should.
                t = new_table(k, "mem")
                tracemalloc.start()
                try:
                    swap_partitions(batch, t)
                    memory["python_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 2)
                finally:
                    tracemalloc.stop()
                memory["rss_mb"] = round(rss_mb(), 1)
            results["by_k"][k] = {**{key: v for key, v in row.items()}, "fs": fs, "memory": memory,
                                  "metastore_cpu_ms": {m: list(v) for m, v in server_cpu.items()}}
            print(f"K={k}: tableswap {median(row['ts']):.2f}s, dynamic {median(row['dyn']):.2f}s, "
                  f"ratio {median(row['ts']) / median(row['dyn']):.2f}, fs {fs}, memory {memory}", flush=True)
            Path(args.json).write_text(json.dumps(results, indent=2, default=str))  # survives a later failure

        for n in [int(x) for x in args.flip_sizes.split(",") if x]:
            t = f"flip_{n}"
            spark.sql(f"CREATE TABLE bench.{t} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
                      f"LOCATION '{tables_base}/{t}'")
            info = hms.get_table("bench", t)
            parts = [NewPartition((f"f{i}",), f"{info.location}/dt=f{i}") for i in range(n)]
            hms.add_partitions(info, parts, {})
            changes = [LocationChange((f"f{i}",), f"{info.location}/dt=f{i}", f"{info.location}/_tableswap/x/dt=f{i}")
                       for i in range(n)]
            before = hms.calls
            tracemalloc.start()
            start = time.perf_counter()
            hms.alter_partition_locations(info, changes, {"tableswap.swap_id": "bench"})
            secs = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            results["flip_only"][n] = {"seconds": secs, "metastore_calls": hms.calls - before,
                                       "python_peak_mb": round(peak, 1)}
            print(f"flip of {n} partitions: {secs:.2f}s, {hms.calls - before} metastore calls, "
                  f"Python peak {peak:.1f} MB", flush=True)
    finally:
        hms.close()
        spark.stop()
        ms.stop()
        if spark_cluster:
            spark_cluster.stop()
        if hdfs_server:
            hdfs_server.stop()
    results["machine"]["load_average_1m_at_end"] = round(os.getloadavg()[0], 1)
    print_table(results)
    Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    print(f"\nraw figures: {args.json}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def print_table(results) -> None:
    m = results["machine"]
    print(f"\n{results['rows']:,} rows per batch · {results.get('history', 0):,} untouched partitions per table · "
          f"median of {results.get('runs', '?')} runs · {m['cpus']} cores · Spark {m['spark']} · Python {m['python']} · "
          f"{m.get('metastore', 'HMS 2.3')} on {m.get('metastore_db') or 'derby'} · Spark {m.get('spark_master', 'local[2]')} · "
          f"{m.get('storage', 'local disk')} · 1-minute load average {m.get('load_average_1m_at_start', '?')} at start, "
          f"{m.get('load_average_1m_at_end', '?')} at the end · "
          f"{m['date']}\n")
    # The ratio of the fastest runs too: on a shared 2-core machine a run is only ever slowed down by
    # noise, so the minimum is the least disturbed figure of each method.
    print("| K | tableswap s | dynamic overwrite s | ratio | ratio of fastest runs | static overwrite s | plain write s "
          "| tableswap commit s | commit metastore calls | commit renames / deletes / bytes renamed (tableswap) "
          "| dynamic overwrite renames / deletes / bytes renamed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k, r in results["by_k"].items():
        fs = r.get("fs", {})
        tsc, dyn = fs.get("ts_commit", {}), fs.get("dyn_total", {})
        fmt = lambda d: f"{d.get('renames', '?')} / {d.get('deletes', '?')} / {d.get('bytes_renamed', '?'):,}" if d else "n/a"  # noqa: E731
        static = f"{median(r['static']):.2f}" if r["static"] else "n/a"
        print(f"| {k} | {median(r['ts']):.2f} | {median(r['dyn']):.2f} | {median(r['ts']) / median(r['dyn']):.2f} "
              f"| {min(r['ts']) / min(r['dyn']):.2f} | {static} "
              f"| {median(r['write_only']):.2f} | {median(r['ts_commit']):.3f} | {int(median(r['ts_calls']))} | {fmt(tsc)} | {fmt(dyn)} |")
    if any((r.get("metastore_cpu_ms") or {}).get("ts") for r in results["by_k"].values()):
        # What each method makes the metastore do, in CPU time of its server process (on this machine
        # the server shares the cores with Spark, so its CPU time is time Spark does not get).
        print("\n| K | metastore server CPU per tableswap swap ms | per dynamic overwrite ms |\n|---|---|---|")
        for k, r in results["by_k"].items():
            c = r.get("metastore_cpu_ms") or {}
            print(f"| {k} | {median(c.get('ts', [])):.0f} | {median(c.get('dyn', [])):.0f} |")
    if any(r.get("memory") for r in results["by_k"].values()):
        print("\n| K | driver Python peak during one swap (tracemalloc) MB | driver RSS after MB |\n|---|---|---|")
        for k, r in results["by_k"].items():
            m = r.get("memory") or {}
            print(f"| {k} | {m.get('python_peak_mb', 'n/a')} | {m.get('rss_mb', 'n/a')} |")
    for n, f in results["flip_only"].items():
        print(f"\nflip alone, {n} partitions: {f['seconds']:.2f} s in {f['metastore_calls']} metastore calls, "
              f"driver Python peak {f.get('python_peak_mb', '?')} MB")


if __name__ == "__main__":
    sys.exit(main())
