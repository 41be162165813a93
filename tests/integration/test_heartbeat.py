"""A swap's liveness signal in the journal (journal version 10), on SQLite and on PostgreSQL alike: the heartbeat
its process refreshes from its begin to its end (ops/operation.py, ``Heartbeat``), and the compare-and-set with
which ``tableswap recover`` aborts a silent ``staging`` swap (``Journal.abort_silent``). No metastore, no Spark:
tests/integration/test_recover.py has the writer processes."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from tableswap import errors
from tableswap.core.records import SwapKind
from tableswap.journal import ABORTED, COMMITTED, FAILED, PENDING, STAGING, Journal, PartitionChange, SwapRecord, utcnow
from tableswap.journal import db as journal_db
from tableswap.ops.operation import Heartbeat, Operation, begin, end_heartbeat

ROOT = "file:/w/events"


def _op(swap_id: str) -> Operation:
    return Operation(SwapKind.PARTITIONS, swap_id, "db", "events", ROOT,
                     staging_location=f"{ROOT}/_tableswap/{swap_id}", temp_table=f"events__tswap_{swap_id}")


def _wait(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_begin_records_a_heartbeat_that_goes_on_until_the_swap_leaves_staging_and_pending(any_journal_url):
    journal = Journal(any_journal_url)
    beat = begin(journal, _op("s1"), heartbeat_s=0.05)
    first = journal.get_swap("s1")
    assert first.state == STAGING and first.heartbeat_at == first.started_at
    _wait(lambda: journal.get_swap("s1").heartbeat_at > first.heartbeat_at)
    journal.record_intent("s1", [PartitionChange("dt=1", "add", None, f"{ROOT}/_tableswap/s1/dt=1")])
    pending = journal.get_swap("s1").heartbeat_at
    _wait(lambda: journal.get_swap("s1").heartbeat_at > pending)  # pending: still beating
    journal.commit("s1", [])
    _wait(lambda: not beat.running)  # committed: the thread ends by itself
    done = journal.get_swap("s1")
    assert done.state == COMMITTED and not journal.heartbeat("s1")
    assert journal.get_swap("s1").heartbeat_at == done.heartbeat_at
    journal.close()


def test_end_heartbeat_stops_it_at_once(any_journal_url):
    journal = Journal(any_journal_url)
    beat = begin(journal, _op("s2"), heartbeat_s=0.05)
    _wait(lambda: beat.beats >= 1)
    end_heartbeat("s2")
    _wait(lambda: not beat.running)
    stopped = journal.get_swap("s2")
    assert stopped.state == STAGING  # the record is the journal's to change: only the signal stopped
    time.sleep(0.2)
    assert journal.get_swap("s2").heartbeat_at == stopped.heartbeat_at
    end_heartbeat("s2")  # again, and for a swap this process never began: nothing to do
    end_heartbeat("nope")
    with pytest.raises(ValueError, match="> 0"):
        Heartbeat(journal, "s3", 0)
    journal.close()


def test_abort_silent_is_a_compare_and_set_on_the_heartbeat_and_queues_the_staged_data_once(any_journal_url):
    journal = Journal(any_journal_url)
    begin(journal, _op("s4"), heartbeat_s=3600).stop()
    seen = journal.get_swap("s4").heartbeat_at
    assert journal.heartbeat("s4")  # it beat after recover read it: alive after all
    staged = [("", f"{ROOT}/_tableswap/s4")]
    assert journal.abort_silent("s4", seen, "silent", staged) is False
    assert journal.get_swap("s4").state == STAGING and journal.deletions_of("db", "events") == []
    now = journal.get_swap("s4").heartbeat_at
    assert journal.abort_silent("s4", now, "aborted by `tableswap recover`: silent", staged) is True
    aborted = journal.get_swap("s4")
    assert aborted.state == ABORTED and aborted.finished_at and "silent" in aborted.error
    assert [(d.reason, d.location) for d in journal.deletions_of("db", "events")] == [("orphan", staged[0][1])]
    assert journal.abort_silent("s4", now, "again", staged) is False  # once
    assert not journal.heartbeat("s4")  # an aborted swap's heartbeat stops
    # A frozen writer that wakes up fails at its intent, saying why, with nothing changed.
    with pytest.raises(errors.SwapConflictError) as caught:
        journal.record_intent("s4", [PartitionChange("dt=1", "add", None, f"{ROOT}/_tableswap/s4/dt=1")])
    assert "no longer in progress in the journal: it is aborted (aborted by `tableswap recover`: silent)" in str(
        caught.value)
    assert "nothing was changed" in str(caught.value)
    assert journal.get_swap("s4").items == ()
    # Only from staging: a pending swap is recover's under the table lock.
    begin(journal, _op("s5"), heartbeat_s=3600).stop()
    journal.record_intent("s5", [])
    assert journal.abort_silent("s5", journal.get_swap("s5").heartbeat_at, "x") is False
    assert journal.get_swap("s5").state == PENDING
    journal.close()


def test_a_record_from_before_version_10_has_no_heartbeat_and_is_aborted_by_its_null(any_journal_url):
    journal = Journal(any_journal_url)
    journal.begin_swap(SwapRecord(swap_id="old", db_name="db", table_name="events", kind="partitions",
                                  state=STAGING, table_root=ROOT, started_at=utcnow()))
    old = journal.get_swap("old")
    assert old.heartbeat_at is None
    assert journal.abort_silent("old", "2026-01-01T00:00:00+00:00", "x") is False
    assert journal.abort_silent("old", None, "x") is True
    with journal.engine.connect() as conn:
        assert 10 in {r[0] for r in conn.execute(sa.text("SELECT version FROM tableswap_schema"))}
    assert (10, "heartbeat") in [(v, s.split("ADD COLUMN ")[1].split("_")[0]) for v, s in
                                 journal_db.migrations(journal.dialect) if v == 10]
    journal.close()


def test_a_failed_operation_stops_beating(any_journal_url):
    from tableswap.ops.commit import fail

    journal = Journal(any_journal_url)
    beat = begin(journal, _op("s6"), heartbeat_s=0.05)
    fail(journal, _op("s6"), RuntimeError("boom"), flipped=False)
    _wait(lambda: not beat.running)
    assert journal.get_swap("s6").state == FAILED
    journal.close()
