"""The concurrent-reader machinery shared by the campaign (tests/campaign/test_readers_writers.py: 50 swaps,
tableswap against Spark's dynamic partition overwrite) and the default run's reader test
(tests/integration/test_spark_readers.py): a table whose every (partition, batch) has its own row count and checksum,
and a separate Spark process (tests/campaign/reader.py) querying it in a loop while writes run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

PARTS = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]
REPO = Path(__file__).resolve().parents[2]


def rows_of(batch: int) -> int:
    return 200 + (batch % 7) * 37


def batch_frame(spark, batch: int, parts=PARTS):
    """Rows of ``batch`` for ``parts``; chk values make each (partition, batch) checksum unique."""
    n = rows_of(batch)
    return spark.range(n * len(parts)).selectExpr(
        "id", f"CAST({batch} AS string) AS batch",
        f"element_at(array({', '.join(repr(p) for p in parts)}), CAST(id % {len(parts)} AS int) + 1) AS dt",
        f"CAST({batch} * 1000003 + id AS bigint) AS chk",
    ).selectExpr("id", "batch", "chk", "dt")


def valid_reads(batches: range) -> dict[str, set[tuple[int, int]]]:
    """Per partition, the (row count, checksum) of each batch of ``batches`` (computed as
    :func:`batch_frame` lays rows out): what a reader may see of it."""
    valid: dict[str, set[tuple[int, int]]] = {p: set() for p in PARTS}
    for b in batches:
        ids = range(rows_of(b) * len(PARTS))
        for k, p in enumerate(PARTS):
            mine = [b * 1000003 + i for i in ids if i % len(PARTS) == k]
            valid[p].add((len(mine), sum(mine)))
    return valid


def create_table(spark, db, root: Path, name: str) -> str:
    """``db.name`` (a datasource table partitioned by dt, at ``root/name``) holding batch 0."""
    table = f"{db}.{name}"
    spark.sql(f"CREATE TABLE {table} (id bigint, batch string, chk bigint, dt string) USING parquet "
              f"PARTITIONED BY (dt) LOCATION '{(root / name).as_uri()}'")
    batch_frame(spark, 0).write.insertInto(table)
    return table


def run_with_reader(metastore_uri: str, table: str, tmp_path: Path, write_once: Callable[[int], object],
                    writes: int) -> tuple[list[dict], float]:
    """Start the reader process, wait for its first read, call ``write_once(b)`` for b = 1..writes while it
    reads, let it read 2 s more, stop it. Its observations (``t`` and ``t_end``: when each read started and
    ended, wall clock) and the seconds the writes took."""
    out, stop = tmp_path / f"{table}.jsonl", tmp_path / f"{table}.stop"
    reader = subprocess.Popen([sys.executable, "-m", "tests.campaign.reader", "--uri", metastore_uri, "--table", table,
                               "--out", str(out), "--stop-file", str(stop), "--warehouse", str(tmp_path / "rw")],
                              cwd=REPO)
    try:
        deadline = time.time() + 180
        while len(out.read_text().splitlines() if out.exists() else []) < 2:  # ready, then a first read
            assert reader.poll() is None and time.time() < deadline, "reader did not start"
            time.sleep(0.2)
        started = time.time()
        for b in range(1, writes + 1):
            write_once(b)
        elapsed = time.time() - started
        time.sleep(2)
    finally:
        stop.touch()
        reader.wait(timeout=120)
    return [json.loads(line) for line in out.read_text().splitlines()[1:]], elapsed
