"""Trino as a second reader of swapped tables, through the same metastore and the same files.

Every check compares what Trino returns with what Spark returns for the same table at the same moment:
after swaps, rollbacks and recoveries of partitioned tables (Hive format and datasource, escaped values,
the NULL partition) and of unpartitioned ones, and in a loop while swaps run. The server
(tests/support/trino_server.py) has a catalog with Trino's default caching (``hive``: off) and two with the
metastore and file-status caches on (``hive_cached``: a TTL of 10 s, ``hive_cached_long``: an hour).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tableswap import swap_partitions, swap_table
from tableswap.journal.store import Journal
from tableswap.ops.restore.recover import recover
from tableswap.ops.restore.rollback import rollback

from ..support import trino_server as ts
from ..support.helpers import (assert_readers_saw_whole_partitions, batch_df, count_anomalies, create_events, loop_reader,
                      reader_view, reads_across_flips, record_flips)
from ..support.report import REPORT

pytestmark = [pytest.mark.integration, pytest.mark.trino]

#: Partition values that need escaping in a path, and the NULL partition (``__HIVE_DEFAULT_PARTITION__``).
TRICKY = ("2026-01-01", "a b/c", "k=v%", "Zürich", None)


@pytest.fixture
def trino_report():
    """Rows of the guarantee campaign's table (printed at the end of the run)."""
    return REPORT


def trino_view(trino, table: str, partition_cols=("dt",), catalog: str = "hive") -> dict:
    """What Trino sees, in :func:`tests.support.helpers.reader_view`'s shape: per partition, the row count and the
    distinct batches."""
    cols = ", ".join(partition_cols)
    select = f"{cols}, " if cols else ""
    group = f" GROUP BY {cols}" if cols else ""
    rows = trino.query(f"SELECT {select}count(*), array_sort(array_agg(DISTINCT batch)) "
                       f"FROM {catalog}.{table}{group}")
    width = len(partition_cols)
    return {tuple(r[:width]): (r[width], tuple(r[width + 1])) for r in rows if r[width]}


def spark_view(spark, table: str, partition_cols=("dt",)) -> dict:
    if partition_cols:
        return reader_view(spark, table, partition_cols)
    [row] = spark.sql(f"SELECT count(*) AS n, sort_array(collect_set(batch)) AS b FROM {table}").collect()
    return {(): (row["n"], tuple(row["b"]))} if row["n"] else {}


def assert_same_view(spark, trino, table: str, expected: dict, partition_cols=("dt",)) -> None:
    assert spark_view(spark, table, partition_cols) == expected
    assert trino_view(trino, table, partition_cols) == expected


@pytest.mark.parametrize("hive_format", [True, False], ids=["stored-as", "using"])
def test_trino_sees_what_spark_sees_after_swaps_and_rollback(trino_server, spark, db, tmp_path, ts_env,
                                                             hive_format):
    table = create_events(spark, db, tmp_path, hive_format=hive_format)
    batch_df(spark, {(v,): 2 for v in TRICKY[:3]}, "old").write.insertInto(table)
    old = {(v,): (2, ("old",)) for v in TRICKY[:3]}
    assert_same_view(spark, trino_server, table, old)

    swap_partitions(batch_df(spark, {(v,): 3 for v in TRICKY[1:]}, "new"), table)
    new = {**old, **{(v,): (3, ("new",)) for v in TRICKY[1:]}}
    assert_same_view(spark, trino_server, table, new)

    rollback(table)  # the replaced partitions back to their old files; the added ones dropped
    assert_same_view(spark, trino_server, table, old)


