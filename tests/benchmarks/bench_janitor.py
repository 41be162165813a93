"""Benchmark: a janitor run against the number of displaced directories (docs/janitor.md, cost model).

    python -m tests.benchmarks.bench_janitor                       # 1,000 / 4,000 / 16,000 directories
    python -m tests.benchmarks.bench_janitor --sizes 1000,4000 --batch-size 100
    python -m tests.benchmarks.bench_janitor --storage s3a --sizes 1000,4000   # moto's S3 emulator, not AWS

For each size N, on one development metastore (Hive 2.3 from the pyspark wheel, Derby) and a SQLite journal:
a partitioned EXTERNAL table with N/2 partitions on local files, each partition displaced twice as two
committed swaps would have left it (Spark's default directory, then the first swap's directory; the second
swap's is live), so N displaced directories with one small file each, queued in the journal long ago.
Then one timed ``run_janitor(grace=0, dry_run=False)`` deletes them all (in batches, each under the
table lock). Reported: seconds, milliseconds per directory, metastore calls (the run's own clients, lock
heartbeats included) and that every displaced directory is gone and every live one still there.

With ``--storage s3a`` the directories are prefixes in a bucket of a local S3 endpoint (moto's emulator on
loopback, tests/support/s3.py, every request logged) and the metastore gets S3 support; the S3 requests of the
timed run are reported by type, per displaced directory.

No Spark: the table and its partitions are made through the metastore directly.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4000,16000", help="displaced directories per run (comma separated)")
    ap.add_argument("--batch-size", type=int, default=100, help="the janitor's batch size")
    ap.add_argument("--storage", default="local", choices=["local", "s3a"])
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)

    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-janitor-"))
    store = S3Store.start(work) if args.storage == "s3a" else LocalStore(work)
    ms = DevMetastore(state_dir=work / "hms", s3=store.access, jars_dir=store.jars_dir)
    print(f"metastore: starting in {work / 'hms'} ...", flush=True)
    ms.start(probe=probe)
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(run_one(ms.uri, store, work / f"n{n}", n, args.batch_size))
            r = rows[-1]
            print(f"{r['displaced']:>6} displaced dirs, {r['partitions']:>5} partitions: {r['seconds']:8.2f} s  "
                  f"{r['ms_per_dir']:6.2f} ms/dir  {r['metastore_calls']:>6} metastore calls  "
                  f"{r['requests']} (deleted {r['deleted']}, live intact: {r['live_intact']}, "
                  f"outcomes {r['outcomes']})", flush=True)
    finally:
        ms.stop()
        store.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    print("\n| storage | displaced directories | partitions | seconds | ms per directory | metastore calls | "
          "S3 requests |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        requests = ", ".join(f"{k} {v:,}" for k, v in sorted(r["requests"].items())) or "-"
        print(f"| {args.storage} | {r['displaced']:,} | {r['partitions']:,} | {r['seconds']:.2f} | "
              f"{r['ms_per_dir']:.2f} | {r['metastore_calls']:,} | {requests} |")
    return 0 if all(r["live_intact"] and r["deleted"] == r["displaced"] for r in rows) else 1


_CLIENTS: list = []


def _uri(path: Path) -> str:
    """``file://`` + the path as is, as Spark writes locations (``Path.as_uri`` would quote ``=``)."""
    return f"file://{path}"


class LocalStore:
    """Directories on the local disk."""

    access = None
    jars_dir = None

    def __init__(self, work: Path) -> None:
        self.work = work

    def location(self, path: Path) -> str:
        return _uri(path)

    def write(self, paths: list[Path]) -> None:
        for directory in paths:
            directory.mkdir(parents=True)
            (directory / "part-00000.parquet").write_bytes(b"x" * 64)

    def exists(self, path: Path) -> bool:
        return (path / "part-00000.parquet").exists()

    def mark(self) -> int:
        return 0

    def requests(self, mark: int) -> dict[str, int]:
        return {}

    def stop(self) -> None:
        pass


