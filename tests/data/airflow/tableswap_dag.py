"""A DAG of tableswap's operators, run by tests/integration/test_airflow.py with Airflow's ``dag.test()`` in the Airflow
virtual environment (tests/support/airflow_env.py): ``python tableswap_dag.py``.

``$TABLESWAP_TEST_DAG`` (JSON) says which operators run, one after the other: ``{"name": ..., "tasks":
[{"task_id": ..., "operator": "janitor" | "rollback" | "recover" | "repair" | "publish_group" |
"rollback_group", ...its parameters}]}``, each
after the one before it unless ``"independent": true``. A last
task (run whatever the others' states) writes each task's XComs (``return_value`` and ``tableswap_error``) to
``$TABLESWAP_TEST_OUT``; the run's and each task's state and tries are printed as one JSON line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from airflow.sdk import DAG, task

from tableswap.airflow.operators import (ERROR_XCOM_KEY, TableswapJanitorOperator, TableswapPublishGroupOperator,
                                         TableswapRecoverOperator, TableswapRepairOperator,
                                         TableswapRollbackGroupOperator, TableswapRollbackOperator)

OPERATORS = {"janitor": TableswapJanitorOperator, "rollback": TableswapRollbackOperator,
             "recover": TableswapRecoverOperator, "repair": TableswapRepairOperator,
             "publish_group": TableswapPublishGroupOperator, "rollback_group": TableswapRollbackGroupOperator}
SPEC = json.loads(os.environ["TABLESWAP_TEST_DAG"])

with DAG(f"tableswap_{SPEC['name']}", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    task_ids = [t["task_id"] for t in SPEC["tasks"]]
    previous = None
    ops = []
    for spec in SPEC["tasks"]:
        params = {k: v for k, v in spec.items() if k not in ("operator", "independent")}
        params.setdefault("retries", 0)
        params.setdefault("tableswap_conn_id", "tableswap_test")
        op = OPERATORS[spec["operator"]](retry_delay=dt.timedelta(seconds=1), **params)
        ops.append(op)
        if spec.get("independent"):
            continue
        if previous is not None:
            previous >> op
        previous = op

    @task(trigger_rule="all_done")
    def collect(**context):
        ti = context["ti"]
        out = {tid: {"return_value": ti.xcom_pull(task_ids=tid),
                     "error": ti.xcom_pull(task_ids=tid, key=ERROR_XCOM_KEY)} for tid in task_ids}
        Path(os.environ["TABLESWAP_TEST_OUT"]).write_text(json.dumps(out))

    ops >> collect()


if __name__ == "__main__":
    run = dag.test()
    tis = {ti.task_id: {"state": str(ti.state), "try_number": ti.try_number} for ti in run.get_task_instances()}
    print("DAG_RESULT " + json.dumps({"state": str(run.state), "tasks": tis}))
