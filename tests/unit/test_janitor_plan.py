"""Pure janitor planning and duration parsing (no services)."""

from __future__ import annotations

import datetime as dt

import pytest

from tableswap import errors
from tableswap.core.janitor_plan import (
    DELETE, DROP_TEMP, KEEP, LEFTOVER, ORPHAN, REFUSE,
    LiveRef, LiveView, QueueEntry, SwapDirCandidate,
    check_grace, check_location, expand, format_duration, parse_duration, plan_janitor, swap_id_time,
)

NOW = dt.datetime(2026, 6, 10, 12, 0, tzinfo=dt.timezone.utc)
ROOT = "file:///data/events"


def entry(location, *, hours_ago=48.0, partition="dt=1", swap="20260601_000000_aaaa0001", reason="displaced",
          root=ROOT, table="events"):
    return QueueEntry(swap, location, "db", table, partition, root, reason, NOW - dt.timedelta(hours=hours_ago))


def view(*refs, root=ROOT, exists=True):
    base = (LiveRef(root, "root", container=True), LiveRef(root, "table db.events", container=True))
    return {("db", "events"): LiveView("db", "events", exists, root if exists else None, base + tuple(refs))}


LIVE = LiveRef(f"{ROOT}/_tableswap/20260602_000000_bbbb0002/dt=1", "partition dt=1")


@pytest.mark.parametrize("text,seconds", [
    ("30m", 1800), ("24h", 86400), ("7d", 604800), ("1h30m", 5400), ("90s", 90), ("2w", 1209600), ("0", 0),
    ("1.5h", 5400), (" 12h ", 43200),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "24", "h", "-1h", "1x", "1h foo", "one day"])
def test_parse_duration_rejects_garbage(text):
    with pytest.raises(errors.InvalidInputError, match="duration"):
        parse_duration(text)


def test_format_duration_round_trips():
    for text in ("1d2h", "30m", "0s", "1h30m"):
        assert format_duration(parse_duration(text)) == text


def test_grace_floor_refuses_unless_forced():
    with pytest.raises(errors.UnsafeOperationError, match="below the safety floor of 1h.*--force-short-grace"):
        check_grace(parse_duration("30m"), parse_duration("1h"), False)
    check_grace(parse_duration("30m"), parse_duration("1h"), True)
    check_grace(parse_duration("1h"), parse_duration("1h"), False)


def test_swap_id_time():
    assert swap_id_time("20260601_101112_deadbeef") == dt.datetime(2026, 6, 1, 10, 11, 12, tzinfo=dt.timezone.utc)
    assert swap_id_time("not-a-swap") is None


def test_grace_keep_and_delete():
    old, young = f"{ROOT}/dt=1", f"{ROOT}/_tableswap/20260601_000000_aaaa0001/dt=2"
    plan = plan_janitor([entry(old), entry(young, hours_ago=2, partition="dt=2")], view(LIVE),
                        now=NOW, grace=parse_duration("24h"))
    assert [(a.decision, a.location) for a in plan.actions] == [(DELETE, old), (KEEP, young)]
    assert "grace period ends" in plan.kept[0].reason
    assert plan.deletes[0].keys == (("20260601_000000_aaaa0001", old),)


def test_keep_n_most_recent_per_partition():
    locs = [f"{ROOT}/_tableswap/2026060{i}_000000_aaaa000{i}/dt=1" for i in range(1, 5)]
    entries = [entry(x, hours_ago=100 - i) for i, x in enumerate(locs)]  # later index = more recent
    plan = plan_janitor(entries, view(LIVE), now=NOW, grace=parse_duration("1h"), keep=2)
    assert {a.location for a in plan.deletes} == set(locs[:2])
    assert {a.location for a in plan.kept} == set(locs[2:])
    assert all("--keep" in a.reason for a in plan.kept)


def test_a_location_displaced_again_ages_from_its_latest_displacement():
    again = f"{ROOT}/dt=1"
    plan = plan_janitor([entry(again, hours_ago=72), entry(again, hours_ago=1, swap="20260610_110000_cccc0003")],
                        view(LIVE), now=NOW, grace=parse_duration("24h"))
    assert len(plan.actions) == 1 and plan.actions[0].decision == KEEP
    assert len(plan.actions[0].keys) == 2


