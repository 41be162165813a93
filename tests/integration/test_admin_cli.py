"""The admin CLI (`tableswap history`, `tableswap show`, `tableswap rollback`, `tableswap recover`) driven through
its entry point, against the real metastore, checking what a reader sees after each step (recover's other tests:
tests/integration/test_recover.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap.core import locations as loc
from tableswap import swap_partitions, swap_table
from tableswap.cli import main
from tableswap.journal import Journal
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.runtime import Runtime

from ..support.helpers import (batch_df, create_events, metastore_snapshot, partition_locations, reader_view,
                      release_locks_of_killed_writer, start_crashing_writer, today)

pytestmark = pytest.mark.integration


def cli(*args: str, expect: int | None = 0):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if expect is not None:
        assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result


def cli_json(*args: str, expect: int | None = 0):
    result = cli(*args, "--json", expect=expect)
    return json.loads(result.stdout)


def journal(ts_env) -> Journal:
    return Journal(ts_env["TABLESWAP_JOURNAL_URL"])


def deletion_states(ts_env, db: str, table: str = "events") -> dict[tuple[str, str], str]:
    return {(d.swap_id, loc.normalize(d.location)): d.state for d in journal(ts_env).deletions_of(db, table)}


def events_with_bad_backfill(spark, db, tmp_path):
    """Three good days written by plain Spark, then a bad backfill replacing day 1 and adding day 3."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 5 for i in range(3)}, "good").write.insertInto(table)
    bad = swap_partitions(batch_df(spark, {(today(1),): 2, (today(3),): 1}, "bad"), table)
    return table, bad


GOOD = {(today(0),): (5, ("good",)), (today(1),): (5, ("good",)), (today(2),): (5, ("good",))}
BAD = {**GOOD, (today(1),): (2, ("bad",)), (today(3),): (1, ("bad",))}


# ---------------------------------------------------------------------- rollback
def test_rollback_partition_then_rollback_of_rollback_then_to(spark, db, tmp_path, hms, ts_env):
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    good_day1 = loc.normalize(bad.replaced[0].old_location)
    assert reader_view(spark, table) == BAD

    # One partition back.
    dry = cli("rollback", table, "--partition", f"dt={today(1)}", "--dry-run")
    assert "dry run" in dry.output and bad.replaced[0].old_location in dry.output
    assert reader_view(spark, table) == BAD
    r1 = cli_json("rollback", table, "--partition", f"dt={today(1)}", "--yes")
    assert r1["kind"] == "rollback" and r1["rollback_of"] == bad.swap_id
    assert [c["partition"] for c in r1["replaced"]] == [f"dt={today(1)}"]
    assert reader_view(spark, table) == {**GOOD, (today(3),): (1, ("bad",))}
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    assert parts[(today(1),)].parameters[SWAP_ID_PARAM] == r1["swap_id"]  # a rollback is stamped too
    # The restored location is no longer queued for deletion; the bad one now is.
    states = deletion_states(ts_env, db)
    assert states[(bad.swap_id, good_day1)] == "restored"
    assert states[(r1["swap_id"], loc.normalize(bad.replaced[0].new_location))] == "pending"

    # Rollback without options undoes the last swap: the rollback itself.
    r2 = cli_json("rollback", table, "--yes")
    assert r2["rollback_of"] == r1["swap_id"]
    assert reader_view(spark, table) == BAD
    states = deletion_states(ts_env, db)
    assert states[(r1["swap_id"], loc.normalize(bad.replaced[0].new_location))] == "restored"
    assert states[(r2["swap_id"], good_day1)] == "pending"

    # --to the bad swap: the state just before it, dropping the partition it added.
    r3 = cli_json("rollback", table, "--to", bad.swap_id, "--yes")
    assert [c["partition"] for c in r3["dropped"]] == [f"dt={today(3)}"]
    assert reader_view(spark, table) == GOOD
    assert Path(loc.to_local_path(bad.added[0].new_location)).is_dir()  # dropped metadata only

    swaps = {s["swap_id"]: s for s in cli_json("history", table)["swaps"]}
    assert swaps[bad.swap_id]["status"] == "rolled back"
    assert swaps[r1["swap_id"]]["status"] == "rolled back"
    assert swaps[r3["swap_id"]]["status"] == "committed"
    assert all(s["state"] == "committed" for s in swaps.values())
    assert journal(ts_env).list_swaps(db, "events", states=["pending", "staging"]) == []
    assert hms.lock_holders(db, "events") == []


def test_rollback_whole_last_swap_and_nothing_left_to_do(spark, db, tmp_path, hms, ts_env):
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    cli("rollback", table, "--yes")
    assert reader_view(spark, table) == GOOD
    assert sorted(partition_locations(hms, db, "events")) == [(today(i),) for i in range(3)]
    # Undo the rollback: the backfill is back, including the partition it added.
    cli("rollback", table, "--yes")
    assert reader_view(spark, table) == BAD


