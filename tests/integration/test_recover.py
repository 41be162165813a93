"""``tableswap recover``: its tests, here and where they live (one index, so that a reader looking for recover finds
them all; tests/unit/test_suite_shape.py checks that each test it names exists).

Here: recover beside writers that are alive, dead or frozen (issue 52, items 3 and 10). A swap's process refreshes
its journal record's heartbeat from its begin to its end (ops/operation.py, ``Heartbeat``); ``recover`` aborts a
swap still ``staging`` only once that heartbeat is older than ``--stale-after``, and then without waiting for a lock
the dead writer may still hold. The writers are tests/support/protocol_writer.py processes (a swap's catalog steps
without Spark; the batch written as Parquet by this session), held at a pause point, SIGKILLed at a crash point, or
frozen with SIGSTOP; their heartbeat interval is 0.1 s so that ``--stale-after 1s`` separates the live from the dead
in about a second.

Elsewhere, by aspect:

- each crash point of a swap, resolved from the command line; stale ``staging`` swaps:
  tests/integration/test_admin_cli.py::test_recover_resolves_each_crash_point,
  tests/integration/test_admin_cli.py::test_recover_aborts_stale_staging_swaps_only_when_stale
- a writer process killed at every step (and at random moments), then recover and a rerun converge:
  tests/integration/test_crash_every_step.py::test_a_writer_killed_at_each_step_converges_after_recover_and_a_rerun,
  tests/integration/test_crash_every_step.py::test_writers_killed_at_random_moments_converge_after_recover_and_a_rerun
- a flip that failed part way (``CommitStateUnknownError``) or whose journal commit failed:
  tests/integration/test_flip_faults.py::test_a_metastore_lost_mid_flip_is_commit_state_unknown_and_recover_decides,
  tests/integration/test_flip_faults.py::test_a_journal_failure_after_the_flip_says_the_flip_happened_and_recover_converges,
  tests/integration/test_concurrency.py::test_failure_during_the_flip_says_recover_and_recover_completes_it
- the drops of a replace scope: tests/integration/test_replace_scope.py::test_a_drop_interrupted_by_a_failure_is_completed_by_recover,
  tests/integration/test_hostile_names.py::test_recover_completes_the_drop_of_a_look_alike_partition_only
- staged swaps and their publish: tests/integration/test_staged.py::test_the_janitor_and_recover_leave_a_staged_swap_alone_until_its_ttl,
  tests/integration/test_staged.py::test_a_crash_during_publish_converges_by_recover_or_a_rerun,
  tests/integration/test_publish_interrupted.py::test_a_publish_interrupted_at_each_step_converges_and_is_never_listed_staged_while_live
- swap groups (all or nothing): tests/integration/test_groups.py::test_a_writer_killed_during_the_group_commit_converges_to_all_or_nothing
- storage and clusters: tests/integration/test_s3a_swaps.py::test_recover_resolves_a_crash_at_each_step_of_the_flip_on_s3a,
  tests/integration/test_s3a_swaps.py::test_magic_committer_swap_issues_no_copy_and_a_crashed_one_is_recovered,
  tests/integration/test_hdfs_swaps.py::test_recover_completes_a_swap_whose_writer_was_killed_after_add_on_hdfs,
  tests/integration/test_yarn.py::test_the_application_master_killed_after_the_intent_a_second_attempt_commits_and_recover_aborts_the_first
- other catalogs and journals: tests/integration/test_glue.py::test_a_lease_lost_between_chunks_stops_the_flip_and_recover_completes_it,
  tests/integration/test_glue_processes.py::test_a_writer_killed_at_each_step_converges_by_recover_and_rerun,
  tests/integration/test_catalog_port.py::test_the_operations_reach_the_catalog_through_the_port_only,
  tests/integration/test_secured_metastore.py::test_swap_recover_rollback_and_janitor_against_a_kerberized_metastore,
  tests/integration/test_pg_journal_cli.py::test_swap_history_show_rollback_recover_janitor_on_a_postgres_journal
- what readers and other tools see: tests/integration/test_trino_readers.py::test_trino_sees_what_spark_sees_after_a_recovered_flip,
  tests/integration/test_openlineage.py::test_a_recovery_finishing_a_rollback_reports_on_that_rollback_s_run,
  tests/integration/test_repair.py::test_crash_before_the_manifest_is_finished_never_claims_more,
  tests/integration/test_airflow.py::test_a_dag_repairs_rolls_back_cleans_up_and_recovers_against_the_real_metastore
- its pure parts: tests/unit/test_operation.py::test_recover_rebuilds_the_operation_from_the_journal_record,
  tests/unit/test_lineage.py::test_recover_classifies_items_and_decides,
  tests/unit/test_hdfs_spellings.py::test_recover_finds_a_partition_at_its_old_directory_spelled_through_a_namenode,
  tests/unit/test_janitor_plan.py::test_orphans_in_flight_unfinished_and_crashed
- the campaign (not in the default run): tests/campaign/test_crashes.py::test_crash_at_point_then_recover_and_rerun_converges,
  tests/campaign/test_metastore_faults.py::test_metastore_killed_mid_swap
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import faults
from tableswap.cli import main as cli_main
from tableswap.core import locations as loc
from tableswap.journal import Journal

from ..support.helpers import (batch_df, create_events, reader_view, release_locks_of_killed_writer, start_crashing_writer,
                      today, wait_or_kill)

pytestmark = pytest.mark.integration

HEARTBEAT = ["--heartbeat-s", "0.1"]
GOOD = {(today(0),): (5, ("good",)), (today(1),): (5, ("good",))}
NEW_BATCH = {today(1): 3, today(2): 2}  # replaces day 1, adds day 2
NEW = {(today(0),): (5, ("good",)), (today(1),): (3, ("new",)), (today(2),): (2, ("new",))}


def _table(spark, db, tmp_path) -> str:
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 5, (today(1),): 5}, "good").write.insertInto(table)
    return table


def _writer(spark, hms, tmp_path, ts_env, table, *, crash_at: str = "", pause_at: str | None = None):
    """A protocol writer of ``table``'s next swap (batch NEW_BATCH), heartbeating every 0.1 s."""
    env = dict(ts_env)
    if pause_at:
        env.update({faults.PAUSE_ENV: pause_at, faults.PAUSE_FILE_ENV: str(tmp_path / "pause")})
    return start_crashing_writer(spark, hms, table, tmp_path / "writer", crash_at=crash_at, rows_per_day=NEW_BATCH,
                                 batch="new", env=env, args=HEARTBEAT)


