"""Benchmark on the Glue Data Catalog emulator (moto's server on loopback, not AWS): AWS calls per swap and
end-to-end time, tableswap against an awswrangler-style delete-then-write, no Spark.

    python -m tests.benchmarks.bench_glue                          # K = 1, 20, 200, 2,000; 3 runs each
    python -m tests.benchmarks.bench_glue --k 1,20 --repeat 1 --json   # the figures as JSON on stdout

One moto server (tests/support/s3.py's endpoint: S3, Glue and DynamoDB on one loopback port), reached through boto3's
standard configuration (``AWS_ENDPOINT_URL``, dummy keys) as a user reaches AWS. For each K, a Glue database
holds two identical partitioned parquet EXTERNAL tables on S3, each with K partitions of ``--rows`` rows (one
parquet file each, written with pyarrow). Then, ``--repeat`` times (the two methods taking turns going first,
after one untimed warm-up of each unless ``--no-warmup``), every one of the K partitions is replaced:

* ``tableswap`` (first table): the catalog steps of a swap from Spark on Glue, with the files written by pyarrow
  instead of Spark: validate (``snapshot``), journal entry, temporary table created, the K files put into fresh
  directories ``ROOT/_tableswap/<swap id>/dt=...``, then the commit protocol (``tableswap.ops.commit.commit``
  on a runtime built from ``glue://us-east-1``: the lease in DynamoDB, the read and plan under it, the journaled
  intent, the flip in Glue's chunks, the journal commit, the release), the temporary table dropped;
* ``delete-then-write`` (second table): what ``awswrangler.s3.to_parquet(dataset=True,
  mode="overwrite_partitions", database=..., table=...)`` does, imitated with boto3 and pyarrow (awswrangler
  is not installed): for each partition in turn, list the objects under ``ROOT/dt=.../``, delete them
  (``DeleteObjects``), encode the partition's rows and put the new file in the same directory; then
  ``GetTable`` and ``BatchCreatePartition`` of the K partitions, 100 a call (they exist already: each entry
  fails with ``AlreadyExistsException``, which awswrangler ignores).

Counted: every request each boto3 client sends (botocore's ``before-send`` event hook on the clients of the
adapter, of its lease store and of the benchmark), by service and operation. Timed by the wall clock: the
staging write, the commit, the whole swap; the delete-then-write, and the window during which a reader finds
a partition's files deleted and the new one not yet there (per partition: from the start of the list-and-delete
to the end of the put, an upper bound; the lower bound, from the delete's answer to the put's request, is in
the JSON). With tableswap that window is 0: each partition is repointed whole, its old files untouched.

The emulator has no network latency and ignores Glue's batch limits and throttling: call counts carry over to
AWS, times do not (docs/benchmarks.md, Glue Data Catalog).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from tests.support.glue_tables import PARQUET_SD

ENV_NAMES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
             "AWS_PROFILE", "AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3",
             "AWS_SESSION_TOKEN", "AWS_REGION", "TABLESWAP_GLUE_LOCK_TABLE", "TABLESWAP_METASTORE_URI")


def main(argv: list[str] | None = None, *, endpoint_url: str | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", default="1,20,200,2000", help="partitions replaced per swap (comma separated)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per method and K (medians reported)")
    ap.add_argument("--rows", type=int, default=1000, help="rows per partition (one parquet file each)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed first run of each method")
    ap.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                    help="write the figures as JSON to FILE (no FILE: to stdout, instead of the table)")
    args = ap.parse_args(argv)
    ks = [int(x) for x in args.k.split(",") if x.strip()]
    if not ks or min(ks) < 1 or args.repeat < 1:
        ap.error("--k needs positive partition counts and --repeat at least 1")

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.support.s3 import S3Endpoint

    endpoint = None
    if endpoint_url is None:
        endpoint = S3Endpoint().start()
        endpoint_url = endpoint.url
    try:
        results = run(endpoint_url, ks, repeat=args.repeat, rows=args.rows, warmup=not args.no_warmup,
                      progress=args.json != "-")
    finally:
        if endpoint is not None:
            endpoint.stop()
    if args.json == "-":
        print(json.dumps(results, indent=2))
    else:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        print_table(results)
    return 0


# --------------------------------------------------------------------------- the AWS side
@contextlib.contextmanager
def aws_environment(endpoint_url: str, lock_table: str) -> Iterator[None]:
    """boto3's standard configuration pointed at the emulator (as a user points it at AWS); restored after."""
    from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY

    saved = {name: os.environ.get(name) for name in ENV_NAMES}
    try:
        for name in ENV_NAMES:
            os.environ.pop(name, None)
        os.environ.update({"AWS_ENDPOINT_URL": endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION,
                           "TABLESWAP_GLUE_LOCK_TABLE": lock_table})
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Calls:
    """Requests sent by boto3 clients (botocore's ``before-send`` hook: one per HTTP request, retries
    included), by ``service.Operation``, recorded while a phase is set."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.log: list[tuple[str, str]] = []  # (phase, "service.Operation")
        self._watched: list[Any] = []  # the clients hooked (kept: an id is never reused meanwhile)

    def watch(self, client: Any) -> Any:
        if not any(c is client for c in self._watched):
            self._watched.append(client)
            service = client.meta.service_model.service_name
            client.meta.events.register(f"before-send.{client.meta.service_model.service_id.hyphenize()}",
                                        lambda event_name, **_: self._sent(service, event_name))
        return client

    def _sent(self, service: str, event_name: str) -> None:
        if self.phase is not None:  # event_name: before-send.<service id>.<Operation>
            self.log.append((self.phase, f"{service}.{event_name.rsplit('.', 1)[-1]}"))

    @contextlib.contextmanager
    def during(self, phase: str) -> Iterator[None]:
        self.phase = phase
        try:
            yield
        finally:
            self.phase = None

    def take(self) -> dict[str, dict[str, int]]:
        """The calls recorded so far, by phase then operation; the log is emptied."""
        out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for phase, op in self.log:
            out[phase][op] += 1
        self.log = []
        return {phase: dict(sorted(c.items())) for phase, c in out.items()}


def parquet_bytes(rows: int, tag: str) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": pa.array(range(rows), pa.int64()), "value": [f"{tag}-{i}" for i in range(rows)]})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()


def days(k: int) -> list[str]:
    start = dt.date(2020, 1, 1)
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(k)]


class Bench:
    """One K: a database with the two tables, the runtime, the counted clients."""

    def __init__(self, k: int, rows: int, work: Path, calls: Calls) -> None:
        import boto3

        from tableswap.config import resolve
        from tableswap.runtime import Runtime

        self.k, self.rows, self.calls = k, rows, calls
        self.values = days(k)
        self.db = f"bench_glue_{uuid.uuid4().hex[:8]}"
        # One bucket per method: moto lists a prefix by scanning the bucket's keys, so tableswap's staged
        # files (kept, as the janitor has not run) must not slow the other method's listings.
        self.ts_bucket = f"bench-glue-ts-{uuid.uuid4().hex[:12]}"
        self.dw_bucket = f"bench-glue-dw-{uuid.uuid4().hex[:12]}"
        self.s3 = calls.watch(boto3.client("s3"))
        self.glue = calls.watch(boto3.client("glue"))  # delete-then-write's catalog calls, and the setup's
        self.s3.create_bucket(Bucket=self.ts_bucket)
        self.s3.create_bucket(Bucket=self.dw_bucket)
        self.glue.create_database(DatabaseInput={"Name": self.db})
        self.ts_root = f"s3://{self.ts_bucket}/events"
        self.dw_root = f"s3://{self.dw_bucket}/events"
        for name, root in (("events_ts", self.ts_root), ("events_dw", self.dw_root)):
            self._seed(name, root)
        settings = resolve(metastore_uri="glue://us-east-1", journal_url=f"sqlite:///{work / f'journal_{k}.db'}",
                           lock_timeout_s=60)
        self.rt = Runtime(settings)
        self.generation = 0

    def _seed(self, name: str, root: str) -> None:
        self.glue.create_table(DatabaseName=self.db, TableInput={
            "Name": name, "TableType": "EXTERNAL_TABLE",
            "StorageDescriptor": {**PARQUET_SD, "Location": root},
            "PartitionKeys": [{"Name": "dt", "Type": "string"}],
            "Parameters": {"EXTERNAL": "TRUE", "classification": "parquet"}})
        for d in self.values:
            self._put(f"{root}/dt={d}/part-00000-{uuid.uuid4()}.snappy.parquet", parquet_bytes(self.rows, "g0"))
        for start in range(0, self.k, 100):
            self.glue.batch_create_partition(DatabaseName=self.db, TableName=name, PartitionInputList=[
                {"Values": [d], "StorageDescriptor": {**PARQUET_SD, "Location": f"{root}/dt={d}"}}
                for d in self.values[start:start + 100]])

    @staticmethod
    def _key(url: str) -> str:
        return url.split("/", 3)[3]

    def _put(self, url: str, body: bytes) -> None:
        self.s3.put_object(Bucket=url.split("/", 3)[2], Key=self._key(url), Body=body)

    def close(self) -> None:
        self.rt.close()

    # ------------------------------------------------------------------ tableswap
    def swap(self) -> dict[str, Any]:
        from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_CREATED_PARAM, TEMP_FOR_PARAM, PartitionInfo
        from tableswap.core.locations import staging_location
        from tableswap.core.names import new_swap_id, temp_table_name
        from tableswap.core.plan import WrittenPartitions
        from tableswap.core.records import SwapKind
        from tableswap.journal.store import utcnow
        from tableswap.ops.commit import commit
        from tableswap.ops.operation import Operation, begin
        from tableswap.core.planning import LockedPlanning

        self.generation += 1
        tag, rt, calls = f"g{self.generation}", self.rt, self.calls
        swap_id = new_swap_id()
        times: dict[str, float] = {}
        t0 = time.perf_counter()
        with rt.session(ping=False) as (client, journal):
            client.open()
            calls.watch(client._glue)
            calls.watch(client.lease_store().client)  # the lease store's own DynamoDB client (no call made here)
            with calls.during("validate"):
                snap = client.snapshot(self.db, "events_ts")
                target = snap.table
                staging = staging_location(target.root or self.ts_root, swap_id)
                temp = temp_table_name("events_ts", swap_id)
                op = Operation(SwapKind.PARTITIONS, swap_id, self.db, "events_ts", target.root or "",
                               staging_location=staging, temp_table=temp)
                begin(journal, op)
            with calls.during("staging_table"):
                created = client.create_staging_table(
                    target, temp, staging, {TEMP_FOR_PARAM: target.qualified_name, SWAP_ID_PARAM: swap_id,
                                            TEMP_CREATED_PARAM: utcnow()}, snapshot=snap)
            t1 = time.perf_counter()
            with calls.during("staging_write"):
                written = []
                for d in self.values:
                    body = parquet_bytes(self.rows, tag)
                    self._put(f"{staging}/dt={d}/part-00000-{uuid.uuid4()}.snappy.parquet", body)
                    written.append(PartitionInfo((d,), f"{staging}/dt={d}", {"numFiles": "1",
                                                                             "totalSize": str(len(body))}))
            t2 = time.perf_counter()
            with calls.during("commit"):
                done = commit(rt, target, op.planned(LockedPlanning(WrittenPartitions(
                    swap_id, self.db, "events_ts", tuple(written)), target)), catalog=client)
            t3 = time.perf_counter()
            with calls.during("finish"):
                client.drop_table_keep_data(self.db, temp, created=created)
                journal.finish(swap_id)
            t4 = time.perf_counter()
        assert len(done.plan.replaces) == self.k and not done.plan.adds, done.plan
        times = {"write_s": t2 - t1, "commit_s": t3 - t2, "total_s": t4 - t0, "catalog_outside_commit_s":
                 (t1 - t0) + (t4 - t3)}
        return {"swap_id": swap_id, **times, "calls": calls.take(), "exposed_s": 0.0, "exposed_max_s": 0.0}

    # ------------------------------------------------------------------ delete-then-write
    def delete_then_write(self) -> dict[str, Any]:
        self.generation += 1
        tag, calls = f"g{self.generation}", self.calls
        upper = lower = longest = 0.0
        t0 = time.perf_counter()
        with calls.during("delete_then_write"):
            for d in self.values:
                prefix = f"{self._key(self.dw_root)}/dt={d}/"
                started = time.perf_counter()
                keys = [o["Key"] for page in self.s3.get_paginator("list_objects_v2").paginate(
                    Bucket=self.dw_bucket, Prefix=prefix) for o in page.get("Contents", [])]
                for start in range(0, len(keys), 1000):
                    self.s3.delete_objects(Bucket=self.dw_bucket, Delete={
                        "Objects": [{"Key": key} for key in keys[start:start + 1000]], "Quiet": True})
                deleted = time.perf_counter()
                # awswrangler converts and encodes the partition's rows after its delete (in the write)
                body = parquet_bytes(self.rows, tag)
                put_at = time.perf_counter()
                self.s3.put_object(Bucket=self.dw_bucket, Key=f"{prefix}{uuid.uuid4().hex}.snappy.parquet", Body=body)
                ended = time.perf_counter()
                upper += ended - started
                lower += put_at - deleted
                longest = max(longest, ended - started)
            t1 = time.perf_counter()
            self.glue.get_table(DatabaseName=self.db, Name="events_dw")
            for start in range(0, self.k, 100):
                res = self.glue.batch_create_partition(DatabaseName=self.db, TableName="events_dw", PartitionInputList=[
                    {"Values": [d], "StorageDescriptor": {**PARQUET_SD, "Location": f"{self.dw_root}/dt={d}"}}
                    for d in self.values[start:start + 100]])
                unexpected = [e for e in res.get("Errors", [])
                              if e["ErrorDetail"]["ErrorCode"] != "AlreadyExistsException"]
                assert not unexpected, unexpected
        t2 = time.perf_counter()
        return {"write_s": t1 - t0, "total_s": t2 - t0, "exposed_s": upper, "exposed_lower_s": lower,
                "exposed_max_s": longest, "calls": calls.take()}


def run(endpoint_url: str, ks: list[int], *, repeat: int = 3, rows: int = 1000, warmup: bool = True,
        progress: bool = True) -> dict[str, Any]:
    """The benchmark against the moto server at ``endpoint_url``; the figures as a dict (see ``--json``)."""
    lock_table = f"bench_glue_locks_{uuid.uuid4().hex[:8]}"
    by_k: dict[str, Any] = {}
    with aws_environment(endpoint_url, lock_table), tempfile.TemporaryDirectory(prefix="tableswap-bench-glue-") as w:
        import boto3

        ddb = boto3.client("dynamodb")  # the lease table, made once beforehand as after a first swap
        ddb.create_table(TableName=lock_table, BillingMode="PAY_PER_REQUEST",
                         KeySchema=[{"AttributeName": "lock_key", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "lock_key", "AttributeType": "S"}])
        for k in ks:
            calls = Calls()
            t = time.perf_counter()
            bench = Bench(k, rows, Path(w), calls)
            setup_s = time.perf_counter() - t
            calls.take()
            runs: dict[str, list[dict[str, Any]]] = {"tableswap": [], "delete_then_write": []}
            try:
                methods = {"tableswap": bench.swap, "delete_then_write": bench.delete_then_write}
                warm = {name: fn() for name, fn in methods.items()} if warmup else {}
                for i in range(repeat):
                    order = list(methods) if i % 2 == 0 else list(reversed(methods))
                    for name in order:
                        runs[name].append(methods[name]())
                        if progress:
                            r = runs[name][-1]
                            print(f"K={k} {name} run {i + 1}: {r['total_s']:.2f}s "
                                  f"{_flat(r['calls'])}", file=sys.stderr, flush=True)
            finally:
                bench.close()
            by_k[str(k)] = {"database": bench.db,
                            "tables": {"tableswap": "events_ts", "delete_then_write": "events_dw"},
                            "setup_s": setup_s, **{name: {**summarize(runs[name]), "warmup": warm.get(name)}
                                                   for name in methods}}
    import moto

    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()), "python": sys.version.split()[0], "moto": moto.__version__,
            "endpoint": "moto server on loopback (an emulator, not AWS)", "rows_per_partition": rows,
            "repeat": repeat, "warmup": warmup, "by_k": by_k}


def _flat(calls: dict[str, dict[str, int]]) -> dict[str, int]:
    total: collections.Counter = collections.Counter()
    for ops in calls.values():
        total.update(ops)
    return dict(sorted(total.items()))


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the times, each run's times, and the calls (those of the last run; ``calls_vary`` if runs
    differed)."""
    out: dict[str, Any] = {"runs": runs}
    for key in runs[0]:
        if key.endswith("_s"):
            out[key] = statistics.median(r[key] for r in runs)
    out["calls"] = runs[-1]["calls"]
    out["calls_total"] = _flat(runs[-1]["calls"])
    out["calls_vary"] = any(_flat(r["calls"]) != out["calls_total"] for r in runs)
    return out


