"""Where a swap's time goes beyond the Spark write: per step, per metastore call, and a cProfile of the
driver's Python side (what the Spark write does in the JVM shows up as time waiting on Py4J).

    python -m tests.benchmarks.profile_swap --k 1,200,2000 --rows 500000 --swaps 3
    python -m tests.benchmarks.profile_swap --k 2000 --rows 500000 --swaps 3 --writes 3
    python -m tests.benchmarks.profile_swap --k 20 --hive-version 4.0.1 --metastore-db postgresql://postgres@127.0.0.1:5432/prof_hms
    python -m tests.benchmarks.profile_swap --k 20,200 --rows 2000000 --swaps 5 --storage s3a

``--writes N`` first times the staging write alone against a plain ``write.parquet`` of the same batch
(N alternating runs each): the write with the target's format and options into a fresh directory,
with and without the temporary table created alongside, and the swap's own ``staging_write`` step.

``--storage s3a`` puts the tables on moto's S3 emulator on loopback (tests/support/s3.py), written with the magic
committer (its records in memory), and adds the S3 requests per swap by kind, the metastore's own (its
directory checks of added partitions) among them; each table's objects are deleted before the next
table is made, so moto's whole-bucket LIST does not grow from swap to swap.

Same setup as bench_overwrite (development metastore, local[2], half of the K partitions existing).
Prints, for each K, the median seconds of each step of ``SwapResult.timings``, the metastore calls
made (count and milliseconds by call, from the client's side), the journal's writes, and the top
functions of the driver by cumulative time outside Py4J waits.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pstats
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from .bench_overwrite import write_inputs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", default="1,200,2000")
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--swaps", type=int, default=3, help="profiled swaps per K, after one warm-up")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--writes", type=int, default=0,
                    help="also time the staging write alone against a plain write.parquet, N alternating runs each")
    ap.add_argument("--metastore-db", default="derby",
                    help="the development metastore's backing database: derby (default) or "
                         "postgresql://USER@HOST:PORT/DB (an existing, empty database)")
    ap.add_argument("--hive-version", default=None,
                    help="a standalone metastore release (e.g. 4.0.1, 3.1.3) instead of the wheel's HMS 2.3")
    ap.add_argument("--storage", default="file", choices=("file", "s3a"),
                    help="local disk (default) or s3a: moto's S3 emulator on loopback, the magic committer")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    from tableswap import storage, swap_partitions
    from tableswap.devmetastore import DevMetastore
    from tableswap.journal.store import Journal
    from tableswap.metastore.client import MetastoreClient, probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-profile-"))
    endpoint = access = None
    root = (work / "tables").as_uri()
    if args.storage == "s3a":
        from tableswap.jvm.jars import S3Access, resolve_s3_jars, s3a_spark_conf
        from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint

        endpoint = S3Endpoint().start()
        bucket = endpoint.new_bucket("profile")
        root = f"s3a://{bucket}/tables"
        access = S3Access(endpoint=endpoint.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, path_style=True,
                          region=REGION)
        storage.configure("s3", endpoint_url=endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    ms = DevMetastore(state_dir=work / "hms", s3=access, db=args.metastore_db, hive_version=args.hive_version)
    uri = ms.start(probe=probe).uri
    os.environ["TABLESWAP_METASTORE_URI"] = uri
    os.environ["TABLESWAP_JOURNAL_URL"] = f"sqlite:///{work / 'journal.db'}"
    builder = SparkSession.builder
    if args.hive_version:  # Spark's built-in Hive 2.3 client cannot talk to a 4.x server
        from tableswap.devmetastore.releases import spark_client_conf

        for key, value in spark_client_conf(args.hive_version).items():
            builder = builder.config(key, value)
    if access is not None:
        for key, value in s3a_spark_conf(resolve_s3_jars(), access, committer="magic").items():
            builder = builder.config(key, value)
    spark = (builder.master("local[2]").appName("tableswap-profile")
             .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", str(work / "wh"))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .enableHiveSupport().getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE DATABASE bench")

    calls: dict[str, list[float]] = defaultdict(list)

    def timed(method):
        def wrapper(self, what, *a, **kw):
            start = time.perf_counter()
            try:
                return method(self, what, *a, **kw)
            finally:
                calls[what.split("(")[0]].append(time.perf_counter() - start)
        return wrapper

    MetastoreClient.read = timed(MetastoreClient.read)  # type: ignore[method-assign]
    MetastoreClient.write = timed(MetastoreClient.write)  # type: ignore[method-assign]
    for name in ("begin_swap", "record_intent", "commit", "finish"):
        real = getattr(Journal, name)

        def journal_timed(self, *a, _real=real, _name=name, **kw):
            start = time.perf_counter()
            try:
                return _real(self, *a, **kw)
            finally:
                calls[f"journal.{_name}"].append(time.perf_counter() - start)
        setattr(Journal, name, journal_timed)

    counter = [0]
    try:
        for k in [int(x) for x in args.k.split(",") if x]:
            batch = write_inputs(spark, work, k, args.rows, existing_rows=100_000)

            def new_table(k: int = k) -> str:
                counter[0] += 1
                name = f"bench.t{counter[0]}"
                if endpoint is not None:
                    endpoint.purge(bucket, "tables/")
                spark.sql(f"CREATE TABLE {name} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
                          f"LOCATION '{root}/{counter[0]}'")
                spark.read.parquet(str(work / f"existing_{k}")).write.insertInto(name)
                return name

            if args.writes:
                compare_writes(spark, batch, new_table, root, k, args.writes)
            swap_partitions(batch, new_table())  # warm-up
            calls.clear()
            steps: dict[str, list[float]] = defaultdict(list)
            profile = cProfile.Profile()
            tracker = spark.sparkContext.statusTracker()
            jobs_per_swap: list[int] = []
            whole: list[float] = []
            s3: dict[str, list[int]] = defaultdict(list)
            for _ in range(args.swaps):
                table = new_table()
                jobs_before = set(tracker.getJobIdsForGroup(None))
                s3_mark = endpoint.mark() if endpoint is not None else 0
                start = time.perf_counter()
                profile.enable()
                result = swap_partitions(batch, table)
                profile.disable()
                whole.append(time.perf_counter() - start)
                if endpoint is not None:
                    for kind, n in endpoint.counts(s3_mark).items():
                        s3[kind].append(n)
                jobs_per_swap.append(len(set(tracker.getJobIdsForGroup(None)) - jobs_before))
                for step, secs in result.timings.items():
                    steps[step].append(secs)
            print(f"\n=== K={k}: {args.swaps} swaps of {args.rows:,} rows ===")
            print(f"whole swap (median s): {statistics.median(whole):.3f}; Spark jobs per swap: {jobs_per_swap}")
            print("steps (median s): " + ", ".join(f"{s} {statistics.median(v):.3f}" for s, v in steps.items()))
            if s3:
                print("S3 requests per swap (median, by kind): " + ", ".join(
                    f"{kind} {statistics.median(n + [0] * (args.swaps - len(n))):g}" for kind, n in sorted(s3.items())))
            print("calls per swap (count, median ms, total ms per swap):")
            for what, secs in sorted(calls.items(), key=lambda kv: -sum(kv[1])):
                print(f"  {what:45s} {len(secs) / args.swaps:5.1f}  {statistics.median(secs) * 1000:8.1f}  "
                      f"{sum(secs) * 1000 / args.swaps:8.1f}")
            calls.clear()
            print_shares(profile, statistics.median(whole) * args.swaps, args.swaps)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.top)
            print(out.getvalue())
    finally:
        spark.stop()
        ms.stop()
        if endpoint is not None:
            endpoint.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


#: Where a swap's wall time goes, as the cumulative time of the functions that do each part (file suffix,
#: function name); nested parts are listed after the part that contains them, indented.
PARTS = (
    ("Spark staging write (the one Spark job)", "spark/staging.py", "write"),
    ("waits on the side connection (temporary table create, drop)", "ops/background.py", "join"),
    ("walk of the staging directory", "tableswap/storage.py", "written_partitions"),
    ("metastore reads: validation (get_table), under the lock (+ partitions)", "metastore/client.py", "snapshot"),
    ("journal: begin", "journal/store.py", "begin_swap"),
    ("lock", "metastore/lock.py", "acquire"),
    ("journal: intent", "journal/store.py", "record_intent"),
    ("intent manifest written to storage", "ops/manifests.py", "write_intent"),
    ("lock confirmed before the flip", "metastore/lock.py", "confirm"),
    ("flip (add_partitions, alter_partitions)", "ops/commit.py", "flip"),
    ("journal: commit", "journal/store.py", "commit"),
    ("manifest finished in storage", "ops/manifests.py", "finish"),
    ("unlock", "metastore/lock.py", "__exit__"),
    ("finish: the temporary table's drop (started before the flip) waited for, Spark's refresh where needed",
     "ops/write/finish.py", "finish_committed"),
    ("  of which Spark's refreshTable", "pyspark/sql/catalog.py", "refreshTable"),
    ("journal: finish", "journal/store.py", "finish"),
    ("lineage and hooks", "ops/notify.py", "committed"),
)


def print_shares(profile: cProfile.Profile, wall: float, swaps: int) -> None:
    """The swap's wall time by part (:data:`PARTS`), per swap and as shares of the whole swap; a function
    counted under ``snapshot`` includes both the validation read and the read under the lock."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    print(f"where a swap's {wall / swaps:.3f} s go (cumulative time per swap, share of the swap):")
    for label, suffix, func in PARTS:
        total = sum(v[3] for (file, _, name), v in stats.items() if file.endswith(suffix) and name == func)
        print(f"  {label:62s} {total / swaps:7.3f} s  {100 * total / wall:5.1f} %")
    # Every call into the JVM goes through Py4J: which of tableswap's functions make them, and how long
    # each waited (the staging write is one of them).
    callers = collections.Counter()
    for (file, _, name), v in stats.items():
        if "/tableswap/" in file and ("/spark/" in file or file.endswith("sparkapi.py")) and v[3] > 0.001 * swaps:
            callers[f"{file.split('/tableswap/')[1]}:{name}"] += v[3]
    print("tableswap's functions that call Spark (cumulative per swap; nested calls are counted in both):")
    for where, total in callers.most_common(14):
        print(f"  {where:62s} {total / swaps:7.3f} s  {100 * total / wall:5.1f} %")


