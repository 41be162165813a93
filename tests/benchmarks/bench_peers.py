"""Peers side by side: tableswap, Spark's dynamic overwrite, Delta Lake, Iceberg and a plain write of the same bytes.

    python -m tests.benchmarks.bench_peers --storage file,s3a --k 1,20 --rows 20000 --runs 3     # a small check
    python -m tests.benchmarks.bench_peers --storage file,s3a --k 1,20,200,2000 --runs 5          # the full run
    python -m tests.benchmarks.bench_peers --delta-python ENV/bin/python --iceberg-python ENV/bin/python
    # realistic sizes: 2,000,000 rows of about 1 KiB (2 GB a batch), laid out one partition per input file, so that
    # each method writes files of about 100 MB at K = 20 (docs/benchmarks.md#realistic-sizes)
    python -m tests.benchmarks.bench_peers --k 20,200 --rows 2000000 --row-bytes 1024 --clustered-input

One development metastore (HMS 2.3 by default, ``--hive-version``/``--metastore-db`` for another), reached by
every client through a loopback proxy that counts the Thrift calls by name; on ``s3a`` one S3 endpoint (moto's
emulator, tests/support/s3.py: every request logged, COPY sources sized). The methods, each on a fresh table holding
the same existing rows, each writing the same batch (read from the same local Parquet):

* ``tableswap``: ``swap_partitions(df, table)`` with its defaults (S3: the magic committer): the write
  distribution ``"auto"`` chooses the layout (docs/configuration.md#write-distribution); a fresh table with no
  scope gives it no partition count, so it writes the batch as it comes;
* ``tableswap-scoped``: ``swap_partitions(df, table, replace_where=[...the batch's partitions...])``, its defaults
  otherwise: the scope tells ``"auto"`` the count (Delta's ``replaceWhere`` is given the same list; not in the
  default ``--methods``);
* ``tableswap-none``: ``swap_partitions(df, table, write_distribution="none")``, the default before ``"auto"``
  (not in the default ``--methods``);
* ``tableswap-clustered``: ``swap_partitions(df.repartition("dt"), ...)``: the caller clusters the batch by
  partition, so each partition is written by one task, one file (what Iceberg's hash distribution does for its
  writes; not in the default ``--methods``);
* ``tableswap-distributed``: ``swap_partitions(df, ..., write_distribution="partition")``: the staging write
  clusters the batch itself (Spark's rebalance hint; not in the default ``--methods``);
* ``dynamic``: ``insertInto(overwrite=True)`` with ``partitionOverwriteMode=dynamic`` (S3: the classic
  committer, the S3A committers refuse dynamic mode);
* ``delta-replacewhere``: Delta Lake, ``mode("overwrite").option("replaceWhere", "dt IN (...the batch's...)")``;
* ``delta-dynamic``: Delta Lake, ``mode("overwrite").option("partitionOverwriteMode", "dynamic")``;
* ``iceberg``: Iceberg, ``writeTo(...).overwritePartitions()``, Hive catalog on the same metastore (Parquet
  with Snappy like the others);
* ``plain``: ``write.partitionBy("dt").parquet(<fresh path>)`` (S3: the magic committer): one write, no
  table, no commit -- the physical limit;
* ``tableswap-records``, ``plain-records``: the same on S3 with the magic committer as Hadoop sets it by
  default, a marker and a pending record per file in the store, read back at task commit (the others keep
  them in the task's memory, ``tableswap.jvm.jars.MAGIC_IN_MEMORY_CONF``; not in the default ``--methods``).

Each Spark environment is a worker process of its own (``--worker``), kept for the whole run and driven over a
pipe, so that methods needing another Spark (a peer whose newest release does not support the installed one:
``--delta-python`` / ``--iceberg-python``, the interpreter of a virtual environment with that pyspark) still
take turns with the others. For each K: one untimed warm-up of each method, then ``--runs`` rounds, the order
rotating every round. Timed in the worker around the one call; counted between the command and its answer:
the S3 requests by type and bytes copied, and the metastore calls by name. After each run the table's row
count is checked (untimed). Then, per method, ``--reader-writes`` writes of the campaign's 4-partition
table while a reader process of the same environment queries it in a loop: what the reader saw
(tests/helpers.count_anomalies: a partial or mixed partition, a missing one, a failed query).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KINDS = ("PUT", "COPY", "DELETE", "LIST", "HEAD", "GET", "MULTIPART")
METHODS = ("tableswap", "dynamic", "delta-replacewhere", "delta-dynamic", "iceberg", "plain")
#: Methods run only when --methods names them.
EXTRA_METHODS = ("tableswap-scoped", "tableswap-none", "tableswap-clustered", "tableswap-distributed",
                 "tableswap-records", "plain-records")
ENV_OF = {"tableswap": "main", "tableswap-scoped": "main", "tableswap-none": "main", "tableswap-clustered": "main",
          "tableswap-distributed": "main", "dynamic": "main",
          "plain": "main", "delta-replacewhere": "delta", "delta-dynamic": "delta", "iceberg": "iceberg",
          "tableswap-records": "main", "plain-records": "main"}
#: The suffix of a method run with the magic committer's pending records in the store (Hadoop's default).
RECORDS = "-records"


def is_plain(method: str) -> bool:
    return method.removesuffix(RECORDS) == "plain"


# ====================================================================== metastore call counter
class CountingProxy:
    """A loopback TCP proxy in front of the metastore that counts the Thrift calls passing through it by
    name (TBinaryProtocol's strict message header: version 1, type CALL or ONEWAY, then the method name)."""

    _HEADER = re.compile(rb"\x80\x01\x00[\x01\x04]")

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def mark(self) -> int:
        with self._lock:
            return len(self.calls)

    def counts(self, mark: int) -> dict[str, int]:
        with self._lock:
            return dict(collections.Counter(self.calls[mark:]))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        pending = b""
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
                if requests:
                    pending = self._scan(pending + chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _scan(self, buf: bytes) -> bytes:
        pos = 0
        while (m := self._HEADER.search(buf, pos)) is not None:
            j = m.start()
            if j + 8 > len(buf):
                return buf[j:]
            n = int.from_bytes(buf[j + 4:j + 8], "big")
            if not 0 < n < 200:
                pos = j + 1
                continue
            if j + 8 + n > len(buf):
                return buf[j:]
            name = buf[j + 8:j + 8 + n]
            if re.fullmatch(rb"[A-Za-z_][A-Za-z0-9_]*", name):
                with self._lock:
                    self.calls.append(name.decode())
                pos = j + 8 + n
            else:
                pos = j + 1
        return buf[max(pos, len(buf) - 3):]

    def close(self) -> None:
        self._server.close()


# ====================================================================== the orchestrator's side of a worker
class Worker:
    """A Spark process of one environment (an interpreter, extra jars, Spark settings), driven over a pipe."""

    def __init__(self, name: str, python: str, spec: dict, work: Path) -> None:
        self.name = name
        cmd_r, self._cmd_w = os.pipe()
        self._reply_r, reply_w = os.pipe()
        spec_file = work / f"worker-{name}.json"
        spec_file.write_text(json.dumps({**spec, "cmd_fd": cmd_r, "reply_fd": reply_w}))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
        env.pop("PYSPARK_PYTHON", None)
        self._log = open(work / f"worker-{name}.log", "w")
        self.proc = subprocess.Popen([python, "-m", "tests.benchmarks.bench_peers", "--worker", str(spec_file)],
                                     cwd=REPO, env=env, pass_fds=(cmd_r, reply_w), stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(reply_w)
        self._out = os.fdopen(self._cmd_w, "w", buffering=1)
        self._in = os.fdopen(self._reply_r, "r")
        self.info = self.call({"op": "hello"})

    def send(self, command: dict) -> None:
        self._out.write(json.dumps(command) + "\n")

    def receive(self) -> dict:
        line = self._in.readline()
        if not line:
            raise RuntimeError(f"worker {self.name} died (see its log, worker-{self.name}.log)")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"worker {self.name}: {reply['error']}")
        return reply

    def call(self, command: dict) -> dict:
        self.send(command)
        return self.receive()

    def stop(self) -> None:
        try:
            self.send({"op": "stop"})
            self.proc.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
        self._log.close()


def spark_of(python: str) -> tuple[str, Path]:
    """(pyspark version, its jars directory) of an interpreter."""
    out = subprocess.run([python, "-c", "import pyspark, os; print(pyspark.__version__); "
                                        "print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], Path(out[1])


def without_spark_own(jars: tuple[Path, ...], spark_jars: Path) -> list[str]:
    """A library's resolved jars less those whose artifact the Spark wheel ships already (Hadoop, Parquet,
    Scala, Jackson, logging: Spark's own versions must win)."""
    def artifact(name: str) -> str:
        return re.sub(r"-\d[\w.\-]*\.jar$", "", name)
    own = {artifact(p.name) for p in spark_jars.glob("*.jar")}
    return [str(j) for j in jars if artifact(j.name) not in own]


# ====================================================================== orchestrator
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--storage", default="file,s3a", help="file, s3a or both (comma separated)")
    ap.add_argument("--k", default="1,20,200,2000", help="partition counts of the batch (half existing, half new)")
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows per batch")
    ap.add_argument("--row-bytes", type=int, default=0,
                    help="make each row about this many bytes (an incompressible string column; 0: 40 bytes)")
    ap.add_argument("--clustered-input", action="store_true",
                    help="store the batch's input one table partition per file, so that every method's tasks each "
                         "read (and write) one partition: files of rows / K x row bytes")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per method and K, after one warm-up")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help=f"comma-separated; besides the default ones: {', '.join(EXTRA_METHODS)}")
    ap.add_argument("--reader-writes", type=int, default=4,
                    help="writes per method while a reader queries the table (0: no reader pass)")
    ap.add_argument("--delta-python", default=sys.executable,
                    help="interpreter whose pyspark runs Delta (a virtual environment's, for another Spark)")
    ap.add_argument("--delta-version", default="4.4.0")
    ap.add_argument("--iceberg-python", default=sys.executable)
    ap.add_argument("--iceberg-version", default="1.12.0")
    ap.add_argument("--iceberg-spark", default=None,
                    help="Spark line of iceberg-spark-runtime (default: that interpreter's pyspark major.minor)")
    ap.add_argument("--hive-version", default=None, help="a standalone metastore release instead of HMS 2.3")
    ap.add_argument("--metastore-db", default="derby", help="derby, or postgresql://USER@HOST:PORT/DB (empty)")
    ap.add_argument("--driver-memory", default="4g",
                    help="every Spark's driver heap (local mode: its executor's too); Iceberg's write of 1,000 "
                         "partitions ran out of the default 1g")
    ap.add_argument("--json", default="benchmark-peers.json", help="where to write the raw figures")
    args = ap.parse_args(argv)

    from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint

    from tableswap.devmetastore import DevMetastore
    from tableswap.jvm.jars import (MAGIC_IN_MEMORY_CONF, S3Access, resolve_jars, resolve_s3_jars, s3a_spark_conf,
                                   wheel_versions)
    from tableswap.metastore.client import probe

    storages = [s for s in args.storage.split(",") if s]
    methods = [m for m in args.methods.split(",") if m]
    ks = [int(x) for x in args.k.split(",") if x.strip()]
    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-peers-"))
    endpoint = bucket = access = None
    if "s3a" in storages:
        endpoint = S3Endpoint().start()
        bucket = endpoint.new_bucket("peers")
        access = S3Access(endpoint=endpoint.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, path_style=True,
                          region=REGION)
    ms = DevMetastore(state_dir=work / "hms", s3=access, db=args.metastore_db, hive_version=args.hive_version)
    status = ms.start(probe=probe)
    host, port = status.uri.removeprefix("thrift://").rsplit(":", 1)
    proxy = CountingProxy(host, int(port))
    load = [os.getloadavg()[0]]
    base = {"uri": proxy.uri, "warehouse": str(work / "wh"), "work": str(work),
            "journal": f"sqlite:///{work / 'journal.db'}", "driver_memory": args.driver_memory}
    if endpoint is not None:
        base["s3"] = {"endpoint": endpoint.url, "key": ACCESS_KEY, "secret": SECRET_KEY, "region": REGION}

    envs: dict[str, dict] = {}  # env name -> {"python", "spark", "jars", "conf"}
    main_spark = wheel_versions().spark
    envs["main"] = {"python": sys.executable, "spark": main_spark, "jars": [], "conf": {}, "label": ""}
    if any(ENV_OF[m] == "delta" for m in methods):
        spark_version, spark_jars = spark_of(args.delta_python)
        jars = resolve_jars(f"delta-spark_2.13-{args.delta_version}", (f"io.delta:delta-spark_2.13:{args.delta_version}",))
        envs["delta"] = {"python": args.delta_python, "spark": spark_version, "spark_jars": spark_jars,
                         "jars": without_spark_own(jars, spark_jars), "label": f"Delta {args.delta_version}",
                         "conf": {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                                  "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}}
    if any(ENV_OF[m] == "iceberg" for m in methods):
        spark_version, spark_jars = spark_of(args.iceberg_python)
        line = args.iceberg_spark or ".".join(spark_version.split(".")[:2])
        coordinate = f"org.apache.iceberg:iceberg-spark-runtime-{line}_2.13:{args.iceberg_version}"
        jars = resolve_jars(f"iceberg-spark-runtime-{line}_2.13-{args.iceberg_version}", (coordinate,))
        envs["iceberg"] = {"python": args.iceberg_python, "spark": spark_version, "spark_jars": spark_jars,
                           "jars": [str(j) for j in jars], "label": f"Iceberg {args.iceberg_version}",
                           "conf": {"spark.sql.catalog.ice": "org.apache.iceberg.spark.SparkCatalog",
                                    "spark.sql.catalog.ice.type": "hive", "spark.sql.catalog.ice.uri": proxy.uri,
                                    "spark.sql.catalog.ice.cache-enabled": "false",
                                    # Commits without the metastore's lock (HMS 2.3 refuses Iceberg's lock request,
                                    # which has no operation type): alter_table's compare-and-swap of the
                                    # metadata location instead (HMS 2.3.10 and 4.x).
                                    "spark.hadoop.iceberg.engine.hive.lock-enabled": "false"}}
    if access is not None:
        s3_main = resolve_s3_jars()
        for name, env in envs.items():
            if name == "main":
                env["s3_conf"] = {c: s3a_spark_conf(s3_main, access, committer=c) for c in ("magic", "file")}
                env["s3_conf"]["magic-records"] = {k: v for k, v in env["s3_conf"]["magic"].items()
                                                   if k not in MAGIC_IN_MEMORY_CONF}
            else:  # S3A of that wheel's Hadoop; Delta and Iceberg commit by their own protocols, not Hadoop's
                hadoop = wheel_versions(env["spark_jars"]).hadoop
                s3 = resolve_s3_jars(hadoop_version=hadoop)
                conf = s3a_spark_conf(s3, access, committer="magic")
                for key in ("spark.sql.sources.commitProtocolClass", "spark.sql.parquet.output.committer.class"):
                    conf.pop(key, None)
                env["s3_conf"] = {None: conf}

    if args.hive_version:  # Spark's built-in Hive 2.3 client cannot talk to a 4.x server: its Hive 4 client
        from tableswap.devmetastore.releases import spark_client_conf

        for env in envs.values():
            env["conf"].update(spark_client_conf(args.hive_version))
    workers: dict[tuple, Worker] = {}

    def worker(env_name: str, storage: str, method: str | None, role: str = "w") -> Worker:
        env = envs[env_name]
        committer = None
        if storage == "s3a" and env_name == "main":
            committer = "file" if method == "dynamic" else "magic"
            if method and method.endswith(RECORDS):
                committer = "magic-records"
            if role == "r":
                committer = "magic" if committer == "file" else "file"  # the other main session reads
                role = "w"
        elif storage == "file" and env_name == "main":
            committer = "file"
        key = (env_name, committer, role)
        if key not in workers:
            conf = dict(env["conf"])
            jars = list(env["jars"])
            if access is not None:
                s3conf = dict(env["s3_conf"][committer if env_name == "main" else None])
                jars += [j for j in s3conf.pop("spark.jars", "").split(",") if j]
                if env_name == "main" and committer is None:  # a reader on s3a
                    s3conf = {k: v for k, v in s3conf.items() if "committer" not in k and "commitProtocol" not in k}
                conf.update(s3conf)
            if jars:
                conf["spark.jars"] = ",".join(jars)
            name = "-".join(str(x) for x in key if x)
            print(f"starting worker {name} (pyspark {env['spark']})", flush=True)
            workers[key] = Worker(name, env["python"], {**base, "conf": conf, "role": role}, work)
        return workers[key]

    def root_of(storage: str) -> str:
        return f"s3a://{bucket}/tables" if storage == "s3a" else (work / "tables").as_uri()

    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
                     "python": platform.python_version(), "rows": args.rows, "runs": args.runs,
                     "row_bytes": args.row_bytes, "clustered_input": args.clustered_input,
                     "driver_memory": args.driver_memory,
                     "metastore": f"HMS {args.hive_version or '2.3 (pyspark wheel)'} on {status.backend}",
                     "spark": {m: envs[ENV_OF[m]]["spark"] for m in methods},
                     "peers": {m: envs[ENV_OF[m]].get("label", "") for m in methods},
                     "by_storage": {}, "readers": {}}

    def sample_load() -> None:
        load.append(os.getloadavg()[0])

    try:
        inputs = worker("main", storages[0], "tableswap")
        for storage in storages:
            by_k: dict = {}
            results["by_storage"][storage] = by_k
            for k in ks:
                expected = inputs.call({"op": "inputs", "k": k, "rows": args.rows, "row_bytes": args.row_bytes,
                                        "clustered": args.clustered_input})
                samples: dict[str, list] = {m: [] for m in methods}

                def one(method: str, storage: str = storage, k: int = k, expected: dict = expected) -> dict:
                    w = worker(ENV_OF[method], storage, method)
                    table = w.call({"op": "prepare", "method": method, "k": k, "root": root_of(storage)})["table"]
                    s3_mark = endpoint.mark() if endpoint else 0
                    ms_mark = proxy.mark()
                    run = w.call({"op": "run_counting_files", "method": method, "k": k, "table": table})
                    record = {"seconds": run["seconds"], "metastore": proxy.counts(ms_mark),
                              "tableswap_commit_calls": run.get("commit_calls"), "data_files": run.get("data_files"),
                              "layout": run.get("layout")}
                    if endpoint is not None:
                        counts = endpoint.counts(s3_mark)
                        record["s3"] = {kind: counts.get(kind, 0) for kind in KINDS}
                        record["copied_bytes"] = endpoint.copied_bytes(s3_mark)
                    got = w.call({"op": "count", "method": method, "table": table})["rows"]
                    assert got == expected["rows"], f"{method} K={k}: {got} rows readable, expected {expected['rows']}"
                    record["data_bytes"] = run.get("data_bytes")
                    w.call({"op": "drop", "method": method, "table": table})  # each run's files gone after it
                    if endpoint is not None:
                        record["bucket_objects"] = endpoint.purge(bucket, "tables/")
                    sample_load()
                    return record

                for m in methods:
                    one(m)  # warm-up (and the workers' start), untimed
                for run in range(args.runs):
                    order = methods[run % len(methods):] + methods[:run % len(methods)]
                    for m in order:
                        samples[m].append(one(m))
                        s = samples[m][-1]
                        print(f"{storage} K={k} {m} run {run + 1}: {s['seconds']:.2f}s, metastore "
                              f"{sum(s['metastore'].values())}, data files {s.get('data_files')}, "
                              f"s3 {s.get('s3', '-')}, layout {s.get('layout')}, load {load[-1]:.1f}", flush=True)
                by_k[k] = samples
                Path(args.json).write_text(json.dumps(results, indent=2, default=str))
            if args.reader_writes:
                results["readers"][storage] = readers(methods, storage, worker, root_of(storage), args.reader_writes,
                                                      work)
                Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    finally:
        for w in workers.values():
            w.stop()
        proxy.close()
        ms.stop()
        if endpoint is not None:
            endpoint.stop()
    results["load"] = {"min": min(load), "max": max(load), "samples": len(load)}
    Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    print_tables(results)
    print(f"\nraw figures: {args.json}; worker logs in {work}")
    return 0


def readers(methods: list[str], storage: str, worker, root: str, writes: int, work: Path) -> dict:
    """Per method (the plain write has no table to read), ``writes`` writes of the campaign's 4-partition
    table while a second process of the same environment reads it in a loop; what the reader saw."""
    from tests.campaign.reading import valid_reads
    from tests.support.helpers import count_anomalies

    seen = {}
    for method in methods:
        if is_plain(method):
            continue
        writer = worker(ENV_OF[method], storage, method)
        reader = worker(ENV_OF[method], storage, method, role="r")
        table = writer.call({"op": "reader_table", "method": method, "root": root})["table"]
        out, stop = work / f"reads-{storage}-{method}.jsonl", work / f"reads-{storage}-{method}.stop"
        reader.send({"op": "read_loop", "table": table, "out": str(out), "stop": str(stop)})
        deadline = time.time() + 300
        while len(out.read_text().splitlines() if out.exists() else []) < 2:
            if time.time() > deadline:
                raise RuntimeError(f"the {method} reader did not start")
            time.sleep(0.2)
        windows = writer.call({"op": "reader_writes", "method": method, "table": table, "writes": writes})["windows"]
        time.sleep(2)
        stop.touch()
        reader.receive()
        observations = [json.loads(line) for line in out.read_text().splitlines()[1:]]
        result = count_anomalies(observations, valid_reads(range(0, writes + 1)))
        result["reads_during_writes"] = sum(1 for o in observations
                                            if any(o["t"] < w1 and o["t_end"] > w0 for w0, w1 in windows))
        seen[method] = result
        print(f"{storage} reader of {method}: {result}", flush=True)
    return seen


def print_tables(results: dict) -> None:
    med = statistics.median
    print(f"\nPeers benchmark, {results['date']}, {results['cpus']} cores, {results['rows']:,} rows per batch, median "
          f"of {results['runs']} runs, {results['metastore']}"
          f"{'; rows of about %d bytes' % results['row_bytes'] if results.get('row_bytes') else ''}"
          f"{', input clustered by partition' if results.get('clustered_input') else ''}; 1-minute load average "
          f"{results['load']['min']:.1f}-{results['load']['max']:.1f}")
    for method, spark in results["spark"].items():
        print(f"  {method}: Spark {spark} {results['peers'].get(method) or ''}")
    for storage, by_k in results["by_storage"].items():
        for k, samples in by_k.items():
            plain = med(r["seconds"] for r in samples["plain"]) if samples.get("plain") else None
            dyn = med(r["seconds"] for r in samples["dynamic"]) if samples.get("dynamic") else None
            print(f"\n{storage}, K = {k}\n")
            s3 = storage == "s3a"
            print("| method | seconds (median) | runs | / plain | / dynamic | metastore calls | data files |"
                  + (" " + " | ".join(KINDS) + " | bytes copied |" if s3 else ""))
            print("|---|---|---|---|---|---|---|" + ("---|" * (len(KINDS) + 1) if s3 else ""))
            for method, runs in samples.items():
                if not runs:
                    continue
                secs = med(r["seconds"] for r in runs)
                calls = runs[-1]["metastore"]
                top = ", ".join(f"{n} {c}" for n, c in sorted(calls.items(), key=lambda kv: -kv[1])[:4])
                spread = ", ".join(f"{r['seconds']:.2f}" for r in runs)
                ratios = " | ".join(f"{secs / base:.2f}" if base else "" for base in (plain, dyn))
                line = f"| {method} | {secs:.2f} | {spread} | {ratios} | {sum(calls.values())} ({top}) |"
                files, size = runs[-1].get("data_files"), runs[-1].get("data_bytes")
                mean = f" ({size / files / 1e6:.1f} MB each)" if files and size else ""
                line += f" {'-' if files is None else files}{mean} |"
                if s3:
                    line += " " + " | ".join(str(int(med(r["s3"][kd] for r in runs))) for kd in KINDS)
                    line += f" | {int(med(r['copied_bytes'] for r in runs)):,} |"
                print(line)
    for storage, seen in results.get("readers", {}).items():
        print(f"\nwhat a concurrent reader saw, {storage}\n")
        print("| method | reads | during writes | partial or mixed | missing partition | failed queries | example |")
        print("|---|---|---|---|---|---|---|")
        for method, r in seen.items():
            print(f"| {method} | {r['observations']} | {r['reads_during_writes']} | {r['mixed_or_partial']} | "
                  f"{r['missing_partition']} | {r['errors']} | {(r['examples'] or [''])[0][:80]} |")


# ====================================================================== the worker (any pyspark 4.x)
def worker_main(spec_file: str) -> int:
    spec = json.loads(Path(spec_file).read_text())
    commands = os.fdopen(spec["cmd_fd"], "r")
    replies = os.fdopen(spec["reply_fd"], "w", buffering=1)
    os.environ["TABLESWAP_METASTORE_URI"] = spec["uri"]
    os.environ["TABLESWAP_JOURNAL_URL"] = spec["journal"]
    if "s3" in spec:
        os.environ.update({"AWS_ENDPOINT_URL": spec["s3"]["endpoint"], "AWS_ACCESS_KEY_ID": spec["s3"]["key"],
                           "AWS_SECRET_ACCESS_KEY": spec["s3"]["secret"], "AWS_DEFAULT_REGION": spec["s3"]["region"]})
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("tableswap-bench-peers")
               .config("spark.hadoop.hive.metastore.uris", spec["uri"]).config("spark.sql.warehouse.dir", spec["warehouse"])
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", spec["driver_memory"]))
    for key, value in spec["conf"].items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if "s3" in spec:
        try:
            from tableswap import storage
            storage.configure("s3", endpoint_url=spec["s3"]["endpoint"], key=spec["s3"]["key"],
                              secret=spec["s3"]["secret"])
        except ImportError:  # another environment's interpreter: it runs no tableswap method
            pass
    state = Ops(spark, Path(spec["work"]))
    for line in commands:
        command = json.loads(line)
        if command["op"] == "stop":
            break
        try:
            reply = getattr(state, command["op"])(**{k: v for k, v in command.items() if k != "op"})
        except Exception as exc:  # noqa: BLE001 - the orchestrator reports it
            import traceback
            traceback.print_exc()
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
        replies.write(json.dumps(reply) + "\n")
    spark.stop()
    return 0


class Ops:
    """What a worker does on command (each returns a JSON-able dict)."""

    def __init__(self, spark, work: Path) -> None:
        self.spark = spark
        self.work = work
        self.locations: dict[str, str] = {}  # table -> its location

    def hello(self) -> dict:
        self.spark.sql("CREATE DATABASE IF NOT EXISTS bench")
        return {"spark": self.spark.version}

    # ------------------------------------------------------------ inputs and tables
    def inputs(self, k: int, rows: int, row_bytes: int = 0, clustered: bool = False) -> dict:
        """``existing_<k>`` (rows over the first half of the batch's partitions, at least one) and ``batch_<k>``
        (``rows`` rows over p0..p{K-1}), as local Parquet every worker reads. ``row_bytes``: ``v`` is that many
        hexadecimal characters of SHA-512 digests (Snappy leaves them about as large), else one SHA-1 (40);
        ``clustered``: the batch stored one partition per file."""
        existing = max(1, k // 2)
        if row_bytes > 0:
            digests = ", ".join(f"sha2(concat(CAST(id AS string), '/{i}'), 512)" for i in range(-(-row_bytes // 128)))
            value = f"substr(concat({digests}), 1, {row_bytes})"
        else:
            value = "sha1(CAST(id AS string))"
        self.batch_dir = self.work / f"batch_{k}_{rows}_{row_bytes}_{int(clustered)}"
        self.existing_dir = self.work / f"existing_{k}_{rows}"
        if not self.existing_dir.exists():
            self.spark.range(max(rows // 4, 1000)).selectExpr(
                "id", "CAST(id AS string) AS v", f"concat('p', CAST(id % {existing} AS string)) AS dt") \
                .write.parquet(str(self.existing_dir))
        if not self.batch_dir.exists():
            batch = self.spark.range(rows).selectExpr("id", f"{value} AS v",
                                                      f"concat('p', CAST(id % {k} AS string)) AS dt")
            if clustered:
                batch = batch.repartition(k, "dt")
            batch.write.parquet(str(self.batch_dir))
        # Every worker (one per Spark environment) reads the inputs this one made last for this K.
        (self.work / f"inputs_{k}.json").write_text(json.dumps([str(self.existing_dir), str(self.batch_dir)]))
        return {"rows": rows}

    def _paths(self, k: int) -> tuple[str, str]:
        existing, batch = json.loads((self.work / f"inputs_{k}.json").read_text())
        return existing, batch

    def _create(self, method: str, name: str, location: str, columns: str, props: str = "") -> str:
        table = self._create_table(method, name, location, columns)
        self.locations[table] = location
        return table

    def _create_table(self, method: str, name: str, location: str, columns: str) -> str:
        if is_plain(method):
            return location
        if method == "iceberg":
            table = f"ice.bench.{name}"
            # write.spark.fanout.enabled=false: Iceberg then asks Spark to sort each task's rows by partition and
            # keeps one file open at a time, as Spark's own writer does for the other methods. Its default for a
            # table without a sort order (fanout: a Parquet writer open per partition a task meets) ran out of
            # a 4 GiB heap at K = 2,000.
            self.spark.sql(f"CREATE TABLE {table} ({columns}) USING iceberg PARTITIONED BY (dt) LOCATION '{location}' "
                           "TBLPROPERTIES ('write.parquet.compression-codec'='snappy', 'engine.hive.lock-enabled'='false', "
                           "'write.spark.fanout.enabled'='false')")
            return table
        fmt = "delta" if method.startswith("delta") else "parquet"
        self.spark.sql(f"CREATE TABLE bench.{name} ({columns}) USING {fmt} PARTITIONED BY (dt) LOCATION '{location}'")
        return f"bench.{name}"

    def _append(self, method: str, df, table: str) -> None:
        if method == "iceberg":
            df.writeTo(table).append()
        elif not is_plain(method):
            df.write.insertInto(table)

    def prepare(self, method: str, k: int, root: str) -> dict:
        name = f"t_{method.replace('-', '_')}_{k}_{uuid.uuid4().hex[:8]}"
        existing, _ = self._paths(k)
        table = self._create(method, name, f"{root}/{name}", "id bigint, v string, dt string")
        self._append(method, self.spark.read.parquet(existing), table)
        return {"table": table}

    def drop(self, method: str, table: str) -> dict:
        """The run's table and every file under its location gone (local storage here; the orchestrator
        purges the bucket), so that a run of gigabytes leaves nothing for the next."""
        if not is_plain(method):
            self.spark.sql(f"DROP TABLE IF EXISTS {table}" + (" PURGE" if method == "iceberg" else ""))
        location = self.locations.pop(table, table)
        if location.startswith(("file:", "/")):
            shutil.rmtree(location.removeprefix("file://").removeprefix("file:"), ignore_errors=True)
        return {}

    def count(self, method: str, table: str) -> dict:
        df = self.spark.read.parquet(table) if is_plain(method) else self.spark.table(table)
        return {"rows": df.count()}

    # ------------------------------------------------------------ the timed call
    def _write(self, method: str, df, table: str, partitions: list[str]) -> dict:
        method = method.removesuffix(RECORDS)  # the committer's setting is the worker's session's
        if method.startswith("tableswap"):
            from tableswap import swap_partitions
            batch = df.repartition("dt") if method == "tableswap-clustered" else df
            options = {"tableswap-distributed": {"write_distribution": "partition"},
                       "tableswap-none": {"write_distribution": "none"},
                       "tableswap-scoped": {"replace_where": [f"dt={p}" for p in partitions]}}.get(method, {})
            result = swap_partitions(batch, table, **options)
            return {"commit_calls": result.commit_catalog_calls,
                    "layout": result.write_distribution.applied if result.write_distribution else None}
        if method == "dynamic":
            self.spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
            try:
                df.write.insertInto(table, overwrite=True)
            finally:
                self.spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
        elif method == "delta-replacewhere":
            condition = "dt IN (" + ", ".join(f"'{p}'" for p in partitions) + ")"
            df.write.format("delta").mode("overwrite").option("replaceWhere", condition).saveAsTable(table)
        elif method == "delta-dynamic":
            df.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").saveAsTable(table)
        elif method == "iceberg":
            df.writeTo(table).overwritePartitions()
        elif method == "plain":
            df.write.partitionBy("dt").parquet(table)
        else:
            raise ValueError(f"unknown method {method}")
        return {}

    def run(self, method: str, k: int, table: str) -> dict:
        _, batch = self._paths(k)
        df = self.spark.read.parquet(batch)
        start = time.perf_counter()
        extra = self._write(method, df, table, [f"p{i}" for i in range(k)])
        return {"seconds": time.perf_counter() - start, **extra}

    def run_counting_files(self, method: str, k: int, table: str) -> dict:
        """:meth:`run`, and the data files the write added under the table's location (local storage only:
        None elsewhere), listed before and after, outside the timed call."""
        before = self._data_files(self.locations[table])
        result = self.run(method, k, table)
        after = self._data_files(self.locations[table])
        if after is None or before is None:
            return {**result, "data_files": None, "data_bytes": None}
        added = after - before
        return {**result, "data_files": len(added), "data_bytes": sum(os.path.getsize(f) for f in added)}

    @staticmethod
    def _data_files(location: str) -> set[str] | None:
        """The data files under a local location; the formats' logs and metadata (``_delta_log``, ``metadata``)
        and hidden files (``.``, ``_``) are not data."""
        if not location.startswith(("file:", "/")):
            return None
        # Not tableswap.core.locations.to_local_path: the peers' workers run without tableswap's dependencies.
        root = location.removeprefix("file://").removeprefix("file:")
        found = set()
        for directory, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in ("_delta_log", "metadata") and not d.startswith(".")]
            found.update(os.path.join(directory, f) for f in files if not f.startswith((".", "_")))
        return found

    # ------------------------------------------------------------ the reader pass (tests/campaign/reading.py)
    def reader_table(self, method: str, root: str) -> dict:
        from tests.campaign.reading import batch_frame

        name = f"r_{method.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
        table = self._create(method, name, f"{root}/{name}", "id bigint, batch string, chk bigint, dt string")
        self._append(method, batch_frame(self.spark, 0), table)
        return {"table": table}

    def reader_writes(self, method: str, table: str, writes: int) -> dict:
        from tests.campaign.reading import PARTS, batch_frame

        windows = []
        for b in range(1, writes + 1):
            df = batch_frame(self.spark, b)
            t0 = time.time()
            self._write(method, df, table, PARTS)
            windows.append((t0, time.time()))
        return {"windows": windows}

    def read_loop(self, table: str, out: str, stop: str) -> dict:
        """tests/campaign/reader.py's loop, in this worker's session (its format's reader)."""
        from tests.campaign.reader import observe

        observe(self.spark, table, out, stop)
        return {}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(worker_main(sys.argv[2]))
    sys.exit(main())
