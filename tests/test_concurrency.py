"""Locking, compare-and-swap conflicts and reconciliation of lost metastore responses."""

from __future__ import annotations

import pytest

from tableswap.runtime import Runtime
from tableswap import swap_partitions, swap_table
from tableswap import errors
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.metastore.client import MetastoreClient, parse_uri
from tableswap.metastore.lock import TableLock
from tableswap.metastore.model import SWAP_ID_PARAM

from .helpers import batch_df, create_events, partition_locations, reader_view, today
from .proxy import CuttingProxy

pytestmark = pytest.mark.integration


def test_lock_timeout_names_the_holder_and_changes_nothing(spark, db, tmp_path, hms, ts_env, metastore_uri):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    before = partition_locations(hms, db, "events")
    with MetastoreClient(metastore_uri) as other:
        with TableLock(other, db, "events", swap_id="other-writer", heartbeat_s=5):
            with pytest.raises(errors.LockTimeoutError, match="held by .*tableswap swap=other-writer") as info:
                swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), table, lock_timeout_s=2)
            assert info.value.retryable
    assert partition_locations(hms, db, "events") == before
    assert reader_view(spark, table) == {(today(0),): (2, ("old",))}
    assert hms.lock_holders(db, "events") == []  # the waiting request was withdrawn, the holder released
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    # With the lock free again, the same swap goes through.
    swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), table)
    assert reader_view(spark, table) == {(today(0),): (3, ("new",))}


def competing_writer(monkeypatch, competitor, table) -> list:
    """Make the next swap's lock call first run a competing swap of ``competitor`` to completion
    (a writer that wins the race between planning and locking). Returns [competitor's result]."""
    real_lock = Runtime.table_lock
    fired: list = []

    def lock_after_competitor(rt, client, db, name, owner):
        if not fired:
            fired.append(None)  # the competitor's own lock call must not recurse
            fired[0] = swap_partitions(competitor, table)
        return real_lock(rt, client, db, name, owner)

    monkeypatch.setattr(Runtime, "table_lock", lock_after_competitor)
    return fired