@pytest.mark.parametrize("location,reason", [
    (LIVE.location, "still referenced: it is the location of partition dt=1"),
    (LIVE.location + "/part-0.parquet", "inside the location of partition dt=1"),
    ("file:///elsewhere/dt=1", "outside the table's storage root"),
    (f"{ROOT}/../other/dt=1", "'..' segments"),
    (f"{ROOT}/./dt=1", "'..' segments"),
    ("s3a://bucket/data/events/dt=1", "outside the table's storage root"),
    ("file:///data/events2/dt=1", "outside the table's storage root"),
])
def test_refusals(location, reason):
    plan = plan_janitor([entry(location)], view(LIVE), now=NOW, grace=parse_duration("1h"))
    assert [a.decision for a in plan.actions] == [REFUSE]
    assert reason in plan.actions[0].reason


def test_refused_when_table_is_gone_or_the_root_moved():
    plan = plan_janitor([entry(f"{ROOT}/dt=1")], view(exists=False), now=NOW, grace=parse_duration("1h"))
    assert "no longer exists" in plan.refusals[0].reason
    moved = view(root="file:///data/moved")
    plan = plan_janitor([entry(f"{ROOT}/dt=1")], moved, now=NOW, grace=parse_duration("1h"))
    assert "current storage root" in plan.refusals[0].reason


def test_unfinished_swap_targets_are_refused():
    target = f"{ROOT}/dt=1"
    plan = plan_janitor([entry(target)], view(LIVE), now=NOW, grace=parse_duration("1h"),
                        unfinished={("db", "events"): [("20260610_000000_dddd0004", target)]})
    assert "run `tableswap recover`" in plan.refusals[0].reason


def test_root_containing_live_data_is_only_partly_deleted():
    live = LiveRef(f"{ROOT}/_tableswap/20260602_000000_bbbb0002", "table db.dim")
    reason, partial = check_location(ROOT, ROOT, view(live)[("db", "events")])
    assert reason is None and partial
    listing = {
        ROOT: [(f"{ROOT}/part-0.parquet", False), (f"{ROOT}/_SUCCESS", False), (f"{ROOT}/_tableswap", True),
               (f"{ROOT}/old", True)],
        f"{ROOT}/old": [(f"{ROOT}/old/x", False)],
    }
    targets = expand(ROOT, view(live)[("db", "events")].refs, lambda p: listing.get(p, []))
    assert sorted(targets) == [f"{ROOT}/_SUCCESS", f"{ROOT}/old", f"{ROOT}/part-0.parquet"]


def test_expand_descends_into_ancestors_of_live_locations_only():
    live = LiveRef(f"{ROOT}/a=1/b=2", "partition a=1/b=2")
    listing = {
        f"{ROOT}/a=1": [(f"{ROOT}/a=1/b=1", True), (f"{ROOT}/a=1/b=2", True), (f"{ROOT}/a=1/f", False)],
    }
    assert sorted(expand(f"{ROOT}/a=1", (live,), lambda p: listing.get(p, []))) == [
        f"{ROOT}/a=1/b=1", f"{ROOT}/a=1/f"]
    assert expand(f"{ROOT}/a=9", (live,), lambda p: []) == [f"{ROOT}/a=9"]


def cand(swap_id, state, hours_ago, *, location=True, temp=True, has_data=None):
    return SwapDirCandidate("db", "events", swap_id, f"{ROOT}/_tableswap/{swap_id}" if location else None,
                            f"events__tswap_{swap_id}" if temp else None, state,
                            NOW - dt.timedelta(hours=hours_ago), has_data)