def _wait_for(condition, what: str, proc=None, log: Path | None = None, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the writer exited ({proc.returncode}) before {what}: "
                                 f"{log.read_text()[-3000:] if log else ''}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _age_s(stamp: str | None) -> float:
    return (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(stamp)).total_seconds() if stamp else 0.0


def _last_beat(record) -> str:
    """The record's heartbeat (its start for a journal without one: checked separately)."""
    return getattr(record, "heartbeat_at", None) or record.started_at


def _the_swap(journal: Journal, db: str):
    swaps = journal.list_swaps(db, "events")
    assert len(swaps) == 1, swaps
    return swaps[0]


def _recover(*args: str) -> dict:
    result = CliRunner().invoke(cli_main, ["recover", *args, "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 4), result.output
    return json.loads(result.stdout)


def test_recover_leaves_a_live_writer_staging_longer_than_stale_after_and_the_writer_commits(
        spark, db, tmp_path, hms, ts_env):
    """Item 3: a writer paused after its staging write (a batch write that takes longer than --stale-after) is
    live: its heartbeat goes on. `recover --stale-after 1s` leaves it; released, the writer commits."""
    table = _table(spark, db, tmp_path)
    proc, log = _writer(spark, hms, tmp_path, ts_env, table, pause_at="after_staging_write")
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    try:
        _wait_for(lambda: (tmp_path / "pause.reached").exists(), "the pause", proc, log)
        # Staging for longer than --stale-after: what the rule on its start time took for a crash.
        _wait_for(lambda: _age_s(_the_swap(journal, db).started_at) > 2.0, "a swap older than --stale-after")
        report = _recover("--table", table, "--stale-after", "1s")
        live = _the_swap(journal, db)
        assert report["resolutions"] == [], report
        assert live.state == "staging" and hms.table_exists(db, live.temp_table)
        assert journal.deletions_of(db, "events") == []  # its staged data is not queued for the janitor
        assert _age_s(live.heartbeat_at) < 1.0 < _age_s(live.started_at)
    finally:
        (tmp_path / "pause.go").touch()
    assert wait_or_kill(proc) == 0, log.read_text()[-3000:]
    assert "committed" in log.read_text()
    assert _the_swap(journal, db).state == "committed"
    assert reader_view(spark, table) == NEW


@pytest.mark.fault
@pytest.mark.parametrize("point", ["after_staging_write", "after_lock"])
def test_recover_aborts_a_killed_writer_once_its_heartbeat_stops(spark, db, tmp_path, hms, ts_env, point):
    """Items 3 and 10: a writer SIGKILLed while staging (after its staging write; after taking the table lock,
    which the metastore keeps until its lock timeout) is aborted by `recover --stale-after 1s` once its heartbeat
    is a second old, without waiting for its lock: its temporary table dropped, its staged data queued once."""
    table = _table(spark, db, tmp_path)
    proc, log = _writer(spark, hms, tmp_path, ts_env, table, crash_at=point)
    assert wait_or_kill(proc) == -signal.SIGKILL, log.read_text()[-3000:]
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    dead = _the_swap(journal, db)
    assert dead.state == "staging"
    held = [h for h in hms.lock_holders(db, "events") if f"swap={dead.swap_id}" in (h.agent_info or "")]
    assert bool(held) == (point == "after_lock")
    try:
        _wait_for(lambda: _age_s(_last_beat(_the_swap(journal, db))) > 1.5, "its heartbeat to be stale")
        report = _recover("--table", table, "--stale-after", "1s")
        [res] = report["resolutions"]
        assert (res["swap_id"], res["outcome"], res["state_after"]) == (dead.swap_id, "aborted", "aborted"), res
        assert "heartbeat" in res["detail"] and dead.heartbeat_at is not None
        if held:  # aborted with the dead writer's lock still on the table: the report says until when
            assert hms.lock_holders(db, "events") and "metastore frees it by" in res["detail"], res
        assert _the_swap(journal, db).state == "aborted"
        assert not hms.table_exists(db, dead.temp_table)
        assert [(d.reason, d.location) for d in journal.deletions_of(db, "events")] == [
            ("orphan", dead.staging_location)]
        assert Path(loc.to_local_path(dead.staging_location)).is_dir()  # kept for the janitor's grace
        assert reader_view(spark, table) == GOOD
        assert _recover("--table", table, "--stale-after", "0s")["resolutions"] == []  # once
    finally:
        release_locks_of_killed_writer(hms, db, "events", proc)


@pytest.mark.fault
def test_a_frozen_writer_that_recover_aborted_fails_at_its_intent_and_never_flips(spark, db, tmp_path, hms, ts_env):
    """Item 3: a writer frozen (SIGSTOP, its heartbeat thread too) for longer than --stale-after is aborted by
    recover; thawed and released, it takes the lock and fails at its intent with an error that says recover
    aborted it and nothing changed: the table keeps its data, no partition points at the aborted batch."""
    table = _table(spark, db, tmp_path)
    proc, log = _writer(spark, hms, tmp_path, ts_env, table, pause_at="after_staging_write")
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    try:
        _wait_for(lambda: (tmp_path / "pause.reached").exists(), "the pause", proc, log)
        os.kill(proc.pid, signal.SIGSTOP)
        _wait_for(lambda: _age_s(_last_beat(_the_swap(journal, db))) > 1.5, "its heartbeat to be stale")
        [res] = _recover("--table", table, "--stale-after", "1s")["resolutions"]
        assert res["outcome"] == "aborted", res
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        (tmp_path / "pause.go").touch()
    assert wait_or_kill(proc) != 0
    output = log.read_text()
    assert "SwapConflictError" in output and "is no longer in progress in the journal: it is aborted" in output
    assert "its process went silent while staging" in output and "nothing was changed" in output, output[-3000:]
    frozen = _the_swap(journal, db)
    assert frozen.state == "aborted" and frozen.intent_at is None and frozen.items == ()
    assert reader_view(spark, table) == GOOD
    assert not [p for p in hms.list_partitions(db, "events") if p.swap_id == frozen.swap_id]
    assert hms.lock_holders(db, "events") == []  # it released its lock on the way out