class S3Store(LocalStore):
    """Prefixes in a fresh bucket of a loopback S3 endpoint (moto), each with a directory marker and a file,
    as S3A leaves them; ``work``-relative paths map to keys."""

    @classmethod
    def start(cls, work: Path) -> "S3Store":
        from tableswap import storage
        from tableswap.jvm.jars import S3Access
        from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint

        store = cls(work)
        store.endpoint = S3Endpoint().start()
        store.bucket = store.endpoint.new_bucket("bench-janitor")
        store.client = store.endpoint.client()
        store.access = S3Access(endpoint=store.endpoint.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                                path_style=True, region=REGION)
        store.jars_dir = None
        storage.configure("s3a", endpoint_url=store.endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
        return store

    def key(self, path: Path) -> str:
        return path.relative_to(self.work).as_posix()

    def location(self, path: Path) -> str:
        return f"s3a://{self.bucket}/{self.key(path)}"

    def write(self, paths: list[Path]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        def put(path: Path) -> None:
            self.client.put_object(Bucket=self.bucket, Key=self.key(path) + "/", Body=b"")
            self.client.put_object(Bucket=self.bucket, Key=self.key(path) + "/part-00000.parquet", Body=b"x" * 64)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, paths))

    def exists(self, path: Path) -> bool:
        return self.key(path) + "/part-00000.parquet" in self._keys

    def mark(self) -> int:
        return len(self.endpoint.requests_since(0))

    def requests(self, mark: int) -> dict[str, int]:
        self._keys = self.endpoint.keys(self.bucket)  # after the timed run: read once for exists()
        return self.endpoint.counts(mark)

    def stop(self) -> None:
        self.endpoint.stop()


def run_one(uri: str, store: LocalStore, work: Path, n: int, batch_size: int) -> dict:
    import sqlalchemy as sa

    from tableswap.core import locations as loc
    from tableswap.core.records import STAGING, SwapRecord
    from tableswap.journal import Journal
    from tableswap.metastore.client import MetastoreClient
    from tableswap.core.catalog import NewPartition
    from tableswap.ops.janitor.run import run_janitor
    from tableswap.runtime import Runtime

    from tests.benchmarks.bench_references import create_database, create_table

    parts = n // 2
    root = work / "events"
    db, table = "bench", f"events_{n}"
    first, second = "20200101_000000_aaaa", "20200102_000000_bbbb"
    names = [f"dt=d{i:06d}" for i in range(parts)]
    displaced_a = [root / name for name in names]  # Spark's default directories, displaced by the first swap
    displaced_b = [root / "_tableswap" / first / name for name in names]  # the first swap's, displaced by the second
    live = [root / "_tableswap" / second / name for name in names]
    store.write([*displaced_a, *displaced_b, *live])

    with MetastoreClient(uri) as client:
        create_database(client, db, store.location(work / "bench.db"))
        create_table(client, db, table, store.location(root))
        info = client.get_table(db, table)
        client.add_partitions(info, [NewPartition((name[3:],), store.location(d)) for name, d in zip(names, live)], {})

    journal_url = f"sqlite:///{work / 'journal.db'}"
    journal = Journal(journal_url)
    for swap_id, displaced in ((first, displaced_a), (second, displaced_b)):
        journal.begin_swap(SwapRecord(swap_id=swap_id, db_name=db, table_name=table, kind="partitions",
                                      state=STAGING, table_root=loc.normalize(store.location(root)),
                                      started_at="2020-01-01T00:00:00+00:00"))
        journal.commit(swap_id, [(name, store.location(d)) for name, d in zip(names, displaced)])
    with journal.engine.begin() as conn:
        conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = '2020-01-01T00:00:00+00:00'"))

    class CountingRuntime(Runtime):
        def new_catalog(self) -> MetastoreClient:
            made = super().new_catalog()
            _CLIENTS.append(made)  # pooled clients outlive one size's run: the calls are counted as a difference
            return made

    with CountingRuntime.from_options(metastore_uri=uri, journal_url=journal_url) as rt:
        calls_before = sum(c.calls for c in _CLIENTS)
        mark = store.mark()
        began = time.perf_counter()
        report = run_janitor(table=f"{db}.{table}", grace="0s", force_short_grace=True, dry_run=False,
                             batch_size=batch_size, runtime=rt, now=dt.datetime.now(dt.timezone.utc))
        seconds = time.perf_counter() - began
        calls = sum(c.calls for c in _CLIENTS) - calls_before
    requests = store.requests(mark)
    deleted = sum(1 for d in (*displaced_a, *displaced_b) if not store.exists(d))
    return {"displaced": n, "partitions": parts, "seconds": round(seconds, 3),
            "ms_per_dir": round(1000 * seconds / n, 3), "metastore_calls": calls,
            "deleted": deleted, "live_intact": all(store.exists(d) for d in live), "requests": requests,
            "outcomes": report.counts(), "date": dt.date.today().isoformat(),
            "first_refusals": [o.reason for o in report.refused[:3]] + [o.reason for o in report.errors[:3]]}


if __name__ == "__main__":
    sys.exit(main())
