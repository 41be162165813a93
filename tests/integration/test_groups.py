"""Swap groups (docs/groups.md): several tables published as one unit, against the real metastore, Spark and the
journal: a partitioned and an unpartitioned table committed together; an exception inside the block and a
refused audit change nothing; two groups sharing two tables from two threads in opposite call order; a writer
killed between two tables' flips, then ``recover``; ``tableswap rollback --group`` and ``history --group``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tableswap import (AuditFailedError, GroupResult, read_as_of, stage_partitions, stage_table, swap_group,
                       swap_partitions, swap_table)
from tableswap.errors import SwapConflictError
from tableswap.journal import Journal
from tableswap.journal.groups import GroupLog
from tableswap.ops.restore.recover import recover

from ..support.helpers import (SRC, batch_df, create_events, file_tree, metastore_snapshot, reader_view,
                               release_locks_of_killed_writer, today, wait_or_kill)

pytestmark = pytest.mark.integration


def _dim(spark, db: str, root: Path, name: str = "dim") -> str:
    """An unpartitioned table ``db.name`` (id bigint, name string) with one row."""
    spark.sql(f"CREATE TABLE {db}.{name} (id bigint, name string) USING parquet LOCATION '{(root / name).as_uri()}'")
    spark.createDataFrame([(1, "old")], "id bigint, name string").write.insertInto(f"{db}.{name}")
    return f"{db}.{name}"


def _dim_df(spark, tag: str, n: int = 2):
    return spark.createDataFrame([(i, tag) for i in range(1, n + 1)], "id bigint, name string")


def _dim_view(spark, table: str) -> list[tuple[int, str]]:
    spark.catalog.refreshTable(table)
    return sorted((r.id, r.name) for r in spark.table(table).collect())


def _groups(ts_env) -> GroupLog:
    return GroupLog(Journal(ts_env["TABLESWAP_JOURNAL_URL"]))


def _setup(spark, db, tmp_path):
    events = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "initial").write.insertInto(events)
    return events, _dim(spark, db, tmp_path)


def test_a_partitioned_and_an_unpartitioned_table_commit_as_one_group(spark, db, tmp_path, ts_env):
    events, dim = _setup(spark, db, tmp_path)
    seen = {}

    def check(frames):  # the audit sees every staged table
        seen.update({t: df.count() for t, df in frames.items()})
        return True

    with swap_group("nightly", audit=check) as g:
        g.swap_partitions(batch_df(spark, {(today(1),): 5, (today(2),): 4}, "g1"), events)
        g.swap_table(_dim_df(spark, "g1", 3), dim)
        assert reader_view(spark, events)[(today(1),)] == (3, ("initial",))  # nothing visible inside the block

    result = g.result
    assert isinstance(result, GroupResult) and set(result) == {events, dim}
    assert seen == {events: 9, dim: 3}
    assert {c.partition for c in result[events].replaced} == {f"dt={today(1)}"}
    assert {c.partition for c in result[events].added} == {f"dt={today(2)}"}
    assert result[dim].table_change is not None
    assert "2 table(s) as one unit" in result.summary()
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events) == {(today(0),): (3, ("initial",)), (today(1),): (5, ("g1",)),
                                          (today(2),): (4, ("g1",))}
    assert _dim_view(spark, dim) == [(1, "g1"), (2, "g1"), (3, "g1")]
    record = _groups(ts_env).get("nightly")
    assert record.group_id == result.group_id and record.state == "committed" and record.intent_at
    assert {m.table: m.state for m in record.members} == {events: "committed", dim: "committed"}
    assert {m.swap_id for m in record.members} == set(result.swap_ids.values())
    # A later swap of one table: read_as_of(group_id=) still reads both tables as right after the group.
    swap_partitions(batch_df(spark, {(today(1),): 1}, "later"), events)
    as_of = read_as_of(spark, events, group_id="nightly")
    assert sorted((r.dt, r.n) for r in as_of.groupBy("dt").count().withColumnRenamed("count", "n").collect()) == [
        (today(0), 3), (today(1), 5), (today(2), 4)]
    assert sorted((r.id, r.name) for r in read_as_of(spark, dim, group_id=result.group_id).collect()) == [
        (1, "g1"), (2, "g1"), (3, "g1")]


@pytest.mark.parametrize("keep", [True, False])
def test_an_exception_inside_the_block_changes_no_table(spark, db, tmp_path, ts_env, keep):
    events, dim = _setup(spark, db, tmp_path)
    before = reader_view(spark, events), _dim_view(spark, dim)
    with pytest.raises(RuntimeError, match="job failed"):
        with swap_group(keep_on_failure=keep) as g:
            staged = g.swap_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events)
            g.swap_table(_dim_df(spark, "g1"), dim)
            raise RuntimeError("job failed")
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before
    assert g.result is None
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    states = {t: journal.get_swap(s.swap_id).state for t, s in g.staged.items()}
    assert states == ({events: "staged", dim: "staged"} if keep else {events: "aborted", dim: "aborted"})
    # Discarded: every member in one journal transaction (nothing half-discarded), the group `discarded`.
    assert _groups(ts_env).get(g.group_id).state == ("failed" if keep else "discarded")
    if keep:  # its temporary table reads the staged batch (its partitions registered once the group was kept)
        assert spark.table(staged.staged_table).count() == 5
    if keep:  # a kept member of a failed group is an ordinary staged swap: published on its own later
        assert staged.publish().replaced


def test_a_refused_audit_changes_no_table_and_keeps_the_batches_staged(spark, db, tmp_path, ts_env):
    events, dim = _setup(spark, db, tmp_path)
    before = reader_view(spark, events), _dim_view(spark, dim)

    def every_order_has_a_customer(frames):  # a referential check across the staged tables
        return frames[events].join(frames[dim], "id", "left_anti").count() == 0

    with pytest.raises(AuditFailedError, match="every_order_has_a_customer") as info:
        with swap_group(audit=every_order_has_a_customer) as g:
            g.swap_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events)
            g.swap_table(_dim_df(spark, "g1", 2), dim)  # ids 3..5 of the orders have no customer
    assert info.value.kept
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert {journal.get_swap(s.swap_id).state for s in g.staged.values()} == {"staged"}
    assert _groups(ts_env).get(g.group_id).state == "failed"


def test_two_groups_sharing_two_tables_in_opposite_order_commit_as_some_serial_order(spark, db, tmp_path, ts_env):
    events, dim = _setup(spark, db, tmp_path)
    groups = _groups(ts_env)
    ids = {}
    for tag, order in (("a", (events, dim)), ("b", (dim, events))):  # opposite call orders
        staged = {events: stage_partitions(batch_df(spark, {(today(1),): 5}, tag), events),
                  dim: stage_table(_dim_df(spark, tag), dim)}
        ids[tag] = f"g-{tag}-{db}"
        groups.create(ids[tag], tag, "swap")
        for table in order:
            groups.add_member(ids[tag], staged[table].swap_id, *table.split("."))
    from tableswap.ops.write.group import publish_group

    start, out, errors = threading.Barrier(2), {}, []

    def publish(tag):
        start.wait()
        try:
            # A short lock timeout: a deadlock would fail here within seconds, not hang for a minute.
            out[tag] = publish_group(ids[tag], lock_timeout_s=20)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and set(out) == {"a", "b"}
    # Some serial order: both tables show the batch of the group that committed last.
    last = max(("a", "b"), key=lambda t: groups.get(ids[t]).committed_at)
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events)[(today(1),)] == (5, (last,))
    assert _dim_view(spark, dim) == [(1, last), (2, last)]
    first = "b" if last == "a" else "a"
    # The second group replaced what the first one put in, on both tables.
    assert out[last][dim].table_change.old_location == out[first][dim].table_change.new_location
    assert (out[last][events].replaced[0].old_location == out[first][events].replaced[0].new_location)


def test_a_conflict_on_one_table_changes_no_table(spark, db, tmp_path, ts_env):
    from tableswap import table_state

    events, dim = _setup(spark, db, tmp_path)
    token = table_state(dim)
    swap_table(_dim_df(spark, "meanwhile", 1), dim)  # the dimension changes after the job read it
    before = reader_view(spark, events), _dim_view(spark, dim)
    with pytest.raises(SwapConflictError):
        with swap_group() as g:
            g.swap_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events)
            g.swap_table(_dim_df(spark, "g1"), dim, if_unchanged_since=token)
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert {journal.get_swap(s.swap_id).state for s in g.staged.values()} == {"staged"}
    assert _groups(ts_env).get(g.group_id).state == "failed"
    # Kept staged: each batch reads through its temporary table, as a staged swap's (docs/groups.md).
    assert spark.table(g.staged[events].staged_table).count() == 5


def _publish_in_process(group_id: str, ts_env, crash_at: str) -> subprocess.Popen:
    env = {**os.environ, **ts_env, "PYTHONPATH": str(SRC), "TABLESWAP_CRASH_AT": crash_at}
    code = "import sys; from tableswap.ops.write.group import publish_group; publish_group(sys.argv[1])"
    return subprocess.Popen([sys.executable, "-c", code, group_id], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


#: Where the group's writer is killed → what each table shows right after, and ``recover``'s outcome per table.
#: Lock (and flip) order: ``dim`` before ``events``.
KILLED = {
    # Before the group intent: nothing flipped; the members whose intent was recorded are staged again.
    "group_after_lock": ("old", "old", {}, "failed"),
    "after_intent": ("old", "old", {"dim": "restaged"}, "failed"),
    # From the group intent on, every table goes forward, whatever its own flip reached.
    "group_after_intent": ("old", "old", {"dim": "completed", "events": "completed"}, "committed"),
    "group_between_flips": ("new", "old", {"dim": "committed", "events": "completed"}, "committed"),
}


@pytest.mark.parametrize("point", list(KILLED))
def test_a_writer_killed_during_the_group_commit_converges_to_all_or_nothing(spark, db, tmp_path, hms, ts_env,
                                                                            point):
    events, dim = _setup(spark, db, tmp_path)
    before = reader_view(spark, events), _dim_view(spark, dim)
    groups = _groups(ts_env)
    staged = {events: stage_partitions(batch_df(spark, {(today(1),): 5, (today(2),): 2}, "g1"), events),
              dim: stage_table(_dim_df(spark, "g1"), dim)}
    group_id = f"g-crash-{db}"
    groups.create(group_id, None, "swap")
    for table, s in staged.items():
        groups.add_member(group_id, s.swap_id, *table.split("."))
    dim_after, events_after, outcomes, group_state = KILLED[point]
    new = ({(today(0),): (3, ("initial",)), (today(1),): (5, ("g1",)), (today(2),): (2, ("g1",))},
           [(1, "g1"), (2, "g1")])

    proc = _publish_in_process(group_id, ts_env, point)
    wait_or_kill(proc)
    for table in (events, dim):
        release_locks_of_killed_writer(hms, *table.split("."), proc)
    assert _dim_view(spark, dim) == (new[1] if dim_after == "new" else before[1])
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events) == (new[0] if events_after == "new" else before[0])

    report = recover()

    assert {r.table.split(".")[1]: r.outcome for r in report.resolutions} == outcomes, report.to_dict()
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == (new if group_state == "committed" else before)
    record = groups.get(group_id)
    if point != "group_after_lock":  # killed before any intent: nothing for recover to find, the group stays open
        assert record.state == group_state
    assert {m.state for m in record.members} == ({"committed"} if group_state == "committed" else {"staged"})


def _cli_here(*args: str):
    """``tableswap ARGS --json`` in this process (click's runner)."""
    import json

    from click.testing import CliRunner

    from tableswap.cli import main

    run = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    return run.exit_code, json.loads(run.stdout) if run.stdout.strip().startswith("{") else run.output


def test_rollback_group_restores_every_table_as_one_group_and_history_lists_it(spark, db, tmp_path, ts_env):
    events, dim = _setup(spark, db, tmp_path)
    before = reader_view(spark, events), _dim_view(spark, dim)
    with swap_group(f"load-{db}") as g:
        g.swap_partitions(batch_df(spark, {(today(1),): 5, (today(2),): 4}, "g1"), events)
        g.swap_table(_dim_df(spark, "g1"), dim)

    code, planned = _cli_here("rollback", "--group", f"load-{db}", "--dry-run")
    assert code == 0 and planned["dry_run"] and planned["rollback_of"] == g.result.group_id
    assert set(planned["results"]) == {events, dim}
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events)[(today(2),)] == (4, ("g1",))  # the dry run changed nothing

    code, done = _cli_here("rollback", "--group", f"load-{db}", "--yes")

    assert code == 0 and not done["dry_run"] and set(done["results"]) == {events, dim}
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before  # the added partition dropped too
    code, listed = _cli_here("history", "--group")
    assert code == 0
    by_id = {r["group_id"]: r for r in listed["groups"]}
    undo = by_id[done["group_id"]]
    assert undo["kind"] == "rollback" and undo["rollback_of"] == g.result.group_id and undo["state"] == "committed"
    assert {m["table"] for m in undo["members"]} == {events, dim}
    assert {m["state"] for m in by_id[g.result.group_id]["members"]} == {"committed"}
    code, one = _cli_here("history", "--group", f"load-{db}")
    assert code == 0 and [r["group_id"] for r in one["groups"]] == [g.result.group_id]


