"""``if_unchanged_since``: read-modify-write jobs that must not overwrite what changed after they read."""

from __future__ import annotations

import pytest

from tableswap import errors, swap_partitions, swap_table, table_state
from tableswap.journal import Journal
from tableswap.runtime import Runtime

from ..support.helpers import batch_df, create_events, metastore_snapshot, reader_view, today
from .test_concurrency import competing_writer

pytestmark = pytest.mark.integration


def staged_dirs(tmp_path, name="events") -> list[str]:
    root = tmp_path / name / "_tableswap"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_two_read_modify_write_jobs_racing_one_gets_the_conflict(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """Jobs A and B both read dt=today(0) (taking a token), compute from it and write it back. B commits
    while A is still writing: A must be refused, nothing of A changed, and its rerun (with a new read)
    goes through."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    token = table_state(table)
    b_token = table_state(table)
    real_lock = Runtime.table_lock

    fired = competing_writer(monkeypatch, batch_df(spark, {(today(0),): 3}, "job-b"), table,
                             if_unchanged_since=b_token)
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    with pytest.raises(errors.SwapConflictError) as info:
        swap_partitions(batch_df(spark, {(today(0),): 4, (today(2),): 1}, "job-a"), table, if_unchanged_since=token)
    err = info.value
    assert err.retryable and err.table == table
    assert str(err).startswith(f"{table} changed since the state token was taken; nothing was changed. Read the "
                               "table again, recompute the batch and rerun with a new token")
    assert err.conflicts == (f"dt={today(0)} changed since the state token was taken "
                             f"(now at {fired[0].replaced[0].new_location}, by swap {fired[0].swap_id})",)
    after_b = metastore_snapshot(hms, db)
    assert reader_view(spark, table) == {(today(0),): (3, ("job-b",)), (today(1),): (2, ("old",))}
    assert staged_dirs(tmp_path) == [fired[0].swap_id]  # A's staged batch was discarded
    states = {s.swap_id: s.state for s in journal.list_swaps(db, "events")}
    assert sorted(states.values()) == ["committed", "failed"]
    assert [d.swap_id for d in journal.deletions(db=db, table="events")] == [fired[0].swap_id]
    assert hms.lock_holders(db, "events") == []
    monkeypatch.setattr(Runtime, "table_lock", real_lock)
    # A re-reads (a new token) and reruns: it goes through.
    result = swap_partitions(batch_df(spark, {(today(0),): 4, (today(2),): 1}, "job-a"), table,
                             if_unchanged_since=table_state(table))
    assert reader_view(spark, table)[(today(0),)] == (4, ("job-a",))
    assert result.replaced[0].old_location == fired[0].replaced[0].new_location
    assert metastore_snapshot(hms, db) != after_b


def test_token_from_a_previous_result_and_untouched_partitions(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    first = swap_partitions(batch_df(spark, {(today(0),): 3}, "run-1"), table)
    assert first.state_token and first.state_token.startswith("tswap1.")
    # Others change partitions this job does not touch (a repoint and an add): no conflict.
    swap_partitions(batch_df(spark, {(today(1),): 5, (today(9),): 1}, "other"), table)
    second = swap_partitions(batch_df(spark, {(today(0),): 4}, "run-2"), table, if_unchanged_since=first.state_token)
    assert reader_view(spark, table)[(today(0),)] == (4, ("run-2",))
    # Someone else rewrites dt=today(0): the next run, holding run 2's token, is refused.
    intruder = swap_partitions(batch_df(spark, {(today(0),): 7}, "intruder"), table)
    before = metastore_snapshot(hms, db)
    with pytest.raises(errors.SwapConflictError, match=f"dt={today(0)} changed since the state token.*{intruder.swap_id}"):
        swap_partitions(batch_df(spark, {(today(0),): 8}, "run-3"), table, if_unchanged_since=second.state_token)
    assert metastore_snapshot(hms, db) == before
    assert reader_view(spark, table)[(today(0),)] == (7, ("intruder",))


def test_a_partition_added_since_the_token_conflicts_and_partial_tokens(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    whole = table_state(table)
    only_day0 = table_state(table, [f"dt={today(0)}"])
    swap_partitions(batch_df(spark, {(today(3),): 1}, "other"), table)  # adds dt=today(3)
    with pytest.raises(errors.SwapConflictError, match=f"dt={today(3)} was added since the state token"):
        swap_partitions(batch_df(spark, {(today(3),): 2}, "job"), table, if_unchanged_since=whole)
    # A token taken for dt=today(0) only does not cover dt=today(3): the job writes it.
    swap_partitions(batch_df(spark, {(today(0),): 5, (today(3),): 2}, "job"), table, if_unchanged_since=only_day0)
    assert reader_view(spark, table) == {(today(0),): (5, ("job",)), (today(3),): (2, ("job",))}


def test_swap_table_with_a_token(spark, db, tmp_path, hms, ts_env):
    table = f"{db}.dim"
    spark.sql(f"CREATE TABLE {table} (id bigint) USING parquet LOCATION '{(tmp_path / 'dim').as_uri()}'")
    spark.range(5).write.insertInto(table)
    token = table_state(table)
    first = swap_table(spark.range(6), table, if_unchanged_since=token)
    assert spark.table(table).count() == 6
    before = metastore_snapshot(hms, db)
    with pytest.raises(errors.SwapConflictError, match=f"the table changed since the state token.*{first.swap_id}"):
        swap_table(spark.range(7), table, if_unchanged_since=token)
    assert metastore_snapshot(hms, db) == before and spark.table(table).count() == 6
    assert staged_dirs(tmp_path, "dim") == [first.swap_id]
    swap_table(spark.range(8), table, if_unchanged_since=first.state_token)
    assert spark.table(table).count() == 8


def test_bad_tokens_are_refused_before_anything_is_written(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    other = create_events(spark, db, tmp_path, name="other")
    before = metastore_snapshot(hms, db)
    df = batch_df(spark, {(today(0),): 3}, "new")
    with pytest.raises(errors.InvalidInputError, match="not a tableswap state token"):
        swap_partitions(df, table, if_unchanged_since="tswap1.garbage")
    with pytest.raises(errors.InvalidInputError, match=f"taken of {other}, not of {table}"):
        swap_partitions(df, table, if_unchanged_since=table_state(other))
    with pytest.raises(errors.InvalidInputError, match="as a partitioned table; swap_table takes a token of an unpartitioned"):
        swap_table(spark.range(3), table, if_unchanged_since=table_state(table))
    with pytest.raises(errors.InvalidInputError, match="does not match the partition columns"):
        table_state(table, ["country=DE"])
    assert metastore_snapshot(hms, db) == before
    assert staged_dirs(tmp_path) == []
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events") == []
