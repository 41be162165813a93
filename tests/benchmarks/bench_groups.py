"""What a swap group costs: a group of N tables × K partitions against the same N tables swapped one after
the other, alternating, and the group's flip window (docs/groups.md, docs/benchmarks.md). Prints figures and
asserts none.

    python -m tests.benchmarks.bench_groups                              # 10 tables × 20 partitions, 3 runs each
    python -m tests.benchmarks.bench_groups --hive-version 4.0.1 --metastore-db postgresql
    python -m tests.benchmarks.bench_groups --tables 5 --runs 5 --steps  # and where each run's time goes

``--metastore-db postgresql``: a fresh database on ``$TABLESWAP_TEST_POSTGRES`` (the suite's PostgreSQL-backed
metastore, tests/support/pg_metastore.py: for a standalone release a copy of its schema template), dropped
afterwards. Every run swaps fresh tables (each holding the K partitions, every one replaced), so that no run
pays for the history of another; one untimed warm-up of each kind first. ``--steps`` adds the seconds per run
spent in each step of the stage and the publish (the functions timed are listed in ``STEPS``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import json
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

#: The steps ``--steps`` times: (label, module, function). Nested steps count in their parent's time too.
STEPS = (
    ("staging write (Spark)", "tableswap.spark.staging", "write"),
    ("listing of a staging directory", "tableswap.storage", "survey"),
    ("temporary table's partitions registered", "tableswap.ops.write.staged", "register_partitions"),
    ("journaled as staged", "tableswap.ops.write.staged", "pause"),
    ("publish rebuilt from the journal", "tableswap.ops.write.staged", "publish_operation"),
    ("locks, plans, intents, flips, commit", "tableswap.ops.group_commit", "commit_group"),
    ("single swap: lock .. commit", "tableswap.ops.write.swap", "commit"),
    ("temporary table dropped, cache refreshed", "tableswap.ops.write.finish", "finish_committed"),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--rows", type=int, default=100, help="rows per partition")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each kind, alternating")
    ap.add_argument("--hive-version", default=None, help="a standalone metastore release (e.g. 4.0.1)")
    ap.add_argument("--metastore-db", default="derby", choices=("derby", "postgresql"))
    ap.add_argument("--steps", action="store_true", help="also time each step (STEPS) per run")
    ap.add_argument("--flip-calls", action="store_true",
                    help="also time the metastore calls made inside each group's flip window, by call")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    from tableswap import swap_group, swap_partitions
    from tableswap.devmetastore import DevMetastore
    from tableswap.metastore.client import probe

    work = Path(tempfile.mkdtemp(prefix="tableswap-bench-groups-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        db_spec = None
        if args.metastore_db == "postgresql":
            from tests.support import pg_metastore

            db_spec = stack.enter_context(pg_metastore.fresh_database("tswap_bench", args.hive_version)).spec()
        ms = DevMetastore(state_dir=work / "hms", db=db_spec, hive_version=args.hive_version)
        if args.hive_version and db_spec is None:
            from tests.support import schema_templates

            schema_templates.prepare_derby(ms)
        uri = ms.start(probe=probe).uri
        stack.callback(ms.stop)
        os.environ["TABLESWAP_METASTORE_URI"] = uri
        os.environ["TABLESWAP_JOURNAL_URL"] = f"sqlite:///{work / 'journal.db'}"
        builder = SparkSession.builder
        if args.hive_version:  # Spark's built-in Hive 2.3 client cannot talk to a 4.x server
            from tableswap.devmetastore.releases import spark_client_conf

            for key, value in spark_client_conf(args.hive_version).items():
                builder = builder.config(key, value)
        spark = (builder.master("local[2]").appName("tableswap-bench-groups")
                 .config("spark.hadoop.hive.metastore.uris", uri).config("spark.sql.warehouse.dir", str(work / "wh"))
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .enableHiveSupport().getOrCreate())
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        spark.sql("CREATE DATABASE bench")
        k, n = args.partitions, args.tables
        batch = spark.range(k * args.rows).selectExpr(
            "id", "CAST(id * 7 AS string) AS v", f"concat('2026-01-', lpad(CAST(id % {k} + 1 AS string), 2, '0')) AS dt"
        ).cache()
        batch.count()
        counter = [0]

        def new_tables() -> list[str]:
            names = []
            for _ in range(n):
                counter[0] += 1
                name = f"bench.t{counter[0]}"
                spark.sql(f"CREATE TABLE {name} (id bigint, v string, dt string) USING parquet PARTITIONED BY (dt) "
                          f"LOCATION '{(work / 'tables' / str(counter[0])).as_uri()}'")
                batch.write.insertInto(name)
                names.append(name)
            return names

        steps = _StepTimer() if args.steps else None
        flip_calls = _FlipCalls() if args.flip_calls else None

        def run_group(tables: list[str]) -> tuple[float, float]:
            start = time.perf_counter()
            with swap_group() as g:
                for t in tables:
                    g.swap_partitions(batch, t)
            assert g.result is not None
            return time.perf_counter() - start, g.result.flip_seconds

        def run_separate(tables: list[str]) -> float:
            start = time.perf_counter()
            for t in tables:
                swap_partitions(batch, t)
            return time.perf_counter() - start

        run_group(new_tables())  # warm-up, untimed: both code paths, JIT and metastore caches
        run_separate(new_tables())
        group_s: list[float] = []
        flip_s: list[float] = []
        separate_s: list[float] = []
        step_s: dict[str, dict[str, list[float]]] = {"group": defaultdict(list), "separate": defaultdict(list)}
        load = []
        for run in range(args.runs):
            for kind in (("group", "separate") if run % 2 == 0 else ("separate", "group")):
                tables = new_tables()
                load.append(os.getloadavg()[0])
                with (steps.measure(step_s[kind]) if steps else contextlib.nullcontext()):
                    if kind == "group":
                        whole, flip = run_group(tables)
                        group_s.append(whole)
                        flip_s.append(flip)
                    else:
                        separate_s.append(run_separate(tables))
        figures = {
            "date": time.strftime("%Y-%m-%d"), "metastore": f"HMS {args.hive_version or '2.3'}",
            "metastore_db": args.metastore_db, "tables": n, "partitions": k, "rows_per_partition": args.rows,
            "runs": args.runs, "group_s": group_s, "separate_s": separate_s, "flip_s": flip_s,
            "ratio_median": statistics.median(group_s) / statistics.median(separate_s),
            "load_average_1m": [round(x, 2) for x in load], "cpus": os.cpu_count(),
        }
        if flip_calls:
            figures["flip_calls"] = flip_calls.summary(len(group_s) + 1)
        if steps:
            figures["steps_median_s"] = {kind: {label: statistics.median(v) for label, v in per.items()}
                                         for kind, per in step_s.items()}
        _print(figures)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


class _StepTimer:
    """Wraps the functions of ``STEPS`` (where they are looked up) to add their wall time to a run's figures."""

    def __init__(self) -> None:
        self.current: dict[str, float] | None = None
        for label, module_name, name in STEPS:
            self._wrap(label, name, module_name)

    def _wrap(self, label: str, name: str, module_name: str) -> None:
        real = getattr(importlib.import_module(module_name), name)
        timer = self

        def timed(*a, **kw):
            start = time.perf_counter()
            try:
                return real(*a, **kw)
            finally:
                if timer.current is not None:
                    timer.current[label] = timer.current.get(label, 0.0) + time.perf_counter() - start

        # Every module that imported the function by name calls it through its own attribute.
        for module in [m for m in list(sys.modules.values()) if m and m.__name__.startswith("tableswap")]:
            if getattr(module, name, None) is real:
                setattr(module, name, timed)

    @contextlib.contextmanager
    def measure(self, into: dict[str, list[float]]):
        self.current = {}
        try:
            yield
        finally:
            for label, _, _ in STEPS:
                into[label].append(self.current.get(label, 0.0))
            self.current = None