def test_conflicting_writer_is_detected_and_loses_cleanly(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """Writer A plans; before A locks, writer B swaps the same partition. A must fail with a
    retryable conflict, leave B's data in place, and release its lock."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    real_lock = Runtime.table_lock
    fired = competing_writer(monkeypatch, batch_df(spark, {(today(0),): 9}, "writer-b"), table)
    with pytest.raises(errors.SwapConflictError, match="changed since the swap was planned") as info:
        swap_partitions(batch_df(spark, {(today(0),): 4, (today(5),): 1}, "writer-a"), table)
    assert info.value.retryable
    assert reader_view(spark, table) == {(today(0),): (9, ("writer-b",)), (today(1),): (2, ("old",))}
    assert hms.lock_holders(db, "events") == []
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    states = {s.swap_id: s.state for s in journal.list_swaps(db, "events")}
    assert states[fired[0].swap_id] == "committed"
    assert sorted(states.values()) == ["committed", "failed"]
    # Only writer B's displacement is queued; writer A's staged data was discarded.
    assert [d.swap_id for d in journal.deletions(db=db, table="events")] == [fired[0].swap_id]
    assert [p.name for p in (tmp_path / "events" / "_tableswap").iterdir()] == [fired[0].swap_id]
    # A rerun of A (the retry the error asks for) now succeeds.
    monkeypatch.setattr(Runtime, "table_lock", real_lock)
    swap_partitions(batch_df(spark, {(today(0),): 4, (today(5),): 1}, "writer-a"), table)
    assert reader_view(spark, table)[(today(0),)] == (4, ("writer-a",))


def test_conflict_on_a_partition_added_meanwhile(spark, db, tmp_path, hms, ts_env, monkeypatch):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    competing_writer(monkeypatch, batch_df(spark, {(today(7),): 1}, "writer-b"), table)
    with pytest.raises(errors.SwapConflictError, match="added meanwhile"):
        swap_partitions(batch_df(spark, {(today(7),): 5}, "writer-a"), table)
    assert reader_view(spark, table)[(today(7),)] == (1, ("writer-b",))


@pytest.mark.fault
@pytest.mark.parametrize("call", [b"alter_partitions_with_environment_context", b"add_partitions_req"])
def test_lost_flip_response_is_reconciled_not_repeated(spark, db, tmp_path, hms, ts_env, metastore_uri, call):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    host, port = parse_uri(metastore_uri)
    proxy = CuttingProxy(host, port, cut_on=call)
    try:
        result = swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), table,
                                 metastore_uri=proxy.uri)
    finally:
        proxy.close()
    assert proxy.cuts == 1  # the response really was lost once
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    assert {v: p.parameters.get(SWAP_ID_PARAM) for v, p in parts.items()} == {
        (today(0),): result.swap_id, (today(1),): result.swap_id}
    assert reader_view(spark, table) == {(today(0),): (3, ("new",)), (today(1),): (1, ("new",))}
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.get_swap(result.swap_id).state == "committed"
    assert [d.location for d in journal.deletions(db=db, table="events")] == [result.replaced[0].old_location]


@pytest.mark.fault
def test_lost_alter_table_response_is_reconciled(spark, db, tmp_path, hms, ts_env, metastore_uri):
    table = f"{db}.dim"
    spark.sql(f"CREATE TABLE {table} (id bigint) USING parquet LOCATION '{(tmp_path / 'dim').as_uri()}'")
    spark.range(5).write.insertInto(table)
    host, port = parse_uri(metastore_uri)
    proxy = CuttingProxy(host, port, cut_on=b"alter_table_with_environment_context")
    try:
        result = swap_table(spark.range(7), table, metastore_uri=proxy.uri)
    finally:
        proxy.close()
    assert proxy.cuts == 1
    info = hms.get_table(db, "dim")
    assert loc.same(info.location, result.table_change.new_location)
    assert spark.table(table).count() == 7


@pytest.mark.fault
def test_transient_read_failures_are_retried(spark, db, tmp_path, hms, ts_env, metastore_uri):
    table = create_events(spark, db, tmp_path)
    host, port = parse_uri(metastore_uri)
    proxy = CuttingProxy(host, port, cut_on=b"get_partitions_by_names", times=2)
    try:
        swap_partitions(batch_df(spark, {(today(0),): 1}, "new"), table, metastore_uri=proxy.uri)
    finally:
        proxy.close()
    assert proxy.cuts == 2
    assert reader_view(spark, table) == {(today(0),): (1, ("new",))}


def test_table_cas_rejects_a_stale_expected_stamp(spark, db, tmp_path, hms):
    """The metastore's own table-parameter compare-and-swap (alter_table environment context)."""
    table = f"{db}.dim"
    root = (tmp_path / "dim").as_uri()
    spark.sql(f"CREATE TABLE {table} (id bigint) USING parquet LOCATION '{root}'")
    info = hms.get_table(db, "dim")
    hms.alter_table_location(info, info.location, root + "/_tableswap/a", {SWAP_ID_PARAM: "a"})
    stale = hms.get_table(db, "dim")
    hms.alter_table_location(stale, stale.location, root + "/_tableswap/b", {SWAP_ID_PARAM: "b"})
    # Planned against stamp "b"'s predecessor: the locked re-read catches it first.
    with pytest.raises(errors.SwapConflictError):
        hms.alter_table_location(stale, stale.location, root + "/_tableswap/c", {SWAP_ID_PARAM: "c"})
    assert hms.get_table(db, "dim").swap_id == "b"


@pytest.mark.fault
def test_failure_during_the_flip_says_recover_and_recover_completes_it(spark, db, tmp_path, hms, ts_env, monkeypatch):
    from tableswap.metastore.client import MetastoreClient as Client
    from tableswap.ops.recover import recover

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)

    real_alter = Client.alter_partition_locations

    def broken_alter(self, *args, **kwargs):
        raise errors.MetastoreError("alter_partitions: metastore error: injected failure")

    monkeypatch.setattr(Client, "alter_partition_locations", broken_alter)
    with pytest.raises(errors.CommitStateUnknownError, match="tableswap recover --table") as info:
        swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), table)
    swap_id = info.value.args[0].split()[1]
    # The add landed, the alter did not: each partition is entirely old or entirely new.
    assert reader_view(spark, table) == {(today(0),): (2, ("old",)), (today(1),): (1, ("new",))}
    assert hms.lock_holders(db, "events") == []
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).get_swap(swap_id).state == "pending"
    monkeypatch.setattr(Client, "alter_partition_locations", real_alter)
    report = recover(table)
    assert [(r.swap_id, r.outcome) for r in report.resolutions] == [(swap_id, "completed")]
    assert reader_view(spark, table) == {(today(0),): (3, ("new",)), (today(1),): (1, ("new",))}
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).get_swap(swap_id).state == "committed"