def test_rollback_group_carries_out_the_plan_it_showed_or_nothing(spark, db, tmp_path, ts_env, monkeypatch):
    """`tableswap rollback --group` shows its plan and asks; while the user reads it another job swaps a member
    table. What runs is the plan shown, checked under the locks, never a new plan nobody saw (which would also
    undo that job's swap): a conflict, nothing changed on any table."""
    from click.testing import CliRunner

    from tableswap.cli import main
    from tableswap.cli.output import TextOutput

    events, dim = _setup(spark, db, tmp_path)
    with swap_group(f"load-{db}") as g:
        g.swap_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events)
        g.swap_table(_dim_df(spark, "g1"), dim)

    def meanwhile(self, question, assume_yes, *, or_else=None):
        swap_partitions(batch_df(spark, {(today(1),): 7}, "later"), events)  # another job, during the prompt

    monkeypatch.setattr(TextOutput, "confirm", meanwhile)
    run = CliRunner().invoke(main, ["rollback", "--group", g.result.group_id])

    assert run.exit_code != 0, run.output
    assert "SwapConflictError" in run.output or "changed since" in run.output, run.output
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events)[(today(1),)] == (7, ("later",))  # the other job's swap stands
    assert _dim_view(spark, dim) == [(1, "g1"), (2, "g1")]  # and no member was rolled back
    assert not [r for r in _groups(ts_env).list() if r.kind == "rollback" and r.state == "committed"]