# --------------------------------------------------------------------------- the table
def print_table(results: dict[str, Any]) -> None:
    """One column per K; the rows: requests per swap by service and operation, then seconds (medians)."""
    by_k = results["by_k"]
    print(f"\n{results['date']}, {results['cpus']} cpus, load average {results['load_average'][0]:.2f} at the end, "
          f"moto {results['moto']} on loopback (not AWS), {results['rows_per_partition']} rows per partition, "
          f"medians of {results['repeat']} run(s)")
    head = ("", *(f"K = {int(k):,}" for k in by_k))
    for method, title in (("tableswap", "tableswap swap (requests of the whole swap)"),
                          ("delete_then_write", "delete-then-write (awswrangler's overwrite_partitions, imitated)")):
        ops = sorted({op for r in by_k.values() for op in r[method]["calls_total"]},
                     key=lambda op: (["glue", "dynamodb", "s3"].index(op.split(".")[0]), op))
        rows = [(op, *(str(r[method]["calls_total"].get(op, 0)) for r in by_k.values())) for op in ops]
        if method == "tableswap":
            for service in ("glue", "dynamodb"):
                rows.append((f"{service} calls in the commit (lock to release)", *(
                    str(sum(n for op, n in r[method]["calls"].get("commit", {}).items() if op.startswith(service)))
                    for r in by_k.values())))
            seconds = (("staging write s (K files put)", "write_s"), ("commit s (lock, flip, journal)", "commit_s"),
                       ("other catalog steps s", "catalog_outside_commit_s"), ("whole swap s", "total_s"))
        else:
            seconds = (("list, delete, put s", "write_s"), ("whole s (with the Glue calls)", "total_s"),
                       ("exposed s (sum over partitions)", "exposed_s"), ("longest exposed s", "exposed_max_s"))
        rows += [(label, *(f"{r[method][key]:.3f}" for r in by_k.values())) for label, key in seconds]
        if method == "tableswap":
            rows.append(("exposed s", *("0" for _ in by_k)))
        if any(r[method]["calls_vary"] for r in by_k.values()):
            rows.append(("(calls differed between runs: see the JSON)", *("" for _ in by_k)))
        print(f"\n{title}")
        _print_rows(head, rows)


def _print_rows(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        print("  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, widths))))


if __name__ == "__main__":
    raise SystemExit(main())
