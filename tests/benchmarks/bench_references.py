"""Benchmark: the janitor's read of every reference in the metastore (docs/benchmarks.md#janitor-references).

    python -m tests.benchmarks.bench_references                                  # HMS 2.3 on Derby
    python -m tests.benchmarks.bench_references --hive-version 4.0.1 --db postgresql://postgres@127.0.0.1:5432/bench_refs
    python -m tests.benchmarks.bench_references --tables 200 --partitions 100000 --displaced 200

Two measurements on one development metastore, local files, a SQLite journal, no Spark:

1. **The cleaned table's size.** A table with ``--displaced`` displaced directories queued long ago, and
   either few partitions (``--displaced`` of them) or many (``--big``, default 20,000). One janitor run
   (``tableswap janitor run --grace 0s --force-short-grace``, a process of its own) deletes the same
   displaced set in both; its wall time is reported.
2. **The metastore's size.** ``--tables`` tables in ``--databases`` databases, ``--partitions`` partitions
   in all (each at a custom location outside every cleaned root), are added; then the same janitor run on
   a small table: its wall time, its metastore read (tables and partitions read, from ``--json``) and the
   janitor process's peak RSS.

Figures are printed as a table. The metastore is made through Thrift directly (``add_partitions`` in pages of
1,000).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGE = 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hive-version", default=None, help="metastore release (default: 2.3, the pyspark wheel's)")
    ap.add_argument("--db", default=None, help="the metastore's database URL (default: Derby)")
    ap.add_argument("--displaced", type=int, default=200, help="displaced directories the janitor deletes")
    ap.add_argument("--big", type=int, default=20_000, help="partitions of the big cleaned table")
    ap.add_argument("--tables", type=int, default=200, help="other tables in the metastore (0: measurement 1 only)")
    ap.add_argument("--databases", type=int, default=10, help="databases they are spread over")
    ap.add_argument("--partitions", type=int, default=100_000, help="partitions of the other tables, in all")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)

    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-refs-"))
    ms = DevMetastore(state_dir=work / "hms", db=args.db, hive_version=args.hive_version)
    print(f"metastore {args.hive_version or '2.3'} on {'Derby' if not args.db else args.db.split(':')[0]}: "
          f"starting in {work / 'hms'} ...", flush=True)
    ms.start(probe=probe)
    rows = []
    try:
        for name, parts in (("small", args.displaced), ("big", args.big)):
            rows.append(cleaned_table_run(ms.uri, work / name, name, parts, args.displaced))
            print(_line(rows[-1]), flush=True)
        if args.tables:
            began = time.perf_counter()
            made = fill_metastore(ms.uri, work / "others", args.tables, args.databases, args.partitions)
            print(f"added {made} partitions over {args.tables} tables in {time.perf_counter() - began:.0f} s",
                  flush=True)
            rows.append(cleaned_table_run(ms.uri, work / "small2", "small_in_big_metastore", args.displaced,
                                          args.displaced))
            print(_line(rows[-1]), flush=True)
    finally:
        ms.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    print("\n| run | cleaned table's partitions | displaced | metastore tables read | partitions read | "
          "janitor seconds | janitor peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['partitions']:,} | {r['displaced']:,} | {r['tables_read']:,} | "
              f"{r['partitions_read']:,} | {r['seconds']:.2f} | {r['peak_rss_mb']:.0f} |")
    big, small = rows[1]["seconds"], rows[0]["seconds"]
    print(f"\nbig / small cleaned table: {big / small:.2f}x; date {dt.date.today().isoformat()}")
    return 0 if all(r["deleted"] == r["displaced"] and r["live_intact"] for r in rows) else 1


def _line(r: dict) -> str:
    return (f"{r['run']}: {r['partitions']:,} partitions, {r['displaced']} displaced: {r['seconds']:.2f} s, "
            f"read {r['tables_read']} tables / {r['partitions_read']:,} partitions, peak RSS "
            f"{r['peak_rss_mb']:.0f} MB, deleted {r['deleted']}, live intact {r['live_intact']}")


def create_table(client, db: str, table: str, location: str):
    """An EXTERNAL parquet table partitioned by ``dt``, made through Thrift directly."""
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    sd = tt.StorageDescriptor(
        cols=[tt.FieldSchema("id", "bigint", None)], location=location,
        inputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        serdeInfo=tt.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                               parameters={}),
        compressed=False, numBuckets=-1, bucketCols=[], sortCols=[], parameters={})
    client.write("create_table", lambda c: c.create_table(tt.Table(
        tableName=table, dbName=db, owner="bench", sd=sd, partitionKeys=[tt.FieldSchema("dt", "string", None)],
        parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE")))
    return client.get_table(db, table)


def create_database(client, db: str, location: str) -> None:
    """Database ``db`` unless it exists."""
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    try:
        client.write("create_database", lambda c: c.create_database(
            tt.Database(name=db, locationUri=location, parameters={})))
    except Exception:  # noqa: BLE001 - exists already
        pass


def fill_metastore(uri: str, work: Path, tables: int, databases: int, partitions: int) -> int:
    """``tables`` partitioned tables over ``databases`` databases with ``partitions`` partitions in all,
    at custom locations (nothing on disk: the janitor reads the metastore only)."""
    from tableswap.metastore.client import MetastoreClient
    from tableswap.core.catalog import NewPartition

    per = partitions // tables
    made = 0
    with MetastoreClient(uri, timeout_s=600) as client:
        for d in range(databases):
            create_database(client, f"other{d}", f"file://{work}/other{d}.db")
        for t in range(tables):
            db = f"other{t % databases}"
            info = create_table(client, db, f"t{t}", f"file://{work}/{db}/t{t}")
            news = [NewPartition((f"d{i:06d}",), f"file://{work}/custom/{db}/t{t}/p{i}") for i in range(per)]
            for start in range(0, len(news), PAGE):
                client.add_partitions(info, news[start:start + PAGE], {})
            made += per
            if (t + 1) % 20 == 0:
                print(f"  {t + 1}/{tables} tables", flush=True)
    return made


def cleaned_table_run(uri: str, work: Path, name: str, parts: int, displaced: int) -> dict:
    """A table of ``parts`` partitions, ``displaced`` of them with a displaced directory queued long ago;
    one ``tableswap janitor run`` in a process of its own deletes them."""
    import sqlalchemy as sa

    from tableswap.core import locations as loc
    from tableswap.core.records import STAGING, SwapRecord
    from tableswap.journal import Journal
    from tableswap.metastore.client import MetastoreClient
    from tableswap.core.catalog import NewPartition

    root = work / "events"
    db, table = "bench", f"events_{name}"
    swap_id = "20200101_000000_aaaa"
    names = [f"dt=d{i:06d}" for i in range(parts)]
    live = [root / "_tableswap" / swap_id / n for n in names]
    old = [root / n for n in names[:displaced]]
    for d in (*old, *live[:displaced]):
        d.mkdir(parents=True)
        (d / "part-00000.parquet").write_bytes(b"x" * 64)
    with MetastoreClient(uri, timeout_s=600) as client:
        create_database(client, db, f"file://{work.parent}/bench.db")
        info = create_table(client, db, table, f"file://{root}")
        news = [NewPartition((n[3:],), f"file://{d}") for n, d in zip(names, live)]
        for start in range(0, len(news), PAGE):
            client.add_partitions(info, news[start:start + PAGE], {})
    journal_url = f"sqlite:///{work / 'journal.db'}"
    journal = Journal(journal_url)
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name=db, table_name=table, kind="partitions",
                                  state=STAGING, table_root=loc.normalize(f"file://{root}"),
                                  started_at="2020-01-01T00:00:00+00:00"))
    journal.commit(swap_id, [(n, f"file://{d}") for n, d in zip(names, old)])
    with journal.engine.begin() as conn:
        conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = '2020-01-01T00:00:00+00:00'"))

    env = {**os.environ, "TABLESWAP_METASTORE_URI": uri, "TABLESWAP_JOURNAL_URL": journal_url}
    began = time.perf_counter()
    errors_file = work / "janitor.stderr"
    with errors_file.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "tableswap", "janitor", "run", "--table", f"{db}.{table}",
                                 "--grace", "0s", "--force-short-grace", "--json"],
                                env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"janitor failed ({proc.returncode}): {out[-2000:]} {errors_file.read_text()[-2000:]}")
    report = json.loads(out)
    read = report.get("references_read", {})
    return {"run": name, "partitions": parts, "displaced": displaced, "seconds": round(seconds, 3),
            "peak_rss_mb": usage.ru_maxrss / 1024,
            "tables_read": read.get("tables", 0), "partitions_read": read.get("partitions", 0),
            "deleted": sum(1 for d in old if not d.exists()), "live_intact": all(d.exists() for d in live[:displaced]),
            "date": dt.date.today().isoformat()}


if __name__ == "__main__":
    sys.exit(main())