# --------------------------------------------------------------------------- a staged group, from another process
def _cli_process(args: list[str], ts_env) -> tuple[int, object]:
    """``tableswap ARGS --json`` in a process of its own (no Spark in it): exit code and the JSON (else the output)."""
    import json

    env = {**os.environ, **ts_env, "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-m", "tableswap", *args, "--json"], env=env, text=True,
                          capture_output=True, timeout=300)
    text = proc.stdout.strip()
    return proc.returncode, json.loads(text) if text.startswith("{") else proc.stdout + proc.stderr


def test_stage_group_then_another_process_publishes_it_as_one_unit(spark, db, tmp_path, ts_env):
    from tableswap import stage_group

    events, dim = _setup(spark, db, tmp_path)
    before = reader_view(spark, events), _dim_view(spark, dim)
    with stage_group(f"nightly-{db}") as g:
        g.swap_partitions(batch_df(spark, {(today(1),): 5, (today(2),): 4}, "g1"), events)
        g.swap_table(_dim_df(spark, "g1", 3), dim)
    # Staged, nothing a reader sees changed; the group is open in the journal with both members.
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before and g.result is None
    record = _groups(ts_env).get(g.group_id)
    assert record.state == "open" and {m.table: m.state for m in record.members} == {events: "staged", dim: "staged"}

    code, listed = _cli_here("staged")
    assert code == 0
    [group] = [x for x in listed["groups"] if x["group_id"] == g.group_id]
    assert {m["table"]: m["swap_id"] for m in group["members"]} == {t: s.swap_id for t, s in g.staged.items()}
    assert {e["swap_id"]: e["group_id"] for e in listed["staged"] if e["table"] in (events, dim)} == {
        s.swap_id: g.group_id for s in g.staged.values()}
    # A member alone is refused: the group is published as one unit.
    code, refused = _cli_here("publish", g.staged[dim].swap_id)
    assert code == 1 and f"tableswap publish {g.group_id}" in refused["error"], refused

    code, published = _cli_process(["publish", f"nightly-{db}"], ts_env)  # by its name, from a process without Spark

    assert code == 0 and published["group_id"] == g.group_id and set(published["results"]) == {events, dim}, published
    spark.catalog.refreshTable(events)
    assert reader_view(spark, events) == {(today(0),): (3, ("initial",)), (today(1),): (5, ("g1",)),
                                          (today(2),): (4, ("g1",))}
    assert _dim_view(spark, dim) == [(1, "g1"), (2, "g1"), (3, "g1")]
    record = _groups(ts_env).get(g.group_id)
    assert record.state == "committed" and {m.state for m in record.members} == {"committed"}
    code, again = _cli_here("publish", g.group_id)
    assert code == 1 and "already published" in again["error"] and "Nothing was changed" in again["error"], again
    code, listed = _cli_here("staged")
    assert g.group_id not in [x["group_id"] for x in listed["groups"]]


