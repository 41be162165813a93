"""The operations around a swap group (docs/groups.md), against the real metastore, Spark and the journal:
``tableswap recover`` finishing a group ends the group's one OpenLineage run, ``tableswap janitor status``
counts a member's backlog from the group's commit, and the janitor's ``[janitor] staged_ttl`` discards a
staged group as one unit."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from tableswap import stage_group
from tableswap.journal import Journal
from tableswap.lineage import events as lineage_events
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.janitor.status import janitor_status
from tableswap.ops.restore.recover import recover

from ..support.helpers import batch_df, release_locks_of_killed_writer, today, wait_or_kill
from ..support.lineage_receiver import Receiver, validate
from .test_groups import _dim_df, _groups, _publish_in_process, _setup
from .test_openlineage import ol_env  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def test_recover_finishing_a_group_ends_the_groups_one_run_and_the_status_counts_from_its_commit(
        spark, db, tmp_path, hms, ts_env, ol_env):  # noqa: F811 - the fixture imported above
    """A writer killed between the group's two flips (``dim`` flipped, ``events`` not); ``recover`` of ``dim``
    alone commits that member, the group still pending; ``recover`` then finishes ``events`` and the group.
    Lineage: the group's run, started when it was staged, COMPLETEs once with both tables as outputs; no
    member sends a run of its own. ``janitor status``: what a member displaced is no backlog while its group
    is pending, and its grace runs from the group's commit, not from the member's own (earlier) queue time."""
    events, dim = _setup(spark, db, tmp_path)
    journal, groups = Journal(ts_env["TABLESWAP_JOURNAL_URL"]), _groups(ts_env)
    grace = dt.timedelta(hours=1)
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        with stage_group(f"nightly_{db}") as g:
            g.swap_partitions(batch_df(spark, {(today(1),): 5, (today(2),): 2}, "g1"), events)
            g.swap_table(_dim_df(spark, "g1"), dim)
        proc = _publish_in_process(g.group_id, ts_env, "group_between_flips")  # lock order: dim, then events
        wait_or_kill(proc)
        for table in (events, dim):
            release_locks_of_killed_writer(hms, *table.split("."), proc)

        first = recover(dim)
        assert [(r.table, r.outcome) for r in first.resolutions] == [(dim, "committed")], first.to_dict()
        assert groups.get(g.group_id).state == "pending"
        [held] = journal.deletions(db=db, table="dim")
        queued = dt.datetime.fromisoformat(held.queued_at)
        pending_group = janitor_status(journal, table=dim, grace=grace, now=queued + 2 * grace)
        assert (pending_group.pending, pending_group.past_grace) == (1, 0), pending_group.to_dict()
        assert pending_group.to_dict()["groups"]["uncommitted"] == [g.group_id]

        second = recover()
        assert [(r.table, r.outcome) for r in second.resolutions] == [(events, "completed")], second.to_dict()
        assert lineage_events.flush(60)  # all sent (a loaded machine can take longer than WAIT_S)
        got = list(receiver.events)

    record = groups.get(g.group_id)
    assert record.state == "committed"
    for event in got:
        validate(event)
    assert not [e for e in got if e["job"]["name"].startswith(("tableswap.swap.", "tableswap.rollback."))], \
        [(e["eventType"], e["job"]["name"]) for e in got]
    run = [e for e in got if e["run"]["runId"] == lineage_events.group_run_id(g.group_id)]
    assert [(e["eventType"], e["job"]["name"]) for e in run] == [("START", f"tableswap.group.nightly_{db}"),
                                                                  ("COMPLETE", f"tableswap.group.nightly_{db}")]
    complete = run[1]
    assert sorted(o["facets"]["symlinks"]["identifiers"][0]["name"] for o in complete["outputs"]) == [dim, events]
    assert all("lifecycleStateChange" in o["facets"] for o in complete["outputs"])
    own = complete["run"]["facets"]["tableswap_group"]
    assert own["members"] == {t: s.swap_id for t, s in g.staged.items()}
    assert own["counts"] == {events: {"added": 1, "replaced": 1, "dropped": 0},
                             dim: {"added": 0, "replaced": 0, "dropped": 0}}

    # The backlog counts from the group's commit: past each member's own grace, within the group's, none.
    committed = dt.datetime.fromisoformat(record.committed_at)
    [own_entry] = journal.deletions(db=db, table="events")
    own_queued = dt.datetime.fromisoformat(own_entry.queued_at)
    assert queued < own_queued < committed
    between = janitor_status(journal, grace=grace, now=own_queued + grace + (committed - own_queued) / 2)
    assert (between.pending, between.past_grace) == (2, 0), between.to_dict()
    after = janitor_status(journal, grace=grace, now=committed + grace + dt.timedelta(seconds=1))
    assert after.past_grace == 2 and after.to_dict()["groups"]["uncommitted"] == []


def _staged_at(journal: Journal, swap_id: str, when: dt.datetime | None = None) -> dt.datetime:
    """The member's journaled staging time (``when``: set it first, as if it had been staged then)."""
    with journal.engine.begin() as conn:
        if when is not None:
            conn.execute(sa.text("UPDATE tableswap_swaps SET staged_at = :t WHERE swap_id = :s"),
                         {"t": when.isoformat(timespec="microseconds"), "s": swap_id})
        return dt.datetime.fromisoformat(conn.execute(sa.text(
            "SELECT staged_at FROM tableswap_swaps WHERE swap_id = :s"), {"s": swap_id}).scalar_one())


