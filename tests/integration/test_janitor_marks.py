"""The janitor's mark "deletion begun" and what reads it (no metastore, no Spark): the journal's rows on SQLite
and PostgreSQL, and the restorability check every restore, read of the past and report goes through
(``tableswap.ops.locations.LocationChecker``). The whole path on S3, with a janitor killed between two delete
pages, is tests/integration/test_janitor_s3.py."""

from __future__ import annotations

import pytest

from tableswap.journal import STAGING, Journal, PartitionChange, SwapRecord, utcnow
from tableswap.journal.queue import DELETED, JanitorQueue
from tableswap.ops.locations import LocationChecker

ROOT = "s3a://bucket/events"


def _begun(journal: Journal, swap_id: str) -> None:
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name="events", kind="partitions",
                                  state=STAGING, table_root=ROOT, started_at=utcnow(), user_name="me",
                                  host_name="host"))


def _orphan(journal: Journal, swap_id: str, location: str) -> None:
    _begun(journal, swap_id)
    journal.queue_orphans(swap_id, [("", location)])


def _committed(journal: Journal, swap_id: str, displaced) -> None:
    _begun(journal, swap_id)
    journal.record_intent(swap_id, [PartitionChange(p, "replace", old, f"{old}_new") for p, old in displaced])
    journal.commit(swap_id, displaced)


def _row(journal: Journal, location: str):
    [row] = [d for d in journal.deletions_of("db", "events") if d.location == location]
    return row


def test_the_mark_is_set_once_and_a_reappeared_orphan_is_queued_again(any_journal_url):
    journal = Journal(any_journal_url)
    queue = JanitorQueue(journal)
    displaced, orphan = f"{ROOT}/_tableswap/s1/dt=d1", f"{ROOT}/_tableswap/s9"
    _committed(journal, "s1", [("dt=d1", displaced)])
    _orphan(journal, "s9", orphan)
    assert _row(journal, displaced).delete_begun_at is None

    queue.mark_delete_begun([("s1", displaced), ("s9", orphan)])
    first = _row(journal, displaced).delete_begun_at
    assert first and _row(journal, orphan).delete_begun_at
    queue.mark_delete_begun([("s1", displaced)])  # a later run finishing it: the first time stays
    assert _row(journal, displaced).delete_begun_at == first

    queue.record([("s1", displaced, DELETED, "done"), ("s9", orphan, DELETED, "done")], token=None)
    assert not queue.requeue_reappeared("s1", displaced)  # a displaced location is never queued again
    assert queue.requeue_reappeared("s9", orphan)
    row = _row(journal, orphan)
    assert (row.state, row.deleted_at) == ("pending", None) and "reappeared on storage" in row.last_error
    assert row.delete_begun_at  # never cleared
    assert not queue.requeue_reappeared("s9", orphan)  # pending already
    assert queue.claim("s9", orphan, token="t", lease_s=60, queued=True)


def test_a_location_whose_deletion_began_is_never_restorable(any_journal_url):
    journal = Journal(any_journal_url)
    queue = JanitorQueue(journal)
    half, whole = f"{ROOT}/_tableswap/s1/dt=d1", f"{ROOT}/_tableswap/s1/dt=d2"
    _committed(journal, "s1", [("dt=d1", half), ("dt=d2", whole)])
    _orphan(journal, "s7", f"{ROOT}/_tableswap/s7")
    queue.mark_delete_begun([("s1", half), ("s7", f"{ROOT}/_tableswap/s7")])

    check = LocationChecker(journal.deletions_of("db", "events"), exists=lambda location: True)

    status = check(half)
    assert status.exists and not status.restorable and status.deleted_by_janitor
    assert status.queue_state == "pending" and "the janitor began deleting it at" in status.problem
    assert check(whole).restorable and check(whole).problem is None
    assert not check(f"{ROOT}/_tableswap/s7/dt=d1").restorable  # inside a directory whose deletion began
    assert not check(f"{ROOT}/_tableswap/s1").restorable  # holds a location whose deletion began
    assert check(f"{ROOT}/_tableswap/s1/dt=d10").restorable  # a sibling that merely shares the prefix
    assert check(ROOT).restorable  # what went lies below _tableswap/: a reader of the root never sees it
    gone = LocationChecker(journal.deletions_of("db", "events"), exists=lambda location: False)(half)
    assert "began deleting it" in gone.problem and "whatever remains" not in gone.problem


@pytest.mark.parametrize("state", ["restored", "refused"])
def test_the_mark_holds_whatever_the_queue_state(any_journal_url, state):
    """A rollback that marked the row restored before the janitor's mark was seen (it then refuses and puts
    it back), or a refusal noted on it: the mark alone decides."""
    journal = Journal(any_journal_url)
    location = f"{ROOT}/_tableswap/s1/dt=d1"
    _committed(journal, "s1", [("dt=d1", location)])
    JanitorQueue(journal).mark_delete_begun([("s1", location)])
    journal.set_deletion_state("s1", location, state)
    assert not LocationChecker(journal.deletions_of("db", "events"), exists=lambda location: True)(location).restorable


def test_a_deletion_begun_at_a_table_root_leaves_its_swap_directories_restorable(any_journal_url):
    """The janitor's partial delete of an unpartitioned table's old root (its files, never ``_tableswap/``)."""
    journal = Journal(any_journal_url)
    _committed(journal, "s1", [("", ROOT)])
    JanitorQueue(journal).mark_delete_begun([("s1", ROOT)])
    check = LocationChecker(journal.deletions_of("db", "events"), exists=lambda location: True)
    assert not check(ROOT).restorable and not check(f"{ROOT}/old").restorable
    assert check(f"{ROOT}/_tableswap/s1").restorable and check(f"{ROOT}/.hidden/x").restorable