def test_discard_group_discards_every_member_or_none(spark, db, tmp_path, hms, ts_env):
    from tableswap import stage_group

    events, dim = _setup(spark, db, tmp_path)
    before = reader_view(spark, events), _dim_view(spark, dim)
    with stage_group() as g:
        g.swap_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events)
        g.swap_table(_dim_df(spark, "g1"), dim)
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])

    code, done = _cli_here("discard", g.group_id)

    assert code == 0 and done["state"] == "discarded" and set(done["members"]) == {events, dim}, done
    assert {journal.get_swap(s.swap_id).state for s in g.staged.values()} == {"aborted"}
    assert _groups(ts_env).get(g.group_id).state == "discarded"
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]  # the temporary tables dropped
    queued = {d.location for d in journal.deletions(db=db)}
    assert {s.staging_location for s in g.staged.values()} <= queued  # the staged data, for the janitor
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before
    code, again = _cli_here("publish", g.group_id)
    assert code == 1 and "discarded" in again["error"], again

    # Nothing half-discarded: a group one of whose members went alone is refused whole, the other member kept.
    with pytest.raises(RuntimeError):
        with stage_group() as kept:  # the block fails: the group `failed`, its members kept staged
            kept.swap_partitions(batch_df(spark, {(today(1),): 6}, "g2"), events)
            kept.swap_table(_dim_df(spark, "g2"), dim)
            raise RuntimeError("job failed")
    kept.staged[dim].publish()  # a failed group's member may go alone
    code, refused = _cli_here("discard", kept.group_id)
    assert code == 1 and f"{dim} (swap {kept.staged[dim].swap_id}) is already published" in refused["error"], refused
    assert "one by one" in refused["error"]
    assert journal.get_swap(kept.staged[events].swap_id).state == "staged"


