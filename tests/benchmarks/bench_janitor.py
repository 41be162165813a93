"""Benchmark: a janitor run against the number of displaced directories (docs/janitor.md, cost model).

    python -m tests.benchmarks.bench_janitor                       # 1,000 / 4,000 / 16,000 directories
    python -m tests.benchmarks.bench_janitor --sizes 1000,4000 --batch-size 100

For each size N, on one development metastore (Hive 2.3 from the pyspark wheel, Derby) and a SQLite journal:
a partitioned EXTERNAL table with N/2 partitions on local files, each partition displaced twice as two
committed swaps would have left it (Spark's default directory, then the first swap's directory; the second
swap's is live), so N displaced directories with one small file each, queued in the journal long ago.
Then one timed ``run_janitor(grace=0, dry_run=False)`` deletes them all (in batches, each under the
table lock). Reported: seconds, milliseconds per directory, metastore calls (the run's own clients, lock
heartbeats included) and that every displaced directory is gone and every live one still there.

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
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)

    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-janitor-"))
    ms = DevMetastore(state_dir=work / "hms")
    print(f"metastore: starting in {work / 'hms'} ...", flush=True)
    ms.start(probe=probe)
    rows = []
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(run_one(ms.uri, work / f"n{n}", n, args.batch_size))
            r = rows[-1]
            print(f"{r['displaced']:>6} displaced dirs, {r['partitions']:>5} partitions: {r['seconds']:8.2f} s  "
                  f"{r['ms_per_dir']:6.2f} ms/dir  {r['metastore_calls']:>6} metastore calls  "
                  f"(deleted {r['deleted']}, live intact: {r['live_intact']}, outcomes {r['outcomes']})", flush=True)
    finally:
        ms.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    print("\n| displaced directories | partitions | seconds | ms per directory | metastore calls |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['displaced']:,} | {r['partitions']:,} | {r['seconds']:.2f} | {r['ms_per_dir']:.2f} | "
              f"{r['metastore_calls']:,} |")
    return 0 if all(r["live_intact"] and r["deleted"] == r["displaced"] for r in rows) else 1


_CLIENTS: list = []


def _uri(path: Path) -> str:
    """``file://`` + the path as is, as Spark writes locations (``Path.as_uri`` would quote ``=``)."""
    return f"file://{path}"


def run_one(uri: str, work: Path, n: int, batch_size: int) -> dict:
    import sqlalchemy as sa
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    from tableswap.core import locations as loc
    from tableswap.core.records import STAGING, SwapRecord
    from tableswap.journal import Journal
    from tableswap.metastore.client import MetastoreClient
    from tableswap.metastore.model import NewPartition
    from tableswap.ops.janitor import run_janitor
    from tableswap.runtime import Runtime

    parts = n // 2
    root = work / "events"
    db, table = "bench", f"events_{n}"
    first, second = "20200101_000000_aaaa", "20200102_000000_bbbb"
    names = [f"dt=d{i:06d}" for i in range(parts)]
    displaced_a = [root / name for name in names]  # Spark's default directories, displaced by the first swap
    displaced_b = [root / "_tableswap" / first / name for name in names]  # the first swap's, displaced by the second
    live = [root / "_tableswap" / second / name for name in names]
    for directory in (*displaced_a, *displaced_b, *live):
        directory.mkdir(parents=True)
        (directory / "part-00000.parquet").write_bytes(b"x" * 64)

    with MetastoreClient(uri) as client:
        try:
            client.write("create_database", lambda c: c.create_database(
                tt.Database(name=db, locationUri=_uri(work / "bench.db"), parameters={})))
        except Exception:  # noqa: BLE001 - exists from an earlier size
            pass
        sd = tt.StorageDescriptor(
            cols=[tt.FieldSchema("id", "bigint", None)], location=_uri(root),
            inputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
            outputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
            serdeInfo=tt.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                                   parameters={}),
            compressed=False, numBuckets=-1, bucketCols=[], sortCols=[], parameters={})
        client.write("create_table", lambda c: c.create_table(tt.Table(
            tableName=table, dbName=db, owner="bench", sd=sd, partitionKeys=[tt.FieldSchema("dt", "string", None)],
            parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE")))
        info = client.get_table(db, table)
        client.add_partitions(info, [NewPartition((name[3:],), _uri(d)) for name, d in zip(names, live)], {})

    journal_url = f"sqlite:///{work / 'journal.db'}"
    journal = Journal(journal_url)
    for swap_id, displaced in ((first, displaced_a), (second, displaced_b)):
        journal.begin_swap(SwapRecord(swap_id=swap_id, db_name=db, table_name=table, kind="partitions",
                                      state=STAGING, table_root=loc.normalize(_uri(root)),
                                      started_at="2020-01-01T00:00:00+00:00"))
        journal.commit(swap_id, [(name, _uri(d)) for name, d in zip(names, displaced)])
    with journal.engine.begin() as conn:
        conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = '2020-01-01T00:00:00+00:00'"))

    class CountingRuntime(Runtime):
        def new_client(self) -> MetastoreClient:
            made = super().new_client()
            _CLIENTS.append(made)  # pooled clients outlive one size's run: the calls are counted as a difference
            return made

    with CountingRuntime.from_options(metastore_uri=uri, journal_url=journal_url) as rt:
        calls_before = sum(c.calls for c in _CLIENTS)
        began = time.perf_counter()
        report = run_janitor(table=f"{db}.{table}", grace="0s", force_short_grace=True, dry_run=False,
                             batch_size=batch_size, runtime=rt, now=dt.datetime.now(dt.timezone.utc))
        seconds = time.perf_counter() - began
        calls = sum(c.calls for c in _CLIENTS) - calls_before
    deleted = sum(1 for d in (*displaced_a, *displaced_b) if not d.exists())
    return {"displaced": n, "partitions": parts, "seconds": round(seconds, 3),
            "ms_per_dir": round(1000 * seconds / n, 3), "metastore_calls": calls,
            "deleted": deleted, "live_intact": all((d / "part-00000.parquet").exists() for d in live),
            "outcomes": report.counts(), "date": dt.date.today().isoformat(),
            "first_refusals": [o.reason for o in report.refused[:3]] + [o.reason for o in report.errors[:3]]}


if __name__ == "__main__":
    sys.exit(main())
