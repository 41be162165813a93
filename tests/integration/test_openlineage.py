"""OpenLineage events (tableswap/lineage/events.py, docs/operations.md#lineage): real swaps, a failed swap, a
rollback and a janitor run against the real metastore and Spark, their events collected by a local HTTP
receiver (tests/support/lineage_receiver.py) through the client's own ``OPENLINEAGE_URL`` and each validated against
the OpenLineage JSON schemas of the client's version; the naming rules of Spark's own integration; off
(nothing imported) when unconfigured; a failing or hanging server never fails nor holds up an operation."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tableswap import swap_partitions
from tableswap.lineage import events as lineage_events
from tableswap.core.names import temp_table_name
from tableswap.core.datasets import DatasetName, glue_symlink, hive_symlink, location_dataset, parse_parent
from tableswap.core.plan import PlannedChange, SwapPlan
from tableswap.errors import EmptyBatchError

from ..support.helpers import batch_df, create_events, today
from ..support.lineage_receiver import Receiver, validate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ol_env(monkeypatch, tmp_path):
    """No OpenLineage setting of the developer's leaks in, none of a test's leaks out (the client itself
    writes ``OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP__*`` into the environment from
    ``OPENLINEAGE_URL``), and the process's client is built afresh."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
    for key in saved:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.openlineage/openlineage.yml
    monkeypatch.chdir(tmp_path)  # no ./openlineage.yml
    lineage_events.flush()
    lineage_events.reset()
    yield monkeypatch
    assert lineage_events.flush(), "an event of this test is still being sent"
    lineage_events.reset()
    for key in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        del os.environ[key]
    os.environ.update(saved)


# --------------------------------------------------------------------------- naming (pure)


@pytest.mark.parametrize("location,namespace,name", [
    ("file:/tmp/wh/db.db/events", "file", "/tmp/wh/db.db/events"),
    ("file:///tmp/wh/events/", "file", "/tmp/wh/events"),
    ("/tmp/wh/events", "file", "/tmp/wh/events"),
    ("file:/", "file", "/"),
    ("s3a://bucket/wh/events/", "s3://bucket", "wh/events"),
    ("s3n://bucket/wh/events", "s3://bucket", "wh/events"),
    ("s3://bucket", "s3://bucket", "/"),
    ("gs://b/x/y", "gs://b", "x/y"),
    ("abfs://c@acct.dfs.core.windows.net/t", "abfss://c@acct.dfs.core.windows.net", "t"),
    ("wasb://c@acct.blob.core.windows.net/t/", "wasbs://c@acct.blob.core.windows.net", "t"),
    ("hdfs://nn:8020/wh/events/", "hdfs://nn:8020", "/wh/events"),
    ("hdfs:/wh/events", "hdfs", "/wh/events"),
    ("file:/tmp/a%20b/events", "file", "/tmp/a b/events"),  # java.net.URI.getPath() decodes
])
def test_a_location_is_named_as_spark_s_integration_names_it(location, namespace, name):
    assert location_dataset(location) == DatasetName(namespace, name)


def test_the_table_symlinks_are_spark_s():
    assert hive_symlink("thrift://hms-1.corp:9083", "sales", "events") == DatasetName("hive://hms-1.corp:9083",
                                                                                     "sales.events")
    # A highly available metastore: the first URI, as SparkConfUtils.getMetastoreUri takes it.
    assert hive_symlink("thrift://a:9083, thrift://b:9083", "d", "t").namespace == "hive://a:9083"
    assert glue_symlink("us-east-1", "111122223333", "d", "t") == DatasetName("arn:aws:glue:us-east-1:111122223333",
                                                                              "table/d/t")
    assert lineage_events.table_symlink("glue://us-east-1", "d", "t") is None  # the ARN needs the account
    assert lineage_events.table_symlink("glue://us-east-1", "d", "t", "arn:aws:glue:us-east-1:1") == DatasetName(
        "arn:aws:glue:us-east-1:1", "table/d/t")
    assert lineage_events.table_symlink("thrift://h:1", "d", "t") == DatasetName("hive://h:1", "d.t")


