"""The swap groups' journal records (journal version 14, journal/groups.py) on SQLite and PostgreSQL: a group
from ``open`` through its one intent to its one commit (every member committed and its displaced locations
queued once, in one transaction), a table once per group, a group found by id or by its latest name."""

from __future__ import annotations

import pytest

from tableswap import errors
from tableswap.journal import Journal, PartitionChange, SwapRecord, utcnow
from tableswap.journal.groups import GroupLog


def _member(journal: Journal, groups: GroupLog, group_id: str, swap_id: str, table: str) -> None:
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name=table, kind="partitions",
                                  state="staging", table_root=f"file:/w/{table}", started_at=utcnow()))
    groups.add_member(group_id, swap_id, "db", table)


def test_a_group_goes_open_pending_committed_in_one_transaction(any_journal_url):
    journal = Journal(any_journal_url)
    groups = GroupLog(journal)
    groups.create("g1", "nightly", "swap")
    _member(journal, groups, "g1", "s-orders", "orders")
    _member(journal, groups, "g1", "s-customers", "customers")
    with pytest.raises(errors.InvalidInputError, match="already a member"):
        groups.add_member("g1", "s-other", "db", "orders")
    for swap_id, old in (("s-orders", "file:/w/orders/dt=1"), ("s-customers", "file:/w/customers/v0")):
        journal.record_intent(swap_id, [PartitionChange("dt=1" if "orders" in swap_id else "", "replace", old, old + "_n")])
    assert not groups.pending_with("s-orders")  # intents alone: not yet the group's commit point

    groups.record_intent("g1")

    assert groups.pending_with("s-orders") and groups.get("nightly").state == "pending"
    with pytest.raises(errors.SwapConflictError):
        groups.record_intent("g1")  # once
    groups.commit("g1", {"s-orders": [("dt=1", "file:/w/orders/dt=1")], "s-customers": [("", "file:/w/customers/v0")]})
    record = groups.get("g1")
    assert record.state == "committed" and record.committed_at
    assert [(m.table, m.state) for m in record.members] == [("db.orders", "committed"), ("db.customers", "committed")]
    assert sorted(d.location for d in journal.deletions()) == ["file:/w/customers/v0", "file:/w/orders/dt=1"]
    assert groups.group_of("s-customers").group_id == "g1" and groups.group_of("s-unknown") is None


def test_a_name_means_the_latest_group_of_that_name(any_journal_url):
    groups = GroupLog(Journal(any_journal_url))
    groups.create("g-old", "daily", "swap")
    groups.create("g-new", "daily", "swap")
    assert groups.get("daily").group_id == "g-new" and groups.get("g-old").group_id == "g-old"
    assert [g.group_id for g in groups.list()][:2] == ["g-new", "g-old"]
    with pytest.raises(errors.NotFoundError):
        groups.get("weekly")


def test_a_group_discard_is_every_member_or_none(any_journal_url):
    journal = Journal(any_journal_url)
    groups = GroupLog(journal)
    groups.create("g1", None, "swap")
    for swap_id, table in (("s-a", "a"), ("s-b", "b")):
        _member(journal, groups, "g1", swap_id, table)
        assert journal.mark_staged(swap_id)
    assert journal.end_staged("s-b", "discarded alone")  # a member that went alone

    with pytest.raises(errors.NotStagedError, match="s-b"):
        groups.discard("g1", "nightly failed", {"s-a": [("", "file:/w/a/_tableswap/s-a")], "s-b": []})

    assert journal.get_swap("s-a").state == "staged" and groups.get("g1").state == "open"  # rolled back whole
    assert not journal.deletions()
    groups.create("g2", None, "swap")
    _member(journal, groups, "g2", "s-c", "c")
    assert journal.mark_staged("s-c")
    groups.discard("g2", "nightly failed", {"s-c": [("", "file:/w/c/_tableswap/s-c")]})
    assert journal.get_swap("s-c").state == "aborted" and groups.get("g2").state == "discarded"
    assert [d.location for d in journal.deletions()] == ["file:/w/c/_tableswap/s-c"]