def test_trino_sees_what_spark_sees_after_a_recovered_flip(trino_server, spark, db, tmp_path, ts_env):
    """A swap that dies between its two flip calls (the added partitions are in, the replaced ones not yet
    repointed): Trino sees exactly Spark's mixed state, each partition whole; ``recover`` completes it and
    Trino sees the new table."""
    import tableswap.ops.commit as commit_mod

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("2026-01-01",): 2, (None,): 2}, "old").write.insertInto(table)

    def die_after_add(name: str) -> None:
        if name == "after_add":
            raise ConnectionResetError("simulated: the process lost its metastore connection mid-flip")

    from tableswap.errors import CommitStateUnknownError

    with pytest.MonkeyPatch.context() as patch, pytest.raises(CommitStateUnknownError):
        patch.setattr(commit_mod, "crash_point", die_after_add)
        swap_partitions(batch_df(spark, {("2026-01-01",): 3, (None,): 3, ("a b/c",): 3}, "new"), table)
    spark.catalog.refreshTable(table)
    mixed = {("2026-01-01",): (2, ("old",)), (None,): (2, ("old",)), ("a b/c",): (3, ("new",))}
    assert_same_view(spark, trino_server, table, mixed)
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, states=["pending"])

    trino_report = recover(table, stale_after_s=0)
    assert [r.outcome for r in trino_report.resolutions] == ["completed"]
    spark.catalog.refreshTable(table)
    assert_same_view(spark, trino_server, table, {k: (3, ("new",)) for k in mixed})


@pytest.mark.parametrize("hive_format", [True, False], ids=["stored-as", "using"])
def test_trino_reads_an_unpartitioned_table_swapped_and_rolled_back(trino_server, spark, hms, db, tmp_path,
                                                                    ts_env, hive_format):
    """Trino reads a table's storage location, Spark a datasource table's ``path`` serde parameter: after
    ``swap_table`` and ``rollback`` both point at the same files."""
    table = f"{db}.dim"
    location = (tmp_path / "dim").as_uri()
    spec = "STORED AS PARQUET" if hive_format else "USING parquet"
    kind = "EXTERNAL " if hive_format else ""
    spark.sql(f"CREATE {kind}TABLE {table} (id bigint, value string, batch string) {spec} LOCATION '{location}'")
    rows = lambda batch, n: spark.createDataFrame(  # noqa: E731
        [(i, "v", batch) for i in range(n)], "id bigint, value string, batch string")
    rows("old", 2).write.insertInto(table)
    assert_same_view(spark, trino_server, table, {(): (2, ("old",))}, ())

    swap_table(rows("new", 5), table)
    assert_same_view(spark, trino_server, table, {(): (5, ("new",))}, ())
    info = hms.get_table(db, "dim")
    [path] = trino_server.query(f"SELECT DISTINCT \"$path\" FROM hive.{table}")[0:1]
    assert path[0].startswith(info.location.rstrip("/") + "/")

    rollback(table)
    spark.catalog.refreshTable(table)
    assert_same_view(spark, trino_server, table, {(): (2, ("old",))}, ())


def test_trino_reads_s3a_tables_through_its_native_s3_after_swaps(trino_server, spark, db, s3_endpoint, s3_bucket,
                                                                  ts_env, monkeypatch):
    """A table on the loopback S3 endpoint (s3a:// locations): Trino's native S3 file system reads what
    Spark reads after a swap and after its rollback."""
    import uuid

    from tableswap import storage

    from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

    for name, value in {"AWS_ENDPOINT_URL": s3_endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    storage.configure("s3", endpoint_url=s3_endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    try:
        table = create_events(spark, db, f"s3a://{s3_bucket}/{uuid.uuid4().hex[:10]}")
        batch_df(spark, {("2026-07-01",): 2, ("k=v%",): 2}, "old").write.insertInto(table)
        old = {("2026-07-01",): (2, ("old",)), ("k=v%",): (2, ("old",))}
        assert_same_view(spark, trino_server, table, old)
        swap_partitions(batch_df(spark, {("k=v%",): 3, (None,): 1}, "new"), table)
        assert_same_view(spark, trino_server, table,
                         {("2026-07-01",): (2, ("old",)), ("k=v%",): (3, ("new",)), (None,): (1, ("new",))})
        rollback(table)
        assert_same_view(spark, trino_server, table, old)
    finally:
        storage.configure("s3")


@pytest.mark.hdfs
def test_trino_reads_hdfs_tables_after_swaps(trino_server, hdfs_cluster, spark, db, ts_env, monkeypatch):
    """A table on the session's HDFS (hdfs:// locations): Trino's HDFS support (``fs.hadoop.enabled``, the
    HDFS's client configuration named by ``hive.config.resources``) reads what Spark reads after a swap, whose
    partitions are in the swap's staging directory on HDFS, and after its rollback."""
    import uuid

    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_cluster.conf_dir))
    catalog = trino_server.catalogs["hive"]
    assert catalog["hive.config.resources"] == f"{hdfs_cluster.conf_dir}/core-site.xml,{hdfs_cluster.conf_dir}/hdfs-site.xml"
    table = create_events(spark, db, f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}")
    batch_df(spark, {("2026-07-01",): 2, ("k=v%",): 2}, "old").write.insertInto(table)
    old = {("2026-07-01",): (2, ("old",)), ("k=v%",): (2, ("old",))}
    assert_same_view(spark, trino_server, table, old)
    swap_partitions(batch_df(spark, {("k=v%",): 3, (None,): 1}, "new"), table)
    paths = [row[0] for row in trino_server.query(f"SELECT DISTINCT \"$path\" FROM hive.{table} WHERE dt = 'k=v%'")]
    assert paths and all(p.startswith(f"{hdfs_cluster.url}/warehouse/") and "/_tableswap/" in p for p in paths), paths
    assert_same_view(spark, trino_server, table,
                     {("2026-07-01",): (2, ("old",)), ("k=v%",): (3, ("new",)), (None,): (1, ("new",))})
    rollback(table)
    assert_same_view(spark, trino_server, table, old)