def test_orphans_in_flight_unfinished_and_crashed():
    temp_ref = LiveRef(f"{ROOT}/_tableswap/20260610_000000_aaaa0001", "temporary table",
                       temp_of="20260610_000000_aaaa0001")
    candidates = [
        cand("20260610_000000_aaaa0001", "failed", 48),  # crashed long ago: drop temp + delete dir
        cand("20260610_000000_aaaa0002", "staging", 0.1),  # in flight
        cand("20260610_000000_aaaa0003", "pending", 48),  # recover's business
        cand("20260610_000000_aaaa0004", None, 48, temp=False),  # unknown to the journal
        cand("20260610_000000_aaaa0005", "staging", 48),  # abandoned in staging
    ]
    plan = plan_janitor([], view(LIVE, temp_ref), now=NOW, grace=parse_duration("24h"), candidates=candidates)
    by = {(a.decision, a.swap_ids[0]) for a in plan.actions}
    assert (DROP_TEMP, "20260610_000000_aaaa0001") in by and (DELETE, "20260610_000000_aaaa0001") in by
    assert (KEEP, "20260610_000000_aaaa0002") in by and (KEEP, "20260610_000000_aaaa0003") in by
    assert (DELETE, "20260610_000000_aaaa0004") in by and (DELETE, "20260610_000000_aaaa0005") in by
    assert not {s for d, s in by if s in ("20260610_000000_aaaa0002", "20260610_000000_aaaa0003")
                and d in (DELETE, DROP_TEMP)}
    deletes = {a.swap_ids[0]: a for a in plan.deletes}
    assert deletes["20260610_000000_aaaa0001"].enqueue and not deletes["20260610_000000_aaaa0004"].enqueue
    assert all(a.kind == ORPHAN for a in plan.deletes)
    assert [a for a in plan.temp_drops if a.swap_ids[0] == "20260610_000000_aaaa0005"][0].abandon
    assert "recover" in [a for a in plan.kept if a.swap_ids[0] == "20260610_000000_aaaa0003"][0].reason


def test_a_staged_swap_is_kept_until_its_staged_ttl_whatever_the_grace():
    """A staged swap (waiting for its publish or discard) looked, before state ``staged`` was known here, like
    a failed swap's leftovers: its temporary table dropped and its data deleted once idle for the grace
    period. It is kept until ``staged_ttl`` after it was staged, then discarded (marked aborted first)."""
    young, old = "20260603_000000_aaaa0001", "20260601_000000_aaaa0002"
    staged_young = SwapDirCandidate("db", "events", young, f"{ROOT}/_tableswap/{young}", f"events__tswap_{young}",
                                    "staged", NOW - dt.timedelta(days=3), staged_at=NOW - dt.timedelta(days=3))
    staged_old = SwapDirCandidate("db", "events", old, f"{ROOT}/_tableswap/{old}", f"events__tswap_{old}",
                                  "staged", NOW - dt.timedelta(days=9), staged_at=NOW - dt.timedelta(days=9))
    temp_refs = [LiveRef(f"{ROOT}/_tableswap/{i}", "temporary table", temp_of=i) for i in (young, old)]
    plan = plan_janitor([], view(LIVE, *temp_refs), now=NOW, grace=parse_duration("1h"),
                        candidates=[staged_young, staged_old])
    young_actions = [(a.decision, a.kind) for a in plan.actions if a.swap_ids == (young,)]
    assert young_actions == [(KEEP, ORPHAN)]
    kept = [a for a in plan.kept if a.swap_ids == (young,)][0]
    assert "staged" in kept.reason and kept.due_at == NOW + dt.timedelta(days=4)
    drop = [a for a in plan.temp_drops if a.swap_ids == (old,)][0]
    assert drop.abandon and drop.discards_staged  # staged → aborted, only if still staged
    assert [a.location for a in plan.deletes if a.swap_ids == (old,)] == [f"{ROOT}/_tableswap/{old}"]
    assert plan.deletes[0].enqueue
    # A shorter or longer staged_ttl moves the line.
    longer = plan_janitor([], view(LIVE, *temp_refs), now=NOW, grace=parse_duration("1h"),
                          candidates=[staged_young, staged_old], staged_ttl=dt.timedelta(days=30))
    assert {a.decision for a in longer.actions} == {KEEP}
    shorter = plan_janitor([], view(LIVE, *temp_refs), now=NOW, grace=parse_duration("1h"),
                           candidates=[staged_young, staged_old], staged_ttl=dt.timedelta(days=1))
    assert {a.swap_ids[0] for a in shorter.temp_drops} == {young, old}


