"""A reader process for the concurrent-reader campaign.

Queries the table over and over (per-partition row count and checksum) until a stop file appears,
and writes one JSON line per observation: {"t": ..., "t_end": ..., "parts": {dt: [count, checksum]}} or
{"t": ..., "t_end": ..., "error": "..."} (``t``, ``t_end``: when the query started and ended, wall clock).
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--warehouse", required=True)
    args = ap.parse_args()

    from tests.campaign import child_spark

    spark = child_spark(args.uri, args.warehouse, "tableswap-reader")
    observe(spark, args.table, args.out, args.stop_file)
    spark.stop()


def observe(spark, table: str, out_path: str, stop_file: str) -> None:
    """Append ``{"ready": true}``, then one observation of ``table`` per query to ``out_path`` until
    ``stop_file`` exists (also the peers benchmark's reader, in each worker's own session)."""
    with open(out_path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"ready": True}) + "\n")
        out.flush()
        while not os.path.exists(stop_file):
            t = time.time()
            try:
                rows = spark.sql(f"SELECT dt, count(*) AS n, sum(chk) AS s FROM {table} GROUP BY dt").collect()
                record = {"t": t, "parts": {r["dt"]: [r["n"], r["s"]] for r in rows}}
            except Exception as exc:  # noqa: BLE001 - every failure is an observation
                text = str(exc)
                cause = next((ln.strip() for ln in text.splitlines() if "Exception" in ln and ":" in ln), text)
                record = {"t": t, "error": f"{type(exc).__name__}: {cause[:300]}"}
            record["t_end"] = time.time()
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
