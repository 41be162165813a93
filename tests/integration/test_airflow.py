"""The Airflow provider (tableswap.airflow) in a real Airflow: a DAG of its operators runs with ``dag.test()``
(SQLite metadata database in a temporary AIRFLOW_HOME) against the session's real metastore and a real
journal, no mock of either; what the operators did is checked on the metastore, the files, the XComs Airflow
stored and the OpenLineage events Airflow's provider emitted.

Airflow lives in a virtual environment of its own (tests/support/airflow_env.py: built by uv once per session, in
the background from the moment this module is collected); the DAG file is tests/data/airflow/tableswap_dag.py.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import Future
from pathlib import Path

import pytest

from tableswap.core import locations as loc

from ..support import airflow_env
from ..support.needs import missing
from .test_repair import AFTER_MSCK, BEFORE_DROP, issue_sequence, view

pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

DAG_FILE = Path(__file__).resolve().parents[1] / "data" / "airflow" / "tableswap_dag.py"
CONN_ID = "tableswap_test"


@pytest.fixture(scope="session")
def airflow_future(tmp_path_factory: pytest.TempPathFactory) -> Future:
    """The Airflow environment and home, prepared in a background thread (they need nothing of the metastore
    or Spark): started by conftest.py as soon as this module is collected, else here; ``.result()`` waits."""
    if airflow_env.uv_command() is None:
        missing("uv", "it builds the Airflow tests' virtual environment", "pip install uv (the test extra has it)")
    return airflow_env.start(tmp_path_factory.mktemp("airflow"))


@pytest.fixture(scope="session")
def airflow(airflow_future: Future) -> airflow_env.Airflow:
    return airflow_future.result(timeout=900)


def connection(metastore_uri: str, journal_url: str, **extra) -> dict:
    return {"conn_type": "tableswap", "extra": {"metastore_uri": metastore_uri, "journal_url": journal_url, **extra}}


def test_a_dag_repairs_rolls_back_cleans_up_and_recovers_against_the_real_metastore(
        airflow_future, spark, db, tmp_path, hms, metastore_uri, journal_url, ts_env):
    # The runbook's table: a swap replaced d2 and added d3, then the table's entry was lost (dropped,
    # re-created, MSCK REPAIR: d2 silently back to its displaced data, d3 gone).
    table, swap = issue_sequence(spark, db, tmp_path)
    new_d2, new_d3 = (loc.to_local_path(c.new_location) for c in (*swap.replaced, *swap.added))
    old_d2 = loc.to_local_path(swap.replaced[0].old_location)
    airflow = airflow_future.result(timeout=900)

    spec = {"name": "runbook", "tasks": [
        {"task_id": "repair", "operator": "repair", "table": table},
        {"task_id": "rollback", "operator": "rollback", "table": table, "to": swap.swap_id},
        {"task_id": "recover", "operator": "recover", "table": table},
        # (its grace is 0 s: the rollback's displaced data is due at once; 1 s was not always past when a quiet
        # machine ran the janitor task right after the rollback and recover tasks). Its connection
        # names only a config file, which has the metastore, the journal and the janitor's grace and floor.
        {"task_id": "janitor", "operator": "janitor", "table": table, "tableswap_conn_id": "tableswap_cfg"},
        # Not chained to the others: a non-retryable error fails at once, whatever its retries; a retryable
        # one (the metastore unreachable) is retried.
        {"task_id": "unknown_table", "operator": "rollback", "table": f"{db}.missing", "retries": 3,
         "independent": True},
        {"task_id": "metastore_down", "operator": "rollback", "table": table, "retries": 1, "independent": True,
         "tableswap_conn_id": "tableswap_down"},
    ]}
    config = tmp_path / "tableswap.toml"
    config.write_text(f'metastore_uri = "{metastore_uri}"\njournal_url = "{journal_url}"\n\n'
                      '[janitor]\ngrace = "0s"\nmin_grace = "0s"\n')
    conns = {CONN_ID: connection(metastore_uri, journal_url),
             "tableswap_cfg": {"conn_type": "tableswap", "extra": {"config_file": str(config)}},
             "tableswap_down": connection("thrift://127.0.0.1:9", journal_url, connect_attempts=1,
                                          metastore_timeout_s=5)}
    run, xcoms, lineage = airflow.run_dag(DAG_FILE, spec, conns, tmp_path)
    tasks = run["tasks"]

    # Each operator did its part, in order: the table is as before the bad swap, its data deleted.
    assert {t: tasks[t]["state"] for t in ("repair", "rollback", "janitor", "recover", "collect")} == \
        dict.fromkeys(("repair", "rollback", "janitor", "recover", "collect"), "success"), tasks
    repaired = xcoms["repair"]["return_value"]
    assert repaired["dry_run"] is False and repaired["result"]["kind"] == "repair"
    assert sorted(c["partition"] for c in repaired["result"]["replaced"]) == ["dt=d2"]
    assert sorted(c["partition"] for c in repaired["result"]["added"]) == ["dt=d3"]
    rolled = xcoms["rollback"]["return_value"]
    assert rolled["kind"] == "rollback" and rolled["nothing_to_do"] is False
    assert sorted(c["partition"] for c in rolled["dropped"]) == ["dt=d3"]
    assert view(spark, table) == AFTER_MSCK != BEFORE_DROP
    cleaned = xcoms["janitor"]["return_value"]
    deleted = {loc.to_local_path(o["location"]) for o in cleaned["outcomes"] if o["outcome"] == "deleted"}
    assert {new_d2, new_d3} <= deleted and cleaned["ok"] is True, cleaned["outcomes"]
    assert cleaned["grace_seconds"] == 0.0  # the connection's config file was read (the default: 24h)
    assert not Path(new_d2).exists() and not Path(new_d3).exists() and Path(old_d2).is_dir()
    assert view(spark, table) == AFTER_MSCK  # nothing a reader sees was deleted
    assert xcoms["recover"]["return_value"] == {"ok": True, "dry_run": False, "resolutions": [],
                                                "needs_attention": []}
    assert all(xcoms[t]["error"] is None for t in ("repair", "rollback", "janitor", "recover"))
    assert hms.lock_holders(db, "events") == []

    # Errors: a terminal one is not retried (AirflowFailException), a retryable one is; both leave their data.
    assert tasks["unknown_table"] == {"state": "failed", "try_number": 1}, tasks
    assert xcoms["unknown_table"]["error"]["retryable"] is False
    assert xcoms["unknown_table"]["error"]["error_type"] in ("NotFoundError", "TableNotFoundError")
    assert tasks["metastore_down"] == {"state": "failed", "try_number": 2}, tasks
    assert xcoms["metastore_down"]["error"] == {**xcoms["metastore_down"]["error"], "retryable": True,
                                                "error_type": "CatalogUnavailableError"}

    # Lineage through Airflow's OpenLineage provider: the table, named as Spark names it, is the repair's and
    # the rollback's output; the janitor's run carries its deletions.
    complete = {e["job"]["name"].rsplit(".", 1)[-1]: e for e in lineage if e["eventType"] == "COMPLETE"}
    root = loc.to_local_path((tmp_path / "events").as_uri())
    for task_id in ("repair", "rollback"):
        (output,) = complete[task_id]["outputs"]
        assert (output["namespace"], output["name"]) == ("file", root.rstrip("/"))
        assert output["facets"]["symlinks"]["identifiers"][0]["name"] == table
        assert output["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
        assert complete[task_id]["run"]["facets"]["tableswap"]["kind"] == task_id
    assert complete["rollback"]["run"]["facets"]["tableswap"]["dropped"] == ["dt=d3"]
    janitor_facet = complete["janitor"]["run"]["facets"]["tableswap_janitor"]
    assert janitor_facet["deletedCount"] >= 2 and complete["janitor"]["outputs"] == []


def test_a_dag_publishes_a_staged_group_and_rolls_it_back(airflow_future, spark, db, tmp_path, hms, metastore_uri,
                                                           journal_url, ts_env):
    """A group staged by a Spark job (``stage_group``) is published as one unit by one task and rolled back as
    one unit by the next; an unknown group fails its task without retry."""
    from tableswap import stage_group
    from tableswap.journal import Journal
    from tableswap.journal.groups import GroupLog

    from ..support.helpers import batch_df, create_events, reader_view, today

    tables = [create_events(spark, db, tmp_path, name=n) for n in ("orders", "clicks")]
    for table in tables:
        batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    before = {t: reader_view(spark, t) for t in tables}
    with stage_group(f"nightly-{db}") as g:
        for table in tables:
            g.swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), table)
    airflow = airflow_future.result(timeout=900)
    spec = {"name": "groups", "tasks": [
        {"task_id": "publish", "operator": "publish_group", "group": f"nightly-{db}"},
        {"task_id": "rollback", "operator": "rollback_group", "group": g.group_id},
        {"task_id": "unknown_group", "operator": "publish_group", "group": f"no-such-{db}", "retries": 3,
         "independent": True},
    ]}
    run, xcoms, lineage = airflow.run_dag(DAG_FILE, spec, {CONN_ID: connection(metastore_uri, journal_url)}, tmp_path)
    tasks = run["tasks"]

    assert {t: tasks[t]["state"] for t in ("publish", "rollback")} == {"publish": "success", "rollback": "success"}
    published = xcoms["publish"]["return_value"]
    assert published["group_id"] == g.group_id and set(published["results"]) == set(tables)
    rolled = xcoms["rollback"]["return_value"]
    assert rolled["rollback_of"] == g.group_id and set(rolled["results"]) == set(tables)
    for table in tables:
        spark.catalog.refreshTable(table)
        assert reader_view(spark, table) == before[table]
    groups = GroupLog(Journal(journal_url))
    assert groups.get(g.group_id).state == "committed" and groups.get(rolled["group_id"]).state == "committed"
    assert tasks["unknown_group"] == {"state": "failed", "try_number": 1}, tasks
    assert xcoms["unknown_group"]["error"]["error_type"] == "NotFoundError"
    # Lineage through Airflow's OpenLineage provider: each task's run has both tables as outputs.
    complete = {e["job"]["name"].rsplit(".", 1)[-1]: e for e in lineage if e["eventType"] == "COMPLETE"}
    for task_id in ("publish", "rollback"):
        names = sorted(o["name"] for o in complete[task_id]["outputs"])
        assert names == sorted(str(tmp_path / t.split(".")[1]) for t in tables), complete[task_id]["outputs"]
        assert complete[task_id]["run"]["facets"]["tableswap_group"]["members"].keys() == set(tables)


def test_the_provider_is_registered_and_import_tableswap_imports_no_airflow(airflow):
    code = (
        "import sys, json\n"
        "import tableswap, tableswap.airflow\n"
        "assert not [m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')], 'airflow imported'\n"
        "from airflow.providers_manager import ProvidersManager\n"
        "pm = ProvidersManager()\n"
        "hook = pm.hooks.get('tableswap')\n"
        "print(json.dumps({'provider': 'tableswap' in pm.providers, 'hook': hook.hook_class_name if hook else None,\n"
        "                  'testable': hook.connection_testable if hook else None,\n"
        "                  'attribute': hook.connection_id_attribute_name if hook else None}))\n"
    )
    done = subprocess.run([airflow.env.python, "-c", code], env=airflow.environ({}), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["provider"] is True
    assert found["hook"] == "tableswap.airflow.hooks.TableswapHook"
    assert found["testable"] is True and found["attribute"] == "tableswap_conn_id"
