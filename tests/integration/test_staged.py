"""Write, audit, publish (docs/audit.md): staged swaps against the real metastore, Spark and the journal.

stage → the table is unchanged and the staged table reads the batch → publish → the table has it (as a direct
swap would); stage → discard; an audit that refuses the batch; a publish from another process (the CLI); a swap
committed between stage and publish (serial-equivalent, or a conflict with ``if_unchanged_since``); the janitor
and ``recover`` leave a staged swap alone. The commands: `tableswap staged`, `tableswap diff`, `tableswap publish`
and `tableswap discard`, each also as a dry run (docs/cli.md#dry-runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tableswap
from tableswap import AuditFailedError, StagedSwap, stage_partitions, stage_table, swap_partitions
from tableswap.core import locations as loc
from tableswap.errors import NotFoundError, NotStagedError, StagedBatchChangedError, SwapConflictError
from tableswap.journal import Journal
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.restore.recover import recover
from tableswap.ops.inspect.history import history
from tableswap.ops.write import staged as staged_ops, staged_view

from ..support.helpers import SRC, batch_df, create_events, file_tree, metastore_snapshot, reader_view, today
from .test_glue_swaps import create_glue_table, glue_tables, glue_view, partitions

pytestmark = pytest.mark.integration


def _journal(ts_env) -> Journal:
    return Journal(ts_env["TABLESWAP_JOURNAL_URL"])


def _temp_tables(hms, db: str) -> list[str]:
    return [t for t in hms.list_tables(db) if "__tswap_" in t]


def _cli(args: list[str], ts_env, **env) -> subprocess.Popen:
    """``tableswap ARGS --json`` in a process of its own (no Spark in it), waited for: ``.returncode``, ``.pid``,
    its output as ``.out`` and ``.err``."""
    full = {**os.environ, **ts_env, "PYTHONPATH": str(SRC), **env}
    proc = subprocess.Popen([sys.executable, "-m", "tableswap", *args, "--json"], env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.out, proc.err = proc.communicate(timeout=300)
    return proc


def _cli_here(*args: str):
    """``tableswap ARGS --json`` in this process (click's runner)."""
    from click.testing import CliRunner

    from tableswap.cli import main

    return CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)


def _cli_text(*args: str):
    """``tableswap ARGS`` in this process, its text output."""
    from click.testing import CliRunner

    from tableswap.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_stage_leaves_the_table_unchanged_and_publish_gives_what_a_swap_gives(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    days = [today(i) for i in range(3)]
    batch_df(spark, {(d,): 5 for d in days}, "initial").write.insertInto(table)
    before_view, before_meta = reader_view(spark, table), metastore_snapshot(hms, db)

    staged = stage_partitions(batch_df(spark, {(days[1],): 7, (today(3),): 4}, "backfill"), table)

    assert isinstance(staged, StagedSwap) and staged.table == table
    assert {(c.partition, c.action) for c in staged.partitions} == {(f"dt={days[1]}", "replace"),
                                                                    (f"dt={today(3)}", "add")}
    # Nothing a reader sees changed: the table's metadata, partitions and rows are as before.
    assert reader_view(spark, table) == before_view
    assert {k: v for k, v in metastore_snapshot(hms, db).items() if "__tswap_" not in k} == before_meta
    # The staged table reads the batch, with its partitions.
    assert reader_view(spark, staged.staged_table) == {(days[1],): (7, ("backfill",)), (today(3),): (4, ("backfill",))}
    record = _journal(ts_env).get_swap(staged.swap_id)
    assert record.state == "staged" and record.staged_at

    result = staged.publish()

    assert result.swap_id == staged.swap_id
    assert [c.partition for c in result.added] == [f"dt={today(3)}"]
    assert [c.partition for c in result.replaced] == [f"dt={days[1]}"]
    published = reader_view(spark, table)
    assert published == {(days[0],): (5, ("initial",)), (days[1],): (7, ("backfill",)),
                         (days[2],): (5, ("initial",)), (today(3),): (4, ("backfill",))}
    assert not _temp_tables(hms, db)
    journal = _journal(ts_env)
    record = journal.get_swap(staged.swap_id)
    assert record.state == "committed" and record.staged_at and record.finished_at
    assert [d.location for d in journal.deletions(db=db, table="events")] == [result.replaced[0].old_location]
    entries = history(table, journal_url=ts_env["TABLESWAP_JOURNAL_URL"])
    assert entries.entries[0].status == "published"

    # The same batch swapped directly gives the same table.
    swap_partitions(batch_df(spark, {(days[1],): 7, (today(3),): 4}, "backfill"), table)
    assert reader_view(spark, table) == published

    # Published once: a second publish and a discard are refused, nothing changed.
    with pytest.raises(NotStagedError, match="already published"):
        staged.publish()
    with pytest.raises(NotStagedError):
        staged.discard()
    assert reader_view(spark, table) == published


def test_discard_changes_nothing_and_queues_the_staged_data(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3}, "initial").write.insertInto(table)
    before_view, before_meta = reader_view(spark, table), metastore_snapshot(hms, db)

    staged = stage_partitions(batch_df(spark, {(today(0),): 9}, "bad"), table)
    done = staged.discard()

    assert reader_view(spark, table) == before_view and metastore_snapshot(hms, db) == before_meta
    assert not _temp_tables(hms, db)
    journal = _journal(ts_env)
    record = journal.get_swap(staged.swap_id)
    assert record.state == "aborted" and record.error.startswith("discarded")
    queued = journal.deletions(db=db, table="events")
    assert [(d.location, d.reason) for d in queued] == [(record.staging_location, "orphan")]
    assert done.queued == (record.staging_location,)
    assert Path(loc.to_local_path(record.staging_location)).is_dir()  # kept until the janitor's grace ends
    with pytest.raises(NotStagedError, match="discarded"):
        staged.publish()
    with pytest.raises(NotFoundError):
        staged_ops.discard("20260101T000000Z_000000000000", journal_url=ts_env["TABLESWAP_JOURNAL_URL"])
    entries = history(table, journal_url=ts_env["TABLESWAP_JOURNAL_URL"])
    assert entries.entries[0].status == "discarded"