def compare_writes(spark, batch, new_table, root: str, k: int, runs: int) -> None:
    """The Spark write alone, four ways, alternating: a plain ``write.parquet``, the staging write
    (:func:`tableswap.spark.staging.write`: the target's format and options, into a fresh directory
    under the table's root), the same while the temporary table's metadata is created alongside (as a
    swap does), and a whole swap's ``staging_write`` step."""
    from tableswap import storage, swap_partitions
    from tableswap.core.names import parse_table_name
    from tableswap.metastore.background import Background
    from tableswap.metastore.client import MetastoreClient
    from tableswap.spark import staging

    uri = os.environ["TABLESWAP_METASTORE_URI"]
    times: dict[str, list[float]] = defaultdict(list)
    with MetastoreClient(uri) as client, MetastoreClient(uri) as side:
        def plain(n: int) -> float:
            start = time.perf_counter()
            batch.write.partitionBy("dt").mode("append").parquet(f"{root}/plain_{k}_{n}")
            return time.perf_counter() - start

        def staged(n: int, with_temp: bool = False) -> float:
            table = new_table()  # made (and filled) before the clock starts
            info = client.get_table(*parse_table_name(table))
            location = f"{info.root.rstrip('/')}/_tableswap/w{n}"
            start = time.perf_counter()
            storage.make_dirs(location)
            if with_temp:
                creating = Background("create", lambda c: c.create_staging_table(
                    info, f"{info.name}__w{n}", location, {}, snapshot=None), side)
            staging.write(batch, info, location)
            if with_temp:
                creating.join()
            return time.perf_counter() - start

        def swapped(n: int) -> float:
            return swap_partitions(batch, new_table()).timings["staging_write"]

        methods = {"plain write.parquet": plain, "staging.write": staged,
                   "staging.write + temp table": lambda n: staged(n, True), "swap's staging_write step": swapped}
        for n in range(runs + 1):  # the first round is a warm-up
            order = list(methods)[n % len(methods):] + list(methods)[:n % len(methods)]
            for name in order:
                seconds = methods[name](n)
                if n:
                    times[name].append(seconds)
    print(f"\n=== K={k}: the Spark write alone, {runs} alternating runs each (seconds) ===")
    for name, values in times.items():
        print(f"  {name:30s} median {statistics.median(values):7.2f}   runs " + ", ".join(f"{v:.2f}" for v in values))


if __name__ == "__main__":
    raise SystemExit(main())