class _FlipCalls:
    """The metastore calls inside each group's flip window (from its first flip call to the end of its last),
    by call: count and seconds, from the client's side."""

    def __init__(self) -> None:
        from tableswap.metastore.client import MetastoreClient
        from tableswap.ops import group_commit

        self.calls: list[tuple[str, float, float]] = []  # (call, start, end)
        self.flips: list[tuple[float, float]] = []
        real_flip = group_commit.flip

        def flip(*a, **kw):
            start = time.perf_counter()
            try:
                return real_flip(*a, **kw)
            finally:
                self.flips.append((start, time.perf_counter()))

        group_commit.flip = flip  # type: ignore[assignment]
        for name in ("read", "write"):
            real = getattr(MetastoreClient, name)

            def timed(client, what, *a, _real=real, **kw):
                start = time.perf_counter()
                try:
                    return _real(client, what, *a, **kw)
                finally:
                    self.calls.append((what.split("(")[0], start, time.perf_counter()))
            setattr(MetastoreClient, name, timed)

    def summary(self, groups: int) -> dict[str, list[float]]:
        """Per call: [count, seconds] per group, inside the flip windows (consecutive flips < 0.5 s apart form one
        window)."""
        windows: list[list[float]] = []
        for start, end in self.flips:
            if windows and start - windows[-1][1] < 0.5:
                windows[-1][1] = end
            else:
                windows.append([start, end])
        out: dict[str, list[float]] = {}
        for what, start, end in self.calls:
            if any(w0 <= start and end <= w1 for w0, w1 in windows):
                entry = out.setdefault(what, [0, 0.0])
                entry[0] += 1
                entry[1] += end - start
        return {what: [n / groups, secs / groups] for what, (n, secs) in out.items()}


def _print(f: dict) -> None:
    def span(values: list[float]) -> str:
        return f"{min(values):.2f}–{max(values):.2f} s (median {statistics.median(values):.2f})"

    print(f"\n{f['tables']} tables × {f['partitions']} partitions, {f['runs']} runs each, alternating · "
          f"{f['metastore']} on {f['metastore_db']} · {f['date']} · load average (1 min) "
          f"{min(f['load_average_1m']):.2f}–{max(f['load_average_1m']):.2f} on {f['cpus']} cores")
    print(f"group:            {span(f['group_s'])}   runs: {', '.join(f'{x:.2f}' for x in f['group_s'])}")
    print(f"separate swaps:   {span(f['separate_s'])}   runs: {', '.join(f'{x:.2f}' for x in f['separate_s'])}")
    print(f"group / separate: {f['ratio_median']:.2f}x (medians)")
    print(f"flip window:      {', '.join(f'{x * 1000:.0f} ms' for x in f['flip_s'])}")
    if "flip_calls" in f:
        print("inside the flip window, per group (calls, s): " + ", ".join(
            f"{what} {n:g} {secs:.3f}" for what, (n, secs) in sorted(f["flip_calls"].items(), key=lambda kv: -kv[1][1])))
    for kind, per in f.get("steps_median_s", {}).items():
        print(f"steps, {kind} (median s per run): " + ", ".join(f"{label} {v:.2f}" for label, v in per.items() if v))


if __name__ == "__main__":
    raise SystemExit(main())
