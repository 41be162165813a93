"""Pure decisions of the admin commands: what a rollback restores, what is rolled back, what recover does."""

from __future__ import annotations

import pytest

from tableswap import errors
from tableswap.core import lineage
from tableswap.journal import PartitionChange, SwapRecord
from tableswap.ops.restore.recover import LANDED, NOT_LANDED, OTHER, ItemCheck, classify, decide


def rec(swap_id: str, t: str, *items: tuple, state: str = "committed", kind: str = "partitions") -> SwapRecord:
    return SwapRecord(swap_id=swap_id, db_name="db", table_name="t", kind=kind, state=state, table_root="/r",
                      started_at=t, intent_at=t, items=tuple(PartitionChange(*i) for i in items))


S1 = rec("s1", "2026-01-01", ("dt=1", "replace", "/a1", "/b1"), ("dt=3", "add", None, "/b3"))
S2 = rec("s2", "2026-01-02", ("dt=1", "replace", "/b1", "/c1"), ("dt=2", "replace", "/a2", "/c2"))
FAILED = rec("s3", "2026-01-03", ("dt=1", "replace", "/c1", "/x"), state="failed")


def test_default_restores_the_last_committed_swap():
    spec = lineage.restore_spec([S1, S2, FAILED])
    assert spec.rollback_of == "s2"
    assert dict(spec.targets) == {"dt=1": "/b1", "dt=2": "/a2"}
    assert dict(spec.expected) == {"dt=1": "/c1", "dt=2": "/c2"}


def test_partition_restores_its_last_change_and_to_restores_before_a_swap():
    spec = lineage.restore_spec([S1, S2], partitions=["dt=3"])
    assert (spec.rollback_of, dict(spec.targets), spec.undone) == ("s1", {"dt=3": None}, (("s1", "dt=3"),))
    spec = lineage.restore_spec([S1, S2], to="s1")
    assert dict(spec.targets) == {"dt=1": "/a1", "dt=2": "/a2", "dt=3": None}
    assert dict(spec.expected) == {"dt=1": "/c1", "dt=2": "/c2", "dt=3": "/b3"}
    assert set(spec.undone) == {("s1", "dt=1"), ("s1", "dt=3"), ("s2", "dt=1"), ("s2", "dt=2")}
    with pytest.raises(errors.NotFoundError):
        lineage.restore_spec([S1, S2], to="nope")
    with pytest.raises(errors.InvalidInputError):
        lineage.restore_spec([S1, S2, FAILED], to="s3")
    with pytest.raises(errors.NotFoundError):
        lineage.restore_spec([S1], partitions=["dt=9"])
    with pytest.raises(errors.NotFoundError):
        lineage.restore_spec([])


def test_rollback_of_a_rollback_reapplies_the_change():
    r1 = rec("r1", "2026-01-03", ("dt=1", "replace", "/c1", "/b1"), kind="rollback")
    r2 = rec("r2", "2026-01-04", ("dt=1", "replace", "/b1", "/c1"), kind="rollback")
    records = [S1, S2, r1, r2]
    assert lineage.rolled_back(records[:3], [("r1", "s2", "dt=1")]) == {("s2", "dt=1")}
    assert lineage.rolled_back(records, [("r1", "s2", "dt=1"), ("r2", "r1", "dt=1")]) == {("r1", "dt=1")}
    # An uncommitted rollback undoes nothing.
    failed = rec("r1", "2026-01-03", ("dt=1", "replace", "/c1", "/b1"), kind="rollback", state="failed")
    assert lineage.rolled_back([S1, S2, failed], [("r1", "s2", "dt=1")]) == set()
    assert lineage.restore_spec(records).targets == {"dt=1": "/b1"}


def test_recover_classifies_items_and_decides():
    replace = PartitionChange("dt=1", "replace", "/old", "/new")
    add = PartitionChange("dt=2", "add", None, "/new2")
    drop = PartitionChange("dt=3", "drop", "/old3", None)
    assert classify(replace, "s", ("/new", "s"), None).verdict == LANDED
    assert classify(replace, "s", ("/new", "other"), None).verdict == OTHER  # right path, wrong stamp
    assert classify(replace, "s", ("/old", "x"), None).verdict == NOT_LANDED
    assert classify(replace, "s", ("/third", "t"), None).verdict == OTHER
    assert classify(add, "s", None, None).verdict == NOT_LANDED
    assert classify(add, "s", ("/new2", "s"), None).verdict == LANDED
    assert classify(drop, "s", None, None).verdict == LANDED
    assert classify(drop, "s", ("/old3", None), None).verdict == NOT_LANDED
    # A later swap changed the partition: its journaled old location tells what the crash left.
    assert classify(replace, "s", ("/later", "t"), (True, "/new")).verdict == LANDED
    assert classify(replace, "s", ("/later", "t"), (True, "/old")).verdict == NOT_LANDED

    def checks(*verdicts):
        return [ItemCheck(f"p{i}", "replace", "/o", "/n", None, v) for i, v in enumerate(verdicts)]

    assert decide(checks(LANDED, LANDED), False) == "committed"
    assert decide(checks(NOT_LANDED, NOT_LANDED), True) == "aborted"
    assert decide(checks(LANDED, NOT_LANDED), False) == "completed"
    assert decide(checks(LANDED, NOT_LANDED), True) == "manual"
    assert decide(checks(LANDED, OTHER), False) == "manual"


def test_state_as_of_works_back_from_now_through_later_swaps():
    s1 = rec("s1", "2026-01-01", ("dt=1", "replace", "/a1", "/b1"), ("dt=3", "add", None, "/b3"))
    s2 = rec("s2", "2026-01-02", ("dt=1", "replace", "/b1", "/c1"), ("dt=2", "drop", "/a2", None))
    s1 = SwapRecord(**{**s1.__dict__, "committed_at": "2026-01-01T00:00:00+00:00"})
    s2 = SwapRecord(**{**s2.__dict__, "committed_at": "2026-01-02T00:00:00+00:00"})
    now = {"dt=1": "/c1", "dt=3": "/b3", "dt=4": "/x4"}  # dt=4: never changed by a swap
    after_s1 = lineage.state_as_of([s1, s2, FAILED], now, swap_id="s1")
    assert {p.partition: (p.location, p.set_by) for p in after_s1.partitions} == {
        "dt=1": ("/b1", "s1"), "dt=2": ("/a2", None), "dt=3": ("/b3", "s1"), "dt=4": ("/x4", None)}
    assert (after_s1.point, after_s1.undone) == ("s1", ("s2",))
    before = lineage.state_as_of([s1, s2], now, timestamp="2025-12-31T23:59:59Z")
    assert before.point is None and {p.partition: p.location for p in before.partitions} == {
        "dt=1": "/a1", "dt=2": "/a2", "dt=4": "/x4"}
    between = lineage.state_as_of([s1, s2], now, timestamp="2026-01-01T12:00:00")  # naive: UTC
    assert between.point == "s1"
    assert lineage.state_as_of([s1, s2], now, swap_id="s2").partitions == tuple(
        lineage.PastPartition(n, x, s) for n, x, s in [("dt=1", "/c1", "s2"), ("dt=3", "/b3", "s1"),
                                                        ("dt=4", "/x4", None)])
    with pytest.raises(errors.InvalidInputError, match="not committed"):
        lineage.state_as_of([s1, s2, FAILED], now, swap_id="s3")
    with pytest.raises(errors.InvalidInputError, match="exactly one"):
        lineage.state_as_of([s1], now)