def test_publish_and_discard_refusals_say_what_to_do(spark, db, tmp_path, ts_env):
    from tableswap import publish_group, stage_group, table_state

    events, dim = _setup(spark, db, tmp_path)
    code, unknown = _cli_here("publish", f"no-such-group-{db}")
    assert code == 3 and "`tableswap staged`" in unknown["error"], unknown
    token = table_state(dim)
    staged = []
    for tag in ("a", "b"):  # two staged groups of one name
        with stage_group(f"twice-{db}") as g:
            g.swap_partitions(batch_df(spark, {(today(1),): 5}, tag), events)
            g.swap_table(_dim_df(spark, tag), dim, if_unchanged_since=token)
        staged.append(g)
    code, ambiguous = _cli_here("publish", f"twice-{db}")
    assert code == 1 and all(g.group_id in ambiguous["error"] for g in staged), ambiguous
    code, _ = _cli_here("discard", staged[1].group_id)
    assert code == 0

    # The audit from Python: refused, nothing changed, the group still staged.
    def at_least_ten_rows(frames):
        return frames[events].count() >= 10

    before = reader_view(spark, events), _dim_view(spark, dim)
    with pytest.raises(AuditFailedError, match="at_least_ten_rows"):
        publish_group(f"twice-{db}", audit=at_least_ten_rows, spark=spark)
    assert _groups(ts_env).get(staged[0].group_id).state == "open"
    # The token journaled with the member is checked at the publish from the CLI: the dimension changed since.
    swap_table(_dim_df(spark, "meanwhile", 1), dim)
    before = reader_view(spark, events), _dim_view(spark, dim)
    code, conflict = _cli_here("publish", f"twice-{db}")
    assert code == 4, conflict
    spark.catalog.refreshTable(events)
    assert (reader_view(spark, events), _dim_view(spark, dim)) == before
    record = _groups(ts_env).get(staged[0].group_id)
    assert record.state == "failed" and {m.state for m in record.members} == {"staged"}  # still publishable whole
    code, listed = _cli_here("staged", events)
    assert [x["group_id"] for x in listed["groups"]] == [staged[0].group_id]
    code, done = _cli_here("discard", f"twice-{db}")
    assert code == 0 and done["group_id"] == staged[0].group_id


