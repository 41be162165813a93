"""A writer process for the crash campaign: one swap_partitions of a deterministic batch.

Run with TABLESWAP_CRASH_AT=<point> to make it SIGKILL itself at that step.
"""

from __future__ import annotations

import argparse


def batch(spark, batch_id: int, days: list[str]):
    rows = [(i, f"v{i}", f"b{batch_id}", d) for d in days for i in range(10 + batch_id)]
    return spark.createDataFrame(rows, "id bigint, value string, batch string, dt string")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--days", required=True)
    ap.add_argument("--warehouse", required=True)
    args = ap.parse_args()

    from tests.campaign import child_spark

    from tableswap import swap_partitions

    spark = child_spark(args.uri, args.warehouse, "tableswap-crash-writer")
    print(swap_partitions(batch(spark, args.batch, args.days.split(",")), args.table).summary(), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