def test_a_staged_groups_members_follow_the_groups_staged_ttl_from_its_last_member():
    """A staged group's members are discarded as one unit: each member's staged_ttl runs from the group's last
    member's staging (an old member is kept while a newer one is within its TTL), every action of a member past
    it names the group (the executor discards the whole group), and while the group's writer is still staging a
    member none of them expires."""
    old, new = "20260601_000000_aaaa0001", "20260609_000000_aaaa0002"

    def member(swap_id, staged_days_ago, group_staged_days_ago):
        staged = NOW - dt.timedelta(days=staged_days_ago)
        group_at = None if group_staged_days_ago is None else NOW - dt.timedelta(days=group_staged_days_ago)
        return SwapDirCandidate("db", "events", swap_id, f"{ROOT}/_tableswap/{swap_id}", f"events__tswap_{swap_id}",
                                "staged", staged, staged_at=staged, group_id="g1", group_staged_at=group_at)

    temp_refs = [LiveRef(f"{ROOT}/_tableswap/{i}", "temporary table", temp_of=i) for i in (old, new)]
    ttl = dict(now=NOW, grace=parse_duration("1h"), staged_ttl=dt.timedelta(days=7))
    within = plan_janitor([], view(LIVE, *temp_refs), candidates=[member(old, 9, 1), member(new, 1, 1)], **ttl)
    assert {a.decision for a in within.actions} == {KEEP}
    assert all("staged group g1" in a.reason for a in within.actions)
    assert {a.due_at for a in within.actions} == {NOW + dt.timedelta(days=6)}
    past = plan_janitor([], view(LIVE, *temp_refs), candidates=[member(old, 9, 8), member(new, 8, 8)], **ttl)
    drops = past.temp_drops
    assert {a.swap_ids[0] for a in drops} == {old, new}
    assert all(a.abandon and a.discards_staged and a.group_id == "g1" for a in drops)
    staging = plan_janitor([], view(LIVE, *temp_refs), candidates=[member(old, 9, None)], **ttl)
    assert [a.decision for a in staging.actions] == [KEEP] and "still staging" in staging.actions[0].reason


def test_committed_swap_dir_is_left_alone_while_live_or_holding_queued_locations():
    live_id, empty_id, holding_id = "20260601_000000_aaaa0001", "20260601_000000_aaaa0002", "20260601_000000_aaaa0003"
    data_id = "20260601_000000_aaaa0004"
    live = LiveRef(f"{ROOT}/_tableswap/{live_id}/dt=1", "partition dt=1")
    queued = entry(f"{ROOT}/_tableswap/{holding_id}/dt=2", hours_ago=2, partition="dt=2")
    plan = plan_janitor([queued], view(live), now=NOW, grace=parse_duration("24h"),
                        candidates=[cand(live_id, "committed", 48, temp=False),
                                    cand(empty_id, "committed", 48, has_data=False),
                                    cand(holding_id, "committed", 48, temp=False, has_data=True),
                                    cand(data_id, "committed", 48, temp=False, has_data=True)])
    assert [(a.decision, a.kind, a.swap_ids[0]) for a in plan.actions if a.kind == LEFTOVER] == [
        (DELETE, LEFTOVER, empty_id), (REFUSE, LEFTOVER, data_id)]
    assert "repointed outside tableswap" in plan.refusals[0].reason
    assert [a.location for a in plan.temp_drops] == [f"events__tswap_{empty_id}"]


def test_roots_keep_what_is_at_under_or_above_a_cleaned_root_only():
    from tableswap.core.deletion_safety import Roots

    roots = Roots(["s3a://b/wh/events", "file:///data/t"])
    assert roots.relevant("s3a://b/wh/events")  # the root itself
    assert roots.relevant("s3://b/wh/events/dt=1")  # under it (any S3 connector scheme)
    assert roots.relevant("s3a://b/wh")  # above it: a table there would contain the root
    assert roots.relevant("file:/data/t/_tableswap/x")
    assert not roots.relevant("s3a://b/wh/events2/dt=1")  # a sibling with the same prefix
    assert not roots.relevant("s3a://other/wh/events")  # another bucket
    assert not roots.relevant("file:///data/u")
    assert not Roots([]).relevant("file:///data/t")


