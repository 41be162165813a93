"""``merge_partitions``: row-level upserts and deletes as one swap, on the real metastore and Spark."""

from __future__ import annotations

import re

import pytest

from tableswap import errors, merge_partitions, storage
from tableswap.journal import Journal
from tableswap.ops.inspect.history import history
from tableswap.ops.restore.rollback import rollback

from ..support.helpers import create_events, metastore_snapshot, partition_locations, today
from .test_concurrency import competing_writer

# release_independent: a merge or compaction flips through the swap protocol whose metastore calls the swap tests
# make against every release; what these tests assert (the merged rows, the checksum) is decided in Spark.
pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

D0, D1, D2, D3 = today(0), today(1), today(2), today(3)
UPDATE_SCHEMA = "id bigint, value string, batch string, dt string, op string"


def srt(items) -> list:
    return sorted(items, key=repr)  # NULL keys among the values


def rows(spark, table: str) -> list[tuple]:
    return srt(tuple(r) for r in spark.table(table).select("dt", "id", "value", "batch").collect())


def seed(spark, db, root) -> str:
    table = create_events(spark, db, root)
    spark.createDataFrame([(1, "a1", "init", D0), (2, "a2", "init", D0), (3, "a3", "init", D0),
                           (4, "b4", "init", D1), (5, "b5", "init", D1), (6, "c6", "init", D2)],
                          "id bigint, value string, batch string, dt string").write.insertInto(table)
    return table


def updates(spark):
    """An update, a delete and an insert in D0; an update and a delete of a missing key in D1; a new D3."""
    return spark.createDataFrame([(1, "A1", "u", D0, "U"), (2, "x", "u", D0, "D"), (7, "n7", "u", D0, "I"),
                                  (5, "B5", "u", D1, "U"), (8, "x", "u", D1, "D"), (9, "n9", "u", D3, "I")],
                                 UPDATE_SCHEMA)


EXPECTED = srt([(D0, 1, "A1", "u"), (D0, 3, "a3", "init"), (D0, 7, "n7", "u"),
                   (D1, 4, "b4", "init"), (D1, 5, "B5", "u"), (D2, 6, "c6", "init"), (D3, 9, "n9", "u")])


def test_merge_updates_inserts_and_deletes_in_the_touched_partitions_only(spark, db, tmp_path, hms, ts_env):
    table = seed(spark, db, tmp_path)
    before = partition_locations(hms, db, "events")
    result = merge_partitions(updates(spark), table, on=["id"], delete_when="op = 'D'")
    assert rows(spark, table) == EXPECTED
    assert result.kind == "merge"
    assert srt(c.partition for c in result.replaced) == [f"dt={D0}", f"dt={D1}"]
    assert [c.partition for c in result.added] == [f"dt={D3}"] and not result.dropped
    after = partition_locations(hms, db, "events")
    assert after[(D2,)] == before[(D2,)]  # untouched: neither read nor rewritten
    assert after[(D0,)] != before[(D0,)] and after[(D1,)] != before[(D1,)]
    # Journaled as a merge; history shows it; rollback restores the previous rows.
    assert history(table).entries[0].kind == "merge"
    rollback(table)
    assert rows(spark, table) == srt([(D0, 1, "a1", "init"), (D0, 2, "a2", "init"), (D0, 3, "a3", "init"),
                                         (D1, 4, "b4", "init"), (D1, 5, "b5", "init"), (D2, 6, "c6", "init")])


def test_rerunning_a_merge_gives_the_same_table_and_an_emptied_partition_is_dropped(spark, db, tmp_path, hms,
                                                                                   ts_env):
    table = seed(spark, db, tmp_path)
    merge_partitions(updates(spark), table, on=["id"], delete_when="op = 'D'")
    again = merge_partitions(updates(spark), table, on=["id"], delete_when="op = 'D'")
    assert rows(spark, table) == EXPECTED
    assert srt(c.partition for c in again.replaced) == [f"dt={D0}", f"dt={D1}", f"dt={D3}"]
    # Deleting the last row of D2 drops the partition (its data kept for rollback); a rerun changes nothing.
    gone = spark.createDataFrame([(6, None, None, D2, "D"), (None, "n", "u", D2, "D")], UPDATE_SCHEMA)
    dropped = merge_partitions(gone, table, on=["id"], delete_when="op = 'D'")
    assert [c.partition for c in dropped.dropped] == [f"dt={D2}"]
    assert storage.exists(dropped.dropped[0].old_location)
    snapshot = metastore_snapshot(hms, db)
    rerun = merge_partitions(gone, table, on=["id"], delete_when="op = 'D'")
    assert not (rerun.added or rerun.replaced or rerun.dropped)
    assert metastore_snapshot(hms, db) == snapshot
    assert rows(spark, table) == [r for r in EXPECTED if r[0] != D2]