def test_an_audit_that_refuses_changes_nothing_and_names_the_check(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3}, "initial").write.insertInto(table)
    before_view, before_meta = reader_view(spark, table), metastore_snapshot(hms, db)
    seen = []

    def no_null_values(df):
        seen.append(df.count())
        return df.filter("value IS NULL").isEmpty()

    def at_least_ten_rows(df):
        assert df.count() >= 10, f"only {df.count()} rows"

    with pytest.raises(AuditFailedError, match="at_least_ten_rows") as failed:
        swap_partitions(batch_df(spark, {(today(0),): 4, (today(1),): 2}, "small"), table,
                        audit=[no_null_values, at_least_ten_rows])

    assert seen == [6]  # the first check read the staged batch
    error = failed.value
    assert error.check.endswith("at_least_ten_rows") and error.kept and error.table == table
    assert isinstance(error.__cause__, AssertionError) and not error.retryable
    assert reader_view(spark, table) == before_view
    assert {k: v for k, v in metastore_snapshot(hms, db).items() if "__tswap_" not in k} == before_meta
    # Kept for inspection as a staged swap.
    listed = staged_view.list_staged(table, journal_url=ts_env["TABLESWAP_JOURNAL_URL"])
    assert [e.swap_id for e in listed] == [error.swap_id] and listed[0].partitions == 2
    assert spark.table(listed[0].staged_table).count() == 6

    # keep_on_failure=False: discarded at once; a check returning False refuses too.
    with pytest.raises(AuditFailedError, match="returned False") as second:
        swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), table, audit=lambda df: False,
                        keep_on_failure=False)
    assert not second.value.kept
    assert _journal(ts_env).get_swap(second.value.swap_id).state == "failed"
    assert reader_view(spark, table) == before_view

    # An audit that passes swaps the batch in.
    result = swap_partitions(batch_df(spark, {(today(0),): 12}, "good"), table, audit=at_least_ten_rows)
    assert [c.partition for c in result.replaced] == [f"dt={today(0)}"]
    assert reader_view(spark, table)[(today(0),)] == (12, ("good",))