def test_rollback_unpartitioned_table(spark, db, tmp_path, hms, ts_env):
    table = f"{db}.dim"
    spark.sql(f"CREATE TABLE {table} (id bigint, batch string) USING parquet "
              f"LOCATION '{(tmp_path / 'dim').as_uri()}'")
    spark.createDataFrame([(i, "good") for i in range(4)], "id bigint, batch string").write.insertInto(table)
    before = hms.get_table(db, "dim").location
    bad = swap_table(spark.createDataFrame([(1, "bad")], "id bigint, batch string"), table)

    shown = cli_json("show", table)
    assert shown["partitioned"] is False
    [row] = shown["partitions"]
    assert row["set_by"] == bad.swap_id and row["can_roll_back"] is True
    assert loc.same(row["previous_location"], before)

    out = cli("rollback", table, "--yes").output
    assert "rolled back" in out and "REFRESH TABLE" in out
    info = hms.get_table(db, "dim")
    assert loc.same(info.location, before) and info.swap_id != bad.swap_id
    spark.catalog.refreshTable(table)
    assert sorted(r.batch for r in spark.table(table).collect()) == ["good"] * 4
    cli("rollback", table, "--yes")  # and forward again
    spark.catalog.refreshTable(table)
    assert [r.batch for r in spark.table(table).collect()] == ["bad"]


# ---------------------------------------------------------------------- refusals
def test_rollback_refused_when_old_data_is_gone(spark, db, tmp_path, hms, ts_env):
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    before = metastore_snapshot(hms, db)
    old = bad.replaced[0].old_location

    # The janitor deleted it (queue row 'deleted'; its files happen to be still there).
    journal(ts_env).set_deletion_state(bad.swap_id, old, "deleted")
    res = cli("rollback", table, "--yes", expect=5)
    assert "deleted by the janitor" in res.output and "Nothing was changed" in res.output
    assert cli_json("rollback", table, "--dry-run", expect=5)["error_type"] == "UnsafeOperationError"
    # Gone from storage (the row says pending again, but the directory is missing).
    journal(ts_env).set_deletion_state(bad.swap_id, old, "pending")
    shutil.rmtree(loc.to_local_path(old))
    res = cli("rollback", table, "--partition", f"dt={today(1)}", "--yes", expect=5)
    assert "no longer exists" in res.output
    history = cli_json("history", table, "--partition", f"dt={today(1)}")
    assert history["swaps"][0]["items"][0]["old_exists"] is False
    assert "NO" in cli("history", table).output

    assert metastore_snapshot(hms, db) == before
    assert reader_view(spark, table) == BAD
    assert [s.kind for s in journal(ts_env).list_swaps(db, "events")] == ["partitions"]  # nothing journaled
    # The partition the swap added can still be rolled back on its own (dropping it needs no old data).
    cli("rollback", table, "--partition", f"dt={today(3)}", "--yes")
    assert (today(3),) not in reader_view(spark, table)


def test_rollback_conflict_when_partition_changed_outside_tableswap(spark, db, tmp_path, hms, ts_env):
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    other = tmp_path / "elsewhere"
    spark.createDataFrame([(9, "v", "manual")], "id bigint, value string, batch string") \
        .write.parquet(str(other))
    spark.sql(f"ALTER TABLE {table} PARTITION (dt='{today(1)}') SET LOCATION '{other.as_uri()}'")
    before = metastore_snapshot(hms, db)
    res = cli_json("rollback", table, "--yes", expect=4)
    assert res["error_type"] == "SwapConflictError" and f"dt={today(1)}" in res["error"]
    # The error's data, without parsing its message: the table and one line per conflict.
    assert res["table"] == table and [c for c in res["conflicts"] if c.startswith(f"dt={today(1)}:")], res
    assert metastore_snapshot(hms, db) == before
    assert reader_view(spark, table)[(today(1),)] == (1, ("manual",))