# --------------------------------------------------------------------------- readers during swaps
SWAPS = 6
PARTS = ("2026-02-01", "2026-02-02", "k=v%")


def test_trino_readers_during_swaps_see_whole_partitions_and_never_fail(trino_server, spark, db, tmp_path,
                                                                        ts_env, trino_report, monkeypatch):
    """Trino queries in a loop (one reader with Trino's default caching, one with the metastore and
    file-status caches on) while swaps replace every partition, batch after batch: each partition is always
    one whole batch (its row count matches its batch's), never missing, and no query fails. The reads really
    overlapped the flips (timed in the writer): each reader had a query in flight across a flip, and no flip
    happened while a reader was not running."""
    table = create_events(spark, db, tmp_path)
    sizes = {b: 2 + b for b in range(SWAPS + 1)}  # batch b has 2+b rows per partition: a mix would show
    batch_df(spark, {(p,): sizes[0] for p in PARTS}, "b0").write.insertInto(table)
    valid = {(p,): {(sizes[b], (f"b{b}",)) for b in sizes} for p in PARTS}
    batches = {b: batch_df(spark, {(p,): sizes[b] for p in PARTS}, f"b{b}").cache() for b in range(1, SWAPS + 1)}
    for df in batches.values():
        df.count()
    stop = threading.Event()
    seen = {"hive": [], "hive_cached": []}
    readers = [threading.Thread(target=loop_reader, args=(lambda c=c: trino_view(trino_server, table, catalog=c),
                                                           stop, seen[c]), daemon=True)
               for c in seen]
    for r in readers:
        r.start()
    deadline = time.time() + 300
    while not all(seen.values()) and time.time() < deadline:  # both readers past their first (slow) query
        time.sleep(0.2)
    flips = record_flips(monkeypatch)
    started = time.time()
    try:
        for b in range(1, SWAPS + 1):
            swap_partitions(batches[b], table)
    finally:
        elapsed = time.time() - started
        time.sleep(1)
        stop.set()
        for r in readers:
            r.join(timeout=180)
    results = {c: count_anomalies(obs, valid) for c, obs in seen.items()}
    overlaps = {c: reads_across_flips(obs, flips) for c, obs in seen.items()}
    for catalog, r in results.items():
        trino_report.append({"campaign": "concurrent readers", "case": f"Trino ({catalog})",
                       "trials": f"{SWAPS} swaps, {r['observations']} reads",
                       "result": f"{r['mixed_or_partial'] + r['missing_partition'] + r['errors']} anomalies",
                       "details": f"partial/mixed={r['mixed_or_partial']} missing={r['missing_partition']} "
                                  f"errors={r['errors']} writes={elapsed:.0f}s reads in flight across "
                                  f"{overlaps[catalog]['in_flight']} of {len(flips)} flips {r['examples'][:1]}"})
    assert_readers_saw_whole_partitions(results, overlaps, SWAPS)
    final = {(p,): (sizes[SWAPS], (f"b{SWAPS}",)) for p in PARTS}
    assert trino_view(trino_server, table) == final == reader_view(spark, table)


