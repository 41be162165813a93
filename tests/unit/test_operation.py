"""An operation as one value (ops/operation.py): its one begin record, and recover's rebuild of it from the
journal (no metastore, no Spark; the commit protocol that drives it is exercised by every swap test)."""

from __future__ import annotations

import dataclasses
import getpass
import socket

import pytest

from tableswap.core.plan import SwapPlan
from tableswap.core.records import STAGING, SwapKind, SwapRecord
from tableswap.journal import Journal
from tableswap.ops.operation import Operation, begin


def test_an_operation_begins_with_one_journal_record_of_its_kind_table_user_and_host(tmp_path):
    op = Operation(SwapKind.PARTITIONS, "s1", "db", "events", "file:/w/events",
                   staging_location="file:/w/events/_tableswap/s1", temp_table="events__tableswap_s1", app_id="app-7")
    journal = Journal(f"sqlite:///{tmp_path / 'j.db'}")
    begin(journal, op)
    record = journal.get_swap("s1")
    assert (record.swap_id, record.db_name, record.table_name, record.kind, record.state, record.table_root) == (
        "s1", "db", "events", "partitions", STAGING, "file:/w/events")
    assert (record.staging_location, record.temp_table, record.app_id, record.rollback_of) == (
        "file:/w/events/_tableswap/s1", "events__tableswap_s1", "app-7", None)
    assert (record.user_name, record.host_name) == (getpass.getuser(), socket.gethostname()) and record.started_at
    # A restore's begin: its kind and what it rolls back, nothing staged.
    restore = Operation(SwapKind.ROLLBACK, "s2", "db", "events", "file:/w/events", rollback_of="s1")
    begun = restore.begin_record()
    assert (begun.kind, begun.rollback_of, begun.staging_location, begun.temp_table) == ("rollback", "s1", None, None)


def test_an_operation_is_a_frozen_value_whose_kind_is_the_enum():
    op = Operation("table", "s1", "db", "t", "")  # a journal's stored value becomes the enum
    assert op.kind is SwapKind.TABLE and op.qualified == "db.t" and op.planner is None
    plan = SwapPlan("s1", "db", "t", ())
    planned = op.planned(plan)
    assert planned.planner is plan and op.planner is None and planned.kind is SwapKind.TABLE
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.resume = True  # type: ignore[misc]
    with pytest.raises(ValueError):
        Operation("swap", "s1", "db", "t", "")  # not a kind the journal records


def test_recover_rebuilds_the_operation_from_the_journal_record():
    record = SwapRecord(swap_id="s3", db_name="db", table_name="events", kind="rollback", state="pending",
                        table_root="file:/w/events", rollback_of="s1", started_at="2026-01-01T00:00:00+00:00")
    plan = SwapPlan("s3", "db", "events", ("dt",))
    op = Operation.resumed(record, plan, [("dt=1", "file:/w/events/_tableswap/s1/dt=1")])
    assert op.kind is SwapKind.ROLLBACK and op.kind.restores and op.resume and op.planner is plan
    assert op.displaced == (("dt=1", "file:/w/events/_tableswap/s1/dt=1"),) and op.rollback_of == "s1"
    # A resumed commit reports itself as the protocol always did: a swap, with nothing of its own to discard.
    assert (op.label, op.rerun, op.before_flip, op.discard) == ("swap", "Rerun the swap", None, None)
