"""A writer process that runs a swap's catalog steps without Spark: the journal's intent, the batch's temporary
table, tableswap's commit protocol (lock, intent, flip, commit) and the temporary table's drop, against any
catalog tableswap speaks (``--metastore-uri``: a Hive Metastore's ``thrift://...`` or ``glue://REGION``, the
default). The tests that kill a writer at each step use it (tests/integration/test_glue_processes.py, tests/integration/test_admin_cli.py,
tests/integration/test_s3a_swaps.py): it starts in a second where a Spark process takes ten to twenty, and what those tests
check (what ``recover`` finds and does) comes from these steps. A Spark writer killed at each step is
tests/integration/test_crash_every_step.py's subject.

The batch's files are in the swap's fresh staging directory under the table's root
(``<root>/_tableswap/<swap id>/<column>=<value>/``, as a Spark write leaves them): written by the caller
(``--data-written``: the test's own SparkSession wrote real Parquet there), or here, one small file per partition.

It crashes where it is told to: ``TABLESWAP_CRASH_AT=<point>`` (tableswap.faults: SIGKILL at that point), or, on
Glue, ``--kill-after-call OPERATION`` (SIGKILL right after the first response of that Glue call: between two chunks
of a flip). Prints ``committed <swap_id> <seconds from asking for the lock to the journal commit>`` when it
committed.

    python -m tests.support.protocol_writer --db DB --root file:///... --swap-id ID --days d1,d2 --journal-url URL
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--table", default="events")
    parser.add_argument("--partition-column", default="dt")
    parser.add_argument("--root", required=True, help="the table's root (file:///..., s3a://...)")
    parser.add_argument("--swap-id", required=True)
    parser.add_argument("--days", required=True, help="the batch's partition values, comma-separated")
    parser.add_argument("--data-written", action="store_true",
                        help="the caller wrote the batch's files into the staging directory")
    parser.add_argument("--journal-url", required=True)
    parser.add_argument("--metastore-uri", default=None, help="default: glue://REGION")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--kill-after-call", default=None, help="Glue only: an operation's name")
    parser.add_argument("--heartbeat-s", type=float, default=1.0,
                        help="the table lock's and the journal record's heartbeat interval (a Glue lease lasts 3)")
    parser.add_argument("--hold-s", type=float, default=0.0, help="sleep this long under the lease (contention)")
    args = parser.parse_args(argv)

    from tableswap.config import resolve
    from tableswap.core import locations as loc
    from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_FOR_PARAM, PartitionInfo
    from tableswap.core.names import temp_table_name
    from tableswap.core.plan import WrittenPartitions
    from tableswap.core.records import SwapKind
    from tableswap.faults import crash_point
    from tableswap.ops import commit as commit_module
    from tableswap.ops.operation import Operation, begin
    from tableswap.runtime import Runtime

    days = args.days.split(",")
    staging = loc.staging_location(args.root, args.swap_id)
    column = args.partition_column
    if not args.data_written:
        local = Path(staging.removeprefix("file://"))
        for d in days:
            (local / f"{column}={d}").mkdir(parents=True, exist_ok=True)
            (local / f"{column}={d}" / "part-00000.parquet").write_text(f"{args.swap_id} {d}\n")
    written = WrittenPartitions(args.swap_id, args.db, args.table, tuple(
        PartitionInfo((d,), loc.join(staging, f"{column}={d}"), {"numFiles": "1"}) for d in days))
    settings = resolve(metastore_uri=args.metastore_uri or f"glue://{args.region}", journal_url=args.journal_url,
                       heartbeat_s=args.heartbeat_s, lock_timeout_s=60)
    temp = temp_table_name(args.table, args.swap_id)
    with Runtime(settings) as rt, rt.catalog() as client:
        table = client.get_table(args.db, args.table)
        op = Operation(SwapKind.PARTITIONS, args.swap_id, args.db, args.table, args.root, written,
                       staging_location=staging, temp_table=temp)
        begin(rt.journal, op, heartbeat_s=rt.settings.heartbeat_s)
        # As a swap from Spark: the temporary table marks the staged batch (what recover and the janitor find
        # after a crash), then the crash point after the staging write.
        created = client.create_staging_table(table, temp, staging, {TEMP_FOR_PARAM: table.qualified_name,
                                                                     SWAP_ID_PARAM: args.swap_id})
        crash_point("after_staging_write")
        if args.kill_after_call:
            client._glue.meta.events.register(f"after-call.glue.{args.kill_after_call}",
                                              lambda **_: os.kill(os.getpid(), signal.SIGKILL))
        if args.hold_s:
            real_flip = commit_module.flip

            def slow_flip(*a, **kw):  # hold the lease a while, as a long flip would
                time.sleep(args.hold_s)
                return real_flip(*a, **kw)
            commit_module.flip = slow_flip
        start = time.monotonic()
        commit_module.commit(rt, table, op, catalog=client)
        crash_point("during_temp_drop")
        client.drop_table_keep_data(args.db, temp, created=created)
        rt.journal.finish(args.swap_id)
    print(f"committed {args.swap_id} {time.monotonic() - start:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
