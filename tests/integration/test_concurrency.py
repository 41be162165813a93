"""Locking, serializable concurrent swaps and reconciliation of lost metastore responses."""

from __future__ import annotations

import threading

import pytest

from tableswap.runtime import Runtime
from tableswap import swap_partitions, swap_table
from tableswap import errors
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.metastore.client import MetastoreClient, parse_uri
from tableswap.metastore.lock import TableLock
from tableswap.core.catalog import SWAP_ID_PARAM

from ..support.helpers import assert_serial_equivalence, batch_df, create_events, partition_locations, reader_view, today
from ..support.proxy import CuttingProxy

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


def competing_writer(monkeypatch, competitor, table, **options) -> list:
    """Make the next swap's lock call first run a competing swap of ``competitor`` (with ``options``) to
    completion (a writer that commits while the other is still writing its batch). Returns [its result]."""
    real_lock = Runtime.table_lock
    fired: list = []

    def lock_after_competitor(rt, client, db, name, owner):
        if not fired:
            fired.append(None)  # the competitor's own lock call must not recurse
            fired[0] = swap_partitions(competitor, table, **options)
        return real_lock(rt, client, db, name, owner)

    monkeypatch.setattr(Runtime, "table_lock", lock_after_competitor)
    return fired


def initial_locations(hms, db, name) -> dict[str, str]:
    return {f"dt={v[0]}": x for v, x in partition_locations(hms, db, name).items()}


def test_a_writer_that_commits_first_is_followed_not_refused(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """Writer A stages its batch; before A locks, writer B swaps one of A's partitions. A plans under
    the lock from B's result and goes through: the table is B-then-A, as if run one after the other,
    and each displaced directory (the original, then B's) is queued once."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    initial = initial_locations(hms, db, "events")
    fired = competing_writer(monkeypatch, batch_df(spark, {(today(0),): 9}, "writer-b"), table)
    result = swap_partitions(batch_df(spark, {(today(0),): 4, (today(5),): 1}, "writer-a"), table)
    b = fired[0]
    assert reader_view(spark, table) == {(today(0),): (4, ("writer-a",)), (today(1),): (2, ("old",)),
                                         (today(5),): (1, ("writer-a",))}
    # A planned from B's state, read under the lock: it replaced B's directory, not the original.
    assert [(c.partition, loc.normalize(c.old_location)) for c in result.replaced] == [
        (f"dt={today(0)}", loc.normalize(b.replaced[0].new_location))]
    assert [c.partition for c in result.added] == [f"dt={today(5)}"]
    assert hms.lock_holders(db, "events") == []
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    order = assert_serial_equivalence(hms, journal, db, "events", initial)
    assert [r.swap_id for r in order] == [b.swap_id, result.swap_id]


def test_a_partition_added_meanwhile_is_replaced_in_serial_order(spark, db, tmp_path, hms, ts_env, monkeypatch):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    initial = initial_locations(hms, db, "events")
    fired = competing_writer(monkeypatch, batch_df(spark, {(today(7),): 1}, "writer-b"), table)
    result = swap_partitions(batch_df(spark, {(today(7),): 5}, "writer-a"), table)
    assert reader_view(spark, table)[(today(7),)] == (5, ("writer-a",))
    assert not result.added and [c.partition for c in result.replaced] == [f"dt={today(7)}"]
    order = assert_serial_equivalence(hms, Journal(ts_env["TABLESWAP_JOURNAL_URL"]), db, "events", initial)
    assert [r.swap_id for r in order] == [fired[0].swap_id, result.swap_id]


def test_concurrent_writers_equal_one_serial_order(spark, db, tmp_path, hms, ts_env):
    """Several writers at once, on overlapping and disjoint partition sets, one an identical rerun of
    another: every swap commits, and the table and the janitor's queue are those of running them one
    after the other in lock order."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(d),): 1 for d in range(4)}, "old").write.insertInto(table)
    initial = initial_locations(hms, db, "events")
    batches = {"w1": {(today(0),): 2, (today(1),): 2, (today(2),): 2},
               "w2": {(today(1),): 3, (today(2),): 3, (today(3),): 3},
               "w3": {(today(8),): 4},  # disjoint, new
               "w4": {(today(0),): 2, (today(1),): 2, (today(2),): 2}}  # w1's batch again
    frames = {w: batch_df(spark, rows, w if w != "w4" else "w1") for w, rows in batches.items()}
    results, failures = {}, []

    def writer(w):
        try:
            results[w] = swap_partitions(frames[w], table, lock_timeout_s=120)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            failures.append((w, repr(exc)))

    threads = [threading.Thread(target=writer, args=(w,)) for w in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []  # no SwapConflictError: serial order resolves every race
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    order = assert_serial_equivalence(hms, journal, db, "events", initial)
    writer_of = {r.swap_id: w for w, r in results.items()}
    assert sorted(writer_of[r.swap_id] for r in order) == sorted(batches)
    # The rows: each partition holds the batch of the last writer (in lock order) that wrote it.
    expected = {(today(d),): (1, ("old",)) for d in range(4)}
    for record in order:
        w = writer_of[record.swap_id]
        expected.update({k: (n, (w if w != "w4" else "w1",)) for k, n in batches[w].items()})
    assert reader_view(spark, table) == expected
    assert hms.lock_holders(db, "events") == []
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]


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
    from tableswap.ops.restore.recover import recover

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)

    real_alter = Client.alter_partition_locations

    def broken_alter(self, *args, **kwargs):
        raise errors.CatalogError("alter_partitions: metastore error: injected failure")

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