def test_the_parent_run_comes_from_the_orchestrator_s_variables():
    run = "01890000-0000-7000-8000-000000000001"
    root = "01890000-0000-7000-8000-000000000002"
    assert parse_parent(f"ns/dag.task/{run}") == ("ns", "dag.task", run)
    assert parse_parent("ns/only-two") is None and parse_parent("a/b/c/d") is None and parse_parent(None) is None
    got = lineage_events.parent_from_env({"OPENLINEAGE_PARENT_ID": f"airflow/dag.task/{run}"})
    assert got == {"run_id": run, "namespace": "airflow", "name": "dag.task", "root": (run, "airflow", "dag.task")}
    got = lineage_events.parent_from_env({"OPENLINEAGE_PARENT_ID": f"airflow/dag.task/{run}",
                                          "OPENLINEAGE_ROOT_PARENT_ID": f"airflow/dag/{root}"})
    assert got["root"] == (root, "airflow", "dag")
    context = {"parent": {"run": {"runId": run}, "job": {"namespace": "n", "name": "j"},
                          "root": {"run": {"runId": root}, "job": {"namespace": "rn", "name": "rj"}}}}
    got = lineage_events.parent_from_env({"OPENLINEAGE_CONTEXT": json.dumps(context),
                                          "OPENLINEAGE_PARENT_ID": "x/y/z"})
    assert got == {"run_id": run, "namespace": "n", "name": "j", "root": (root, "rn", "rj")}
    assert lineage_events.parent_from_env({"OPENLINEAGE_PARENT_ID": "malformed"}) is None
    assert lineage_events.parent_from_env({}) is None


def test_configured_only_the_client_s_way(ol_env, tmp_path):
    assert not lineage_events.enabled()
    ol_env.setenv("OPENLINEAGE_URL", "http://127.0.0.1:1")
    assert lineage_events.enabled()
    ol_env.setenv("OPENLINEAGE_DISABLED", "true")
    assert not lineage_events.enabled()
    ol_env.delenv("OPENLINEAGE_DISABLED")
    ol_env.delenv("OPENLINEAGE_URL")
    config = tmp_path / "ol.yml"
    ol_env.setenv("OPENLINEAGE_CONFIG", str(config))
    assert not lineage_events.enabled()  # named, but no such file
    config.write_text("transport:\n  type: console\n")
    assert lineage_events.enabled()
    ol_env.delenv("OPENLINEAGE_CONFIG")
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")  # the working directory's
    assert lineage_events.enabled()
    (tmp_path / "openlineage.yml").unlink()
    ol_env.setenv("OPENLINEAGE__TRANSPORT__TYPE", "console")
    assert lineage_events.enabled()