def test_rollback_conflict_when_partition_changed_after_the_plan(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """The plan was made (and shown); before the rollback locks, a writer swaps the partition again."""
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    real_lock = Runtime.table_lock
    competitor = []

    def lock_after_competitor(rt, client, db, name, owner):
        if not competitor:
            competitor.append(None)  # the competitor's own lock call must not recurse
            competitor[0] = swap_partitions(batch_df(spark, {(today(1),): 7}, "newer"), table)
        return real_lock(rt, client, db, name, owner)

    monkeypatch.setattr(Runtime, "table_lock", lock_after_competitor)
    res = cli("rollback", table, "--yes", expect=4)
    assert "changed since" in res.output
    assert reader_view(spark, table) == {**BAD, (today(1),): (7, ("newer",))}
    swaps = {s.swap_id: s for s in journal(ts_env).list_swaps(db, "events")}
    [failed] = [s for s in swaps.values() if s.kind == "rollback"]
    assert failed.state == "failed"
    # Nothing was marked restored by the failed rollback.
    assert "restored" not in deletion_states(ts_env, db).values()
    assert hms.lock_holders(db, "events") == []
    # Planned again, the rollback undoes the newer swap.
    monkeypatch.setattr(Runtime, "table_lock", real_lock)
    assert cli_json("rollback", table, "--yes")["rollback_of"] == competitor[0].swap_id
    assert reader_view(spark, table) == BAD


def test_rollback_without_terminal_needs_yes_and_unknown_things_are_not_found(spark, db, tmp_path, ts_env):
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    assert cli("rollback", table, expect=2).exit_code == 2  # no terminal: --yes required
    assert reader_view(spark, table) == BAD
    assert cli("rollback", f"{db}.nope", "--yes", expect=3).exit_code == 3
    assert cli("rollback", table, "--to", "20990101_000000_deadbeef", "--yes", expect=3).exit_code == 3
    assert cli("rollback", table, "--partition", f"dt={today(9)}", "--yes", expect=3).exit_code == 3
    assert cli("rollback", table, "--partition", "nope=1", "--yes", expect=1).exit_code == 1


# ---------------------------------------------------------------------- history / show: text and JSON
def test_history_and_show_json_carry_the_same_facts_as_text(spark, db, tmp_path, ts_env):
    table, bad = events_with_bad_backfill(spark, db, tmp_path)
    second = swap_partitions(batch_df(spark, {(today(2),): 3}, "second"), table)

    hist = cli_json("history", table)
    text = cli("history", table).output
    assert [s["swap_id"] for s in hist["swaps"]] == [second.swap_id, bad.swap_id]  # newest first
    for swap in hist["swaps"]:
        assert swap["swap_id"] in text and swap["status"].upper() in text
        assert swap["user"] and f"{swap['user']}@{swap['host']}" in text
        assert swap["app_id"] and swap["app_id"] in text
        for item in swap["items"]:
            assert item["partition"] in text and item["new_location"] in text
            if item["old_location"]:
                assert item["old_location"] in text and item["old_exists"] is True
    first = hist["swaps"][1]
    assert (first["added"], first["replaced"], first["dropped"]) == (1, 1, 0)
    assert "1 added, 1 replaced, 0 dropped" in text
    assert cli_json("history", table, "--limit", "1")["swaps"][0]["swap_id"] == second.swap_id
    only = cli_json("history", table, "--partition", f"dt={today(3)}")["swaps"]
    assert [s["swap_id"] for s in only] == [bad.swap_id]

    shown = cli_json("show", table)
    shown_text = cli("show", table).output
    rows = {p["partition"]: p for p in shown["partitions"]}
    assert rows[f"dt={today(0)}"]["set_by"] is None and not rows[f"dt={today(0)}"]["can_roll_back"]
    assert rows[f"dt={today(2)}"]["set_by"] == second.swap_id and rows[f"dt={today(2)}"]["can_roll_back"]
    assert rows[f"dt={today(3)}"]["set_by"] == bad.swap_id and "drops it" in rows[f"dt={today(3)}"]["note"]
    assert shown["last_swap"] == second.swap_id
    for name, row in rows.items():
        assert name in shown_text and row["location"] in shown_text
        if row["set_by"]:
            assert row["set_by"] in shown_text
        if row["previous_location"]:
            assert row["previous_location"] in shown_text


# ---------------------------------------------------------------------- recover
def start_crashing_swap(spark, hms, tmp_path, ts_env, table: str, crash_at: str, rows_per_day: dict[str, int],
                        batch: str):
    """A writer of ``table``'s next swap SIGKILLed at ``crash_at`` (tests/support/helpers.py's start_crashing_writer:
    its catalog steps in a process without Spark; tests/integration/test_crash_every_step.py kills Spark writers)."""
    return start_crashing_writer(spark, hms, table, tmp_path / f"proc-{table}-{crash_at}", crash_at=crash_at,
                                 rows_per_day=rows_per_day, batch=batch, env=ts_env)


def wait_crashed(started) -> None:
    proc, log = started
    proc.wait(timeout=300)
    assert proc.returncode == -9, log.read_text()[-3000:]


def test_recover_resolves_each_crash_point(spark, db, tmp_path, hms, ts_env):
    """Three writers are SIGKILLed: between journal intent and flip (after_intent), between the two
    flip calls (after_add) and between flip and journal commit (after_alter) (their batches written by this
    session, their catalog steps in processes of their own). One `recover` run
    resolves each from the metastore's state (their abandoned locks are released first, as the server
    would after its lock timeout: tests/support/helpers.py's release_locks_of_killed_writer)."""
    tables = {}
    for point in ("after_intent", "after_add", "after_alter"):
        tables[point] = create_events(spark, db, tmp_path, name=f"ev_{point}")
        batch_df(spark, {(today(0),): 5, (today(1),): 5}, "good").write.insertInto(tables[point])
    new_batch = {today(1): 3, today(2): 2}  # replaces day 1, adds day 2
    procs = {p: start_crashing_swap(spark, hms, tmp_path, ts_env, t, p, new_batch, "new") for p, t in tables.items()}
    for started in procs.values():
        wait_crashed(started)
    for point, (proc, _) in procs.items():
        assert release_locks_of_killed_writer(hms, db, f"ev_{point}", proc)  # each died holding the lock
    good = {(today(0),): (5, ("good",)), (today(1),): (5, ("good",))}
    new = {(today(0),): (5, ("good",)), (today(1),): (3, ("new",)), (today(2),): (2, ("new",))}
    jr = journal(ts_env)
    pending = {s.table_name: s for s in jr.list_swaps(db, states=["pending"])}
    assert sorted(pending) == ["ev_after_add", "ev_after_alter", "ev_after_intent"]
    # What readers see while the swaps are unresolved: each partition entirely old or entirely new.
    assert reader_view(spark, tables["after_intent"]) == good
    assert reader_view(spark, tables["after_add"]) == {**good, (today(2),): (2, ("new",))}
    assert reader_view(spark, tables["after_alter"]) == new
    assert cli_json("show", tables["after_alter"])["unfinished_swaps"] == [pending["ev_after_alter"].swap_id]
    assert cli("rollback", tables["after_alter"], "--yes", expect=4).exit_code == 4  # recover first

    report = cli_json("recover")
    outcomes = {r["table"].split(".")[1]: r for r in report["resolutions"]}
    assert {k: v["outcome"] for k, v in outcomes.items()} == {
        "ev_after_intent": "aborted", "ev_after_add": "completed", "ev_after_alter": "committed"}
    assert report["ok"] is True and report["needs_attention"] == []

    states = {s.table_name: s.state for s in jr.list_swaps(db)}
    assert states == {"ev_after_intent": "aborted", "ev_after_add": "committed", "ev_after_alter": "committed"}
    assert reader_view(spark, tables["after_intent"]) == good
    assert reader_view(spark, tables["after_add"]) == new
    assert reader_view(spark, tables["after_alter"]) == new
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]  # temporary tables dropped
    for name in ("ev_after_add", "ev_after_alter"):
        swap = pending[name]
        queued = {(d.reason, loc.normalize(d.location)) for d in jr.deletions_of(db, name)}
        old_day1 = [i.old_location for i in swap.items if i.action == "replace"]
        assert queued == {("displaced", loc.normalize(old_day1[0]))}
        parts = {p.values: p.swap_id for p in hms.list_partitions(db, name)}
        assert parts[(today(1),)] == parts[(today(2),)] == swap.swap_id
    aborted = pending["ev_after_intent"]
    assert [(d.reason, d.location) for d in jr.deletions_of(db, "ev_after_intent")] == [
        ("orphan", aborted.staging_location)]

    # Nothing left: recover is idempotent.
    assert "nothing to recover" in cli("recover").output
    # Rerunning the aborted swap converges to the same table as an uninterrupted run.
    rerun = swap_partitions(batch_df(spark, {(today(1),): 3, (today(2),): 2}, "new"), tables["after_intent"])
    assert reader_view(spark, tables["after_intent"]) == new
    assert jr.get_swap(rerun.swap_id).state == "committed"
    # A recovered swap can be rolled back like any other.
    cli("rollback", tables["after_alter"], "--yes")
    assert reader_view(spark, tables["after_alter"]) == good


def test_recover_aborts_stale_staging_swaps_only_when_stale(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 5}, "good").write.insertInto(table)
    wait_crashed(start_crashing_swap(spark, hms, tmp_path, ts_env, table, "after_staging_write", {today(0): 1},
                                     "new"))
    [stuck] = journal(ts_env).list_swaps(db, "events")
    assert stuck.state == "staging" and hms.table_exists(db, stuck.temp_table)

    assert "nothing to recover" in cli("recover", "--table", table).output  # younger than --stale-after
    report = cli_json("recover", "--table", table, "--stale-after", "0s")
    [res] = report["resolutions"]
    assert (res["swap_id"], res["outcome"], res["state_after"]) == (stuck.swap_id, "aborted", "aborted")
    assert not hms.table_exists(db, stuck.temp_table)
    assert [d.reason for d in journal(ts_env).deletions_of(db, "events")] == ["orphan"]
    assert reader_view(spark, table) == {(today(0),): (5, ("good",))}
