"""The Airflow provider (tableswap.airflow) in a real Airflow: a DAG of its operators runs with ``dag.test()``
(SQLite metadata database in a temporary AIRFLOW_HOME) against the session's real metastore and a real
journal, no mock of either; what the operators did is checked on the metastore, the files, the XComs Airflow
stored and the OpenLineage events Airflow's provider emitted.

Airflow lives in a virtual environment of its own (tests/airflow_env.py: built by uv once per session, in
the background while the metastore and Spark start); the DAG file is tests/data/airflow/tableswap_dag.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tableswap.core import locations as loc

from . import airflow_env
from .helpers import SRC
from .needs import missing
from .test_repair import AFTER_MSCK, BEFORE_DROP, issue_sequence, view

pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

DAG_FILE = Path(__file__).resolve().parent / "data" / "airflow" / "tableswap_dag.py"
CONN_ID = "tableswap_test"


class Airflow:
    """A built environment and a migrated AIRFLOW_HOME; :meth:`run_dag` runs one DAG with ``dag.test()``."""

    def __init__(self, env: airflow_env.AirflowEnv, home: Path, migrate_s: float) -> None:
        self.env, self.home, self.migrate_s = env, home, migrate_s

    def environ(self, connections: dict[str, dict], **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TABLESWAP_", "OPENLINEAGE", "AIRFLOW", "PYTHONPATH", "VIRTUAL_ENV"))}
        env.update(AIRFLOW_HOME=str(self.home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                   AIRFLOW__CORE__UNIT_TEST_MODE="False", **extra)
        for conn_id, conn in connections.items():
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
        return env

    def run_dag(self, spec: dict, connections: dict[str, dict], tmp: Path) -> tuple[dict, dict, list[dict]]:
        """Run the DAG ``spec`` (see the DAG file); returns the run's states, each task's XComs, and the
        OpenLineage events Airflow's provider wrote (its file transport)."""
        out, events = tmp / "xcoms.json", tmp / "openlineage.jsonl"
        transport = {"type": "file", "log_file_path": str(events), "append": True}
        env = self.environ(connections, TABLESWAP_TEST_DAG=json.dumps(spec), TABLESWAP_TEST_OUT=str(out),
                           AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport),
                           AIRFLOW__OPENLINEAGE__NAMESPACE="airflow-test")
        began = time.monotonic()
        done = subprocess.run([self.env.python, str(self.home / "dags" / DAG_FILE.name)], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=600)
        print(f"dag.test() of {spec['name']}: {time.monotonic() - began:.1f} s "
              f"(load average {os.getloadavg()[0]:.1f})")
        result = [line for line in done.stdout.splitlines() if line.startswith("DAG_RESULT ")]
        assert done.returncode == 0 and result and out.exists(), \
            f"exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
        lineage = [json.loads(line) for line in events.read_text().splitlines() if line.strip()] \
            if events.exists() else []
        return json.loads(result[-1][len("DAG_RESULT "):]), json.loads(out.read_text()), lineage


def _build(root: Path) -> Airflow:
    uv = airflow_env.uv_command()
    if uv is None:
        raise RuntimeError("uv is not installed")
    env = airflow_env.build(root / "venv", uv)
    home = root / "home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(DAG_FILE, home / "dags" / DAG_FILE.name)
    began = time.monotonic()
    airflow = Airflow(env, home, 0.0)
    done = subprocess.run([str(env.root / "bin" / "airflow"), "db", "migrate"], env=airflow.environ({}),
                          capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"airflow db migrate failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    airflow.migrate_s = round(time.monotonic() - began, 1)
    print(f"Airflow {airflow_env.AIRFLOW_VERSION} environment built in {env.seconds} s {env.steps}, "
          f"its database migrated in {airflow.migrate_s} s (load average {os.getloadavg()[0]:.1f})")
    return airflow


@pytest.fixture(scope="session")
def airflow_future(tmp_path_factory: pytest.TempPathFactory) -> Future:
    """The Airflow environment, built in a background thread (it needs nothing of the metastore or Spark,
    which start meanwhile): ``.result()`` waits for it."""
    if airflow_env.uv_command() is None:
        missing("uv", "it builds the Airflow tests' virtual environment", "pip install uv (the test extra has it)")
    pool = ThreadPoolExecutor(1, thread_name_prefix="airflow-env")
    future = pool.submit(_build, tmp_path_factory.mktemp("airflow"))
    pool.shutdown(wait=False)
    return future


@pytest.fixture(scope="session")
def airflow(airflow_future: Future) -> Airflow:
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
        # (after recover: the rollback displaced the swap's data more than the grace of 1 s ago)
        {"task_id": "janitor", "operator": "janitor", "table": table, "grace": "1s", "force_short_grace": True},
        # Not chained to the others: a non-retryable error fails at once, whatever its retries; a retryable
        # one (the metastore unreachable) is retried.
        {"task_id": "unknown_table", "operator": "rollback", "table": f"{db}.missing", "retries": 3,
         "independent": True},
        {"task_id": "metastore_down", "operator": "rollback", "table": table, "retries": 1, "independent": True,
         "tableswap_conn_id": "tableswap_down"},
    ]}
    conns = {CONN_ID: connection(metastore_uri, journal_url),
             "tableswap_down": connection("thrift://127.0.0.1:9", journal_url, connect_attempts=1,
                                          metastore_timeout_s=5)}
    run, xcoms, lineage = airflow.run_dag(spec, conns, tmp_path)
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
                                                "error_type": "MetastoreUnavailableError"}

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


def test_the_provider_is_registered_and_import_tableswap_imports_no_airflow(airflow):
    code = (
        "import sys, json\n"
        "import tableswap, tableswap.airflow\n"
        "assert not [m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')], 'airflow imported'\n"
        "from airflow.providers_manager import ProvidersManager\n"
        "pm = ProvidersManager()\n"
        "hook = pm.hooks.get('tableswap')\n"
        "print(json.dumps({'provider': 'tableswap' in pm.providers, 'hook': hook.hook_class_name if hook else None,\n"
        "                  'fields': sorted(pm.connection_form_widgets) if hasattr(pm, 'connection_form_widgets') else None}))\n"
    )
    done = subprocess.run([airflow.env.python, "-c", code], env=airflow.environ({}), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["provider"] is True
    assert found["hook"] == "tableswap.airflow.hooks.TableswapHook"
