"""Pure parts of issue 21: recovery manifests (format, crash semantics), repair planning, and the janitor's
treatment of manifests. No services."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from types import MappingProxyType

import pytest

from tableswap import errors
from tableswap.core import manifest as mf
from tableswap.core.janitor_plan import KEEP, REFUSE, LiveRef, LiveView, SwapDirCandidate, expand, plan_janitor
from tableswap.core.records import COMMITTED, FAILED, PartitionChange, SwapRecord
from tableswap.core.repair_plan import A_ADD, A_LEAVE, A_REPOINT, plan_repair
from tableswap.core.catalog import Column, PartitionInfo, TableInfo

ROOT = "file:///data/events"
STAGE = f"{ROOT}/_tableswap"
TABLE = TableInfo("db", "events", "EXTERNAL_TABLE", ROOT, (Column("id", "bigint"),), (Column("dt", "string"),))
FLAT = TableInfo("db", "dim", "EXTERNAL_TABLE", "file:///data/dim", (Column("id", "bigint"),), ())


@dataclass(frozen=True)
class Status:
    exists: bool | None
    deleted_by_janitor: bool = False


def record(swap_id: str, at: str, *changes: tuple[str, str, str | None, str | None], kind="partitions",
           state=COMMITTED) -> SwapRecord:
    return SwapRecord(swap_id, "db", "events", kind, state, ROOT, started_at=at, intent_at=at,
                      items=tuple(PartitionChange(*c) for c in changes))


def part(day: str, location: str) -> tuple[tuple[str, ...], PartitionInfo]:
    return (day,), PartitionInfo((day,), location, MappingProxyType({}))


X = "20260601_000000_aaaa0001"
R = "20260602_000000_bbbb0002"
HISTORY = [
    record(X, "2026-06-01T00:00:00", ("dt=d2", "replace", f"{ROOT}/dt=d2", f"{STAGE}/{X}/dt=d2"),
           ("dt=d3", "add", None, f"{STAGE}/{X}/dt=d3"), ("dt=d4", "add", None, f"{STAGE}/{X}/dt=d4")),
    record(R, "2026-06-02T00:00:00", ("dt=d4", "drop", f"{STAGE}/{X}/dt=d4", None), kind="rollback"),
]


def test_manifest_round_trips_and_names_what_keeps_it():
    m = mf.from_record(HISTORY[0], ("dt",), HISTORY[0].items + (PartitionChange("dt=d1", "unchanged", "a", "a"),),
                       intent_at="2026-06-01T00:00:00")
    assert m.state == mf.INTENT and [c.partition for c in m.changes] == ["dt=d2", "dt=d3", "dt=d4"]
    again = mf.parse(m.committed("2026-06-01T00:00:01").to_json())
    assert again.state == COMMITTED and again.changes == m.changes and again.qualified_name == "db.events"
    assert mf.manifest_location(ROOT, X) == f"{STAGE}/{X}/_tableswap.json" and mf.is_manifest(f"{STAGE}/{X}/_tableswap.json")
    # What it points at, not what it displaced; a rollback's drop names the data an older manifest still names.
    assert m.named_locations == tuple(sorted(f"{STAGE}/{X}/dt=d{i}" for i in (2, 3, 4)))
    drop = mf.Manifest(R, "db", "events", "rollback", COMMITTED, ROOT, ("dt",), "t", "t", HISTORY[1].items)
    assert drop.named_locations == (f"{STAGE}/{X}/dt=d4",)
    with pytest.raises(errors.InvalidInputError, match="not a tableswap manifest"):
        mf.parse('{"swap_id": "x"}', "s3a://b/t/_tableswap/x/_tableswap.json")


def test_an_intent_manifest_counts_only_where_the_stamp_shows_it_landed():
    m = mf.from_record(HISTORY[0], ("dt",), HISTORY[0].items, intent_at="t")
    assert mf.landed_record(m, {}) is None  # the entry was lost: nothing is claimed
    landed = mf.landed_record(m, {"dt=d2": X, "dt=d3": "someone else"})
    assert [i.partition for i in landed.items] == ["dt=d2"] and landed.state == COMMITTED
    assert len(mf.landed_record(m.committed("t2"), {}).items) == 3


def test_plan_repair_adds_repoints_leaves_and_never_drops():
    current = dict([part("d1", f"{ROOT}/dt=d1"), part("d2", f"{ROOT}/dt=d2"), part("d4", f"{ROOT}/dt=d4")])
    plan = plan_repair("rep", TABLE, HISTORY, current, lambda x: Status(True), partition_count=3)
    items = {i.partition: i for i in plan.items}
    assert items["dt=d2"].action == A_REPOINT and items["dt=d2"].location == f"{STAGE}/{X}/dt=d2"
    assert items["dt=d3"].action == A_ADD and items["dt=d3"].exists is True
    assert items["dt=d4"].action == A_LEAVE and "dropped by tableswap last; present now" in items["dt=d4"].note
    assert "dt=d1" not in items and plan.untouched == 1
    assert [(a.action, a.name) for a in plan.plan.touched] == [("add", "dt=d3"), ("replace", "dt=d2")]
    assert plan.refusal() is None and "repoint  dt=d2" in plan.describe()
    # Already repaired: nothing to do.
    done = dict([part("d2", f"{STAGE}/{X}/dt=d2"), part("d3", f"{STAGE}/{X}/dt=d3")])
    assert plan_repair("rep", TABLE, HISTORY, done, lambda x: Status(True)).is_noop


def test_plan_repair_refuses_missing_data_and_says_what_is_left():
    gone = {f"{STAGE}/{X}/dt=d3": Status(False, deleted_by_janitor=True)}
    plan = plan_repair("rep", TABLE, HISTORY, {}, lambda x: gone.get(x, Status(True)))
    refusal = plan.refusal()
    assert isinstance(refusal, errors.UnsafeOperationError)
    assert "dt=d3: deleted by the janitor" in str(refusal) and "1 other partition(s) can be restored" in str(refusal)
    skipped = plan_repair("rep", TABLE, HISTORY, {}, lambda x: gone.get(x, Status(True)), skip_missing=True)
    assert skipped.refusal() is None and [i.partition for i in skipped.skipped] == ["dt=d3"]
    assert [a.name for a in skipped.plan.touched] == ["dt=d2"]


def test_plan_repair_filters_and_refuses_what_it_cannot_know():
    only = plan_repair("rep", TABLE, HISTORY, {}, lambda x: Status(True), partitions=["dt=d3"])
    assert [i.partition for i in only.items] == ["dt=d3"]
    with pytest.raises(errors.NotFoundError, match="dt=d9"):
        plan_repair("rep", TABLE, HISTORY, {}, lambda x: Status(True), partitions=["dt=d9"])
    with pytest.raises(errors.NotFoundError, match="try --from-storage"):
        plan_repair("rep", TABLE, [record(X, "t", ("dt=d2", "add", None, "x"), state=FAILED)], {},
                    lambda x: Status(True))
    with pytest.raises(errors.InvalidInputError, match="unpartitioned"):
        plan_repair("rep", FLAT, HISTORY, {}, lambda x: Status(True))


def test_plan_repair_of_an_unpartitioned_table():
    history = [record(X, "t", ("", "replace", "file:///data/dim", f"file:///data/dim/_tableswap/{X}"), kind="table")]
    plan = plan_repair("rep", FLAT, history, {}, lambda x: Status(True))
    assert plan.plan.table_change.new_location == f"file:///data/dim/_tableswap/{X}"
    assert plan.items[0].action == A_REPOINT


def test_janitor_never_takes_a_manifest_for_data_nor_drops_one_in_use():
    swap_dir = f"{STAGE}/{X}"
    live = LiveRef(f"{swap_dir}/dt=d2", "partition dt=d2")
    listing = {swap_dir: [(f"{swap_dir}/dt=d2", True), (f"{swap_dir}/dt=d3", True),
                          (f"{swap_dir}/_tableswap.json", False)]}
    # A partial delete of a swap directory: the dead partition goes, the manifest stays.
    assert expand(swap_dir, [live], lambda x: listing.get(x, [])) == [f"{swap_dir}/dt=d3"]

    now = dt.datetime(2026, 7, 1, tzinfo=dt.timezone.utc)
    views = {("db", "events"): LiveView("db", "events", True, ROOT, (LiveRef(ROOT, "root", container=True),))}
    old = now - dt.timedelta(days=20)

    def candidate(state, **kw):
        return SwapDirCandidate("db", "events", R, f"{STAGE}/{R}", None, state, old, **kw)

    def plan(c):
        return plan_janitor([], views, now=now, grace=dt.timedelta(hours=1), candidates=[c]).actions

    # A committed rollback's directory holds only its manifest: deleted once nothing it names is in use.
    assert plan(candidate(COMMITTED, has_data=False))[0].decision == "delete"
    assert plan(candidate(COMMITTED, has_data=False, manifest_state=COMMITTED, manifest_in_use=True)) == ()
    # Data no table references, but its manifest records it (the entry was lost): refused, pointing at repair.
    [refused] = plan(candidate(COMMITTED, has_data=True, manifest_state=COMMITTED, manifest_in_use=True))
    assert refused.decision == REFUSE and "tableswap repair db.events" in refused.reason
    # The journal does not know it (lost): kept while its committed manifest names locations in use.
    [kept] = plan(candidate(None, manifest_state=COMMITTED, manifest_in_use=True))
    assert kept.decision == KEEP and "--from-storage" in kept.reason
    assert plan(candidate(None, manifest_state=mf.INTENT, manifest_in_use=True))[0].decision == "delete"