@pytest.mark.hostile
@pytest.mark.parametrize("root,live,queued", [
    ("abfss://c@acct.dfs.core.windows.net/data/events", "abfs://c@acct.dfs.core.windows.net/data/events/dt=1",
     "abfss://c@acct.dfs.core.windows.net/data/events/dt=1"),
    ("wasbs://c@acct.blob.core.windows.net/data/events", "wasb://c@acct.blob.core.windows.net/data/events/dt=1",
     "wasbs://c@acct.blob.core.windows.net/data/events/dt=1"),
    ("abfs://c@acct.dfs.core.windows.net/data/events", "wasbs://c@acct.blob.core.windows.net/data/events/dt=1",
     "abfss://c@acct.dfs.core.windows.net/data/events/dt=1/part-0.parquet"),
    ("gs://bucket/data/events", "gcs://bucket/data/events/dt=1", "gs://bucket/data/events/dt=1"),
    ("hdfs://nn/data/events", "hdfs://nn:8020/data/events/dt=1", "hdfs://NN/data/events/dt=1"),
    ("hdfs://nn:8020/data/events", "hdfs://nn/data/events/dt=1", "hdfs://nn:8020/data/events/dt=1"),
])
def test_a_location_live_under_another_spelling_of_its_store_is_refused(root, live, queued):
    """The same store spelled with another scheme alias or authority (default port, case): a partition
    referencing it in one spelling protects it from a queue entry in another."""
    plan = plan_janitor([entry(queued, root=root)], view(LiveRef(live, "partition dt=1"), root=root),
                        now=NOW, grace=parse_duration("1h"))
    assert [a.decision for a in plan.actions] == [REFUSE]
    assert "still referenced" in plan.actions[0].reason


@pytest.mark.hostile
@pytest.mark.parametrize("text", ["99999999w", "99999999999d", "1e400s", "9" * 400 + "s",
                                  float("nan"), float("inf"), float("-inf"), 10 ** 30, "nan", "inf"])
def test_parse_duration_out_of_range_is_a_clear_error(text):
    with pytest.raises(errors.InvalidInputError, match="duration"):
        parse_duration(text)


@pytest.mark.hostile
@pytest.mark.parametrize("grace", ["99999999w", "9999999999w"])
def test_cli_grace_out_of_range_is_a_usage_error(grace):
    from click.testing import CliRunner

    from tableswap.cli import main

    result = CliRunner().invoke(main, ["janitor", "run", "--grace", grace, "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "maximum is 36500d" in result.output and "Traceback" not in result.output


def test_a_groups_displaced_data_waits_for_the_groups_grace():
    """A member's own record is past the grace; its group committed later (``recover`` committed the member
    first), or not yet: kept until the group's grace ends."""
    old = f"{ROOT}/dt=1"
    own = entry(old, hours_ago=30)
    later = QueueEntry(**{**own.__dict__, "group_id": "g1", "group_committed_at": NOW - dt.timedelta(hours=20)})
    waiting = QueueEntry(**{**own.__dict__, "group_id": "g1", "group_committed_at": None})
    assert plan_janitor([own], view(), now=NOW, grace=dt.timedelta(hours=24)).actions[0].decision == DELETE
    [kept] = plan_janitor([later], view(), now=NOW, grace=dt.timedelta(hours=24)).actions
    assert kept.decision == KEEP and kept.due_at == NOW + dt.timedelta(hours=4)
    [kept] = plan_janitor([waiting], view(), now=NOW, grace=dt.timedelta(hours=24)).actions
    assert kept.decision == KEEP and "swap group g1, not committed yet" in kept.reason
    gone = plan_janitor([later], view(), now=NOW + dt.timedelta(hours=5), grace=dt.timedelta(hours=24)).actions
    assert gone[0].decision == DELETE
