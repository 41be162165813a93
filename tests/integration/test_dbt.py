"""dbt's ``incremental_strategy='tableswap'`` (the adapter plugin ``tableswap``, tableswap.dbt; docs/sql.md#dbt)
in a real dbt: ``dbt run`` in a process of its own, dbt-spark's ``session`` method, its SparkSession on the
suite's metastore, a real journal. The project (tests/data/dbt) has each model twice, once with the
``tableswap`` strategy and once with dbt-spark's own ``insert_overwrite``, so that every run compares the
two: the same rows, the same partitions.

dbt lives in a virtual environment of its own (tests/support/dbt_env.py: built by uv once per session, in the
background from the moment this module is collected). Every ``dbt run`` starts a JVM, so the test is one
scenario of three runs: the first run (the tables created), an incremental run, a full refresh with a failing
model.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from tableswap.core import locations as loc
from tableswap.journal import Journal

from ..support import dbt_env, hive_client
from ..conftest import selected_hive_version
from ..support.helpers import file_tree, partition_locations
from ..support.needs import missing

# The plugin's subject is dbt's and Spark's, not the metastore release's: the default run only.
pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

PROJECT = Path(__file__).resolve().parents[1] / "data" / "dbt"
MODELS = ("events_tableswap", "events_insert_overwrite", "totals_tableswap", "totals_insert_overwrite",
          "failing_tableswap")

#: The source table, before each run: (id, value, dt).
FIRST = [(1, 10, "d1"), (2, 20, "d1"), (3, 30, "d2")]
SECOND = [(1, 10, "d1"), (2, 20, "d1"), (3, 31, "d2"), (4, 40, "d2"), (5, 50, "d3")]
REFRESH = [(1, 11, "d1"), (5, 50, "d3"), (6, 60, "d3")]


@pytest.fixture(scope="session")
def dbt_future(tmp_path_factory: pytest.TempPathFactory) -> Future:
    """The dbt environment, prepared in a background thread: started by conftest.py as soon as this module is
    collected, else here; ``.result()`` waits."""
    if dbt_env.uv_command() is None:
        missing("uv", "it builds the dbt tests' virtual environment", "pip install uv (the test extra has it)")
    return dbt_env.start(tmp_path_factory.mktemp("dbt"))


class Dbt:
    """``dbt run`` of tests/data/dbt in the environment, with a profile of ``type: tableswap``."""

    def __init__(self, env, work: Path, db: str, metastore_uri: str, journal_url: str) -> None:
        self.env, self.work, self.db = env, work, db
        warehouse = work / "warehouse"
        params = {"spark.master": "local[2]", "spark.hadoop.hive.metastore.uris": metastore_uri,
                  "spark.sql.warehouse.dir": str(warehouse), "spark.ui.enabled": "false",
                  "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                  "spark.driver.extraJavaOptions": f"-Dderby.system.home={warehouse}",
                  **hive_client.client_conf(selected_hive_version())}
        profile = {"tableswap_test": {"target": "dev", "outputs": {"dev": {
            "type": "tableswap", "method": "session", "host": "NA", "schema": db, "threads": 1,
            "journal_url": journal_url, "server_side_parameters": params}}}}
        (work / "profiles.yml").write_text(json.dumps(profile))  # JSON is YAML
        self.tables = work / "tables"
        self.seconds: list[float] = []

    def run(self, *args: str, **variables) -> dict[str, dict]:
        """One ``dbt run``; each model's result in run_results.json (status, message, adapter_response)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TABLESWAP_", "PYTHONPATH", "VIRTUAL_ENV"))}
        env.update(DBT_SEND_ANONYMOUS_USAGE_STATS="false", DBT_USE_COLORS="false")
        variables = {"source": f"{self.db}.src", "location_root": str(self.tables), "since": "d2", **variables}
        began = time.monotonic()
        done = subprocess.run(
            [self.env.bin("dbt"), "run", "--project-dir", str(PROJECT), "--profiles-dir", str(self.work),
             "--target-path", str(self.work / "target"), "--log-path", str(self.work / "logs"),
             "--vars", json.dumps(variables), *args],
            env=env, cwd=self.work, capture_output=True, text=True, timeout=900)
        self.seconds.append(round(time.monotonic() - began, 1))
        print(f"dbt run {' '.join(args)}: {self.seconds[-1]} s (load average {os.getloadavg()[0]:.1f})")
        results = self.work / "target" / "run_results.json"
        assert results.exists(), f"exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
        out = {r["unique_id"].rsplit(".", 1)[-1]: r for r in json.loads(results.read_text())["results"]}
        print("\n".join(f"  {m}: {r['status']} {r['message']}" for m, r in out.items()))
        return out


def write_source(spark, db: str, rows: list[tuple[int, int, str]]) -> None:
    spark.createDataFrame(rows, "id int, value int, dt string").write.mode("overwrite").saveAsTable(f"{db}.src")


def state(spark, table: str) -> tuple[list, list]:
    """The table's rows and partitions, read by the suite's session."""
    spark.catalog.refreshTable(table)
    rows = sorted(tuple(r) for r in spark.table(table).collect())  # (the table's columns, partition columns last)
    partitioned = any(c.isPartition for c in spark.catalog.listColumns(table))
    parts = sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {table}").collect()) if partitioned else []
    return rows, parts


def totals(rows: list[tuple[int, int, str]]) -> list[tuple]:
    days = sorted({d for _, _, d in rows})
    return sorted((d, sum(1 for r in rows if r[2] == d), sum(r[1] for r in rows if r[2] == d)) for d in days)