def test_when_matched_and_when_not_matched_ignore_and_null_keys(spark, db, tmp_path, ts_env):
    table = seed(spark, db, tmp_path)
    ups = spark.createDataFrame([(1, "A1", "u", D0), (7, "n7", "u", D0), (None, "null-key", "u", D1)],
                                "id bigint, value string, batch string, dt string")
    merge_partitions(ups, table, on="id", when_matched="ignore")  # inserts only
    assert [r for r in rows(spark, table) if r[3] == "u"] == srt([(D0, 7, "n7", "u"), (D1, None, "null-key", "u")])
    ups2 = spark.createDataFrame([(1, "A1", "u2", D0), (99, "n99", "u2", D0), (None, "null-key-2", "u2", D1)],
                                 "id bigint, value string, batch string, dt string")
    merge_partitions(ups2, table, on=["id"], when_not_matched="ignore")  # updates only; NULL matches NULL
    got = rows(spark, table)
    assert [r for r in got if r[3] == "u2"] == srt([(D0, 1, "A1", "u2"), (D1, None, "null-key-2", "u2")])
    assert len(got) == 8 and not any(r[1] == 99 for r in got)


def test_a_swap_committed_between_the_read_and_the_flip_is_never_lost(spark, db, tmp_path, hms, ts_env,
                                                                        monkeypatch):
    """Another writer replaces D0 after the merge read it, before the merge's lock: the merge's swap is
    refused by its state token and the merge reads again: the table is the other swap, then the merge
    (serial order). Without retries the merge fails with the conflict and the other swap's rows stay."""
    table = seed(spark, db, tmp_path)
    other = spark.createDataFrame([(1, "o1", "other", D0), (2, "o2", "other", D0)],
                                  "id bigint, value string, batch string, dt string")
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    fired = competing_writer(monkeypatch, other, table)
    result = merge_partitions(updates(spark), table, on=["id"], delete_when="op = 'D'")
    assert fired and fired[0] is not None
    assert rows(spark, table) == srt([(D0, 1, "A1", "u"), (D0, 7, "n7", "u"), (D1, 4, "b4", "init"),
                                         (D1, 5, "B5", "u"), (D2, 6, "c6", "init"), (D3, 9, "n9", "u")])
    d0 = next(c for c in result.replaced if c.partition == f"dt={D0}")
    assert d0.old_location == fired[0].replaced[0].new_location
    kinds = srt((s.kind, s.state) for s in journal.list_swaps(db, "events"))
    assert kinds == [("merge", "committed"), ("merge", "failed"), ("partitions", "committed")]

    # merge_retries=0: the conflict is raised, the other swap's rows are all there, the merge changed nothing.
    fired = competing_writer(monkeypatch, spark.createDataFrame([(3, "o3", "other2", D1)],
                                                                "id bigint, value string, batch string, dt string"),
                             table)
    with pytest.raises(errors.SwapConflictError) as info:
        merge_partitions(updates(spark), table, on=["id"], delete_when="op = 'D'", merge_retries=0)
    assert info.value.table == table and info.value.retryable
    assert [r for r in rows(spark, table) if r[0] == D1] == [(D1, 3, "o3", "other2")]


def test_bad_merges_are_refused_before_anything_changes(spark, db, tmp_path, hms, ts_env):
    table = seed(spark, db, tmp_path)
    snapshot = metastore_snapshot(hms, db)
    dupes = spark.createDataFrame([(1, "a", "u", D0, "U"), (1, "b", "u", D0, "U"), (4, "c", "u", D1, "U"),
                                   (4, "d", "u", D1, "D"), (5, "e", "u", D1, "U")], UPDATE_SCHEMA)
    with pytest.raises(errors.DuplicateKeyError) as info:
        merge_partitions(dupes, table, on=["id"])
    assert isinstance(info.value, errors.InvalidInputError) and info.value.table == table
    assert info.value.keys == ("id=1 (2 rows)", "id=4 (2 rows)")
    assert "id=1 (2 rows); id=4 (2 rows)" in str(info.value)
    ok = updates(spark)
    for kwargs, error, text in [
        (dict(on=["nope"]), errors.InvalidInputError, "'nope', not column(s)"),
        (dict(on=[]), errors.InvalidInputError, "non-empty list"),
        (dict(on=["id"], when_matched="delete"), errors.InvalidInputError, "when_matched='delete'"),
        (dict(on=["id"], when_not_matched="upsert"), errors.InvalidInputError, "when_not_matched='upsert'"),
        (dict(on=["id"], delete_when="no_such_column = 1"), errors.InvalidInputError, "delete_when"),
        (dict(on=["id"], delete_when="id + 1"), errors.InvalidInputError, "not a condition"),
    ]:
        with pytest.raises(error, match=re.escape(text)):
            merge_partitions(ok, table, **kwargs)
    with pytest.raises(errors.SchemaMismatchError, match="missing 'batch'"):
        merge_partitions(spark.createDataFrame([(1, "v", D0)], "id bigint, value string, dt string"), table, on="id")
    with pytest.raises(errors.EmptyBatchError):
        merge_partitions(ok.limit(0), table, on="id")
    assert metastore_snapshot(hms, db) == snapshot
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events") == []


def test_merge_on_s3(spark, db, s3root, ts_env):
    table = seed(spark, db, s3root)
    merge_partitions(updates(spark), table, on=["id"], delete_when="op = 'D'")
    assert rows(spark, table) == EXPECTED