def test_stage_table_then_publish(spark, db, tmp_path, hms, ts_env):
    location = (tmp_path / "dim").as_uri()
    spark.sql(f"CREATE TABLE {db}.dim (id bigint, name string) USING parquet LOCATION '{location}'")
    spark.createDataFrame([(1, "a")], "id bigint, name string").write.insertInto(f"{db}.dim")
    staged = stage_table(spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, name string"), f"{db}.dim")
    assert spark.table(f"{db}.dim").count() == 1
    assert spark.table(staged.staged_table).count() == 2
    assert [c.action for c in staged.partitions] == ["replace"]
    result = staged.publish()
    assert result.table_change is not None
    spark.catalog.refreshTable(f"{db}.dim")
    assert sorted(r.id for r in spark.table(f"{db}.dim").collect()) == [1, 2]


def test_publish_from_another_process_after_a_swap_of_the_same_partitions(spark, db, tmp_path, hms, ts_env):
    """A separate audit job publishes through the CLI (no Spark in it); a swap committed between stage and
    publish: the publish plans from the table as it is then (serial-equivalent), or with the token taken before
    staging it is refused."""
    table = create_events(spark, db, tmp_path)
    days = [today(0), today(1)]
    batch_df(spark, {(d,): 2 for d in days}, "initial").write.insertInto(table)
    token = tableswap.table_state(table)
    staged = stage_partitions(batch_df(spark, {(days[0],): 3}, "staged"), table)
    between = swap_partitions(batch_df(spark, {(days[0],): 5, (days[1],): 5}, "between"), table)

    with pytest.raises(SwapConflictError):
        staged.publish(if_unchanged_since=token)
    assert reader_view(spark, table) == {(days[0],): (5, ("between",)), (days[1],): (5, ("between",))}
    assert _journal(ts_env).get_swap(staged.swap_id).state == "staged"  # still there to publish or discard

    listed = _cli_here("staged", table)
    assert listed.exit_code == 0, listed.output
    assert [e["swap_id"] for e in json.loads(listed.stdout)["staged"]] == [staged.swap_id]
    diff = _cli_here("diff", staged.swap_id)
    assert diff.exit_code == 0, diff.output
    rows = json.loads(diff.stdout)["partitions"]
    assert [(r["partition"], r["action"], r["current"]["rows"], r["staged"]["rows"]) for r in rows] == [
        (f"dt={days[0]}", "replace", 5, 3)]
    assert rows[0]["staged"]["files"] >= 1 and rows[0]["staged"]["bytes"] > 0

    published = _cli(["publish", staged.swap_id], ts_env)  # the audit job: a process of its own, no Spark
    assert published.returncode == 0, published.err
    out = json.loads(published.out)
    assert out["swap_id"] == staged.swap_id
    assert [c["old_location"] for c in out["replaced"]] == [between.replaced[0].new_location]
    spark.catalog.refreshTable(table)
    assert reader_view(spark, table) == {(days[0],): (3, ("staged",)), (days[1],): (5, ("between",))}
    assert not _temp_tables(hms, db)

    again = _cli_here("publish", staged.swap_id)
    assert again.exit_code == 1 and json.loads(again.stdout)["error_type"] == "NotStagedError"
    assert _cli_here("discard", "20260101T000000Z_000000000000").exit_code == 3


def test_the_janitor_and_recover_leave_a_staged_swap_alone_until_its_ttl(spark, db, tmp_path, hms, ts_env):
    """Old behaviour: a staged swap's temporary table and data looked like a crashed swap's leftovers and were
    swept once the grace period ended. Now they are kept until [janitor] staged_ttl, then discarded."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "initial").write.insertInto(table)
    staged = stage_partitions(batch_df(spark, {(today(0),): 3}, "staged"), table)
    record = _journal(ts_env).get_swap(staged.swap_id)
    staging_dir = Path(loc.to_local_path(record.staging_location))

    report = recover(stale_after_s=0)
    assert staged.swap_id not in [r.swap_id for r in report.resolutions]
    kept = run_janitor(grace="0s", force_short_grace=True, dry_run=False, table=table)
    assert [o.outcome for o in kept.outcomes if staged.swap_id in o.swap_ids] == ["kept"]
    assert staging_dir.is_dir() and _temp_tables(hms, db) == [record.temp_table]
    assert _journal(ts_env).get_swap(staged.swap_id).state == "staged"

    ran = _cli_here("janitor", "run", "--grace", "0s", "--force-short-grace", "--staged-ttl", "0s",
                    "--table", table)
    assert ran.exit_code == 0, ran.output
    outcomes = {o["outcome"] for o in json.loads(ran.stdout)["outcomes"] if staged.swap_id in o["swap_ids"]}
    assert "dropped_temp_table" in outcomes and "deleted" in outcomes, ran.stdout
    assert not staging_dir.exists() and not _temp_tables(hms, db)
    after = _journal(ts_env).get_swap(staged.swap_id)
    assert after.state == "aborted" and "staged_ttl" in after.error
    assert reader_view(spark, table) == {(today(0),): (2, ("initial",))}


def test_a_crash_during_publish_converges_by_recover_or_a_rerun(spark, db, tmp_path, hms, ts_env):
    """The publish's process killed (SIGKILL) after its intent: nothing landed, ``recover`` makes the swap
    staged again and a rerun of the publish commits it. Killed between its two flip calls: ``recover``
    completes the flip. Either way the table ends as the uninterrupted publish would leave it."""
    import signal

    from ..support.helpers import release_locks_of_killed_writer

    table = create_events(spark, db, tmp_path)
    days = [today(0), today(1)]
    batch_df(spark, {(days[0],): 2}, "initial").write.insertInto(table)
    staged = stage_partitions(batch_df(spark, {(days[0],): 3, (days[1],): 3}, "staged"), table)
    expected = {(days[0],): (3, ("staged",)), (days[1],): (3, ("staged",))}

    killed = _cli(["publish", staged.swap_id], ts_env, TABLESWAP_CRASH_AT="after_intent")
    assert killed.returncode == -signal.SIGKILL
    assert _journal(ts_env).get_swap(staged.swap_id).state == "pending"
    release_locks_of_killed_writer(hms, db, "events", killed)
    report = recover(table, stale_after_s=0)
    assert [(r.swap_id, r.outcome, r.state_after) for r in report.resolutions] == [
        (staged.swap_id, "restaged", "staged")]
    assert reader_view(spark, table) == {(days[0],): (2, ("initial",))}

    killed = _cli(["publish", staged.swap_id], ts_env, TABLESWAP_CRASH_AT="after_add")
    assert killed.returncode == -signal.SIGKILL
    release_locks_of_killed_writer(hms, db, "events", killed)
    spark.catalog.refreshTable(table)
    assert reader_view(spark, table) == {(days[0],): (2, ("initial",)), (days[1],): (3, ("staged",))}  # mid-flip
    with pytest.raises(NotStagedError, match="tableswap recover"):
        staged.publish()
    report = recover(table, stale_after_s=0)
    assert [r.outcome for r in report.resolutions] == ["completed"]
    spark.catalog.refreshTable(table)
    assert reader_view(spark, table) == expected
    record = _journal(ts_env).get_swap(staged.swap_id)
    assert record.state == "committed" and not _temp_tables(hms, db)
    assert [d.partition_name for d in _journal(ts_env).deletions(db=db, table="events")] == [f"dt={days[0]}"]


def test_a_publish_that_fails_before_its_flip_stays_staged(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """A failure after the publish recorded its intent but before its flip (the lock lost, say): nothing
    changed, and the swap is staged again, to be published by a rerun."""
    import tableswap.ops.commit as commit_mod

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "initial").write.insertInto(table)
    staged = stage_partitions(batch_df(spark, {(today(0),): 4}, "staged"), table)

    def fail_after_intent(name: str) -> None:
        if name == "after_intent":
            raise ConnectionResetError("simulated: the metastore connection dropped before the flip")

    with monkeypatch.context() as patch:
        patch.setattr(commit_mod, "crash_point", fail_after_intent)
        with pytest.raises(ConnectionResetError):
            staged.publish()
    record = _journal(ts_env).get_swap(staged.swap_id)
    assert record.state == "staged" and "publish failed before its flip" in record.error and not record.items
    assert reader_view(spark, table) == {(today(0),): (2, ("initial",))}
    staged.publish()
    assert reader_view(spark, table) == {(today(0),): (4, ("staged",))}


@pytest.mark.trino
def test_trino_reads_the_staged_table_on_s3(trino_server, spark, db, s3root, ts_env):
    """On s3a:// storage: stage, Trino (and Spark) read the staged table while the table is unchanged for both,
    publish, both read the batch; a discard of a second stage leaves the table and queues its data."""
    from .test_trino_readers import assert_same_view, trino_view

    table = create_events(spark, db, s3root)
    batch_df(spark, {("2026-07-01",): 2, ("k=v%",): 2}, "old").write.insertInto(table)
    old = {("2026-07-01",): (2, ("old",)), ("k=v%",): (2, ("old",))}

    staged = stage_partitions(batch_df(spark, {("k=v%",): 3, ("2026-07-02",): 1}, "new"), table)

    assert staged.staging_location.startswith("s3a://")
    assert_same_view(spark, trino_server, table, old)
    batch = {("k=v%",): (3, ("new",)), ("2026-07-02",): (1, ("new",))}
    assert_same_view(spark, trino_server, staged.staged_table, batch)
    staged.publish()
    assert_same_view(spark, trino_server, table, {("2026-07-01",): (2, ("old",)), **batch})

    second = stage_partitions(batch_df(spark, {("2026-07-01",): 9}, "bad"), table)
    assert trino_view(trino_server, second.staged_table) == {("2026-07-01",): (9, ("bad",))}
    second.discard()
    assert_same_view(spark, trino_server, table, {("2026-07-01",): (2, ("old",)), **batch})
    queued = _journal(ts_env).deletions(db=db, table="events")
    assert (second.staging_location, "orphan") in [(d.location, d.reason) for d in queued]


@pytest.mark.glue
def test_audit_then_stage_and_publish_on_glue(spark, glue, gdb, root, glue_env):
    """On the AWS Glue Data Catalog (Spark writes files only): a refused audit keeps the batch as a staged swap
    whose temporary table has the staged partitions in Glue; its publish (no Spark) repoints the table."""
    table = create_glue_table(glue, gdb, f"{root}/events")
    swap_partitions(batch_df(spark, {(today(0),): 2}, "old"), table)
    counted = []

    def at_least_five_rows(df):
        counted.append(df.count())
        return counted[-1] >= 5

    with pytest.raises(AuditFailedError) as refused:
        swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), table, audit=at_least_five_rows)
    assert counted == [4] and refused.value.kept
    assert glue_view(spark, glue, gdb) == {(today(0),): (2, ("old",))}
    [temp] = [t for t in glue_tables(glue, gdb) if "__tswap_" in t]
    assert set(partitions(glue, gdb, temp)) == {(today(0),), (today(1),)}

    result = staged_ops.publish(refused.value.swap_id)
    assert [c.partition for c in result.added] == [f"dt={today(1)}"]
    assert glue_view(spark, glue, gdb) == {(today(0),): (3, ("new",)), (today(1),): (1, ("new",))}
    assert not [t for t in glue_tables(glue, gdb) if "__tswap_" in t]


def _staged_files(staged: StagedSwap, partition: str) -> list[Path]:
    where = Path(loc.to_local_path(staged.staging_location)) / partition
    return sorted(p for p in where.iterdir() if not p.name.startswith((".", "_")))


def test_a_publish_refuses_a_staging_directory_that_changed_since_it_was_staged(spark, db, tmp_path, hms, ts_env):
    """Old behaviour: a publish planned from whatever the staging directory held at publish time: a file a
    lifecycle rule or a stray delete removed went missing from the published partition, a file added there was
    published with it. Now what was staged (each data file and its size) is journaled when it is staged and a
    publish whose staging directory differs is refused, nothing changed, the swap still staged."""
    table = create_events(spark, db, tmp_path)
    d1, d2 = today(0), today(1)
    batch_df(spark, {(d1,): 2}, "initial").write.insertInto(table)
    before_view, before_meta = reader_view(spark, table), metastore_snapshot(hms, db)
    staged = stage_partitions(batch_df(spark, {(d1,): 6, (d2,): 4}, "staged").repartition(2), table)

    def refused(match: str) -> None:
        with pytest.raises(StagedBatchChangedError, match=match) as failed:
            staged.publish()
        assert "Nothing was changed" in str(failed.value) and failed.value.swap_id == staged.swap_id
        assert reader_view(spark, table) == before_view
        assert {k: v for k, v in metastore_snapshot(hms, db).items() if "__tswap_" not in k} == before_meta
        assert _journal(ts_env).get_swap(staged.swap_id).state == "staged"

    # A file deleted from a staged partition (a lifecycle rule, a stray delete).
    gone = _staged_files(staged, f"dt={d1}")[0]
    kept = gone.read_bytes()
    gone.unlink()
    refused(f"dt={d1}/{gone.name}: missing")
    gone.write_bytes(kept)

    # A file added to a staged partition.
    extra = gone.parent.parent / f"dt={d2}" / "part-99999-added.parquet"
    extra.write_bytes(kept)
    refused(f"dt={d2}/{extra.name}: added")
    extra.unlink()

    # As staged again: it publishes.
    staged.publish()
    assert reader_view(spark, table) == {(d1,): (6, ("staged",)), (d2,): (4, ("staged",))}


def test_a_publish_refuses_a_target_recreated_with_another_format_or_columns(spark, db, tmp_path, hms, ts_env):
    """Old behaviour: a table dropped and re-created as ORC (same name, same location) while a Parquet batch
    was staged received the Parquet batch. Now the publish compares, under the table lock, the target's format
    (input/output format, serde, provider) and columns with those the batch was staged for: refused, nothing
    changed. Re-created as it was, the staged swap publishes."""
    table = create_events(spark, db, tmp_path)
    d1 = today(0)
    location = (tmp_path / "events").as_uri()
    batch_df(spark, {(d1,): 2}, "initial").write.insertInto(table)
    staged = stage_partitions(batch_df(spark, {(d1,): 5}, "staged"), table)

    def recreate(columns: str, fmt: str) -> None:
        spark.sql(f"DROP TABLE {table}")  # EXTERNAL: its files stay
        spark.sql(f"CREATE TABLE {table} ({columns}, dt string) USING {fmt} PARTITIONED BY (dt) "
                  f"LOCATION '{location}'")

    for columns, fmt, why in [("id bigint, value string, batch string", "orc", "format"),
                              ("id bigint, value int, batch string", "parquet", "value")]:
        recreate(columns, fmt)
        before_meta = metastore_snapshot(hms, db)
        with pytest.raises(StagedBatchChangedError, match=why) as failed:
            staged.publish()
        assert "Nothing was changed" in str(failed.value)
        assert metastore_snapshot(hms, db) == before_meta
        assert hms.get_partitions(hms.get_table(db, "events"), [(d1,)]) == {}  # the new table has no partition
        assert _journal(ts_env).get_swap(staged.swap_id).state == "staged"

    recreate("id bigint, value string, batch string", "parquet")
    result = staged.publish()
    assert [c.partition for c in result.added] == [f"dt={d1}"]
    spark.catalog.refreshTable(table)
    assert reader_view(spark, table) == {(d1,): (5, ("staged",))}


def _unchanged_state(hms, journal: Journal, db: str, table_root: str) -> tuple:
    """What a dry run must leave as it was: the metastore (every table of ``db``: locations, parameters,
    partitions, the staged swap's temporary table), the journal (every swap record of ``db`` and every
    deletion queued for it, whatever its state) and the storage (every file and directory under ``table_root``)."""
    return (metastore_snapshot(hms, db), journal.list_swaps(db=db),
            journal.deletions(db=db, states=("pending", "deleted", "refused", "restored")),
            file_tree(Path(loc.to_local_path(table_root))))


def test_a_publish_dry_run_returns_the_plan_and_changes_nothing_then_the_publish_carries_it_out(
        spark, db, tmp_path, hms, ts_env):
    """docs/cli.md#dry-runs: `tableswap publish --dry-run` and publish(dry_run=True) plan as the publish does
    (from the table as it is now, a swap committed since the stage included) and return the publish's result,
    marked as a dry run; nothing changes. The publish then carries out that plan."""
    table = create_events(spark, db, tmp_path)
    days = [today(0), today(1)]
    batch_df(spark, {(d,): 2 for d in days}, "initial").write.insertInto(table)
    staged = stage_partitions(batch_df(spark, {(days[1],): 3, (today(2),): 4}, "staged"), table)
    swap_partitions(batch_df(spark, {(days[1],): 5}, "between"), table)  # committed since the stage
    journal = _journal(ts_env)
    table_root = journal.get_swap(staged.swap_id).table_root
    before = _unchanged_state(hms, journal, db, table_root)

    planned = staged_ops.publish(staged.swap_id, dry_run=True)
    printed = _cli_here("publish", staged.swap_id, "--dry-run")
    text = _cli_text("publish", staged.swap_id, "--dry-run")

    assert planned.dry_run and planned.swap_id == staged.swap_id and planned.table == table
    assert [c.partition for c in planned.added] == [f"dt={today(2)}"]
    assert [c.partition for c in planned.replaced] == [f"dt={days[1]}"]
    assert printed.exit_code == 0, printed.output
    document = json.loads(printed.stdout)
    expected = json.loads(json.dumps(planned.to_dict()))
    assert document["dry_run"] is True and document["swap_id"] == staged.swap_id
    assert {k: document[k] for k in ("added", "replaced", "dropped")} == {k: expected[k] for k in
                                                                           ("added", "replaced", "dropped")}
    assert text.exit_code == 0 and f"dry run: would publish {staged.swap_id} to {table}" in text.stdout
    assert _unchanged_state(hms, journal, db, table_root) == before
    assert journal.get_swap(staged.swap_id).state == "staged"

    done = staged.publish()
    assert not done.dry_run
    assert (done.added, done.replaced, done.dropped) == (planned.added, planned.replaced, planned.dropped)
    assert reader_view(spark, table) == {(days[0],): (2, ("initial",)), (days[1],): (3, ("staged",)),
                                         (today(2),): (4, ("staged",))}


def test_a_publish_dry_run_refuses_as_the_publish_would(spark, db, tmp_path, hms, ts_env):
    """A dry run reads and checks as the real run does: a token no longer true is a conflict (exit 4), a publish
    already done is refused (exit 1); nothing changed either way."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "initial").write.insertInto(table)
    token = tableswap.table_state(table)
    staged = stage_partitions(batch_df(spark, {(today(0),): 3}, "staged"), table)
    swap_partitions(batch_df(spark, {(today(0),): 5}, "between"), table)
    journal = _journal(ts_env)
    table_root = journal.get_swap(staged.swap_id).table_root
    before = _unchanged_state(hms, journal, db, table_root)

    with pytest.raises(SwapConflictError):
        staged_ops.publish(staged.swap_id, if_unchanged_since=token, dry_run=True)
    conflict = _cli_here("publish", staged.swap_id, "--if-unchanged-since", token, "--dry-run")
    assert conflict.exit_code == 4 and json.loads(conflict.stdout)["error_type"] == "SwapConflictError"
    assert _unchanged_state(hms, journal, db, table_root) == before

    staged.publish()
    again = _cli_here("publish", staged.swap_id, "--dry-run")
    assert again.exit_code == 1 and json.loads(again.stdout)["error_type"] == "NotStagedError"


def test_a_discard_dry_run_names_what_the_discard_would_do_and_changes_nothing(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3}, "initial").write.insertInto(table)
    staged = stage_partitions(batch_df(spark, {(today(0),): 9}, "bad"), table)
    journal = _journal(ts_env)
    record = journal.get_swap(staged.swap_id)
    before = _unchanged_state(hms, journal, db, record.table_root)

    planned = staged_ops.discard(staged.swap_id, dry_run=True)
    printed = _cli_here("discard", staged.swap_id, "--dry-run")
    text = _cli_text("discard", staged.swap_id, "--dry-run")

    assert planned.dry_run
    assert planned.queued == (record.staging_location,)
    assert planned.temp_table_dropped == staged.staged_table
    assert printed.exit_code == 0, printed.output
    document = json.loads(printed.stdout)
    assert {k: document[k] for k in planned.to_dict()} == json.loads(json.dumps(planned.to_dict()))
    assert document["dry_run"] is True and document["state"] == "staged"
    assert text.exit_code == 0 and f"dry run: would discard {staged.swap_id} of {table}" in text.stdout
    assert _unchanged_state(hms, journal, db, record.table_root) == before
    assert _temp_tables(hms, db) == [staged.staged_table.split(".")[1]]

    done = staged.discard()
    assert (done.queued, done.temp_table_dropped, done.dry_run) == (planned.queued, planned.temp_table_dropped, False)
    assert journal.get_swap(staged.swap_id).state == "aborted" and not _temp_tables(hms, db)