# --------------------------------------------------------------------------- Trino's caches
def _visible_after(trino, table: str, catalog: str, expected: dict, timeout: float) -> tuple[float | None, int]:
    """Seconds until ``catalog`` shows ``expected`` (None: not within ``timeout``), and the failed queries."""
    began, failures = time.monotonic(), 0
    while time.monotonic() - began < timeout:
        try:
            if trino_view(trino, table, catalog=catalog) == expected:
                return round(time.monotonic() - began, 1), failures
        except Exception:  # noqa: BLE001 - counted
            failures += 1
        time.sleep(0.5)
    return None, failures


@pytest.mark.release_independent  # Trino's cache or tableswap's hooks: the reads are those above
def test_trino_metastore_cache_delays_a_swap_until_its_ttl(trino_server, spark, db, tmp_path, ts_env, trino_report):
    """With Trino's defaults (no metastore cache) a swap is visible to the next query; with a metastore
    cache TTL it is visible only once the cached partitions expire (at most the TTL later), and meanwhile
    reads show the old, whole partitions without failing: the old directories are still there (the
    janitor's grace must outlast the TTL)."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("2026-03-01",): 2}, "old").write.insertInto(table)
    old = {("2026-03-01",): (2, ("old",))}
    assert trino_view(trino_server, table, catalog="hive_cached") == old  # now cached
    swap_partitions(batch_df(spark, {("2026-03-01",): 4}, "new"), table)
    new = {("2026-03-01",): (4, ("new",))}
    assert trino_view(trino_server, table) == new  # default catalog: at once
    stale = trino_view(trino_server, table, catalog="hive_cached")
    delay, failures = _visible_after(trino_server, table, "hive_cached", new, timeout=ts.CACHED_TTL_S * 3)
    trino_report.append({"campaign": "reader caches", "case": f"Trino metastore cache TTL {ts.CACHED_TTL_S}s",
                   "trials": "1 swap", "result": f"visible after {delay}s", "details":
                   f"first read after the swap: {'old' if stale == old else stale}; failed queries: {failures}"})
    assert stale in (old, new)  # whole partitions either way
    assert delay is not None and delay <= ts.CACHED_TTL_S + 30  # + query time on a loaded machine
    assert failures == 0


@pytest.mark.release_independent  # Trino's cache or tableswap's hooks: the reads are those above
def test_deleting_a_displaced_directory_within_the_cache_ttl_breaks_cached_readers(trino_server, spark, db,
                                                                                   tmp_path, ts_env, trino_report):
    """Why the janitor's grace must outlast the readers' cache TTL: a cached reader still points at the
    displaced directory; once it is deleted (a janitor run with too short a grace), its queries fail or
    return wrong results until the cache expires. Trino's default catalog is unaffected."""
    catalog = "hive_cached_long"
    import shutil
    from urllib.parse import urlparse

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("2026-04-01",): 2}, "old").write.insertInto(table)
    assert trino_view(trino_server, table, catalog=catalog) == {("2026-04-01",): (2, ("old",))}
    result = swap_partitions(batch_df(spark, {("2026-04-01",): 4}, "new"), table)
    [change] = result.replaced
    shutil.rmtree(urlparse(change.old_location).path)  # the janitor, with a grace shorter than the TTL
    new = {("2026-04-01",): (4, ("new",))}
    assert trino_view(trino_server, table) == new
    try:
        cached = trino_view(trino_server, table, catalog=catalog)
        outcome = "right" if cached == new else f"wrong rows: {cached}"
    except Exception as exc:  # noqa: BLE001 - the observation
        outcome = f"failed: {str(exc).splitlines()[0][:120]}"
    trino_report.append({"campaign": "reader caches", "case": "old directory deleted within the TTL",
                   "trials": "1 swap", "result": outcome.split(":")[0], "details": outcome})
    assert outcome != "right"  # the hazard docs/janitor.md describes is real