# --------------------------------------------------------------------------- the janitor and a group's grace
def test_the_janitor_keeps_a_groups_displaced_data_until_the_groups_grace_ends(spark, db, tmp_path, hms, ts_env):
    """The grace of what a group displaced runs from the group's commit, the same for every member: a member
    committed earlier by ``recover`` (its own queue record due sooner) keeps its displaced data until then."""
    import datetime as dt

    from tableswap.core import locations as loc
    from tableswap.ops.janitor.run import run_janitor

    events, dim = _setup(spark, db, tmp_path)
    groups, journal = _groups(ts_env), Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    staged = {events: stage_partitions(batch_df(spark, {(today(1),): 5}, "g1"), events),
              dim: stage_table(_dim_df(spark, "g1"), dim)}
    group_id = f"g-grace-{db}"
    groups.create(group_id, None, "swap")
    for table, s in staged.items():
        groups.add_member(group_id, s.swap_id, *table.split("."))
    proc = _publish_in_process(group_id, ts_env, "group_between_flips")  # dim flipped, events not
    wait_or_kill(proc)
    for table in (events, dim):
        release_locks_of_killed_writer(hms, *table.split("."), proc)
    recover()  # commits each member as it finishes it, then the group
    record = groups.get(group_id)
    assert record.state == "committed"
    [gone] = [d for d in journal.deletions(db=db, table="events") if d.swap_id == staged[events].swap_id]
    displaced = Path(loc.to_local_path(gone.location))
    assert displaced.name == f"dt={today(1)}" and displaced.is_dir()
    own, group_at = (dt.datetime.fromisoformat(t) for t in (gone.queued_at, record.committed_at))
    assert own < group_at  # the member's own record is due before the group's grace ends
    grace = dt.timedelta(hours=1)

    # Past the member's own grace, within the group's: kept.
    kept = run_janitor(grace=grace, dry_run=False, table=events, now=own + grace + (group_at - own) / 2)

    assert displaced.is_dir(), kept.to_dict()
    assert [d.location for d in journal.deletions(db=db, table="events")] == [gone.location]
    done = run_janitor(grace=grace, dry_run=False, table=events, now=group_at + grace + dt.timedelta(seconds=1))
    assert not displaced.exists(), done.to_dict()


def test_a_group_publish_or_discard_dry_run_returns_each_tables_plan_and_changes_nothing(spark, db, tmp_path, hms,
                                                                                         ts_env):
    """docs/cli.md#dry-runs: `tableswap publish GROUP --dry-run` (publish_group(dry_run=True)) plans every member as
    the publish does and returns its GroupResult marked as a dry run; `tableswap discard GROUP --dry-run` names what
    it would drop and queue. Neither changes the metastore, the journal (the group and its members stay staged) or
    the storage; the publish then carries out the plan."""
    from tableswap import publish_group, stage_group

    events, dim = _setup(spark, db, tmp_path)
    with stage_group() as g:
        g.swap_partitions(batch_df(spark, {(today(1),): 5, (today(2),): 4}, "g1"), events)
        g.swap_table(_dim_df(spark, "g1"), dim)
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])

    def state() -> tuple:
        return (metastore_snapshot(hms, db), journal.list_swaps(db=db), _groups(ts_env).get(g.group_id),
                journal.deletions(db=db, states=("pending", "deleted", "refused", "restored")), file_tree(tmp_path))

    before = state()
    planned = publish_group(g.group_id, dry_run=True)
    code, printed = _cli_here("publish", g.group_id, "--dry-run")
    discard_code, discarding = _cli_here("discard", g.group_id, "--dry-run")

    assert isinstance(planned, GroupResult) and planned.dry_run and set(planned.results) == {events, dim}
    assert [c.partition for c in planned[events].added] == [f"dt={today(2)}"]
    assert [c.partition for c in planned[events].replaced] == [f"dt={today(1)}"]
    assert planned[dim].table_change is not None and all(r.dry_run for r in planned.results.values())
    assert code == 0 and printed["dry_run"] is True and set(printed["results"]) == {events, dim}, printed
    assert discard_code == 0 and discarding["dry_run"] is True and discarding["state"] == "staged", discarding
    assert set(discarding["queued"]) == {s.staging_location for s in g.staged.values()}
    assert set(discarding["temp_tables_dropped"]) == {s.staged_table for s in g.staged.values()}
    assert state() == before

    done = publish_group(g.group_id)
    assert not done.dry_run
    assert [(c.partition, c.old_location) for c in done[events].added + done[events].replaced] == [
        (c.partition, c.old_location) for c in planned[events].added + planned[events].replaced]
    assert done[dim].table_change.old_location == planned[dim].table_change.old_location