def swap_of(result: dict) -> str:
    """The swap id the plugin put in the model's adapter response."""
    response = result["adapter_response"]
    assert response.get("code") == "TABLESWAP" and response.get("query_id"), response
    return response["query_id"]


def test_dbt_runs_the_tableswap_strategy_as_swaps_that_give_insert_overwrites_tables(
        dbt_future, spark, db, tmp_path, hms, metastore_uri, journal_url):
    env = dbt_future.result(timeout=900)
    dbt = Dbt(env, tmp_path, db, metastore_uri, journal_url)
    journal = Journal(journal_url)
    events, totals_t, failing = (f"{db}.{m}" for m in ("events_tableswap", "totals_tableswap", "failing_tableswap"))

    # 1. The first run creates every table (dbt-spark's CREATE TABLE ... LOCATION ... AS SELECT: EXTERNAL).
    write_source(spark, db, FIRST)
    first = dbt.run()
    assert {m: r["status"] for m, r in first.items()} == dict.fromkeys(MODELS, "success"), first
    assert hms.get_table(db, "events_tableswap").table_type == "EXTERNAL_TABLE"
    assert state(spark, events) == (sorted(FIRST), ["dt=d1", "dt=d2"])
    root = Path(loc.to_local_path(hms.get_table(db, "events_tableswap").location))
    before = partition_locations(hms, db, "events_tableswap")
    d2_files = file_tree(Path(loc.to_local_path(before[("d2",)])))
    io_before = partition_locations(hms, db, "events_insert_overwrite")

    # 2. An incremental run (the days from d2 on): the same table as dbt-spark's insert_overwrite (dynamic),
    # made by one committed swap that replaced d2 and added d3 under fresh directories, d1 untouched.
    write_source(spark, db, SECOND)
    second = dbt.run()
    assert {m: r["status"] for m, r in second.items()} == dict.fromkeys(MODELS, "success"), second
    expected = (sorted(SECOND), ["dt=d1", "dt=d2", "dt=d3"])
    assert state(spark, events) == state(spark, f"{db}.events_insert_overwrite") == expected
    assert state(spark, totals_t) == state(spark, f"{db}.totals_insert_overwrite") == (totals(SECOND), [])
    record = journal.get_swap(swap_of(second["events_tableswap"]))
    assert record is not None and record.state == "committed"
    assert {(i.partition_name, i.action) for i in record.items} == {("dt=d2", "replace"), ("dt=d3", "add")}
    after = partition_locations(hms, db, "events_tableswap")
    assert after[("d1",)] == before[("d1",)]
    for day in ("d2", "d3"):
        assert f"/_tableswap/{record.swap_id}/" in after[(day,)], after
    # Readers never saw d2 partly rewritten: its old directory is whole (a reader that planned against it
    # reads it to the end) and queued for the janitor, not deleted; dbt-spark's insert_overwrite rewrote its
    # own d2 in place.
    assert file_tree(Path(loc.to_local_path(before[("d2",)]))) == d2_files
    assert before[("d2",)] in {loc.normalize(d.location) for d in journal.deletions(db=db, table="events_tableswap")}
    assert partition_locations(hms, db, "events_insert_overwrite")[("d2",)] == io_before[("d2",)]
    assert journal.get_swap(swap_of(second["totals_tableswap"])).kind == "table"

    # 3. A full refresh is one swap of the whole table: every partition replaced, the day gone from the source
    # dropped; the table is never dropped (its own properties stay). dbt-spark's own full refresh drops the
    # table first, and with location_root its CREATE TABLE AS SELECT then fails on the directory the dropped
    # EXTERNAL table left: no table at all. In the same run, a model failing while Spark writes its rows changes
    # nothing (its swap failed before its flip; one dbt run fewer, each a JVM's start).
    spark.sql(f"ALTER TABLE {events} SET TBLPROPERTIES ('kept' = 'yes')")
    failing_before = (state(spark, failing), partition_locations(hms, db, "failing_tableswap"))
    write_source(spark, db, REFRESH)
    third = dbt.run("--full-refresh", "-s", "events_tableswap", "totals_tableswap", "events_insert_overwrite",
                    "failing_tableswap", fail=True)
    assert {m: r["status"] for m, r in third.items()} == {
        "events_tableswap": "success", "totals_tableswap": "success", "events_insert_overwrite": "error",
        "failing_tableswap": "error"}, third
    assert "the model failed" in third["failing_tableswap"]["message"]
    assert "unchanged" in third["failing_tableswap"]["message"]
    assert (state(spark, failing), partition_locations(hms, db, "failing_tableswap")) == failing_before
    failing_swaps = journal.list_swaps(db, "failing_tableswap")
    assert [s.state for s in failing_swaps][:2] == ["failed", "committed"], failing_swaps
    assert state(spark, events) == (sorted(REFRESH), ["dt=d1", "dt=d3"])
    assert state(spark, totals_t) == (totals(REFRESH), [])
    assert hms.get_table(db, "events_tableswap").parameters.get("kept") == "yes"
    refresh = journal.get_swap(swap_of(third["events_tableswap"]))
    assert refresh is not None and refresh.state == "committed"
    assert {(i.partition_name, i.action) for i in refresh.items} == {
        ("dt=d1", "replace"), ("dt=d2", "drop"), ("dt=d3", "replace")}
    assert root.is_dir() and not spark.catalog.tableExists(f"{db}.events_insert_overwrite")
    print(f"dbt runs (s): {dbt.seconds}; environment: {env.seconds} s {env.steps}")