def test_unconfigured_nothing_is_imported_nor_sent(tmp_path):
    """An operation's lineage calls, unconfigured, import no openlineage module (a fresh interpreter)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT / "src"))
    code = ("import sys, tableswap.ops.commit, tableswap.ops.write.swap\n"
            "from tableswap.lineage import events as le\n"
            "le.run_started('s1', 'swap', 'd', 't', location='file:/x', metastore_uri='thrift://h:1')\n"
            "le.run_failed('s1', ValueError('x'))\n"
            "le.janitor_started('j', table=None, dry_run=False)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'openlineage'))\n"
            "print(le._SENDER is None)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["[]", "True"], done.stdout + done.stderr


def test_only_lineage_events_imports_openlineage():
    import re

    users = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src" / "tableswap").rglob("*.py")
                   if re.search(r"^\s*(import|from) openlineage", p.read_text(), flags=re.M))
    assert users == ["src/tableswap/lineage/events.py"]


def _plan(swap_id: str) -> SwapPlan:
    return SwapPlan(swap_id, "d", "t", ("dt",), (PlannedChange("add", ("2026-06-01",), "dt=2026-06-01", None,
                                                                  "file:/w/t/_tableswap/x/dt=2026-06-01"),))


def test_a_refusing_server_is_a_warning_and_a_silent_one_does_not_hold_the_operation(ol_env, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="tableswap")
    with Receiver(status=400) as refusing:
        ol_env.setenv("OPENLINEAGE_URL", refusing.url)
        lineage_events.run_started("s_refused", "swap", "d", "t", location="file:/w/t", metastore_uri="thrift://h:1")
        lineage_events.run_completed("s_refused", _plan("s_refused"))
        assert lineage_events.flush(60)
        assert [e["eventType"] for e in refusing.events] == ["START", "COMPLETE"]
    warnings = [r.getMessage() for r in caplog.records if "lineage.emit_failed" in r.getMessage()]
    assert len(warnings) == 2 and all("400" in w for w in warnings), warnings

    # A server that accepts the connection and never answers: the COMPLETE is waited for WAIT_S at most.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        lineage_events.reset()
        # The client's own settings (OPENLINEAGE__...): a 1 s timeout and no retry, so that the event given up
        # on here is over before the test ends.
        ol_env.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
        ol_env.setenv("OPENLINEAGE__TRANSPORT__URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        ol_env.setenv("OPENLINEAGE__TRANSPORT__TIMEOUT", "1")
        ol_env.setenv("OPENLINEAGE__TRANSPORT__RETRY", '{"total": 0}')
        ol_env.setattr(lineage_events, "WAIT_S", 0.3)
        began = time.monotonic()
        lineage_events.run_started("s_silent", "swap", "d", "t", location="file:/w/t", metastore_uri="thrift://h:1")
        lineage_events.run_completed("s_silent", _plan("s_silent"))
        took = time.monotonic() - began
        assert lineage_events.flush(5.0)  # the client gives up after its own timeout
    finally:
        silent.close()
    assert took < 2.0  # the client's own timeout (5 s) and retries are not waited out
    assert any("lineage.emit_slow" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- real operations


def _outputs(event):
    return [(o["namespace"], o["name"]) for o in event["outputs"]]


@pytest.mark.integration
def test_a_swap_a_rollback_and_a_janitor_run_report_the_real_table(spark, db, ts_env, tmp_path, metastore_uri,
                                                                    ol_env):
    from click.testing import CliRunner

    from tableswap.cli import main

    events = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 1}, "b0").write.insertInto(events)
    parent_run = "01890000-0000-7000-8000-0000000000aa"
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        ol_env.setenv("OPENLINEAGE_NAMESPACE", "etl")
        ol_env.setenv("OPENLINEAGE_PARENT_ID", f"airflow/daily.swap_events/{parent_run}")
        result = swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 1}, "b1"), events)
        rolled = CliRunner().invoke(main, ["rollback", events, "--yes", "--json"], catch_exceptions=False)
        assert rolled.exit_code == 0, rolled.output
        rollback_id = json.loads(rolled.stdout)["swap_id"]
        janitor = CliRunner().invoke(main, ["janitor", "run", "--grace", "0", "--force-short-grace", "--table",
                                            events, "--reference-scope", "table", "--json"], catch_exceptions=False)
        assert janitor.exit_code == 0, janitor.output
        assert lineage_events.flush(60)  # all sent (a loaded machine can take longer than WAIT_S)
        got = list(receiver.events)
    for event in got:
        validate(event)
    assert receiver.paths and set(receiver.paths) == {"/api/v1/lineage"}

    table_ns, table_name = "file", str(tmp_path / "events")
    symlink = {"namespace": "hive://" + metastore_uri.split("://")[1].split(",")[0], "name": events, "type": "TABLE"}
    swap_events = [e for e in got if e["job"]["name"] == f"tableswap.swap.{events}"]
    assert [e["eventType"] for e in swap_events] == ["START", "COMPLETE"]
    start, complete = swap_events
    assert start["run"]["runId"] == complete["run"]["runId"] == lineage_events.run_id_of(result.swap_id)
    assert complete["job"]["namespace"] == "etl"
    # The output is the target table, named by its location with the table as a symlink: never the temporary table.
    for event in swap_events:
        assert _outputs(event) == [(table_ns, table_name)]
        assert event["outputs"][0]["facets"]["symlinks"]["identifiers"] == [symlink]
        assert "__tswap_" not in json.dumps(event["outputs"])
    out = complete["outputs"][0]
    assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    partitions = out["outputFacets"]["outputSubset"]["outputCondition"]["partitions"]
    assert sorted((p["identifier"], p["dimensions"]["dt"]) for p in partitions) == [
        (f"dt={today(0)}", today(0)), (f"dt={today(1)}", today(1))]
    own = complete["run"]["facets"]["tableswap"]
    assert own["swapId"] == result.swap_id and own["kind"] == "swap"
    temp = temp_table_name("events", result.swap_id)
    assert own["temporaryTable"] == f"{db}.{temp}" and own["stagingLocation"].endswith(result.swap_id)
    assert own["replaced"] == [f"dt={today(0)}"] and own["added"] == [f"dt={today(1)}"]
    assert own["counts"] == {"added": 1, "replaced": 1, "dropped": 0} and own["seconds"] > 0
    parent = complete["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == parent_run and parent["job"] == {"namespace": "airflow",
                                                                      "name": "daily.swap_events", "facets": {}}

    rollback = [e for e in got if e["job"]["name"] == f"tableswap.rollback.{events}"]
    assert [e["eventType"] for e in rollback] == ["START", "COMPLETE"]
    assert rollback[1]["run"]["runId"] == lineage_events.run_id_of(rollback_id)
    assert _outputs(rollback[1]) == [(table_ns, table_name)]
    assert rollback[1]["run"]["facets"]["tableswap"]["rollbackOf"] == result.swap_id
    assert rollback[1]["run"]["facets"]["tableswap"]["dropped"] == [f"dt={today(1)}"]  # the swap added it
    assert rollback[1]["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"

    janitor_events = [e for e in got if e["job"]["name"] == f"tableswap.janitor.{events}"]
    assert [e["eventType"] for e in janitor_events] == ["START", "COMPLETE"]
    facet = janitor_events[1]["run"]["facets"]["tableswap_janitor"]
    report = json.loads(janitor.stdout)
    deleted = [o for o in report["outcomes"] if o["outcome"] in ("deleted", "already_gone")]
    assert facet["janitorRunId"] == report["run_id"] and facet["errorCount"] == 0
    assert facet["deletedCount"] == len(deleted) > 0 and facet["deletedBytes"] == report["bytes_freed"] > 0
    assert {d["location"] for d in facet["deleted"]} == {o["location"] for o in deleted}
    assert janitor_events[1]["outputs"] == [] and janitor_events[1]["inputs"] == []  # no dataset changed
    assert len(got) == 6


@pytest.mark.integration
def test_a_failed_swap_reports_fail_and_a_dry_run_nothing(spark, db, ts_env, tmp_path, ol_env):
    events = create_events(spark, db, tmp_path)
    empty = batch_df(spark, {(today(0),): 1}, "b1").limit(0)
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        with pytest.raises(EmptyBatchError) as failed:
            swap_partitions(empty, events)
        swap_partitions(batch_df(spark, {(today(0),): 1}, "b2"), events, dry_run=True)
        assert lineage_events.flush(60)  # all sent (a loaded machine can take longer than WAIT_S)
        got = list(receiver.events)
    for event in got:
        validate(event)
    assert [e["eventType"] for e in got] == ["START", "FAIL"]
    assert got[1]["run"]["runId"] == lineage_events.run_id_of(failed.value.swap_id)
    error = got[1]["run"]["facets"]["errorMessage"]
    assert error["message"].startswith("EmptyBatchError: ") and error["programmingLanguage"] == "PYTHON"
    assert _outputs(got[1]) == [("file", str(tmp_path / "events"))]
    assert "lifecycleStateChange" not in got[1]["outputs"][0]["facets"]  # nothing was overwritten


@pytest.mark.integration
def test_a_published_staged_swap_completes_the_run_its_stage_started(spark, db, ts_env, tmp_path, metastore_uri,
                                                                     ol_env):
    """A staged swap's run: START when staged, COMPLETE when published, whether the publish runs in the process
    that staged it or in another one (which knows nothing of the run but the journal's record), never a
    second START."""
    from tableswap import stage_partitions
    from tableswap.ops.write.staged import publish

    events = create_events(spark, db, tmp_path)
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        here = stage_partitions(batch_df(spark, {(today(0),): 2}, "a"), events)
        here.publish()
        elsewhere = stage_partitions(batch_df(spark, {(today(1),): 2}, "b"), events)
        lineage_events.reset()  # what another process knows of the run begun here: nothing
        publish(elsewhere.swap_id)
        assert lineage_events.flush(60)
        got = list(receiver.events)
    for event in got:
        validate(event)
    for staged, day in ((here, today(0)), (elsewhere, today(1))):
        run = [e for e in got if e["run"]["runId"] == lineage_events.run_id_of(staged.swap_id)]
        assert [e["eventType"] for e in run] == ["START", "COMPLETE"], staged.swap_id
        assert {e["job"]["name"] for e in run} == {f"tableswap.swap.{events}"}
        complete = run[1]
        assert complete["run"]["facets"]["tableswap"]["added"] == [f"dt={day}"]
        assert complete["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"


@pytest.mark.integration
def test_the_inputs_are_the_tables_and_paths_the_batch_read(spark, db, ts_env, tmp_path, metastore_uri, ol_env):
    from tableswap import merge_partitions

    events = create_events(spark, db, tmp_path)
    source = create_events(spark, db, tmp_path, name="raw_events")
    batch_df(spark, {(today(0),): 3}, "raw").write.insertInto(source)
    files = tmp_path / "late_files"
    batch_df(spark, {(today(0),): 2}, "late").write.parquet(str(files))
    batch = spark.table(source).unionByName(spark.read.parquet(str(files)))
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        swapped = swap_partitions(batch, events)
        merged = merge_partitions(batch_df(spark, {(today(0),): 1}, "fix"), events, on=["id"])
        assert lineage_events.flush(60)
        got = list(receiver.events)
    for event in got:
        validate(event)
    hive = "hive://" + metastore_uri.split("://")[1].split(",")[0]

    def inputs(swap_id):
        mine = [e for e in got if e["run"]["runId"] == lineage_events.run_id_of(swap_id)]
        assert [e["eventType"] for e in mine] == ["START", "COMPLETE"]
        return [(i["namespace"], i["name"], [(s["namespace"], s["name"]) for s in
                                              i["facets"].get("symlinks", {}).get("identifiers", [])])
                for i in mine[0]["inputs"]]

    # The source table by its location with its symlink, as Spark's integration names it; the files by path.
    assert inputs(swapped.swap_id) == [("file", str(tmp_path / "raw_events"), [(hive, source)]),
                                       ("file", str(files), [])]
    # A merge reads the partitions it rewrites at their locations: the target table itself, once.
    assert inputs(merged.swap_id) == [("file", str(tmp_path / "events"), [(hive, events)])]


def test_doctor_says_where_lineage_goes_and_whether_it_connects(ol_env, tmp_path):
    from tableswap.ops.inspect.doctor_checks import _check_lineage

    assert _check_lineage().status == "skip"
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url.replace("http://", "http://etl:s3cr3t@"))
        check = _check_lineage()
        assert check.status == "ok", check
        assert "http transport" in check.detail and f"{receiver.url.split('//')[1]}" in check.detail
        assert "s3cr3t" not in check.detail + str(check.facts)  # a password in the URL is masked
        assert not receiver.events  # a probe sends no event
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    ol_env.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{closed}")
    check = _check_lineage()
    assert check.status == "warn" and "cannot connect" in check.detail and str(closed) in check.detail
    ol_env.delenv("OPENLINEAGE_URL")
    config = tmp_path / "bad.yml"
    config.write_text("transport:\n  type: carrier-pigeon\n")
    ol_env.setenv("OPENLINEAGE_CONFIG", str(config))
    check = _check_lineage()
    assert check.status == "fail" and "refuses its configuration" in check.detail, check


def test_a_recovery_finishing_a_rollback_reports_on_that_rollback_s_run(ol_env):
    """``recover`` (Operation.resumed: ``what`` left at its default) names the job by the operation's kind and
    reuses the run id of the swap id it finishes, so the run begun in the crashed process completes."""
    from types import SimpleNamespace

    from tableswap.core.catalog import TableInfo
    from tableswap.core.records import SwapKind
    from tableswap.ops import notify
    from tableswap.ops.operation import Operation

    rt = SimpleNamespace(settings=SimpleNamespace(metastore_uri="thrift://hms:9083"), hooks=[])
    table = TableInfo("d", "t", "EXTERNAL_TABLE", "s3a://bucket/wh/t", (), ())
    op = Operation(SwapKind.ROLLBACK, "20260601_000000_aaaaaaaa", "d", "t", "s3a://bucket/wh/t", resume=True)
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        notify.run_started(rt, op, table)
        notify.committed(rt, op, _plan(op.swap_id), table, None)
        assert lineage_events.flush(60)  # all sent (a loaded machine can take longer than WAIT_S)
        got = list(receiver.events)
    for event in got:
        validate(event)
    assert [(e["eventType"], e["job"]["name"]) for e in got] == [("START", "tableswap.rollback.d.t"),
                                                                  ("COMPLETE", "tableswap.rollback.d.t")]
    assert {e["run"]["runId"] for e in got} == {lineage_events.run_id_of(op.swap_id)}
    assert _outputs(got[1]) == [("s3://bucket", "wh/t")]
    assert got[1]["outputs"][0]["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "hive://hms:9083", "name": "d.t", "type": "TABLE"}]
    assert "seconds" not in got[1]["run"]["facets"]["tableswap"]  # not known to a recovery


def test_a_discarded_staged_swap_ends_its_run_with_abort(spark, db, ts_env, tmp_path, metastore_uri, ol_env):
    """A staged swap's START (sent when it was staged) is ended by an ABORT when it is discarded: in the same
    process, in another one (its run rebuilt from the journal: the same run id and job), and by the janitor
    past [janitor] staged_ttl."""
    from tableswap import stage_partitions
    from tableswap.ops.janitor.run import run_janitor
    from tableswap.ops.write.staged import discard

    events = create_events(spark, db, tmp_path)
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        here = stage_partitions(batch_df(spark, {(today(0),): 2}, "a"), events)
        here.discard()
        elsewhere = stage_partitions(batch_df(spark, {(today(1),): 2}, "b"), events)
        lineage_events.reset()  # what another process knows of the run begun here: nothing
        discard(elsewhere.swap_id)
        expired = stage_partitions(batch_df(spark, {(today(2),): 2}, "c"), events)
        lineage_events.reset()
        run_janitor(grace="0s", force_short_grace=True, staged_ttl="0s", dry_run=False, table=events)
        assert lineage_events.flush(60)  # all sent (a loaded machine can take longer than WAIT_S)
        got = list(receiver.events)
    for event in got:
        validate(event)
    for staged in (here, elsewhere, expired):
        run = [e for e in got if e["run"]["runId"] == lineage_events.run_id_of(staged.swap_id)]
        assert [e["eventType"] for e in run] == ["START", "ABORT"], staged.swap_id
        assert {e["job"]["name"] for e in run} == {f"tableswap.swap.{events}"}
        abort = run[1]
        assert _outputs(abort) == [("file", str(tmp_path / "events"))]
        assert "lifecycleStateChange" not in abort["outputs"][0]["facets"]  # nothing was overwritten
        assert abort["run"]["facets"]["tableswap"]["swapId"] == staged.swap_id
        assert "__tswap_" not in json.dumps(abort["outputs"])


@pytest.mark.integration
def test_a_swap_group_is_one_run_with_every_table_as_an_output(spark, db, ts_env, tmp_path, metastore_uri, ol_env):
    """A swap group reports one run (START, then COMPLETE, FAIL or ABORT) with every table as an output, and its
    member swaps no run of their own: published in the process that staged it, or in another one (the run
    rebuilt from the journal: the same run id and job), discarded, and a group rollback."""
    from click.testing import CliRunner

    from tableswap import discard_group, publish_group, stage_group, swap_group
    from tableswap.cli import main

    events = create_events(spark, db, tmp_path)
    other = create_events(spark, db, tmp_path, name="clicks")
    tables = {events: str(tmp_path / "events"), other: str(tmp_path / "clicks")}
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        with swap_group(f"nightly_{db}") as here:
            here.swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 1}, "a"), events)
            here.swap_partitions(batch_df(spark, {(today(0),): 1}, "a"), other)
        with stage_group() as elsewhere:
            elsewhere.swap_partitions(batch_df(spark, {(today(1),): 3}, "b"), events)
            elsewhere.swap_partitions(batch_df(spark, {(today(1),): 3}, "b"), other)
        lineage_events.reset()  # what another process knows of the run begun here: nothing
        publish_group(elsewhere.group_id)
        with stage_group() as dropped:
            dropped.swap_partitions(batch_df(spark, {(today(2),): 1}, "c"), events)
            dropped.swap_partitions(batch_df(spark, {(today(2),): 1}, "c"), other)
        discard_group(dropped.group_id)
        rolled = CliRunner().invoke(main, ["rollback", "--group", elsewhere.group_id, "--yes", "--json"],
                                    catch_exceptions=False)
        assert rolled.exit_code == 0, rolled.output
        assert lineage_events.flush(60)
        got = list(receiver.events)
    for event in got:
        validate(event)
    assert not [e for e in got if e["job"]["name"].startswith(("tableswap.swap.", "tableswap.rollback."))]
    label = "+".join(sorted(tables))
    for group, job, ending in ((here, f"tableswap.group.nightly_{db}", "COMPLETE"),
                               (elsewhere, f"tableswap.group.{label}", "COMPLETE"),
                               (dropped, f"tableswap.group.{label}", "ABORT")):
        run = [e for e in got if e["run"]["runId"] == lineage_events.group_run_id(group.group_id)]
        assert [e["eventType"] for e in run] == ["START", ending], group.group_id
        assert {e["job"]["name"] for e in run} == {job}
        for event in run:
            assert sorted(_outputs(event)) == sorted(("file", path) for path in tables.values())
            own = event["run"]["facets"]["tableswap_group"]
            assert own["groupId"] == group.group_id and own["kind"] == "swap"
            assert own["members"] == {t: s.swap_id for t, s in group.staged.items()}
        end = run[1]
        changed = {o["name"]: "lifecycleStateChange" in o["facets"] for o in end["outputs"]}
        assert changed == {path: ending == "COMPLETE" for path in tables.values()}
    complete = [e for e in got if e["run"]["runId"] == lineage_events.group_run_id(here.group_id)][1]
    by_path = {o["name"]: o for o in complete["outputs"]}
    partitions = by_path[tables[events]]["outputFacets"]["outputSubset"]["outputCondition"]["partitions"]
    assert sorted(p["identifier"] for p in partitions) == [f"dt={today(0)}", f"dt={today(1)}"]
    assert complete["run"]["facets"]["tableswap_group"]["counts"] == {
        events: {"added": 2, "replaced": 0, "dropped": 0}, other: {"added": 1, "replaced": 0, "dropped": 0}}
    undo = [e for e in got if e["job"]["name"] == f"tableswap.rollback_group.{label}"]
    assert [e["eventType"] for e in undo] == ["START", "COMPLETE"]
    assert undo[1]["run"]["facets"]["tableswap_group"]["rollbackOf"] == elsewhere.group_id
    assert sorted(_outputs(undo[1])) == sorted(("file", path) for path in tables.values())
