"""Benchmark: the janitor's reference index kept from the notification log, against a full scan, in a big metastore.

    python -m tests.benchmarks.bench_janitor_log --partitions 200000           # HMS 3.1.3 on PostgreSQL
    python -m tests.benchmarks.bench_janitor_log --partitions 1000000 --tables 1000

A Hive Metastore with its notification log (DbNotificationListener: 3.1.3, the release the development metastore
installs it for) on a fresh PostgreSQL database is filled with ``--partitions`` partitions over ``--tables``
tables (``add_partitions`` in batches of 1,000 straight through the metastore client; nothing on disk), and one
cleaned table of ``--displaced`` partitions. Then, each in a ``tableswap janitor run`` process of its own, each
deleting ``--displaced`` displaced directories queued for it:

1. a first run: a full scan, which stores the index;
2. ``--changes`` partitions of the other tables repointed (one event each), then a run from the index;
3. the index deleted, the same work: a full scan again (what every run cost before the index).

Printed: each run's seconds, peak RSS, events applied and partitions read, and the load average (the machine is
shared). Nothing asserted: figures go into docs/benchmarks.md with their date, machine and load average.
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

from tests.benchmarks.bench_references import PAGE, create_database, create_table

RELEASE = "3.1.3"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200_000, help="partitions of the other tables, in all")
    ap.add_argument("--tables", type=int, default=200, help="other tables")
    ap.add_argument("--changes", type=int, default=1_000, help="partitions repointed between runs 1 and 2")
    ap.add_argument("--displaced", type=int, default=200, help="displaced directories each run deletes")
    args = ap.parse_args(argv)

    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe
    from tests.support import pg_metastore

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-log-"))
    with pg_metastore.fresh_database("tswap_bench_log", RELEASE) as database:
        ms = DevMetastore(state_dir=work / "hms", db=database.spec(), hive_version=RELEASE)
        print(f"metastore {RELEASE} on PostgreSQL: starting in {work / 'hms'} ...", flush=True)
        ms.start(probe=probe)
        try:
            began = time.perf_counter()
            tables = fill(ms.uri, work / "others", args.tables, args.partitions)
            print(f"built {args.partitions:,} partitions over {args.tables} tables in "
                  f"{time.perf_counter() - began:.0f} s", flush=True)
            bench = Cleaned(ms.uri, work / "cleaned", args.displaced)
            rows = [bench.run("1: full scan (builds the index)")]
            began = time.perf_counter()
            repoint(ms.uri, work / "others", tables, args.changes)
            print(f"repointed {args.changes} partitions in {time.perf_counter() - began:.0f} s", flush=True)
            rows.append(bench.run(f"2: index, after {args.changes:,} changes"))
            bench.clear_index()
            rows.append(bench.run("3: full scan (index deleted)"))
        finally:
            ms.stop()
    print(f"\n{dt.date.today().isoformat()}, {os.cpu_count()} cores, load average {os.getloadavg()}")
    print("| run | source | events applied | partitions read | seconds | peak RSS MB | deleted |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['source']} | {r['events']:,} | {r['partitions_read']:,} | {r['seconds']:.2f} | "
              f"{r['peak_rss_mb']:.0f} | {r['deleted']} |")
    return 0 if all(r["deleted"] == args.displaced for r in rows) else 1


def fill(uri: str, work: Path, tables: int, partitions: int) -> list[tuple[str, str]]:
    from tableswap.core.catalog import NewPartition
    from tableswap.metastore.client import MetastoreClient

    per = partitions // tables
    made: list[tuple[str, str]] = []
    with MetastoreClient(uri, timeout_s=600) as client:
        create_database(client, "other", f"file://{work}/other.db")
        for t in range(tables):
            info = create_table(client, "other", f"t{t}", f"file://{work}/t{t}")
            news = [NewPartition((f"d{i:07d}",), f"file://{work}/custom/t{t}/p{i}") for i in range(per)]
            for start in range(0, len(news), PAGE):
                client.add_partitions(info, news[start:start + PAGE], {})
            made.append(("other", f"t{t}"))
            if (t + 1) % 50 == 0:
                print(f"  {t + 1}/{tables} tables", flush=True)
    return made


def repoint(uri: str, work: Path, tables: list[tuple[str, str]], changes: int) -> None:
    """``changes`` partitions of the first table(s) pointed elsewhere: one ALTER_PARTITION event each."""
    from tableswap.core.catalog import LocationChange
    from tableswap.metastore.client import MetastoreClient

    with MetastoreClient(uri, timeout_s=600) as client:
        left = changes
        for db, table in tables:
            info = client.get_table(db, table)
            names = client.partition_names(db, table)[:left]
            moves = [LocationChange((n[3:],), f"file://{work}/custom/{table}/p{int(n[4:])}",
                                    f"file://{work}/moved/{table}/{n}") for n in names]
            for start in range(0, len(moves), PAGE):
                client.alter_partition_locations(info, moves[start:start + PAGE], {})
            left -= len(moves)
            if left <= 0:
                return


class Cleaned:
    """The cleaned table: ``displaced`` partitions; each :meth:`run` queues ``displaced`` new displaced
    directories (one swap recorded in the journal) and runs the janitor in a process of its own."""

    def __init__(self, uri: str, work: Path, displaced: int) -> None:
        from tableswap.core.catalog import NewPartition
        from tableswap.journal import Journal
        from tableswap.metastore.client import MetastoreClient

        self.uri, self.work, self.displaced = uri, work, displaced
        self.root = work / "events"
        self.names = [f"dt=d{i:06d}" for i in range(displaced)]
        self.journal_url = f"sqlite:///{work / 'journal.db'}"
        work.mkdir(parents=True)
        self.journal = Journal(self.journal_url)
        with MetastoreClient(uri, timeout_s=600) as client:
            create_database(client, "bench", f"file://{work}/bench.db")
            info = create_table(client, "bench", "events", f"file://{self.root}")
            client.add_partitions(info, [NewPartition((n[3:],), f"file://{self.root}/live/{n}") for n in self.names],
                                  {})
        for n in self.names:
            (self.root / "live" / n).mkdir(parents=True, exist_ok=True)  # the metastore may have made it
        self.runs = 0

    def queue(self) -> list[Path]:
        import sqlalchemy as sa

        from tableswap.core import locations as loc
        from tableswap.core.records import STAGING, SwapRecord

        self.runs += 1
        swap_id = f"2020010{self.runs}_000000_aaaa"
        old = [self.root / f"old{self.runs}" / n for n in self.names]
        for d in old:
            d.mkdir(parents=True)
            (d / "part-00000.parquet").write_bytes(b"x" * 64)
        self.journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="bench", table_name="events", kind="partitions",
                                           state=STAGING, table_root=loc.normalize(f"file://{self.root}"),
                                           started_at="2020-01-01T00:00:00+00:00"))
        self.journal.commit(swap_id, [(n, f"file://{d}") for n, d in zip(self.names, old)])
        with self.journal.engine.begin() as conn:
            conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = '2020-01-01T00:00:00+00:00'"))
        return old

    def clear_index(self) -> None:
        from tableswap.journal.refindex import ReferenceIndexStore

        ReferenceIndexStore(self.journal, f"metastore {self.uri}").clear()

    def run(self, label: str) -> dict:
        old = self.queue()
        env = {**os.environ, "TABLESWAP_METASTORE_URI": self.uri, "TABLESWAP_JOURNAL_URL": self.journal_url}
        began = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "tableswap", "janitor", "run", "--table", "bench.events",
                                 "--grace", "0s", "--force-short-grace", "--json"],
                                env=env, stdout=subprocess.PIPE, text=True)
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - began
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"janitor failed: {out[-2000:]}")
        report = json.loads(out)
        read = report.get("references_read", {})
        row = {"run": label, "source": report.get("reference_source"), "events": read.get("events", 0),
               "partitions_read": read.get("partitions", 0), "seconds": round(seconds, 2),
               "peak_rss_mb": usage.ru_maxrss / 1024, "deleted": sum(1 for d in old if not d.exists()),
               "reason": report.get("full_scan_reason"), "load": os.getloadavg()[0]}
        print(row, flush=True)
        return row


if __name__ == "__main__":
    sys.exit(main())
