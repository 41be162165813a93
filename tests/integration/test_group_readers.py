"""A Spark reader joining two tables while swap groups publish them (docs/groups.md, "What a reader sees").

The writer publishes several groups over two partitioned tables, each group writing one new generation number
into every row of both tables. A reader on its own SparkSession (a thread of this process: its SparkContext is
the writer's, its catalog caches are its own) queries both tables in one fresh query per read, each
table refreshed first, and records per table the generations it saw. Within one table a read must always see
one generation (each table's flip is one ``alter_partitions``): zero anomalies. Across the tables a read may
see two generations only if it ran during a group's flip window (first flip call to last, timed here around
the real flips): those reads are counted and reported, not asserted away; a read outside every window must see
both tables agree. Then ``read_as_of(..., group_id=)`` of both tables agrees for every committed group.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tableswap import read_as_of, swap_group
from tableswap.ops import group_commit

from ..support.helpers import loop_reader, reads_across_flips, record_flips
from ..support.report import REPORT

pytestmark = pytest.mark.integration

GROUPS = 5
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")


def _generation(spark, gen: int):
    """Rows of generation ``gen`` for every day of ``DAYS`` (every partition of the table replaced)."""
    return spark.range(30 * len(DAYS)).selectExpr(
        "id", f"CAST({gen} AS int) AS gen",
        f"element_at(array({', '.join(repr(d) for d in DAYS)}), CAST(id % {len(DAYS)} AS int) + 1) AS dt")


def _table(spark, db: str, root: Path, name: str) -> str:
    table = f"{db}.{name}"
    spark.sql(f"CREATE TABLE {table} (id bigint, gen int, dt string) USING parquet PARTITIONED BY (dt) "
              f"LOCATION '{(root / name).as_uri()}'")
    _generation(spark, 0).write.insertInto(table)
    return table


def test_a_spark_reader_joining_two_tables_sees_each_table_whole_and_mixes_them_only_during_a_flip_window(
        spark, db, tmp_path, ts_env, monkeypatch):
    orders, customers = _table(spark, db, tmp_path, "orders"), _table(spark, db, tmp_path, "customers")
    batches = {gen: _generation(spark, gen).cache() for gen in range(1, GROUPS + 1)}
    for frame in batches.values():
        frame.count()
    flips = record_flips(monkeypatch, group_commit)  # each table's flip of a group commit

    reader = spark.newSession()  # its own catalog caches, the writer's SparkContext

    def read() -> dict[str, list[int]]:
        for table in (orders, customers):
            reader.catalog.refreshTable(table)
        rows = reader.sql(f"SELECT 'orders' AS t, collect_set(gen) AS gens FROM {orders} UNION ALL "
                          f"SELECT 'customers', collect_set(gen) FROM {customers}").collect()
        return {r.t: sorted(r.gens) for r in rows}

    observations: list[dict] = []
    stop = threading.Event()
    thread = threading.Thread(target=loop_reader, args=(read, stop, observations), daemon=True)
    thread.start()
    results = []
    try:
        while not observations:  # a first read before the first group
            assert thread.is_alive()
            stop.wait(0.1)
        for gen, frame in batches.items():
            with swap_group(f"gen-{gen}") as g:
                g.swap_partitions(frame, orders)
                g.swap_partitions(frame, customers)
            results.append(g.result)
        last_flip_end = flips[-1][1]
        while not any(o["t"] > last_flip_end for o in observations):  # a read after the last group's flips
            assert thread.is_alive()
            stop.wait(0.1)
    finally:
        stop.set()
        thread.join(timeout=120)

    assert len(flips) == 2 * GROUPS
    windows = [(flips[i][0], flips[i + 1][1]) for i in range(0, len(flips), 2)]  # first flip call to last, per group
    errors = [o["error"] for o in observations if "error" in o]
    assert errors == []
    inside_one_table = [o for o in observations if any(len(gens) != 1 for gens in o["parts"].values())]
    assert inside_one_table == []
    mixed = [o for o in observations if o["parts"]["orders"] != o["parts"]["customers"]]
    during = [o for o in mixed if any(o["t"] < w1 and o["t_end"] > w0 for w0, w1 in windows)]
    assert mixed == during, [(o, windows) for o in mixed if o not in during]  # mixed only across a flip window
    # Not vacuous: the reader read before and after every group's flips, and saw the generations go by.
    overlap = reads_across_flips(observations, windows)
    assert overlap["unwatched"] == [], overlap
    assert observations[0]["parts"] == {"orders": [0], "customers": [0]}
    assert {o["parts"]["orders"][0] for o in observations} >= {0, GROUPS}
    REPORT.append({"campaign": "concurrent readers", "case": "swap groups over two tables, a Spark reader joining them",
                   "trials": f"{GROUPS} groups, {len(observations)} reads",
                   "result": "0 anomalies inside a table",
                   "details": f"{len(mixed)} cross-table mixed read(s), all during a flip window; reads in flight "
                              f"across {overlap['in_flight']} of {GROUPS} windows; flip windows "
                              + ", ".join(f"{(w1 - w0) * 1000:.0f} ms" for w0, w1 in windows)})

    # Pinned to a committed group, both tables always agree.
    for gen, result in enumerate(results, start=1):
        assert result.flip_seconds > 0
        for table in (orders, customers):
            gens = {r.gen for r in read_as_of(spark, table, group_id=result.group_id).select("gen").distinct().collect()}
            assert gens == {gen}, (table, result.group_id, gens)