@pytest.mark.release_independent  # Trino's cache or tableswap's hooks: the reads are those above
def test_trino_flush_hook_makes_a_swap_visible_to_cached_readers_at_once(trino_server, spark, db, tmp_path,
                                                                         ts_env):
    """With the Trino hook (given as hooks=), the cached catalog sees each swap on its next query: a swap
    that replaces partitions only (flushed one by one), one that also adds (the table is flushed), and
    a rollback; every run is recorded in the journal."""
    from tableswap.hooks import SparkRefreshHook, TrinoFlushHook

    hook = TrinoFlushHook("127.0.0.1", trino_server.port, catalog="hive_cached_long")
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("2026-05-01",): 2, (None,): 2}, "old").write.insertInto(table)
    cached = lambda: trino_view(trino_server, table, catalog="hive_cached_long")  # noqa: E731
    assert cached() == {("2026-05-01",): (2, ("old",)), (None,): (2, ("old",))}

    first = swap_partitions(batch_df(spark, {("2026-05-01",): 3, (None,): 3}, "new"), table,
                            hooks=[hook, SparkRefreshHook(spark)])
    assert cached() == {("2026-05-01",): (3, ("new",)), (None,): (3, ("new",))}
    second = swap_partitions(batch_df(spark, {("2026-05-01",): 4, ("a b/c",): 1}, "newer"), table, hooks=[hook])
    assert cached() == {("2026-05-01",): (4, ("newer",)), (None,): (3, ("new",)), ("a b/c",): (1, ("newer",))}
    rollback(table, hooks=[hook])
    assert cached() == {("2026-05-01",): (3, ("new",)), (None,): (3, ("new",))}
    runs = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).hook_runs([first.swap_id, second.swap_id])
    assert [(o.hook, o.ok) for o in runs[first.swap_id]] == [(hook.name, True), ("spark refresh (1 session(s))", True)]
    assert [o.ok for o in runs[second.swap_id]] == [True]


@pytest.mark.release_independent  # Trino's cache or tableswap's hooks: the reads are those above
def test_config_file_hooks_run_a_failing_one_never_fails_the_swap_and_history_shows_it(
        spark, trino_server, db, tmp_path, ts_env, monkeypatch):
    """Hooks from the config file: the Trino hook flushes the cached catalog; a hook whose server is down
    and a command that fails are logged and recorded, the swap commits all the same, ``tableswap history``
    shows them and ``tableswap doctor`` reports the one that cannot connect."""
    from click.testing import CliRunner

    from tableswap.cli import main
    from tableswap.ops.inspect.doctor import run_doctor

    config = tmp_path / "config.toml"
    config.write_text(f'''
[hooks]
timeout_s = 10
reader_cache_ttl = "{ts.CACHED_TTL_S}s"

[[hooks.trino]]
host = "127.0.0.1"
port = {trino_server.port}
catalog = "hive_cached_long"

[[hooks.trino]]
name = "trino that is down"
host = "127.0.0.1"
port = 1

[[hooks.command]]
argv = ["false"]
''')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("2026-06-01",): 2}, "old").write.insertInto(table)
    assert trino_view(trino_server, table, catalog="hive_cached_long") == {("2026-06-01",): (2, ("old",))}
    result = swap_partitions(batch_df(spark, {("2026-06-01",): 5}, "new"), table)
    assert trino_view(trino_server, table, catalog="hive_cached_long") == {("2026-06-01",): (5, ("new",))}
    assert reader_view(spark, table) == {("2026-06-01",): (5, ("new",))}
    [swap] = [s for s in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db) if s.swap_id == result.swap_id]
    assert swap.state == "committed"

    shown = CliRunner().invoke(main, ["history", table], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert f"hook trino http://127.0.0.1:{trino_server.port} catalog hive_cached_long: ok" in shown.output
    assert "hook trino that is down: FAILED: " in shown.output
    assert "hook command false: FAILED: RuntimeError: false exited with 1" in shown.output
    as_json = CliRunner().invoke(main, ["history", table, "--json"], catch_exceptions=False)
    assert [h["ok"] for h in json.loads(as_json.output)["swaps"][0]["hooks"]] == [True, False, False]

    doctor = run_doctor()
    hooks_check = doctor.check("hooks")
    assert hooks_check.status == "fail" and "1 of 3 hook(s) cannot connect" in hooks_check.detail  # `false` runs
    assert "trino that is down" in hooks_check.detail and doctor.check("janitor grace").status == "ok"