def test_the_janitor_discards_a_staged_group_as_one_unit_past_its_staged_ttl(spark, db, tmp_path, hms, ts_env,
                                                                            ol_env):  # noqa: F811 - the fixture
    """A staged group whose ``events`` member was staged two hours before its ``dim`` member, the staged_ttl
    (one hour) between them: the janitor keeps every member (the group's TTL runs from its last member's
    staging), then, once past it, discards the group as one unit (every member aborted, the group discarded,
    in one journal transaction, the group's lineage run ABORT), whichever member's table it cleans."""
    events, dim = _setup(spark, db, tmp_path)
    journal, groups = Journal(ts_env["TABLESWAP_JOURNAL_URL"]), _groups(ts_env)
    ttl = dict(grace="0s", force_short_grace=True, staged_ttl="1h", dry_run=False)
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        with stage_group(f"ttl_{db}") as g:
            g.swap_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events)
            g.swap_table(_dim_df(spark, "g1"), dim)
        members = {t: s.swap_id for t, s in g.staged.items()}
        last = _staged_at(journal, members[dim])
        _staged_at(journal, members[events], last - dt.timedelta(hours=2))

        kept = run_janitor(table=events, **ttl)

        assert {t: journal.get_swap(s).state for t, s in members.items()} == {events: "staged", dim: "staged"}, \
            kept.to_dict()
        assert groups.get(g.group_id).state == "open"
        assert any(f"staged group {g.group_id}" in o.reason for o in kept.outcomes), kept.to_dict()
        assert hms.table_exists(db, g.staged[events].staged_table.split(".")[1])

        past = run_janitor(table=events, now=last + dt.timedelta(hours=1, seconds=1), **ttl)

        assert {t: journal.get_swap(s).state for t, s in members.items()} == {events: "aborted", dim: "aborted"}, \
            past.to_dict()
        assert groups.get(g.group_id).state == "discarded"
        assert not hms.table_exists(db, g.staged[events].staged_table.split(".")[1])
        # The other member's table: its leftovers go at its own table's run, as a discarded swap's do.
        run_janitor(table=dim, now=last + dt.timedelta(hours=1, seconds=1), **ttl)
        assert not hms.table_exists(db, g.staged[dim].staged_table.split(".")[1])
        assert lineage_events.flush(60)
        got = list(receiver.events)
    run = [e["eventType"] for e in got if e["run"]["runId"] == lineage_events.group_run_id(g.group_id)]
    assert run == ["START", "ABORT"]
    assert not [e for e in got if e["job"]["name"].startswith("tableswap.swap.")]
